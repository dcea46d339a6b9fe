"""What the front ends do with the service: the HTTP routes and the MCP tools call these, never a copy.

Each function takes the :class:`MemoryService`, the caller's tenant (or
command context) and a decoded request, and returns the JSON-ready answer
both front ends send. Reads are plain functions run in a reader thread;
writes run on the service's writer (``svc.writer``). Client mistakes raise
:class:`mnemolog.api.errors.ApiError` or the product's own errors, which
:func:`mnemolog.api.errors.as_api_error` maps to a code and a field.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import sqlite3
from concurrent.futures import Executor
from typing import Any, Iterable

import msgspec

from mnemolog.eventstore.aggregate import dropped_at
from mnemolog.eventstore.catalogue_graph import DOCUMENT_NODE_PREFIX
from mnemolog.eventstore.commands import CommandContext, CommandResult
from mnemolog.eventstore.erased import ErasedMemories
from mnemolog.eventstore.model import MemoryContent, NotFound, ValidationError
from mnemolog.eventstore.schema import MAX_POSITION, whole_number
from mnemolog.projections.filters import SearchFilters
from mnemolog.projections.recall import windows
from mnemolog.projections.recall.searcher import RecallOptions, check_strategy
from mnemolog.projections.service import MemoryService
from mnemolog.projections.vectors.projector import unit_vector

from .errors import ApiError, is_lock_contention
from .schemas import FUSION_ONLY, AddMemoriesRequest, MemoryIn, RecallQuery, RecallRequest, UpdateMemoryRequest
from .schemas_knowledge import RelationsRequest

def integral_numbers(value: Any) -> Any:
    """``value`` with every float that is a whole number made an int (so that ``5.0`` fills an int field)."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [integral_numbers(v) for v in value]
    if isinstance(value, dict):
        return {k: integral_numbers(v) for k, v in value.items()}
    return value


