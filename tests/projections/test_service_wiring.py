"""The service as composition root: one writer for every write, and reads through objects bound to the service."""

from __future__ import annotations

import threading

import pytest

from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent, ValidationError
from mnemolog.projections.entities import projector as ents
from mnemolog.projections.graph import reads as graph_reads


def ctx(tenant: str = "t", **kw) -> CommandContext:
    return CommandContext(tenant=tenant, **kw)


def add(svc, text: str, tenant: str = "t", **kw):
    return svc.run(svc.memories.add, ctx(tenant), [MemoryContent(memory=text, **kw)])


# -- the single writer ------------------------------------------------------------------------------------


def _blocked_while_the_writer_is_held(svc, write) -> tuple[bool, int, int]:
    """Run ``write`` on another thread while this one holds the writer: (finished meanwhile, head before, head while held)."""
    head = svc.store.last_position()
    done = threading.Event()

    def run() -> None:
        write()
        done.set()

    with svc.writer.lock:
        worker = threading.Thread(target=run)
        worker.start()
        finished = done.wait(0.5)
        position_while_held = svc.store.last_position()
    worker.join(30)
    assert done.is_set() and svc.store.last_position() > head
    return finished, head, position_while_held


def test_a_command_waits_while_the_writer_is_held(svc):
    finished, head, while_held = _blocked_while_the_writer_is_held(svc, lambda: add(svc, "written once the writer is free"))
    assert not finished and while_held == head


def test_an_append_straight_to_the_store_waits_for_the_writer_too(svc):
    """One lock serializes the process's writes: the store's appends take the writer's lock."""
    event = c.TenantDropped(backup="", events_backed_up=0, reason="test")
    finished, head, while_held = _blocked_while_the_writer_is_held(svc, lambda: svc.store.append(c.tenant_stream("scratch"), [event], tenant="scratch"))
    assert not finished and while_held == head


def test_writes_submitted_to_the_writer_run_on_its_one_thread_and_may_nest(svc):
    """The server's writes (``run_in_executor(svc.writer, ...)``) and a command inside them share the writer without deadlock."""
    threads = set()

    def nested() -> int:
        threads.add(threading.current_thread().name)
        result = add(svc, "nested in a submitted write")  # run() takes the writer again, on the same thread
        threads.add(threading.current_thread().name)
        return result.last_position

    positions = [svc.writer.submit(nested).result(timeout=30) for _ in range(3)]
    assert positions == sorted(positions) and len(set(positions)) == 3
    assert len(threads) == 1 and threading.current_thread().name not in threads
    assert svc.graph.memory("t", svc.store.read_all(after=positions[-1] - 1, limit=1)[0].event.memory_id) is not None


def test_run_catches_up_its_own_commits_even_when_the_command_fails_after_one(svc):
    """A command of ``run`` is marked as such on its thread only (a log follower is not woken for its
    commits), and ``run`` projects what it committed, also when the command raised afterwards."""
    seen: list[tuple[bool, bool]] = []

    def commits_then_fails(context: CommandContext) -> None:
        elsewhere: list[bool] = []
        probe = threading.Thread(target=lambda: elsewhere.append(svc.catches_up_own_commits()))
        probe.start()
        probe.join()
        seen.append((svc.catches_up_own_commits(), elsewhere[0]))
        svc.memories.add(context, [MemoryContent(memory="committed before the failure")])
        raise ValidationError("memory", "failed after committing")

    assert not svc.catches_up_own_commits()
    with pytest.raises(ValidationError):
        svc.run(commits_then_fails, ctx())
    assert seen == [(True, False)] and not svc.catches_up_own_commits()
    assert svc.position() == svc.store.last_position()  # projected although the command raised
    assert [m.memory for m in svc.graph.activated("t")] == ["committed before the failure"]
    add(svc, "a later write")
    assert not svc.catches_up_own_commits()


