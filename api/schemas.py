"""Request and response Structs: decoded and validated by msgspec, and the source of the OpenAPI document."""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from mnemolog.eventstore.commands.edges import DERIVED_EDGES, EDGE_ID_RE, EDGE_TYPE_RE, NAMESPACE_RE
from mnemolog.eventstore.model import MAX_EMBEDDING_DIM, MAX_REASON_CHARS, MAX_TAGS, MAX_TEXT_CHARS, SUBJECT_RE
from mnemolog.eventstore.schema import MAX_POSITION
from mnemolog.projections.filters import MAX_FILTER_TAGS
from mnemolog.projections.graph.reads import TYPE_FILTER_RE, WorkingEntryView

#: Inside a character class: whitespace as Python's ``re`` and ``str.strip`` see it (ECMA's ``\s`` lacks \x1c-\x1f and \x85),
#: so that a published pattern means the same to a JSON Schema validator as to the server.
SPACE = r"\s\x1c-\x1f\x85"


def portable(pattern: str) -> str:
    r"""A pattern of the product's (Python ``re``) that matches the same strings under ECMA regex rules: ``\s`` spelt out."""
    out, in_class, i = [], False, 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and pattern[i + 1 : i + 2] == "s":
            out.append(SPACE if in_class else f"[{SPACE}]")
            i += 2
            continue
        if char == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        in_class = True if char == "[" else False if char == "]" else in_class
        out.append(char)
        i += 1
    return "".join(out)


Limit = Annotated[int, Meta(ge=1, le=100)]
#: An edge or relation type to filter by, as a filter reads it (``works at`` is ``WORKS_AT``; see ``type_filter``),
#: or empty (a form's field left blank), which filters nothing.
EdgeType = Annotated[str, Meta(max_length=64, pattern="^$|" + portable(TYPE_FILTER_RE.pattern))]
Depth = Annotated[int, Meta(ge=0, le=5)]
Weight = Annotated[float, Meta(ge=0.0, le=1.0)]
Text = Annotated[str, Meta(min_length=1, max_length=MAX_TEXT_CHARS, pattern=portable(r"[^\s]"))]  # not blank
#: A memory's tag as given: the command trims and lower-cases it; inside, no spaces or commas, at most 64 characters.
#: The command checks it (its error names the tag); the schema says the same.
MemoryTag = Annotated[str, Meta(extra_json_schema={"pattern": portable(r"^\s*[^\s,\x00-\x1f\x7f-\x9f]{0,64}\s*$")})]
#: The largest magnitude a float32 holds, the vector index's type: a larger number would be infinity there, and the memory never found.
FLOAT32_MAX = 3.4028234663852886e38
#: A caller's embedding: finite numbers a float32 holds, not all zeros (JSON carries no NaN or infinity).
Embedding = Annotated[list[Annotated[float, Meta(ge=-FLOAT32_MAX, le=FLOAT32_MAX)]], Meta(min_length=1, max_length=MAX_EMBEDDING_DIM, extra_json_schema={"contains": {"not": {"const": 0}}})]
#: A query's embedding: any finite numbers (it ranks by its direction, whatever its scale), not all zeros.
QueryEmbedding = Annotated[list[float], Meta(extra_json_schema={"contains": {"not": {"const": 0}}})]
Direction = Literal["out", "in", "both"]
MemoryTypeName = Literal["WorkingMemory", "LongTermMemory", "UserMemory", "OuterMemory", "RawFileMemory", "TopicMemory"]
Position = Annotated[int, Meta(ge=0, le=MAX_POSITION)]
#: Why a change was made: recorded in the log unsealed (a forget never reaches it), so operator text, no personal data.
Reason = Annotated[str, Meta(max_length=MAX_REASON_CHARS)]
#: ``as_of`` as text: an RFC 3339 time (mapped to the log's position then), a position in digits, or empty (the head).
#: The service resolves it (:meth:`mnemolog.projections.service.MemoryService.resolve_as_of`); the schema says what it takes.
AS_OF_TEXT_SCHEMA = {"anyOf": [{"format": "date-time"}, {"pattern": r"^[0-9]{1,18}$"}, {"maxLength": 0}]}
AsOfText = Annotated[str, Meta(extra_json_schema=AS_OF_TEXT_SCHEMA)]
AsOfQuery = Position | AsOfText  # in a query string (never null)
AsOf = AsOfQuery | None
Subject = Annotated[str, Meta(pattern=SUBJECT_RE.pattern)]
#: What a forget names: a subject, or ``@tenant`` (the tenant's own key: its entities, documents and memories without a subject).
ForgetSubject = Annotated[str, Meta(pattern="^(?:@tenant|" + SUBJECT_RE.pattern[1:-1] + ")$")]
#: An ISO-8601 UTC time (``2026-05-01``, ``2026-05-01T14:02:00Z``; the seconds and the ``Z`` may be left out): a date
#: or a time of that date, which ``SearchFilters`` compares as a time (a 30 February or a 25th hour is refused).
IsoTime = Annotated[str, Meta(pattern=r"^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?Z?)?$", extra_json_schema={"anyOf": [{"format": "date"}, {"format": "date-time"}]})]


