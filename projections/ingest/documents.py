"""Reading and chunking documents for import.

This module is pure: it reads a file into a :class:`ParsedDocument` and cuts
that into :class:`Chunk` objects. Turning them into events is the write
side's job.

Offsets
    Every chunk satisfies ``doc.text_pages[page_index][chunk.start:chunk.end]
    == chunk.text`` where ``page_index`` is ``chunk.page - 1`` for PDFs and 0
    otherwise. Chunk text never starts or ends with whitespace (``str.strip``
    semantics). Page text is stored with newlines normalised to ``"\\n"``, so
    offsets refer to that text, not to the raw bytes.

Chunking
    A page is cut into blocks: blank-line separated paragraphs and, for
    Markdown, heading lines (ATX ``# ...`` and setext underlines). Fenced code
    (````` or ``~~~``) stays one block, and ``#`` lines inside it are not
    headings. A block longer than ``max_chars`` is split on sentence ends and
    line breaks, and a piece still too long is cut at the last space that fits
    (or hard-cut, between two characters as readers see them: never inside a
    grapheme cluster such as an accented letter, a flag or a joined emoji).
    Blocks are then packed in order while the slice from the first to the
    last stays within ``max_chars``. A heading always starts a new
    chunk unless the chunk so far holds only headings, so a heading is packed
    with the text under it. ``Chunk.heading`` is the innermost heading the
    chunk's text sits under. Chunks never span pages.
"""

from __future__ import annotations

import codecs
import hashlib
import io
import os
import re
import stat
import unicodedata
from pathlib import Path, PurePath, PurePosixPath
from typing import Any, NoReturn

import msgspec

from mnemolog.eventstore.commands.documents import DOC_ID_MAX, DOCUMENT_FIELD_MAX, Chunk, DocumentImport
from mnemolog.eventstore.model import MAX_TEXT_CHARS

__all__ = ["Chunk", "DocumentError", "ParsedDocument", "chunk_document", "default_doc_id", "document_import", "import_report", "parse_document", "read_document"]

_DOC_TYPES = {".txt": "text", ".text": "text", ".md": "markdown", ".markdown": "markdown",
              ".pdf": "pdf"}
PDF_INSTALL_HINT = "pip install -e '.[pdf]' from a checkout, or pip install 'mnemolog[pdf]'"


class DocumentError(Exception):
    """A document cannot be read or parsed.

    ``reason`` is a stable code for callers: ``unsupported``, ``unreadable``,
    ``empty``, ``decode``, ``missing-dependency``, ``corrupt``, ``encrypted``,
    ``no-text``, ``outside-root`` (see :func:`default_doc_id`), ``too-large`` (see :data:`MAX_CHUNKS`).
    """

    def __init__(self, message: str, *, reason: str, path: str | None = None) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.reason = reason
        self.path = path


class ParsedDocument(msgspec.Struct, frozen=True):
    path: str
    title: str
    text_pages: list[str]
    doc_type: str  # "text" | "markdown" | "pdf"
    content_hash: str  # sha256 hex of the raw file bytes


# --------------------------------------------------------------------- reading


def _normalise_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


# A PDF's text layer holds what its fonts map glyphs to: NUL for a glyph with no character, other control characters
# for ligatures and private encodings. Such characters are no text of the document (a text file holding a NUL is
# refused as binary): a page break or vertical tab ends a line, and the other control characters go, as do lone
# surrogates (a font mapping a glyph to half a UTF-16 pair): no UTF-8 text holds one, so no event could.
_PDF_CONTROLS = {c: None for c in range(0x20) if chr(c) not in "\t\n"} | {0x7F: None} | {c: None for c in range(0x80, 0xA0)}
_PDF_CONTROLS.update({0x0B: "\n", 0x0C: "\n"} | {c: None for c in range(0xD800, 0xE000)})


def _pdf_text(text: str) -> str:
    """A PDF's extracted text with its line ends made ``\\n`` and its control characters and lone surrogates taken out (see above)."""
    return _normalise_newlines(text).translate(_PDF_CONTROLS)


