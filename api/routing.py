"""Route tables and the helpers every handler uses: auth, decoding, executors, responses.

Each ``routes_*`` module declares its own :class:`RouteTable` (in the style
of aiohttp's ``web.RouteTableDef``) and :func:`mnemolog.api.app.create_app`
adds the listed tables; importing a module registers nothing. Each route is
declared once with its scope and its request and response types, so that the
OpenAPI document is generated from the same Structs that validate.
"""

from __future__ import annotations

import asyncio
import functools
import re
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterable, Iterator, TypeVar

import msgspec
from aiohttp import web

from mnemolog.eventstore.bounds import MAX_CORRELATION_CHARS
from mnemolog.eventstore.commands import CommandContext, CommandResult
from mnemolog.eventstore.schema import MAX_POSITION, whole_number
from mnemolog.projections.graph.reads import TYPE_FILTER_RE

from . import keys
from .auth import ApiKey, authorize, check_tenant, still_authorized
from .body_fields import check_json, decode_typed, key_at_fault
from .errors import ApiError, field_of
from .schemas import WriteResponse
from .operations import check_as_of, write_result  # noqa: F401 - check_as_of is re-exported for the route modules

if TYPE_CHECKING:
    from mnemolog.projections.service import MemoryService

T = TypeVar("T")


class Route(msgspec.Struct, frozen=True):
    method: str
    path: str
    handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    scope: str | None  # None: no key needed
    summary: str
    request: Any = None
    response: Any = None
    query: tuple[tuple, ...] = ()  # (name, description) or, from :func:`param`, (name, description, type, required)
    body: Any = None  # a RequestBody in more than one form, for a route whose ``request`` is None
    statuses: tuple[int, ...] = (200,)  # the success statuses it answers, as the OpenAPI document lists them
    media_type: str = "application/json"  # of its success answers
    path_types: tuple[tuple[str, Any], ...] = ()  # (name, type) of path parameters that are not any string
    in_openapi: bool = True  # False: a file of a page (the explorer), not an API operation; still in docs/reference.md
    may_write: bool = False  # a read that writes when asked (a relink's commit): it takes a write's headers too

    @property
    def writes(self) -> bool:
        """Whether it may write, so that it takes ``Idempotency-Key`` and ``X-Correlation-Id``."""
        return self.may_write or self.scope in ("write", "admin")


class RouteTable:
    """One module's routes, in declaration order: ``@routes.post("/v1/x", scope="write", summary=...)``."""

    def __init__(self) -> None:
        self._routes: list[Route] = []

    def route(
        self, method: str, path: str, *, scope: str | None, summary: str, request: Any = None, response: Any = None, query=(), body: Any = None, statuses=(200,),
        media_type: str = "application/json", path_types: dict[str, Any] | None = None, in_openapi: bool = True, may_write: bool = False,
    ):
        def decorate(handler):
            served = answering(handler, response) if response is not None and media_type == "application/json" else handler
            self._routes.append(
                Route(
                    method, path, served, scope, summary, request, response, tuple(query), body, tuple(statuses), media_type,
                    tuple((path_types or {}).items()), in_openapi, may_write,
                )
            )
            return handler

        return decorate

    def get(self, path: str, **options: Any):
        return self.route("GET", path, **options)

    def post(self, path: str, **options: Any):
        return self.route("POST", path, **options)

    def put(self, path: str, **options: Any):
        return self.route("PUT", path, **options)

    def patch(self, path: str, **options: Any):
        return self.route("PATCH", path, **options)

    def delete(self, path: str, **options: Any):
        return self.route("DELETE", path, **options)

    def __iter__(self) -> Iterator[Route]:
        return iter(self._routes)

    def __len__(self) -> int:
        return len(self._routes)



def repeatable(description: str) -> bool:
    """Whether a query parameter so described is read for every value it is given (``type=a&type=b``): its description says "repeatable"."""
    return "repeatable" in description


def param(name: str, description: str, kind: Any = None, *, required: bool = False) -> tuple[str, str, Any, bool]:
    """A query parameter whose schema is ``kind``'s (a type msgspec describes), for a value no description rule covers."""
    return (name, description, kind, required)


#: ``If-Match`` as taken: the expected version, optionally quoted and weak (``3``, ``"3"``, ``W/"3"``).
IF_MATCH_RE = re.compile(r'^(?:W/)?"?([0-9]{1,18})"?$')


def takes_if_match(method: str, path: str) -> bool:
    """Whether the route ``method path`` (as declared) checks ``If-Match``: the memory commands, each on one memory's version."""
    return method in ("PATCH", "POST") and path.startswith("/v1/memories/{id}")