def test_after_a_write_run_projects_up_to_what_it_appended_without_asking_the_log_for_its_head(svc, monkeypatch):
    add(svc, "the first note")
    asked: list[int] = []
    head = svc.store.last_position

    def last_position() -> int:
        asked.append(1)
        return head()

    monkeypatch.setattr(svc.store, "last_position", last_position)
    written = add(svc, "the second note")
    assert len(asked) == 1  # the catch-up before the command; after it, its own last position is the target
    assert svc.position() == written.last_position == head()
    assert svc.get("t", written.memory_ids[0]).memory == "the second note"
    again = svc.run(svc.memories.add, ctx(idempotency_key="same-request-1"), [MemoryContent(memory="once")])
    asked.clear()
    replayed = svc.run(svc.memories.add, ctx(idempotency_key="same-request-1"), [MemoryContent(memory="once")])
    assert replayed.replayed and replayed.positions == again.positions
    assert len(asked) == 2  # nothing appended: the catch-up after asks for the head, as before


def test_a_tenant_drop_through_the_writer_thread(svc, tmp_path):
    add(svc, "to be dropped", tenant="gone")
    result = svc.writer.submit(svc.drop_tenant, ctx("gone"), reason="test").result(timeout=60)
    assert result.data["events_backed_up"] >= 1
    assert svc.graph.activated("gone") == []


def test_closing_the_service_stops_its_writer(tmp_path):
    from mnemolog.projections.service import MemoryService

    service = MemoryService.open(tmp_path / "data")
    service.close()
    with pytest.raises(RuntimeError):
        service.writer.submit(lambda: None)


# -- reads through objects ----------------------------------------------------------------------------------


def test_entity_reads_equal_the_projection_functions_at_every_position(svc):
    svc.run(svc.entities.upsert, ctx(), "ada", name="Ada Lovelace", tags="math,engine")
    svc.run(svc.entities.upsert, ctx(), "charles", name="Charles Babbage", aliases=["Babbage"], tags="engine")
    svc.run(svc.entities.set_relation, ctx(), "ada", "charles", "WORKED_WITH", weight=0.8)
    svc.run(svc.entities.upsert, ctx("other"), "ada", name="Ada of another tenant")
    svc.run(svc.entities.remove, ctx(), "charles")
    conn = svc.read_conn()
    for position in [*range(1, svc.store.last_position() + 1), None]:
        for tenant in ("t", "other"):
            assert svc.knowledge.get(tenant, "ada", as_of=position) == ents.get_entity(conn, tenant, "ada", as_of=position)
            assert svc.knowledge.find_by_keywords(tenant, "engine", as_of=position) == ents.find_by_keywords(conn, tenant, "engine", as_of=position)
            assert svc.knowledge.find_tags(tenant, "", as_of=position) == ents.find_tags(conn, tenant, "", as_of=position)
            assert svc.knowledge.relations_of(tenant, "ada", as_of=position) == ents.relations_of(conn, tenant, "ada", as_of=position)
            if svc.knowledge.get(tenant, "ada", as_of=position) is not None:
                assert svc.knowledge.related_walk(tenant, "ada", 2, "both", as_of=position)[0] == ents.get_related(conn, tenant, "ada", 2, "both", None, position)
    assert [e.id for e in svc.knowledge.find_by_keywords("other", "engine")] == []


def test_a_time_later_than_now_is_refused_though_a_write_commits_while_it_is_resolved(svc, monkeypatch):
    """The position at the time and the head were two reads: a write committed between them made the head pass the
    position, and the time to come was answered (with a position that changes once more is written by then)."""
    from datetime import datetime, timedelta, timezone

    from mnemolog.eventstore.model import Conflict

    svc.run(svc.memories.add, ctx(), [MemoryContent(memory="before")])
    head, calls = svc.store.last_position, []

    def written_meanwhile():
        calls.append(1)
        if len(calls) == 1:  # the head read apart from the position: a write commits before it
            monkeypatch.setattr(svc.store, "last_position", head)
            svc.run(svc.memories.add, ctx(), [MemoryContent(memory="meanwhile")])
        return head()

    monkeypatch.setattr(svc.store, "last_position", written_meanwhile)
    with pytest.raises(Conflict) as refused:
        svc.resolve_as_of(datetime.now(timezone.utc) + timedelta(minutes=5))
    assert refused.value.field == "as_of"


