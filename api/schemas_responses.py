"""Response Structs of the read operations: the server encodes its answers with them, the client decodes them, the OpenAPI document shows them.

Where a read of the projections already returns a Struct (a memory, an edge,
an entity, a recall result, a verify result), the response is built from it
rather than copied. A field that an answer may leave out is declared with a
default and ``omit_defaults=True``, so that the JSON stays as it was.
"""

from __future__ import annotations

from typing import Any

import msgspec

from mnemolog.eventstore.chain import VerifyResult
from mnemolog.eventstore.store import Commit
from mnemolog.projections.entities.projector import EntityView, Related, RelationView
from mnemolog.projections.graph.reads import EdgeView, MemoryView, Reached
from mnemolog.projections.recall.searcher import ChannelState, RecallResult

__all__ = [
    "WhoAmIResponse",
    "TimelineResponse",
    "NeighborhoodPage",
    "CorrelationPage",
    "CapabilitiesResponse",
    "DigestResponse",
    "DocumentLinksResponse",
    "EntitiesResponse",
    "EntityResponse",
    "EventView",
    "EventsPage",
    "GraphStatsResponse",
    "HealthResponse",
    "ImportReport",
    "MemoryHistoryResponse",
    "MemoryView",
    "NeighborsResponse",
    "OpenApiDocument",
    "OrganizerStatusResponse",
    "RecallResult",
    "RelatedResponse",
    "RelationCardsResponse",
    "RelinkReport",
    "SearchResponse",
    "SubgraphResponse",
    "TagsResponse",
    "VerifyResult",
]


# -- meta ----------------------------------------------------------------------------------------------


class ServerState(msgspec.Struct, kw_only=True):
    """The version, the log's head, each projection's lag (events behind the head) and the vector index's lag."""

    version: str
    commit: str
    head_position: int
    projection_lags: dict[str, int]
    vector_index_lag: int


