"""Recall (fused) and search (the raw channels, unfused)."""

from __future__ import annotations

from aiohttp import web

from . import keys, operations
from .routing import RouteTable, authenticate, decode, read
from .schemas import RecallRequest, SearchRequest
from .schemas_responses import RecallResult, SearchResponse

routes = RouteTable()


async def _request(request: web.Request, kind: type[RecallRequest]):
    """What recall and search share: the tenant, the body, read-your-writes, the options."""
    _, tenant = authenticate(request, "read")
    body = await decode(request, kind)
    svc = request.app[keys.service_key]
    options = operations.recall_options(svc, body, fused=kind is RecallRequest)
    position = await operations.reach(svc, body.min_position, request.app[keys.readers_key])
    return tenant, body, svc, position, options


@routes.post("/v1/recall", scope="read", summary="Fused recall over memories and entities (strategy hybrid, knowledge-only or graph-only) with explanations and the answer subgraph", request=RecallRequest, response=RecallResult)
async def recall(request: web.Request) -> RecallResult:
    tenant, body, svc, position, options = await _request(request, RecallRequest)
    return await read(request, operations.recall, svc, tenant, body, options, position)


@routes.post("/v1/search", scope="read", summary="The raw channels, unfused: each channel's own ranking", request=SearchRequest, response=SearchResponse)
async def search(request: web.Request) -> dict:
    tenant, body, svc, position, options = await _request(request, SearchRequest)
    return await read(request, operations.search, svc, tenant, body, options, position)
