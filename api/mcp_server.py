"""The MCP front end: memory as MCP tools, resources and a prompt, over stdio or streamable HTTP.

A second front end over the same :class:`MemoryService` as the HTTP API: the
key check is :func:`mnemolog.api.auth.authorize`, the arguments are the
HTTP API's request Structs (each tool's input schema is generated from
them, and msgspec validates with them), the answers come from
:mod:`mnemolog.api.operations`, and errors map through
:func:`mnemolog.api.errors.as_api_error`. A tool answers the same JSON as the
matching HTTP route, explanations included (channels, ranks, graph paths,
relationships), as one text block.

The server acts as one API key: ``MNEMOLOG_API_KEY`` or ``--api-key``, or
over HTTP the request's ``Authorization: Bearer <key>``. The key is checked
at every call (a revoked key is refused from the next call on); a bad key or
a missing scope is an MCP error naming ``api_key``, never a crash. Write
tools are listed and served only when the server was started with
``--allow-writes`` and the key holds the write scope. Every write carries the
actor ``mcp:<client name>`` and the session's correlation id
(``mcp-<client>-<session>``), returned with each write, so that
``mnemolog revert <correlation id>`` undoes what an agent's session did.
Over HTTP a request's ``X-Correlation-Id`` names the correlation, as on the
HTTP API; without it, a transport without sessions (protocol 2026-07-28 on)
gives every request of one key and client name in this run one correlation,
and a key of its own per agent keeps agents apart.

Built on the SDK's low-level server (``mcp.server.lowlevel.Server``): the
``mcp`` package is the optional ``mnemolog[mcp]`` extra, imported by
:func:`build_server` and the runners only.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from typing import Annotated, Any, AsyncIterator, Awaitable, Callable

import msgspec
from msgspec import Meta

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.service import MemoryService

from . import operations
from .auth import ApiKey, KeyStore, authorize, check_tenant, server_keys, still_authorized
from .errors import ApiError, as_api_error, error_body, mcp_message
from .schemas import AddMemoriesRequest, AsOf, Depth, Direction, EdgeType, LinkRequest, Position, Reason, RecallRequest, SearchRequest, UpdateMemoryRequest
from .routing import CORRELATION_ID_MAX_LENGTH
from .schemas_knowledge import RelationsRequest
from .settings import read_threads

INSTALL_HINT = "pip install -e '.[mcp]' from a checkout, or pip install 'mnemolog[mcp]'"
SERVER_NAME = "mnemolog"
URI_SCHEME = "mnemolog"
MEMORY_URI = re.compile(rf"^{URI_SCHEME}://memory/(?P<id>[^/]+)(?P<history>/history)?$")
ID = Annotated[str, Meta(min_length=1, max_length=200, pattern=r"^[^\x00]*$")]  # no NUL: no backend stores it in a name
IdempotencyKey = ID


class McpUnavailable(ImportError):
    """The ``mcp`` package (the ``mcp`` extra) is not installed."""


def require_sdk() -> None:
    try:
        import mcp.server.lowlevel  # noqa: F401
    except ImportError as exc:
        raise McpUnavailable(f"the MCP server needs the optional mcp package: {INSTALL_HINT}") from exc


# -- the tools' arguments: the HTTP API's request Structs, plus what a header carries there -------------


class MemoryRef(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    id: ID
    as_of: AsOf = None  # a position or an ISO-8601 time


class HistoryArgs(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    id: ID
    as_of: AsOf = None  # the versions written by then (a position or an ISO-8601 time)
    after: Position = 0  # a page of versions after this one (the last page's next_after)
    limit: Annotated[int, Meta(ge=1, le=operations.HISTORY_PAGE)] = operations.HISTORY_PAGE  # the versions a page holds at most


class RelatedArgs(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """GET /v1/graph/neighbors: a node's edges and a BFS from it."""

    node: ID
    depth: Depth = 1
    direction: Direction = "both"
    edge_types: list[EdgeType] | None = None  # as the HTTP route's type: one that is no type would match nothing
    as_of: AsOf = None