def read_document(path: str | os.PathLike[str]) -> ParsedDocument:
    """Read a ``.txt``/``.md``/``.markdown``/``.pdf`` file.

    Raises :class:`DocumentError` (and nothing else for bad content) when the
    file type is unsupported, the file is unreadable or empty, text is not
    valid UTF-8 (or UTF-16/UTF-32 after its byte-order mark) or holds a NUL (a binary file), ``pypdf`` is missing, or the PDF is corrupt, encrypted or has
    no extractable text.
    """
    p = Path(path)
    _doc_type(p, str(p))  # an unsupported file is not read
    return parse_document(_read_regular_file(p, str(p)), p)


def parse_document(raw: bytes, path: str | os.PathLike[str]) -> ParsedDocument:
    """A document from its bytes: ``path`` gives its type, its title when the text has none, and the
    :class:`DocumentError`'s path (an upload is parsed as sent: written to a file of its name, an upload named
    ``..`` or with a name over 255 bytes failed with a server error)."""
    p = PurePath(path)
    where = str(path)
    doc_type = _doc_type(p, where)
    if not raw:
        raise DocumentError("empty file", reason="empty", path=where)
    content_hash = hashlib.sha256(raw).hexdigest()

    if doc_type == "pdf":
        pages, title = _read_pdf(raw, where)
    else:
        text = _normalise_newlines(_decode_text(raw, where))
        if not text.strip():
            raise DocumentError("empty file (whitespace only)", reason="empty", path=where)
        pages = [text]
        title = _markdown_title(text) if doc_type == "markdown" else None
    return ParsedDocument(where, shorten(title) if title else p.stem, pages, doc_type, content_hash)


def shorten(text: str, limit: int = DOCUMENT_FIELD_MAX["title"]) -> str:
    """``text``, or when it is longer than ``limit`` its start ending in "…": at its last space in the second half
    of that, else between two characters as readers see them. A title or a heading found in a document's text is
    carried by every chunk under it (a heading line of 200,000 characters was written into each)."""
    if len(text) <= limit:
        return text
    cut = _character_cut(text, 0, limit - 1)
    space = text.rfind(" ", limit // 2, cut + 1)
    return text[: space if space > 0 else cut].rstrip() + "…"


#: Byte-order marks that say a text file is not UTF-8, UTF-32's first (its little-endian mark begins as UTF-16's).
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def _decode_text(raw: bytes, where: str) -> str:
    """A text file's text: UTF-8 (its byte-order mark dropped), or UTF-16 or UTF-32 when its byte-order mark says
    so and ASCII follows (a file saved as "Unicode" was refused as binary for its NUL bytes). A NUL is refused:
    no text holds one, and a file of UTF-16 without its mark, or a binary file, does."""
    encoding = next((name for bom, name in _BOMS if raw.startswith(bom) and b"\x00" in raw[len(bom):]), None)
    if encoding is None:
        encoding = _utf16_without_nul(raw)
    if encoding is None:
        if (nul := raw.find(b"\x00")) >= 0:
            raise DocumentError(f"binary content (a NUL byte at byte {nul}): not a UTF-8 text file (UTF-16? save it as UTF-8)",
                                reason="decode", path=where)
        encoding = "utf-8-sig"
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        bad = raw[exc.start : exc.start + 1]
        shown = "UTF-8" if encoding == "utf-8-sig" else encoding.upper()
        raise DocumentError(f"not valid {shown} (byte {exc.start}: {bad!r})", reason="decode", path=where) from exc
    if (nul := text.find("\x00")) >= 0:
        raise DocumentError(f"binary content (a NUL character at character {nul}): not a text file", reason="decode", path=where)
    return text


def _utf16_without_nul(raw: bytes) -> str | None:
    """"utf-16" for a file whose UTF-16 byte-order mark is followed by text that holds no NUL byte (CJK alone,
    without a line break: a one-line note saved as "Unicode"); None when what follows the mark is not text in UTF-16
    (odd in length, a lone surrogate, control or unassigned characters) or is ASCII alone, as CJK text in UTF-16
    hardly ever is: the mark's bytes then open a file in no Unicode form, refused as not UTF-8."""
    if not raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) or b"\x00" in raw or raw[2:].isascii():
        return None
    try:
        text = raw.decode("utf-16")
    except UnicodeDecodeError:
        return None
    if any(unicodedata.category(ch) in ("Cc", "Cn", "Co", "Cs") and ch not in "\t\n\r\f" for ch in text):
        return None
    return "utf-16"


