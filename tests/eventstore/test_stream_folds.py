"""Long streams' folded states held per process: continued from the log, never stale.

Two services on one data directory stand for two processes: each store holds
its own folds, so what one appends, forgets or drops the other must see at its
next load, whatever it holds.
"""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.aggregate import fold, load
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.commands.entities import load_entity
from mnemolog.eventstore.model import MemoryContent, NotFound
from mnemolog.eventstore.sealing import ERASED_TEXT
from mnemolog.eventstore.settings import Settings
from mnemolog.eventstore.stream_folds import MIN_EVENTS, folds_of
from mnemolog.projections import text_caches
from mnemolog.projections.service import MemoryService

CTX = CommandContext(tenant="t")
SECRET = "Ottoline Brackwater keeps bees"


@pytest.fixture(autouse=True)
def apart(monkeypatch):
    """The process that applies a forget empties its caches of text; here that would empty the other service's
    too, which another process keeps."""
    monkeypatch.setattr(text_caches, "drop", lambda: None)


@pytest.fixture
def pair(tmp_path):
    one, two = MemoryService.open(tmp_path), MemoryService.open(tmp_path)
    yield one, two
    two.close()
    one.close()


def _long_memory(svc: MemoryService, versions: int = MIN_EVENTS + 6, subject: str | None = None) -> str:
    memory_id = svc.run(svc.memories.add, CTX, [MemoryContent(memory=f"{SECRET} 0", subject=subject)]).memory_ids[0]
    for i in range(1, versions):
        svc.run(svc.memories.update, CTX, memory_id, {"memory": f"{SECRET} {i}"})
    return memory_id


def _whole(svc: MemoryService, memory_id: str):
    """The state folded from the whole stream, nothing held."""
    return fold(memory_id, svc.store.read_stream(c.memory_stream(memory_id)))


def test_a_long_stream_is_held_and_continued_with_another_process_s_appends(pair):
    one, two = pair
    memory_id = _long_memory(one)
    assert load(one.store, "t", memory_id).version == MIN_EVENTS + 6
    assert len(folds_of(one.store)) == 1
    reads = []
    real = one.store.read_stream
    one.store.read_stream = lambda stream, from_version=1, to_version=None: reads.append(from_version) or real(stream, from_version, to_version)
    two.run(two.memories.update, CTX, memory_id, {"memory": "moved to the coast"})
    state = load(one.store, "t", memory_id)
    assert reads == [MIN_EVENTS + 6]  # the held version and what came after it, not the stream from its start
    assert state.content.memory == "moved to the coast" and state.version == MIN_EVENTS + 7
    assert state == _whole(one, memory_id)


def test_a_short_stream_is_read_whole_and_not_held(pair):
    one, _ = pair
    memory_id = _long_memory(one, versions=3)
    load(one.store, "t", memory_id)
    assert len(folds_of(one.store)) == 0


def test_what_a_load_returns_is_a_copy(pair):
    one, _ = pair
    memory_id = _long_memory(one)
    load(one.store, "t", memory_id)
    first = load(one.store, "t", memory_id)  # from what is held
    first.versions.clear()
    first.status = "deleted"
    again = load(one.store, "t", memory_id)
    assert len(again.versions) == MIN_EVENTS + 6 and again.status == "activated"


def test_another_process_s_forget_erases_a_held_state(pair):
    one, two = pair
    memory_id = _long_memory(one, subject="u-7")
    assert SECRET in load(one.store, "t", memory_id).content.memory
    two.forget(CommandContext(tenant="t", actor="dpo"), "u-7")
    state = load(one.store, "t", memory_id)
    assert state.content.memory == ERASED_TEXT
    assert not any(SECRET in (v.content.memory or "") for v in state.versions)


def test_a_forget_of_memories_no_key_sealed_erases_a_held_state(tmp_path):
    """Written with encryption off, the forget destroys no key: the forget naming the memory is what tells."""
    plain = Settings({"encryption": "off"}, env={})
    one, two = MemoryService.open(tmp_path, settings=plain), MemoryService.open(tmp_path, settings=plain)
    try:
        memory_id = _long_memory(one, subject="u-9")
        assert SECRET in load(one.store, "t", memory_id).content.memory
        two.forget(CommandContext(tenant="t", actor="dpo"), "u-9")
        assert load(one.store, "t", memory_id).content.memory == ERASED_TEXT
    finally:
        two.close()
        one.close()


def test_a_key_forgotten_elsewhere_before_any_event_says_so_is_not_read_from_a_held_state(pair):
    """A forget destroys its keys after appending its event; the state held may have been read in between."""
    one, two = pair
    memory_id = _long_memory(one, subject="u-8")
    assert SECRET in load(one.store, "t", memory_id).content.memory
    two.store.sealer.keys.forget(two.store.sealer.keys.subject_keys("t", "u-8"))  # no event in the log: only the key gone
    assert load(one.store, "t", memory_id).content.memory == ERASED_TEXT


def test_another_process_s_tenant_drop_ends_a_held_memory(pair):
    one, two = pair
    memory_id = _long_memory(one)
    load(one.store, "t", memory_id)
    two.drop_tenant(CTX)
    with pytest.raises(NotFound):
        load(one.store, "t", memory_id)


def test_a_held_state_whose_last_event_is_gone_is_folded_again(pair):
    one, _ = pair
    memory_id = _long_memory(one)
    load(one.store, "t", memory_id)
    held = folds_of(one.store)._held[("t", c.memory_stream(memory_id))]
    held.state = msgspec.structs.replace(held.state, status="deleted")  # what a state from another log would say
    held.event_id = "not-this-log"
    assert load(one.store, "t", memory_id).status == "activated"


