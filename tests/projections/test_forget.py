"""Forgetting a subject: every read erased, every derived row gone, the log still verifiable, no plaintext left anywhere."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from mnemolog.eventstore import exchange
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import Conflict, MemoryContent, NotFound, ValidationError
from mnemolog.eventstore.sealing import ERASED_TEXT
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.recall.searcher import RecallOptions
from mnemolog.projections.service import MemoryService

SECRET = "Xylophonist Quillbert Vandermoot"
SECRET_BACKGROUND = "grew up beside the Zanzibarian lighthouse"
CTX = CommandContext(tenant="t", actor="privacy-officer")


def _seed(svc: MemoryService) -> tuple[list[str], list[str]]:
    mine = svc.run(
        svc.memories.add,
        CTX,
        [
            MemoryContent(memory=f"{SECRET} note {i}", subject="u-42", background=SECRET_BACKGROUND, tags=("vandermoot",), key=f"quillbert {i}")
            for i in range(30)
        ],
    ).memory_ids
    others = svc.run(svc.memories.add, CTX, [MemoryContent(memory=f"ordinary harbour memory {i}") for i in range(30)]).memory_ids
    svc.run(svc.memories.update, CTX, mine[0], {"memory": f"{SECRET} updated"})
    svc.run(svc.memories.archive, CTX, mine[1])
    return list(mine), list(others)


def _recall(svc: MemoryService, query: str) -> list[str]:
    return [h.id for h in svc.searcher.recall("t", query, RecallOptions(limit=50)).hits]


def _rows(svc: MemoryService) -> dict[str, list[tuple]]:
    conn = svc.read_conn()
    return {
        "graph": conn.execute("SELECT tenant, memory_id, version, valid_from, valid_to, status, key, content FROM graph_memories ORDER BY tenant, memory_id, version").fetchall(),
        "fts": conn.execute("SELECT tenant, memory_id, version, valid_from, valid_to, status, text FROM fts_docs ORDER BY tenant, memory_id, version").fetchall(),
        "vectors": conn.execute("SELECT tenant, memory_id, version, valid_from, valid_to, status, content_hash, vector FROM vec_docs ORDER BY tenant, memory_id, version").fetchall(),
    }


def test_forget_erases_every_read_and_keeps_ids_times_and_statuses(svc):
    mine, others = _seed(svc)
    before = {m: svc.get("t", m) for m in mine[:2]}
    assert set(mine) - {mine[1]} <= set(_recall(svc, "Quillbert Vandermoot"))  # mine[1] is archived: out of recall
    result = svc.forget(CTX, "u-42", reason="erasure request 7")
    assert result.data == {"subject": "u-42", "keys_destroyed": 1, "memories_erased": 30, "plaintext_positions": []}

    for memory_id, old in before.items():
        view = svc.get("t", memory_id)
        assert view.erased and view.memory == ERASED_TEXT and view.key is None and view.tags == () and view.background is None
        assert (view.id, view.created_at, view.updated_at, view.status, view.version) == (old.id, old.created_at, old.updated_at, old.status, old.version)
    assert svc.get("t", mine[0], as_of=1).erased  # the past is erased too
    assert not svc.get("t", others[0]).erased and svc.get("t", others[0]).memory == "ordinary harbour memory 0"
    assert not set(mine) & set(_recall(svc, "Quillbert Vandermoot lighthouse"))
    assert others[0] in _recall(svc, "ordinary harbour memory 0")

    history = svc.history("t", mine[0])
    assert [v["memory"] for v in history] == [ERASED_TEXT, ERASED_TEXT] and all(v["erased"] for v in history)
    [forgotten] = svc.forgotten("t", mine[0])
    assert forgotten["subject"] == "u-42" and forgotten["actor"] == "privacy-officer" and forgotten["reason"] == "erasure request 7"
    assert svc.forgotten("t", others[0]) == []


def test_history_of_an_erased_memory_still_names_the_fields_each_update_changed(svc):
    """The text is gone, but which fields an update changed is no personal data, and its event keeps it: the history
    of an erased memory names them as it did before the forget."""
    [memory_id] = svc.run(svc.memories.add, CTX, [MemoryContent(memory=f"{SECRET} note", subject="u-42", tags=("a",))]).memory_ids
    svc.run(svc.memories.update, CTX, memory_id, {"memory": f"{SECRET} edited", "tags": ["a", "b"]}, reason="typo")
    svc.run(svc.memories.update, CTX, memory_id, {"confidence": 0.5})
    svc.run(svc.memories.archive, CTX, memory_id)
    before = [(v["event_type"], v["changed"]) for v in svc.history("t", memory_id)]
    assert before == [("MemoryAdded", []), ("MemoryUpdated", ["memory", "tags"]), ("MemoryUpdated", ["confidence"]), ("MemoryArchived", ["status"])]
    svc.forget(CTX, "u-42", reason="erasure request 8")
    versions = svc.history("t", memory_id)
    assert all(v["erased"] and SECRET not in v["memory"] for v in versions)
    assert [(v["event_type"], v["changed"]) for v in versions] == before
    svc.runner.rebuild()
    assert [(v["event_type"], v["changed"]) for v in svc.history("t", memory_id)] == before


def test_the_log_still_verifies_against_a_digest_taken_before_the_forget(svc):
    _seed(svc)
    digest = svc.store.digest()
    svc.forget(CTX, "u-42")
    assert svc.store.verify().ok
    assert svc.store.verify(against=digest).ok


def test_a_rebuild_after_forget_gives_the_same_projections(svc):
    _seed(svc)
    svc.forget(CTX, "u-42")
    live = _rows(svc)
    svc.runner.rebuild()
    assert _rows(svc) == live


def test_erased_memories_refuse_changes_and_subjects_do_not_mix_in_merges(svc):
    mine, others = _seed(svc)
    with pytest.raises(Conflict, match="different subjects"):
        svc.run(svc.memories.merge, CTX, [mine[2], others[0]])
    svc.forget(CTX, "u-42")
    with pytest.raises(Conflict, match="erased"):
        svc.run(svc.memories.update, CTX, mine[2], {"memory": "new text"})
    with pytest.raises(Conflict, match="erased"):
        svc.run(svc.memories.rollback, CTX, mine[0], 1)
    head = svc.store.last_position()
    assert svc.forget(CTX, "u-42").data["already_forgotten"][0]["position"] == head  # no key left: nothing written
    assert svc.store.last_position() == head
    with pytest.raises(NotFound):
        svc.forget(CTX, "u-404")
    with pytest.raises(ValidationError):
        svc.forget(CTX, "@other")
    assert svc.store.verify().ok


def test_the_subject_can_come_back_with_a_new_key(svc):
    _seed(svc)
    svc.forget(CTX, "u-42")
    [again] = svc.run(svc.memories.add, CTX, [MemoryContent(memory="a fresh start", subject="u-42")]).memory_ids
    assert svc.get("t", again).memory == "a fresh start"
    svc.runner.rebuild()
    assert svc.get("t", again).memory == "a fresh start"


def test_an_export_and_import_keep_a_forgotten_subject_erased(svc, tmp_path):
    mine, others = _seed(svc)
    svc.forget(CTX, "u-42")
    with open(tmp_path / "log.jsonl", "wb") as out:
        exchange.export(svc.store, out)
    with MemoryService.open(tmp_path / "copy") as copy:
        # The key file holds every key but the forgotten subject's: it reads erased, and the import needs no key of it.
        keys = [r for r in svc.store.sealer.keys.export_rows() if r["subject"] != "u-42"]
        with open(tmp_path / "log.jsonl", "rb") as lines:
            exchange.import_(copy.store, lines, keys=keys)
        copy.sync()
        assert copy.get("t", mine[3]).erased and copy.get("t", others[0]).memory == "ordinary harbour memory 0"
        assert copy.store.verify().ok


def _needles() -> list[bytes]:
    """The secret's bytes as UTF-8 and UTF-16, and its words as the full-text index stores them (lowercased, stemmed)."""
    words = re.findall(r"\w+", f"{SECRET} {SECRET_BACKGROUND}")
    out = []
    for word in words:
        if len(word) < 6:
            continue
        for form in (word, word.lower(), word.lower()[:-1]):  # the porter stem drops at most a suffix
            out += [form.encode("utf-8"), form.encode("utf-16-le"), form.encode("utf-16-be")]
    return out


