"""Document import: chunks as RawFileMemory memories, versions, idempotency, bad files, PDFs, mentions."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from mnemolog.eventstore.commands import CommandContext
from mnemolog.projections.ingest.documents import document_import
from mnemolog.projections.ingest.documents import read_document
from mnemolog.eventstore.model import ValidationError
from mnemolog.projections.entities import projector as ents
from mnemolog.projections.filters import SearchFilters
from mnemolog.projections.recall.searcher import RecallOptions
from mnemolog.projections.service import MemoryService
from mnemolog.tools import cli


def ctx(tenant: str = "t", **kw) -> CommandContext:
    return CommandContext(tenant=tenant, **kw)


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def do_import(svc, path: Path, tenant: str = "t", **options):
    options.setdefault("root", path.parent)  # the id is the file's name
    return svc.run(svc.documents.import_document, ctx(tenant), document_import(read_document(path), **options))


def make_pdf(pages: list[str], title: str = "Manual") -> bytes:
    from pypdf import PdfWriter
    from pypdf.generic import ContentStream, DictionaryObject, NameObject

    writer = PdfWriter()
    for text in pages:
        page = writer.add_blank_page(612, 792)
        font = DictionaryObject(
            {NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"), NameObject("/BaseFont"): NameObject("/Helvetica")}
        )
        page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})
        stream = ContentStream(None, writer)
        stream.set_data(f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode())
        page.replace_contents(stream)
    writer.add_metadata({"/Title": title})
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def chunk_rows(svc, doc_id: str, tenant: str = "t"):
    rows = svc.read_conn().execute(
        "SELECT memory_id, status, content FROM graph_memories WHERE tenant = ? AND doc_id = ? AND valid_to IS NULL ORDER BY memory_id",
        (tenant, doc_id),
    )
    return [(r[0], r[1], json.loads(r[2])) for r in rows]


NOTES = "# Field notes\n\nThe river was high.\n\n## Camp\n\nWe slept near the bridge.\n"


def test_import_writes_chunks_and_a_document_in_one_batch(svc, tmp_path):
    path = write(tmp_path / "notes.md", NOTES)
    result = do_import(svc, path, collection="travel", lang="en", source_url="https://example.org/notes", model="none", doc_type="diary")
    assert result.data["status"] == "imported" and result.data["version"] == 1 and result.data["doc_id"] == "notes.md"
    types = [r.type for r in svc.store.read_all(after=result.first_position - 1, until=result.last_position)]
    assert types.count("MemoryAdded") == result.data["chunks"] == 2 and types.count("DocumentImported") == 1
    assert len({r.metadata.correlation_id for r in svc.store.read_all(after=result.first_position - 1, until=result.last_position)}) == 1
    rows = chunk_rows(svc, "notes.md")
    assert [r[1] for r in rows] == ["activated", "activated"]
    content = rows[1][2]
    assert content["memory_type"] == "RawFileMemory"
    assert {k: content[k] for k in ("collection", "doc_type", "doc_id", "doc_version", "lang", "source_url", "model")} == {
        "collection": "travel", "doc_type": "diary", "doc_id": "notes.md", "doc_version": "1", "lang": "en",
        "source_url": "https://example.org/notes", "model": "none",
    }
    props = content["properties"]
    assert props["heading"] == "Camp" and props["chunk_index"] == 1
    assert read_document(path).text_pages[0][props["start"] : props["end"]] == content["memory"]
    doc = ents.get_document(svc.read_conn(), "t", "notes.md")
    assert (doc.version, doc.title, doc.format, doc.collection, doc.chunk_ids) == (1, "Field notes", "markdown", "travel", [r[0] for r in rows])
    assert svc.facts.node_exists("t", "document:notes.md")
    # Every recall channel and filter sees the chunks.
    hits = svc.searcher.recall("t", "where did we sleep near the bridge", RecallOptions(filters=SearchFilters(doc_ids=("notes.md",)))).hits
    assert hits and hits[0].id == rows[1][0]


def test_reimporting_unchanged_content_writes_nothing(svc, tmp_path):
    path = write(tmp_path / "notes.md", NOTES)
    do_import(svc, path, collection="travel")
    head = svc.store.last_position()
    again = do_import(svc, path, collection="travel")
    assert again.first_position is None and again.data["status"] == "unchanged" and again.data["version"] == 1
    assert svc.store.last_position() == head
    (tmp_path / "elsewhere").mkdir()
    moved = write(tmp_path / "elsewhere" / "notes.md", NOTES)  # read from another place, under the same id
    assert do_import(svc, moved, collection="travel", doc_id="notes.md").data["status"] == "unchanged"
    titled = do_import(svc, path, title="Field notes, Lisbon")
    assert titled.data["status"] == "imported" and titled.data["version"] == 2
    # What a re-import does not say stays: the collection, and the title given before (the text's own heading is another).
    again = do_import(svc, path)
    assert (again.data["status"], again.data["version"], again.data["title"]) == ("unchanged", 2, "Field notes, Lisbon")
    write(path, NOTES + "\nOne more line.\n")
    changed = do_import(svc, path)
    assert changed.data["version"] == 3
    doc = ents.get_document(svc.read_conn(), "t", "notes.md")
    assert (doc.collection, doc.title) == ("travel", "Field notes")  # a changed text's title is its own heading again


@pytest.mark.parametrize("changed", [{"collection": "other"}, {"title": "Another title"}, {"lang": "en"}, {"source_url": "https://example.org/notes"}])
def test_reimporting_the_same_content_with_other_metadata_is_a_new_version(svc, tmp_path, changed):
    """The new metadata was dropped: "unchanged", and the document and its chunks kept the first import's."""
    path = write(tmp_path / "notes.md", NOTES)
    first = do_import(svc, path, collection="travel")
    again = do_import(svc, path, **{"collection": "travel", **changed})
    assert again.data["status"] == "imported" and again.data["version"] == 2 and again.data["archived"] == len(first.memory_ids)
    doc = ents.get_document(svc.read_conn(), "t", "notes.md")
    for name, value in changed.items():
        assert getattr(doc, name) == value
    chunk = svc.get("t", again.memory_ids[0])
    assert chunk.metadata["collection"] == changed.get("collection", "travel") and chunk.properties["title"] == doc.title
    assert do_import(svc, path, **{"collection": "travel", **changed}).data["status"] == "unchanged"


