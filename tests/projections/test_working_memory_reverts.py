"""Working memory under reverts: never beyond its capacity, and its churn is no conflict.

A revert that puts evicted or withdrawn entries back between live ones
evicts the oldest entries beyond the capacity (``WorkingMemoryEvicted``, a
``WorkingMemory`` item archived with it, on top of the revert's own rollback
of it), and an entry the FIFO evicted after the request that put it in does
not block reverting that request. Every state equals a rebuild of the
projections.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings as hsettings
from hypothesis import strategies as st

from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import Conflict, MemoryContent, NotFound, ValidationError
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.graph import reads as graph_reads
from mnemolog.projections.service import MemoryService
from tests.projections.support import dump_table

T = "t1"
CAPACITY = 3
WORKING = "WorkingMemory"


def ctx() -> CommandContext:
    return CommandContext(tenant=T)


SETTINGS = Settings({"working_memory_capacity": CAPACITY}, env={})


def open_service(path) -> MemoryService:
    return MemoryService.open(path, settings=SETTINGS)


@pytest.fixture
def settings():
    """The capacity these tests fill (the conftest's ``svc`` opens the service with it)."""
    return SETTINGS


def add(svc, text: str, memory_type: str = "LongTermMemory"):
    return svc.run(svc.memories.add, ctx(), [MemoryContent(memory=text, memory_type=memory_type)])


def fifo(svc) -> list[str]:
    return [e.memory_id for e in graph_reads.working_memory(svc.read_conn(), T)]


def status(svc, memory_id: str) -> str:
    return svc.history(T, memory_id)[-1]["status"]


def evictions(svc) -> list[c.WorkingMemoryEvicted]:
    return [r.event for r in svc.store.read_all(tenant=T, types=["WorkingMemoryEvicted"])]


def mentioned(svc, memory_id: str) -> set[str]:
    return {e.target for e in svc.graph.edges_of(T, memory_id, direction="out", edge_types=["MENTIONS"])}


def check(svc) -> None:
    """At most the capacity; a WorkingMemory item in working memory only while activated, and while activated only
    there; only an activated memory mentions an entity; a rebuild equals it."""
    entries = graph_reads.working_memory(svc.read_conn(), T)
    assert len(entries) <= CAPACITY
    for entry in entries:
        assert status(svc, entry.memory_id) == "activated", entry
    held = {e.memory_id for e in entries}
    items = svc.runner.conn.execute("SELECT memory_id FROM graph_memories WHERE tenant = ? AND memory_type = ? AND status = 'activated' AND valid_to IS NULL", (T, WORKING))
    for (memory_id,) in items.fetchall():
        assert memory_id in held, f"WorkingMemory item {memory_id} activated outside working memory"
    live = svc.runner.conn.execute("SELECT source FROM graph_edges WHERE tenant = ? AND edge_type = 'MENTIONS' AND valid_to IS NULL", (T,))
    for (source,) in live.fetchall():
        assert status(svc, source) == "activated", source
    before = dump_table(svc.runner.conn, "graph_working"), dump_table(svc.runner.conn, "graph_memories")
    svc.runner.rebuild(["graph"])
    assert (dump_table(svc.runner.conn, "graph_working"), dump_table(svc.runner.conn, "graph_memories")) == before


def test_a_revert_that_restores_an_entry_between_live_ones_evicts_the_oldest(svc):
    a = add(svc, "a note", WORKING).memory_ids[0]
    b = add(svc, "b note").memory_ids[0]
    c_ = add(svc, "c note").memory_ids[0]
    archive = svc.run(svc.memories.archive, ctx(), b)
    d = add(svc, "d note").memory_ids[0]
    assert fifo(svc) == [a, c_, d]  # full
    svc.run(svc.reverts.revert, ctx(), archive.correlation_id)
    assert fifo(svc) == [b, c_, d]  # b at its place; the oldest left, as an add evicts
    assert evictions(svc)[-1].memory_ids == (a,) and evictions(svc)[-1].capacity == CAPACITY
    assert status(svc, a) == "archived" and svc.history(T, a)[-1]["reason"] == "evicted from working memory"
    check(svc)


def test_an_item_the_revert_rolls_back_and_evicts_is_archived_on_top_of_its_rollback(svc):
    a = add(svc, "a note", WORKING).memory_ids[0]
    b = add(svc, "b note", WORKING).memory_ids[0]
    c_ = add(svc, "c note").memory_ids[0]
    merge = svc.run(svc.memories.merge, ctx(), [b, c_], text="b and c")  # b and c out, the merged one at c's place
    (merged,) = [r.event.memory_id for r in svc.store.read_all(tenant=T, types=["MemoriesMerged"])]
    x = add(svc, "x note").memory_ids[0]
    y = add(svc, "y note").memory_ids[0]
    assert fifo(svc) == [merged, x, y] and status(svc, a) == "archived"  # a evicted (and archived) by the FIFO
    svc.run(svc.reverts.revert, ctx(), merge.correlation_id, force=True)
    assert fifo(svc) == [c_, x, y]  # b and c back at their places, b the oldest beyond the capacity
    assert status(svc, b) == "archived" and svc.history(T, b)[-1]["reason"] == "evicted from working memory"
    check(svc)


def test_a_live_item_the_revert_rolls_back_and_then_evicts_gets_both_in_one_write(svc):
    a = add(svc, "a note", WORKING).memory_ids[0]
    b = add(svc, "b note").memory_ids[0]
    c_ = add(svc, "c note").memory_ids[0]
    both = CommandContext(tenant=T, correlation_id="both")
    svc.run(svc.memories.update, both, a, {"memory": "a note, changed"})
    svc.run(svc.memories.archive, both, b)
    d = add(svc, "d note").memory_ids[0]
    assert fifo(svc) == [a, c_, d]
    svc.run(svc.reverts.revert, ctx(), "both")
    assert fifo(svc) == [b, c_, d]
    last = svc.history(T, a)[-1]
    assert (last["status"], last["memory"], last["reason"]) == ("archived", "a note", "evicted from working memory")
    assert svc.history(T, a)[-2]["memory"] == "a note"  # its rollback, then its archive, in one write
    check(svc)


def test_a_dry_run_names_every_memory_the_revert_then_writes_and_whether_it_forces(svc):
    """The dry run says what the revert does: the WorkingMemory item its restore evicts (and archives) among the
    memories it touches, and ``forced`` as the forced revert then reports it."""
    a = add(svc, "a note", WORKING).memory_ids[0]
    b = add(svc, "b note").memory_ids[0]
    c_ = add(svc, "c note").memory_ids[0]
    archive = svc.run(svc.memories.archive, ctx(), b)
    add(svc, "d note")
    head = svc.store.last_position()
    dry = svc.run(svc.reverts.revert, ctx(), archive.correlation_id, dry_run=True)
    assert svc.store.last_position() == head
    done = svc.run(svc.reverts.revert, ctx(), archive.correlation_id)
    assert status(svc, a) == "archived"  # evicted by the revert's restore of b
    assert sorted(dry.memory_ids) == sorted(set(done.memory_ids)) == sorted([a, b])
    assert (dry.data["would_revert"], dry.data["conflicts"], dry.data["forced"]) == (done.data["reverted"], done.data["conflicts"], done.data["forced"])
    # A revert with conflicts, forced: the dry run of the same request says it would force them.
    update = svc.run(svc.memories.update, ctx(), c_, {"memory": "c note, changed"})
    svc.run(svc.memories.update, ctx(), c_, {"memory": "c note, changed again"})
    dry = svc.run(svc.reverts.revert, ctx(), update.correlation_id, force=True, dry_run=True)
    done = svc.run(svc.reverts.revert, ctx(), update.correlation_id, force=True)
    assert done.data["forced"] and done.data["conflicts"]
    assert (dry.data["would_revert"], dry.data["conflicts"], dry.data["forced"]) == (done.data["reverted"], done.data["conflicts"], done.data["forced"])
    assert sorted(dry.memory_ids) == sorted(set(done.memory_ids))
    check(svc)


@pytest.mark.parametrize("how", ["restore", "rollback", "revert"])
def test_an_item_evicted_when_an_entry_comes_back_leaves_its_mentions(svc, how):
    svc.run(svc.entities.upsert, ctx(), "acme", name="Acme Corp")
    w = add(svc, "Acme Corp call at noon", WORKING).memory_ids[0]
    b = add(svc, "b note").memory_ids[0]
    archive = svc.run(svc.memories.archive, ctx(), b)
    c_, d = add(svc, "c note").memory_ids[0], add(svc, "d note").memory_ids[0]
    assert fifo(svc) == [w, c_, d] and mentioned(svc, w) == {"acme"}
    if how == "restore":
        svc.run(svc.memories.restore, ctx(), b)
    elif how == "rollback":
        svc.run(svc.memories.rollback, ctx(), b, 1)
    else:
        svc.run(svc.reverts.revert, ctx(), archive.correlation_id)
    assert fifo(svc) == [b, c_, d]  # b back at its place, w the oldest beyond the capacity: archived
    assert status(svc, w) == "archived" and mentioned(svc, w) == set()
    check(svc)


def test_an_item_a_revert_brings_back_beyond_the_capacity_gets_no_mentions_back(svc):
    svc.run(svc.entities.upsert, ctx(), "acme", name="Acme Corp")
    w = add(svc, "Acme Corp call at noon", WORKING).memory_ids[0]
    archive = svc.run(svc.memories.archive, ctx(), w)  # its mention unlinked, its entry withdrawn
    others = [add(svc, f"note {i}").memory_ids[0] for i in range(3)]
    svc.run(svc.reverts.revert, ctx(), archive.correlation_id)  # rolled back, and archived again: its place is beyond the capacity
    assert fifo(svc) == others and status(svc, w) == "archived" and mentioned(svc, w) == set()
    check(svc)


def test_an_entry_the_fifo_evicted_later_is_no_conflict_of_a_revert(svc):
    first = add(svc, "w note", WORKING)
    w = first.memory_ids[0]
    long_term = add(svc, "l note")
    others = [add(svc, f"note {i}").memory_ids[0] for i in range(3)]
    assert fifo(svc) == others  # the FIFO moved on: w archived with its eviction, l evicted
    assert status(svc, w) == "archived"
    dry = svc.run(svc.reverts.revert, ctx(), first.correlation_id, dry_run=True)
    assert dry.data["conflicts"] == []
    done = svc.run(svc.reverts.revert, ctx(), first.correlation_id)
    assert done.data["conflicts"] == [] and not done.data["forced"]
    assert status(svc, w) == "deleted" and fifo(svc) == others
    svc.run(svc.reverts.revert, ctx(), long_term.correlation_id)
    assert fifo(svc) == others
    check(svc)


def test_an_update_of_an_item_the_fifo_evicted_later_rolls_back_its_text_and_it_stays_out(svc):
    w = add(svc, "w note", WORKING).memory_ids[0]
    update = svc.run(svc.memories.update, ctx(), w, {"memory": "w note, changed"})
    others = [add(svc, f"note {i}").memory_ids[0] for i in range(3)]
    assert status(svc, w) == "archived"
    done = svc.run(svc.reverts.revert, ctx(), update.correlation_id)
    assert done.data["conflicts"] == []
    last = svc.history(T, w)[-1]
    assert last["status"] == "archived" and last["memory"] == "w note" and fifo(svc) == others
    check(svc)


def test_a_real_change_by_another_request_after_an_eviction_still_is_a_conflict(svc):
    first = add(svc, "w note", WORKING)
    w = first.memory_ids[0]
    [add(svc, f"note {i}") for i in range(3)]
    svc.run(svc.memories.soft_delete, ctx(), w)  # evicted by the FIFO (archived), then deleted by another request
    dry = svc.run(svc.reverts.revert, ctx(), first.correlation_id, dry_run=True)
    assert any(f"memory {w}" in conflict for conflict in dry.data["conflicts"])


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from(["LongTermMemory", WORKING]), st.integers(1, 2)),
        st.tuples(st.just("merge"), st.integers(0, 5), st.integers(0, 5)),
        st.tuples(st.just("archive"), st.integers(0, 5)),
        st.tuples(st.just("restore"), st.integers(0, 5)),
        st.tuples(st.just("revert"), st.integers(0, 3), st.booleans()),
    ),
    min_size=1,
    max_size=20,
)