def test_no_plaintext_of_a_forgotten_subject_is_left_in_any_file(tmp_path):
    data = tmp_path / "data"
    svc = MemoryService.open(data)
    try:
        _seed(svc)
        svc.scrub()  # the vector index saved with the subject's vectors in it
        backups = data / "backups"
        backups.mkdir()
        with open(backups / "before-forget.jsonl", "wb") as out:  # a backup written while the key existed
            exchange.export(svc.store, out)
        svc.forget(CTX, "u-42")
        svc.runner.rebuild(["fts"])  # a rebuild must not bring anything back either
        files = [p for p in data.rglob("*") if p.is_file()]
        assert {"events.db", "projections.db", "keys.db", "vectors.usearch"} <= {p.name for p in files}
        _assert_clean(files)  # while open: WAL and SHM files included
    finally:
        svc.close()
    _assert_clean([p for p in data.rglob("*") if p.is_file()])


def _assert_clean(files: list[Path], needles: list[bytes] | None = None) -> None:
    needles = needles or _needles()
    for path in files:
        content = path.read_bytes()
        found = [n for n in needles if n in content]
        assert not found, f"{path.name} still holds {found[:3]}"


def test_the_forget_event_is_in_the_log_without_personal_data(svc):
    _seed(svc)
    svc.forget(CTX, "u-42", reason="request 7")
    [recorded] = svc.store.read_all(types=["SubjectForgotten"])
    assert recorded.metadata.actor == "privacy-officer" and recorded.event.subject == "u-42" and len(recorded.event.memory_ids) == 30
    stored = sqlite3.connect(svc.data_dir / "events.db").execute("SELECT payload FROM events WHERE type = 'SubjectForgotten'").fetchone()[0]
    assert "Quillbert" not in stored and "lighthouse" not in stored


