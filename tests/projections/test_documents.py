"""Tests for document reading and chunking."""

from __future__ import annotations

import hashlib
import os
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemolog.projections.ingest.documents import (
    Chunk,
    DocumentError,
    ParsedDocument,
    _markdown_title,
    chunk_document,
    read_document,
)


def _pdf_literal(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def make_pdf(pages: list[list[str]], title: str | None = None, to_unicode: dict[str, str] | None = None) -> bytes:
    """A minimal valid PDF: one Helvetica text line per string, one page per list; ``to_unicode`` maps a
    character code (two hex digits) to what the font's ToUnicode CMap says it is (UTF-16 hex)."""
    n = len(pages)
    page_ids = [5 + 2 * i for i in range(n)]
    cmap_ref = f" /ToUnicode {5 + 2 * n} 0 R" if to_unicode else ""
    objs = {
        1: "<< /Type /Catalog /Pages 2 0 R >>",
        2: f"<< /Type /Pages /Kids [{' '.join(f'{p} 0 R' for p in page_ids)}] /Count {n} >>",
        3: f"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica{cmap_ref} >>",
        4: f"<< /Title ({_pdf_literal(title or '')}) >>",
    }
    if to_unicode:
        chars = " ".join(f"<{code}> <{utf16}>" for code, utf16 in to_unicode.items())
        cmap = (
            "/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /X def "
            f"1 begincodespacerange <00> <FF> endcodespacerange {len(to_unicode)} beginbfchar {chars} endbfchar "
            "endcmap CMapName currentdict /CMap defineresource pop end end"
        )
        objs[5 + 2 * n] = f"<< /Length {len(cmap)} >>\nstream\n{cmap}\nendstream"
    for pid, lines in zip(page_ids, pages):
        ops = " ".join(f"({_pdf_literal(line)}) Tj 0 -16 Td" for line in lines)
        stream = f"BT /F1 12 Tf 72 720 Td {ops} ET"
        objs[pid] = (
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {pid + 1} 0 R >>"
        )
        objs[pid + 1] = f"<< /Length {len(stream)} >>\nstream\n{stream}\nendstream"
    out = b"%PDF-1.4\n"
    offsets = {}
    for k in sorted(objs):
        offsets[k] = len(out)
        out += f"{k} 0 obj\n{objs[k]}\nendobj\n".encode("latin-1")
    xref = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{offsets[k]:010d} 00000 n \n" for k in sorted(objs)).encode()
    info = " /Info 4 0 R" if title else ""
    trailer = f"<< /Size {len(objs) + 1} /Root 1 0 R{info} >>"
    out += f"trailer\n{trailer}\nstartxref\n{xref}\n%%EOF\n".encode()
    return out


def page_text(doc: ParsedDocument, chunk: Chunk) -> str:
    return doc.text_pages[(chunk.page or 1) - 1]


def assert_chunk_invariants(doc: ParsedDocument, chunks: list[Chunk], max_chars: int) -> None:
    assert [c.index for c in chunks] == list(range(len(chunks)))
    for c in chunks:
        text = page_text(doc, c)
        assert text[c.start:c.end] == c.text
        assert c.text and c.text == c.text.strip()
        assert len(c.text) <= max_chars
    for a, b in zip(chunks, chunks[1:]):  # ordered, disjoint
        assert (a.page or 0, a.end) <= (b.page or 0, b.start)
    # nothing but whitespace is left out
    covered = sum(sum(not ch.isspace() for ch in c.text) for c in chunks)
    assert covered == sum(not ch.isspace() for page in doc.text_pages for ch in page)


def md_doc(text: str) -> ParsedDocument:
    return ParsedDocument("x.md", "x", [text], "markdown", "0" * 64)


# ---------------------------------------------------------------- chunking

MARKDOWN = """\
# Guide

Intro paragraph.

## Install

Run the installer.

Then restart.

```sh
# a comment, not a heading

make install
```

Usage
-----

Call it.
"""


def test_markdown_headings_and_paragraphs():
    doc = md_doc(MARKDOWN)
    chunks = chunk_document(doc, max_chars=60)
    assert [(c.heading, c.text) for c in chunks] == [
        ("Guide", "# Guide\n\nIntro paragraph."),
        ("Install", "## Install\n\nRun the installer.\n\nThen restart."),
        ("Install", "```sh\n# a comment, not a heading\n\nmake install\n```"),
        ("Usage", "Usage\n-----\n\nCall it."),
    ]
    assert all(c.page is None for c in chunks)
    assert_chunk_invariants(doc, chunks, 60)


def test_consecutive_headings_are_packed_with_following_text():
    doc = md_doc("# A\n\n## B\n\nbody text\n")
    [chunk] = chunk_document(doc)
    assert (chunk.text, chunk.heading) == ("# A\n\n## B\n\nbody text", "B")


def test_oversized_paragraph_splits_on_sentences_then_hard():
    sentences = "First sentence here. Second one follows! Third? " + "x" * 45
    doc = md_doc(sentences)
    chunks = chunk_document(doc, max_chars=40)
    # sentences are packed back together while they fit (the first chunk is exactly 40)
    assert [c.text for c in chunks] == ["First sentence here. Second one follows!", "Third?",
                                        "x" * 40, "x" * 5]
    assert_chunk_invariants(doc, chunks, 40)


def test_text_documents_have_no_headings():
    doc = ParsedDocument("x.txt", "x", ["# not a heading\n\nbody"], "text", "0" * 64)
    chunks = chunk_document(doc)
    assert [c.heading for c in chunks] == [None]


def test_max_chars_validated():
    with pytest.raises(ValueError):
        chunk_document(md_doc("x"), max_chars=0)


_words = st.text(alphabet="abcdefghij .,!?#-`\t", min_size=0, max_size=60)
_paragraph = st.lists(_words, min_size=1, max_size=4).map("\n".join)
_heading = st.builds(lambda n, t: "#" * n + " " + t, st.integers(1, 3), _words)
_separator = st.sampled_from(["\n\n", "\n \n", "\n\n\n", "\r\n\r\n", "\n"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    parts=st.lists(st.tuples(st.one_of(_paragraph, _heading), _separator), max_size=12),
    max_chars=st.integers(min_value=5, max_value=200),
    doc_type=st.sampled_from(["markdown", "text"]),
)
def test_offsets_reproduce_chunk_text(parts, max_chars, doc_type):
    text = "".join(p + sep for p, sep in parts)
    doc = ParsedDocument("x", "x", [text], doc_type, "0" * 64)
    assert_chunk_invariants(doc, chunk_document(doc, max_chars=max_chars), max_chars)


@settings(max_examples=50, deadline=None)
@given(pages=st.lists(st.text(max_size=300), min_size=1, max_size=3), max_chars=st.integers(1, 80))
def test_offsets_hold_for_arbitrary_pdf_page_text(pages, max_chars):
    doc = ParsedDocument("x.pdf", "x", pages, "pdf", "0" * 64)
    chunks = chunk_document(doc, max_chars=max_chars)
    assert_chunk_invariants(doc, chunks, max_chars)
    assert all(c.page is not None and 1 <= c.page <= len(pages) for c in chunks)


# ----------------------------------------------------------------- reading


def test_read_markdown(tmp_path):
    raw = "\ufeff# The Title\r\n\r\nBody.\r\n".encode()
    path = tmp_path / "notes.md"
    path.write_bytes(raw)
    doc = read_document(path)
    assert (doc.doc_type, doc.title) == ("markdown", "The Title")
    assert doc.text_pages == ["# The Title\n\nBody.\n"]
    assert doc.content_hash == hashlib.sha256(raw).hexdigest()
    assert doc.path == str(path)


def test_read_text_title_is_file_stem(tmp_path):
    path = tmp_path / "meeting-notes.TXT"
    path.write_text("# hello\n", encoding="utf-8")
    doc = read_document(str(path))
    assert (doc.doc_type, doc.title) == ("text", "meeting-notes")


def test_undecodable_text_raises(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"fine \xff\xfe broken")
    with pytest.raises(DocumentError) as info:
        read_document(path)
    assert info.value.reason == "decode" and "UTF-8" in str(info.value)


@pytest.mark.parametrize("content", [b"", b"  \n\n"])
def test_empty_file_raises(tmp_path, content):
    path = tmp_path / "empty.md"
    path.write_bytes(content)
    with pytest.raises(DocumentError, match="empty") as info:
        read_document(path)
    assert info.value.reason == "empty"


def test_unknown_extension_and_missing_file(tmp_path):
    path = tmp_path / "data.docx"
    path.write_bytes(b"x")
    with pytest.raises(DocumentError) as info:
        read_document(path)
    assert info.value.reason == "unsupported"
    with pytest.raises(DocumentError) as info:
        read_document(tmp_path / "missing.md")
    assert info.value.reason == "unreadable"


def test_pdf_pages_and_title(tmp_path):
    path = tmp_path / "report.pdf"
    path.write_bytes(make_pdf([["Alpha page one.", "More alpha."], ["Beta page two."]],
                              title="Quarterly Report"))
    doc = read_document(path)
    assert (doc.doc_type, doc.title, len(doc.text_pages)) == ("pdf", "Quarterly Report", 2)
    chunks = chunk_document(doc, max_chars=200)
    assert [c.page for c in chunks] == [1, 2]
    assert "Alpha page one." in chunks[0].text and "Beta page two." in chunks[1].text
    assert_chunk_invariants(doc, chunks, 200)


def test_control_characters_of_a_pdfs_text_layer_are_no_text_of_it(tmp_path):
    """A font mapping a glyph to NUL or another control character put it into chunks, searched and shown as text."""
    path = tmp_path / "fonts.pdf"
    path.write_bytes(make_pdf([["Alpha\x00beta\x07gamma\x0cdelta\x1b."]], title="Field\x01 report"))
    doc = read_document(path)
    assert doc.text_pages == ["Alphabetagamma\ndelta.\n"] and doc.title == "Field report"
    assert_chunk_invariants(doc, chunk_document(doc, max_chars=200), 200)


def test_a_glyph_a_pdfs_font_maps_to_a_lone_surrogate_is_no_text_of_it(tmp_path):
    """No UTF-8 text holds a lone surrogate: the chunk could not be written, and the request importing it was a 500
    after the documents before it were imported."""
    path = tmp_path / "fonts.pdf"
    path.write_bytes(make_pdf([["A yak"]], to_unicode={"41": "D800", "20": "0020", "79": "0079", "61": "0061", "6B": "006B"}))
    doc = read_document(path)
    assert doc.text_pages[0].strip() == "yak"
    assert all(not 0xD800 <= ord(ch) < 0xE000 for ch in doc.text_pages[0])


def test_pdf_without_title_uses_stem(tmp_path):
    path = tmp_path / "scan.pdf"
    path.write_bytes(make_pdf([["Some text."]]))
    assert read_document(path).title == "scan"


@pytest.mark.parametrize(
    "content",
    [b"%PDF-1.4\nthis is not really a pdf", b"garbage bytes", make_pdf([["Hello."]])[:60]],
)
def test_corrupt_pdf_raises_document_error(tmp_path, content):
    path = tmp_path / "broken.pdf"
    path.write_bytes(content)
    with pytest.raises(DocumentError) as info:
        read_document(path)
    assert info.value.reason in {"corrupt", "no-text"}


def test_pdf_without_text_raises(tmp_path):
    path = tmp_path / "blank.pdf"
    path.write_bytes(make_pdf([[]]))
    with pytest.raises(DocumentError) as info:
        read_document(path)
    assert info.value.reason == "no-text"


def test_missing_pypdf_names_the_extra(tmp_path, monkeypatch):
    path = tmp_path / "report.pdf"
    path.write_bytes(make_pdf([["Hello."]]))
    monkeypatch.setitem(sys.modules, "pypdf", None)  # makes `import pypdf` fail
    with pytest.raises(DocumentError, match=r"pip install 'mnemolog\[pdf\]'") as info:
        read_document(path)
    assert info.value.reason == "missing-dependency"


#: Characters as a reader sees them (grapheme clusters), several code points each: cutting inside one shows a stray
#: accent, half a flag, a family in pieces or a jamo without its syllable.
_CLUSTERS = ["e\u0301", "a\u0308\u0301", "🇵🇹", "🇯🇵", "👨\u200d👩\u200d👧", "👍🏽", "❤\ufe0f", "\u1100\u1161\u11a8", "각", "ก\u0e31", "क\u094d\u0937\u093f", "漢", "字", "a", "b"]


@settings(max_examples=200, deadline=None)
@given(
    words=st.lists(st.lists(st.sampled_from(_CLUSTERS), min_size=1, max_size=40), min_size=1, max_size=6),
    spaces=st.sampled_from(["", " ", "\n", "。"]),
    max_chars=st.integers(min_value=6, max_value=30),
)
def test_chunks_never_cut_inside_a_character(words, spaces, max_chars):
    """A run with no space to cut at was cut at ``max_chars`` code points, inside a character as readers see it."""
    text, boundaries = "", {0}
    for word in words:
        for cluster in word:
            text += cluster
            boundaries.add(len(text))
        text += spaces
        boundaries.add(len(text))
    doc = ParsedDocument("x.txt", "x", [text], "text", "0" * 64)
    chunks = chunk_document(doc, max_chars=max_chars)
    assert_chunk_invariants(doc, chunks, max_chars)
    for chunk in chunks:
        assert chunk.start in boundaries and chunk.end in boundaries, (chunk, text)


@pytest.mark.parametrize(
    "content, at",
    [
        ("Meeting notes: ship on Friday.".encode("utf-16-le"), 1),  # UTF-16 without its byte-order mark: valid UTF-8, every other byte NUL
        (b"\x7fELF\x02\x01\x01\x00\x00\x00", 7),  # an executable named .txt
        (b"# Notes\n\nfine text\x00then binary", 18),
    ],
    ids=["utf-16 without bom", "binary", "a nul in text"],
)
def test_a_text_file_holding_nul_bytes_is_refused_as_binary(tmp_path, content, at):
    """It was imported as text: chunks of NULs and stray bytes that no search finds and every read shows as garbage."""
    path = tmp_path / "notes.md"
    path.write_bytes(content)
    with pytest.raises(DocumentError, match=rf"binary content \(a NUL byte at byte {at}\)") as info:
        read_document(path)
    assert info.value.reason == "decode"


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32"])
def test_a_text_file_in_utf16_or_utf32_with_its_byte_order_mark_is_read(tmp_path, encoding):
    """A file saved as "Unicode" (UTF-16 with its byte-order mark, as Windows editors write it) was refused as
    binary for its NUL bytes, though the mark says how to read it."""
    text = "# Café notes\r\n\r\n会議は金曜日です。\r\n"
    raw = text.encode(encoding) if encoding != "utf-16-be" else ("\ufeff" + text).encode("utf-16-be")  # utf-16 and utf-32 write the mark
    path = tmp_path / "notes.md"
    path.write_bytes(raw)
    doc = read_document(path)
    assert (doc.title, doc.text_pages) == ("Café notes", ["# Café notes\n\n会議は金曜日です。\n"])
    assert doc.content_hash == hashlib.sha256(raw).hexdigest()


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be"])
def test_a_utf16_file_of_cjk_text_alone_is_read(tmp_path, encoding):
    """UTF-16 of CJK text with no ASCII in it (a one-line note saved as "Unicode", which Notepad ends without a line
    break) holds no NUL byte: it was refused as 'not valid UTF-8', though its byte-order mark says how to read it."""
    text = "会議は金曜日です。資料は🎉月曜日に送ります。"
    raw = text.encode(encoding) if encoding != "utf-16-be" else ("\ufeff" + text).encode("utf-16-be")
    assert b"\x00" not in raw
    path = tmp_path / "会議.txt"
    path.write_bytes(raw)
    doc = read_document(path)
    assert doc.text_pages == [text]
    assert [c.text for c in chunk_document(doc, max_chars=13)] == ["会議は金曜日です。", "資料は🎉月曜日に送ります。"]


@pytest.mark.parametrize("content, message", [
    ("\ufeffnotes\x00binary".encode("utf-16-le"), "a NUL character"),
    (b"\xff\xfe\xff\xff\x41\x30", "not valid UTF-8"),  # the bytes of a mark, then a noncharacter: no text in any form
    (b"\xff\xfe" + b"\x00\xd8x\x00", "not valid UTF-16"),  # a lone surrogate
    (b"\xff\xfe not utf-8", "not valid UTF-8"),  # the bytes of a mark, but no UTF-16 (no ASCII after them)
])
def test_a_utf16_file_that_is_no_text_is_refused(tmp_path, content, message):
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    with pytest.raises(DocumentError, match=message) as info:
        read_document(path)
    assert info.value.reason == "decode"


def test_a_long_run_of_flags_is_cut_in_work_linear_in_its_length(monkeypatch):
    """Each cut counted the regional indicators back to the start of their run, in a run of flags with no space
    the whole run so far: a file of 200,000 flags took 40 s to chunk, and the time grew with the square of the
    run (the import held its server's worker all that time)."""
    from mnemolog.projections.ingest import documents

    calls = [0]
    original = documents._is_ri

    def counted(code: int) -> bool:
        calls[0] += 1
        return original(code)

    monkeypatch.setattr(documents, "_is_ri", counted)
    text = "🇵🇹" * 5_000
    doc = ParsedDocument("x.txt", "x", [text], "text", "0" * 64)
    chunks = chunk_document(doc, max_chars=101)
    assert [len(c.text) for c in chunks] == [100] * 100  # whole flags, 50 a chunk
    code_points = len(text)
    assert calls[0] < 20 * code_points, calls[0]


def test_max_chars_beyond_a_memory_is_refused():
    """A chunk larger than a memory takes was cut, then every document failed on its own with a memory's limit."""
    with pytest.raises(ValueError, match="max_chars must be 1 to 100000"):
        chunk_document(md_doc("x"), max_chars=100_001)
    assert chunk_document(md_doc("x"), max_chars=100_000)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_pipe_or_a_device_is_refused_without_reading_it(tmp_path):
    """``mnemolog import docs notes.txt`` where notes.txt is a named pipe waited forever for a writer, and a .txt
    link to /dev/zero read until memory ran out."""
    pipe = tmp_path / "pipe.txt"
    os.mkfifo(pipe)
    zero = tmp_path / "zero.md"
    zero.symlink_to("/dev/zero")
    for path in (pipe, zero):
        with pytest.raises(DocumentError, match="not a regular file") as info:
            read_document(path)
        assert info.value.reason == "unreadable"


FRONT_MATTER = "---\ntitle: Trip notes\ndate: 2024-05-01\n---\n\nWe went to Porto.\n\nRain all day.\n---\n\n## Day two\n\nSun.\n"


def test_front_matter_is_no_heading_and_its_title_is_the_documents(tmp_path):
    """YAML front matter between two ``---`` lines was read as a setext heading: the document's title, and the
    heading of its first chunks, was ``--- title: Trip notes date: 2024-05-01``."""
    path = tmp_path / "trip.md"
    path.write_text(FRONT_MATTER, encoding="utf-8")
    doc = read_document(path)
    assert doc.title == "Trip notes"
    chunks = chunk_document(doc, max_chars=60)
    assert [(c.heading, c.text) for c in chunks] == [
        (None, "---\ntitle: Trip notes\ndate: 2024-05-01\n---"),
        (None, "We went to Porto."),
        ("Day two", "Rain all day.\n---\n\n## Day two\n\nSun."),  # a setext heading after it is still one
    ]
    assert chunks[2].text.startswith("Rain") and _markdown_title("Rain all day.\n---\n") == "Rain all day."
    assert_chunk_invariants(doc, chunks, 60)


@pytest.mark.parametrize("text, title", [
    ("---\nauthor: Ann\n---\n\nBody.\n", "x"),  # no title in it: the file's stem, never the front matter
    ("---\ntitle: 'Quoted: yes'\n---\n# Heading\n", "Quoted: yes"),
    ("---\ntitle: Open\n\nno closing line\n", "x"),  # not front matter: plain paragraphs
    ("Intro\n---\ntitle: Late\n---\n", "Intro"),  # front matter only opens a file
])
def test_front_matter_title(tmp_path, text, title):
    path = tmp_path / "x.md"
    path.write_text(text, encoding="utf-8")
    doc = read_document(path)
    assert doc.title == title
    assert_chunk_invariants(doc, chunk_document(doc, max_chars=30), 30)


def test_a_document_of_more_chunks_than_a_document_may_have_is_refused_before_it_is_written(tmp_path):
    """A 120 kB file of headings made 20,000 memories in one batch (a 3 MB one 200,000: minutes of the writer and
    a gigabyte of the server's memory). Past MAX_CHUNKS it is refused, naming the way out; at it, it is cut."""
    from mnemolog.projections.ingest.documents import MAX_CHUNKS

    path = tmp_path / "headings.md"
    path.write_text("# h\nb\n" * MAX_CHUNKS)
    assert len(chunk_document(read_document(path))) == MAX_CHUNKS
    path.write_text("# h\nb\n" * (MAX_CHUNKS + 1))
    with pytest.raises(DocumentError, match="more than the 20,000 chunks") as refused:
        chunk_document(read_document(path))
    assert refused.value.reason == "too-large"
    path.write_text("word " * 30_000)  # 120,000 letters: over the cap at 5 characters a chunk, refused before it is cut
    with pytest.raises(DocumentError, match="chunks of at most 5 characters"):
        chunk_document(read_document(path), max_chars=5)
