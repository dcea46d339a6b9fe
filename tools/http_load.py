"""A cheap HTTP/1.1 client for the benches: prebuilt requests over keep-alive connections.

The benches run the server and its load on the same cores, so every
microsecond the client spends is taken from the server it measures.
aiohttp's client spent about 0.5 ms of CPU per request (a request object,
headers, a cookie jar, a response object), a tenth of the server's own work
on a 10,000-memory recall; this one writes bytes built before the clock
starts and reads each answer by its ``Content-Length`` (which every answer
of the API carries), in the manner of ``wrk``.

It speaks just enough HTTP for that: no redirects, no chunked answers
(refused loudly), one request in flight per connection.
"""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit

import msgspec


def post(url: str, path: str, body: object, headers: dict[str, str] | None = None) -> bytes:
    """The bytes of a ``POST`` of ``body`` (as JSON) to ``path`` of the server at ``url``."""
    data = msgspec.json.encode(body)
    host = urlsplit(url).netloc
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}", "Content-Type: application/json", f"Content-Length: {len(data)}"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


def get(url: str, path: str) -> bytes:
    """The bytes of a ``GET`` of ``path`` from the server at ``url``."""
    return f"GET {path} HTTP/1.1\r\nHost: {urlsplit(url).netloc}\r\n\r\n".encode()


class _Answers(asyncio.Protocol):
    """Collects one answer at a time: status and body, delimited by Content-Length."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future | None = None
        self.status = 0
        self.body_at = -1
        self.end = -1

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if self.waiter is not None:
            self._answer()

    def connection_lost(self, exc) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc or ConnectionError("the server closed the connection"))

    def _answer(self) -> None:
        if self.end < 0:
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = bytes(self.buffer[:head_end]).lower()
            at = head.find(b"\r\ncontent-length:")
            if at < 0:
                self.waiter.set_exception(ValueError("an answer without Content-Length: " + head[:200].decode("latin-1")))
                return
            stop = head.find(b"\r\n", at + 2)
            self.status = int(head[9:12])
            self.body_at = head_end + 4
            self.end = self.body_at + int(head[at + 17 : stop if stop >= 0 else len(head)])
        if len(self.buffer) >= self.end:
            answer = (self.status, bytes(self.buffer[self.body_at : self.end]))
            del self.buffer[: self.end]
            self.end = -1
            waiter, self.waiter = self.waiter, None
            waiter.set_result(answer)


class Connection:
    """One keep-alive connection: ``await conn.send(raw)`` returns ``(status, body)``."""

    def __init__(self, transport: asyncio.Transport, answers: _Answers):
        self._transport = transport
        self._answers = answers

    @classmethod
    async def open(cls, url: str) -> "Connection":
        parts = urlsplit(url)
        transport, answers = await asyncio.get_running_loop().create_connection(_Answers, parts.hostname, parts.port or 80)
        return cls(transport, answers)

    async def send(self, raw: bytes) -> tuple[int, bytes]:
        self._answers.waiter = asyncio.get_running_loop().create_future()
        self._transport.write(raw)
        return await self._answers.waiter

    def close(self) -> None:
        self._transport.close()


def _checked(answer: tuple[int, bytes]) -> bytes:
    status, body = answer
    if status >= 400:
        raise RuntimeError(f"the server answered {status}: {body[:300].decode('utf-8', 'replace')}")
    return body


async def latencies(url: str, requests: list[bytes], warmup: int = 5) -> list[float]:
    """Seconds per request, sent one after another on one connection (after ``warmup`` unmeasured ones)."""
    conn = await Connection.open(url)
    try:
        for raw in requests[:warmup]:
            _checked(await conn.send(raw))
        samples = []
        for raw in requests:
            began = time.perf_counter()
            _checked(await conn.send(raw))
            samples.append(time.perf_counter() - began)
        return samples
    finally:
        conn.close()


async def throughput(url: str, requests: list[bytes], clients: int, duration: float) -> float:
    """Successful requests per second from ``clients`` connections, each sending its next request as soon as it has an answer."""
    return await throughput_across([(url, requests)], clients, duration)


async def throughput_across(targets: list[tuple[str, list[bytes]]], clients: int, duration: float) -> float:
    """:func:`throughput` against several servers at once: ``targets`` holds each
    server's URL and its prebuilt requests, and the clients are dealt to the
    servers in turn (16 clients over two servers: 8 each). The total of
    successful requests per second."""
    conns = [await Connection.open(targets[k % len(targets)][0]) for k in range(clients)]
    done = 0
    stop_at = time.monotonic() + duration

    async def client(k: int, conn: Connection) -> None:
        nonlocal done
        requests = targets[k % len(targets)][1]
        i = k
        while time.monotonic() < stop_at:
            status, _ = await conn.send(requests[i % len(requests)])
            done += status == 200
            i += clients

    try:
        began = time.monotonic()
        await asyncio.gather(*(client(k, conn) for k, conn in enumerate(conns)))
        return done / (time.monotonic() - began)
    finally:
        for conn in conns:
            conn.close()


async def send_all(url: str, requests: list[bytes]) -> float:
    """Seconds to send ``requests`` one after another on one connection, each answered with success."""
    conn = await Connection.open(url)
    try:
        began = time.perf_counter()
        for raw in requests:
            _checked(await conn.send(raw))
        return time.perf_counter() - began
    finally:
        conn.close()


async def index_caught_up(url: str, processes: int, timeout: float = 300.0) -> bool:
    """Wait until ``/health`` reports no vector-index lag from every server process (False on timeout).

    Each process keeps its own index and the kernel picks the process per
    connection, so each look opens a new connection, and ``4 * processes``
    looks in a row must say 0.
    """
    raw = get(url, "/health")
    deadline = time.monotonic() + timeout
    zeros = 0
    while time.monotonic() < deadline:
        conn = await Connection.open(url)
        try:
            lag = msgspec.json.decode(_checked(await conn.send(raw))).get("vector_index_lag", 0)
        finally:
            conn.close()
        zeros = zeros + 1 if lag == 0 else 0
        if zeros >= 4 * processes:
            return True
        await asyncio.sleep(0.05 if lag == 0 else 0.25)
    return False