def test_reads_resolve_as_of_times_and_refuse_bad_ones(svc):
    first = svc.run(svc.entities.upsert, ctx(), "ada", name="Ada")
    at = svc.store.read_all(after=first.last_position - 1, limit=1)[0].recorded_at
    svc.run(svc.entities.upsert, ctx(), "ada", name="Ada Lovelace")
    assert svc.knowledge.get("t", "ada", as_of=at.isoformat()).name == "Ada"
    assert svc.knowledge.get("t", "ada").name == "Ada Lovelace"
    with pytest.raises(ValidationError) as refused:
        svc.knowledge.find_tags("t", as_of="yesterday")
    assert refused.value.field == "as_of"
    with pytest.raises(ValidationError):
        svc.graph.memory("t", "x", as_of=-1)


def test_graph_reads_list_versions_and_activated_memories_per_tenant(svc):
    first = add(svc, "Ada wrote the first program", properties={"truth": "a"})
    memory_id = first.memory_ids[0]
    svc.run(svc.memories.update, ctx(), memory_id, {"memory": "Ada wrote the first published program"})
    other = add(svc, "someone else's", tenant="u")
    archived = add(svc, "archived soon")
    svc.run(svc.memories.archive, ctx(), archived.memory_ids[0])
    versions = svc.graph.versions("t", memory_id)
    assert [v.version for v in versions] == [1, 2] and versions[0].properties == {"truth": "a"}
    assert versions[0].memory == "Ada wrote the first program" and versions[1].valid_to is None
    assert [m.id for m in svc.graph.activated("t")] == [memory_id]
    assert [m.id for m in svc.graph.activated("u")] == list(other.memory_ids)
    assert svc.graph.versions("u", memory_id) == []
    conn = svc.read_conn()
    assert svc.graph.stats("t") == graph_reads.graph_stats(conn, "t")
    assert svc.graph.memories("t", [memory_id], as_of=first.last_position)[memory_id].version == 1


def test_linking_reads_and_relinks_through_the_service(svc):
    add(svc, "Ada Lovelace wrote notes", memory_type="RawFileMemory")  # before the entity: the add links nothing
    svc.run(svc.entities.upsert, ctx(), "ada", name="Ada Lovelace")
    assert svc.linking.relation_cards("t", "what did Ada Lovelace do?")["matched"]
    assert not svc.linking.relation_cards("u", "what did Ada Lovelace do?")["matched"]
    planned = svc.linking.relink(ctx())
    assert planned["dry_run"] is True and planned["add"] == 1
    committed = svc.linking.relink(ctx(), commit=True)
    assert [(e.target, e.edge_id.startswith(committed["prefix"])) for e in svc.linking.live_mentions("t")] == [("ada", True)]
    assert svc.linking.live_mentions("t", as_of=committed["positions"][0] - 1) == []


def test_readers_are_told_only_a_committed_position(svc):
    """A batch whose checkpoint is written but not committed is not yet readable: no reader may be told it is."""
    add(svc, "one memory")
    committed = svc.position()
    assert committed == svc.store.last_position()
    with svc.writer.lock:
        svc.runner.conn.execute("BEGIN IMMEDIATE")
        try:
            svc.runner.conn.execute("UPDATE checkpoints SET position = position + 5")
            seen = {}
            reader = threading.Thread(target=lambda: seen.update(position=svc.position()))
            reader.start()
            reader.join(30)
        finally:
            svc.runner.conn.execute("ROLLBACK")
    assert seen["position"] == committed