def test_a_forget_cannot_be_reverted_and_a_revert_does_not_bring_erased_text_back(svc):
    mine, _ = _seed(svc)
    update = svc.run(svc.memories.update, CommandContext(tenant="t"), mine[3], {"memory": f"{SECRET} again"})
    forget = svc.forget(CommandContext(tenant="t", actor="privacy-officer"), "u-42")
    with pytest.raises(ValidationError, match="a forget cannot be reverted"):
        svc.run(svc.reverts.revert, CommandContext(tenant="t"), forget.correlation_id)
    # Both versions read erased, so reverting the update has nothing to change in the memory.
    svc.run(svc.reverts.revert, CommandContext(tenant="t"), update.correlation_id)
    assert svc.get("t", mine[3]).erased and svc.get("t", mine[3]).version == 2 and svc.store.verify().ok


def test_a_retried_forget_finishes_destroying_the_keys(svc):
    _seed(svc)
    keys = svc.store.sealer.keys
    destroy = keys.forget
    keys.forget = lambda ids: 0  # the first attempt stops after its append
    ctx = CommandContext(tenant="t", actor="privacy-officer", idempotency_key="erase-u-42")
    try:
        first = svc.forget(ctx, "u-42")
    finally:
        keys.forget = destroy
    [key_id] = svc.store.read_all(types=["SubjectForgotten"])[0].event.key_ids
    assert keys.key(key_id) not in (None, b"")  # still held
    again = svc.forget(CommandContext(tenant="t", actor="privacy-officer", idempotency_key="erase-u-42"), "u-42")
    assert again.replayed and again.first_position == first.first_position
    assert keys.key(key_id) == b""


# -- forgetting the tenant's own key: entities, relations, documents, chunks, memories and their mentions ---------------

TENANT_SECRETS = ("Quorvath Belisande", "Quorvie", "Vellmora", "cartographer", "Ashgrove", "Thistlewick", "Marrowdale", "Brindlecombe", "Gallowmere")


def _tenant_needles() -> list[bytes]:
    out = []
    for word in re.findall(r"\w+", " ".join(TENANT_SECRETS)):
        for form in (word, word.lower(), word.lower()[:-1]):
            out += [form.encode("utf-8"), form.encode("utf-16-le"), form.encode("utf-16-be")]
    return out


