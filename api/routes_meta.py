"""Health, capabilities and the OpenAPI document."""

from __future__ import annotations

from aiohttp import web

from . import keys, operations
from .openapi import openapi_document
from .routing import RouteTable, authenticate, json_response, read

routes = RouteTable()


@routes.get("/health", scope=None, summary="Liveness, the log's head position, the projections' lags and this process's vector-index lag")
async def health(request: web.Request) -> web.Response:
    svc = request.app[keys.service_key]
    state = await read(request, operations.state, svc)
    return json_response({"status": "ok", **request.app[keys.version_key], **state})


@routes.get("/v1/capabilities", scope="read", summary="Version, head position, projection lags and enabled channels")
async def capabilities(request: web.Request) -> web.Response:
    authenticate(request, "read")
    svc = request.app[keys.service_key]
    organizer = request.app.get(keys.organizer_key) is not None
    return json_response(await read(request, operations.capabilities, svc, request.app[keys.version_key], organizer=organizer))


@routes.get("/openapi.json", scope=None, summary="This API as an OpenAPI 3 document")
async def openapi(request: web.Request) -> web.Response:
    return json_response(openapi_document(request.app[keys.routes_key], request.app[keys.version_key]["version"]))
