"""The route table and the helpers every handler uses: auth, decoding, executors, responses.

Each route is declared once with its request and response types, so that
the OpenAPI document is generated from the same Structs that validate.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Awaitable, Callable

import msgspec
from aiohttp import web

from mnemolog.eventstore.commands import CommandContext, CommandResult

from . import keys
from .auth import ApiKey
from .errors import ApiError


class Route(msgspec.Struct, frozen=True):
    method: str
    path: str
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    scope: str | None  # None: no key needed
    summary: str
    request: Any = None
    response: Any = None
    query: tuple[tuple[str, str], ...] = ()  # (name, description)
    body: Any = None  # a RequestBody in more than one form, for a route whose ``request`` is None


ROUTES: list[Route] = []

MAX_POSITION = 2**63 - 1  # SQLite's largest INTEGER: a larger position can only be a client's mistake


def is_number(text: str) -> bool:
    """ASCII digits only (``str.isdigit`` also accepts '²', which ``int`` refuses)."""
    return text.isascii() and text.isdigit()


class RequestBody(msgspec.Struct, frozen=True):
    """A request body taken in more than one form, for the OpenAPI document.

    ``json``: the Structs accepted as ``application/json`` (any one of them);
    ``form``: the fields of a ``multipart/form-data`` upload, name to
    description, of which ``files`` are file parts.
    """

    json: tuple[type, ...] = ()
    form: tuple[tuple[str, str], ...] = ()
    files: tuple[str, ...] = ()


def route(method: str, path: str, *, scope: str | None, summary: str, request: Any = None, response: Any = None, query=()):
    def decorate(handler):
        extra = getattr(handler, "documented", {})
        ROUTES.append(Route(method, path, handler, scope, summary, request, response, tuple(query) + extra.get("query", ()), extra.get("request")))
        return handler

    return decorate


def documented(*, query=(), request: Any = None):
    """More of a route's interface, declared under its ``@route`` line.

    ``query``: parameters ``(name, description)`` beyond the route's own;
    ``request``: a body its ``@route`` does not name (a :class:`RequestBody`,
    kept in :attr:`Route.body`).
    """

    def decorate(handler):
        handler.documented = {"query": tuple(query), "request": request}
        return handler

    return decorate


def declared_query(handler) -> set[str] | None:
    """The query parameters the route served by ``handler`` declares (None for a handler outside the table)."""
    for r in ROUTES:
        if r.handler is handler:
            return {name for name, _ in r.query}
    return None


@web.middleware
async def as_of_middleware(request: web.Request, handler):
    """A route that reads only the head refuses ``as_of`` rather than ignore it."""
    if "as_of" in request.query:
        declared = declared_query(request.match_info.handler)
        if declared is not None and "as_of" not in declared:
            raise ApiError(422, "invalid", f"{request.method} {request.match_info.route.resource.canonical} does not take as_of: it answers at the head only", "as_of")
    return await handler(request)


_encoder = msgspec.json.Encoder()


def json_response(data: Any, status: int = 200, headers: dict | None = None) -> web.Response:
    return web.Response(body=_encoder.encode(data), status=status, content_type="application/json", headers=headers)


def authenticate(request: web.Request, scope: str) -> tuple[ApiKey | None, str]:
    """The caller's key and tenant; 401 without a valid key, 403 without the scope."""
    settings = request.app[keys.settings_key]
    if not settings.auth:
        tenant = request.headers.get("X-Mnemolog-Tenant") or "default"
        return None, tenant
    header = request.headers.get("Authorization", "")
    secret = header[7:].strip() if header.lower().startswith("bearer ") else request.headers.get("X-API-Key", "")
    if not secret:
        raise ApiError(401, "unauthorized", "an API key is needed: Authorization: Bearer <key>", "Authorization")
    key = request.app[keys.keystore_key].authenticate(secret)
    if key is None:
        raise ApiError(401, "unauthorized", "unknown or revoked API key", "Authorization")
    if not key.allows(scope):
        raise ApiError(403, "forbidden", f"this key lacks the {scope!r} scope", None)
    tenant = key.tenant
    if tenant == "*":
        tenant = request.headers.get("X-Mnemolog-Tenant", "")
        if not tenant:
            raise ApiError(400, "bad_request", "a key for every tenant must name one in X-Mnemolog-Tenant", "X-Mnemolog-Tenant")
    return key, tenant