class HealthResponse(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Liveness (``status`` is ``ok``) and, for a caller entitled to it, the server's state (see :class:`ServerState`).

    With auth on, a caller without a key learns liveness alone: the log's
    positions tell how much every tenant writes, and the version tells which
    fixes a server lacks."""

    status: str
    version: str | None = None
    commit: str | None = None
    head_position: int | None = None
    projection_lags: dict[str, int] | None = None
    vector_index_lag: int | None = None


class CapabilitiesResponse(ServerState, kw_only=True):
    """What this server runs: its state, the recall channels, the embedder, whether the organizer runs."""

    channels: dict[str, bool]
    embedder: str
    organizer: bool


class OpenApiDocument(msgspec.Struct, kw_only=True):
    """This API as an OpenAPI 3.1 document."""

    openapi: str
    info: dict[str, Any]
    paths: dict[str, dict[str, Any]]
    components: dict[str, Any]


# -- recall ----------------------------------------------------------------------------------------------


class ChannelRank(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One hit of one channel: its rank there, its score, and for the graph channel the path that reached it.

    A memory's path is the ids of the edges walked; an entity's (``kind``
    ``entity``) is the relations walked from an entity the query names.
    """

    id: str
    rank: int
    score: float
    kind: str | None = None
    path: list[str | RelationView] | None = None


class SearchResponse(msgspec.Struct, kw_only=True):
    """The raw channels, unfused: each channel's own ranking, and each channel's state.

    ``position``: the position the projections had reached when the read began (a head read sees at least what
    it held: a write committed while the channels read may show too; read ``as_of`` a position for answers that
    hold still); ``as_of``: the position the channels were read as of (the
    request's ``as_of`` resolved, a time to the last position written by then), None at the head, as recall says it.
    """

    query: str
    terms: list[str]
    channels: dict[str, list[ChannelRank]]
    states: dict[str, ChannelState]
    position: int
    as_of: int | None = None


# -- memories and the graph ---------------------------------------------------------------------------------


class MemoryVersionView(msgspec.Struct, kw_only=True):
    """One version of a memory as its stream recorded it."""

    version: int
    position: int
    recorded_at: str
    event_type: str
    actor: str | None
    correlation_id: str | None
    memory: str
    key: str | None
    tags: list[str]
    status: str
    reason: str | None
    mentions: list[str] = []  # the entities the memory was linked to while this version was current
    subject: str | None = None  # whose key seals its personal fields (none: the tenant's)
    erased: bool = False  # its subject was forgotten
    changed: list[str] = []  # the fields (content, then status) that differ from the version before
    memory_type: str = ""
    sources: list[str] = []
    background: str | None = None
    confidence: float | None = None
    metadata: dict[str, Any] = {}  # the document fields that are set (collection, doc_type, doc_id, …)
    properties: dict[str, Any] = {}
    has_embedding: bool = False


class MentionLinkView(msgspec.Struct, kw_only=True):
    """A ``MENTIONS`` link of a memory to an entity: the linker's alias and confidence, and the positions it held between."""

    edge_id: str
    entity_id: str
    weight: float
    alias: str | None
    linked_at: int
    unlinked_at: int | None


class ForgetView(msgspec.Struct, kw_only=True):
    """A forget that erased the memory: the subject (``@tenant``: the tenant's own key), who, when, why;
    ``plaintext_kept``: the memory's events before it that the log keeps in plaintext (written unsealed, so no
    forget erases them; read erased)."""

    position: int
    recorded_at: str
    event_type: str
    subject: str
    actor: str | None
    correlation_id: str | None
    reason: str | None
    plaintext_kept: list[int] = []


class MemoryHistoryResponse(msgspec.Struct, kw_only=True):
    """A page of a memory's versions: ``more`` says whether others follow, from ``after=next_after``."""

    memory_id: str
    versions: list[MemoryVersionView]
    mention_links: list[MentionLinkView] = []
    forgotten: list[ForgetView] = []
    more: bool = False
    next_after: int = 0


class NeighborsResponse(msgspec.Struct, kw_only=True):
    """A node's edges and the nodes a BFS reached from it, each with its path; ``truncated``: the walk
    stopped at its limit (500 nodes) with more beyond; ``edges_truncated``: the node has more than the
    1,000 edges listed (outgoing first, each side in the order linked)."""

    node: str
    edges: list[EdgeView]
    reached: list[Reached]
    truncated: bool = False
    edges_truncated: bool = False


class SubgraphNode(msgspec.Struct, kw_only=True):
    """A node of a subgraph; ``memory`` is None for a node that is not a memory (an entity, a document)."""

    id: str
    memory: MemoryView | None


class SubgraphResponse(msgspec.Struct, kw_only=True):
    nodes: list[SubgraphNode]
    edges: list[EdgeView]
    reached: list[Reached]
    truncated: bool


class GraphStatsResponse(msgspec.Struct, kw_only=True):
    """Counts of memories by status and edges by type, and the size of working memory."""

    memories: dict[str, int]
    memories_total: int
    edges: dict[str, int]
    edges_total: int
    working_memory: int
    as_of: int | None


# -- the log ---------------------------------------------------------------------------------------------


class EventView(msgspec.Struct, kw_only=True):
    """An event of the log: its envelope, its payload and its metadata (``recorded_at`` in UTC, ``Z``)."""

    position: int
    event_id: str
    stream_id: str
    stream_version: int
    type: str
    schema_version: int
    tenant: str
    recorded_at: str
    payload: dict[str, Any]
    metadata: dict[str, Any]


class EventsPage(msgspec.Struct, kw_only=True):
    """A page of events; the next page starts after ``next_after``."""

    events: list[EventView]
    next_after: int


class DigestResponse(msgspec.Struct, kw_only=True):
    """The log's tip; ``digest`` (``POSITION:HASH``) is what ``verify`` takes as ``against``."""

    position: int
    hash: str
    digest: str


class OrganizerStatusResponse(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The organizer's position and last runs; ``caught_up``: it has processed the position asked about.

    ``runs_here`` is false when another worker of the server runs it: ``position`` and ``caught_up`` are then
    its stored progress, and its last runs and decision counts are that worker's to tell (null and 0 here).
    """

    position: int
    enabled: bool
    last_run: dict[str, Any] | None
    decisions: int
    caught_up: bool
    last_cluster: dict[str, Any] | None = None
    decisions_by_action: dict[str, int] = {}
    runs_here: bool = True


# -- entities --------------------------------------------------------------------------------------------


class EntityResponse(EntityView, frozen=True, kw_only=True):
    """An entity with its relations (both directions)."""

    relations: list[RelationView]


class EntitiesResponse(msgspec.Struct, kw_only=True):
    entities: list[EntityView]
    count: int


class RelatedEntity(Related, frozen=True, kw_only=True):
    """An entity reached from another, with its name and type."""

    name: str
    entity_type: str


class RelatedResponse(msgspec.Struct, kw_only=True):
    """The entities reached (at most ``limit`` of ``total``); ``truncated``: the walk stopped at its
    limit (1,000 entities) with more beyond, the ``total`` it counts."""

    entity_id: str
    depth: int
    direction: str
    total: int
    related: list[RelatedEntity]
    truncated: bool = False


class TagCount(msgspec.Struct, kw_only=True):
    tag: str
    entities: int


class TagsResponse(msgspec.Struct, kw_only=True):
    tags: list[TagCount]


# -- documents and linking ----------------------------------------------------------------------------------


class ImportedFile(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One file's outcome: ``status`` is ``imported``, ``unchanged`` or ``failed`` (then ``reason`` and ``error`` say why)."""

    filename: str
    status: str
    reason: str | None = None
    error: str | None = None
    doc_id: str | None = None
    node: str | None = None
    title: str | None = None
    version: int | None = None
    chunks: int | None = None
    archived: int | None = None
    mentions: int | None = None
    mention_prefix: str | None = None
    positions: list[int] | None = None
    memory_ids: list[str] | None = None


class ImportReport(msgspec.Struct, kw_only=True):
    """An import: counts by outcome, then each file's result."""

    documents: int
    chunks: int
    skipped: int
    failed: int
    correlation_id: str
    results: list[ImportedFile]


class RelinkReport(msgspec.Struct, kw_only=True, omit_defaults=True):
    """What a relink planned and, with ``commit``, wrote (``run_id``, ``prefix``, ``added``, ``removed``, ``positions``).

    ``committed`` is false on a dry run and when there was nothing to change.
    """

    dry_run: bool
    committed: bool
    chunks: int
    memories: int
    memory_mentions: int
    by_kind: dict[str, dict[str, int]]  # added, removed and kept edges of chunks (documents' too) and of memories
    memory_dropped_aliases: list[dict[str, Any]]
    entities: int
    catalogue_size: int
    include_tags: bool
    max_alias_document_frequency: float | None
    mentions: int
    document_mentions: int
    add: int
    remove: int
    kept: int
    added_preview: list[dict[str, Any]]
    removed_preview: list[dict[str, Any]]
    cross_document_pairs: list[dict[str, Any]]
    cross_document_pair_count: int
    new_document_pair_count: int
    dropped_aliases: list[dict[str, Any]]
    ambiguous_aliases: int
    rejected_surfaces: int
    run_id: str | None = None
    prefix: str | None = None
    added: int | None = None
    removed: int | None = None
    correlation_id: str | None = None
    positions: list[int] | None = None
    replayed: bool | None = None


class SharedEntity(msgspec.Struct, kw_only=True):
    """An entity two documents both mention; ``evidence``: the chunks that mention it, by document id."""

    entity_id: str
    name: str
    idf: float
    evidence: dict[str, list[str]]


class DocumentPair(msgspec.Struct, kw_only=True):
    documents: list[str]
    titles: list[str]
    score: float
    shared: list[SharedEntity]


class DocumentLinksResponse(msgspec.Struct, kw_only=True):
    """``documents``: how many documents were considered; ``pairs``: the best-linked pairs first."""

    documents: int
    pairs: list[DocumentPair]


class CardEntity(msgspec.Struct, kw_only=True):
    id: str
    name: str
    entity_type: str
    aliases: list[str]
    description: str


class CardRelation(msgspec.Struct, kw_only=True):
    direction: str
    relation_type: str
    entity_id: str
    name: str
    weight: float


class RelationCard(msgspec.Struct, kw_only=True):
    entity: CardEntity
    matched_alias: str
    relations: list[CardRelation]


class RelationCardsResponse(msgspec.Struct, kw_only=True):
    matched: bool
    question: str
    cards: list[RelationCard]


# -- the explorer's reads ------------------------------------------------------------------------------------


class WhoAmIResponse(msgspec.Struct, kw_only=True):
    """The calling key (``key_id`` and ``name`` null when the server runs without auth) and the scopes it holds."""

    auth: bool
    tenant: str
    key_id: str | None
    name: str | None
    scopes: list[str]


class TimelineResponse(msgspec.Struct, kw_only=True):
    """The tenant's commits as marks for a slider; ``sampled``: an even sample of ``commits`` (the latest always in)."""

    tenant: str
    head_position: int
    commits: int
    sampled: bool
    marks: list[Commit]


class NeighborhoodNode(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A node of a neighbourhood page, labelled: a memory (its text, status, version), an entity (its name, type) or a bare node."""

    id: str
    depth: int
    score: float
    kind: str
    label: str
    status: str | None = None
    version: int | None = None
    entity_type: str | None = None


class NeighborhoodEdge(msgspec.Struct, kw_only=True):
    id: str
    source: str
    target: str
    type: str
    weight: float


class NeighborhoodPage(msgspec.Struct, kw_only=True):
    """One page of a neighbourhood in BFS order, the seed first; ``total`` is null while more lie beyond the page.

    ``position``: the log position the page was read at (``as_of`` when given); read the next pages
    ``as_of`` it to page one walk while writes go on. ``edges_truncated``: the page's nodes hold more
    edges between them than it draws (eight a node), the edges its walk took first.
    """

    node: str
    kind: str
    as_of: int | None
    position: int
    depth: int
    direction: str
    offset: int
    limit: int
    total: int | None
    more: bool
    next_offset: int | None
    nodes: list[NeighborhoodNode]
    edges: list[NeighborhoodEdge]
    edges_truncated: bool = False


class RevertOfCorrelation(msgspec.Struct, kw_only=True):
    """A revert of the correlation: where, when, by whom, and how many events it compensated."""

    position: int
    recorded_at: str
    correlation_id: str | None
    actor: str | None
    forced: bool
    reverted: int


class CorrelationPage(msgspec.Struct, kw_only=True):
    """A page of one correlation's events; ``reverts``: the correlation this one reverted, if it is a revert.

    ``reverted``: whether its changes are undone now; ``revert_chain``: the
    revert of it, the revert of that revert, and so on (a revert that was
    reverted leaves it in effect again: reverted when the chain is odd).
    """

    correlation_id: str
    events: list[EventView]
    more: bool
    next_after: int
    reverted_by: list[RevertOfCorrelation]
    reverts: str | None
    reverted: bool
    revert_chain: list[str]
