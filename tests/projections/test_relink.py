"""Relink runs (dry run, commit, exact undo), document links, relation cards and the recall seed hook."""

from __future__ import annotations

from pathlib import Path

import pytest

from mnemolog.eventstore.commands import CommandContext
from mnemolog.projections.ingest.documents import document_import
from mnemolog.projections.ingest.documents import read_document
from mnemolog.projections.linking import relink as rl
from mnemolog.projections.recall.searcher import RecallOptions


def ctx(tenant: str = "t", **kw) -> CommandContext:
    return CommandContext(tenant=tenant, **kw)


def upsert(svc, entity_id, name, **kw):
    return svc.run(svc.entities.upsert, ctx(), entity_id, name=name, **kw)


def add_doc(svc, tmp_path: Path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return svc.run(svc.documents.import_document, ctx(), document_import(read_document(path), root=path.parent))


def mentions(svc, tenant: str = "t"):
    """Live mention edges, exactly: id, ends, weight, properties."""
    return sorted((e.edge_id, e.source, e.target, e.weight, repr(sorted(e.properties.items()))) for e in rl.live_mentions(svc.read_conn(), tenant))


@pytest.fixture
def corpus(svc, tmp_path):
    """Two documents linked against a small catalogue, then a catalogue that grew."""
    upsert(svc, "person:lovelace", "Lovelace")
    a = add_doc(svc, tmp_path, "a.md", "# A\n\nAda Lovelace wrote the notes.\n\nCharles Babbage built the engine.\n")
    b = add_doc(svc, tmp_path, "b.md", "# B\n\nThe engine of Charles Babbage was never finished.\n")
    upsert(svc, "person:ada", "Ada Lovelace", aliases=["Countess of Lovelace"])  # longer: wins over "Lovelace"
    upsert(svc, "person:babbage", "Charles Babbage", aliases=["Babbage"])
    return a, b


def test_dry_run_writes_nothing_and_previews(svc, corpus):
    head, before = svc.store.last_position(), mentions(svc)
    report = svc.linking.relink(ctx())
    assert report["dry_run"] and not report["committed"] and "run_id" not in report
    assert svc.store.last_position() == head and mentions(svc) == before
    assert report["remove"] == 2  # chunk -> Lovelace and document -> Lovelace, replaced by the longer name
    assert report["add"] == 2 + 4  # Ada: chunk + document; Babbage: in both documents, chunk + document each
    assert report["kept"] == 0 and report["chunks"] == 2 and report["entities"] == 3
    [pair] = report["cross_document_pairs"]
    assert pair == {"documents": ["a.md", "b.md"], "new_shared_entities": ["person:babbage"], "new_pair": True}
    assert report["new_document_pair_count"] == 1


def test_commit_then_undo_namespace_restores_the_previous_edges_exactly(svc, corpus):
    before = mentions(svc)
    report = svc.linking.relink(ctx(), commit=True)
    assert report["committed"] and report["add"] == 6 and report["remove"] == 2
    prefix = report["prefix"]
    types = [r.type for r in svc.store.read_all(after=report["positions"][0] - 1, until=report["positions"][-1])]
    assert types == ["RelinkCommitted", "NamespaceUndone"] + ["EdgeLinked"] * 6
    after = mentions(svc)
    assert after != before and sum(1 for e in after if e[0].startswith(prefix)) == 6
    assert not any(e[2] == "person:lovelace" for e in after)
    # Nothing left to do: a second run is a no-op.
    again = svc.linking.relink(ctx(), commit=True)
    assert not again["committed"] and again["kept"] == 6 and again["positions"] == []
    undo = svc.run(svc.edges.undo_namespace, ctx(), prefix.rstrip(":"))  # the run, named with or without its last colon
    assert (undo.data["removed"], undo.data["restored"]) == (6, 2)
    assert mentions(svc) == before
    assert svc.run(svc.edges.undo_namespace, ctx(), prefix).first_position is None  # twice is a no-op


def test_commit_then_revert_correlation_restores_the_previous_edges(svc, corpus):
    before = mentions(svc)
    report = svc.linking.relink(ctx(), commit=True)
    svc.run(svc.reverts.revert, ctx(), report["correlation_id"])
    assert mentions(svc) == before


def test_as_of_before_the_run_shows_the_old_mentions(svc, corpus):
    before = mentions(svc)
    report = svc.linking.relink(ctx(), commit=True)
    old = sorted(e.edge_id for e in rl.live_mentions(svc.read_conn(), "t", as_of=report["positions"][0] - 1))
    assert old == [e[0] for e in before]


def test_relink_is_per_tenant(svc, corpus):
    other = svc.linking.relink(ctx("other"), commit=True)
    assert not other["committed"] and other["chunks"] == 0 and mentions(svc, "other") == []


def test_document_links_rank_distinctive_entities_first(svc, tmp_path):
    upsert(svc, "org:acme", "Acme")
    upsert(svc, "tool:zeta", "Zeta Drill")
    add_doc(svc, tmp_path, "one.md", "Acme sells the Zeta Drill.\n")
    add_doc(svc, tmp_path, "two.md", "The Zeta Drill broke at Acme.\n")
    add_doc(svc, tmp_path, "three.md", "Acme hired a plumber.\n")
    found = rl.document_links(svc.read_conn(), "t")
    assert found["documents"] == 3
    top = found["pairs"][0]
    assert top["documents"] == ["one.md", "two.md"]
    assert [s["entity_id"] for s in top["shared"]] == ["tool:zeta", "org:acme"]  # rarer first
    zeta = top["shared"][0]
    assert set(zeta["evidence"]) == {"one.md", "two.md"} and all(len(v) == 1 for v in zeta["evidence"].values())
    assert top["score"] > found["pairs"][1]["score"]
    assert [p["documents"] for p in rl.document_links(svc.read_conn(), "t", doc_id="three.md")["pairs"]] == [["one.md", "three.md"], ["three.md", "two.md"]]
    assert rl.document_links(svc.read_conn(), "t", min_shared=2)["pairs"][0]["documents"] == ["one.md", "two.md"]


def test_relation_cards(svc):
    upsert(svc, "person:ada", "Ada Lovelace", aliases=["Ada"])
    upsert(svc, "person:babbage", "Charles Babbage")
    upsert(svc, "thing:engine", "Analytical Engine")
    svc.run(svc.entities.set_relation, ctx(), "person:ada", "thing:engine", "wrote_about", weight=0.9)
    svc.run(svc.entities.set_relation, ctx(), "person:babbage", "person:ada", "worked_with", weight=0.7)
    cards = svc.linking.relation_cards("t", "Who did Ada work with?")
    assert cards["matched"]
    [card] = cards["cards"]
    assert card["entity"]["id"] == "person:ada" and card["matched_alias"] == "ada"
    assert [(r["direction"], r["relation_type"], r["entity_id"]) for r in card["relations"]] == [
        ("out", "WROTE_ABOUT", "thing:engine"),
        ("in", "WORKED_WITH", "person:babbage"),
    ]
    assert svc.linking.relation_cards("t", "What is the weather?") == {"matched": False, "question": "What is the weather?", "cards": []}
    assert not svc.linking.relation_cards("other-tenant", "Ada?")["matched"]


def test_recall_graph_channel_finds_a_chunk_through_an_entity_alias(svc, tmp_path):
    upsert(svc, "person:babbage", "Charles Babbage", aliases=["Old Charlie"])
    result = add_doc(svc, tmp_path, "bio.md", "# Bio\n\nCharles Babbage designed a calculating machine.\n\nHe also liked trains.\n")
    chunk = result.memory_ids[0]
    hits = svc.searcher.recall("t", "what did old charlie design", RecallOptions(channels=("graph",))).hits
    # The chunk that mentions the named entity first, then the entity itself (a named entity scores below a full mention).
    assert [(h.kind, h.id) for h in hits] == [("memory", chunk), ("entity", "person:babbage")]
    assert hits[0].graph_path and hits[0].graph_path[0].startswith("mention:")
    assert hits[1].named_as == "old charlie" and hits[1].path == []
    # The seed follows the catalogue: a new alias works at once.
    upsert(svc, "person:babbage", "Charles Babbage", aliases=["Old Charlie", "Chuck"])
    assert [h.id for h in svc.searcher.recall("t", "chuck", RecallOptions(channels=("graph",))).hits] == [chunk, "person:babbage"]
    only_memories = svc.searcher.recall("t", "chuck", RecallOptions(channels=("graph",), strategy="knowledge-only"))
    assert [h.id for h in only_memories.hits] == [chunk] and only_memories.strategy == "knowledge-only"


def test_include_tags_links_tags_too(svc, tmp_path):
    upsert(svc, "topic:hydro", "Hydrology", tags=["rivers"])
    add_doc(svc, tmp_path, "n.md", "Notes about rivers.\n")
    assert svc.linking.relink(ctx())["add"] == 0
    report = svc.linking.relink(ctx(), include_tags=True, commit=True)
    assert report["add"] == 2 and report["committed"]


def test_the_catalogue_cache_drops_a_tenants_catalogue_once_an_entity_change_outdates_it(svc):
    cache = svc.linking.catalogues
    upsert(svc, "person:ada", "Ada Lovelace")
    first, _ = cache.get(svc.read_conn(), "t")
    for k, name in enumerate(["Charles Babbage", "Mary Somerville", "Alan Turing"]):
        upsert(svc, f"person:{k}", name)
        latest, count = cache.get(svc.read_conn(), "t")
        assert count == k + 2
    other, _ = cache.get(svc.read_conn(), "t", include_tags=True)
    held = list(cache._items.values())
    assert [c for c, _ in held] == [latest, other]  # one per tenant and options: the outdated ones are gone
    assert latest.surfaces()["alan turing"] == "person:2" and first is not latest


def test_warm_builds_the_catalogues_that_a_first_write_would_build(tmp_path, monkeypatch):
    """A server's warm-up builds the head catalogues of the tenants whose entities changed last (up to
    its bound), so that neither the first write nor the first recall of a process builds one."""
    from mnemolog.eventstore.model import MemoryContent
    from mnemolog.projections.service import MemoryService

    with MemoryService.open(tmp_path / "data") as svc:
        for n, tenant in enumerate(["oldest", "older", "newer", "newest"]):
            svc.run(svc.entities.upsert, ctx(tenant), f"person:{n}", name=f"Ada{n} Lovelace")
        svc.run(svc.memories.add, ctx("none"), [MemoryContent(memory="a tenant without entities")])
    with MemoryService.open(tmp_path / "data") as svc:
        built: list[int] = []
        build = rl.AliasCatalogue.build
        monkeypatch.setattr(rl.AliasCatalogue, "build", staticmethod(lambda entities, **kw: built.append(len(entities)) or build(entities, **kw)))
        assert svc.linking.catalogues.warm(svc.read_conn(), tenants=3) == ["newest", "newer", "older"]
        assert built == [1, 1, 1]
        svc.warm()  # the bound of a server's warm-up: four tenants
        assert built == [1, 1, 1, 1]
        written = svc.run(svc.memories.add, ctx("newest"), [MemoryContent(memory="Ada3 Lovelace wrote the notes")])
        assert written.data["mentions"] == 1 and built == [1, 1, 1, 1]  # linked with the warmed catalogue


def test_a_relink_leaves_memories_a_forget_erased_as_they_are(svc):
    """A memory erased by a forget reads ``[erased: subject forgotten]``: a relink linked it to any entity named
    by a word of that marker ("erased", "subject"), and removed the mentions its real text had made."""
    from mnemolog.eventstore.model import MemoryContent

    upsert(svc, "place:lagos", "Lagos")
    [erased] = svc.run(svc.memories.add, ctx(), [MemoryContent(memory="Philippa Quernstone lives in Lagos", subject="u-9")]).memory_ids
    [kept] = svc.run(svc.memories.add, ctx(), [MemoryContent(memory="the office in Lagos opens at nine")]).memory_ids
    before = [m[:3] for m in mentions(svc) if m[1] == erased]
    assert [m[2] for m in before] == ["place:lagos"]
    svc.forget(ctx(actor="privacy-officer"), "u-9", reason="request 4")
    upsert(svc, "topic:subject", "Subject", aliases=["erased", "forgotten"])
    report = svc.linking.relink(ctx(), commit=True)
    assert [m[:3] for m in mentions(svc) if m[1] == erased] == before, report  # its mention stays, its alias erased
    assert [m[2] for m in mentions(svc) if m[1] == kept] == ["place:lagos"]


def test_after_a_forget_of_the_tenants_key_a_relink_and_the_linker_leave_erased_entities_and_documents_alone(svc, tmp_path):
    """Once ``@tenant`` was forgotten, every entity's name read as the erasure's marker: a new memory quoting it
    was linked to every erased entity, and a relink removed the mentions of the erased documents."""
    from mnemolog.eventstore.model import MemoryContent

    upsert(svc, "place:lagos", "Lagos")
    add_doc(svc, tmp_path, "a.md", "# A\n\nPhilippa lives in Lagos.\n")
    before = [m[:3] for m in mentions(svc)]
    assert {m[1] for m in before} >= {"document:a.md"}
    svc.forget(ctx(actor="privacy-officer"), "@tenant", reason="tenant closed")
    [quoting] = svc.run(svc.memories.add, ctx(), [MemoryContent(memory="the row reads [erased: subject forgotten] now")]).memory_ids
    assert [m for m in mentions(svc) if m[1] == quoting] == []
    report = svc.linking.relink(ctx(), commit=True)
    assert report["add"] == 0 and report["remove"] == 0, report
    assert [m[:3] for m in mentions(svc)] == before


def test_undoing_a_run_after_its_chunks_were_replaced_restores_no_mention_of_the_old_text(svc, tmp_path):
    """A re-import archives the chunks a run linked: undoing the run brought back the mentions it had removed from
    them, so the document (whose new text names no one) mentioned Lovelace again, through an archived chunk."""
    upsert(svc, "person:lovelace", "Lovelace")
    add_doc(svc, tmp_path, "a.md", "# A\n\nAda Lovelace wrote the notes.\n")
    kept = add_doc(svc, tmp_path, "b.md", "# B\n\nLovelace read them.\n")
    upsert(svc, "person:ada", "Ada Lovelace")
    run = svc.run(svc.linking.relink, ctx(), commit=True)
    assert run["remove"] == 2 and run["add"] == 2
    assert add_doc(svc, tmp_path, "a.md", "# A\n\nCharles built the engine.\n").data["version"] == 2
    before = mentions(svc)
    assert {m[2] for m in before} == {"person:lovelace"} and {m[1] for m in before} == {"document:b.md", *kept.memory_ids}

    undone = svc.run(svc.edges.undo_namespace, ctx(), f"mention:{run['run_id']}:")
    assert (undone.data["restored"], undone.data["skipped"]) == (0, 2)
    assert mentions(svc) == before
    assert svc.linking.relink(ctx())["remove"] == 0  # nothing left for a relink to clean up
