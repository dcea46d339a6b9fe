"""Reverts leave no residue: documents, entities, working memory and topics read as before the reverted correlation."""

from __future__ import annotations

import json
import random
from pathlib import Path

import msgspec
import pytest

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.commands.entities import load_entity
from mnemolog.eventstore.model import Conflict, MemoryContent
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.entities import projector as ents
from mnemolog.projections.graph import reads as graph_reads
from mnemolog.projections.ingest.documents import document_import, read_document
from mnemolog.projections.linking.relink import document_links
from mnemolog.projections.policies.organizer import Organizer
from mnemolog.projections.recall.searcher import RecallOptions
from mnemolog.tools import cli

T = "t"
NOTES = "# Field notes\n\nThe river was high near the Old Bridge.\n\n## Camp\n\nWe slept near the bridge with Ana.\n"
CHANGED = NOTES + "\n## Day two\n\nThe bridge was closed, said Ana.\n"


def ctx(**kw) -> CommandContext:
    return CommandContext(tenant=T, **kw)


def do_import(svc, path: Path):
    return svc.run(svc.documents.import_document, ctx(), document_import(read_document(path), root=path.parent))


def chunks(svc, doc_id: str) -> dict[str, str]:
    rows = svc.read_conn().execute(
        "SELECT memory_id, status FROM graph_memories WHERE tenant = ? AND doc_id = ? AND valid_to IS NULL", (T, doc_id)
    )
    return dict(rows.fetchall())


def document_reads(svc, doc_id: str) -> dict:
    """What a reader sees of a document: its row, its chunks, its links, recall over it (positions left out).

    Recall is compared by results and their order: BM25's corpus statistics
    count every version ever indexed, so scores move with any write.
    """
    conn = svc.read_conn()
    doc = ents.get_document(conn, T, doc_id)
    shown = None if doc is None else {k: v for k, v in msgspec.structs.asdict(doc).items() if k != "valid_from"}
    hits = svc.searcher.recall(T, "where did we sleep near the bridge", RecallOptions()).hits
    return {
        "document": shown,
        "listed": [d.doc_id for d in ents.list_documents(conn, T)],
        "node": svc.facts.node_exists(T, f"document:{doc_id}"),
        "chunks": chunks(svc, doc_id),
        "links": document_links(conn, T),
        "recall": [(h.id, h.memory.status if h.kind == "memory" else h.kind) for h in hits],
        "edges": sorted((e.edge_id, e.source, e.target) for e in svc.edges_of(T, "place:bridge")),
    }


@pytest.fixture
def known(svc):
    svc.run(svc.entities.upsert, ctx(), "place:bridge", name="Old Bridge", aliases=["the bridge"])
    svc.run(svc.entities.upsert, ctx(), "person:ana", name="Ana")
    return svc


# -- documents ---------------------------------------------------------------------------------------


def test_reverting_a_changed_import_brings_the_previous_version_back(known, tmp_path):
    svc = known
    other = tmp_path / "other.md"
    other.write_text("Ana crossed the Old Bridge at dawn.\n", encoding="utf-8")
    do_import(svc, other)  # a second document, so that document links have a pair
    path = tmp_path / "notes.md"
    path.write_text(NOTES, encoding="utf-8")
    first = do_import(svc, path)
    before = document_reads(svc, "notes.md")
    path.write_text(CHANGED, encoding="utf-8")
    second = do_import(svc, path)
    assert document_reads(svc, "notes.md") != before

    svc.run(svc.reverts.revert, ctx(), second.correlation_id)
    after = document_reads(svc, "notes.md")
    assert {m: after["chunks"].pop(m) for m in second.memory_ids} == {m: "deleted" for m in second.memory_ids}
    assert after == before
    doc = ents.get_document(svc.read_conn(), T, "notes.md")
    assert (doc.version, doc.chunk_ids, doc.valid_to) == (1, list(first.memory_ids), None)

    # The same changed file again: a new version (numbers are never reused) that archives version 1.
    third = do_import(svc, path)
    assert third.data["status"] == "imported" and third.data["version"] == 3 and third.data["archived"] == len(first.memory_ids)
    active = {m for m, status in chunks(svc, "notes.md").items() if status == "activated"}
    assert active == set(third.memory_ids)
    # And the first version's file is a change again, not "unchanged".
    path.write_text(NOTES, encoding="utf-8")
    assert do_import(svc, path).data["version"] == 4


