"""Recall (fused) and search (the raw channels, unfused)."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3

from aiohttp import web

from mnemolog.projections.filters import SearchFilters
from mnemolog.projections.recall.searcher import RecallOptions
from mnemolog.projections.service import MemoryService

from . import keys
from .errors import ApiError
from .routing import RouteTable, authenticate, check_as_of, decode, json_response, read
from .schemas import RecallRequest, SearchRequest

routes = RouteTable()


def options_from(svc: MemoryService, body: RecallRequest) -> RecallOptions:
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
        rrf_k=body.rrf_k,
        raw_fts=body.raw_fts,
        embedding=tuple(body.embedding) if body.embedding is not None else None,
        graph_depth=body.graph_depth,
        graph_direction=body.graph_direction,
        graph_edge_types=tuple(body.graph_edge_types) if body.graph_edge_types else None,
        propagation=body.propagation,
        fusion=body.fusion,
    )


# Parameters that only one way of ranking uses: a request that sets one where
# it does nothing is refused, never silently ignored.
_FUSION_ONLY = {"rrf_k": "rrf", "propagation": "score"}


def check_applicable(svc: MemoryService, body: RecallRequest, options: RecallOptions, *, fused: bool) -> None:
    """A 422 naming the first parameter that does not apply to this request's ranking."""
    mode = svc.searcher.fusion_mode(options)
    for name, needs in _FUSION_ONLY.items():
        if getattr(body, name) is None:
            continue
        if not fused:
            raise ApiError(422, "invalid", f"{name} applies to fused recall (/v1/recall), not to the raw channels", name)
        if mode != needs:
            raise ApiError(422, "invalid", f"{name} applies to {needs} fusion only; this request fuses by {mode} (set fusion: {needs})", name)


async def _reach(request: web.Request, svc: MemoryService, min_position: int | None) -> int | None:
    """Wait (briefly) until the projections include ``min_position``: read-your-writes.

    None without ``min_position``: the read itself then notes the position it
    saw, in the same trip to the reader pool.
    """
    if min_position is None:
        return None
    head = await read(request, svc.store.last_position)
    if min_position > head:
        raise ApiError(422, "invalid", f"position {min_position} has not been written (head is {head})", "min_position")
    for _ in range(100):
        position = await read(request, svc.position)
        if position >= min_position:
            return position
        await asyncio.get_running_loop().run_in_executor(svc.writer, svc.sync)
    raise ApiError(409, "not_ready", "projections did not reach min_position in time", "min_position")


@contextlib.contextmanager
def _raw_fts_errors(body: RecallRequest):
    """A raw FTS5 query the caller wrote may not parse: that is the caller's 422, not a 500."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        text = str(exc)
        if not body.raw_fts or "locked" in text or "busy" in text:
            raise
        raise ApiError(422, "invalid", f"the raw FTS query does not parse: {text}", "query") from None


def _check_embedding(svc: MemoryService, body: RecallRequest) -> None:
    if body.embedding is None:
        return
    dim = svc.embedding_dim
    if len(body.embedding) != dim:
        raise ApiError(422, "invalid", f"embedding must have {dim} dimensions, got {len(body.embedding)}", "embedding")


async def _request(request: web.Request, kind: type[RecallRequest]):
    """What recall and search share: the tenant, the body, read-your-writes, the options."""
    _, tenant = authenticate(request, "read")
    body = await decode(request, kind)
    svc = request.app[keys.service_key]
    _check_embedding(svc, body)
    options = options_from(svc, body)
    check_applicable(svc, body, options, fused=kind is RecallRequest)
    position = await _reach(request, svc, body.min_position)
    return tenant, body, svc, position, options


@routes.post("/v1/recall", scope="read", summary="Fused recall with explanations and the relationships between results", request=RecallRequest)
async def recall(request: web.Request) -> web.Response:
    tenant, body, svc, position, options = await _request(request, RecallRequest)
    with _raw_fts_errors(body):
        result = await read(request, _recall, svc, tenant, body.query, options, position)
    return json_response(result)


def _recall(svc: MemoryService, tenant: str, query: str, options: RecallOptions, position: int | None):
    position = svc.position() if position is None else position
    return svc.searcher.recall(tenant, query, options, position=position)


@routes.post("/v1/search", scope="read", summary="The raw channels, unfused: each channel's own ranking", request=SearchRequest)
async def search(request: web.Request) -> web.Response:
    tenant, body, svc, position, options = await _request(request, SearchRequest)
    with _raw_fts_errors(body):
        if position is None:
            position = await read(request, svc.position)
        results, states, paths, analysis = await read(request, svc.searcher.channel_results, tenant, body.query, options)
    channels = {
        name: [{"id": m, "rank": i, "score": round(s, 6), **({"path": paths[m]} if name == "graph" and m in paths else {})} for i, (m, s) in enumerate(hits[: body.limit], 1)]
        for name, hits in results.items()
    }
    return json_response({"query": body.query, "terms": analysis.terms, "channels": channels, "states": states, "position": position})
