"""Text that starts with a token's mark, written through the service with sealing off and on: read back as written
by every read (get, recall, history, entities, documents, mentions), through update, rollback, revert, a rebuild
and an export/import, and the next command still works."""

from __future__ import annotations

import pytest

from mnemolog.eventstore import exchange
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.sealing import ERASED_TEXT, PLAIN_MARK, PREFIX, TOKEN_MARK
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.ingest.documents import document_import, read_document
from mnemolog.projections.recall.searcher import RecallOptions
from mnemolog.projections.service import MemoryService
from tests.projections.test_forget import _projected

MARKS = [TOKEN_MARK + "AAAA", PREFIX + "key:", PLAIN_MARK]


def _ctx() -> CommandContext:
    return CommandContext(tenant="t", actor="tester")  # a correlation of its own


@pytest.fixture(params=["off", "on"])
def encryption(request):
    return request.param


@pytest.fixture
def settings(encryption):
    return Settings({"encryption": encryption}, env={})


@pytest.mark.parametrize("mark", MARKS)
def test_marked_text_round_trips_through_every_command_and_read(svc, tmp_path, mark, encryption):
    text, changed = f"{mark}lighthouse keeper Ombretta", f"{mark}harbour pilot Ombretta"
    [memory] = svc.run(svc.memories.add, _ctx(), [MemoryContent(memory=text, subject="u-1")]).memory_ids
    assert svc.get("t", memory).memory == text
    assert memory in [h.id for h in svc.searcher.recall("t", "lighthouse keeper Ombretta", RecallOptions(limit=10)).hits]
    update = svc.run(svc.memories.update, _ctx(), memory, {"memory": changed})
    assert [v["memory"] for v in svc.history("t", memory)] == [text, changed]
    svc.run(svc.reverts.revert, _ctx(), update.correlation_id)
    assert svc.get("t", memory).memory == text
    svc.run(svc.memories.update, _ctx(), memory, {"memory": changed})
    svc.run(svc.memories.rollback, _ctx(), memory, 1)
    assert svc.get("t", memory).memory == text

    name = f"{mark}Ombretta Quillfeather"
    svc.run(svc.entities.upsert, _ctx(), "person:o1", name=name, aliases=[f"{mark}Ombi"])
    assert svc.knowledge.get("t", "person:o1").name == name
    [mentioning] = svc.run(svc.memories.add, _ctx(), [MemoryContent(memory=f"we met {name} at noon", subject="u-1")]).memory_ids
    assert [link["entity_id"] for link in svc.mention_links("t", mentioning)] == ["person:o1"]
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text(f"# {mark}Guide\n\nOmbretta keeps the light.\n", encoding="utf-8")
    svc.run(svc.documents.import_document, _ctx(), document_import(read_document(docs / "guide.md"), root=docs))
    [document] = svc.knowledge.documents("t")
    assert document.title == f"{mark}Guide"

    [after] = svc.run(svc.memories.add, _ctx(), [MemoryContent(memory="the next memory")]).memory_ids  # the log still reads
    assert svc.get("t", after).memory == "the next memory" and svc.store.verify().ok
    live = _projected(svc)
    svc.runner.rebuild()
    assert _projected(svc) == live

    with open(tmp_path / "log.jsonl", "wb") as out:
        exchange.export(svc.store, out)
    with MemoryService.open(tmp_path / "copy", settings=Settings({"encryption": encryption}, env={})) as copy:
        copy.store.sealer.keys.import_rows(svc.store.sealer.keys.export_rows())
        with open(tmp_path / "log.jsonl", "rb") as lines:
            exchange.import_(copy.store, lines)
        copy.sync()
        assert copy.get("t", memory).memory == text and copy.knowledge.get("t", "person:o1").name == name
        assert copy.knowledge.documents("t")[0].title == f"{mark}Guide"

    if encryption == "on":
        svc.forget(_ctx(), "u-1")
        assert svc.get("t", memory).memory == ERASED_TEXT and svc.get("t", after).memory == "the next memory"