class DocumentFieldsIn(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The document fields of a memory (and a caller's embedding), as a new memory and an update take them."""

    collection: str | None = None
    doc_type: str | None = None
    doc_id: str | None = None
    doc_version: str | None = None
    lang: str | None = None
    source_url: str | None = None
    model: str | None = None
    embedding: Embedding | None = None


class MemoryIn(DocumentFieldsIn, forbid_unknown_fields=True, kw_only=True):
    """A new memory: :class:`mnemolog.eventstore.model.MemoryContent`'s fields with the API's limits.

    :func:`mnemolog.api.operations.memory_content` turns it into the content with ``msgspec.convert(item,
    MemoryContent, from_attributes=True)``; ``tests/api/test_writes.py``
    checks that every field here is a content field.
    """

    memory: Text
    memory_type: Literal["WorkingMemory", "LongTermMemory", "UserMemory", "OuterMemory", "RawFileMemory"] = "LongTermMemory"
    key: Annotated[str, Meta(max_length=200)] | None = None
    tags: Annotated[list[MemoryTag], Meta(max_length=MAX_TAGS)] = []
    sources: list[str] = []
    background: Annotated[str, Meta(max_length=MAX_TEXT_CHARS)] | None = None  # indexed as the text is
    confidence: Annotated[float, Meta(ge=0, le=1)] | None = None
    properties: dict[str, Any] = {}
    subject: Subject | None = None  # whose data (a pseudonymous id; none: the tenant's): the key that seals it, what forget erases


class AddMemoriesRequest(msgspec.Struct, forbid_unknown_fields=True):
    """Either ``memory`` (one item) or ``memories`` (an atomic batch)."""

    body_required: ClassVar[bool] = True  # every field is optional, but one of them must be sent
    json_schema_one_of: ClassVar[tuple[str, ...]] = ("memory", "memories")  # the document: exactly one of them
    memory: MemoryIn | UnsetType = UNSET
    memories: Annotated[list[MemoryIn], Meta(min_length=1, max_length=10_000)] | UnsetType = UNSET


class UpdateMemoryRequest(DocumentFieldsIn, forbid_unknown_fields=True, kw_only=True):
    """The fields to change (at least one); those left out keep their value, and null clears an optional one.

    Every field defaults to ``UNSET`` (left out), so that ``UpdateMemoryRequest(key=None)`` sends
    ``"key": null`` and clears the key: the server changes the fields the body names.
    """

    body_required: ClassVar[bool] = True
    collection: str | None | UnsetType = UNSET
    doc_type: str | None | UnsetType = UNSET
    doc_id: str | None | UnsetType = UNSET
    doc_version: str | None | UnsetType = UNSET
    lang: str | None | UnsetType = UNSET
    source_url: str | None | UnsetType = UNSET
    model: str | None | UnsetType = UNSET
    embedding: Embedding | None | UnsetType = UNSET
    memory: Text | UnsetType = UNSET
    key: Annotated[str, Meta(max_length=200)] | None | UnsetType = UNSET
    tags: Annotated[list[MemoryTag], Meta(max_length=MAX_TAGS)] | UnsetType = UNSET
    sources: list[str] | UnsetType = UNSET
    background: Annotated[str, Meta(max_length=MAX_TEXT_CHARS)] | None | UnsetType = UNSET  # indexed as the text is
    confidence: Annotated[float, Meta(ge=0, le=1)] | None | UnsetType = UNSET
    properties: dict[str, Any] | UnsetType = UNSET
    subject: Subject | None | UnsetType = UNSET
    reason: Reason = ""


UpdateMemoryRequest.json_schema_extra = {  # type: ignore[attr-defined]
    "anyOf": [{"required": [name]} for name in UpdateMemoryRequest.__struct_fields__ if name != "reason"]
}


class MergeRequest(msgspec.Struct, forbid_unknown_fields=True):
    memory_ids: Annotated[list[Annotated[str, Meta(min_length=1)]], Meta(min_length=2, max_length=100, extra_json_schema={"uniqueItems": True})]
    text: Text | None = None
    #: The version each named source must be at (as If-Match for one memory): another is a 409 with its current version.
    expected_versions: dict[str, Annotated[int, Meta(ge=1, le=MAX_POSITION)]] | None = None


class ForgetRequest(msgspec.Struct, forbid_unknown_fields=True):
    reason: Reason = ""  # recorded in the log: no personal data


class ReasonRequest(msgspec.Struct, forbid_unknown_fields=True):
    reason: Reason = ""


class DeleteRequest(msgspec.Struct, forbid_unknown_fields=True):
    reason: Reason = ""
    evolve_to: Annotated[str, Meta(min_length=1)] | None = None


class RollbackRequest(msgspec.Struct, forbid_unknown_fields=True):
    to_version: Annotated[int, Meta(ge=1, le=MAX_POSITION)]
    reason: Reason = ""


class SupersedeRequest(msgspec.Struct, forbid_unknown_fields=True):
    superseded_by: Annotated[str, Meta(min_length=1)]


#: Not under a prefix of the edges that mirror another record (``rel:``, ``merged:``, ``superseded:``): they change
#: only with that record, and the edge commands refuse them (422).
_NOT_DERIVED = {"not": {"pattern": "^(?:" + "|".join(re.escape(p) for p in DERIVED_EDGES) + ")"}}
#: An edge id a caller names: namespaced (``user:notes:1``), and none of the derived edges' (:data:`_NOT_DERIVED`).
EdgeId = Annotated[str, Meta(pattern=portable(EDGE_ID_RE.pattern), max_length=255, extra_json_schema=_NOT_DERIVED)]


class LinkRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    source: str
    target: str
    edge_type: Annotated[str, Meta(pattern=EDGE_TYPE_RE.pattern)] = "RELATED"
    weight: Weight = 1.0
    edge_id: EdgeId | None = None  # and distinct from the others
    properties: dict[str, Any] = {}


class UndoNamespaceRequest(msgspec.Struct, forbid_unknown_fields=True):
    prefix: Annotated[str, Meta(min_length=2, max_length=255, pattern=portable(NAMESPACE_RE.pattern), extra_json_schema=_NOT_DERIVED)]
    reason: Reason = ""


class RevertRequest(msgspec.Struct, forbid_unknown_fields=True):
    correlation_id: Annotated[str, Meta(min_length=1, max_length=200)]
    force: bool = False
    dry_run: bool = False  # report what would be reverted (events, memories, conflicts), write nothing


class DropTenantRequest(msgspec.Struct, forbid_unknown_fields=True):
    confirm: str
    reason: Reason = ""


class WriteResponse(msgspec.Struct):
    positions: list[int]
    correlation_id: str
    replayed: bool = False
    memory_ids: list[str] = []
    data: dict[str, Any] = {}


class Filters(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    memory_types: list[MemoryTypeName] | None = None
    tags: Annotated[list[str], Meta(max_length=MAX_FILTER_TAGS)] | None = None  # any of them
    status: list[Literal["activated", "archived", "deleted"]] | None = None
    collection: str | None = None
    exclude_collection: str | None = None
    doc_type: str | None = None
    model: str | None = None
    doc_ids: list[str] | None = None
    created_from: IsoTime | None = None
    created_to: IsoTime | None = None
    updated_from: IsoTime | None = None
    updated_to: IsoTime | None = None


class ChannelWeights(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    semantic: Annotated[float, Meta(ge=0, le=10)] | None = None
    lexical: Annotated[float, Meta(ge=0, le=10)] | None = None
    graph: Annotated[float, Meta(ge=0, le=10)] | None = None


class RecallQuery(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """What recall and search share: the query, filters, channels and their weights, ``as_of``."""

    query: Annotated[str, Meta(min_length=1, max_length=4000, pattern=portable(r"[^\s]"))]  # not blank: it would search nothing
    limit: Limit = 10
    filters: Filters = msgspec.field(default_factory=Filters)
    as_of: AsOf = None
    min_position: Annotated[int, Meta(ge=0)] | None = None
    channels: Annotated[list[Literal["lexical", "semantic", "graph"]], Meta(min_length=1)] | None = None  # [] would run no channel: left out means the defaults
    weights: ChannelWeights = msgspec.field(default_factory=ChannelWeights)
    fusion: Literal["score", "rrf"] | None = None  # None: MNEMOLOG_RECALL_FUSION
    raw_fts: bool = False
    embedding: QueryEmbedding | None = None
    graph_depth: Depth | None = None  # None: 1 along memory edges, MNEMOLOG_RECALL_ENTITY_DEPTH along entity relations
    graph_direction: Direction = "both"
    graph_edge_types: list[EdgeType] | None = None
    # hybrid (default): memories and entities; knowledge-only: memories; graph-only: the graph channel alone.
    strategy: Literal["hybrid", "knowledge-only", "graph-only"] | None = None


class RecallRequest(RecallQuery, forbid_unknown_fields=True, kw_only=True):
    """Fused recall. ``rrf_k`` belongs to rrf fusion and ``propagation`` to score fusion: each is refused under the other.

    The OpenAPI document says so for the server's default fusion (``fusion``
    left out), which it reads from the server's settings.
    """

    rrf_k: Annotated[float, Meta(ge=1, le=1000)] | None = None  # rrf fusion only
    propagation: bool | None = None  # score fusion only


#: Parameters that only one way of fusing uses.
FUSION_ONLY = {"rrf_k": "rrf", "propagation": "score"}


class SearchRequest(RecallQuery, forbid_unknown_fields=True, kw_only=True):
    """The raw channels, unfused: each channel's own ranking.

    ``fusion`` only chooses the default channel weights (a channel weighted 0
    is off); ``rrf_k`` and ``propagation`` belong to fusion and are not taken.
    """


class SubgraphRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    seeds: Annotated[list[str], Meta(min_length=1, max_length=100)]
    depth: Depth = 2
    direction: Direction = "both"
    edge_types: list[EdgeType] | None = None
    max_nodes: Annotated[int, Meta(ge=1, le=5000)] = 200
    max_edges: Annotated[int, Meta(ge=1, le=20000)] = 1000
    as_of: AsOf = None


class WorkingMemoryResponse(msgspec.Struct, kw_only=True):
    """A tenant's working memory, oldest entry first, at the head or as of a position."""

    as_of: int | None
    capacity: int
    entries: list[WorkingEntryView]


class ErrorDetail(msgspec.Struct):
    """An error: its ``code``, a ``message`` for people and the ``field`` at fault; some errors say more.

    A 409 on a memory's version has its ``current_version``. A 503 or 507
    whose write the log took (the projections could not follow it yet) says
    ``written: true`` with its ``correlation_id`` and positions: do not send it again.
    """

    code: str
    message: str
    field: str | None = None
    current_version: int | None | UnsetType = UNSET
    written: bool | UnsetType = UNSET
    correlation_id: str | UnsetType = UNSET
    first_position: int | UnsetType = UNSET
    last_position: int | UnsetType = UNSET


class ErrorEnvelope(msgspec.Struct):
    error: ErrorDetail