def test_reverting_a_first_import_removes_the_document(known, tmp_path):
    svc = known
    path = tmp_path / "notes.md"
    before = document_reads(svc, "notes.md")
    path.write_text(NOTES, encoding="utf-8")
    first = do_import(svc, path)
    assert svc.facts.node_exists(T, "document:notes.md")
    undo = svc.run(svc.reverts.revert, ctx(), first.correlation_id)
    after = document_reads(svc, "notes.md")
    assert after["document"] is None and after["listed"] == [] and not after["node"]
    assert set(after["chunks"].values()) == {"deleted"}
    assert {k: v for k, v in after.items() if k != "chunks"} == {k: v for k, v in before.items() if k != "chunks"}
    assert ents.get_document(svc.read_conn(), T, "notes.md", as_of=undo.first_position) is not None  # history keeps it
    # Reverting the revert brings the document back.
    svc.run(svc.reverts.revert, ctx(), undo.correlation_id)
    assert ents.get_document(svc.read_conn(), T, "notes.md").chunk_ids == list(first.memory_ids)


def test_a_document_changed_after_is_a_conflict(known, tmp_path):
    svc = known
    path = tmp_path / "notes.md"
    path.write_text(NOTES, encoding="utf-8")
    first = do_import(svc, path)
    path.write_text(CHANGED, encoding="utf-8")
    do_import(svc, path)
    with pytest.raises(Conflict, match="document notes.md changed after"):
        svc.run(svc.reverts.revert, ctx(), first.correlation_id)


def test_a_forced_revert_of_a_first_import_removes_the_document_with_the_chunks_of_its_later_versions(known, tmp_path):
    """Forced past a later import of the same file, the revert of the import that brought the document in removes it,
    and the chunks that later import made go with it: none is left active without its document."""
    svc = known
    path = tmp_path / "notes.md"
    path.write_text(NOTES, encoding="utf-8")
    first = do_import(svc, path)
    path.write_text(CHANGED, encoding="utf-8")
    second = do_import(svc, path)
    preview = svc.run(svc.reverts.revert, ctx(), first.correlation_id, force=True, dry_run=True)
    done = svc.run(svc.reverts.revert, ctx(), first.correlation_id, force=True)
    assert done.data["forced"] and any("document notes.md changed after" in c for c in done.data["conflicts"])
    assert svc.knowledge.document(T, "notes.md") is None
    assert chunks(svc, "notes.md") == {m: "deleted" for m in {*first.memory_ids, *second.memory_ids}}
    assert set(second.memory_ids) <= set(preview.memory_ids) and sorted(preview.memory_ids) == sorted(set(done.memory_ids))
    assert [h.id for h in svc.searcher.recall(T, "bridge closed", RecallOptions(limit=10)).hits if h.kind == "memory"] == []
    # Forced past a later import, the revert of a second import takes the document back to its first version, and
    # only that version's chunks stay active.
    path.write_text(NOTES, encoding="utf-8")
    again = do_import(svc, path)
    path.write_text(CHANGED, encoding="utf-8")
    changed = do_import(svc, path)
    path.write_text(CHANGED + "\n## Day three\n\nAna left.\n", encoding="utf-8")
    do_import(svc, path)
    svc.run(svc.reverts.revert, ctx(), changed.correlation_id, force=True)
    doc = svc.knowledge.document(T, "notes.md")
    assert doc.chunk_ids == list(again.memory_ids)
    assert {m for m, s in chunks(svc, "notes.md").items() if s == "activated"} == set(again.memory_ids)
    # Imported again, it is a document again, its chunks active.
    third = do_import(svc, path)
    assert third.data["status"] == "imported" and {m: s for m, s in chunks(svc, "notes.md").items() if s == "activated"} == dict.fromkeys(third.memory_ids, "activated")