class EntitiesArgs(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """One entity with its relations (``id``), or a search by keywords, tag or type (GET /v1/entities)."""

    id: ID | None = None
    q: str = ""
    tag: str | None = None
    entity_type: str | None = None
    limit: Annotated[int, Meta(ge=1, le=500)] = 50
    as_of: AsOf = None


class LogArgs(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """GET /v1/events: the tenant's events after a position, a page at a time."""

    after: Position = 0
    limit: Annotated[int, Meta(ge=1, le=1000)] = 100
    types: list[str] | None = None
    stream: str | None = None
    correlation_id: str | None = None
    as_of: AsOf = None  # only the events recorded by then (a position or an ISO-8601 time)


class NoArgs(msgspec.Struct, forbid_unknown_fields=True):
    pass


class AddMemoryArgs(AddMemoriesRequest, forbid_unknown_fields=True, kw_only=True):
    idempotency_key: IdempotencyKey | None = None


class UpdateMemoryArgs(UpdateMemoryRequest, forbid_unknown_fields=True, kw_only=True):
    id: ID
    expected_version: Annotated[int, Meta(ge=1)] | None = None  # If-Match over HTTP
    idempotency_key: IdempotencyKey | None = None


class ArchiveMemoryArgs(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    id: ID
    reason: Reason = ""
    expected_version: Annotated[int, Meta(ge=1)] | None = None
    idempotency_key: IdempotencyKey | None = None


class LinkArgs(LinkRequest, forbid_unknown_fields=True, kw_only=True):
    idempotency_key: IdempotencyKey | None = None


class RevertArgs(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    correlation_id: Annotated[str, Meta(min_length=1, max_length=200)]  # as POST /v1/reverts takes it
    dry_run: bool = True  # say what would be reverted; pass false to write the compensating events
    force: bool = False


_WRITE_ONLY_ARGS = ("id", "expected_version", "idempotency_key")


# -- the front end --------------------------------------------------------------------------------------------

#: How the call at hand checks its key again (set by :meth:`McpFront.caller`, in the call's task): each read and
#: write it queues does, as it starts (:func:`~mnemolog.api.auth.still_authorized`).
_key_check: ContextVar[Callable[[], Any] | None] = ContextVar("mnemolog_mcp_key_check", default=None)


class Caller(msgspec.Struct, frozen=True):
    key: ApiKey | None
    tenant: str
    client: str  # the client's name, from its initialize / request envelope
    session: str  # the transport's session id, else the request's key id and this process's run id
    correlation: str | None = None  # the request's own X-Correlation-Id (over HTTP)


class Tool(msgspec.Struct, frozen=True):
    name: str
    description: str
    args: type
    scope: str  # read | write
    run: Callable[["McpFront", Caller, Any, dict], Awaitable[Any]]


class McpFront:
    """The service, the key store and the reader pool one MCP server process serves from."""

    def __init__(
        self,
        service: MemoryService,
        keystore: KeyStore | None,
        settings: Settings,
        *,
        api_key: str = "",
        tenant: str | None = None,
        allow_writes: bool = False,
        inline_reads: bool = False,
    ):
        """``inline_reads``: run reads on the event loop's thread rather than in the reader pool.

        Over stdio one client talks to the process, and the hand-off to a
        reader thread and back costs about a millisecond on busy cores (the
        MCP path's goal is at most 2 ms over HTTP's); a read then holds the
        loop for its few milliseconds. Writes always go to the writer.
        """
        self.inline_reads = inline_reads
        self.service = service
        self.keystore = keystore
        self.settings = settings
        self.api_key = api_key
        self.tenant = tenant
        self.allow_writes = allow_writes
        self.readers = ThreadPoolExecutor(max_workers=read_threads(settings), thread_name_prefix="mnemolog-mcp-read")
        self.run_id = uuid.uuid4().hex[:12]
        from .app import version_info

        self.version = version_info()

    @classmethod
    def open(cls, settings: Settings, **options: Any) -> "McpFront":
        service = MemoryService.open(settings.data_dir, settings=settings)
        try:
            keystore = server_keys(settings)
        except BaseException:
            service.close()
            raise
        return cls(service, keystore, settings, **options)

    def close(self) -> None:
        self.readers.shutdown(wait=True)
        if self.keystore is not None:
            self.keystore.close()
        self.service.close()

    # -- who is calling ---------------------------------------------------------------------

    def caller(self, ctx: Any, scope: str) -> Caller:
        """The key, tenant, client name and session of a request; an ApiError for a bad key or a missing scope."""
        headers = _headers(ctx)
        bearer = headers.get("authorization", "")
        own = not bearer.lower().startswith("bearer ")  # the server acts as its own key
        secret = self.api_key if own else bearer[7:].strip()
        named = check_tenant(headers.get("x-mnemolog-tenant") or "", "X-Mnemolog-Tenant")
        client = _client_name(ctx)
        correlation = headers.get("x-correlation-id") or None
        if correlation is not None and len(correlation) > CORRELATION_ID_MAX_LENGTH:
            raise ApiError(400, "bad_request", f"X-Correlation-Id must be at most {CORRELATION_ID_MAX_LENGTH} characters", "X-Correlation-Id")
        session = headers.get("mcp-session-id") or self.run_id
        if not self.settings.auth:
            _key_check.set(None)
            return Caller(None, named or self.tenant or "default", client, session, correlation)
        # The server's own key is checked against the tenant it was started for (--tenant), as a request's tenant
        # header is against the request's key; for a request's own key that option is only a default.
        check = functools.partial(
            authorize,
            self.keystore,
            secret,
            scope,
            tenant=named or (self.tenant if own else None),
            default_tenant=self.tenant,
            secret_field="api_key",
            scope_field="api_key",  # a key that lacks the scope: the key is what is at fault
            secret_hint="set MNEMOLOG_API_KEY or pass --api-key (over HTTP, or send Authorization: Bearer <key>)",
            tenant_field="tenant",
        )
        key, tenant = check()
        _key_check.set(check)
        if "mcp-session-id" not in headers and key is not None and bearer:
            # No transport session, and the request brought its own key: the key tells one agent from another.
            session = f"{key.key_id}-{self.run_id}"
        return Caller(key, tenant, client, session, correlation)

    def writes_for(self, key: ApiKey | None) -> bool:
        return self.allow_writes and (key is None or key.allows("write"))

    def context(self, caller: Caller, idempotency_key: str | None = None, *, correlation_id: str | None = None) -> CommandContext:
        return CommandContext(
            tenant=caller.tenant,
            correlation_id=correlation_id or self.correlation_id(caller),
            actor=f"mcp:{caller.client}",
            idempotency_key=idempotency_key,
        )

    def correlation_id(self, caller: Caller) -> str:
        """One correlation id per client session: what ``mnemolog revert`` takes to undo the session."""
        return caller.correlation or f"mcp-{caller.client}-{caller.session}"

    async def read(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a read for the call at hand, if its key is still good when the read starts."""
        read = functools.partial(still_authorized, _key_check.get(), self.service.read, fn, *args, **kwargs)
        if self.inline_reads:
            return read()
        return await asyncio.get_running_loop().run_in_executor(self.readers, read)

    async def write(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a write for the call at hand on the writer, if its key is still good when the write starts."""
        return await asyncio.get_running_loop().run_in_executor(self.service.writer, functools.partial(still_authorized, _key_check.get(), fn, *args, **kwargs))


def _headers(ctx: Any) -> dict[str, str]:
    request = getattr(ctx, "request", None)
    headers = getattr(request, "headers", None)
    return {k.lower(): v for k, v in headers.items()} if headers is not None else {}


def _client_name(ctx: Any) -> str:
    params = getattr(getattr(ctx, "session", None), "client_params", None)
    name = params.client_info.name if params is not None and params.client_info is not None else ""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-")[:64]
    return name or "client"


# -- the tools --------------------------------------------------------------------------------------------------


async def _recall(front: McpFront, caller: Caller, body: RecallRequest, raw: dict) -> Any:
    svc = front.service
    options = operations.recall_options(svc, body, fused=True)
    position = await operations.reach(svc, body.min_position, front.readers)
    return await front.read(operations.recall, svc, caller.tenant, body, options, position)


async def _search(front: McpFront, caller: Caller, body: SearchRequest, raw: dict) -> Any:
    svc = front.service
    options = operations.recall_options(svc, body, fused=False)
    position = await operations.reach(svc, body.min_position, front.readers)
    return await front.read(operations.search, svc, caller.tenant, body, options, position)


async def _get_memory(front: McpFront, caller: Caller, body: MemoryRef, raw: dict) -> Any:
    return await front.read(front.service.get, caller.tenant, body.id, as_of=operations.check_as_of(body.as_of))


async def _history(front: McpFront, caller: Caller, body: HistoryArgs, raw: dict) -> Any:
    return await front.read(operations.history, front.service, caller.tenant, body.id, operations.check_as_of(body.as_of), body.after, body.limit)


async def _related(front: McpFront, caller: Caller, body: RelatedArgs, raw: dict) -> Any:
    as_of = operations.check_as_of(body.as_of)
    types = [t for t in body.edge_types or () if t] or None  # an empty one filters nothing, as over HTTP
    return await front.read(operations.neighbors, front.service, caller.tenant, body.node, body.depth, body.direction, types, as_of)


async def _relations(front: McpFront, caller: Caller, body: RelationsRequest, raw: dict) -> Any:
    return await front.read(operations.relation_cards, front.service, caller.tenant, body)


async def _entities(front: McpFront, caller: Caller, body: EntitiesArgs, raw: dict) -> Any:
    as_of = operations.check_as_of(body.as_of)
    if body.id is not None:
        if body.q or body.tag or body.entity_type:
            raise ApiError(422, "invalid", "give either id (one entity) or q, tag and entity_type (a search)", "id")
        return await front.read(operations.entity, front.service, caller.tenant, body.id, as_of)
    return await front.read(operations.find_entities, front.service, caller.tenant, body.q, body.tag, body.entity_type, body.limit, as_of)


async def _log(front: McpFront, caller: Caller, body: LogArgs, raw: dict) -> Any:
    return await front.read(
        operations.events_page, front.service, caller.tenant, body.after, body.limit, types=body.types, stream=body.stream, correlation_id=body.correlation_id,
        as_of=operations.check_as_of(body.as_of),
    )


async def _capabilities(front: McpFront, caller: Caller, body: NoArgs, raw: dict) -> Any:
    found = await front.read(operations.capabilities, front.service, front.version, organizer=False)
    writes = front.writes_for(caller.key)
    found["session"] = {
        "tenant": caller.tenant,
        "actor": f"mcp:{caller.client}",
        "correlation_id": front.correlation_id(caller),
        "writes": writes,
        "tools": [t.name for t in TOOLS if t.scope == "read" or writes],
    }
    return found


async def _add_memory(front: McpFront, caller: Caller, body: AddMemoryArgs, raw: dict) -> Any:
    ctx = front.context(caller, body.idempotency_key)
    return operations.write_result(await front.write(operations.add_memories, front.service, ctx, body))


async def _update_memory(front: McpFront, caller: Caller, body: UpdateMemoryArgs, raw: dict) -> Any:
    ctx = front.context(caller, body.idempotency_key)
    given = [name for name in raw if name not in _WRITE_ONLY_ARGS]
    result = await front.write(operations.update_memory, front.service, ctx, body.id, body, given, body.expected_version)
    return operations.write_result(result)


async def _archive_memory(front: McpFront, caller: Caller, body: ArchiveMemoryArgs, raw: dict) -> Any:
    svc = front.service
    ctx = front.context(caller, body.idempotency_key)
    result = await front.write(svc.run, svc.memories.archive, ctx, body.id, reason=body.reason, expected_version=body.expected_version)
    return operations.write_result(result)


async def _link(front: McpFront, caller: Caller, body: LinkArgs, raw: dict) -> Any:
    svc = front.service
    ctx = front.context(caller, body.idempotency_key)
    result = await front.write(
        svc.run, svc.edges.link, ctx, body.source, body.target, body.edge_type, weight=body.weight, edge_id=body.edge_id, properties=body.properties
    )
    return operations.write_result(result)


async def _revert(front: McpFront, caller: Caller, body: RevertArgs, raw: dict) -> Any:
    """A revert is its own correlation (so that it can undo this very session), named after the session's."""
    svc = front.service
    ctx = front.context(caller, correlation_id=f"{front.correlation_id(caller)[:180]}-revert-{uuid.uuid4().hex[:8]}")
    result = await front.write(svc.run, svc.reverts.revert, ctx, body.correlation_id, force=body.force, dry_run=body.dry_run)
    return operations.write_result(result)


TOOLS: tuple[Tool, ...] = (
    Tool("recall", "Fused recall (lexical, semantic, graph) over the tenant's memories and knowledge graph: each hit has a kind (memory, or entity with its card and the relation path from an entity the question names), says which channels found it at what rank, and the relationships form the answer's subgraph. strategy: hybrid (default), knowledge-only (memories) or graph-only (entities and the memories they lead to); the answer names the strategy used. Filters, channels, weights and as_of (a log position or ISO-8601 time) as in POST /v1/recall; min_position reads your own writes.", RecallRequest, "read", _recall),
    Tool("search", "The raw recall channels, unfused: each channel's own ranking (POST /v1/search).", SearchRequest, "read", _search),
    Tool("get_memory", "One memory by id, at the head or as of a log position or ISO-8601 time.", MemoryRef, "read", _get_memory),
    Tool("history", "Every version of a memory, from its stream: what changed, when, by whom, in which correlation; and the entities it mentions (mention_links). as_of: the versions written by then; up to limit (1..1,000) a page (more and next_after lead to the next, as after).", HistoryArgs, "read", _history),
    Tool("related", "A node's edges and the nodes a BFS reaches from it (depth 0..5, direction out|in|both, edge types), each with its path; as_of for the past.", RelatedArgs, "read", _related),
    Tool("relations", "One-hop relation cards for the entities a question names (matched: false when none).", RelationsRequest, "read", _relations),
    Tool("entities", "Look up entities: one by id with its relations, or search by keywords (q), tag or entity_type.", EntitiesArgs, "read", _entities),
    Tool("log", "The tenant's events after a position, a page at a time (next_after continues), filtered by type, stream or correlation id; as_of: only those recorded by then.", LogArgs, "read", _log),
    Tool("capabilities", "Version, head position, projection lags, recall channels, and this session: tenant, actor, correlation id, whether writes are allowed.", NoArgs, "read", _capabilities),
    Tool("add_memory", "Add one memory (memory) or an atomic batch (memories); idempotency_key makes a retry safe. Returns the positions written: pass the last as recall's min_position.", AddMemoryArgs, "write", _add_memory),
    Tool("update_memory", "A new version of a memory: only the fields given change; expected_version refuses the update if someone changed it meanwhile.", UpdateMemoryArgs, "write", _update_memory),
    Tool("archive_memory", "Archive a memory (it leaves recall; history keeps it, restore brings it back).", ArchiveMemoryArgs, "write", _archive_memory),
    Tool("link", "Link two nodes with a typed, weighted, namespaced edge.", LinkArgs, "write", _link),
    Tool("revert", "Undo everything one correlation id did (a session's writes, an import, an organizer pass) with compensating events. A dry run unless dry_run is false.", RevertArgs, "write", _revert),
)
TOOLS_BY_NAME = {t.name: t for t in TOOLS}


@functools.cache
def input_schema(kind: type) -> dict[str, Any]:
    """The JSON Schema of a tool's arguments, from its Struct: an object at the top, its parts under ``$defs``."""
    schema = msgspec.json.schema(kind)
    defs = dict(schema.get("$defs", {}))
    ref = schema.get("$ref", "")
    top = defs.pop(ref.rsplit("/", 1)[-1]) if ref else schema
    if defs:
        top = {**top, "$defs": defs}
    top.setdefault("properties", {})
    return top


PROMPT_NAME = "cite_memory"
PROMPT_TEXT = """You have mnemolog memory through MCP tools. {ask}

1. Call `recall` with the question (add filters, channels or as_of when the question needs them).
   Its `position` is the log position the answer was read at; each hit has an `id`, a `kind`
   (`memory`, with the memory's `version`, or `entity`, with its card and the relation `path`
   that led to it) and why it was found (`channels` with ranks, `graph_path`, `relationships`).
2. Use only what the hits say. Cite every memory you rely on right after the claim, as
   [memory:<id> v<version> @<position>], for example [memory:{example} v2 @{position}];
   cite an entity as [entity:<id> @<position>].
3. To show a memory as it was when you read it, call `get_memory` with `id` and `as_of=<position>`;
   `history` lists every version with who changed it and when.
4. If no hit supports an answer, say so rather than guess.
"""


def prompt_text(question: str | None, position: int | None = None) -> str:
    return PROMPT_TEXT.format(
        ask=f"Answer this question from memory: {question}" if question else "Answer from memory as follows.",
        example="01JD0Q3V8Y6Q2W6X0S2N5Z3K7M",
        position=position if position is not None else 42,
    )


# -- the MCP server ---------------------------------------------------------------------------------------


_encoder = msgspec.json.Encoder()


#: The HTTP API's headers a tool takes as arguments: an error naming one names the argument.
_ARGUMENT_OF_HEADER = {"Idempotency-Key": "idempotency_key"}


def tool_error(error: ApiError) -> ApiError:
    """``error`` naming the tool's argument at fault where the HTTP API names a header.

    A conflict with the memory at another version than ``expected_version``
    names that argument as the command does (the HTTP API's ``If-Match``); a
    conflict of state (an archived memory archived again, at the version
    expected) names none.
    """
    field = _ARGUMENT_OF_HEADER.get(error.field or "", error.field)
    if field == error.field:
        return error
    return ApiError(error.status, error.code, error.message, field, headers=error.headers, **error.extra)


def build_server(front: McpFront):
    """The SDK's low-level server with mnemolog's tools, resources and prompt."""
    import logging

    import mcp_types as types
    from mcp.server.lowlevel import Server
    from mcp.shared.exceptions import MCPError

    log = logging.getLogger("mnemolog.mcp")

    def refuse(error: ApiError) -> MCPError:
        code = -32002 if error.status == 404 else types.INVALID_PARAMS
        return MCPError(code, mcp_message(error), error_body(error))

    def text_result(data: Any, *, is_error: bool = False) -> Any:
        """The HTTP API's JSON, as one text block (a structured copy would double what every call carries and parses)."""
        return types.CallToolResult(content=[types.TextContent(type="text", text=_encoder.encode(data).decode())], is_error=is_error)

    async def list_tools(ctx, params):
        """The tools the key may call: a key of the write scope alone (an ingesting agent) is shown the write tools."""
        try:
            caller, reads = front.caller(ctx, "read"), True
        except ApiError as error:
            if error.status != 403 or not front.allow_writes:
                raise refuse(error) from None
            try:
                caller, reads = front.caller(ctx, "write"), False
            except ApiError:
                raise refuse(error) from None
        writes = front.writes_for(caller.key)
        shown = [t for t in TOOLS if (t.scope == "read" and reads) or (t.scope == "write" and writes)]
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=t.name,
                    description=t.description,
                    input_schema=input_schema(t.args),
                    annotations=types.ToolAnnotations(read_only_hint=t.scope == "read", destructive_hint=t.name == "revert", idempotent_hint=t.scope == "read"),
                )
                for t in shown
            ]
        )

    async def call_tool(ctx, params):
        raw = dict(params.arguments or {})
        try:
            tool = TOOLS_BY_NAME.get(params.name)
            if tool is None:
                raise ApiError(404, "not_found", f"no tool {params.name!r}; the tools are {', '.join(TOOLS_BY_NAME)}", "name")
            caller = front.caller(ctx, tool.scope)
            if tool.scope == "write" and not front.allow_writes:
                raise ApiError(403, "forbidden", f"{tool.name} writes, and this server was started without --allow-writes", None)
            body = operations.arguments(raw, tool.args)
            return text_result(await tool.run(front, caller, body, raw))
        except Exception as exc:
            error = as_api_error(exc)
            if error is None:  # a bug: reported to the client as such, the server carries on
                log.exception("tool %s failed", params.name)
                error = ApiError(500, "internal", "internal error", None)
            return text_result(error_body(tool_error(error)), is_error=True)

    async def list_resources(ctx, params):
        return types.ListResourcesResult(resources=[])

    async def list_resource_templates(ctx, params):
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(uri_template=f"{URI_SCHEME}://memory/{{id}}", name="memory", description="A memory at the head, as get_memory answers.", mime_type="application/json"),
                types.ResourceTemplate(uri_template=f"{URI_SCHEME}://memory/{{id}}/history", name="memory history", description="Every version of a memory, as history answers.", mime_type="application/json"),
            ]
        )

    async def read_resource(ctx, params):
        uri = str(params.uri)
        try:
            matched = MEMORY_URI.match(uri)
            if matched is None:
                raise ApiError(404, "not_found", f"no resource {uri!r}; the resources are {URI_SCHEME}://memory/{{id}} and {URI_SCHEME}://memory/{{id}}/history", "uri")
            caller = front.caller(ctx, "read")
            if matched.group("history"):
                data = await front.read(operations.history, front.service, caller.tenant, matched.group("id"))
            else:
                data = await front.read(front.service.get, caller.tenant, matched.group("id"))
        except Exception as exc:
            error = as_api_error(exc)
            if error is None:
                log.exception("reading %s failed", uri)
                error = ApiError(500, "internal", "internal error", None)
            raise refuse(error) from None
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type="application/json", text=_encoder.encode(data).decode())])

    async def list_prompts(ctx, params):
        return types.ListPromptsResult(
            prompts=[
                types.Prompt(
                    name=PROMPT_NAME,
                    description="How to answer from memory and cite memory ids, versions and log positions.",
                    arguments=[types.PromptArgument(name="question", description="the question to answer", required=False)],
                )
            ]
        )

    async def get_prompt(ctx, params):
        if params.name != PROMPT_NAME:
            raise refuse(ApiError(404, "not_found", f"no prompt {params.name!r}; the prompt is {PROMPT_NAME}", "name"))
        question = (params.arguments or {}).get("question")
        return types.GetPromptResult(
            description="Answer from memory, citing ids, versions and positions",
            messages=[types.PromptMessage(role="user", content=types.TextContent(type="text", text=prompt_text(question)))],
        )

    server = Server(
        SERVER_NAME,
        version=front.version["version"],
        instructions="mnemolog: an event-sourced memory. Recall before answering, cite memories as [memory:<id> v<version> @<position>] (see the cite_memory prompt).",
        # The streamable-HTTP transport checks Mcp-Param headers against a tool's schema: give it
        # the schema directly rather than have it list the tools (a listing that needs the key).
        get_tool_input_schema=lambda name: input_schema(TOOLS_BY_NAME[name].args) if name in TOOLS_BY_NAME else None,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_resource_templates,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )
    # The SDK wraps every message in an OpenTelemetry span, which costs on each call and goes
    # nowhere unless an exporter is installed; mnemolog installs none.
    server.middleware = [m for m in server.middleware if type(m).__name__ != "OpenTelemetryMiddleware"]
    return server


