"""Reverts of reverts, sessions that span several requests, and undo-namespace by whole segments,
through MemoryService over real SQLite files."""

from __future__ import annotations

import pytest

from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.model import Conflict, MemoryContent, NotFound, ValidationError
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.service import MemoryService

from tests.projections.test_memory_commands import add, ctx


@pytest.fixture
def svc(tmp_path):
    service = MemoryService.open(tmp_path, settings=Settings({"working_memory_capacity": 3}))
    yield service
    service.close()


def test_a_correlation_whose_revert_was_reverted_reverts_again(svc):
    """Revert, revert of the revert, then the correlation again: its changes go, as the first time, not "already reverted"."""
    (m, other) = add(svc, "v1", "other").memory_ids
    svc.run(svc.memories.update, ctx(correlation_id="upd"), m, {"memory": "v2", "tags": ["edited"]})
    svc.run(svc.edges.link, ctx(correlation_id="upd"), m, other, "RELATED", edge_id="user:upd:1")
    first = svc.run(svc.reverts.revert, ctx(correlation_id="r1"), "upd")
    assert svc.get("a", m).memory == "v1" and svc.edges_of("a", m) == []
    svc.run(svc.reverts.revert, ctx(correlation_id="r2"), first.correlation_id)
    assert svc.get("a", m).memory == "v2" and [e.edge_id for e in svc.edges_of("a", m)] == ["user:upd:1"]
    preview = svc.run(svc.reverts.revert, ctx(), "upd", dry_run=True)
    assert preview.data["conflicts"] == [] and preview.data["through"] == "r2" and preview.memory_ids == (m,)
    again = svc.run(svc.reverts.revert, ctx(correlation_id="r3", idempotency_key="again"), "upd")
    assert again.positions and again.data["through"] == "r2" and again.data["conflicts"] == [] and not again.data["forced"]
    view = svc.get("a", m)
    assert (view.memory, view.tags, svc.edges_of("a", m)) == ("v1", (), [])
    head = svc.store.last_position()
    retried = svc.run(svc.reverts.revert, ctx(correlation_id="r3", idempotency_key="again"), "upd")
    assert retried.positions == again.positions and svc.store.last_position() == head
    for done in ("upd", "r2"):  # reverted now: nothing more to do
        assert svc.run(svc.reverts.revert, ctx(), done).data["already_reverted"] and svc.store.last_position() == head
    # r1 is in effect again (r2 undid it, r3 undid r2): reverting it undoes r3, and the update is back.
    back = svc.run(svc.reverts.revert, ctx(correlation_id="r4"), "r1")
    assert back.positions and back.data["through"] == "r3" and svc.get("a", m).memory == "v2"
    assert svc.run(svc.reverts.revert, ctx(), "r3").data["already_reverted"]


def test_revert_names_a_change_another_correlation_made_between_two_of_its_own(svc):
    """A session (one correlation id over several requests) updates a memory, someone else tags it, the
    session updates it again: its revert would take the memory back before the session and drop the other's
    tags too. A conflict naming the version, as a change after it is; forced, the memory is as before the session."""
    (m,) = add(svc, "v1").memory_ids
    svc.run(svc.memories.update, ctx(correlation_id="sess"), m, {"memory": "v2"})
    svc.run(svc.memories.update, ctx(correlation_id="other"), m, {"tags": ["kept"]})
    svc.run(svc.memories.update, ctx(correlation_id="sess"), m, {"memory": "v4"})
    svc.run(svc.entities.upsert, ctx(correlation_id="sess"), "person:ana", name="Ana")
    svc.run(svc.entities.set_tags, ctx(correlation_id="other"), "person:ana", ["vip"])
    svc.run(svc.entities.upsert, ctx(correlation_id="sess"), "person:ana", name="Ana Lima", tags=["vip"])
    head = svc.store.last_position()
    preview = svc.run(svc.reverts.revert, ctx(), "sess", dry_run=True).data["conflicts"]
    assert preview == [f"memory {m} changed in between by another correlation (version 3)", "entity person:ana changed in between by another correlation (stream version 2)"]
    with pytest.raises(Conflict) as err:
        svc.run(svc.reverts.revert, ctx(), "sess")
    assert "version 3" in str(err.value) and svc.store.last_position() == head
    forced = svc.run(svc.reverts.revert, ctx(), "sess", force=True)
    assert forced.data["forced"] and (svc.get("a", m).memory, svc.get("a", m).tags) == ("v1", ())


