"""Request Structs of the knowledge-graph endpoints (entities, relations, documents, linking)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

from mnemolog.eventstore.commands.documents import DOC_ID_MAX, DOC_ID_RE, DOCUMENT_FIELD_MAX
from mnemolog.eventstore.commands.entities import ENTITY_ID_RE, MAX_PROPERTIES

from .schemas import AsOf, Reason, Weight, portable

#: The control characters that are not whitespace (the command collapses whitespace to one space, and refuses these).
_CONTROL = r"\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f"
#: A name: not blank, and no control character but whitespace.
Name = Annotated[str, Meta(min_length=1, max_length=200, pattern=portable(rf"^(?=[\s\S]*[^\s])[^{_CONTROL}]*$"))]
#: An alias: no control character but whitespace (a blank one is left out).
Alias = Annotated[str, Meta(max_length=200, pattern=f"^[^{_CONTROL}]*$")]
EntityId = Annotated[str, Meta(min_length=1, max_length=100, pattern=ENTITY_ID_RE.pattern)]
#: A tag as given: no commas, at most 64 characters (the command trims, lower-cases and turns spaces into ``-``).
Tag = Annotated[str, Meta(extra_json_schema={"maxLength": 64, "pattern": f"^[^,{_CONTROL}]*$"})]  # checked by the command, whose error names the tag
#: A type or a description: no control character but whitespace.
NoControls = Annotated[str, Meta(pattern=f"^[^{_CONTROL}]*$")]
#: A relation type as given: letters, digits, ``_``, spaces or ``-`` (a run of spaces and dashes becomes ``_``), upper-cased by the command.
RelationType = Annotated[str, Meta(min_length=1, max_length=40, pattern=portable(r"^\s*[A-Za-z][A-Za-z0-9_]*(?:[\s-]+[A-Za-z0-9_]+)*[\s-]*$"))]
DocId = Annotated[str, Meta(max_length=DOC_ID_MAX, pattern=DOC_ID_RE.pattern)]


class EntityIn(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The entity's whole new state; tags beyond the limit are cut and reported, not refused."""

    name: Name
    entity_type: Annotated[NoControls, Meta(max_length=64)] = ""
    description: Annotated[NoControls, Meta(max_length=4000)] = ""
    aliases: Annotated[list[Alias], Meta(max_length=64)] = []
    tags: Annotated[list[Tag], Meta(max_length=256)] = []
    properties: Annotated[dict[Annotated[str, Meta(min_length=1, max_length=100)], Annotated[str, Meta(max_length=2000)]], Meta(max_length=MAX_PROPERTIES)] = {}


class TagsIn(msgspec.Struct, forbid_unknown_fields=True):
    tags: Annotated[list[Tag], Meta(max_length=256)]


class RelationIn(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    target_id: EntityId
    relation_type: RelationType
    weight: Weight = 1.0


class RelationKey(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    target_id: EntityId
    relation_type: RelationType
    reason: Reason = ""


class RemoveEntityRequest(msgspec.Struct, forbid_unknown_fields=True):
    reason: Reason = ""


def _field(name: str) -> type:
    """A document's title or metadata value: every chunk carries it, so it is held to :data:`DOCUMENT_FIELD_MAX`."""
    return Annotated[str, Meta(max_length=DOCUMENT_FIELD_MAX[name])]  # type: ignore[return-value]


class DocumentMeta(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    collection: _field("collection") | None = None
    doc_type: _field("doc_type") | None = None
    lang: _field("lang") | None = None
    source_url: _field("source_url") | None = None
    model: _field("model") | None = None


class DocumentIn(DocumentMeta, forbid_unknown_fields=True, kw_only=True):
    """One file: ``content`` is its text, or its bytes in base64 (PDFs).

    Its document id is ``doc_id`` (a relative path such as ``kb/guide.md``),
    else ``filename`` made safe, folders included: ``a/README.md`` and
    ``b/README.md`` are two documents.
    """

    filename: Annotated[str, Meta(min_length=1, max_length=255)]
    content: str
    encoding: Literal["text", "base64"] = "text"
    doc_id: DocId | None = None
    title: _field("title") | None = None


class ImportDocumentsRequest(DocumentMeta, forbid_unknown_fields=True, kw_only=True):
    """A batch; the top-level metadata applies to every document that does not set its own."""

    documents: Annotated[list[DocumentIn], Meta(min_length=1, max_length=1000)]


class RelinkRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    commit: bool = False
    include_tags: bool = False
    max_alias_document_frequency: Annotated[float, Meta(gt=0, le=1)] | None = None
    preview: Annotated[int, Meta(ge=0, le=1000)] = 20


class DocumentLinksRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    doc_id: DocId | None = None
    collection: str | None = None
    min_shared: Annotated[int, Meta(ge=1, le=1000)] = 1
    limit: Annotated[int, Meta(ge=1, le=500)] = 20
    max_entity_documents: Annotated[int, Meta(ge=2, le=100_000)] = 200
    as_of: AsOf = None


class RelationsRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    question: Annotated[str, Meta(min_length=1, max_length=4000)]
    limit: Annotated[int, Meta(ge=1, le=50)] = 10
    as_of: AsOf = None
