"""Document ids: distinct per document (the path under the import root, or an explicit id); unchanged files write nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mnemolog.eventstore.model import ValidationError
from mnemolog.projections.entities import projector as ents
from mnemolog.projections.ingest.documents import DocumentError, default_doc_id
from mnemolog.projections.recall.searcher import RecallOptions
from mnemolog.projections.service import MemoryService
from mnemolog.tools import cli

A = "Project A uses PostgreSQL for storage.\n"
B = "Project B uses Redis as a cache.\n"


def tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def import_docs(data: Path, *argv: str, code: int = 0) -> dict:
    rc = cli.main(["--data-dir", str(data), "import", "docs", *argv, "--json"])
    assert rc == code
    return rc


def recalled(svc, query: str) -> set[str]:
    hits = svc.searcher.recall("default", query, RecallOptions()).hits
    return {svc.get("default", h.id).memory for h in hits}


def head(data: Path) -> int:
    with MemoryService.open(data) as svc:
        return svc.store.last_position()


def test_same_file_names_in_two_folders_are_two_documents(tmp_path, monkeypatch, capsys):
    src = tree(tmp_path / "src", {"a/README.md": A, "b/README.md": B})
    data = tmp_path / "data"
    monkeypatch.chdir(src)
    import_docs(data, ".")
    report = json.loads(capsys.readouterr().out)
    assert sorted(r["doc_id"] for r in report["results"]) == ["a/README.md", "b/README.md"]
    assert {r["version"] for r in report["results"]} == {1} and report["documents"] == 2
    with MemoryService.open(data) as svc:
        docs = {d.doc_id: d.version for d in ents.list_documents(svc.read_conn(), "default")}
        assert docs == {"a/README.md": 1, "b/README.md": 1}
        assert A.strip() in recalled(svc, "which database does project A use for storage")
        assert B.strip() in recalled(svc, "what does project B use as a cache")
    before = head(data)
    import_docs(data, ".")  # the same tree again: nothing changed, nothing written
    assert json.loads(capsys.readouterr().out)["skipped"] == 2
    assert head(data) == before


def test_same_file_names_across_runs_are_two_documents(tmp_path, monkeypatch, capsys):
    src = tree(tmp_path / "src", {"docs/guide.md": A, "other/guide.md": B})
    data = tmp_path / "data"
    monkeypatch.chdir(src)
    import_docs(data, "docs/guide.md")
    import_docs(data, "other/guide.md")
    before = head(data)
    import_docs(data, "docs", "other")  # directories or files, the ids are the same
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["skipped"] == 2
    assert head(data) == before
    with MemoryService.open(data) as svc:
        assert {d.doc_id: d.version for d in ents.list_documents(svc.read_conn(), "default")} == {"docs/guide.md": 1, "other/guide.md": 1}
        assert A.strip() in recalled(svc, "PostgreSQL storage")


def test_root_and_explicit_doc_id(tmp_path, capsys):
    src = tree(tmp_path / "src", {"a/README.md": A, "b/README.md": B})
    data = tmp_path / "data"
    import_docs(data, str(src / "a"), str(src / "b"), "--root", str(src))
    assert sorted(r["doc_id"] for r in json.loads(capsys.readouterr().out)["results"]) == ["a/README.md", "b/README.md"]
    import_docs(data, str(src / "a" / "README.md"), "--doc-id", "project-a")
    assert json.loads(capsys.readouterr().out)["results"][0]["doc_id"] == "project-a"
    before = head(data)
    # Refused before anything is written: two files for one id, a bad id, a file outside the root.
    import_docs(data, str(src / "a"), str(src / "b"), "--doc-id", "x", code=2)
    assert "--doc-id names one document" in capsys.readouterr().err
    import_docs(data, str(src / "a" / "README.md"), "--doc-id", "../x", code=2)
    assert "--doc-id" in capsys.readouterr().err
    import_docs(data, str(src / "a"), "--root", str(src / "b"), code=2)
    assert "outside the import root" in capsys.readouterr().err
    assert head(data) == before


def test_names_that_collide_once_made_safe_are_refused(tmp_path, capsys):
    src = tree(tmp_path / "src", {"My Notes.md": A, "My-Notes.md": B})
    data = tmp_path / "data"
    import_docs(data, str(src), "--root", str(src), code=2)
    assert "would both be document My-Notes.md" in capsys.readouterr().err
    assert not (data / "events.db").exists() or head(data) == 0


def test_default_doc_id():
    assert default_doc_id("a/My Notes.md") == "a/My-Notes.md"
    assert default_doc_id("/srv/kb/a/README.md", "/srv/kb") == "a/README.md"
    assert default_doc_id("../../etc/x.md") == "etc/x.md"
    long = default_doc_id("d/" * 200 + "x.md")
    assert len(long) <= 255 and long.endswith("/x.md") and long != default_doc_id("e/" * 200 + "x.md")
    with pytest.raises(DocumentError) as outside:
        default_doc_id("/srv/other/x.md", "/srv/kb")
    assert outside.value.reason == "outside-root"


def test_the_write_side_checks_path_ids(svc, tmp_path):
    from mnemolog.eventstore.commands import CommandContext
    from mnemolog.projections.ingest.documents import document_import, read_document

    path = tmp_path / "x.md"
    path.write_text(A)
    parsed = read_document(path)
    for bad in ("../x", "/abs/x.md", "a//b", "a/../b", "a/.hidden", "x" * 256):
        with pytest.raises(ValidationError):
            svc.run(svc.documents.import_document, CommandContext(tenant="t"), document_import(parsed, doc_id=bad))
    ok = svc.run(svc.documents.import_document, CommandContext(tenant="t"), document_import(parsed, doc_id="kb/2026/x.md"))
    assert ok.data["doc_id"] == "kb/2026/x.md" and svc.facts.node_exists("t", "document:kb/2026/x.md")


def test_names_in_other_scripts_are_distinct_documents(tmp_path, monkeypatch, capsys):
    """Every letter outside ASCII was dropped: 会議.md and 報告.md were both document "md", so importing the
    second archived the first's chunks as an old version of the same document."""
    names = ["会議.md", "報告.md", "Привет мир.md", "Café.md", "Cafe.md", "été/notes.md", "ete/notes.md"]
    ids = [default_doc_id(name) for name in names]
    assert len(set(ids)) == len(ids), ids
    assert all(ids) and ids[4] == "Cafe.md" and ids[6] == "ete/notes.md"  # ASCII names keep their ids
    assert ids[3].startswith("Cafe-") and ids[3].endswith(".md") and ids[5].startswith("ete-") and ids[5].endswith("/notes.md")
    assert default_doc_id("会議.md") == ids[0]  # stable: importing the same file again finds the same document
    src = tree(tmp_path / "src", {"会議.md": A, "報告.md": B})
    data = tmp_path / "data"
    monkeypatch.chdir(src)
    import_docs(data, "会議.md")
    import_docs(data, "報告.md")
    capsys.readouterr()
    with MemoryService.open(data) as svc:
        assert sorted(d.version for d in ents.list_documents(svc.read_conn(), "default")) == [1, 1]
        assert A.strip() in recalled(svc, "PostgreSQL storage") and B.strip() in recalled(svc, "Redis cache")