def _seed_tenant(svc: MemoryService, docs: Path) -> dict[str, str]:
    from mnemolog.projections.ingest.documents import document_import, read_document

    svc.run(
        svc.entities.upsert, CTX, "person:q1", name="Quorvath Belisande", entity_type="person", description="cartographer of the north",
        aliases=["Quorvie"], tags=["staff"], properties={"born": "Ashgrove"},
    )  # fmt: skip
    svc.run(svc.entities.upsert, CTX, "org:v1", name="Vellmora Institute", entity_type="org", aliases=["Vellmora"])
    svc.run(svc.entities.set_relation, CTX, "person:q1", "org:v1", "works_at", weight=0.9)
    docs.mkdir()
    (docs / "doc1.md").write_text("# Thistlewick Handbook\n\nQuorvath Belisande drafted the charter in Marrowdale.\n", encoding="utf-8")
    svc.run(svc.documents.import_document, CTX, document_import(read_document(docs / "doc1.md"), root=docs, source_url="https://example.org/Gallowmere"))
    [memory] = svc.run(svc.memories.add, CTX, [MemoryContent(memory="Quorvath Belisande met the elders", background="Brindlecombe")]).memory_ids
    [named] = svc.run(svc.memories.add, CTX, [MemoryContent(memory="an ordinary harbour note", subject="u-9")]).memory_ids
    return {"memory": memory, "named": named, "doc": svc.knowledge.documents("t")[0].doc_id}


def _projected(svc: MemoryService) -> dict[str, list[tuple]]:
    conn = svc.read_conn()
    tables = {
        "kg_entities": "tenant, entity_id, name, entity_type, description, aliases, tags, properties, search_text, created_position, valid_from, valid_to, erased",
        "kg_aliases": "tenant, entity_id, alias, alias_key, kind, valid_from, valid_to",
        "kg_relations": "tenant, source_id, target_id, relation_type, weight, valid_from, valid_to",
        "kg_documents": "tenant, doc_id, version, title, path, source_url, chunk_ids, valid_from, valid_to, erased",
        "graph_edges": "tenant, edge_id, edge_type, source, target, weight, properties, valid_from, valid_to, subject",
    }
    return {t: conn.execute(f"SELECT {cols} FROM {t} ORDER BY {cols}").fetchall() for t, cols in tables.items()} | _rows(svc)