def json_values(value: Any, path: str = "") -> None:
    """A 422 naming the field of the first value in ``value`` that no JSON document holds: a lone surrogate, NaN or an infinity.

    Arguments that arrive already decoded (an MCP tool's, which the transport
    may have parsed with Python's permissive ``json``) are checked as the HTTP
    API's strict decoder checks a body: a surrogate would fail every write and
    read of the text, and a non-finite number is no value to store.
    """
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ApiError(422, "invalid", "text must be valid Unicode (a lone surrogate is not)", path or "arguments") from None
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ApiError(422, "invalid", f"{value} is not a JSON number", path or "arguments")
    elif isinstance(value, dict):
        for key, item in value.items():
            json_values(key, path or "arguments")
            json_values(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            json_values(item, f"{path}[{i}]")


def arguments(raw: dict[str, Any], kind: type) -> Any:
    """Decoded arguments (a dict) as the request Struct ``kind``, taken as strictly and as leniently as an HTTP body
    (no lone surrogate or non-finite number; ``5.0`` fills an int field); a 422 naming the field otherwise."""
    json_values(raw)
    try:
        return msgspec.convert(raw, kind)
    except msgspec.ValidationError as exc:
        if "got `float`" not in str(exc):
            raise
        return msgspec.convert(integral_numbers(raw), kind)


def check_as_of(value: Any, field: str = "as_of") -> Any:
    """``value`` unchanged, or a 422 naming ``field`` for a position no log can hold.

    The service resolves ``as_of``; this stops what would reach SQLite as an
    out-of-range integer, or fail ``int()`` after passing ``str.isdigit``.
    """
    number = value
    if isinstance(value, str) and value.strip().isdigit():
        number = whole_number(value.strip())
        if number is None:
            raise ApiError(422, "invalid", f"{field} must be a position or an ISO-8601 time", field)
    if isinstance(number, int) and number > MAX_POSITION:
        raise ApiError(422, "invalid", f"{field} is too large for a position", field)
    return value


# -- recall and search ------------------------------------------------------------------------------


def direction(values: list[float]) -> tuple[float, ...]:
    """A query embedding as its direction, a unit vector (:func:`~mnemolog.projections.vectors.projector.unit_vector`).

    Semantic search ranks by cosine, which only the direction sets; scaled,
    every value fits the index's float32 (``1e300`` would be infinity there,
    ``1e-300`` zero, and the channel would silently find nothing).
    """
    unit = unit_vector(values)
    return tuple(unit.tolist()) if unit is not None else tuple(values)


def options_from(svc: MemoryService, body: RecallQuery) -> RecallOptions:
    f = body.filters
    filters = SearchFilters(
        status=tuple(f.status) if f.status else ("activated",),
        memory_types=tuple(f.memory_types) if f.memory_types else None,
        tags=tuple(t.lower() for t in f.tags) if f.tags else None,
        collection=f.collection,
        exclude_collection=f.exclude_collection,
        doc_type=f.doc_type,
        model=f.model,
        doc_ids=tuple(f.doc_ids) if f.doc_ids else None,
        created_from=f.created_from,
        created_to=f.created_to,
        updated_from=f.updated_from,
        updated_to=f.updated_to,
    )
    weights = {k: v for k, v in (("semantic", body.weights.semantic), ("lexical", body.weights.lexical), ("graph", body.weights.graph)) if v is not None}
    return RecallOptions(
        limit=body.limit,
        filters=filters,
        as_of=svc.resolve_as_of(check_as_of(body.as_of)),
        channels=tuple(body.channels) if body.channels else None,
        weights=weights,
        rrf_k=getattr(body, "rrf_k", None),
        raw_fts=body.raw_fts,
        embedding=direction(body.embedding) if body.embedding is not None else None,
        graph_depth=body.graph_depth,
        graph_direction=body.graph_direction,
        graph_edge_types=tuple(body.graph_edge_types) if body.graph_edge_types else None,
        propagation=getattr(body, "propagation", None),
        fusion=body.fusion,
        strategy=body.strategy,
    )


def check_applicable(svc: MemoryService, body: RecallQuery, options: RecallOptions, *, fused: bool) -> None:
    """A 422 naming the first parameter that does not apply to this request's ranking.

    A parameter that only one way of ranking uses (:data:`~mnemolog.api.schemas.FUSION_ONLY`),
    or only the graph channel (``graph_depth``, ``graph_direction``, ``graph_edge_types``), is refused
    where it would do nothing, never silently ignored.
    """
    mode = svc.searcher.fusion_mode(options)
    graph_only = {"graph_depth": body.graph_depth is not None, "graph_direction": body.graph_direction != "both", "graph_edge_types": bool(body.graph_edge_types)}
    if any(graph_only.values()):
        why = svc.searcher.off_reason("graph", options, options.strategy, svc.searcher.weights_for(options)["graph"])
        if why is not None:
            name = next(n for n, given in graph_only.items() if given)
            raise ApiError(422, "invalid", f"{name} applies to the graph channel, which does not run for this request ({why})", name)
    for name, needs in FUSION_ONLY.items():
        if getattr(body, name, None) is None:
            continue
        if not fused:
            raise ApiError(422, "invalid", f"{name} applies to fused recall (/v1/recall), not to the raw channels", name)
        if mode != needs:
            raise ApiError(422, "invalid", f"{name} applies to {needs} fusion only; this request fuses by {mode} (set fusion: {needs})", name)


def _check_embedding(svc: MemoryService, body: RecallRequest) -> None:
    """A 422 naming ``embedding`` for a query vector the semantic channel cannot rank by: of another length than the
    server's, or all zeros (no direction: the channel would answer "ok" having found nothing)."""
    if body.embedding is None:
        return
    dim = svc.embedding_dim
    if len(body.embedding) != dim:
        raise ApiError(422, "invalid", f"embedding must have {dim} dimensions, got {len(body.embedding)}", "embedding")
    if not any(body.embedding):
        raise ApiError(422, "invalid", "embedding is all zeros: it has no direction to rank by", "embedding")


def recall_options(svc: MemoryService, body: RecallRequest, *, fused: bool) -> RecallOptions:
    """The checked options of a recall (``fused``) or search request."""
    _check_embedding(svc, body)
    options = options_from(svc, body)
    check_applicable(svc, body, options, fused=fused)
    check_strategy(options)
    return options


def written(min_position: int, head: int) -> None:
    """A 409 naming ``min_position`` when the log, whose head is ``head``, has not reached it: the log's state, not the
    request, falls short (like a stale version)."""
    if min_position > head:
        raise ApiError(409, "beyond_head", f"position {min_position} has not been written (head is {head})", "min_position")


async def reach(svc: MemoryService, min_position: int | None, readers: Executor) -> int | None:
    """Wait (briefly) until the projections include ``min_position``: read-your-writes.

    None without ``min_position``: the read itself then notes the position it
    saw, in the same trip to the reader pool.
    """
    if min_position is None:
        return None
    loop = asyncio.get_running_loop()
    head = await loop.run_in_executor(readers, svc.store.last_position)
    written(min_position, head)
    for _ in range(100):
        position = await loop.run_in_executor(readers, svc.position)
        if position >= min_position:
            return position
        await loop.run_in_executor(svc.writer, svc.sync)
    raise ApiError(409, "not_ready", "projections did not reach min_position in time", "min_position")


@contextlib.contextmanager
def _raw_fts_errors(body: RecallRequest):
    """A raw FTS5 query the caller wrote may not parse: that is the caller's 422, not a 500."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if not body.raw_fts or is_lock_contention(exc):
            raise
        raise ApiError(422, "invalid", f"the raw FTS query does not parse: {exc}", "query") from None


def recall(svc: MemoryService, tenant: str, body: RecallRequest, options: RecallOptions, position: int | None):
    """Fused recall with its explanations (channels, ranks, graph paths, relationships)."""
    with _raw_fts_errors(body):
        position = svc.position() if position is None else position
        return svc.searcher.recall(tenant, body.query, options, position=position)


def search(svc: MemoryService, tenant: str, body: RecallRequest, options: RecallOptions, position: int | None) -> dict[str, Any]:
    """The raw channels, unfused: each channel's own ranking."""
    with _raw_fts_errors(body):
        if position is None:
            position = svc.position()
        strategy, _ = svc.searcher.resolve_strategy(tenant, options)
        results, states, found, analysis = windows.channel_rankings(svc.searcher, tenant, body.query, options, strategy)

    def row(name: str, rank: int, node: str, score: float) -> dict[str, Any]:
        out: dict[str, Any] = {"id": node, "rank": rank, "score": round(score, 6)}
        if name == "graph" and node in found.entities:
            out.update(kind="entity", path=found.entities[node].path)
        elif name == "graph" and node in found.paths:
            out["path"] = found.paths[node]
        return out

    channels = {name: [row(name, i, m, s) for i, (m, s) in enumerate(hits[: body.limit], 1)] for name, hits in results.items()}
    return {"query": body.query, "terms": analysis.terms, "channels": channels, "states": states, "position": position, "as_of": options.as_of}


# -- memories, graph, log ---------------------------------------------------------------------------


HISTORY_PAGE = 1000  # versions a history answer holds at most (each may carry 100,000 characters of text and as many of background)


def history(svc: MemoryService, tenant: str, memory_id: str, as_of: Any = None, after: int = 0, limit: int = HISTORY_PAGE) -> dict[str, Any]:
    """A page of a memory's versions (after version ``after``, at most ``limit``) and its entity mention links;
    as of a position or time, those written by then."""
    return svc.history_view(tenant, memory_id, as_of, after=after, limit=limit)


def node_exists(svc: MemoryService, tenant: str, node: str, position: int | None) -> bool:
    """Whether ``node`` is a memory, an entity or a document node of the tenant at ``position`` (None: the head)."""
    if svc.graph.memory(tenant, node, as_of=position) is not None or svc.knowledge.get(tenant, node, as_of=position) is not None:
        return True
    return node.startswith(DOCUMENT_NODE_PREFIX) and svc.knowledge.document(tenant, node[len(DOCUMENT_NODE_PREFIX) :], as_of=position) is not None


#: The most nodes :func:`neighbors` reaches; an answer cut there says so (``truncated``).
NEIGHBORS_MAX_NODES = 500
NEIGHBORS_MAX_EDGES = 1000  # the node's own edges a neighbours answer lists at most


def neighbors(svc: MemoryService, tenant: str, node: str, depth: int, direction: str, types: list[str] | None, as_of: Any) -> dict[str, Any]:
    """A node's edges and the nodes a BFS reaches from it, each with its path; a node that does not exist (then) is not found.

    The walk asks for one node past :data:`NEIGHBORS_MAX_NODES`, and the node's own edges for one past
    :data:`NEIGHBORS_MAX_EDGES` (a hub mentioned by every memory has as many edges), so that a
    neighbourhood that fits exactly is not reported as cut.
    """
    position = svc.resolve_as_of(as_of)
    limit = NEIGHBORS_MAX_NODES
    reached = svc.graph.bfs(tenant, [node], depth=depth, direction=direction, edge_types=types, as_of=position, max_nodes=limit + 1)
    edges = svc.graph.edges_of(tenant, node, direction=direction, edge_types=types, as_of=position, limit=NEIGHBORS_MAX_EDGES + 1)
    if not edges and not reached and not node_exists(svc, tenant, node, position):
        raise NotFound("node", node)
    return {
        "node": node, "edges": edges[:NEIGHBORS_MAX_EDGES], "reached": reached[:limit], "truncated": len(reached) > limit,
        "edges_truncated": len(edges) > NEIGHBORS_MAX_EDGES,
    }


def events_page(
    svc: MemoryService,
    tenant: str,
    after: int,
    limit: int,
    *,
    types: list[str] | None = None,
    stream: str | None = None,
    correlation_id: str | None = None,
    as_of: Any = None,
) -> dict[str, Any]:
    """One page of the tenant's events after position ``after`` (as of a position or time: those recorded by then), and where the next page starts.

    ``types`` empty names no type: no filter, as the HTTP API's absent ``type`` (not a page of nothing)."""
    until = svc.resolve_as_of(as_of)
    after = since_drop(svc, tenant, after)
    events = svc.store.read_all(after, limit, tenant=tenant, types=types or None, until=until, stream_id=stream or None, correlation_id=correlation_id or None)
    erased = ErasedMemories.of(svc.store, tenant)
    return {"events": [erased.mask(e).to_dict() for e in events], "next_after": events[-1].position if events else after}


def since_drop(svc: MemoryService, tenant: str, after: int) -> int:
    """``after``, or the position before the tenant's last drop when that is later: a tenant's reads of the log
    begin with its drop (what came before is gone, as for every other read), whichever key reads it."""
    return max(after, dropped_at(svc.store, tenant) - 1)


def channels(svc: MemoryService) -> dict[str, bool]:
    """Which recall channels this server runs: available and weighted above 0 by default."""
    searcher = svc.searcher
    weights = searcher.default_weights()
    available = {
        "lexical": searcher.lexical is not None,
        "semantic": searcher.semantic is not None and searcher.embed_query is not None,
        "graph": True,
    }
    return {name: ok and weights.get(name, 0.0) > 0 for name, ok in available.items()}


def state(svc: MemoryService) -> dict[str, Any]:
    return {"head_position": svc.store.last_position(), "projection_lags": svc.runner.lag(), "vector_index_lag": svc.vector_index_lag()}


def capabilities(svc: MemoryService, version: dict[str, str], *, organizer: bool) -> dict[str, Any]:
    """Version, head position, projection lags, the recall channels, the embedder, whether the organizer runs."""
    return {**version, **state(svc), "channels": channels(svc), "embedder": svc.settings.embedder, "organizer": organizer}


# -- entities ---------------------------------------------------------------------------------------


def entity(svc: MemoryService, tenant: str, entity_id: str, as_of: Any) -> dict[str, Any]:
    position = svc.resolve_as_of(as_of)  # refuses impossible positions and bad times with a 422
    found = svc.knowledge.get(tenant, entity_id, as_of=position)
    if found is None:
        raise NotFound("entity", entity_id)
    return {**msgspec.structs.asdict(found), "relations": svc.knowledge.relations_of(tenant, entity_id, as_of=position)}


def find_entities(svc: MemoryService, tenant: str, q: str, tag: str | None, entity_type: str | None, limit: int, as_of: Any) -> dict[str, Any]:
    found = svc.knowledge.find_by_keywords(tenant, q, tag=tag, entity_type=entity_type, limit=limit, as_of=as_of)
    return {"entities": found, "count": len(found)}


def relation_cards(svc: MemoryService, tenant: str, body: RelationsRequest) -> dict[str, Any]:
    return svc.linking.relation_cards(tenant, body.question, as_of=body.as_of, limit=body.limit)


# -- writes -----------------------------------------------------------------------------------------


def memory_content(item: MemoryIn) -> MemoryContent:
    """The validated request item as the model's content (lists become tuples)."""
    return msgspec.convert(item, MemoryContent, from_attributes=True)


def add_memories(svc: MemoryService, ctx: CommandContext, body: AddMemoriesRequest) -> CommandResult:
    """Add ``body.memory`` or the batch ``body.memories`` (atomically); run it on the writer."""
    if isinstance(body.memory, msgspec.UnsetType) == isinstance(body.memories, msgspec.UnsetType):
        raise ApiError(422, "invalid", "send either memory (one) or memories (a batch)", "memory")
    single = not isinstance(body.memory, msgspec.UnsetType)
    items = [body.memory] if single else body.memories
    if not items:
        raise ApiError(422, "invalid", "memories must not be empty", "memories")
    try:
        return svc.run(svc.memories.add, ctx, [memory_content(i) for i in items])
    except ValidationError as exc:
        # The command names an item's field bare when it adds one memory: here it is the body's path, as the schema's errors say.
        if exc.field in MemoryIn.__struct_fields__:
            raise ValidationError(("memory." if single else "memories[0].") + exc.field, exc.message) from None
        raise


def update_memory(
    svc: MemoryService, ctx: CommandContext, memory_id: str, body: UpdateMemoryRequest, given: Iterable[str], expected_version: int | None
) -> CommandResult:
    """A new version of the memory with the fields the caller ``given`` (by name); run it on the writer."""
    changes = {name: getattr(body, name) for name in given if name != "reason"}
    for name in ("tags", "sources", "embedding"):
        if changes.get(name) is not None:
            changes[name] = tuple(changes[name])
    return svc.run(svc.memories.update, ctx, memory_id, changes, expected_version=expected_version, reason=body.reason)


def write_result(result: CommandResult) -> dict[str, Any]:
    """A command's answer: the positions it appended (the last one is recall's ``min_position``), its correlation id, its data."""
    return {
        "positions": list(result.positions),
        "correlation_id": result.correlation_id,
        "replayed": result.replayed,
        "memory_ids": list(result.memory_ids),
        "data": result.data,
    }