def test_changed_content_is_a_new_version_and_old_chunks_are_archived(svc, tmp_path):
    path = write(tmp_path / "notes.md", NOTES)
    first = do_import(svc, path)
    old_ids = list(first.memory_ids)
    write(path, NOTES + "\n## Day two\n\nThe bridge was closed.\n")
    second = do_import(svc, path)
    assert second.data["version"] == 2 and second.data["archived"] == 2 and second.data["chunks"] == 3
    rows = {m: (status, c["doc_version"]) for m, status, c in chunk_rows(svc, "notes.md")}
    assert all(rows[m] == ("archived", "1") for m in old_ids)  # archived, never deleted
    assert [rows[m] for m in second.memory_ids] == [("activated", "2")] * 3
    doc = ents.get_document(svc.read_conn(), "t", "notes.md")
    assert doc.version == 2 and doc.chunk_ids == list(second.memory_ids)
    assert ents.get_document(svc.read_conn(), "t", "notes.md", as_of=first.last_position).chunk_ids == old_ids
    history = svc.history("t", old_ids[0])
    assert [v["status"] for v in history] == ["activated", "archived"]


def test_import_links_mentions_and_reimport_moves_them(svc, tmp_path):
    svc.run(svc.entities.upsert, ctx(), "place:bridge", name="Old Bridge", aliases=["the bridge"])
    path = write(tmp_path / "notes.md", NOTES)
    first = do_import(svc, path)
    edges = svc.edges_of("t", "place:bridge")
    sources = sorted(e.source for e in edges)
    assert sources == sorted([first.memory_ids[1], "document:notes.md"]) and all(e.edge_type == "MENTIONS" for e in edges)
    doc_edge = next(e for e in edges if e.source == "document:notes.md")
    assert doc_edge.properties["evidence"] == [first.memory_ids[1]] and doc_edge.properties["alias"] == "the bridge"
    write(path, NOTES.replace("river", "creek"))
    second = do_import(svc, path)
    live = {e.source for e in svc.edges_of("t", "place:bridge")}
    assert live == {second.memory_ids[1], "document:notes.md"}