def test_forgetting_the_tenants_key_erases_its_entities_documents_and_memories_everywhere(tmp_path):
    data = tmp_path / "data"
    svc = MemoryService.open(data)
    try:
        ids = _seed_tenant(svc, tmp_path / "docs")
        [link] = svc.mention_links("t", ids["memory"])
        assert link["entity_id"] == "person:q1" and link["alias"] == "quorvath belisande"
        before = svc.knowledge.get("t", "person:q1")
        svc.scrub()  # the vector index saved with the tenant's vectors in it
        svc.warm()  # and the lexical postings, with the tenant's words
        assert _tenant_needles()[3] in (data / "fts.postings").read_bytes()
        digest = svc.store.digest()
        keys = svc.store.sealer.keys
        [tenant_key] = [keys.key(k) for k in keys.subject_keys("t", None)]

        result = svc.forget(CTX, "@tenant", reason="tenant closed")
        assert result.data["subject"] == "@tenant" and result.data["memories_erased"] >= 2  # the memory and the document's chunk

        entity = svc.knowledge.get("t", "person:q1")
        assert entity.erased and entity.name == ERASED_TEXT and entity.aliases == [] and entity.description == "" and entity.properties == {}
        assert (entity.id, entity.entity_type, entity.tags, entity.created_position, entity.valid_from) == (
            before.id, before.entity_type, before.tags, before.created_position, before.valid_from,
        )  # fmt: skip
        assert [r.target_id for r in svc.knowledge.relations_of("t", "person:q1")] == ["org:v1"]  # the relation's ids and type stay
        document = svc.knowledge.document("t", ids["doc"])
        assert document.erased and document.title == ERASED_TEXT and document.path is None and document.source_url is None and document.chunk_ids
        assert svc.get("t", document.chunk_ids[0]).erased and svc.get("t", ids["memory"]).erased
        assert svc.get("t", ids["named"]).memory == "an ordinary harbour note"  # a named subject has its own key
        assert [link["alias"] for link in svc.mention_links("t", ids["memory"])] == [None]
        assert svc.knowledge.find_by_keywords("t", "quorvath") == [] and not _recall(svc, "Quorvath Belisande Thistlewick Marrowdale")
        [forgotten] = svc.forgotten("t", ids["memory"])
        assert forgotten["subject"] == "@tenant" and forgotten["reason"] == "tenant closed"

        assert svc.store.verify().ok and svc.store.verify(against=digest).ok
        live = _projected(svc)
        svc.runner.rebuild()  # the log alone gives the same erased projections
        assert _projected(svc) == live
        svc.scrub()

        # The tenant goes on with a new key.
        svc.run(svc.entities.upsert, CTX, "person:n1", name="Newcomer Person")
        assert svc.knowledge.get("t", "person:n1").name == "Newcomer Person"
        files = [p for p in data.rglob("*") if p.is_file()]
        assert {"events.db", "projections.db", "keys.db", "vectors.usearch"} <= {p.name for p in files}
        _assert_clean(files, _tenant_needles() + [tenant_key])  # while open: WAL and SHM files included; the key's bytes are gone too
    finally:
        svc.close()
    _assert_clean([p for p in data.rglob("*") if p.is_file()], _tenant_needles() + [tenant_key])

    # An export holds ciphertext only, and a copy of the log reads the tenant as erased.
    with MemoryService.open(data) as again, open(tmp_path / "log.jsonl", "wb") as out:
        exchange.export(again.store, out)
        exported_keys = again.store.sealer.keys.export_rows()
    _assert_clean([tmp_path / "log.jsonl"], _tenant_needles())
    with MemoryService.open(tmp_path / "copy") as copy:
        copy.store.sealer.keys.import_rows(exported_keys)
        with open(tmp_path / "log.jsonl", "rb") as lines:
            exchange.import_(copy.store, lines)
        copy.sync()
        assert copy.knowledge.get("t", "person:q1").erased and copy.get("t", ids["named"]).memory == "an ordinary harbour note"
        assert copy.knowledge.get("t", "person:n1").name == "Newcomer Person" and copy.store.verify().ok


def test_forgetting_a_subject_erases_the_aliases_its_memories_mentions_matched(svc):
    svc.run(svc.entities.upsert, CTX, "person:z1", name="Zebulon Harrowgate")
    [mine] = svc.run(svc.memories.add, CTX, [MemoryContent(memory="Zebulon Harrowgate called at noon", subject="u-42")]).memory_ids
    [tenants] = svc.run(svc.memories.add, CTX, [MemoryContent(memory="Zebulon Harrowgate owns the mill")]).memory_ids
    assert [link["alias"] for link in svc.mention_links("t", mine)] == ["zebulon harrowgate"]
    svc.run(svc.memories.update, CTX, mine, {"memory": "called at noon"})  # the mention is unlinked, its reason naming the entity's id
    svc.run(svc.memories.update, CTX, mine, {"memory": "Zebulon Harrowgate called at noon"})
    payloads = [p for (p,) in sqlite3.connect(svc.data_dir / "events.db").execute("SELECT payload FROM events")]
    assert not [p for p in payloads if "harrowgate" in p.lower()]  # aliases, texts and names sealed, reasons without them

    svc.forget(CTX, "u-42")
    links = svc.mention_links("t", mine)
    assert len(links) == 2 and all(link["entity_id"] == "person:z1" and link["alias"] is None for link in links)  # the links stay, their aliases are gone
    assert [link["alias"] for link in svc.mention_links("t", tenants)] == ["zebulon harrowgate"]
    assert svc.knowledge.get("t", "person:z1").name == "Zebulon Harrowgate"  # the tenant's entity is not the subject's
    live = _projected(svc)
    svc.runner.rebuild()
    assert _projected(svc) == live


