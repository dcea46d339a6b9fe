"""Memory and edge commands through MemoryService, with real SQLite files.

Covers add (single and atomic batch), working-memory eviction, update,
merge, supersede, the archive/delete/restore state machine, rollback,
link/unlink, namespace undo, correlation revert, idempotent replays, tenant
isolation and tenant drop. The ``mnemolog`` commands that wrap them are in
``test_memory_cli``.
"""

from __future__ import annotations

import json

import pytest

from mnemolog.eventstore import IdempotencyConflict
from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.aggregate import load
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import Conflict, MemoryContent, NotFound, ValidationError
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.service import MemoryService


def ctx(tenant: str = "a", **kw) -> CommandContext:
    return CommandContext(tenant=tenant, **kw)


@pytest.fixture
def svc(tmp_path):
    service = MemoryService.open(tmp_path, settings=Settings({"working_memory_capacity": 3}))
    yield service
    service.close()


def add(svc, *texts, tenant="a", **kw):
    items = [MemoryContent(memory=t, **kw) for t in texts]
    return svc.run(svc.memories.add, ctx(tenant), items)


def live_edges(svc, tenant, *nodes):
    return {(e.edge_id, e.edge_type, e.source, e.target, e.weight) for n in nodes for e in svc.edges_of(tenant, n)}


def types_at(svc, result):
    return [r.type for r in svc.store.read_all(after=result.first_position - 1, until=result.last_position)]


# -- add ----------------------------------------------------------------------------------


def test_add_single_and_batch(svc):
    one = add(svc, "I live in Berlin", key="home city", tags=("Place", "place"))
    (m,) = one.memory_ids
    view = svc.get("a", m)
    assert (view.memory, view.key, view.tags, view.version, view.status) == ("I live in Berlin", "home city", ("place",), 1, "activated")
    batch = add(svc, "tea", "coffee", "water")
    assert len(set(batch.memory_ids)) == 3 and list(batch.positions) == [2, 3, 4, 5]  # 5: a working-memory eviction
    assert types_at(svc, batch) == ["MemoryAdded"] * 3 + ["WorkingMemoryEvicted"]
    assert [svc.get("a", i).memory for i in batch.memory_ids] == ["tea", "coffee", "water"]


@pytest.mark.parametrize(
    "items, field",
    [
        ([MemoryContent(memory="ok"), MemoryContent(memory="  ")], "memories[1].memory"),
        ([MemoryContent(memory="ok"), MemoryContent(memory="x", confidence=2.0)], "memories[1].confidence"),
        ([MemoryContent(memory="x", memory_type="TopicMemory"), MemoryContent(memory="y")], "memories[0].memory_type"),
        ([MemoryContent(memory="x", tags=("two words",))], "tags"),
    ],
)
def test_invalid_batch_writes_nothing(svc, items, field):
    add(svc, "before")
    head = svc.store.last_position()
    with pytest.raises(ValidationError) as err:
        svc.run(svc.memories.add, ctx(), items)
    assert err.value.field == field and str(err.value).startswith(field)
    assert svc.store.last_position() == head
    assert svc.runner.conn.execute("SELECT count(*) FROM graph_memories").fetchone()[0] == 1


def test_working_memory_fifo_evicts_and_archives_working_items(svc):
    w1, w2 = add(svc, "w1", "w2", memory_type="WorkingMemory").memory_ids
    (lt,) = add(svc, "lt").memory_ids
    assert [m for _, m, _ in svc.facts.working_memory("a")] == [w1, w2, lt]
    result = add(svc, "n1", "n2")
    assert result.data["evicted"] == 2
    evicted = [r.event for r in svc.store.read_stream(c.working_stream("a"))]
    assert [e.memory_ids for e in evicted] == [(w1, w2)] and evicted[0].capacity == 3
    assert [m for _, m, _ in svc.facts.working_memory("a")] == [lt, *result.memory_ids]
    for w in (w1, w2):
        assert svc.get("a", w).status == "archived"
        assert svc.history("a", w)[-1]["reason"] == "evicted from working memory"
    # A LongTermMemory leaving working memory stays activated; a deleted WorkingMemory item stays deleted.
    (w3,) = add(svc, "w3", memory_type="WorkingMemory").memory_ids
    svc.run(svc.memories.soft_delete, ctx(), w3)
    add(svc, "n3", "n4", "n5")
    assert svc.get("a", lt).status == "activated"
    assert svc.get("a", w3).status == "deleted"
    assert [h["status"] for h in svc.history("a", w3)] == ["activated", "deleted"]
    # Other tenants have their own FIFO.
    add(svc, "b1", tenant="b")
    assert len(svc.facts.working_memory("b")) == 1


