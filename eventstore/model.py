"""The memory model shared by commands and events: content, types, statuses.

A memory's *content* is everything a version holds (text and metadata);
events carry whole contents, so that a projector never needs earlier state
to apply a version, and a rollback is a copy of an old content.
"""

from __future__ import annotations

import enum
import math
import re
import unicodedata
from typing import Any, ClassVar

import msgspec

MAX_TAGS = 8
MAX_TEXT_CHARS = 100_000
MAX_EMBEDDING_DIM = 4096
MAX_REASON_CHARS = 2_000  # why a change was made: operator text recorded in the log


class MemoryType(str, enum.Enum):
    WORKING = "WorkingMemory"
    LONG_TERM = "LongTermMemory"
    USER = "UserMemory"
    OUTER = "OuterMemory"
    RAW_FILE = "RawFileMemory"
    TOPIC = "TopicMemory"


# Types that callers may write directly; TopicMemory is the organizer's.
WRITABLE_TYPES = tuple(t.value for t in MemoryType if t is not MemoryType.TOPIC)
# A memory of these types also enters its tenant's working memory.
ENTERS_WORKING_MEMORY = (MemoryType.LONG_TERM.value, MemoryType.USER.value)


class Status(str, enum.Enum):
    ACTIVATED = "activated"
    ARCHIVED = "archived"
    DELETED = "deleted"


