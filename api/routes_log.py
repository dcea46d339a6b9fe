"""The log over HTTP: paginated events, a live SSE tail, digest and verify for auditors."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Annotated

import msgspec
from aiohttp import web
from msgspec import Meta

from mnemolog.eventstore import Digest
from mnemolog.eventstore.erased import ErasedMemories, live_events, plaintext_kept
from mnemolog.eventstore.events import encoder
from mnemolog.eventstore.schema import whole_number

from . import keys, operations
from .errors import ApiError, start_stream
from .routing import MAX_POSITION, RouteTable, authenticate, check_as_of, key_check, one_header, param, query_int, read
from .schemas_responses import DigestResponse, EventsPage, EventView, VerifyResult

routes = RouteTable()

MAX_PAGE = 1000
FROM_POSITION = Annotated[int, Meta(ge=1, le=MAX_POSITION)]
AGAINST_RE = r"^(?:[0-9]{1,18}:[0-9a-f]{64})?$"  # what Digest.parse takes (empty: none)
KEEPALIVE_SECONDS = 15.0  # a comment line on a quiet tail, so that proxies and clients keep the connection
KEY_CHECK_SECONDS = 1.0  # how often a quiet tail checks its key: a revoked key's tail ends within it, with no event to wait for


@routes.get(
    "/v1/events",
    scope="read",
    summary="The tenant's events, paginated by position",
    query=(
        ("after", "position"),
        ("limit", "1..1000"),
        ("type", "event type, repeatable"),
        ("stream", "stream id"),
        ("correlation_id", "correlation id"),
        ("as_of", "position or ISO-8601 time: only events recorded by then"),
    ),
    response=EventsPage,
)
async def list_events(request: web.Request) -> dict:
    _, tenant = authenticate(request, "read")
    after = query_int(request, "after", 0)
    limit = query_int(request, "limit", 100, low=1, high=MAX_PAGE)
    types = request.query.getall("type", []) or None
    svc = request.app[keys.service_key]
    body = await read(
        request,
        operations.events_page,
        svc,
        tenant,
        after,
        limit,
        types=types,
        stream=request.query.get("stream"),
        correlation_id=request.query.get("correlation_id"),
        as_of=check_as_of(request.query.get("as_of")),
    )
    return body


@routes.get(
    "/v1/events/stream",
    scope="read",
    summary="A live tail of the tenant's events as server-sent events (resumable with Last-Event-ID)",
    query=(("after", "position"),),
    response=EventView,  # each event's data
    media_type="text/event-stream",
)
async def stream_events(request: web.Request) -> web.StreamResponse:
    _, tenant = authenticate(request, "read")
    last = one_header(request, "Last-Event-ID")
    if last is not None:
        after = whole_number(last.strip())
        if after is None or after > MAX_POSITION:
            raise ApiError(400, "bad_request", "Last-Event-ID must be a position", "Last-Event-ID")
    else:
        after = query_int(request, "after", 0)
    store = request.app[keys.service_key].store
    # Read before the status is sent: a store that cannot answer is a 503 the client sees as one.
    erased = await read(request, ErasedMemories.of, store, tenant)  # the forgets so far; later ones before each part is sent
    after = await read(request, operations.since_drop, request.app[keys.service_key], tenant, after)  # from the tenant's last drop on
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})  # Cache-Control: no-store, as every answer (app.no_store)
    await start_stream(request, response)
    # The headers leave with the first bytes of the body: a tail opened at the head sent nothing until its first
    # event or keep-alive, 15 s, and a client waiting for the answer's status could take it for a hung server.
    await response.write(b": tailing\n\n")
    subscription = live_events(store, after, erased, tenant=tenant)
    closing = asyncio.ensure_future(request.app[keys.closing_key].wait())  # the server shutting down ends the tail at once
    writing = False

    def cut(_: asyncio.Future) -> None:
        if writing and request.transport is not None:  # a client that takes nothing holds the write: the shutdown does not wait for it
            request.transport.abort()

    closing.add_done_callback(cut)
    # The pending read is kept across key checks and keep-alives: cancelling it (as wait_for
    # does on a timeout) would close the subscription's generator for good.
    pending: asyncio.Future | None = None
    clock = asyncio.get_running_loop().time
    sent_at = clock()
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(subscription.__anext__())
            done, _ = await asyncio.wait({pending, closing}, timeout=min(KEY_CHECK_SECONDS, KEEPALIVE_SECONDS), return_when=asyncio.FIRST_COMPLETED)
            if closing.done() or not still_allowed(request):
                break  # shutting down, or the key was revoked meanwhile: nothing more is sent, and a reconnection is answered 401
            if pending not in done:
                if clock() - sent_at >= KEEPALIVE_SECONDS:
                    writing = True
                    await response.write(b": keep-alive\n\n")
                    writing, sent_at = False, clock()
                continue
            part, pending = pending.result(), None
            writing = True
            await response.write(b"".join(_frame(recorded) for recorded in part))
            writing, sent_at = False, clock()
    except (ConnectionError, asyncio.CancelledError):
        pass  # the client went away (or the server stopped waiting for the tail)
    finally:
        for waiting in (pending, closing):
            if waiting is not None:
                waiting.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await waiting
        await subscription.aclose()
    return response


def _frame(recorded) -> bytes:
    """One event as a server-sent event: its position as the id a client resumes from, its type, its view."""
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (recorded.position, recorded.type.encode(), encoder.encode(recorded.to_dict()))


def still_allowed(request: web.Request) -> bool:
    """Whether the tail's key still reads: checked before each part of events it sends, as each request is, and every
    :data:`KEY_CHECK_SECONDS` while it is quiet."""
    check = key_check(request)
    try:
        if check is not None:
            check()
    except ApiError:
        return False
    return True


@routes.get("/v1/digest", scope="read", summary="The log's tip: position and hash, to keep outside the store", response=DigestResponse)
async def digest(request: web.Request) -> DigestResponse:
    authenticate(request, "read")
    store = request.app[keys.service_key].store
    tip = await read(request, store.digest)
    return DigestResponse(position=tip.position, hash=tip.hash, digest=str(tip))


@routes.get(
    "/v1/verify",
    scope="admin",
    summary="Walk the hash chain (optionally against a kept digest)",
    query=(
        param("from", "the first position to check (default 1)", FROM_POSITION),
        param("to", "the last position to check (default: the head)", FROM_POSITION),
        param("against", "a kept digest, POSITION:HASH (repeatable)", Annotated[str, Meta(pattern=AGAINST_RE)]),
    ),
    response=VerifyResult,
)
async def verify(request: web.Request) -> VerifyResult:
    _, tenant = authenticate(request, "admin")
    digests = []
    for against in request.query.getall("against", []):  # repeatable: the first difference lies between them
        if not against:
            continue
        try:
            digests.append(Digest.parse(against))
        except ValueError as exc:
            raise ApiError(422, "invalid", str(exc), "against") from None
    start = query_int(request, "from", 1, low=1)
    end = query_int(request, "to", None, low=1)
    if end is not None and end < start:
        raise ApiError(422, "invalid", "to must not be before from", "to")
    store = request.app[keys.service_key].store
    head = await read(request, store.last_position)
    if start > 1 and start > head:  # an empty range is not a broken chain; the log may reach it later (409, like a stale read)
        raise ApiError(409, "beyond_head", f"from is beyond the log's head ({head})", "from")
    result = await read(request, store.verify, start, end, against=digests or None)
    if result.ok:  # the events that keep text the tenant's forgets erased in plaintext: an audit's note (the chain is the whole log's)
        result = msgspec.structs.replace(result, plaintext_kept=await read(request, plaintext_kept, store, start, end, tenant=tenant))
    return result