def test_a_name_with_its_accents_apart_is_the_same_document():
    """macOS writes names with their accents apart (NFD): the same file uploaded from there was a second document."""
    assert default_doc_id("notes/r\u00e9sum\u00e9.md") == default_doc_id("notes/re\u0301sume\u0301.md")
    assert default_doc_id("Caf\u00e9.md") != default_doc_id("Cafe.md")


def test_a_tag_with_its_accents_apart_is_the_same_tag(svc):
    from mnemolog.eventstore.commands import CommandContext
    from mnemolog.eventstore.model import MemoryContent
    from mnemolog.projections.filters import SearchFilters

    ctx = CommandContext(tenant="tags")
    decomposed, composed = svc.run(svc.memories.add, ctx, [
        MemoryContent(memory="zebra lunch spot", tags=("cafe\u0301",)),
        MemoryContent(memory="zebra dinner spot", tags=("CAF\u00c9",)),
    ]).memory_ids  # fmt: skip
    assert tuple(svc.get("tags", decomposed).tags) == tuple(svc.get("tags", composed).tags) == ("caf\u00e9",)
    for tag in ("caf\u00e9", "cafe\u0301"):
        options = RecallOptions(channels=("lexical",), filters=SearchFilters(tags=(tag,)))
        assert {h.memory.id for h in svc.searcher.recall("tags", "zebra", options).hits} == {decomposed, composed}
