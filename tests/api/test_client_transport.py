"""The clients against what is not a mnemolog server answering well: a proxy's own pages, a dead port, a silent peer, a stream that stops.

Each failure is raised as a client error that says what happened (and is
documented by the client), never as a decoding error of the client's own
parsing or an endless retry.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import threading

import aiohttp
import msgspec
import pytest
from aiohttp import web

import mnemolog
from mnemolog.api.client import ApiError, ConnectionFailedError, MnemologClient, RequestTimeoutError, UnexpectedResponseError
from mnemolog.api.schemas import MemoryIn


async def serving(aiohttp_server, **routes) -> str:
    """A bare aiohttp server answering GET ``path`` with ``handler`` for each ``path=handler``; its base URL."""
    app = web.Application()
    for path, handler in routes.items():
        app.router.add_get(path, handler)
    server = await aiohttp_server(app)
    return str(server.make_url("")).rstrip("/")


async def test_a_success_answer_that_is_not_the_apis_json_is_an_unexpected_response_error(aiohttp_server):
    async def login_page(request: web.Request) -> web.Response:  # a proxy's own page, with a 200
        return web.Response(text="<html>sign in to the proxy</html>", content_type="text/html")

    async def other_json(request: web.Request) -> web.Response:  # JSON, but not the operation's answer
        return web.json_response({"state": "up"})

    async def empty(request: web.Request) -> web.Response:
        return web.Response(status=200)

    url = await serving(aiohttp_server, **{"/v1/digest": login_page, "/health": other_json, "/v1/capabilities": empty})
    async with MnemologClient(url) as client:
        with pytest.raises(UnexpectedResponseError) as page:
            await client.digest()
        assert isinstance(page.value, ApiError) and page.value.status == 200 and page.value.code == "unexpected_response"
        assert "GET /v1/digest" in page.value.message and "text/html" in page.value.message and "sign in to the proxy" in page.value.message
        with pytest.raises(UnexpectedResponseError) as mismatched:
            await client.health()
        assert "status" in mismatched.value.message or "required" in mismatched.value.message
        with pytest.raises(UnexpectedResponseError) as nothing:
            await client.capabilities()
        assert "empty" in nothing.value.message


def event_json(position: int) -> bytes:
    return msgspec.json.encode(
        {
            "position": position, "event_id": f"e{position}", "stream_id": "memory-m", "stream_version": position, "type": "MemoryAdded",
            "schema_version": 1, "tenant": "default", "recorded_at": "2026-01-01T00:00:00Z", "payload": {}, "metadata": {},
        }
    )


async def test_an_event_stream_answered_by_a_page_raises_at_once_instead_of_reconnecting_for_ever(aiohttp_server):
    asked: list[str] = []

    async def page(request: web.Request) -> web.Response:
        asked.append(request.path)
        return web.Response(text="<html>sign in to the proxy</html>", content_type="text/html")

    url = await serving(aiohttp_server, **{"/v1/events/stream": page})
    async with MnemologClient(url) as client:
        stream = client.stream_events()
        with pytest.raises(UnexpectedResponseError) as caught:
            await asyncio.wait_for(stream.__anext__(), 30)
    assert asked == ["/v1/events/stream"] and "text/html" in caught.value.message


async def test_a_stream_the_server_keeps_ending_is_resumed_then_raised_after_the_retries(aiohttp_server):
    """A stream that ends cleanly is resumed from its last event, as a dropped one; ending again and again without an event is a failure."""
    resumed_from: list[str | None] = []

    async def ending(request: web.Request) -> web.StreamResponse:
        resumed_from.append(request.headers.get("Last-Event-ID"))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        if len(resumed_from) == 1:
            await response.write(b"id: 7\nevent: MemoryAdded\ndata: " + event_json(7) + b"\n\n")
        await response.write_eof()
        return response

    url = await serving(aiohttp_server, **{"/v1/events/stream": ending})
    async with MnemologClient(url, max_retries=2) as client:
        stream = client.stream_events(after=6)
        assert (await asyncio.wait_for(stream.__anext__(), 30)).position == 7
        with pytest.raises(aiohttp.ClientConnectionError) as caught:
            await asyncio.wait_for(stream.__anext__(), 30)
    assert resumed_from == ["6", "7", "7"] and "ended" in str(caught.value)


@pytest.mark.parametrize("event", [b"id: seven\ndata: " + event_json(7), b"id: 7\ndata: {not json", b'id: 7\ndata: {"position": 7}'])
async def test_an_event_that_does_not_parse_is_an_unexpected_response_error(aiohttp_server, event):
    async def broken(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(event + b"\n\n")
        return response

    url = await serving(aiohttp_server, **{"/v1/events/stream": broken})
    async with MnemologClient(url) as client:
        with pytest.raises(UnexpectedResponseError) as caught:
            await asyncio.wait_for(client.stream_events().__anext__(), 30)
    assert "/v1/events/stream" in caught.value.message


def closed_port_url() -> str:
    """A loopback URL nothing listens on: connecting is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