#: ``Idempotency-Key``'s length bounds.
IDEMPOTENCY_KEY_LENGTH = (1, 200)
#: The longest ``X-Correlation-Id`` taken.
CORRELATION_ID_MAX_LENGTH = MAX_CORRELATION_CHARS


class RequestBody(msgspec.Struct, frozen=True):
    """A request body taken in more than one form, for the OpenAPI document.

    ``json``: the Structs accepted as ``application/json`` (any one of them);
    ``form``: the fields of a ``multipart/form-data`` upload, name to
    description, of which ``files`` are file parts.
    """

    json: tuple[type, ...] = ()
    form: tuple[tuple[str, str], ...] = ()
    files: tuple[str, ...] = ()


def router_path(route: Route, routes: "Iterable[Route]") -> str:
    """``route.path`` as the router matches it: a ``{param}`` never takes a literal sibling's name.

    ``/v1/memories/{id}`` would also match ``/v1/memories/merge``, so a GET
    there would read a memory called ``merge`` and a 405's ``Allow`` would list
    the methods of both; the document lists ``merge`` as its own resource
    with POST only, and so does the router: ``{id:(?!merge$)[^/]+}``.
    """
    parts = route.path.split("/")
    for i, part in enumerate(parts):
        if part.startswith("{") and part.endswith("}"):
            siblings = sorted(
                {
                    other.path.split("/")[i]
                    for other in routes
                    if other.path.split("/")[:i] == parts[:i] and len(other.path.split("/")) > i and not other.path.split("/")[i].startswith("{")
                }
            )
            if siblings:
                parts[i] = "{%s:(?!(?:%s)$)[^/]+}" % (part[1:-1], "|".join(re.escape(s) for s in siblings))
    return "/".join(parts)


def query_parameters_middleware(routes: "Iterable[Route]"):
    """A middleware refusing a query parameter the matched route does not declare, or one value of which is taken given twice: 422 naming it.

    Unknown body fields are refused by the request Structs; this does the
    same for the query string, from the one list each route declares (and
    the OpenAPI document publishes), so a misspelt filter never silently
    widens a read.
    """
    # The files of a page (the explorer) take any query string, as a page does: a link may carry one.
    declared = {(r.method, r.path): frozenset(name for name, *_ in r.query) for r in routes if r.in_openapi}
    # The parameters a route reads every value of (``request.query.getall``): their description says "repeatable".
    every_value = {(r.method, r.path): frozenset(name for name, description, *_ in r.query if repeatable(description)) for r in routes}
    # The routes whose body takes as_of (recall): a query's as_of there belongs in the body.
    as_of_in_body = {(r.method, r.path) for r in routes if "as_of" in getattr(r.request, "__struct_fields__", ())}

    @web.middleware
    async def check_query_parameters(request: web.Request, handler):
        if request.query:
            matched = request.match_info.route
            resource = getattr(matched, "resource", None)
            method = "GET" if matched.method == "HEAD" else matched.method  # a HEAD is its GET without the body
            allowed = declared.get((method, resource.canonical)) if resource is not None else None
            if allowed is not None:
                for name in request.query:
                    if name == "as_of" and name not in allowed:
                        where = "send as_of in the body" if (method, resource.canonical) in as_of_in_body else "it answers at the head only"
                        raise ApiError(422, "invalid", f"{request.method} {resource.canonical} takes no as_of in the query: {where}", "as_of")
                    if name not in allowed:
                        takes = ", ".join(sorted(allowed)) if allowed else "no query parameters"
                        raise ApiError(422, "invalid", f"unknown query parameter {name!r}; {request.method} {resource.canonical} takes {takes}", name or "query")
                    if name not in every_value[(method, resource.canonical)] and len(request.query.getall(name)) > 1:
                        raise ApiError(422, "invalid", f"query parameter {name!r} is given more than once; it takes one value", name)  # never keep one of two silently
        return await handler(request)

    return check_query_parameters


_encoder = msgspec.json.Encoder()


def json_response(data: Any, status: int = 200, headers: dict | None = None) -> web.Response:
    return web.Response(body=_encoder.encode(data), status=status, content_type="application/json", headers=headers)


def typed(kind: type[T], data: Any) -> T:
    """``data`` as the response Struct ``kind``: unchanged when it is one, else converted (a dict, or a Struct with the same fields)."""
    return data if isinstance(data, kind) else msgspec.convert(data, kind, from_attributes=True)


def answering(handler: Callable[[web.Request], Awaitable[Any]], kind: type) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """The handler as served: what it returns is encoded as its route's response Struct ``kind``.

    A handler returns its answer's data and the route's declared ``response``
    encodes it, so the server's JSON is the Struct that the OpenAPI document
    shows and the client decodes, by construction (a handler that needs a
    status or headers returns a ``web.Response`` of :func:`typed` data).
    """

    @functools.wraps(handler)
    async def answer(request: web.Request) -> web.StreamResponse:
        result = await handler(request)
        if isinstance(result, web.StreamResponse):
            return result
        return json_response(typed(kind, result))

    return answer