class MemoryContent(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One version of a memory: its text and metadata.

    ``subject`` names whose data it is (a pseudonymous id; ``None``: the
    tenant's): the key that seals its personal fields, and what ``forget``
    erases. ``erased`` is never written: it is true on a content read after
    its subject was forgotten (see :mod:`mnemolog.eventstore.sealing`).
    """

    #: Sealed together (the first holds the token); the rest stays readable.
    personal: ClassVar[tuple[str, ...]] = ("memory", "key", "background", "tags", "sources", "source_url", "properties", "embedding")

    memory: str
    memory_type: str = MemoryType.LONG_TERM.value
    key: str | None = None
    tags: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    background: str | None = None
    confidence: float | None = None
    collection: str | None = None
    doc_type: str | None = None
    doc_id: str | None = None
    doc_version: str | None = None
    lang: str | None = None
    source_url: str | None = None
    model: str | None = None
    embedding: tuple[float, ...] | None = None
    properties: dict[str, Any] = {}
    subject: str | None = None
    erased: bool = False


CONTENT_FIELDS = tuple(f for f in MemoryContent.__struct_fields__ if f != "erased")  # ``erased`` is read, never written


class ValidationError(ValueError):
    """A command's input is invalid; ``field`` names the offending field."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class NotFound(LookupError):
    """A memory, edge or entity that the command names does not exist for this tenant."""

    def __init__(self, what: str, ident: str, *, field: str | None = None):
        self.what = what
        self.ident = ident
        self.field = field  # the request's field that named it, when not the path
        super().__init__(f"{what} {ident!r} not found")


class Conflict(Exception):
    """The command is refused by the current state (e.g. restoring an active memory)."""

    def __init__(self, message: str, *, current_version: int | None = None, field: str | None = None):
        self.current_version = current_version
        self.field = field  # the request's field whose value the state refuses, where one does
        super().__init__(message)


TAG_RE = re.compile(r"^[^\s,\x00-\x1f\x7f-\x9f]{1,64}$")  # no space, comma or control character (NUL, ...)


def folded_tag(tag: str) -> str:
    """A tag as it is stored and filtered by: stripped, lowercased, in NFC (a tag written with its accents apart,
    as macOS writes names, is the same tag as one written with them composed)."""
    return unicodedata.normalize("NFC", tag.strip().lower())


def normalise_tags(tags: Any, *, field: str = "tags", limit: int = MAX_TAGS) -> tuple[str, ...]:
    if tags is None:
        return ()
    if isinstance(tags, str):
        tags = [t for t in tags.split(",")]
    out: list[str] = []
    for tag in tags:
        if not isinstance(tag, str):
            raise ValidationError(field, "tags must be strings")
        tag = folded_tag(tag)
        if not tag:
            continue
        if not TAG_RE.fullmatch(tag):
            raise ValidationError(field, f"invalid tag {tag!r} (no spaces, commas or control characters, at most 64 characters)")
        if tag not in out:
            out.append(tag)
    if len(out) > limit:
        raise ValidationError(field, f"at most {limit} tags, got {len(out)}")
    return tuple(out)


MAX_SUBJECT_CHARS = 200
#: A subject id: a pseudonymous id (letters, digits, ``_ . : - @``), never a name with spaces; ``@`` never first
#: (names starting with it are not subjects). The API's schema publishes the same pattern.
SUBJECT_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:@-]{0,%d}$" % (MAX_SUBJECT_CHARS - 1))


def validate_subject(subject: object, *, field: str = "subject") -> str:
    """A subject id (see :data:`SUBJECT_RE`)."""
    if not isinstance(subject, str) or not SUBJECT_RE.fullmatch(subject):  # not match: its $ passes a final line break
        raise ValidationError(field, f"must be 1 to {MAX_SUBJECT_CHARS} letters, digits or _ . : - @, not starting with @")
    return subject


def validate_content(content: MemoryContent, *, field_prefix: str = "") -> MemoryContent:
    """Check and normalise a content; raise :class:`ValidationError` naming the field."""
    p = field_prefix
    text = content.memory
    if not isinstance(text, str) or not text.strip():
        raise ValidationError(p + "memory", "must be a non-empty string")
    if len(text) > MAX_TEXT_CHARS:
        raise ValidationError(p + "memory", f"at most {MAX_TEXT_CHARS} characters")
    if content.memory_type not in WRITABLE_TYPES and content.memory_type != MemoryType.TOPIC.value:
        raise ValidationError(p + "memory_type", f"must be one of {', '.join(WRITABLE_TYPES)}")
    if content.confidence is not None and not (0.0 <= content.confidence <= 1.0):
        raise ValidationError(p + "confidence", "must be between 0 and 1")
    if content.key is not None and len(content.key) > 200:
        raise ValidationError(p + "key", "at most 200 characters")
    if content.background is not None and len(content.background) > MAX_TEXT_CHARS:  # indexed as the text is
        raise ValidationError(p + "background", f"at most {MAX_TEXT_CHARS} characters")
    if content.subject is not None:
        validate_subject(content.subject, field=p + "subject")
    if content.erased:
        raise ValidationError(p + "erased", "is set by forget, never written")
    tags = normalise_tags(content.tags, field=p + "tags")
    sources = tuple(dict.fromkeys(str(s) for s in content.sources))
    embedding = content.embedding
    if embedding is not None:
        if not 0 < len(embedding) <= MAX_EMBEDDING_DIM:
            raise ValidationError(p + "embedding", f"must have 1 to {MAX_EMBEDDING_DIM} dimensions")
        if not all(math.isfinite(x) for x in embedding):
            raise ValidationError(p + "embedding", "must hold finite numbers")
        if not any(embedding):
            raise ValidationError(p + "embedding", "must not be all zeros")
    return msgspec.structs.replace(content, tags=tags, sources=sources)


#: Fields a merged memory holds one value of: the first source's non-empty value (the text is chosen apart,
#: the embedding made afresh; tags, sources and properties are joined).
_ONE_VALUE = tuple(f for f in CONTENT_FIELDS if f not in ("memory", "embedding", "tags", "sources", "properties"))


def embeddable(content: MemoryContent, dim: int | None) -> MemoryContent:
    """``content`` without a caller embedding whose length is not ``dim`` (the embedder's; None: any length): one
    from before the embedder changed would get no vector and never be searched, so the embedder embeds the text afresh."""
    if content.embedding is not None and dim and len(content.embedding) != dim:
        return msgspec.structs.replace(content, embedding=None)
    return content


def merge_union(a: MemoryContent, b: MemoryContent) -> tuple[MemoryContent, list[str]]:
    """``a`` with what ``b`` adds, and what of ``b`` it leaves out.

    ``a``'s non-empty values win; tags, sources and properties are joined (the
    tags uncapped). Left out: each field, and ``properties.<name>``, where both
    hold different values, and the tags beyond :data:`MAX_TAGS` (a merged
    memory keeps at most that many), each named with the values.
    """
    merged: dict[str, Any] = {}
    lost: list[str] = []
    for name in _ONE_VALUE:
        mine, theirs = getattr(a, name), getattr(b, name)
        if mine in (None, "") and theirs not in (None, ""):
            merged[name] = theirs
        elif theirs not in (None, "", mine):
            lost.append(f"{name} ({mine!r} vs {theirs!r})")
    properties = dict(a.properties)
    for k, v in b.properties.items():
        if k not in properties:
            properties[k] = v
        elif properties[k] != v:
            lost.append(f"properties.{k} ({properties[k]!r} vs {v!r})")
    tags = a.tags + tuple(t for t in b.tags if t not in a.tags)
    if len(tags) > MAX_TAGS:
        lost.append(f"tags ({len(tags)} together, at most {MAX_TAGS})")
    sources = a.sources + tuple(x for x in b.sources if x not in a.sources)
    return msgspec.structs.replace(a, tags=tags, sources=sources, properties=properties, **merged), lost


def merge_losses(contents: list[MemoryContent]) -> list[str]:
    """What a merge of ``contents`` (in this order) could not keep (see :func:`merge_union`); empty when nothing."""
    union, lost = contents[0], []
    for content in contents[1:]:
        union, dropped = merge_union(union, content)
        lost += [d for d in dropped if not d.startswith("tags ")]
    if len(union.tags) > MAX_TAGS:
        lost.append(f"tags ({len(union.tags)} together, at most {MAX_TAGS})")
    return lost


def merge_contents(contents: list[MemoryContent], text: str | None = None) -> MemoryContent:
    """The content of a merged memory: the union of sources, tags and properties, and of the other fields
    the first non-empty value (see :func:`merge_union`; :func:`merge_losses` says what is left out).

    The text is ``text`` when given, else the most informative (longest) text.
    A caller's embedding comes along with the text it embeds (that of the
    first source holding the kept text and an embedding); another text is
    embedded afresh by the embedder.
    """
    if not contents:
        raise ValueError("nothing to merge")
    chosen = text if text is not None else max((c.memory for c in contents), key=lambda t: (len(t.strip()), t))
    union = contents[0]
    for content in contents[1:]:
        union, _ = merge_union(union, content)
    embedding = next((c.embedding for c in contents if c.memory == chosen and c.embedding is not None), None)
    return msgspec.structs.replace(union, memory=chosen, tags=union.tags[:MAX_TAGS], embedding=embedding, erased=False)