async def test_a_refused_connection_raises_a_connection_error_naming_the_request_and_its_attempts():
    url = closed_port_url()
    async with MnemologClient(url, max_retries=1) as client:
        with pytest.raises(ConnectionFailedError) as caught:
            await client.add_memories(MemoryIn(memory="nowhere to go"))
    assert isinstance(caught.value, aiohttp.ClientConnectionError)
    assert f"POST {url}/v1/memories" in str(caught.value) and "2 attempts" in str(caught.value)


async def test_a_silent_server_raises_a_timeout_naming_the_request_the_timeout_and_its_attempts():
    held: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:  # takes the request, never answers
        held.append(writer)
        await reader.read(65536)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        async with MnemologClient(url, timeout=0.2, max_retries=1) as client:
            with pytest.raises(RequestTimeoutError) as caught:
                await client.digest()
    finally:
        for writer in held:
            writer.close()
        server.close()
    assert isinstance(caught.value, TimeoutError) and str(caught.value) == f"GET {url}/v1/digest: no answer within 0.2 s (2 attempts)"


def test_the_blocking_client_raises_the_same_errors():
    with mnemolog.Client(closed_port_url(), max_retries=0) as client:
        with pytest.raises(ConnectionFailedError, match="GET .*/v1/digest.*1 attempt"):
            client.digest()


class ThreadedServer:
    """A bare aiohttp app served by an event loop in a thread of its own: for the blocking client, which the test's thread runs."""

    def __init__(self, app: web.Application):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.url = asyncio.run_coroutine_threadsafe(self._start(app), self.loop).result(30)

    async def _start(self, app: web.Application) -> str:
        self.runner = web.AppRunner(app, handler_cancellation=True)  # a handler ends when its client hangs up
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        return f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="Ctrl-C reaches the main thread only")
def test_ctrl_c_in_a_blocking_stream_stops_its_connection_and_raises_the_interrupt():
    """A notebook's "interrupt" while the blocking client waits for an event: the interrupt is raised, the tail's request ends."""
    ended = threading.Event()

    async def tail(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # the caller is waiting in next() by now
        try:
            await asyncio.sleep(3600)
        finally:
            ended.set()
        return response

    async def digest(request: web.Request) -> web.Response:
        return web.json_response({"position": 1, "hash": "h", "digest": "1:h"})

    app = web.Application()
    app.router.add_get("/v1/events/stream", tail)
    app.router.add_get("/v1/digest", digest)
    server = ThreadedServer(app)
    # SIGINT raises KeyboardInterrupt, as in a terminal's Python, even in a runner started in the background (which ignores it).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with mnemolog.Client(server.url) as client:
            with pytest.raises(KeyboardInterrupt):
                for _ in client.stream_events():
                    pass
            assert ended.wait(30), "the interrupted tail's connection was left open"
            assert client.digest().position == 1
    finally:
        signal.signal(signal.SIGINT, previous)
        server.close()


async def test_the_blocking_client_works_in_a_thread_running_an_event_loop():
    """As in a notebook, whose cells run in the kernel's event loop: the blocking client runs its own loop, in a thread of its own."""

    async def digest(request: web.Request) -> web.Response:
        return web.json_response({"position": 3, "hash": "h", "digest": "3:h"})

    app = web.Application()
    app.router.add_get("/v1/digest", digest)
    server = ThreadedServer(app)
    try:
        asyncio.get_running_loop()  # this test's own loop runs in this thread
        with mnemolog.Client(server.url) as client:
            assert client.digest().position == 3
    finally:
        server.close()


@pytest.mark.parametrize("queued", [True, False], ids=["after-the-start-was-queued", "before"])
def test_an_interrupt_while_the_blocking_client_schedules_a_call_stops_it_all_the_same(queued):
    """Ctrl-C landing inside the hand-over to the client's loop (after the call was queued, or before) was raised
    at once, the call left running behind the caller's back: a stream then failed to close ("aclose(): asynchronous
    generator is already running"). The call is cancelled, or never starts, before the interrupt is raised."""
    from mnemolog.api.sync_client import _Loop

    runner = _Loop()
    began, cancelled = threading.Event(), threading.Event()

    async def call() -> None:
        began.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    original = runner.loop.call_soon_threadsafe
    calls = []

    def interrupted(callback, *args, **kwargs):
        calls.append(callback)
        if len(calls) == 1:  # the hand-over of the call itself
            if queued:
                original(callback, *args, **kwargs)
            raise KeyboardInterrupt
        return original(callback, *args, **kwargs)

    runner.loop.call_soon_threadsafe = interrupted  # type: ignore[method-assign]
    coroutine = call()
    try:
        with pytest.raises(KeyboardInterrupt):
            runner.run(coroutine)
        assert cancelled.is_set() == began.is_set()  # if it began, it was stopped before run() returned
        assert coroutine.cr_frame is None  # done either way: nothing left to run
        assert runner.run(asyncio.sleep(0, "next")) == "next"  # the loop goes on serving
    finally:
        runner.stop()