def test_a_memory_given_to_a_subject_later_reads_erased_in_every_version_once_the_subject_is_forgotten(svc):
    """A memory written without a subject (the tenant's key), then given one: forgetting the subject erased it from
    every projection, but its history still showed the first version's text, sealed with the tenant's key."""
    [memory] = svc.run(svc.memories.add, CTX, [MemoryContent(memory=f"{SECRET} has a hazelnut allergy", tags=("health",))]).memory_ids
    svc.run(svc.memories.update, CTX, memory, {"subject": "u-42"})
    [other] = svc.run(svc.memories.add, CTX, [MemoryContent(memory="ordinary harbour memory")]).memory_ids
    svc.forget(CTX, "u-42", reason="request 7")
    history = svc.history_view("t", memory)
    assert [v["memory"] for v in history["versions"]] == [ERASED_TEXT, ERASED_TEXT] and all(v["erased"] for v in history["versions"])
    assert all(v["tags"] == [] and v["key"] is None for v in history["versions"])
    assert [v["memory"] for v in svc.history_view("t", memory, as_of=1)["versions"]] == [ERASED_TEXT]
    assert [f["reason"] for f in history["forgotten"]] == ["request 7"]
    assert svc.get("t", memory).erased and svc.get("t", memory, as_of=1).erased
    assert svc.history("t", other)[0]["memory"] == "ordinary harbour memory"


def test_a_forget_in_a_dropped_tenant_names_the_memories_its_keys_sealed(svc):
    """The projections hold nothing of a dropped tenant, so a forget of one of its subjects named no memory and
    answered "0 memories erased", while its memories were in the log (and the drop's backup) sealed with its keys."""
    mine, others = _seed(svc)
    svc.drop_tenant(CTX, reason="closed")
    result = svc.forget(CTX, "u-42", reason="request 7")
    assert result.data["memories_erased"] == len(mine) and result.data["keys_destroyed"] == 1
    [event] = svc.store.read_all(types=["SubjectForgotten"])
    assert set(event.event.memory_ids) == set(mine) and not set(event.event.memory_ids) & set(others)
    assert svc.store.verify().ok


def _fingerprints(svc: MemoryService) -> list[str]:
    conn = sqlite3.connect(svc.data_dir / "events.db")
    try:
        return [row[0] for row in conn.execute("SELECT fingerprint FROM idempotency_keys ORDER BY first_position")]
    finally:
        conn.close()


def test_an_idempotency_key_keeps_no_digest_of_a_forgotten_text(tmp_path):
    """The key's fingerprint was a plain SHA-256 of the request, text included, in an append-only table: after
    the forget, a guess of the text could be checked against it. Sealed, it is keyed with the subject's key."""
    from mnemolog.eventstore import IdempotencyConflict

    request = [MemoryContent(memory="Marguerite is allergic to hazelnuts", subject="u-7")]
    stored = []
    for name in ("a", "b"):
        with MemoryService.open(tmp_path / name) as svc:
            ctx = CommandContext(tenant="t", idempotency_key="add-1")
            first = svc.run(svc.memories.add, ctx, request)
            assert svc.run(svc.memories.add, ctx, request).replayed  # a retry still answers as the first did
            with pytest.raises(IdempotencyConflict):
                svc.run(svc.memories.add, ctx, [MemoryContent(memory="another text", subject="u-7")])
            [print_] = _fingerprints(svc)
            stored.append(print_)
            svc.forget(CommandContext(tenant="t"), "u-7")
            with pytest.raises(IdempotencyConflict):  # the key's request can no longer be told: it was erased
                svc.run(svc.memories.add, ctx, request)
            assert first.memory_ids
    with MemoryService.open(tmp_path / "plain", settings=Settings({"encryption": "off"}, env={})) as svc:
        svc.run(svc.memories.add, CommandContext(tenant="t", idempotency_key="add-1"), request)
        [plain] = _fingerprints(svc)  # unsealed, the text is in the log anyway: the plain digest, as anyone can compute it
    assert stored[0] != stored[1] and plain not in stored  # two stores' keys differ; no plain digest to compare a guess with


