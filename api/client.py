"""The async Python client for mnemolog's HTTP API: one method per operation.

Each operation of ``GET /openapi.json`` has a method named by its
``operationId`` (``tests/api/test_client.py`` walks the served document and
fails on one without). Requests and responses are the Structs the server
uses (:mod:`mnemolog.api.schemas`, :mod:`mnemolog.api.schemas_knowledge`),
so a caller gets attributes; an error answer is raised as an
:class:`ApiError` subclass by kind, carrying the server's JSON error, and a
success status whose body is not the operation's answer (a proxy's own page)
as :class:`UnexpectedResponseError`.

>>> async with MnemologClient("http://127.0.0.1:8765", api_key="mlk_…") as client:
...     written = await client.add_memories(MemoryIn(memory="I moved to Lisbon", key="home city"))
...     found = await client.recall("where do I live?", min_position=written.positions[-1])

Writes are safe to retry: each sends an ``Idempotency-Key`` (generated when
the caller gives none) and a retry after a dropped connection reuses it, so
the server replays the first answer instead of writing twice. Reads take
``as_of`` (a position or an ISO-8601 time) wherever the server keeps history.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import io
import os
import uuid
from pathlib import Path
from typing import IO, Any, AsyncIterator, Iterable, Literal, Sequence, TypedDict, TypeVar, Union, Unpack
from urllib.parse import quote

import aiohttp
import msgspec

from .client_errors import (
    ApiError,
    AuthenticationError,
    ConflictError,
    ConnectionFailedError,
    ForbiddenError,
    IdempotencyConflictError,
    InvalidInputError,
    NotFoundError,
    PayloadTooLargeError,
    RequestTimeoutError,
    ServerError,
    UnexpectedResponseError,
    VersionConflictError,
    error_for,
    retry_after_seconds,
    transport_error,
    unexpected_response,
)
from .schemas import (
    ChannelWeights,
    DeleteRequest,
    DropTenantRequest,
    ForgetRequest,
    Filters,
    LinkRequest,
    MemoryIn,
    MergeRequest,
    ReasonRequest,
    RevertRequest,
    RollbackRequest,
    SubgraphRequest,
    SupersedeRequest,
    UndoNamespaceRequest,
    UpdateMemoryRequest,
    WorkingMemoryResponse,
    WriteResponse,
)
from .schemas_knowledge import DocumentLinksRequest, EntityIn, RelationIn, RelationKey, RelationsRequest, RelinkRequest, RemoveEntityRequest, TagsIn
from .schemas_responses import (
    CapabilitiesResponse,
    CorrelationPage,
    DigestResponse,
    DocumentLinksResponse,
    EntitiesResponse,
    EntityResponse,
    EventsPage,
    EventView,
    GraphStatsResponse,
    HealthResponse,
    ImportReport,
    MemoryHistoryResponse,
    MemoryView,
    NeighborhoodPage,
    NeighborsResponse,
    OpenApiDocument,
    OrganizerStatusResponse,
    RecallResult,
    RelatedResponse,
    RelationCardsResponse,
    RelinkReport,
    SearchResponse,
    SubgraphResponse,
    TagsResponse,
    TimelineResponse,
    VerifyResult,
    WhoAmIResponse,
)

__all__ = [
    "ApiError",
    "AuthenticationError",
    "ConflictError",
    "ConnectionFailedError",
    "ForbiddenError",
    "IdempotencyConflictError",
    "InvalidInputError",
    "MnemologClient",
    "NotFoundError",
    "PayloadTooLargeError",
    "RecallOptions",
    "RequestTimeoutError",
    "ServerError",
    "UnexpectedResponseError",
    "VersionConflictError",
    "WriteOptions",
    "Written",
]

AsOf = Union[int, str, None]
#: A document to upload: a path, a file object with a name, or ``(filename, bytes or file object)``.
Upload = Union[str, os.PathLike, IO[bytes], tuple[str, Union[bytes, IO[bytes]]]]
Written = WriteResponse  # what every write answers
Direction = Literal["out", "in", "both"]
T = TypeVar("T")


# -- the client -------------------------------------------------------------------------------------------


class WriteOptions(TypedDict, total=False):
    """What every write method also takes.

    ``idempotency_key``: replaying it answers the first result (default: a new
    UUID per call, kept across its retries, and on the error raised when they
    fail: ``error.idempotency_key``, to send the write again later); ``expected_version``: the
    memory's version the write expects (``If-Match``), else a
    :class:`VersionConflictError` (a memory command's only: another write,
    checking no version, refuses it); ``correlation_id``: this call's correlation
    (default: the enclosing :meth:`MnemologClient.correlation`, else the
    server's own).
    """

    idempotency_key: str
    expected_version: int
    correlation_id: str


class RecallOptions(TypedDict, total=False):
    """What :meth:`MnemologClient.recall` and :meth:`~MnemologClient.search` also take: :class:`~mnemolog.api.schemas.RecallRequest`'s fields.

    ``min_position`` (read your writes: a write's last position) waits until
    the projections include it; ``rrf_k`` and ``propagation`` belong to
    fused recall only.
    """

    limit: int
    filters: Filters | dict[str, Any]
    min_position: int
    channels: list[Literal["lexical", "semantic", "graph"]]
    weights: ChannelWeights | dict[str, float]
    fusion: Literal["score", "rrf"]
    rrf_k: float
    raw_fts: bool
    embedding: list[float]
    graph_depth: int
    graph_direction: Direction
    graph_edge_types: list[str]
    propagation: bool
    strategy: Literal["hybrid", "knowledge-only", "graph-only"]


_correlation: contextvars.ContextVar[str | None] = contextvars.ContextVar("mnemolog_correlation", default=None)
_RETRYABLE = (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, asyncio.TimeoutError)
#: Methods that never write: every other request carries an ``Idempotency-Key`` (the caller's, else a new one kept across its retries).
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _body(value: Any) -> Any:
    """A Struct without the fields left at their defaults (the server applies the same ones), else ``value``.

    Leaving defaults out keeps a partial update partial: an
    :class:`UpdateMemoryRequest` changes only the fields it sets.
    """
    if not isinstance(value, msgspec.Struct):
        return value
    out = {}
    for field in msgspec.structs.fields(value):
        current = getattr(value, field.name)
        default = field.default if field.default is not msgspec.NODEFAULT else (field.default_factory() if field.default_factory is not msgspec.NODEFAULT else msgspec.NODEFAULT)
        if default is msgspec.NODEFAULT or current != default:
            out[field.encode_name] = current
    return out


def _params(**values: Any) -> list[tuple[str, str]]:
    """Query parameters without the unset ones; a list value repeats its name."""
    out: list[tuple[str, str]] = []
    for name, value in values.items():
        if value is None:
            continue
        for item in value if isinstance(value, (list, tuple)) else [value]:
            out.append((name, str(item).lower() if isinstance(item, bool) else str(item)))
    return out


class MnemologClient:
    """An async client: ``async with MnemologClient(url, api_key=...) as client``.

    ``tenant`` is sent as ``X-Mnemolog-Tenant`` (for a key valid for every
    tenant, or a server without auth). A request that loses its connection,
    times out or finds the database busy (503 with ``Retry-After``, which it
    waits, up to 5 s) is retried ``max_retries`` times, then raises
    :class:`ConnectionFailedError` (an ``aiohttp.ClientConnectionError``) or
    :class:`RequestTimeoutError` (a :class:`TimeoutError`), naming the request;
    every request but a GET carries an ``Idempotency-Key`` (the caller's, else
    a new one) kept across its retries, so a retry never writes twice.
    ``timeout``: the seconds one attempt may take, on a ``session`` of the caller's too.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        tenant: str | None = None,
        session: aiohttp.ClientSession | None = None,
        timeout: float = 30.0,
        max_retries: int = 2,
    ):
        self.base_url = base_url.rstrip("/")
        self._headers: dict[str, str] = {}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        if tenant:
            self._headers["X-Mnemolog-Tenant"] = tenant
        self._session = session
        self._own_session = session is None
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self.max_retries = max_retries

    async def __aenter__(self) -> "MnemologClient":
        self._open()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        return self._session

    async def close(self) -> None:
        if self._session is not None and self._own_session:
            await self._session.close()
            self._session = None

    @contextlib.asynccontextmanager
    async def correlation(self, correlation_id: str | None = None) -> AsyncIterator[str]:
        """Every write inside runs under one correlation id (yielded), so that :meth:`revert` undoes them together."""
        cid = correlation_id or f"client-{uuid.uuid4().hex}"
        token = _correlation.set(cid)
        try:
            yield cid
        finally:
            _correlation.reset(token)

    # -- transport ---------------------------------------------------------------------------

    async def request(
        self, method: str, path: str, *, json: Any = None, params: Any = None, headers: dict[str, str] | None = None, form: Any = None, kind: Any = None
    ) -> Any:
        """One HTTP exchange, its JSON answer decoded as ``kind`` (a type; default: plain JSON); retried on a dropped connection, a write with one idempotency key. ``form``: a callable building FormData."""
        merged = {**self._headers, **(headers or {})}
        if method.upper() not in _SAFE_METHODS and not any(name.lower() == "idempotency-key" for name in merged):
            merged["Idempotency-Key"] = uuid.uuid4().hex  # a retry after a dropped connection must not write twice
        data = None
        if json is not None:
            data = msgspec.json.encode(_body(json))
            merged["Content-Type"] = "application/json"
        expected = next((value for name, value in merged.items() if name.lower() == "if-match"), None)
        try:
            for attempt in range(self.max_retries + 1):
                try:
                    async with self._open().request(
                        method, self.base_url + path, data=form() if form else data, params=params, headers=merged, timeout=self._timeout
                    ) as response:
                        body = await response.read()
                        if response.status == 503 and attempt < self.max_retries and "Retry-After" in response.headers:
                            await asyncio.sleep(retry_after_seconds(response.headers["Retry-After"]))  # busy: nothing was written
                            continue
                        if response.status >= 400:
                            raise error_for(response.status, body, expected_version=expected)
                        return _answer(method, path, response, body, kind)
                except _RETRYABLE as exc:
                    if attempt == self.max_retries:
                        raise transport_error(method.upper(), self.base_url + path, attempt + 1, exc, self._timeout.total) from exc
                    await asyncio.sleep(0.05 * 2**attempt)
        except (ApiError, ConnectionFailedError, RequestTimeoutError) as error:
            error.idempotency_key = next((value for name, value in merged.items() if name.lower() == "idempotency-key"), None)
            raise

    async def _read(self, method: str, path: str, kind: type[T], *, json: Any = None, params: Any = None) -> T:
        """A read: its answer decoded as the operation's response Struct ``kind``."""
        return await self.request(method, path, json=json, params=params, kind=kind)  # type: ignore[no-any-return]

    async def _write(self, method: str, path: str, body: Any, options: WriteOptions, kind: type[T], *, form: Any = None) -> T:
        """A write: sent with its idempotency key (the caller's, else :meth:`request` makes one), ``If-Match``
        and correlation id; its answer decoded as ``kind``."""
        headers = {"Idempotency-Key": options["idempotency_key"]} if options.get("idempotency_key") else {}
        if options.get("expected_version") is not None:
            headers["If-Match"] = str(options["expected_version"])
        correlation = options.get("correlation_id") or _correlation.get()
        if correlation:
            headers["X-Correlation-Id"] = correlation
        return await self.request(method, path, json=body, headers=headers, form=form, kind=kind)  # type: ignore[no-any-return]

    # -- meta ------------------------------------------------------------------------------------

    async def health(self) -> HealthResponse:
        return await self._read("GET", "/health", HealthResponse)

    async def capabilities(self) -> CapabilitiesResponse:
        return await self._read("GET", "/v1/capabilities", CapabilitiesResponse)

    async def openapi(self) -> OpenApiDocument:
        return await self._read("GET", "/openapi.json", OpenApiDocument)

    # -- memories ----------------------------------------------------------------------------

    async def add_memories(self, memory: MemoryIn | dict[str, Any] | None = None, *, memories: Sequence[MemoryIn | dict[str, Any]] | None = None, **options: Unpack[WriteOptions]) -> WriteResponse:
        """One memory, or ``memories``: an atomic batch."""
        body = {"memory": _body(memory)} if memory is not None else {"memories": [_body(m) for m in memories or []]}
        return await self._write("POST", "/v1/memories", body, options, WriteResponse)

    async def update_memory(self, memory_id: str, changes: UpdateMemoryRequest | dict[str, Any], **options: Unpack[WriteOptions]) -> WriteResponse:
        return await self._write("PATCH", f"/v1/memories/{_segment(memory_id)}", changes, options, WriteResponse)

    async def merge_memories(
        self, memory_ids: Sequence[str], *, text: str | None = None, expected_versions: dict[str, int] | None = None, **options: Unpack[WriteOptions]
    ) -> WriteResponse:
        """``expected_versions``: the version each named source must be at, else a :class:`VersionConflictError`."""
        body = MergeRequest(list(memory_ids), text, dict(expected_versions) if expected_versions else None)
        return await self._write("POST", "/v1/memories/merge", body, options, WriteResponse)

    async def archive_memory(self, memory_id: str, *, reason: str = "", **options: Unpack[WriteOptions]) -> WriteResponse:
        return await self._write("POST", f"/v1/memories/{_segment(memory_id)}/archive", ReasonRequest(reason), options, WriteResponse)

    async def delete_memory(self, memory_id: str, *, reason: str = "", evolve_to: str | None = None, **options: Unpack[WriteOptions]) -> WriteResponse:
        return await self._write("POST", f"/v1/memories/{_segment(memory_id)}/delete", DeleteRequest(reason, evolve_to), options, WriteResponse)

    async def restore_memory(self, memory_id: str, *, reason: str = "", **options: Unpack[WriteOptions]) -> WriteResponse:
        return await self._write("POST", f"/v1/memories/{_segment(memory_id)}/restore", ReasonRequest(reason), options, WriteResponse)

    async def rollback_memory(self, memory_id: str, to_version: int, *, reason: str = "", **options: Unpack[WriteOptions]) -> WriteResponse:
        return await self._write("POST", f"/v1/memories/{_segment(memory_id)}/rollback", RollbackRequest(to_version, reason), options, WriteResponse)

    async def supersede_memory(self, memory_id: str, superseded_by: str, **options: Unpack[WriteOptions]) -> WriteResponse:
        return await self._write("POST", f"/v1/memories/{_segment(memory_id)}/supersede", SupersedeRequest(superseded_by), options, WriteResponse)

    async def get_memory(self, memory_id: str, *, as_of: AsOf = None) -> MemoryView:
        return await self._read("GET", f"/v1/memories/{_segment(memory_id)}", MemoryView, params=_params(as_of=as_of))

    async def memory_history(self, memory_id: str, *, as_of: AsOf = None, after: int = 0, limit: int | None = None) -> MemoryHistoryResponse:
        """A page of a memory's versions (after version ``after``, at most ``limit``; ``more`` and ``next_after`` lead
        to the next), its entity mention links and any forget that erased it; with ``as_of``, those written by then."""
        params = _params(as_of=as_of, after=after or None, limit=limit)
        return await self._read("GET", f"/v1/memories/{_segment(memory_id)}/history", MemoryHistoryResponse, params=params)

    async def working_memory(self, *, as_of: AsOf = None) -> WorkingMemoryResponse:
        return await self._read("GET", "/v1/working-memory", WorkingMemoryResponse, params=_params(as_of=as_of))

    # -- edges, reverts, tenants -------------------------------------------------------------------

    async def link(
        self, source: str, target: str, edge_type: str = "RELATED", *, weight: float = 1.0, edge_id: str | None = None, properties: dict[str, Any] | None = None, **options: Unpack[WriteOptions]
    ) -> WriteResponse:
        body = LinkRequest(source=source, target=target, edge_type=edge_type, weight=weight, edge_id=edge_id, properties=properties or {})
        return await self._write("POST", "/v1/edges", body, options, WriteResponse)

    async def unlink(self, edge_id: str, *, reason: str = "", **options: Unpack[WriteOptions]) -> WriteResponse:
        return await self._write("DELETE", f"/v1/edges/{_segment(edge_id)}", ReasonRequest(reason), options, WriteResponse)

    async def undo_namespace(self, prefix: str, *, reason: str = "", **options: Unpack[WriteOptions]) -> WriteResponse:
        return await self._write("POST", "/v1/edges/undo-namespace", UndoNamespaceRequest(prefix, reason), options, WriteResponse)

    async def revert(self, correlation_id: str, /, *, force: bool = False, dry_run: bool = False, **options: Unpack[WriteOptions]) -> WriteResponse:
        """Undo everything done under ``correlation_id`` (see :meth:`correlation`); ``dry_run``: say what it would do."""
        return await self._write("POST", "/v1/reverts", RevertRequest(correlation_id, force, dry_run), options, WriteResponse)

    async def drop_tenant(self, confirm: str, *, reason: str = "", **options: Unpack[WriteOptions]) -> WriteResponse:
        """Drop the key's tenant (``confirm`` repeats its name) after writing an export backup."""
        return await self._write("POST", "/v1/admin/drop-tenant", DropTenantRequest(confirm, reason), options, WriteResponse)

    async def forget_subject(self, subject: str, *, reason: str = "", **options: Unpack[WriteOptions]) -> WriteResponse:
        """Forget ``subject`` in the key's tenant (admin scope): its keys destroyed, its memories erased everywhere."""
        return await self._write("POST", f"/v1/subjects/{_segment(subject)}/forget", ForgetRequest(reason), options, WriteResponse)

    # -- recall and the graph ----------------------------------------------------------------------

    async def recall(self, query: str, *, as_of: AsOf = None, **options: Unpack[RecallOptions]) -> RecallResult:
        """Fused recall; ``options`` are :class:`~mnemolog.api.schemas.RecallRequest`'s fields (limit, filters, min_position, strategy, …).

        ``strategy``: ``hybrid`` (the server's default: memories and entities),
        ``knowledge-only`` (memories) or ``graph-only`` (entities and the
        memories they lead to). Each hit has a ``kind``: ``memory`` (``memory``
        set) or ``entity`` (``entity`` card, relation ``path``, ``path_score``);
        the answer's ``strategy`` is the one used and ``strategy_reason`` says
        why when it differs.
        """
        return await self._read("POST", "/v1/recall", RecallResult, json=_recall_body(query, as_of, options))

    async def search(self, query: str, *, as_of: AsOf = None, **options: Unpack[RecallOptions]) -> SearchResponse:
        """The raw channels, unfused; ``options`` as for :meth:`recall` (but ``rrf_k`` and ``propagation``, which belong to fusion)."""
        return await self._read("POST", "/v1/search", SearchResponse, json=_recall_body(query, as_of, options))

    async def neighbors(self, node: str, *, depth: int = 1, direction: Direction = "both", types: Sequence[str] | None = None, as_of: AsOf = None) -> NeighborsResponse:
        params = _params(node=node, depth=depth, direction=direction, type=types, as_of=as_of)
        return await self._read("GET", "/v1/graph/neighbors", NeighborsResponse, params=params)

    async def subgraph(
        self, seeds: Sequence[str], *, depth: int = 2, direction: Direction = "both", edge_types: Sequence[str] | None = None, max_nodes: int = 200, max_edges: int = 1000, as_of: AsOf = None
    ) -> SubgraphResponse:
        body = SubgraphRequest(seeds=list(seeds), depth=depth, direction=direction, edge_types=list(edge_types) if edge_types else None, max_nodes=max_nodes, max_edges=max_edges, as_of=as_of)
        return await self._read("POST", "/v1/graph/subgraph", SubgraphResponse, json=body)

    async def graph_stats(self, *, as_of: AsOf = None) -> GraphStatsResponse:
        return await self._read("GET", "/v1/graph/stats", GraphStatsResponse, params=_params(as_of=as_of))

    async def neighborhood(
        self, node: str, *, kind: Literal["memory", "entity"] = "memory", depth: int = 1, direction: Direction = "both", types: Sequence[str] | None = None,
        limit: int = 50, offset: int = 0, as_of: AsOf = None,
    ) -> NeighborhoodPage:
        """One page of a memory's (graph edges) or an entity's (relations) neighbourhood: labelled nodes and the edges between them."""
        params = _params(node=node, kind=kind, depth=depth, direction=direction, type=types, limit=limit, offset=offset, as_of=as_of)
        return await self._read("GET", "/v1/graph/neighborhood", NeighborhoodPage, params=params)

    # -- the explorer's reads --------------------------------------------------------------------

    async def whoami(self) -> WhoAmIResponse:
        """The key's tenant, id, name and scopes."""
        return await self._read("GET", "/v1/whoami", WhoAmIResponse)

    async def timeline(self, *, limit: int = 500) -> TimelineResponse:
        """The tenant's commits (position, time, correlation id), evenly sampled beyond ``limit``."""
        return await self._read("GET", "/v1/timeline", TimelineResponse, params=_params(limit=limit))

    async def correlation_events(self, correlation_id: str, *, after: int = 0, limit: int = 200) -> CorrelationPage:
        """A page of what one correlation wrote, and the reverts of it."""
        return await self._read("GET", "/v1/correlation", CorrelationPage, params=_params(correlation_id=correlation_id, after=after, limit=limit))

    # -- the log ---------------------------------------------------------------------------------

    async def list_events(
        self, *, after: int = 0, limit: int = 100, types: Sequence[str] | None = None, stream: str | None = None, correlation_id: str | None = None, as_of: AsOf = None
    ) -> EventsPage:
        """A page of the tenant's events after ``after``; ``as_of``: only those recorded by then (a position or a time)."""
        params = _params(after=after, limit=limit, type=types, stream=stream, correlation_id=correlation_id, as_of=as_of)
        return await self._read("GET", "/v1/events", EventsPage, params=params)

    async def stream_events(self, *, after: int = 0, idle_timeout: float = 60.0) -> AsyncIterator[EventView]:
        """The tenant's events after ``after`` as they are written: an endless async iterator.

        After a dropped connection, or one the server ended (it ends none while
        it runs and the key reads), it reconnects with ``Last-Event-ID`` set to
        the last event it yielded, so no event is lost or repeated; an event
        cut off mid-way is never yielded. ``max_retries`` connections in a row
        lost before an event raise the last one's ``aiohttp.ClientConnectionError``;
        an answer that is no event stream (a proxy's page) or an event that does
        not parse raises :class:`UnexpectedResponseError`. ``idle_timeout``: how
        long a silent connection is trusted (the server sends a keep-alive every 15 s).
        """
        last = after
        failures = 0
        timeout = aiohttp.ClientTimeout(total=None, sock_read=idle_timeout)
        while True:
            try:
                headers = {**self._headers, "Last-Event-ID": str(last), "Accept": "text/event-stream"}
                async with self._open().get(self.base_url + _STREAM, headers=headers, timeout=timeout) as response:
                    if response.status >= 400:
                        raise error_for(response.status, await response.read())
                    if response.content_type != "text/event-stream":
                        raise unexpected_response("GET", _STREAM, response.status, response.content_type, await response.content.read(200), "not an event stream")
                    async for event_id, data in _server_sent_events(response.content):
                        event = _event(event_id, data, response)
                        last, failures = event.position, 0
                        yield event
                raise aiohttp.ServerDisconnectedError(f"the server ended the event stream after position {last}")
            except _RETRYABLE as exc:
                failures += 1
                if failures > self.max_retries:
                    raise transport_error("GET", self.base_url + _STREAM, failures, exc, idle_timeout) from exc
                await asyncio.sleep(0.05 * 2**failures)

    async def digest(self) -> DigestResponse:
        return await self._read("GET", "/v1/digest", DigestResponse)

    async def verify(self, *, start: int | None = None, end: int | None = None, against: str | Sequence[str] | None = None) -> VerifyResult:
        """Walk the hash chain from ``start`` to ``end``, optionally against kept digests (``POSITION:HASH``)."""
        return await self._read("GET", "/v1/verify", VerifyResult, params=_params(**{"from": start, "to": end, "against": against}))

    async def organizer_status(self, *, min_position: int | None = None, wait: str | float | None = None) -> OrganizerStatusResponse:
        """The organizer's state; with ``wait`` (seconds, at most 30, or ``"5s"``), once it has processed ``min_position``."""
        if isinstance(wait, (int, float)):
            wait = f"{round(wait * 1000)}ms"  # the server takes 3 decimals of seconds at most: 1/3 is 333ms
        return await self._read("GET", "/v1/organizer/status", OrganizerStatusResponse, params=_params(min_position=min_position, wait=wait))

    # -- entities and tags -----------------------------------------------------------------------

    async def put_entity(self, entity_id: str, entity: EntityIn | dict[str, Any], **options: Unpack[WriteOptions]) -> WriteResponse:
        """Create or replace an entity (``data["created"]`` says which)."""
        return await self._write("PUT", f"/v1/entities/{_segment(entity_id)}", entity, options, WriteResponse)

    async def delete_entity(self, entity_id: str, *, reason: str = "", **options: Unpack[WriteOptions]) -> WriteResponse:
        return await self._write("DELETE", f"/v1/entities/{_segment(entity_id)}", RemoveEntityRequest(reason), options, WriteResponse)

    async def put_tags(self, entity_id: str, tags: Sequence[str], **options: Unpack[WriteOptions]) -> WriteResponse:
        return await self._write("PUT", f"/v1/entities/{_segment(entity_id)}/tags", TagsIn(list(tags)), options, WriteResponse)

    async def set_relation(self, entity_id: str, target_id: str, relation_type: str, *, weight: float = 1.0, **options: Unpack[WriteOptions]) -> WriteResponse:
        body = RelationIn(target_id=target_id, relation_type=relation_type, weight=weight)
        return await self._write("POST", f"/v1/entities/{_segment(entity_id)}/relations", body, options, WriteResponse)

    async def remove_relation(self, entity_id: str, target_id: str, relation_type: str, *, reason: str = "", **options: Unpack[WriteOptions]) -> WriteResponse:
        body = RelationKey(target_id=target_id, relation_type=relation_type, reason=reason)
        return await self._write("DELETE", f"/v1/entities/{_segment(entity_id)}/relations", body, options, WriteResponse)

    async def get_entity(self, entity_id: str, *, as_of: AsOf = None) -> EntityResponse:
        return await self._read("GET", f"/v1/entities/{_segment(entity_id)}", EntityResponse, params=_params(as_of=as_of))

    async def find_entities(self, q: str = "", *, tag: str | None = None, entity_type: str | None = None, limit: int = 50, as_of: AsOf = None) -> EntitiesResponse:
        params = _params(q=q or None, tag=tag, type=entity_type, limit=limit, as_of=as_of)
        return await self._read("GET", "/v1/entities", EntitiesResponse, params=params)

    async def related(self, entity_id: str, *, depth: int = 1, direction: Direction = "out", types: Sequence[str] | None = None, limit: int = 100, as_of: AsOf = None) -> RelatedResponse:
        params = _params(depth=depth, direction=direction, type=types, limit=limit, as_of=as_of)
        return await self._read("GET", f"/v1/entities/{_segment(entity_id)}/related", RelatedResponse, params=params)

    async def find_tags(self, prefix: str = "", *, limit: int = 100, as_of: AsOf = None) -> TagsResponse:
        return await self._read("GET", "/v1/tags", TagsResponse, params=_params(prefix=prefix or None, limit=limit, as_of=as_of))

    # -- documents and linking -------------------------------------------------------------------

    async def import_documents(
        self,
        files: Upload | Iterable[Upload],
        *,
        collection: str | None = None,
        doc_type: str | None = None,
        lang: str | None = None,
        source_url: str | None = None,
        model: str | None = None,
        doc_id: str | None = None,
        **options: Unpack[WriteOptions],
    ) -> ImportReport:
        """Upload text, Markdown or PDF files; the import report (a bad file is reported, not raised).

        A file is a path, a file object with a ``name``, or ``(filename,
        bytes or file object)``; its document id is ``doc_id`` (one file
        only), else its file name.
        """
        one = isinstance(files, (str, os.PathLike, tuple, io.IOBase)) or hasattr(files, "read")
        items: list[Upload] = [files] if one else list(files)  # type: ignore[list-item, arg-type]
        uploads = [_upload(item) for item in items]
        meta = {"collection": collection, "doc_type": doc_type, "lang": lang, "source_url": source_url, "model": model, "doc_id": doc_id}

        def form() -> aiohttp.FormData:
            data = aiohttp.FormData()
            for name, content in uploads:
                data.add_field("file", content, filename=name, content_type="application/octet-stream")
            for key, value in meta.items():
                if value is not None:
                    data.add_field(key, value)
            return data

        return await self._write("POST", "/v1/import/documents", None, options, ImportReport, form=form)

    async def relink(
        self, *, commit: bool = False, include_tags: bool = False, max_alias_document_frequency: float | None = None, preview: int = 20, **options: Unpack[WriteOptions]
    ) -> RelinkReport:
        """Re-run the entity linker over chunks and memories: a dry run, or with ``commit`` a write (write scope)."""
        body = RelinkRequest(commit=commit, include_tags=include_tags, max_alias_document_frequency=max_alias_document_frequency, preview=preview)
        return await self._write("POST", "/v1/graph/relink", body, options, RelinkReport)

    async def document_links(
        self, *, doc_id: str | None = None, collection: str | None = None, min_shared: int = 1, limit: int = 20, max_entity_documents: int = 200, as_of: AsOf = None
    ) -> DocumentLinksResponse:
        body = DocumentLinksRequest(doc_id=doc_id, collection=collection, min_shared=min_shared, limit=limit, max_entity_documents=max_entity_documents, as_of=as_of)
        return await self._read("POST", "/v1/graph/document-links", DocumentLinksResponse, json=body)

    async def relation_cards(self, question: str, *, limit: int = 10, as_of: AsOf = None) -> RelationCardsResponse:
        return await self._read("POST", "/v1/relations", RelationCardsResponse, json=RelationsRequest(question=question, limit=limit, as_of=as_of))


def _answer(method: str, path: str, response: aiohttp.ClientResponse, body: bytes, kind: Any) -> Any:
    """A success answer decoded as ``kind`` (plain JSON when None); an :class:`UnexpectedResponseError` when it is not that JSON."""
    if not body:
        if kind is None:
            return None
        problem = "an empty body"
    else:
        try:
            return msgspec.json.decode(body, type=Any if kind is None else kind)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            problem = str(exc)
    raise unexpected_response(method.upper(), path, response.status, response.content_type, body, problem)


#: The live tail's path.
_STREAM = "/v1/events/stream"


async def _server_sent_events(content: aiohttp.StreamReader) -> AsyncIterator[tuple[bytes | None, bytes]]:
    """Each whole event of a server-sent event stream, as its ``id`` and its ``data`` lines joined; comments and ``event`` lines skipped."""
    event_id, data = None, []
    async for raw in content:
        line = raw.rstrip(b"\r\n")
        if line.startswith(b"id:"):
            event_id = line[3:].strip()
        elif line.startswith(b"data:"):
            data.append(line[5:].lstrip(b" "))
        elif not line and data:
            yield event_id, b"\n".join(data)
            event_id, data = None, []


def _event(event_id: bytes | None, data: bytes, response: aiohttp.ClientResponse) -> EventView:
    """One event of the live tail, its position its ``id``'s; an :class:`UnexpectedResponseError` when either does not parse."""
    try:
        event = msgspec.json.decode(data, type=EventView)
        if event_id is not None and int(event_id) != event.position:
            raise ValueError(f"its id {event_id.decode(errors='replace')!r} is not its position {event.position}")
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as exc:
        raise unexpected_response("GET", _STREAM, response.status, response.content_type, data, f"an event that does not parse: {exc}") from None
    return event


def _segment(value: str) -> str:
    """An id as one path segment: ``/``, ``?``, ``#``, ``%`` and spaces percent-encoded."""
    return quote(value, safe="")


def _recall_body(query: str, as_of: AsOf, options: RecallOptions) -> dict[str, Any]:
    return {"query": query, **options, **({"as_of": as_of} if as_of is not None else {})}


def _upload(item: Upload) -> tuple[str, bytes]:
    """``(filename, bytes)`` of one file to upload, read now so that a retry can send it again."""
    if isinstance(item, tuple):
        name, content = item
        return name, content if isinstance(content, bytes) else content.read()
    if isinstance(item, (str, os.PathLike)):
        path = Path(item)
        return path.name, path.read_bytes()
    name = Path(getattr(item, "name", "") or "document").name
    return name, item.read()