def test_undo_namespace_takes_whole_segments_never_a_longer_run(svc):
    """``user:notes`` (or ``user:notes:``) is the run notes: ``user:notes-2:…`` and ``user:notes10:…`` are other runs and stay."""
    a, b = add(svc, "a", "b").memory_ids
    ids = ["user:notes:1", "user:notes:2", "user:notes-2:1", "user:notes10:1", "user:notesx", "user:notes"]
    svc.run(svc.edges.link_many, ctx(), [c.EdgeRecord(edge_id=i, edge_type="RELATED", source=a, target=b) for i in ids])
    undone = svc.run(svc.edges.undo_namespace, ctx(), "user:notes", reason="bad run")
    assert undone.data["removed"] == 3
    assert sorted(e.edge_id for e in svc.edges_of("a", a)) == ["user:notes-2:1", "user:notes10:1", "user:notesx"]
    assert svc.run(svc.edges.undo_namespace, ctx(), "user:notes10:").data["removed"] == 1
    assert sorted(e.edge_id for e in svc.edges_of("a", a)) == ["user:notes-2:1", "user:notesx"]
    assert svc.run(svc.edges.undo_namespace, ctx(), "user:").data["removed"] == 2  # a namespace: all of it
    svc.run(svc.reverts.revert, ctx(), undone.correlation_id)
    assert sorted(e.edge_id for e in svc.edges_of("a", a)) == ["user:notes", "user:notes:1", "user:notes:2"]


def test_a_session_that_went_on_after_its_revert_is_reverted_again(svc):
    """A session (one correlation id) is reverted, then writes more under that id: its revert said "already
    reverted", wrote nothing, and left what the session wrote since. Now it undoes that, and only that; the
    revert of that revert brings it back."""
    (first,) = svc.run(svc.memories.add, ctx(correlation_id="sess"), [MemoryContent(memory="before the revert")]).memory_ids
    svc.run(svc.reverts.revert, ctx(correlation_id="r1"), "sess")
    assert svc.get("a", first).status == "deleted"
    (later,) = svc.run(svc.memories.add, ctx(correlation_id="sess"), [MemoryContent(memory="after the revert")]).memory_ids
    preview = svc.run(svc.reverts.revert, ctx(), "sess", dry_run=True)
    assert preview.data["would_revert"] == 1 and preview.memory_ids == (later,) and not preview.data.get("already_reverted")
    again = svc.run(svc.reverts.revert, ctx(correlation_id="r2"), "sess")
    assert again.positions and again.data["reverted"] == 1
    assert svc.get("a", later).status == "deleted" and svc.get("a", first).status == "deleted"
    head = svc.store.last_position()
    assert svc.run(svc.reverts.revert, ctx(), "sess").data["already_reverted"] and svc.store.last_position() == head
    svc.run(svc.reverts.revert, ctx(correlation_id="r3"), "r2")
    assert svc.get("a", later).status == "activated" and svc.get("a", first).status == "deleted"


@pytest.mark.parametrize("reverts_before_the_drop", [1, 2])
def test_a_correlation_id_used_again_after_a_tenant_drop_reverts_what_it_wrote_since(svc, reverts_before_the_drop):
    """A drop ends the tenant's past, its reverts too: the same correlation id used again after it (a client's own
    id) reads as never reverted, and a revert of it undoes what it wrote since, whatever reverts the dropped past held."""
    from mnemolog.api import explorer_reads

    svc.run(svc.memories.add, ctx(correlation_id="import-1"), [MemoryContent(memory="before the drop")])
    chain = ["import-1"]
    for n in range(reverts_before_the_drop):  # reverted, and that revert reverted in turn
        svc.run(svc.reverts.revert, ctx(correlation_id=f"undo-{n}"), chain[-1])
        chain.append(f"undo-{n}")
    svc.drop_tenant(ctx())
    (later,) = svc.run(svc.memories.add, ctx(correlation_id="import-1"), [MemoryContent(memory="after the drop")]).memory_ids
    shown = explorer_reads.correlation(svc, "a", "import-1", 0, 10)
    assert (shown["reverted"], shown["revert_chain"], shown["reverted_by"]) == (False, [], [])
    preview = svc.run(svc.reverts.revert, ctx(), "import-1", dry_run=True)
    assert preview.data["would_revert"] == 1 and preview.memory_ids == (later,) and "through" not in preview.data
    done = svc.run(svc.reverts.revert, ctx(correlation_id="undo-after"), "import-1")
    assert done.data["reverted"] == 1 and "through" not in done.data and svc.get("a", later).status == "deleted"
    assert explorer_reads.correlation(svc, "a", "import-1", 0, 10)["revert_chain"] == ["undo-after"]