def test_a_document_imported_again_after_the_tenants_key_was_forgotten_is_a_new_version_of_its_text(tmp_path):
    """The re-import of the same file was 'unchanged': the erased version kept its content hash and (taken for the
    text's own) its erased title, so the document stayed erased, its chunks found by no search, whatever was imported."""
    from mnemolog.projections.ingest.documents import document_import, read_document

    svc = MemoryService.open(tmp_path / "data")
    try:
        ids = _seed_tenant(svc, tmp_path / "docs")
        svc.forget(CTX, "@tenant", reason="tenant closed")
        again = svc.run(
            svc.documents.import_document, CTX, document_import(read_document(tmp_path / "docs" / "doc1.md"), root=tmp_path / "docs", collection="kb")
        )
        assert (again.data["status"], again.data["version"], again.data["title"]) == ("imported", 2, "Thistlewick Handbook")
        document = svc.knowledge.document("t", ids["doc"])
        assert not document.erased and document.title == "Thistlewick Handbook" and document.source_url is None  # nothing kept of the erased version
        [chunk] = document.chunk_ids
        assert svc.get("t", chunk).memory.startswith("# Thistlewick Handbook") and _recall(svc, "Marrowdale charter")[0] == chunk
        unchanged = svc.run(svc.documents.import_document, CTX, document_import(read_document(tmp_path / "docs" / "doc1.md"), root=tmp_path / "docs"))
        assert unchanged.data["status"] == "unchanged"  # and imported again, it is unchanged as ever
    finally:
        svc.close()


@pytest.mark.parametrize("blank", ["", "   ", "\t"])
def test_a_blank_subject_is_refused_and_the_tenants_key_stays(svc, blank):
    """The key store holds the tenant's own key under the empty subject: a forget of ``""`` destroyed it (and erased
    every memory without a subject, for good). A blank subject is refused, naming the field, and nothing is written."""
    _, others = _seed(svc)
    head = svc.store.last_position()
    with pytest.raises(ValidationError, match="must not be blank") as refused:
        svc.forget(CTX, blank, reason="typo")
    assert refused.value.field == "subject" and svc.store.last_position() == head
    assert svc.get("t", others[0]).memory == "ordinary harbour memory 0" and svc.store.sealer.keys.subject_keys("t", "")


@pytest.mark.parametrize("first, then, forgotten", [("u-42", "u-43", "u-42"), (None, "u-43", "@tenant"), ("u-42", None, "u-42")])
def test_a_memory_given_another_subject_since_keeps_the_versions_written_for_it(tmp_path, first, then, forgotten):
    """``forget @tenant`` erased a memory the tenant had given to a named subject since (and a forget of that
    subject, one given back to the tenant), its versions of the other subject too: data lost, though its key stays."""
    from mnemolog.eventstore.commands.subjects import TENANT_KEY

    data = tmp_path / "data"
    with MemoryService.open(data) as svc:
        [memory] = svc.run(svc.memories.add, CTX, [MemoryContent(memory=f"{SECRET} plays the oboe", subject=first)]).memory_ids
        svc.run(svc.memories.update, CTX, memory, {"subject": then, "memory": "Lemonvexal Mangowhirl keeps the hives"})
        svc.run(svc.memories.archive, CTX, memory)  # a later version of the other subject too
        [other] = svc.run(svc.memories.add, CTX, [MemoryContent(memory=f"{SECRET} sails", subject=first)]).memory_ids
        svc.forget(CTX, TENANT_KEY if forgotten == "@tenant" else forgotten, reason="request 9")
        history = svc.history_view("t", memory)["versions"]
        assert [v["memory"] for v in history] == [ERASED_TEXT] + ["Lemonvexal Mangowhirl keeps the hives"] * 2
        assert not svc.get("t", memory).erased and svc.get("t", memory).status == "archived" and svc.get("t", memory, as_of=1).erased
        assert svc.get("t", other).erased
        svc.run(svc.memories.restore, CTX, memory)
        assert _recall(svc, "Lemonvexal hives") == [memory] and _recall(svc, "Quillbert oboe") == []
        live = _rows(svc)
        svc.runner.rebuild()
        assert _rows(svc) == live
    _assert_clean([p for p in data.rglob("*") if p.is_file()])
