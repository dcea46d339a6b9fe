"""Health, capabilities and the OpenAPI document."""

from __future__ import annotations

from aiohttp import web

from . import keys, operations
from .openapi import ServerFacts, openapi_document
from .routing import RouteTable, authenticate, presents_key, read
from .schemas_responses import CapabilitiesResponse, HealthResponse, OpenApiDocument

routes = RouteTable()


@routes.get(
    "/health",
    scope=None,
    summary="Liveness; with a key (or auth off) also the version, the log's head position, the projections' lags and this process's vector-index lag",
    response=HealthResponse,
)
async def health(request: web.Request) -> dict:
    """A probe without a key under auth gets liveness alone; a key it presents is checked (401 when unknown or
    revoked, 403 without the read scope)."""
    if request.app[keys.settings_key].auth and not presents_key(request):
        return {"status": "ok"}
    authenticate(request, "read")
    svc = request.app[keys.service_key]
    state = await read(request, operations.state, svc)
    return {"status": "ok", **request.app[keys.version_key], **state}


@routes.get("/v1/capabilities", scope="read", summary="Version, head position, projection lags and enabled channels", response=CapabilitiesResponse)
async def capabilities(request: web.Request) -> dict:
    authenticate(request, "read")
    svc = request.app[keys.service_key]
    organizer = request.app.get(keys.organizer_key) is not None
    return await read(request, operations.capabilities, svc, request.app[keys.version_key], organizer=organizer)


@routes.get("/openapi.json", scope=None, summary="This API as an OpenAPI 3 document", response=OpenApiDocument)
async def openapi(request: web.Request) -> dict:
    svc = request.app[keys.service_key]
    facts = ServerFacts(embedding_dim=svc.embedding_dim, fusion=str(svc.settings.recall_fusion))
    return openapi_document(request.app[keys.routes_key], request.app[keys.version_key]["version"], facts)
