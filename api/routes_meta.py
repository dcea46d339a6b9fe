"""Health, capabilities and the OpenAPI document."""

from __future__ import annotations

from aiohttp import web

from . import keys
from .openapi import openapi_document
from .routing import ROUTES, authenticate, json_response, read, route


def _state(svc) -> dict:
    head = svc.store.last_position()
    return {"head_position": head, "projection_lags": svc.runner.lag()}


@route("GET", "/health", scope=None, summary="Liveness and the log's head position")
async def health(request: web.Request) -> web.Response:
    svc = request.app[keys.service_key]
    state = await read(request, _state, svc)
    return json_response({"status": "ok", **request.app[keys.version_key], **state})


@route("GET", "/v1/capabilities", scope="read", summary="Version, head position, projection lags and enabled channels")
async def capabilities(request: web.Request) -> web.Response:
    authenticate(request, "read")
    svc = request.app[keys.service_key]
    state = await read(request, _state, svc)
    channels = svc.channels() if hasattr(svc, "channels") else {"graph": True}
    body = {
        **request.app[keys.version_key],
        **state,
        "channels": channels,
        "embedder": svc.settings.embedder,
        "organizer": request.app.get(keys.organizer_key) is not None,
    }
    return json_response(body)


@route("GET", "/openapi.json", scope=None, summary="This API as an OpenAPI 3 document")
async def openapi(request: web.Request) -> web.Response:
    return json_response(openapi_document(ROUTES, request.app[keys.version_key]["version"]))