def one_header(request: web.Request, name: str) -> str | None:
    """A header that holds one value, or None; a 400 naming it when it is sent twice (which of two would hold?)."""
    values = request.headers.getall(name, [])
    if len(values) > 1:
        raise ApiError(400, "bad_request", f"{name} is sent {len(values)} times: send it once", name)
    return values[0] if values else None


def header_text(request: web.Request, name: str) -> str | None:
    """A request header's value, or None; a 400 naming it when its bytes are not UTF-8.

    aiohttp keeps such bytes as lone surrogates, which no database or JSON
    answer takes: the header is refused before anything is read or written.
    """
    value = one_header(request, name)
    if value is not None:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ApiError(400, "bad_request", f"{name} must be UTF-8 text", name) from None
    return value


def query_edge_types(request: web.Request) -> list[str] | None:
    """The repeatable ``type`` parameter: edge or relation types as a filter reads them (``works at`` is
    ``WORKS_AT``; None: every type); an empty one filters nothing (a form's field left blank); a 422 naming it
    for one that is no type, which matched nothing and answered as if the node had no edges."""
    types = []
    for value in request.query.getall("type", []):
        if not value:
            continue
        if len(value) > 64 or not TYPE_FILTER_RE.fullmatch(value):
            raise ApiError(422, "invalid", f"type {value!r} is no edge or relation type (a letter first, then letters, digits, _, spaces or -; at most 64)", "type")
        types.append(value)
    return types or None


def tenant_header(request: web.Request) -> str:
    """The tenant ``X-Mnemolog-Tenant`` names (empty when none); a 400 naming it when it is too long or not UTF-8."""
    return check_tenant(header_text(request, "X-Mnemolog-Tenant") or "", "X-Mnemolog-Tenant")


#: The scope a request's key was checked for: each read and write the request queues checks the key again as it starts.
CHECKED_SCOPE: web.RequestKey[str] = web.RequestKey("checked_scope", str)


def authenticate(request: web.Request, scope: str) -> tuple[ApiKey | None, str]:
    """The caller's key and tenant; 401 without a valid key, 403 without the scope."""
    key, tenant = _authorize(request, scope)
    request[CHECKED_SCOPE] = scope
    return key, tenant


def key_check(request: web.Request) -> Callable[[], Any] | None:
    """How the request's key is checked again, as :func:`authenticate` checked it (None: it checked none):
    a 401 once the key has been revoked since (see :func:`~mnemolog.api.auth.still_authorized`)."""
    scope = request.get(CHECKED_SCOPE)
    return functools.partial(_authorize, request, scope) if scope is not None else None


def _secret(request: web.Request) -> tuple[str, str]:
    """The key a request presents (``Authorization: Bearer``, or ``X-API-Key``; empty without one), and the
    header an error about it names (``Authorization`` when it presents none)."""
    header = one_header(request, "Authorization") or ""
    if header.lower().startswith("bearer "):
        return header[7:].strip(), "Authorization"
    other = one_header(request, "X-API-Key") or ""
    return other, "X-API-Key" if other else "Authorization"


def presents_key(request: web.Request) -> bool:
    """Whether the request names a key at all (right or wrong)."""
    return bool(_secret(request)[0])


def _authorize(request: web.Request, scope: str) -> tuple[ApiKey | None, str]:
    settings = request.app[keys.settings_key]
    if not settings.auth:
        return None, tenant_header(request) or "default"
    secret, field = _secret(request)
    return authorize(
        request.app[keys.keystore_key],
        secret,
        scope,
        tenant=tenant_header(request),
        secret_field=field,
        secret_hint="X-API-Key: <key>" if field == "X-API-Key" else "Authorization: Bearer <key>",
        tenant_field="X-Mnemolog-Tenant",
    )


#: The content types a JSON body may come with (none, or bytes untyped, is taken as JSON too).
JSON_CONTENT_TYPES = ("application/json", "", "application/octet-stream")


async def json_body(request: web.Request) -> bytes:
    """The request's body as JSON bytes (``{}`` when empty); a 415 naming ``Content-Type`` when it is sent as something else."""
    if request.content_type not in JSON_CONTENT_TYPES:
        raise ApiError(415, "unsupported_media_type", "send JSON (Content-Type: application/json)", "Content-Type")
    return await request.read() or b"{}"


async def decode(request: web.Request, kind: type) -> Any:
    return parse_json(await json_body(request), kind)