# -- running it -------------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def serving(front: McpFront) -> AsyncIterator[Any]:
    """The MCP server of ``front`` (the SDK's low-level ``Server``), with the task that follows the log for
    its projections running beside it until the block ends: what either transport serves, and what a
    client of the SDK connects to in-process."""
    from .background import follow

    follower = asyncio.create_task(follow(front.service, front.readers))
    try:
        yield build_server(front)
    finally:
        follower.cancel()
        try:
            await follower
        except (asyncio.CancelledError, Exception):
            pass


async def _serve(front: McpFront, serve: Callable[[Any], Awaitable[None]]) -> None:
    async with serving(front) as server:
        await serve(server)


def run_stdio(front: McpFront) -> None:
    """Serve one client over stdin/stdout until it closes them."""
    import anyio
    from mcp.server.stdio import stdio_server

    from .mcp_stdio import stdio_pipes

    async def serve(server) -> None:
        async with stdio_pipes() as (lines, out):
            async with stdio_server(lines, out) as (reader, writer):
                await server.run(reader, writer, server.create_initialization_options())

    anyio.run(_serve, front, serve)


def run_http(front: McpFront, host: str, port: int, *, ready: Callable[[str], None] | None = None, sock: Any = None) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp`` (on ``sock`` if given, already bound) until interrupted."""
    import anyio
    import uvicorn

    from .mcp_http import body_limited

    limit = int(front.settings.max_body_bytes)

    async def serve(server) -> None:
        app = body_limited(server.streamable_http_app(host=host, max_request_body_size=limit), limit)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False, lifespan="on")
        http = uvicorn.Server(config)
        if ready is not None:
            original = http.startup

            async def startup(sockets=None):
                await original(sockets=sockets)
                bound = http.servers[0].sockets[0].getsockname()[1] if http.servers else port
                ready(f"http://{host if ':' not in host else f'[{host}]'}:{bound}/mcp")

            http.startup = startup  # type: ignore[method-assign]
        await http.serve(sockets=[sock] if sock is not None else None)

    anyio.run(_serve, front, serve)


def client_config(data_dir: str, *, command: str = "mnemolog", allow_writes: bool = False, tenant: str | None = None) -> dict[str, Any]:
    """The ``mcpServers`` entry an MCP client needs to launch this server over stdio (for ``tenant``, when named)."""
    args = ["--data-dir", data_dir, "mcp"] + (["--tenant", tenant] if tenant else []) + (["--allow-writes"] if allow_writes else [])
    return {"mcpServers": {"mnemolog": {"command": command, "args": args, "env": {"MNEMOLOG_API_KEY": "<key from mnemolog keys create>"}}}}


__all__ = ["INSTALL_HINT", "McpFront", "McpUnavailable", "TOOLS", "build_server", "client_config", "require_sdk", "run_http", "run_stdio"]
