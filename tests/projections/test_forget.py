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
    assert result.data == {"subject": "u-42", "keys_destroyed": 1, "memories_erased": 30}

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
    with pytest.raises(NotFound):
        svc.forget(CTX, "u-42")  # no key left
    with pytest.raises(ValidationError):
        svc.forget(CTX, "@tenant")
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
        with open(tmp_path / "log.jsonl", "rb") as lines:
            exchange.import_(copy.store, lines)
        # The tenant's own key was not exported: the forgotten subject reads erased, the rest needs its key.
        copy.store.sealer.keys.import_rows([r for r in svc.store.sealer.keys.export_rows() if r["subject"] != "u-42"])
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


def _assert_clean(files: list[Path]) -> None:
    needles = _needles()
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
    with pytest.raises(ValidationError, match="nothing to revert"):
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