async def decode(request: web.Request, kind: type) -> Any:
    if request.content_type not in ("application/json", "", "application/octet-stream"):
        raise ApiError(415, "unsupported_media_type", "send JSON (Content-Type: application/json)", None)
    body = await request.read()
    if not body:
        body = b"{}"
    try:
        return msgspec.json.decode(body, type=kind)
    except RecursionError:
        raise ApiError(400, "malformed_json", "the body is nested too deeply", None) from None


async def read(request: web.Request, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a read in the reader pool: never on the event loop, never waiting for the writer."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(request.app[keys.readers_key], functools.partial(fn, *args, **kwargs))


async def write(request: web.Request, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a write on the single writer thread."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(request.app[keys.writer_key], functools.partial(fn, *args, **kwargs))


def command_context(request: web.Request, tenant: str, key: ApiKey | None) -> CommandContext:
    idem = request.headers.get("Idempotency-Key")
    if idem is not None and not (1 <= len(idem) <= 200):
        raise ApiError(400, "bad_request", "Idempotency-Key must be 1 to 200 characters", "Idempotency-Key")
    correlation = request.headers.get("X-Correlation-Id") or ""
    if len(correlation) > 200:
        raise ApiError(400, "bad_request", "X-Correlation-Id must be at most 200 characters", "X-Correlation-Id")
    return CommandContext(
        tenant=tenant,
        correlation_id=correlation,
        actor=f"api:{key.key_id}" if key else "api",
        idempotency_key=idem,
    )


async def write_request(request: web.Request, kind: type | None = None, *, scope: str = "write"):
    """What every write handler starts with: ``(ctx, body, service)``.

    The key is checked for ``scope``, the body decoded into ``kind`` (None
    when the route has none), and the command context built from the headers.
    """
    key, tenant = authenticate(request, scope)
    body = await decode(request, kind) if kind is not None else None
    return command_context(request, tenant, key), body, request.app[keys.service_key]


def if_match(request: web.Request) -> int | None:
    raw = request.headers.get("If-Match")
    if raw is None:
        return None
    text = raw.strip().strip('"').removeprefix("W/").strip('"')
    if not is_number(text):
        raise ApiError(400, "bad_request", "If-Match must hold the expected version number", "If-Match")
    return int(text)


def write_response(result: CommandResult, status: int = 200) -> web.Response:
    body = {
        "positions": list(result.positions),
        "correlation_id": result.correlation_id,
        "replayed": result.replayed,
        "memory_ids": list(result.memory_ids),
        "data": result.data,
    }
    return json_response(body, status=status)


def query_int(request: web.Request, name: str, default: int | None, *, low: int = 0, high: int | None = None) -> int | None:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(422, "invalid", f"{name} must be an integer", name) from None
    if value < low or (high is not None and value > high):
        bounds = f"between {low} and {high}" if high is not None else f">= {low}"
        raise ApiError(422, "invalid", f"{name} must be {bounds}", name)
    if value > MAX_POSITION:
        raise ApiError(422, "invalid", f"{name} is too large", name)
    return value


def check_as_of(value: Any, field: str = "as_of") -> Any:
    """``value`` unchanged, or a 422 naming ``field`` for a position no log can hold.

    The service resolves ``as_of``; this stops what would reach SQLite as an
    out-of-range integer, or fail ``int()`` after passing ``str.isdigit``.
    """
    number = value
    if isinstance(value, str) and value.strip().isdigit():
        if not is_number(value.strip()):
            raise ApiError(422, "invalid", f"{field} must be a position or an ISO-8601 time", field)
        number = int(value.strip())
    if isinstance(number, int) and number > MAX_POSITION:
        raise ApiError(422, "invalid", f"{field} is too large for a position", field)
    return value