def test_a_held_state_is_per_tenant(pair):
    one, _ = pair
    memory_id = _long_memory(one)
    load(one.store, "t", memory_id)
    with pytest.raises(NotFound):
        load(one.store, "other", memory_id)
    assert load(one.store, "t", memory_id).version == MIN_EVENTS + 6


def test_an_entity_s_relations_held_and_continued(pair):
    one, two = pair
    one.run(one.entities.upsert, CTX, "me", name="Me")
    targets = [f"x{i}" for i in range(MIN_EVENTS + 2)]
    for t in targets:
        one.run(one.entities.upsert, CTX, t, name=f"Thing {t}")
        one.run(one.entities.set_relation, CTX, "me", t, "KNOWS")
    assert len(load_entity(one.store, "t", "me").relations) == len(targets)
    two.run(two.entities.remove_relation, CTX, "me", "x0", "KNOWS")
    two.run(two.entities.set_relation, CTX, "me", "x1", "LIKES", weight=0.5)
    state = load_entity(one.store, "t", "me")
    assert ("x0", "KNOWS") not in state.relations and state.relations[("x1", "LIKES")] == 0.5
    state.relations.clear()  # a copy
    assert len(load_entity(one.store, "t", "me").relations) == len(targets)
    two.run(two.entities.remove, CTX, "me")
    assert not load_entity(one.store, "t", "me").active


OPS = st.lists(
    st.sampled_from(["update", "archive", "restore", "rollback", "relate", "unrelate", "elsewhere"]), min_size=1, max_size=30
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_held_states_equal_whole_folds_after_any_commands(tmp_path_factory, ops):
    """With every stream held, a load after any sequence of commands, from either process, equals a fold of the whole stream."""
    path = tmp_path_factory.mktemp("folds")
    one, two = MemoryService.open(path), MemoryService.open(path)
    try:
        folds_of(one.store).min_events = 1
        memory_id = one.run(one.memories.add, CTX, [MemoryContent(memory="a first version")]).memory_ids[0]
        for svc in (one, two):
            svc.run(svc.entities.upsert, CTX, "me", name="Me")
        for i, op in enumerate(ops):
            svc = two if op == "elsewhere" or i % 3 == 2 else one
            state = load(svc.store, "t", memory_id)
            if op in ("update", "elsewhere") and state.status == "activated":
                svc.run(svc.memories.update, CTX, memory_id, {"memory": f"version {i}"})
            elif op == "archive" and state.status == "activated":
                svc.run(svc.memories.archive, CTX, memory_id)
            elif op == "restore" and state.status != "activated":
                svc.run(svc.memories.restore, CTX, memory_id)
            elif op == "rollback" and state.version > 1:
                svc.run(svc.memories.rollback, CTX, memory_id, 1)
            elif op == "relate":
                svc.run(svc.entities.upsert, CTX, f"x{i}", name=f"Thing {i}")
                svc.run(svc.entities.set_relation, CTX, "me", f"x{i}", "KNOWS", weight=0.5)
            elif op == "unrelate" and (related := load_entity(svc.store, "t", "me").relations):
                target, rtype = sorted(related)[0]
                svc.run(svc.entities.remove_relation, CTX, "me", target, rtype)
            assert load(one.store, "t", memory_id) == _whole(one, memory_id)
            folds_of(two.store).drop_text()  # the other reads the whole stream: the truth to compare with
            assert load_entity(one.store, "t", "me") == load_entity(two.store, "t", "me")
    finally:
        two.close()
        one.close()


def test_a_fold_read_before_a_forget_s_drop_is_not_held(pair):
    """A load that read the stream, then saw the process drop its caches of text before it could hold the state,
    holds nothing: the drop came for the text it read."""
    one, _ = pair
    memory_id = _long_memory(one)
    folds = folds_of(one.store)
    folds.drop_text()
    real = one.store.read_stream

    def read_then_drop(stream, from_version=1, to_version=None):
        events = real(stream, from_version, to_version)
        folds.drop_text()  # a forget applied meanwhile, in another thread
        return events

    one.store.read_stream = read_then_drop
    assert load(one.store, "t", memory_id).version == MIN_EVENTS + 6
    assert len(folds) == 0


def test_what_is_held_is_weighed_whole_properties_and_embeddings_too(tmp_path):
    """Every version keeps its whole content: a large ``properties`` carried by each version was held unweighed,
    so a process held many times its limit."""
    import gc
    import tracemalloc

    with MemoryService.open(tmp_path) as svc:
        props = {f"k{i}": "x" * 200 for i in range(100)}
        [memory_id] = svc.run(svc.memories.add, CTX, [MemoryContent(memory="v0", properties=props)]).memory_ids
        for i in range(1, MIN_EVENTS + 6):
            svc.run(svc.memories.update, CTX, memory_id, {"memory": f"v{i}"})
        folds = folds_of(svc.store)
        folds.drop_text()
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.take_snapshot()
            load(svc.store, "t", memory_id)
            gc.collect()
            kept = sum(stat.size_diff for stat in tracemalloc.take_snapshot().compare_to(before, "filename"))
        finally:
            tracemalloc.stop()
        assert len(folds) == 1 and kept > (MIN_EVENTS + 6) * 20_000  # each version holds its 20 kB of properties
        assert folds._weight >= kept
        folds.max_weight = kept // 2  # past the limit: nothing is held
        folds.drop_text()
        load(svc.store, "t", memory_id)
        assert len(folds) == 0 and folds._weight == 0
