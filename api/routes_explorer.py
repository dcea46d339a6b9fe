"""The explorer: the page at ``/explorer`` (static files shipped in the package) and the small reads it needs.

The page and its assets need no key, and are routes like any other but
left out of the OpenAPI document (files of a page, not API operations); every data call does (the page sends
the key it keeps in ``sessionStorage`` as ``Authorization: Bearer``). The
page runs under a strict Content-Security-Policy (same origin only: no
inline script or style, no other host), and renders data as text only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from aiohttp import web
from msgspec import Meta

from . import explorer_reads, keys
from .errors import ApiError
from .routing import RouteTable, authenticate, check_as_of, param, query_edge_types, query_int, read
from .schemas import EdgeType
from .schemas_responses import CorrelationPage, NeighborhoodPage, TimelineResponse, WhoAmIResponse

routes = RouteTable()

STATIC = Path(__file__).resolve().parent / "static"

#: Sent with the page and its assets: only this origin, nothing inline, no framing.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}

#: (path, file under static/, media type): the page and each asset it loads, nothing else is served.
ASSETS = (
    ("/explorer", "explorer.html", "text/html"),
    ("/explorer/explorer.js", "explorer.js", "text/javascript"),
    ("/explorer/explorer_graph.js", "explorer_graph.js", "text/javascript"),  # imported by explorer.js
    ("/explorer/explorer.css", "explorer.css", "text/css"),
    ("/explorer/favicon.svg", "favicon.svg", "image/svg+xml"),
)


def _static_route(path: str, filename: str, media_type: str, name: str) -> None:
    async def handler(request: web.Request) -> web.Response:
        body = (STATIC / filename).read_bytes()
        return web.Response(body=body, content_type=media_type, charset="utf-8", headers=_HEADERS)

    handler.__name__ = handler.__qualname__ = name  # the operationId
    summary = "The explorer page (no key needed to load it)" if filename.endswith(".html") else f"The explorer's {filename}"
    routes.get(path, scope=None, summary=summary, media_type=media_type, in_openapi=False)(handler)


for _path, _file, _media in ASSETS:
    _static_route(_path, _file, _media, "explorer_" + _file.replace(".", "_"))


@routes.get("/explorer/", scope=None, summary="Redirects to /explorer (the address typed with a slash)", media_type="text/html", in_openapi=False)
async def explorer_slash(request: web.Request) -> web.Response:
    raise web.HTTPPermanentRedirect("/explorer" + (f"?{request.query_string}" if request.query_string else ""))


@routes.get("/v1/whoami", scope="read", summary="The calling key: its tenant, id, name and scopes (never its secret)", response=WhoAmIResponse)
async def whoami(request: web.Request) -> dict:
    key, tenant = authenticate(request, "read")
    return explorer_reads.whoami(key, tenant, auth=bool(request.app[keys.settings_key].auth))


@routes.get(
    "/v1/timeline",
    scope="read",
    summary="The tenant's commits (position, time, correlation id) as marks for a timeline; an even sample beyond limit",
    query=(("limit", "2..5000"),),
    response=TimelineResponse,
)
async def timeline(request: web.Request) -> dict:
    _, tenant = authenticate(request, "read")
    limit = query_int(request, "limit", 500, low=2, high=5000)
    return await read(request, explorer_reads.timeline, request.app[keys.service_key], tenant, limit)


@routes.get(
    "/v1/graph/neighborhood",
    scope="read",
    summary="One page of a memory's (graph edges) or an entity's (relations) neighbourhood: labelled nodes in BFS order and the edges between them",
    query=(
        param("node", "memory or entity id", Annotated[str, Meta(min_length=1)], required=True),
        ("kind", "memory|entity"),
        ("depth", "0..5"),
        ("direction", "out|in|both"),
        param("type", "edge or relation type, repeatable; empty: every type", EdgeType),
        ("limit", "1..500"),
        ("offset", "0..1000000"),
        ("as_of", "position or time"),
    ),
    response=NeighborhoodPage,
)
async def neighborhood(request: web.Request) -> dict:
    _, tenant = authenticate(request, "read")
    kind = request.query.get("kind", "memory")
    if kind not in ("memory", "entity"):
        raise ApiError(422, "invalid", "kind must be memory or entity", "kind")
    direction = request.query.get("direction", "both")
    if direction not in ("out", "in", "both"):
        raise ApiError(422, "invalid", "direction must be out, in or both", "direction")
    depth = query_int(request, "depth", 1, low=0, high=5)
    limit = query_int(request, "limit", 50, low=1, high=500)
    offset = query_int(request, "offset", 0, high=1_000_000)
    types = query_edge_types(request)
    as_of = check_as_of(request.query.get("as_of"))
    node = request.query.get("node")
    if not node:
        raise ApiError(422, "invalid", "node is required", "node")
    svc = request.app[keys.service_key]
    return await read(request, explorer_reads.neighborhood, svc, tenant, node, kind, depth, direction, types, limit, offset, as_of)


@routes.get(
    "/v1/correlation",
    scope="read",
    summary="What one correlation (a request, an import, an organizer pass) wrote: a page of its events, and the reverts of it",
    query=(param("correlation_id", "correlation id", Annotated[str, Meta(min_length=1, max_length=200)], required=True), ("after", "position"), ("limit", "1..1000")),
    response=CorrelationPage,
)
async def correlation_events(request: web.Request) -> dict:
    _, tenant = authenticate(request, "read")
    after = query_int(request, "after", 0)
    limit = query_int(request, "limit", 200, low=1, high=1000)
    correlation_id = request.query.get("correlation_id")
    if not correlation_id or len(correlation_id) > 200:
        raise ApiError(422, "invalid", "correlation_id is required, at most 200 characters", "correlation_id")
    svc = request.app[keys.service_key]
    return await read(request, explorer_reads.correlation, svc, tenant, correlation_id, after, limit)
