"""Request and response Structs: decoded and validated by msgspec, and the source of the OpenAPI document."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

import msgspec
from msgspec import Meta

from mnemolog.eventstore.model import MAX_TAGS
from mnemolog.projections.graph.reads import WorkingEntryView
from mnemolog.projections.recall.searcher import RecallResult

Limit = Annotated[int, Meta(ge=1, le=100)]
Depth = Annotated[int, Meta(ge=0, le=5)]
Weight = Annotated[float, Meta(ge=0.0, le=1.0)]
Text = Annotated[str, Meta(min_length=1, max_length=100_000)]
Direction = Literal["out", "in", "both"]
MemoryTypeName = Literal["WorkingMemory", "LongTermMemory", "UserMemory", "OuterMemory", "RawFileMemory", "TopicMemory"]
AsOf = int | str | None
Subject = Annotated[str, Meta(min_length=1, max_length=200, pattern=r"^[^@]")]
# An ISO-8601 UTC time as memories store it (``2026-05-01``, ``2026-05-01T14:02:00Z``): compared as text.
IsoTime = Annotated[str, Meta(pattern=r"^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?Z?)?$")]


class DocumentFieldsIn(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """The document fields of a memory (and a caller's embedding), as a new memory and an update take them."""

    collection: str | None = None
    doc_type: str | None = None
    doc_id: str | None = None
    doc_version: str | None = None
    lang: str | None = None
    source_url: str | None = None
    model: str | None = None
    embedding: list[float] | None = None


class MemoryIn(DocumentFieldsIn, forbid_unknown_fields=True, kw_only=True):
    """A new memory: :class:`mnemolog.eventstore.model.MemoryContent`'s fields with the API's limits.

    :func:`mnemolog.api.operations.memory_content` turns it into the content with ``msgspec.convert(item,
    MemoryContent, from_attributes=True)``; ``tests/api/test_writes.py``
    checks that every field here is a content field.
    """

    memory: Text
    memory_type: Literal["WorkingMemory", "LongTermMemory", "UserMemory", "OuterMemory", "RawFileMemory"] = "LongTermMemory"
    key: Annotated[str, Meta(max_length=200)] | None = None
    tags: Annotated[list[str], Meta(max_length=MAX_TAGS)] = []
    sources: list[str] = []
    background: str | None = None
    confidence: Annotated[float, Meta(ge=0, le=1)] | None = None
    properties: dict[str, Any] = {}
    subject: Subject | None = None  # whose data (a pseudonymous id; none: the tenant's): the key that seals it, what forget erases


class AddMemoriesRequest(msgspec.Struct, forbid_unknown_fields=True):
    """Either ``memory`` (one item) or ``memories`` (an atomic batch)."""

    body_required: ClassVar[bool] = True  # every field is optional, but one of them must be sent
    memory: MemoryIn | None = None
    memories: Annotated[list[MemoryIn], Meta(max_length=10_000)] | None = None


class UpdateMemoryRequest(DocumentFieldsIn, forbid_unknown_fields=True, kw_only=True):
    """The fields to change (at least one); those left out keep their value."""

    body_required: ClassVar[bool] = True
    memory: Text | None = None
    key: str | None = None
    tags: Annotated[list[str], Meta(max_length=MAX_TAGS)] | None = None
    sources: list[str] | None = None
    background: str | None = None
    confidence: Annotated[float, Meta(ge=0, le=1)] | None = None
    properties: dict[str, Any] | None = None
    subject: Subject | None = None
    reason: str = ""


class MergeRequest(msgspec.Struct, forbid_unknown_fields=True):
    memory_ids: Annotated[list[str], Meta(min_length=2, max_length=100)]
    text: str | None = None


class ForgetRequest(msgspec.Struct, forbid_unknown_fields=True):
    reason: Annotated[str, Meta(max_length=2000)] = ""  # recorded in the log: no personal data


class ReasonRequest(msgspec.Struct, forbid_unknown_fields=True):
    reason: str = ""


class DeleteRequest(msgspec.Struct, forbid_unknown_fields=True):
    reason: str = ""
    evolve_to: str | None = None


class RollbackRequest(msgspec.Struct, forbid_unknown_fields=True):
    to_version: Annotated[int, Meta(ge=1)]
    reason: str = ""


class SupersedeRequest(msgspec.Struct, forbid_unknown_fields=True):
    superseded_by: str


class LinkRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    source: str
    target: str
    edge_type: Annotated[str, Meta(pattern=r"^[A-Z][A-Z0-9_]{0,63}$")] = "RELATED"
    weight: Weight = 1.0
    edge_id: str | None = None
    properties: dict[str, Any] = {}


class UndoNamespaceRequest(msgspec.Struct, forbid_unknown_fields=True):
    prefix: Annotated[str, Meta(min_length=2, max_length=255)]
    reason: str = ""


class RevertRequest(msgspec.Struct, forbid_unknown_fields=True):
    correlation_id: Annotated[str, Meta(min_length=1)]
    force: bool = False
    dry_run: bool = False  # report what would be reverted (events, memories, conflicts), write nothing


class DropTenantRequest(msgspec.Struct, forbid_unknown_fields=True):
    confirm: str
    reason: str = ""


class WriteResponse(msgspec.Struct):
    positions: list[int]
    correlation_id: str
    replayed: bool = False
    memory_ids: list[str] = []
    data: dict[str, Any] = {}


class Filters(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    memory_types: list[MemoryTypeName] | None = None
    tags: list[str] | None = None
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


class RecallRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    query: Annotated[str, Meta(min_length=1, max_length=4000)]
    limit: Limit = 10
    filters: Filters = msgspec.field(default_factory=Filters)
    as_of: AsOf = None
    min_position: Annotated[int, Meta(ge=0)] | None = None
    channels: list[Literal["lexical", "semantic", "graph"]] | None = None
    weights: ChannelWeights = msgspec.field(default_factory=ChannelWeights)
    fusion: Literal["score", "rrf"] | None = None  # None: MNEMOLOG_RECALL_FUSION
    rrf_k: Annotated[float, Meta(ge=1, le=1000)] | None = None  # rrf fusion only
    raw_fts: bool = False
    embedding: list[float] | None = None
    graph_depth: Depth | None = None  # None: 1 along memory edges, MNEMOLOG_RECALL_ENTITY_DEPTH along entity relations
    graph_direction: Direction = "both"
    graph_edge_types: list[str] | None = None
    propagation: bool | None = None  # score fusion only
    # hybrid (default): memories and entities; knowledge-only: memories; graph-only: the graph channel alone.
    strategy: Literal["hybrid", "knowledge-only", "graph-only"] | None = None


#: The answer of ``POST /v1/recall``: typed hits (``kind`` memory or entity), the strategy used, the answer subgraph.
RecallResponse = RecallResult


class SearchRequest(RecallRequest, forbid_unknown_fields=True, kw_only=True):
    """The raw channels, unfused: each channel's own ranking.

    ``fusion`` only chooses the default channel weights (a channel weighted 0
    is off); ``rrf_k`` and ``propagation`` belong to fusion and are refused.
    """


class SubgraphRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    seeds: Annotated[list[str], Meta(min_length=1, max_length=100)]
    depth: Depth = 2
    direction: Direction = "both"
    edge_types: list[str] | None = None
    max_nodes: Annotated[int, Meta(ge=1, le=5000)] = 200
    max_edges: Annotated[int, Meta(ge=1, le=20000)] = 1000
    as_of: AsOf = None


class WorkingMemoryResponse(msgspec.Struct, kw_only=True):
    """A tenant's working memory, oldest entry first, at the head or as of a position."""

    as_of: int | None
    capacity: int
    entries: list[WorkingEntryView]


class ErrorDetail(msgspec.Struct):
    code: str
    message: str
    field: str | None = None


class ErrorEnvelope(msgspec.Struct):
    error: ErrorDetail