@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=OPS)
@example(ops=[("add", "LongTermMemory", 2), ("add", WORKING, 1), ("archive", 1), ("add", "LongTermMemory", 1), ("revert", 1, False)])
@example(ops=[("add", WORKING, 1), ("add", WORKING, 1), ("add", "LongTermMemory", 1), ("merge", 0, 1), ("add", "LongTermMemory", 2), ("revert", 2, True)])
@example(ops=[("add", "LongTermMemory", 1), ("archive", 0), ("restore", 0), ("revert", 1, True), ("revert", 1, True)])  # archive, restore, revert both
# A forced revert of the first restore of two takes the memory back to archived: the mentions the second linked end with it.
@example(ops=[("add", "LongTermMemory", 1), ("archive", 0), ("restore", 0), ("archive", 0), ("add", "LongTermMemory", 1), ("restore", 1), ("revert", 3, True)])
# A revert of a restore takes the memory back to archived after another revert put it back in working memory: it leaves.
@example(ops=[("add", "LongTermMemory", 1)] * 4 + [("archive", 3), ("restore", 3), ("revert", 2, False), ("revert", 1, False)])
def test_working_memory_never_holds_more_than_its_capacity(tmp_path_factory, ops):
    svc = open_service(tmp_path_factory.mktemp("wm") / "data")
    svc.run(svc.entities.upsert, ctx(), "topic", name="topic")  # every note mentions it
    memories: list[str] = []
    requests: list[str] = []
    try:
        for n, op in enumerate(ops):
            pick = lambda i, seq: seq[-1 - i % len(seq)]  # noqa: E731  (the newest are the likeliest in working memory)
            try:
                if op[0] == "add":
                    items = [MemoryContent(memory=f"note {n}.{i} about topic {n * 7 + i}", memory_type=op[1]) for i in range(op[2])]
                    result = svc.run(svc.memories.add, ctx(), items)
                    memories += result.memory_ids
                elif op[0] == "merge" and len(memories) >= 2:
                    a, b = pick(op[1], memories), pick(op[2], memories)
                    if a == b:
                        continue
                    result = svc.run(svc.memories.merge, ctx(), [a, b], text=f"merged {n}")
                    memories += result.memory_ids[-1:]
                elif op[0] in ("archive", "restore") and memories:
                    result = svc.run(getattr(svc.memories, op[0]), ctx(), pick(op[1], memories))
                elif op[0] == "revert" and requests:
                    result = svc.run(svc.reverts.revert, ctx(), pick(op[1], requests), force=op[2])
                else:
                    continue
            except (Conflict, NotFound, ValidationError):  # a refusal (or a request that wrote nothing) leaves the state as it was
                check(svc)
                continue
            requests.append(result.correlation_id)
            check(svc)
    finally:
        svc.close()


@pytest.mark.parametrize("how", ["restore", "rollback"])
def test_an_item_the_fifo_evicted_is_not_activated_again_outside_working_memory(svc, how):
    """A WorkingMemory item lives only in working memory: a restore (or a rollback to an activated version) of one the
    FIFO evicted was answered and left it activated outside working memory; it is refused, and nothing is written."""
    w = add(svc, "w note", WORKING).memory_ids[0]
    [add(svc, f"note {i}") for i in range(CAPACITY)]
    assert w not in fifo(svc) and status(svc, w) == "archived"
    head = svc.store.last_position()
    with pytest.raises(Conflict, match="lives only in working memory"):
        if how == "restore":
            svc.run(svc.memories.restore, ctx(), w)
        else:
            svc.run(svc.memories.rollback, ctx(), w, 1)
    assert svc.store.last_position() == head and status(svc, w) == "archived"
    # One archived by hand, whose place the capacity still holds, comes back to it.
    v = add(svc, "v note", WORKING).memory_ids[0]
    svc.run(svc.memories.archive, ctx(), v)
    svc.run(svc.memories.restore, ctx(), v)
    assert status(svc, v) == "activated" and v in fifo(svc)
    check(svc)