def test_a_revert_forced_past_a_later_import_leaves_the_document_mentioning_what_its_version_does(svc, tmp_path):
    """Versions 1, 2, 3 each mention the bridge; reverting 2 forced takes the document back to 1 and deletes 3's chunks.
    3's mention from the document node stayed (its evidence a deleted chunk), and stood in the way of 1's, never linked back."""
    svc.run(svc.entities.upsert, ctx(), "place:bridge", name="Old Bridge", aliases=["the bridge"])
    path = write(tmp_path / "notes.md", NOTES)
    first = do_import(svc, path)
    before = {(e.edge_id, e.source) for e in svc.edges_of("t", "place:bridge")}
    second = do_import(svc, write(path, NOTES.replace("river", "creek")))
    third = do_import(svc, write(path, NOTES.replace("river", "stream")))
    done = svc.run(svc.reverts.revert, ctx(), second.correlation_id, force=True)
    assert done.data["forced"] is True
    assert {(e.edge_id, e.source) for e in svc.edges_of("t", "place:bridge")} == before  # version 1's mentions, and only they
    assert {r[0]: r[1] for r in chunk_rows(svc, "notes.md")}[third.memory_ids[1]] == "deleted"
    assert ents.get_document(svc.read_conn(), "t", "notes.md").chunk_ids == list(first.memory_ids)


def test_revert_then_reimport_writes_again(svc, tmp_path):
    path = write(tmp_path / "notes.md", NOTES)
    first = do_import(svc, path)
    svc.run(svc.reverts.revert, ctx(), first.correlation_id)
    assert {status for _, status, _ in chunk_rows(svc, "notes.md")} == {"deleted"}
    again = do_import(svc, path)
    assert again.data["status"] == "imported" and again.data["version"] == 2


def test_pdf_pages_are_kept(svc, tmp_path):
    path = tmp_path / "manual.pdf"
    path.write_bytes(make_pdf(["Page one talks about valves.", "Page two talks about pumps."]))
    result = do_import(svc, path)
    rows = chunk_rows(svc, "manual.pdf")
    pages = sorted((c["properties"]["page"], c["memory"]) for _, _, c in rows)
    assert pages == [(1, "Page one talks about valves."), (2, "Page two talks about pumps.")]
    doc = ents.get_document(svc.read_conn(), "t", "manual.pdf")
    assert (doc.format, doc.pages, doc.title, result.data["chunks"]) == ("pdf", 2, "Manual", 2)


def test_bad_doc_id_is_refused(svc, tmp_path):
    path = write(tmp_path / "notes.md", NOTES)
    with pytest.raises(ValidationError):
        do_import(svc, path, doc_id="../escape")