def test_batch_larger_than_capacity_evicts_its_own_items(svc):
    ids = add(svc, *[f"w{i}" for i in range(5)], memory_type="WorkingMemory").memory_ids
    assert [m for _, m, _ in svc.facts.working_memory("a")] == list(ids[2:])
    assert [svc.get("a", i).status for i in ids] == ["archived"] * 2 + ["activated"] * 3


# -- content changes ---------------------------------------------------------------------


def test_update_makes_a_new_version_and_keeps_history(svc):
    (m,) = add(svc, "I live in Berlin", key="home", embedding=(0.1, 0.2) * (svc.embedding_dim // 2)).memory_ids
    first = svc.store.last_position()
    r = svc.run(svc.memories.update, ctx(), m, {"memory": "I live in Paris", "tags": ["moved"]}, expected_version=1)
    assert r.data == {"version": 2, "changed": ["memory", "tags"]}
    view = svc.get("a", m)
    assert (view.memory, view.tags, view.version, view.has_embedding) == ("I live in Paris", ("moved",), 2, False)
    assert svc.get("a", m, as_of=first).memory == "I live in Berlin"
    assert svc.get("a", m, as_of=svc.history("a", m)[0]["recorded_at"]).memory == "I live in Berlin"  # a time
    assert [(h["version"], h["memory"]) for h in svc.history("a", m)] == [(1, "I live in Berlin"), (2, "I live in Paris")]
    with pytest.raises(Conflict) as err:
        svc.run(svc.memories.update, ctx(), m, {"memory": "x"}, expected_version=1)
    assert err.value.current_version == 2
    head = svc.store.last_position()
    same = svc.run(svc.memories.update, ctx(), m, {"memory": "I live in Paris"})
    assert same.data == {"version": 2, "changed": []} and svc.store.last_position() == head
    for changes, field in (({"memory_type": "UserMemory"}, "memory_type"), ({"colour": 1}, "colour"), ({}, "changes"), ({"confidence": 5}, "confidence")):
        with pytest.raises(ValidationError) as verr:
            svc.run(svc.memories.update, ctx(), m, changes)
        assert verr.value.field == field
    svc.run(svc.memories.soft_delete, ctx(), m)
    with pytest.raises(Conflict):
        svc.run(svc.memories.update, ctx(), m, {"memory": "y"})


def test_merge_archives_sources_links_and_repoints(svc):
    a, b, other = svc.run(
        svc.memories.add,
        ctx(),
        [
            MemoryContent(memory="likes tea", tags=("drink",), sources=("chat-1",)),
            MemoryContent(memory="likes green tea a lot", tags=("tea",), sources=("chat-2",), key="drink"),
            MemoryContent(memory="tea shop"),
        ],
    ).memory_ids
    svc.run(svc.edges.link, ctx(), a, other, "RELATED", weight=0.5, edge_id="user:t:1")
    svc.run(svc.edges.link, ctx(), a, b, "RELATED", edge_id="user:t:2")
    r = svc.run(svc.memories.merge, ctx(), [a, b])
    merged = r.data["merged_id"]
    assert r.memory_ids == (merged,) and r.data["sources"] == [a, b] and r.data["repointed"] == 2
    view = svc.get("a", merged)
    assert (view.memory, view.key, view.status) == ("likes green tea a lot", "drink", "activated")
    assert view.tags == ("drink", "tea") and view.sources == ("chat-1", "chat-2")
    for source in (a, b):
        assert svc.get("a", source).status == "archived"
        assert load(svc.store, "a", source).merged_into == merged
        assert svc.history("a", source)[-1]["reason"] == f"merged into {merged}"
    edges = live_edges(svc, "a", merged)
    assert ("user:t:1", "RELATED", merged, other, 0.5) in edges  # re-pointed, same id
    assert {(s, t) for _, kind, s, t, _ in edges if kind == "MERGED_TO"} == {(a, merged), (b, merged)}
    assert not any(e[0] == "user:t:2" for e in edges)  # an edge between two sources would loop: removed
    assert live_edges(svc, "a", other) == {("user:t:1", "RELATED", merged, other, 0.5)}
    with pytest.raises(Conflict):
        svc.run(svc.memories.merge, ctx(), [a, other])
    with pytest.raises(ValidationError):
        svc.run(svc.memories.merge, ctx(), [other, other])
    with pytest.raises(ValidationError):
        svc.run(svc.memories.merge, ctx(), [other, merged], text=" ")
    assert svc.get("a", svc.run(svc.memories.merge, ctx(), [other, merged], text="tea it is").data["merged_id"]).memory == "tea it is"


def test_supersede_archives_the_older_with_reason_conflict(svc):
    old, new = add(svc, "lives in Berlin", "lives in Paris").memory_ids
    decision = c.Decision(judge="rules", reason="contradiction")
    svc.run(svc.memories.supersede, ctx(), old, new, decision=decision)
    assert svc.get("a", old).status == "archived" and svc.get("a", new).status == "activated"
    assert svc.history("a", old)[-1]["reason"].startswith(f"conflict: superseded by {new}")
    (edge,) = svc.edges_of("a", old)
    assert (edge.edge_type, edge.source, edge.target, edge.properties) == ("SUPERSEDED_BY", old, new, {"reason": "conflict"})
    with pytest.raises(Conflict):
        svc.run(svc.memories.supersede, ctx(), old, new)
    with pytest.raises(ValidationError):
        svc.run(svc.memories.supersede, ctx(), new, new)


def test_status_state_machine(svc):
    m, n = add(svc, "m", "n").memory_ids
    archive, delete, restore = svc.memories.archive, svc.memories.soft_delete, svc.memories.restore
    with pytest.raises(Conflict):
        svc.run(restore, ctx(), m)
    assert svc.run(archive, ctx(), m, reason="stale").data["version"] == 2
    with pytest.raises(Conflict) as err:
        svc.run(archive, ctx(), m)
    assert err.value.current_version == 2
    svc.run(delete, ctx(), m, evolve_to=n)
    assert svc.get("a", m).status == "deleted" and load(svc.store, "a", m).evolve_to == n
    with pytest.raises(Conflict):
        svc.run(delete, ctx(), m)
    with pytest.raises(Conflict):
        svc.run(archive, ctx(), m)
    svc.run(restore, ctx(), m)
    assert svc.get("a", m).status == "activated"
    with pytest.raises(NotFound):
        svc.run(delete, ctx(), m, evolve_to="no-such-memory")
    with pytest.raises(ValidationError):
        svc.run(delete, ctx(), m, evolve_to=m)
    with pytest.raises(Conflict):
        svc.run(archive, ctx(), m, expected_version=1)
    assert [h["status"] for h in svc.history("a", m)] == ["activated", "archived", "deleted", "activated"]
    assert svc.history("a", m)[1]["reason"] == "stale"


def test_rollback_restores_content_and_status(svc):
    (m,) = add(svc, "v1").memory_ids
    svc.run(svc.memories.update, ctx(), m, {"memory": "v2"})
    svc.run(svc.memories.archive, ctx(), m)
    r = svc.run(svc.memories.rollback, ctx(), m, 1)
    assert r.data["version"] == 4
    view = svc.get("a", m)
    assert (view.memory, view.status, view.version) == ("v1", "activated", 4)
    svc.run(svc.memories.rollback, ctx(), m, 3)
    assert (svc.get("a", m).memory, svc.get("a", m).status) == ("v2", "archived")
    with pytest.raises(Conflict):
        svc.run(svc.memories.rollback, ctx(), m, 5)
    with pytest.raises(ValidationError):
        svc.run(svc.memories.rollback, ctx(), m, 0)
    with pytest.raises(NotFound):  # a version the memory has not reached
        svc.run(svc.memories.rollback, ctx(), m, 6)


# -- edges ---------------------------------------------------------------------------------


def test_link_unlink_validation(svc):
    a, b = add(svc, "a", "b").memory_ids
    link = svc.edges.link
    for kwargs, field in (
        ({"weight": 1.5}, "weight"),
        ({"weight": -0.1}, "weight"),
        ({"weight": float("nan")}, "weight"),
        ({"edge_id": "plain-id"}, "edge_id"),
        ({"edge_id": "User:x:1"}, "edge_id"),
    ):
        with pytest.raises(ValidationError) as err:
            svc.run(link, ctx(), a, b, "RELATED", **kwargs)
        assert err.value.field == field
    with pytest.raises(ValidationError):
        svc.run(link, ctx(), a, b, "related")
    with pytest.raises(ValidationError):
        svc.run(link, ctx(), a, a, "RELATED")
    with pytest.raises(NotFound):
        svc.run(link, ctx(), a, "ghost", "RELATED")
    r = svc.run(link, ctx(), a, b, "RELATED", weight=0.25, edge_id="user:n:1")
    assert r.data["edge_ids"] == ["user:n:1"] and svc.neighbors("a", a)[0].score == 0.25
    with pytest.raises(Conflict):
        svc.run(link, ctx(), b, a, "RELATED", edge_id="user:n:1")
    svc.run(svc.edges.unlink, ctx(), "user:n:1")
    assert svc.edges_of("a", a) == []
    with pytest.raises(NotFound):
        svc.run(svc.edges.unlink, ctx(), "user:n:1")
    svc.run(link, ctx(), b, a, "RELATED", edge_id="user:n:1")  # the id is free again
    assert [(e.source, e.target) for e in svc.edges_of("a", a)] == [(b, a)]


def test_undo_namespace_removes_exactly_its_live_edges_and_is_revertable(svc):
    a, b, d = add(svc, "a", "b", "d").memory_ids
    svc.run(svc.edges.link_many, ctx(), [
        c.EdgeRecord(edge_id="mention:run1:1", edge_type="MENTIONS", source=a, target=b),
        c.EdgeRecord(edge_id="mention:run1:2", edge_type="MENTIONS", source=b, target=d, weight=0.5),
        c.EdgeRecord(edge_id="mention:run1:3", edge_type="MENTIONS", source=a, target=d),
        c.EdgeRecord(edge_id="mention:run2:1", edge_type="MENTIONS", source=a, target=d),
        c.EdgeRecord(edge_id="user:x:1", edge_type="RELATED", source=d, target=a),
    ])
    svc.run(svc.edges.unlink, ctx(), "mention:run1:3")
    before = live_edges(svc, "a", a, b, d)
    undo = svc.run(svc.edges.undo_namespace, ctx(), "mention:run1:", reason="bad run")
    assert undo.data["removed"] == 2
    after = live_edges(svc, "a", a, b, d)
    assert {e[0] for e in before - after} == {"mention:run1:1", "mention:run1:2"} and after <= before
    head = svc.store.last_position()
    assert svc.run(svc.edges.undo_namespace, ctx(), "mention:run1:").data["removed"] == 0
    assert svc.store.last_position() == head
    with pytest.raises(ValidationError):
        svc.run(svc.edges.undo_namespace, ctx(), "mention")
    svc.run(svc.reverts.revert, ctx(), undo.correlation_id)
    assert live_edges(svc, "a", a, b, d) == before


# -- revert ----------------------------------------------------------------------------------


def test_revert_a_bad_import_batch_once(svc):
    (keep,) = add(svc, "keep me").memory_ids
    imported = svc.run(svc.memories.add, ctx(correlation_id="import-7"), [MemoryContent(memory=f"junk {i}") for i in range(3)])
    svc.run(svc.edges.link, ctx(correlation_id="import-7"), imported.memory_ids[0], keep, "RELATED", edge_id="import:7:1")
    svc.run(svc.memories.update, ctx(correlation_id="import-7"), keep, {"tags": ["imported"]})
    r = svc.run(svc.reverts.revert, ctx(), "import-7")
    assert r.data["reverted"] == 6 and r.data["conflicts"] == [] and not r.data["forced"]  # the batch's eviction too
    assert [svc.get("a", m).status for m in imported.memory_ids] == ["deleted"] * 3
    assert [m for _, m, _ in svc.facts.working_memory("a")] == [keep]  # as before the batch
    assert svc.get("a", keep).tags == () and svc.get("a", keep).status == "activated"
    assert svc.edges_of("a", keep) == []
    head = svc.store.last_position()
    again = svc.run(svc.reverts.revert, ctx(), "import-7")
    assert again.data["already_reverted"] and svc.store.last_position() == head
    with pytest.raises(NotFound):
        svc.run(svc.reverts.revert, ctx(), "never-used")


def test_revert_refuses_conflicts_unless_forced(svc):
    first = add(svc, "v1")
    (m,) = first.memory_ids
    upd = svc.run(svc.memories.update, ctx(correlation_id="upd-1"), m, {"memory": "v2"})
    svc.run(svc.memories.update, ctx(), m, {"memory": "v3"})
    head = svc.store.last_position()
    with pytest.raises(Conflict) as err:
        svc.run(svc.reverts.revert, ctx(), "upd-1")
    message = str(err.value)
    assert "cannot revert upd-1" in message and m in message and "force" in message
    assert svc.store.last_position() == head
    forced = svc.run(svc.reverts.revert, ctx(), upd.correlation_id, force=True)
    assert forced.data["forced"] and len(forced.data["conflicts"]) == 1
    assert svc.get("a", m).memory == "v1"
    with pytest.raises(ValidationError):
        svc.run(svc.reverts.revert, ctx(correlation_id="self"), "self")


def test_revert_of_merge_and_of_a_revert(svc):
    a, b, d = add(svc, "a", "b", "d").memory_ids
    svc.run(svc.edges.link, ctx(), a, d, "RELATED", edge_id="user:m:1")
    before = {m: (svc.get("a", m).memory, svc.get("a", m).status) for m in (a, b, d)}
    edges_before = live_edges(svc, "a", a, b, d)
    merge = svc.run(svc.memories.merge, ctx(), [a, b])
    merged_edges = live_edges(svc, "a", a, b, d, merge.data["merged_id"])
    rv = svc.run(svc.reverts.revert, ctx(), merge.correlation_id)
    assert {m: (svc.get("a", m).memory, svc.get("a", m).status) for m in (a, b, d)} == before
    assert svc.get("a", merge.data["merged_id"]).status == "deleted"
    assert live_edges(svc, "a", a, b, d, merge.data["merged_id"]) == edges_before
    svc.run(svc.reverts.revert, ctx(), rv.correlation_id)  # undo the undo
    assert live_edges(svc, "a", a, b, d, merge.data["merged_id"]) == merged_edges
    assert svc.get("a", merge.data["merged_id"]).status == "activated" and svc.get("a", a).status == "archived"


# -- idempotency -----------------------------------------------------------------------------


def test_idempotent_replays_return_the_first_answer_and_write_nothing(svc):
    def twice(command, *args, key, **kwargs):
        first = svc.run(command, ctx(idempotency_key=key), *args, **kwargs)
        head = svc.store.last_position()
        again = svc.run(command, ctx(idempotency_key=key), *args, **kwargs)
        assert svc.store.last_position() == head
        assert again.replayed and not first.replayed
        assert (again.positions, again.memory_ids, again.correlation_id) == (first.positions, first.memory_ids, first.correlation_id)
        assert again.data == first.data
        return first

    a, b = twice(svc.memories.add, [MemoryContent(memory="a"), MemoryContent(memory="b")], key="k1").memory_ids
    twice(svc.memories.update, a, {"memory": "a2"}, key="k2", expected_version=1)
    twice(svc.edges.link, a, b, "RELATED", key="k3")
    twice(svc.memories.archive, a, key="k4")
    twice(svc.memories.restore, a, key="k5")
    merge = twice(svc.memories.merge, [a, b], key="k6")
    twice(svc.memories.rollback, a, 3, key="k7")  # the archived version: merged away, it stays out of recall
    twice(svc.reverts.revert, merge.correlation_id, key="k8", force=True)
    with pytest.raises(IdempotencyConflict):
        svc.run(svc.memories.add, ctx(idempotency_key="k1"), [MemoryContent(memory="something else")])
    # Keys are scoped by tenant: the same key in tenant b is a new request.
    assert not svc.run(svc.memories.add, ctx("b", idempotency_key="k1"), [MemoryContent(memory="a")]).replayed


# -- tenants -----------------------------------------------------------------------------------


def test_tenant_isolation(svc):
    a1, a2 = add(svc, "alice's", "alice's too").memory_ids
    svc.run(svc.edges.link, ctx("a", correlation_id="a-corr"), a1, a2, "RELATED", edge_id="user:a:1")
    (b1,) = add(svc, "bob's", tenant="b").memory_ids
    with pytest.raises(NotFound):
        svc.get("b", a1)
    with pytest.raises(NotFound):
        svc.history("b", a1)
    for command, args in (
        (svc.memories.update, (a1, {"memory": "stolen"})),
        (svc.memories.archive, (a1,)),
        (svc.memories.rollback, (a1, 1)),
        (svc.memories.merge, ([b1, a1],)),
        (svc.edges.link, (b1, a1, "RELATED")),
        (svc.edges.unlink, ("user:a:1",)),
        (svc.reverts.revert, ("a-corr",)),
    ):
        with pytest.raises(NotFound):
            svc.run(command, ctx("b"), *args)
    assert svc.edges_of("b", a1) == [] and svc.neighbors("b", a1) == []
    assert svc.run(svc.edges.undo_namespace, ctx("b"), "user:").data["removed"] == 0
    assert svc.get("a", a1).memory == "alice's" and len(svc.edges_of("a", a1)) == 1


def _tenant_rows(svc, tenant):
    conn = svc.runner.conn
    found = {}
    for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'checkpoints'"):
        columns = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
        if "tenant" in columns:
            found[table] = conn.execute(f'SELECT count(*) FROM "{table}" WHERE tenant = ?', (tenant,)).fetchone()[0]
    return found


def test_drop_tenant_backs_up_then_removes_it_everywhere(tmp_path):
    svc = MemoryService.open(tmp_path, settings=Settings({"backups_keep": 2}))
    a1, a2 = add(svc, "alice 1", "alice 2", tenant="alice").memory_ids
    svc.run(svc.edges.link, ctx("alice"), a1, a2, "RELATED", edge_id="user:a:1")
    (b1,) = add(svc, "bob 1", tenant="bob").memory_ids
    held = _tenant_rows(svc, "alice")
    assert held["graph_memories"] == 2 and held["graph_edges"] == 1
    r = svc.drop_tenant(ctx("alice"), reason="account closed")
    backup = tmp_path / r.data["backup"]
    lines = backup.read_text().splitlines()[1:-1]  # between the export's header and footer
    assert r.data["events_backed_up"] == len(lines) == 3 and {json.loads(x)["tenant"] for x in lines} == {"alice"}
    assert not any(_tenant_rows(svc, "alice").values())
    assert svc.get("bob", b1).memory == "bob 1"
    with pytest.raises(NotFound):
        svc.get("alice", a1)
    with pytest.raises(NotFound):
        svc.run(svc.memories.update, ctx("alice"), a1, {"memory": "back from the dead"})
    with pytest.raises(NotFound):
        svc.history("alice", a1)
    svc.runner.rebuild()
    assert not any(_tenant_rows(svc, "alice").values())
    (again,) = add(svc, "a fresh start", tenant="alice").memory_ids  # the name can be used again
    assert svc.get("alice", again).memory == "a fresh start"
    for tenant in ("bob", "alice"):
        svc.drop_tenant(ctx(tenant))
    add(svc, "once more", tenant="alice")
    svc.drop_tenant(ctx("alice"))
    kept = sorted(p.name for p in (tmp_path / "backups").glob("*.jsonl"))
    assert len(kept) == 3 and backup.name not in kept  # alice's last two, and bob's
    with pytest.raises(NotFound):
        svc.drop_tenant(ctx("nobody"))
    assert len(list((tmp_path / "backups").glob("*"))) == 3
    svc.close()


# -- versions, embeddings and topics -----------------------------------------------------------


def test_an_archived_memory_is_not_updated_until_restored(svc):
    """Archived, like deleted, is refused with the current version; nothing is appended."""
    (m,) = add(svc, "the spare key is under the blue pot").memory_ids
    svc.run(svc.memories.archive, ctx(), m, reason="stale")
    head = svc.store.last_position()
    with pytest.raises(Conflict) as err:
        svc.run(svc.memories.update, ctx(), m, {"memory": "the spare key is under the red pot"})
    assert "archived" in str(err.value) and "restore" in str(err.value)
    assert err.value.current_version == 2
    assert svc.store.last_position() == head
    assert svc.get("a", m).memory == "the spare key is under the blue pot"
    svc.run(svc.memories.restore, ctx(), m)
    assert svc.run(svc.memories.update, ctx(), m, {"memory": "the spare key is under the red pot"}).data["version"] == 4
    assert (svc.get("a", m).status, svc.get("a", m).memory) == ("activated", "the spare key is under the red pot")


@pytest.mark.parametrize("how", ["rollback", "revert"])
def test_a_version_brought_back_from_before_the_embedder_changed_is_embedded_afresh(tmp_path, how):
    """A caller embedding of the length of an embedder used before is no vector for the one in use: brought back by a
    rollback or a revert (as a merge keeps one), the text is embedded afresh, and semantic search finds it."""
    from mnemolog.projections.recall.searcher import RecallOptions

    def opened(embedder: str) -> MemoryService:
        return MemoryService.open(tmp_path, settings=Settings({"synchronous": "NORMAL", "embedder": embedder}, env={}))

    with opened("hashing") as svc:
        [m] = svc.run(svc.memories.add, ctx(), [MemoryContent(memory="the river bank at dawn", embedding=(0.1,) * svc.embedding_dim)]).memory_ids
        update = svc.run(svc.memories.update, ctx(), m, {"memory": "a quiet harbour"})
    with opened("hashing-v1-64") as svc:
        if how == "rollback":
            svc.run(svc.memories.rollback, ctx(), m, 1)
        else:
            svc.run(svc.reverts.revert, ctx(), update.correlation_id)
        back = load(svc.store, "a", m).content
        assert back.memory == "the river bank at dawn" and back.embedding is None and not svc.get("a", m).has_embedding
        found, states, _, _ = svc.searcher.channel_results("a", "the river bank at dawn", RecallOptions(limit=5, channels=("semantic",)))
        assert [memory_id for memory_id, _ in found["semantic"]] == [m], states["semantic"]


def test_a_merge_keeps_the_caller_embedding_of_the_text_it_keeps(svc):
    dim = svc.embedding_dim
    short, long_ = (0.5,) * dim, tuple(1.0 if i % 2 else 0.0 for i in range(dim))
    a, b = svc.run(
        svc.memories.add, ctx(), [MemoryContent(memory="likes tea", embedding=short), MemoryContent(memory="likes green tea a lot", embedding=long_)]
    ).memory_ids
    merged = svc.run(svc.memories.merge, ctx(), [a, b]).data["merged_id"]
    kept = load(svc.store, "a", merged).content
    assert kept.memory == "likes green tea a lot" and kept.embedding == pytest.approx(long_) and svc.get("a", merged).has_embedding
    # A text of the operator's own has no caller embedding: the embedder embeds it.
    c1, c2 = add(svc, "x one", "x two", embedding=short).memory_ids
    other = svc.run(svc.memories.merge, ctx(), [c1, c2], text="x one and two").data["merged_id"]
    assert load(svc.store, "a", other).content.embedding is None


def test_a_topic_merges_only_with_topics(svc):
    from mnemolog.eventstore.commands.topics import TopicCommands

    (note,) = add(svc, "a note about boats").memory_ids
    topics = TopicCommands(svc.store, svc.facts)
    svc.run(topics.organize, ctx(), add=[("topic-1", MemoryContent(memory="boats", memory_type="TopicMemory")), ("topic-2", MemoryContent(memory="sails", memory_type="TopicMemory"))])
    head = svc.store.last_position()
    for ids in ([note, "topic-1"], ["topic-1", note]):
        with pytest.raises(Conflict) as err:
            svc.run(svc.memories.merge, ctx(), ids)
        assert err.value.field == "memory_ids" and "topic-1 is a TopicMemory" in str(err.value)
    assert svc.store.last_position() == head
    merged = svc.run(svc.memories.merge, ctx(), ["topic-1", "topic-2"]).data["merged_id"]
    assert svc.get("a", merged).memory_type == "TopicMemory"