def test_document_imports_reverted_newest_first_need_no_force(svc, tmp_path):
    path = tmp_path / "notes.md"
    path.write_text(NOTES, encoding="utf-8")
    first = do_import(svc, path)
    path.write_text(CHANGED, encoding="utf-8")
    second = do_import(svc, path)
    for done in (second, first):
        result = svc.run(svc.reverts.revert, ctx(), done.correlation_id)
        assert result.data["conflicts"] == [] and not result.data["forced"]
    assert svc.knowledge.document(T, "notes.md") is None
    assert "activated" not in chunks(svc, "notes.md").values()


# -- entities ------------------------------------------------------------------------------------------


def entity_reads(svc) -> dict:
    conn = svc.read_conn()
    out = {}
    for e in ents.active_entities(conn, T):
        shown = msgspec.structs.asdict(e)
        shown.pop("valid_from")
        out[e.id] = (shown, ents.relations_of(conn, T, e.id), [r.id for r in ents.get_related(conn, T, e.id, depth=2, direction="both")])
    edges = sorted((e.edge_id, e.weight) for node in out for e in svc.edges_of(T, node))
    return {"entities": out, "edges": edges, "tags": ents.find_tags(conn, T)}


@pytest.mark.parametrize(
    "command",
    [
        lambda svc: svc.run(svc.entities.upsert, ctx(), "person:bo", name="Bo", tags=["friend"]),
        lambda svc: svc.run(svc.entities.upsert, ctx(), "person:ana", name="Ana Lima", aliases=["Ana L."], tags=["x"]),
        lambda svc: svc.run(svc.entities.set_tags, ctx(), "person:ana", ["guide", "local"]),
        lambda svc: svc.run(svc.entities.set_relation, ctx(), "person:ana", "place:bridge", "lives_near", weight=0.5),
        lambda svc: svc.run(svc.entities.set_relation, ctx(), "person:ana", "place:river", "swims_in", weight=0.2),
        lambda svc: svc.run(svc.entities.remove_relation, ctx(), "person:ana", "place:river", "knows"),
        lambda svc: svc.run(svc.entities.remove, ctx(), "place:river"),
        lambda svc: svc.run(svc.entities.remove, ctx(), "person:ana"),
    ],
    ids=["create", "replace", "tags", "reweight", "relate", "unrelate", "remove-target", "remove-source"],
)
def test_reverting_an_entity_command_restores_every_entity_read(svc, command):
    svc.run(svc.entities.upsert, ctx(), "person:ana", name="Ana", tags=["guide"])
    svc.run(svc.entities.upsert, ctx(), "place:bridge", name="Old Bridge")
    svc.run(svc.entities.upsert, ctx(), "place:river", name="River", aliases=["the river"])
    svc.run(svc.entities.set_relation, ctx(), "person:ana", "place:bridge", "lives_near", weight=0.9)
    svc.run(svc.entities.set_relation, ctx(), "person:ana", "place:river", "knows", weight=0.7)
    svc.run(svc.entities.set_relation, ctx(), "place:bridge", "place:river", "crosses", weight=1.0)
    before = entity_reads(svc)
    done = command(svc)
    after = entity_reads(svc)
    assert after != before
    undo = svc.run(svc.reverts.revert, ctx(), done.correlation_id)
    assert undo.data["conflicts"] == []
    assert entity_reads(svc) == before
    svc.run(svc.reverts.revert, ctx(), undo.correlation_id)  # the revert of the revert redoes the command
    assert entity_reads(svc) == after