def test_cli_skips_a_corrupt_file_and_imports_the_rest(tmp_path, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    write(docs / "a.md", "# A\n\nAlpha text.\n")
    write(docs / "b.txt", "Beta text.\n")
    (docs / "c.pdf").write_bytes(b"%PDF-1.4 this is not a pdf")
    (docs / "d.pdf").write_bytes(make_pdf(["Delta text."]))
    data = str(tmp_path / "data")
    code = cli.main(["--data-dir", data, "import", "docs", str(docs), "--root", str(docs), "--collection", "kb", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    assert (report["documents"], report["chunks"], report["skipped"], report["failed"]) == (3, 3, 0, 1)
    [failed] = [r for r in report["results"] if r["status"] == "failed"]
    assert failed["path"].endswith("c.pdf") and failed["reason"] == "corrupt"
    assert cli.main(["--data-dir", data, "import", "docs", str(docs / "a.md"), str(docs / "b.txt"), "--root", str(docs)]) == 0
    assert "documents=0 chunks=0 skipped=2 failed=0" in capsys.readouterr().out
    with MemoryService.open(data) as service:
        assert [d.doc_id for d in ents.list_documents(service.read_conn(), "default", collection="kb")] == ["a.md", "b.txt", "d.pdf"]


def test_cli_reports_a_file_whose_name_is_not_utf8_and_imports_the_rest(tmp_path, capsys):
    """Such a name (kept by Python as lone surrogates) failed its write with a UnicodeEncodeError: the command stopped
    at it (exit 2, no report, no file named), the files before it imported and those after it not."""
    import os

    docs = tmp_path / "docs"
    docs.mkdir()
    write(docs / "a.md", "Alpha text.\n")
    (Path(os.fsdecode(bytes(docs) + b"/b\xffname.md"))).write_text("Beta text.\n")
    write(docs / "c.md", "Gamma text.\n")
    (docs / "d.md").symlink_to(docs / "gone.md")  # a link to nothing: left out without a word, it is reported too
    data = str(tmp_path / "data")
    code = cli.main(["--data-dir", data, "import", "docs", str(docs), "--root", str(docs), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert (code, report["documents"], report["failed"]) == (1, 2, 2)
    failed, gone = [r for r in report["results"] if r["status"] == "failed"]
    assert failed["path"].endswith("b\\udcffname.md") and "not valid UTF-8" in failed["error"]
    assert gone["path"].endswith("d.md") and gone["reason"] == "unreadable"
    with MemoryService.open(data) as service:
        assert [d.doc_id for d in ents.list_documents(service.read_conn(), "default")] == ["a.md", "c.md"]


def test_cli_takes_paths_after_options(tmp_path, capsys):
    """``import docs --root DIR a.md b.txt`` was refused (exit 2, "unrecognized arguments: a.md b.txt"): the paths
    had to come before every option."""
    docs = tmp_path / "docs"
    docs.mkdir()
    write(docs / "a.md", "# A\n\nAlpha text.\n")
    write(docs / "b.txt", "Beta text.\n")
    data = str(tmp_path / "data")
    code = cli.main(["--data-dir", data, "import", "docs", "--root", str(docs), "--collection", "kb", str(docs / "a.md"), "--lang", "en", str(docs / "b.txt")])
    assert (code, capsys.readouterr().out.splitlines()[-1].split(" correlation=")[0]) == (0, "documents=2 chunks=2 skipped=0 failed=0")
    with MemoryService.open(data) as service:
        assert [d.doc_id for d in ents.list_documents(service.read_conn(), "default", collection="kb")] == ["a.md", "b.txt"]
    assert cli.main(["--data-dir", data, "import", "docs", "--root", str(docs), str(docs / "a.md"), "--bogus"]) == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_cli_log_import_still_works(tmp_path, capsys):
    source = str(tmp_path / "source")
    with MemoryService.open(source) as service:
        service.run(service.entities.upsert, ctx("default"), "e", name="E")
    export, keys = tmp_path / "log.jsonl", tmp_path / "log.keys"  # the entity's name is sealed: its key travels apart
    assert cli.main(["--data-dir", source, "export", "-o", str(export), "--with-keys", str(keys)]) == 0
    target = str(tmp_path / "target")
    assert cli.main(["--data-dir", target, "import", str(export), "--keys", str(keys)]) == 0
    assert "imported 1" in capsys.readouterr().out
    assert cli.main(["--data-dir", target, "import", str(export), "extra.md"]) == 2
    with MemoryService.open(target) as service:
        assert ents.get_entity(service.read_conn(), "default", "e").name == "E"


def test_a_title_or_heading_found_in_the_text_is_shortened_and_a_long_one_given_is_refused(svc, tmp_path):
    """Every chunk carries the title and its heading: a heading line of 200,000 characters was written into each of
    the chunks under it, twice (as the title too), and a title given of any length into every chunk."""
    from mnemolog.eventstore.commands.documents import DOCUMENT_FIELD_MAX

    limit = DOCUMENT_FIELD_MAX["title"]
    body = "\n\n".join(f"Paragraph {i} says something of its own about the river." for i in range(60))
    path = write(tmp_path / "long.md", "# " + "word " * 40_000 + "\n\n" + body + "\n")
    result = do_import(svc, path, max_chars=200)
    assert result.data["status"] == "imported" and result.data["chunks"] > 10
    assert len(result.data["title"]) <= limit and result.data["title"].startswith("word word")
    rows = chunk_rows(svc, "long.md")
    assert all(len(r[2]["properties"]["title"]) <= limit and len(r[2]["properties"].get("heading", "")) <= limit for r in rows)
    assert result.data["title"].endswith("…") and not result.data["title"][:-1].endswith(" ")
    assert any(r[2]["memory"].startswith("# word word") for r in rows)  # the text itself is whole

    cjk = write(tmp_path / "cjk.md", "# " + "会議の記録" * 1000 + "\n\nbody\n")
    assert len(do_import(svc, cjk).data["title"]) <= limit

    head = svc.store.last_position()
    other = write(tmp_path / "other.md", "Some text.\n")
    with pytest.raises(ValidationError) as refused:
        do_import(svc, other, title="T" * (limit + 1))
    assert refused.value.field == "title"
    with pytest.raises(ValidationError) as refused:
        do_import(svc, other, collection="c" * (DOCUMENT_FIELD_MAX["collection"] + 1))
    assert refused.value.field == "collection"
    assert svc.store.last_position() == head
    assert do_import(svc, other, title="T" * limit).data["status"] == "imported"
