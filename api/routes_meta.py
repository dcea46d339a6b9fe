"""Health, capabilities and the OpenAPI document."""

from __future__ import annotations

from aiohttp import web

from mnemolog.projections.service import MemoryService

from . import keys
from .openapi import openapi_document
from .routing import RouteTable, authenticate, json_response, read

routes = RouteTable()


def _channels(svc: MemoryService) -> dict:
    """Which recall channels this server runs: available and weighted above 0 by default."""
    searcher = svc.searcher
    weights = searcher.default_weights()
    available = {
        "lexical": searcher.lexical is not None,
        "semantic": searcher.semantic is not None and searcher.embed_query is not None,
        "graph": True,
    }
    return {name: ok and weights.get(name, 0.0) > 0 for name, ok in available.items()}


def _state(svc: MemoryService) -> dict:
    head = svc.store.last_position()
    return {"head_position": head, "projection_lags": svc.runner.lag(), "vector_index_lag": svc.vector_index_lag()}


@routes.get("/health", scope=None, summary="Liveness, the log's head position, the projections' lags and this process's vector-index lag")
async def health(request: web.Request) -> web.Response:
    svc = request.app[keys.service_key]
    state = await read(request, _state, svc)
    return json_response({"status": "ok", **request.app[keys.version_key], **state})


@routes.get("/v1/capabilities", scope="read", summary="Version, head position, projection lags and enabled channels")
async def capabilities(request: web.Request) -> web.Response:
    authenticate(request, "read")
    svc = request.app[keys.service_key]
    state = await read(request, _state, svc)
    channels = _channels(svc)
    body = {
        **request.app[keys.version_key],
        **state,
        "channels": channels,
        "embedder": svc.settings.embedder,
        "organizer": request.app.get(keys.organizer_key) is not None,
    }
    return json_response(body)


@routes.get("/openapi.json", scope=None, summary="This API as an OpenAPI 3 document")
async def openapi(request: web.Request) -> web.Response:
    return json_response(openapi_document(request.app[keys.routes_key], request.app[keys.version_key]["version"]))