def test_relations_set_later_into_a_reverted_entity_conflict_and_go_when_forced(svc):
    svc.run(svc.entities.upsert, ctx(), "person:ana", name="Ana")
    created = svc.run(svc.entities.upsert, ctx(), "person:bo", name="Bo")
    svc.run(svc.entities.set_relation, ctx(), "person:ana", "person:bo", "knows")
    with pytest.raises(Conflict, match="rel:person:ana:KNOWS:person:bo"):
        svc.run(svc.reverts.revert, ctx(), created.correlation_id)
    forced = svc.run(svc.reverts.revert, ctx(), created.correlation_id, force=True)
    assert forced.data["forced"]
    conn = svc.read_conn()
    assert ents.get_entity(conn, T, "person:bo") is None
    assert ents.relations_of(conn, T, "person:ana") == [] and svc.edges_of(T, "person:ana") == []
    assert load_entity(svc.store, T, "person:ana").relations == {}  # the write side agrees with the projection


# -- working memory ------------------------------------------------------------------------------------


@pytest.fixture
def small(tmp_path):
    from mnemolog.projections.service import MemoryService

    service = MemoryService.open(tmp_path / "small", settings=Settings({"working_memory_capacity": 3}, env={}))
    yield service
    service.close()


def fifo(svc, as_of=None) -> list[str]:
    return [e.memory_id for e in graph_reads.working_memory(svc.read_conn(), T, as_of=as_of)]


def test_reverting_a_batch_withdraws_it_from_working_memory_and_undoes_its_evictions(small):
    svc = small
    a, b = svc.run(svc.memories.add, ctx(), [MemoryContent(memory="a"), MemoryContent(memory="b", memory_type="WorkingMemory")]).memory_ids
    before = fifo(svc)
    batch = svc.run(svc.memories.add, ctx(), [MemoryContent(memory=f"x{i}") for i in range(3)])
    assert fifo(svc) == list(batch.memory_ids) and svc.get(T, b).status == "archived"  # a WorkingMemory item leaves by archiving
    undo = svc.run(svc.reverts.revert, ctx(), batch.correlation_id)
    assert fifo(svc) == before == [a, b] and svc.get(T, b).status == "activated"
    assert fifo(svc, as_of=batch.last_position) == list(batch.memory_ids)  # history keeps every stay
    assert fifo(svc, as_of=batch.first_position - 1) == before
    # The next add evicts the restored entries in their old order.
    (c,) = svc.run(svc.memories.add, ctx(), [MemoryContent(memory="c")]).memory_ids
    assert fifo(svc) == [a, b, c]
    (d,) = svc.run(svc.memories.add, ctx(), [MemoryContent(memory="d")]).memory_ids
    assert fifo(svc) == [b, c, d]
    # Reverting the revert puts the batch back (as far as capacity goes) in its own places.
    svc.run(svc.reverts.revert, ctx(), undo.correlation_id, force=True)
    assert len(fifo(svc)) <= 3