def _doc_type(p: PurePath, where: str) -> str:
    doc_type = _DOC_TYPES.get(p.suffix.lower())
    if doc_type is None:
        supported = ", ".join(sorted(_DOC_TYPES))
        raise DocumentError(f"unsupported file type {p.suffix or '(none)'!r}; "
                            f"supported: {supported}", reason="unsupported", path=where)
    return doc_type


def _read_regular_file(p: Path, where: str) -> bytes:
    """The bytes of a regular file; a pipe, a device or a socket is refused unread (opening a pipe
    waited for a writer, and reading /dev/zero never ended)."""
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a pipe opens at once, without a writer
        with os.fdopen(fd, "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                raise DocumentError("not a regular file (a pipe, a device or a socket): nothing to import",
                                    reason="unreadable", path=where)
            return file.read()
    except OSError as exc:
        raise DocumentError(f"cannot read file: {exc.strerror or exc}", reason="unreadable",
                            path=where) from exc


def _read_pdf(raw: bytes, where: str) -> tuple[list[str], str | None]:
    try:
        import pypdf
    except ImportError as exc:
        raise DocumentError(
            f"reading PDF files needs the optional pypdf package: {PDF_INSTALL_HINT}",
            reason="missing-dependency",
            path=where,
        ) from exc
    try:
        reader = pypdf.PdfReader(io.BytesIO(raw))
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")
            except Exception:  # unsupported cipher, missing crypto backend, ...
                opened = 0
            if not opened:
                raise DocumentError("PDF is encrypted", reason="encrypted", path=where)
        pages = [_pdf_text(page.extract_text() or "") for page in reader.pages]
        meta = reader.metadata
        title = " ".join(_pdf_text(str(meta.title)).split()) if meta is not None and meta.title else None
    except DocumentError:
        raise
    except Exception as exc:
        # pypdf raises many exception types on malformed input (PdfReadError,
        # KeyError, ValueError, ...); callers get exactly one.
        raise DocumentError(f"corrupt or unreadable PDF: {type(exc).__name__}: {exc}",
                            reason="corrupt", path=where) from exc
    if not any(page.strip() for page in pages):
        raise DocumentError("PDF has no extractable text (scanned images?)", reason="no-text",
                            path=where)
    return pages, title or None


def _markdown_title(text: str) -> str | None:
    """The front matter's ``title:``, else the first level-1 heading, else the first heading of any level."""
    end = _front_matter_end(text)
    if end and (found := _FRONT_TITLE.search(text, 0, end)):
        title = found.group(1).strip()
        if len(title) >= 2 and title[0] == title[-1] and title[0] in "'\"":
            title = title[1:-1].strip()
        if title:
            return title
    headings = [(b.level, b.heading) for b in _blocks(text, markdown=True) if b.heading]
    for level, heading in headings:
        if level == 1:
            return heading
    return headings[0][1] if headings else None


# -------------------------------------------------------------------- blocks


class _Block(msgspec.Struct):
    start: int
    end: int
    heading: str | None = None  # set when the block is a heading
    level: int = 0


_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_LINE = re.compile(r"[^\n]*\n?")
_FRONT_MATTER = re.compile(r"---[ \t]*\n(?:[^\n]*\n)*?(?:---|\.\.\.)[ \t]*(?:\n|\Z)")
_FRONT_TITLE = re.compile(r"^title:[ \t]*(\S[^\n]*)$", re.MULTILINE)