def parse_json(body: bytes, kind: Any = Any) -> Any:
    """``body`` decoded as ``kind``: a 400 naming ``body`` when it is not JSON or nested too deeply, a 422 naming the field it breaks.

    msgspec stops at the first error it meets, which may come before the
    bytes that are no JSON (``{"a":`` breaks the type with an unknown field
    first): a body that breaks its type is checked as JSON, the syntax error
    winning (:func:`check_json`). Only then: a body that decodes costs
    nothing more. The field is named by its dotted path, a dict's key
    included, which msgspec does not tell (:func:`key_at_fault`).
    """
    try:
        try:
            return decode_typed(body, kind)
        except msgspec.ValidationError as exc:
            check_json(body)
            field = field_of(exc, functools.partial(key_at_fault, body, kind, str(exc)))
            raise ApiError(422, "invalid", str(exc), field or "body") from None
    except RecursionError:
        raise ApiError(400, "malformed_json", "the body is nested too deeply", "body") from None


async def read(request: web.Request, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a read in the reader pool: never on the event loop, waiting for the writer only while another
    process's rebuild has left the projections behind what this server has served (``MemoryService.steady``);
    and only if the request's key is still good when its turn comes (:func:`~mnemolog.api.auth.still_authorized`)."""
    loop = asyncio.get_running_loop()
    service = request.app[keys.service_key]
    return await loop.run_in_executor(request.app[keys.readers_key], functools.partial(still_authorized, key_check(request), service.read, fn, *args, **kwargs))


async def write(request: web.Request, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a write on the service's single writer thread, if the request's key is still good when its turn comes."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(request.app[keys.service_key].writer, functools.partial(still_authorized, key_check(request), fn, *args, **kwargs))


def command_context(request: web.Request, tenant: str, key: ApiKey | None) -> CommandContext:
    if "If-Match" in request.headers:
        resource = request.match_info.route.resource
        path = resource.canonical if resource is not None else request.path
        if not takes_if_match(request.method, path):  # a precondition never checked would let the write through regardless
            raise ApiError(400, "bad_request", f"{request.method} {path} checks no version: send it without If-Match", "If-Match")
    idem = header_text(request, "Idempotency-Key")
    low, high = IDEMPOTENCY_KEY_LENGTH
    if idem is not None and not (low <= len(idem) <= high):
        raise ApiError(400, "bad_request", f"Idempotency-Key must be {low} to {high} characters", "Idempotency-Key")
    correlation = header_text(request, "X-Correlation-Id") or ""
    if len(correlation) > CORRELATION_ID_MAX_LENGTH:
        raise ApiError(400, "bad_request", f"X-Correlation-Id must be at most {CORRELATION_ID_MAX_LENGTH} characters", "X-Correlation-Id")
    return CommandContext(
        tenant=tenant,
        correlation_id=correlation,
        actor=f"api:{key.key_id}" if key else "api",
        idempotency_key=idem,
    )


async def write_request(request: web.Request, kind: type | None = None, *, scope: str = "write") -> tuple[CommandContext, Any, MemoryService]:
    """What every write handler starts with: ``(ctx, body, service)``.

    The key is checked for ``scope``, the body decoded into ``kind`` (None
    when the route has none), and the command context built from the headers.
    """
    key, tenant = authenticate(request, scope)
    body = await decode(request, kind) if kind is not None else None
    return command_context(request, tenant, key), body, request.app[keys.service_key]


def if_match(request: web.Request) -> int | None:
    raw = one_header(request, "If-Match")
    if raw is None:
        return None
    found = IF_MATCH_RE.match(raw.strip())
    if found is None:
        raise ApiError(400, "bad_request", "If-Match must hold the expected version number", "If-Match")
    return int(found.group(1))


def write_response(result: CommandResult, status: int = 200) -> web.Response:
    return json_response(typed(WriteResponse, write_result(result)), status=status)


def query_int(request: web.Request, name: str, default: int | None, *, low: int = 0, high: int | None = None) -> int | None:
    raw = request.query.get(name)
    if raw is None:
        return default
    digits = raw.strip()
    magnitude = whole_number(digits.removeprefix("-"))  # as as_of: int() would also read '1_0', '+3' and other scripts' digits
    if magnitude is None:
        raise ApiError(422, "invalid", f"{name} must be an integer", name)
    value = -magnitude if digits.startswith("-") else magnitude
    if value < low or (high is not None and value > high):
        bounds = f"between {low} and {high}" if high is not None else f">= {low}"
        raise ApiError(422, "invalid", f"{name} must be {bounds}", name)
    if value > MAX_POSITION:
        raise ApiError(422, "invalid", f"{name} is too large", name)
    return value