def test_cli_working_memory_lists_entries_as_of(tmp_path, capsys):
    data = str(tmp_path / "data")
    assert cli.main(["--data-dir", data, "add", "--tenant", T, "first note"]) == 0
    assert cli.main(["--data-dir", data, "add", "--tenant", T, "second note", "--json"]) == 0
    second = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert cli.main(["--data-dir", data, "working-memory", "--tenant", T, "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["memory"]["memory"] for e in lines] == ["first note", "second note"]
    assert cli.main(["--data-dir", data, "working-memory", "--tenant", T, "--as-of", str(second["first_position"] - 1)]) == 0
    text = capsys.readouterr().out
    assert "1 of 20 entries" in text and "first note" in text and "second note" not in text
    assert cli.main(["--data-dir", data, "working-memory", "--tenant", T, "--as-of", "not-a-time"]) == 2


# -- topics ------------------------------------------------------------------------------------------


WORDS = "recipe oven flour butter garlic simmer basil sauce roast dough pepper onion orbit telescope galaxy nebula comet planet".split()


def test_topics_whose_members_are_all_reverted_are_retired(tmp_path):
    from mnemolog.projections.service import MemoryService

    settings = Settings({"organizer_cluster_interval_s": 0.0}, env={})
    with MemoryService.open(tmp_path / "data", settings=settings) as svc:
        (kept,) = svc.run(svc.memories.add, ctx(), [MemoryContent(memory="a lone note about sailing boats", memory_type="UserMemory")]).memory_ids
        rng = random.Random(5)
        items = [MemoryContent(memory=f"{' '.join(rng.sample(WORDS[:12] if i % 2 else WORDS[8:], 6))} note {i}") for i in range(81)]
        bulk = svc.run(svc.memories.add, ctx(), items)
        organizer = Organizer(svc, settings)
        report = organizer.cluster(T)
        topics = [m for m, status in _topics(svc).items() if status == "activated"]
        assert report["created"] >= 2 and len(topics) >= 2
        svc.run(svc.reverts.revert, ctx(), bulk.correlation_id, force=True)
        query = " ".join(WORDS[:6])
        hits = svc.searcher.recall(T, query, RecallOptions()).hits
        assert hits and svc.get(T, hits[0].id).memory_type == "TopicMemory"  # the residue: topics over deleted memories
        head = svc.store.last_position()
        assert organizer.cluster(T, dry_run=True)["retired"] == len(topics) and svc.store.last_position() == head
        report = organizer.cluster(T)
        assert report["retired"] == len(topics) and not report["errors"]
        assert set(_topics(svc).values()) == {"archived"}
        assert all(e.edge_type != "PARENT" for t in topics for e in svc.edges_of(T, t))
        for t in topics:
            assert svc.history(T, t)[-1]["reason"] == "no activated member left"
        hits = svc.searcher.recall(T, query, RecallOptions()).hits
        assert all(svc.get(T, h.id).memory_type != "TopicMemory" for h in hits)
        assert organizer.cluster(T)["retired"] == 0  # nothing left to retire
        assert svc.get(T, kept).status == "activated"


def _topics(svc) -> dict[str, str]:
    rows = svc.read_conn().execute(
        "SELECT memory_id, status FROM graph_memories WHERE tenant = ? AND memory_type = 'TopicMemory' AND valid_to IS NULL", (T,)
    )
    return dict(rows.fetchall())


# -- a revert with nothing to compensate -----------------------------------------------------------


def test_reverting_a_revert_that_compensated_nothing_is_a_no_op(tmp_path, capsys):
    data = str(tmp_path / "data")

    def run(*argv: str) -> dict:
        assert cli.main(["--data-dir", data, *argv, "--tenant", T, "--json"]) == 0
        return json.loads(capsys.readouterr().out.strip().splitlines()[-1])

    (memory_id,) = run("add", "a note")["memory_ids"]
    archived = run("archive", memory_id)
    run("restore", memory_id)
    forced = run("revert", archived["correlation_id"], "--force")  # the memory is activated already: only the marker
    assert forced["forced"] and forced["first_position"] == forced["last_position"]
    again = run("revert", forced["correlation_id"])
    assert again["nothing_to_revert"] and again["first_position"] is None and again["reverted"] == 0
    assert cli.main(["--data-dir", data, "revert", forced["correlation_id"], "--tenant", T]) == 0
    assert "changed nothing" in capsys.readouterr().out


# -- forgotten subjects -----------------------------------------------------------------------------


def test_a_revert_over_a_forgotten_subject_says_so_and_forced_leaves_it_erased(svc):
    added = svc.run(svc.memories.add, ctx(), [MemoryContent(memory="Mara keeps bees", subject="mara"), MemoryContent(memory="the hive is blue")])
    mara, other = added.memory_ids
    edit = ctx(correlation_id="edit-1")
    svc.run(svc.memories.archive, edit, mara)
    svc.run(svc.memories.update, edit, other, {"memory": "the hive is green"})
    svc.forget(ctx(), "mara", reason="asked to be forgotten")
    with pytest.raises(Conflict) as refused:
        svc.run(svc.reverts.revert, ctx(), "edit-1")
    assert f"memory {mara} was erased (its subject was forgotten)" in str(refused.value) and refused.value.field == "force"
    result = svc.run(svc.reverts.revert, ctx(), "edit-1", force=True)
    assert result.data["forced"] and any("erased" in conflict for conflict in result.data["conflicts"])
    svc.sync()
    assert svc.graph.memory(T, other).memory == "the hive is blue"  # the rest reverted
    kept = svc.graph.memory(T, mara)
    assert kept.erased and kept.status == "archived"  # the forgotten one stays as it is


# -- edges linked back -----------------------------------------------------------------------------


@pytest.mark.parametrize("gone", ["memory deleted", "entity removed"])
def test_a_revert_links_no_edge_back_onto_a_node_gone_since_and_says_so(svc, gone):
    """A revert linked the edges its correlation removed back onto a memory deleted or an entity removed since,
    reporting nothing: the graph held live edges onto nodes no read shows (a link onto them is refused)."""
    a, b = svc.run(svc.memories.add, ctx(), [MemoryContent(memory="the ferry leaves at six"), MemoryContent(memory="the ferry is late")]).memory_ids
    other = b
    if gone == "entity removed":
        svc.run(svc.entities.upsert, ctx(), "place:pier", name="North Pier")
        other = "place:pier"
    svc.run(svc.edges.link, ctx(), a, other, "RELATED", edge_id="user:ferry:1")
    undone = svc.run(svc.edges.undo_namespace, ctx(), "user:ferry:")
    if gone == "entity removed":
        svc.run(svc.entities.remove, ctx(), "place:pier")
    else:
        svc.run(svc.memories.soft_delete, ctx(), b)
    with pytest.raises(Conflict, match="edge user:ferry:1 is not linked back"):
        svc.run(svc.reverts.revert, ctx(), undone.correlation_id)
    forced = svc.run(svc.reverts.revert, ctx(), undone.correlation_id, force=True)
    assert forced.data["forced"] and any("user:ferry:1" in conflict for conflict in forced.data["conflicts"])
    assert svc.facts.live_edge(T, "user:ferry:1") is None and svc.edges_of(T, a) == []


def test_a_revert_that_brings_a_memory_back_links_its_edges_back_with_it(svc):
    a, b = svc.run(svc.memories.add, ctx(), [MemoryContent(memory="the ferry leaves at six"), MemoryContent(memory="the ferry is late")]).memory_ids
    svc.run(svc.edges.link, ctx(), a, b, "RELATED", edge_id="user:ferry:1")
    deleted = svc.run(svc.memories.soft_delete, ctx(), b)
    assert svc.facts.live_edge(T, "user:ferry:1") is None
    undo = svc.run(svc.reverts.revert, ctx(), deleted.correlation_id)
    assert undo.data["conflicts"] == [] and svc.facts.live_edge(T, "user:ferry:1") is not None


def test_a_restore_links_no_edge_back_whose_link_a_forced_revert_undid_meanwhile(svc):
    """The memory's delete took the edge out, so the forced revert of its link found nothing to unlink; the restore
    then linked it back, and a revert of the link again did nothing: the reverted link stayed for good."""
    a, b = svc.run(svc.memories.add, ctx(), [MemoryContent(memory="the ferry leaves at six"), MemoryContent(memory="the ferry is late")]).memory_ids
    linked = svc.run(svc.edges.link, ctx(), a, b, "RELATED", edge_id="user:ferry:1")
    svc.run(svc.memories.soft_delete, ctx(), a)
    svc.run(svc.reverts.revert, ctx(), linked.correlation_id, force=True)
    svc.run(svc.memories.restore, ctx(), a)
    assert svc.facts.live_edge(T, "user:ferry:1") is None and svc.edges_of(T, a) == []


def test_reverting_an_update_of_a_working_memory_item_evicted_since_is_no_conflict(small):
    """The item evicted since (churn) stays archived, with its text back and no mention: the mention the update
    ended is not linked back, and the revert was refused over it ("archived: it mentions nothing")."""
    svc = small
    svc.run(svc.entities.upsert, ctx(), "person:ana", name="Ana")
    [item] = svc.run(svc.memories.add, ctx(), [MemoryContent(memory="Ana is here", memory_type="WorkingMemory")]).memory_ids
    changed = svc.run(svc.memories.update, ctx(), item, {"memory": "nobody is here"})
    svc.run(svc.memories.add, ctx(), [MemoryContent(memory=f"note {i}") for i in range(3)])  # the FIFO evicts the item
    undo = svc.run(svc.reverts.revert, ctx(), changed.correlation_id)
    assert undo.data["conflicts"] == [] and not undo.data["forced"]
    view = svc.get(T, item)
    assert (view.status, view.memory) == ("archived", "Ana is here") and svc.edges_of(T, item) == []


def test_a_forced_revert_of_an_entity_removal_keeps_its_relation_and_the_relations_edge_together(svc):
    svc.run(svc.entities.upsert, ctx(), "person:ana", name="Ana")
    svc.run(svc.entities.upsert, ctx(), "org:choir", name="Choir")
    svc.run(svc.entities.set_relation, ctx(), "person:ana", "org:choir", "MEMBER_OF")
    removed = svc.run(svc.entities.remove, ctx(), "person:ana")
    svc.run(svc.entities.remove, ctx(), "org:choir")
    svc.run(svc.reverts.revert, ctx(), removed.correlation_id, force=True)
    relations = [r.target_id for r in ents.relations_of(svc.read_conn(), T, "person:ana")]
    edges = [e.target for e in svc.edges_of(T, "person:ana") if e.edge_id.startswith("rel:")]
    assert relations == edges == ["org:choir"]  # as before the revert: the relation into the entity removed since is the entities' matter


def test_a_revert_that_deletes_a_memory_again_takes_the_edges_linked_onto_it_since(svc):
    """Reverting a restore deleted the memory again but left the edges linked onto it since live: every walk and
    neighbourhood reached a deleted memory. They are a conflict now, unlinked when forced, as a delete unlinks."""
    m, n = svc.run(svc.memories.add, ctx(), [MemoryContent(memory="the ferry leaves at six"), MemoryContent(memory="the ferry is late")]).memory_ids
    svc.run(svc.memories.soft_delete, ctx(), n)
    restored = svc.run(svc.memories.restore, ctx(), n)
    svc.run(svc.edges.link, ctx(), m, n, "RELATED", edge_id="user:z:1")
    with pytest.raises(Conflict, match="edge user:z:1 touches"):
        svc.run(svc.reverts.revert, ctx(), restored.correlation_id)
    svc.run(svc.reverts.revert, ctx(), restored.correlation_id, force=True)
    assert svc.get(T, n).status == "deleted" and svc.edges_of(T, m) == []


def test_undoing_and_redoing_a_merge_of_a_merge_gives_every_merged_to_edge_back(svc):
    """Redone, the second merge's edges from the first merge's sources followed their own MERGED_TO edge, which the
    same revert unlinks, and were folded into the middle memory's: a and b lost their lineage."""
    a, b, c_ = svc.run(svc.memories.add, ctx(), [MemoryContent(memory="likes tea"), MemoryContent(memory="drinks tea"), MemoryContent(memory="has tea")]).memory_ids
    first = svc.run(svc.memories.merge, ctx(), [a, b], text="drinks tea")
    second = svc.run(svc.memories.merge, ctx(), [first.memory_ids[0], c_], text="tea")
    m1, m2 = first.memory_ids[0], second.memory_ids[0]

    def lineage():
        rows = svc.read_conn().execute("SELECT source, target FROM graph_edges WHERE tenant = ? AND edge_type = 'MERGED_TO' AND valid_to IS NULL", (T,))
        return sorted(rows.fetchall())

    merged = lineage()
    assert merged == sorted([(a, m2), (b, m2), (c_, m2), (m1, m2)])
    undo_second = svc.run(svc.reverts.revert, ctx(), second.correlation_id)
    undo_first = svc.run(svc.reverts.revert, ctx(), first.correlation_id)
    svc.run(svc.reverts.revert, ctx(), undo_first.correlation_id)
    redone = svc.run(svc.reverts.revert, ctx(), undo_second.correlation_id)
    assert redone.data["conflicts"] == [] and lineage() == merged