def _front_matter_end(text: str) -> int:
    """Where the YAML front matter that opens a Markdown file (between a ``---`` line and a ``---`` or ``...``
    line) ends; 0 when there is none. Its closing ``---`` is no setext underline: the title was once the front
    matter itself, ``--- title: Trip notes date: 2024-05-01``."""
    found = _FRONT_MATTER.match(text)
    return found.end() if found else 0


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    """Shrink ``[start, end)`` to exclude surrounding whitespace."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _blocks(text: str, *, markdown: bool) -> list[_Block]:
    """Split a page into paragraph and heading blocks (trimmed spans)."""
    blocks: list[_Block] = []
    para: list[int] | None = None  # [start, end] of the open paragraph
    fence: str | None = None
    front = _front_matter_end(text) if markdown else 0
    if front:  # one plain block, never a heading
        blocks.append(_Block(*_trim(text, 0, front)))

    def close() -> None:
        nonlocal para
        if para is not None:
            blocks.append(_Block(*_trim(text, para[0], para[1])))
            para = None

    for m in _LINE.finditer(text, front):
        line_start, line_end = m.start(), m.end()
        if line_start == line_end:
            break
        line = text[line_start:line_end].rstrip("\n")
        if fence is not None:  # fenced code is one block, blank lines and all
            para[1] = line_end  # type: ignore[index]
            fm = _FENCE.match(line)
            if fm and fm.group(1)[0] == fence[0] and len(fm.group(1)) >= len(fence) \
                    and not line[fm.end():].strip():
                fence = None
                close()
            continue
        if not line.strip():
            close()
            continue
        if markdown:
            atx = _ATX.match(line)
            if atx:
                close()
                start, end = _trim(text, line_start, line_end)
                title = (atx.group(2) or "").strip() or atx.group(1)
                blocks.append(_Block(start, end, heading=title, level=len(atx.group(1))))
                continue
            setext = _SETEXT.match(line)
            if setext and para is not None:
                start, _ = _trim(text, para[0], para[1])
                title = " ".join(text[start:para[1]].split())
                para = None
                start, end = _trim(text, start, line_end)
                level = 1 if setext.group(1)[0] == "=" else 2
                blocks.append(_Block(start, end, heading=title, level=level))
                continue
            fm = _FENCE.match(line)
            if fm:
                close()
                fence = fm.group(1)
        if para is None:
            para = [line_start, line_end]
        else:
            para[1] = line_end
    close()
    return [b for b in blocks if b.end > b.start]


_SENTENCE_BREAK = re.compile(r"(?<=[.!?…])[\"'”’)\]]*\s+|(?<=[。！？])|\n")


def _split_oversized(text: str, block: _Block, max_chars: int) -> list[_Block]:
    """Cut a too-long block on sentence ends / line breaks, then on spaces, then hard."""
    pieces: list[tuple[int, int]] = []
    pos = block.start
    for m in _SENTENCE_BREAK.finditer(text, block.start, block.end):
        if m.end() > pos:
            pieces.append(_trim(text, pos, m.end()))
            pos = m.end()
    pieces.append(_trim(text, pos, block.end))

    out: list[_Block] = []
    for start, end in pieces:
        while end - start > max_chars:
            cut = start + max_chars
            space = max((i for i in range(cut, start, -1) if text[i].isspace()), default=None)
            piece_end = _trim(text, start, space if space is not None else _character_cut(text, start, cut))[1]
            if piece_end <= start:  # nothing but whitespace before the space
                piece_end = cut
            out.append(_Block(start, piece_end))
            start = _trim(text, piece_end, end)[0]
        if end > start:
            out.append(_Block(start, end))
    if out and block.heading is not None:
        out[0].heading, out[0].level = block.heading, block.level
    return out


def _character_cut(text: str, start: int, cut: int) -> int:
    """The last index in ``(start, cut]`` where a character as readers see it (a grapheme cluster) may end:
    ``cut`` moved back off an accent, a half flag, a joined emoji or a Hangul syllable's jamo; ``cut`` itself
    when one cluster fills the whole span."""
    at = cut
    while at > start + 1 and not _cluster_boundary(text, at, start):
        at -= 1
    return at if _cluster_boundary(text, at, start) else cut


def _cluster_boundary(text: str, i: int, floor: int = 0) -> bool:
    """Whether ``text[:i]`` and ``text[i:]`` split no grapheme cluster (Unicode's UAX #29 rules, those that
    text holds: extenders, joiners, regional-indicator pairs, Hangul syllables, conjuncts after a virama).

    ``floor`` is a boundary at or before ``i``: flags are paired from it, not from the start of their run
    (counting the whole run back at every cut made a long run of flags quadratic)."""
    if i <= 0 or i >= len(text):
        return True
    before, after = text[i - 1], text[i]
    b, a = ord(before), ord(after)
    if after == "\u200d" or _extends(after):  # GB9, GB9a: never before an extender, a joiner or a spacing mark
        return False
    if before == "\u200d":  # GB11: a joined emoji
        return False
    if _is_ri(b) and _is_ri(a):  # GB12, GB13: flags are pairs of regional indicators
        run = 0
        while i - 1 - run >= floor and _is_ri(ord(text[i - 1 - run])):
            run += 1
        return run % 2 == 0
    hb, ha = _hangul(b), _hangul(a)
    if hb and ha and ((hb == "L" and ha in ("L", "V", "LV", "LVT")) or (hb in ("LV", "V") and ha in ("V", "T")) or (hb in ("LVT", "T") and ha == "T")):
        return False  # GB6-GB8
    if unicodedata.combining(before) == 9 and unicodedata.category(after) == "Lo":  # GB9c: a conjunct, joined by a virama
        return False
    return True


def _extends(char: str) -> bool:
    code = ord(char)
    return (
        unicodedata.category(char) in ("Mn", "Me", "Mc")
        or 0x1F3FB <= code <= 0x1F3FF  # emoji skin tones
        or 0xE0020 <= code <= 0xE007F  # emoji tag sequences
        or code == 0x200C
    )


def _is_ri(code: int) -> bool:
    return 0x1F1E6 <= code <= 0x1F1FF


def _hangul(code: int) -> str | None:
    if 0x1100 <= code <= 0x115F or 0xA960 <= code <= 0xA97C:
        return "L"
    if 0x1160 <= code <= 0x11A7 or 0xD7B0 <= code <= 0xD7C6:
        return "V"
    if 0x11A8 <= code <= 0x11FF or 0xD7CB <= code <= 0xD7FB:
        return "T"
    if 0xAC00 <= code <= 0xD7A3:
        return "LV" if (code - 0xAC00) % 28 == 0 else "LVT"
    return None


# ------------------------------------------------------------------ chunking


#: The most chunks one document makes: each is a memory written in the import's one batch, so a small file of
#: many headings (or pages, or a small ``max_chars``) would otherwise hold the writer and the server's memory for minutes.
MAX_CHUNKS = 20_000
_SPACE_RE = re.compile(r"\s+")


def _too_many_chunks(doc: ParsedDocument, max_chars: int) -> NoReturn:
    raise DocumentError(
        f"cut into chunks of at most {max_chars:,} characters, it makes more than the {MAX_CHUNKS:,} chunks a document may have: "
        "split the file, or import it with a larger max_chars", reason="too-large", path=doc.path,
    )


def chunk_document(doc: ParsedDocument, *, max_chars: int = 1200) -> list[Chunk]:
    """Cut ``doc`` into chunks of at most ``max_chars`` characters each.

    See the module docstring for the rules and the offset guarantee.
    """
    if not 1 <= max_chars <= MAX_TEXT_CHARS:  # a chunk is a memory
        raise ValueError(f"max_chars must be 1 to {MAX_TEXT_CHARS}")
    # Each chunk holds at most max_chars characters, so the text's non-space characters over max_chars is a count
    # of chunks it cannot go below: a file past the cap is refused before it is cut.
    if sum(len(_SPACE_RE.sub("", text)) for text in doc.text_pages) > MAX_CHUNKS * max_chars:
        _too_many_chunks(doc, max_chars)
    markdown = doc.doc_type == "markdown"
    chunks: list[Chunk] = []
    heading: str | None = None  # heading in effect, carried across pages

    for page_index, text in enumerate(doc.text_pages):
        page = page_index + 1 if doc.doc_type == "pdf" else None
        blocks: list[_Block] = []
        for block in _blocks(text, markdown=markdown):
            if block.end - block.start > max_chars:
                blocks.extend(_split_oversized(text, block, max_chars))
            else:
                blocks.append(block)

        first: _Block | None = None
        last: _Block | None = None
        only_headings = True
        chunk_heading: str | None = None

        def flush() -> None:
            nonlocal first, last
            if first is not None and last is not None:
                if len(chunks) == MAX_CHUNKS:
                    _too_many_chunks(doc, max_chars)
                chunks.append(Chunk(len(chunks), text[first.start:last.end], page,
                                    first.start, last.end, shorten(chunk_heading) if chunk_heading else None))
            first = last = None

        for block in blocks:
            is_heading = block.heading is not None
            if first is not None and (
                (is_heading and not only_headings) or block.end - first.start > max_chars
            ):
                flush()
            if is_heading:
                heading = block.heading
            if first is None:
                first, only_headings, chunk_heading = block, True, heading
            last = block
            if is_heading:
                chunk_heading = heading
            else:
                only_headings = False
        flush()
    return chunks


def default_doc_id(path: str | os.PathLike[str], root: str | os.PathLike[str] | None = None) -> str:
    """A document's id: its path relative to ``root``, each part made safe, joined by ``/``.

    ``notes/My Notes.md`` -> ``notes/My-Notes.md`` (a part with letters beyond
    ASCII gains a digest of itself, see :func:`_safe_part`). Without ``root`` the path
    is taken as it is (an uploaded file's name, which may hold folders); with
    one, a path outside it is a :class:`DocumentError` (``outside-root``), so
    that two files never share an id because only their names were used.
    ``.`` and ``..`` parts are dropped, and an id longer than
    :data:`DOC_ID_MAX` keeps its tail and gains a hash of the whole path.
    """
    raw = Path(path)
    if root is not None:
        base = Path(root).resolve()
        try:
            raw = raw.resolve().relative_to(base)
        except ValueError:
            raise DocumentError(f"outside the import root {base}", reason="outside-root", path=str(path)) from None
    parts = [_safe_part(p) for p in PurePosixPath(str(raw).replace("\\", "/")).parts if p not in ("/", ".", "..")]
    doc_id = "/".join(p for p in parts if p) or "document"
    if len(doc_id) > DOC_ID_MAX:
        digest = hashlib.sha256("/".join(parts).encode()).hexdigest()[:12]
        tail = doc_id[-(DOC_ID_MAX - len(digest) - 1) :]
        doc_id = f"{digest}-{tail.lstrip('-._/')}"
    return doc_id


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_SUFFIX = re.compile(r"\.[A-Za-z0-9]{1,10}$")


def _safe_part(part: str) -> str:
    """One part of a path as an id's part: ASCII as it is, spaces and the like made ``-`` (``My Notes.md`` ->
    ``My-Notes.md``). A part with letters beyond ASCII keeps their nearest ASCII (accents dropped) and gains a
    digest of the part as written, so that ``会議.md`` and ``報告.md`` (or ``Café.md`` and ``Cafe.md``) stay two
    documents: without it every letter outside ASCII was dropped, and both were document ``md``. The digest is
    of the part in NFC: ``résumé.md`` with its accents apart (as macOS writes names) is the same document."""
    if part.isascii():
        return _UNSAFE.sub("-", part).strip("-._")
    suffix = found.group(0) if (found := _SUFFIX.search(part)) else ""
    stem = part[: len(part) - len(suffix)]
    base = _UNSAFE.sub("-", unicodedata.normalize("NFKD", stem).encode("ascii", "ignore").decode()).strip("-._")
    digest = hashlib.sha256(unicodedata.normalize("NFC", part).encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{base}-{digest}{suffix}" if base else f"{digest}{suffix}"


def document_import(
    parsed: ParsedDocument,
    *,
    doc_id: str | None = None,
    root: str | os.PathLike[str] | None = None,
    collection: str | None = None,
    doc_type: str | None = None,
    lang: str | None = None,
    source_url: str | None = None,
    model: str | None = None,
    title: str | None = None,
    max_chars: int = 1200,
    path: str | None = None,
) -> DocumentImport:
    """The import request for a parsed document, chunked with :func:`chunk_document`.

    Its id is ``doc_id``, else :func:`default_doc_id` of ``path`` (or the
    parsed file's) relative to ``root``.
    """
    where = path if path is not None else parsed.path
    return DocumentImport(
        doc_id=doc_id or default_doc_id(where, root),
        title=title or parsed.title,
        content_hash=parsed.content_hash,
        format=parsed.doc_type,
        chunks=tuple(chunk_document(parsed, max_chars=max_chars)),
        pages=len(parsed.text_pages),
        collection=collection or None,
        doc_type=doc_type or None,
        lang=lang or None,
        source_url=source_url or None,
        model=model or None,
        path=where,
        title_from_text=not title,
    )


def import_report(results: list[dict[str, Any]], correlation_id: str) -> dict[str, Any]:
    """What an import of several files reports: counts by outcome, then each file's result."""
    return {
        "documents": sum(1 for r in results if r["status"] == "imported"),
        "chunks": sum(r.get("chunks", 0) for r in results if r["status"] == "imported"),
        "skipped": sum(1 for r in results if r["status"] == "unchanged"),
        "failed": sum(1 for r in results if r["status"] == "failed"),
        "correlation_id": correlation_id,
        "results": results,
    }