def test_reverts_taken_in_the_reverse_order_of_the_changes_need_no_force(svc):
    """An undo stack: each revert undoes the newest change left, and none is refused for the later changes it
    sees, which the reverts before it undid. A later change still in effect is a conflict, as before."""
    [m] = add(svc, "v1").memory_ids
    for n in (2, 3, 4):
        svc.run(svc.memories.update, ctx(correlation_id=f"u{n}"), m, {"memory": f"v{n}"})
    svc.run(svc.entities.upsert, ctx(correlation_id="e1"), "ada", name="Ada")
    svc.run(svc.entities.upsert, ctx(correlation_id="e2"), "ada", name="Ada L")
    svc.run(svc.entities.upsert, ctx(correlation_id="e3"), "ada", name="Ada Lovelace")
    refused = svc.run(svc.reverts.revert, ctx(), "u3", dry_run=True)
    assert refused.data["conflicts"] and "changed after" in refused.data["conflicts"][0]  # u4 is in effect
    for done, text in (("u4", "v3"), ("u3", "v2"), ("u2", "v1")):
        result = svc.run(svc.reverts.revert, ctx(correlation_id=f"r-{done}"), done)
        assert result.data["conflicts"] == [] and not result.data["forced"]
        assert svc.get("a", m).memory == text
    for done, name in (("e3", "Ada L"), ("e2", "Ada")):
        result = svc.run(svc.reverts.revert, ctx(correlation_id=f"r-{done}"), done)
        assert result.data["conflicts"] == [] and not result.data["forced"]
        assert svc.knowledge.get("a", "ada").name == name
    # Redone in the order they were undone, none is refused either; then u3 is in effect again, and reverting u2,
    # under it, meets it as a later change.
    for undo, text in (("r-u2", "v2"), ("r-u3", "v3")):
        result = svc.run(svc.reverts.revert, ctx(correlation_id=f"r{undo}"), undo)
        assert result.data["conflicts"] == [] and svc.get("a", m).memory == text
    with pytest.raises(Conflict, match="changed after"):
        svc.run(svc.reverts.revert, ctx(), "u2")


def test_a_later_change_by_hand_to_what_an_undone_change_left_is_still_a_conflict(svc):
    """The memory is back as the correlation left it, but by a write of someone else's, not by a revert."""
    [m] = add(svc, "v1").memory_ids
    svc.run(svc.memories.update, ctx(correlation_id="a"), m, {"memory": "v2"})
    svc.run(svc.memories.update, ctx(correlation_id="b"), m, {"memory": "v3"})
    svc.run(svc.memories.update, ctx(correlation_id="c"), m, {"memory": "v2"})
    with pytest.raises(Conflict, match="changed after"):
        svc.run(svc.reverts.revert, ctx(), "a")


def test_a_revert_of_a_tenant_drop_is_refused_naming_the_field(svc):
    """A drop cannot be reverted: its correlation, asked for by a revert, said "not found" (a 404), though the drop
    is in the log; it is refused as a forget's is (a 422 naming ``correlation_id``), and nothing is written."""
    add(svc, "before the drop")
    svc.drop_tenant(ctx(correlation_id="drop-1"))
    head = svc.store.last_position()
    for dry_run in (True, False):
        with pytest.raises(ValidationError, match="a tenant drop cannot be reverted") as refused:
            svc.run(svc.reverts.revert, ctx(), "drop-1", dry_run=dry_run)
        assert refused.value.field == "correlation_id"
    with pytest.raises(NotFound):
        svc.run(svc.reverts.revert, ctx(), "never-used")
    assert svc.store.last_position() == head


@pytest.mark.parametrize("force", [False, True])
def test_a_reverted_relation_removal_comes_back_with_its_edge_when_another_relation_spells_its_edge_id(svc, force):
    """``a:B -C-> d`` and ``a -B-> C:d`` both spell ``rel:a:B:C:d``: the second, set after the first was removed, held
    the id; the revert of the removal was a false conflict, and forced it set the relation back without its edge."""
    for entity in ("a:B", "d", "a", "C:d"):
        svc.run(svc.entities.upsert, ctx(), entity, name=f"entity {entity}")
    svc.run(svc.entities.set_relation, ctx(), "a:B", "d", "C")
    svc.run(svc.entities.remove_relation, ctx(correlation_id="rm"), "a:B", "d", "C")
    svc.run(svc.entities.set_relation, ctx(), "a", "C:d", "B")
    svc.run(svc.reverts.revert, ctx(), "rm", force=force)
    edges = {(e.source, e.edge_type, e.target) for node in ("d", "C:d") for e in svc.edges_of("a", node)}
    assert edges == {("a:B", "C", "d"), ("a", "B", "C:d")}
    assert len({e.edge_id for node in ("d", "C:d") for e in svc.edges_of("a", node)}) == 2


def test_a_forced_revert_of_a_relation_never_takes_the_edge_of_another_relation_spelling_its_id(svc):
    for entity in ("a:B", "d", "a", "C:d"):
        svc.run(svc.entities.upsert, ctx(), entity, name=f"entity {entity}")
    svc.run(svc.entities.set_relation, ctx(correlation_id="set"), "a:B", "d", "C")
    svc.run(svc.entities.remove_relation, ctx(), "a:B", "d", "C")
    svc.run(svc.entities.set_relation, ctx(), "a", "C:d", "B")  # holds rel:a:B:C:d now
    with pytest.raises(Conflict):
        svc.run(svc.reverts.revert, ctx(), "set")
    svc.run(svc.reverts.revert, ctx(), "set", force=True)
    assert {(e.source, e.edge_type, e.target) for e in svc.edges_of("a", "C:d")} == {("a", "B", "C:d")}
