"""A server shutting down ends its live tails at once, idle or held by a client that takes nothing."""

from __future__ import annotations

import asyncio
import socket
import time

from .test_reads import _sse_frames


async def test_the_server_shutting_down_ends_its_live_tails_at_once(api, client):
    """An idle tail sends nothing a client answers: it held a shutdown for the whole grace period (a minute)."""
    await client.add_memories({"memory": "before the shutdown"})
    async with api.raw.get("/v1/events/stream") as response:
        [frame] = await _sse_frames(response, 1)
        assert frame["event"] == "MemoryAdded"
        started = time.monotonic()
        await asyncio.wait_for(api.server.close(), 20)
        assert time.monotonic() - started < 20
        assert await asyncio.wait_for(response.content.read(), 5) == b""  # the tail ended: the answer is whole


async def test_the_server_shutting_down_ends_a_tail_whose_client_takes_nothing(api, client):
    """The tail's write waited for a client that reads nothing: the shutdown waited its whole grace period, twice."""
    await client.add_memories(memories=[{"memory": f"bulky {i} " + "x" * 8000} for i in range(800)])
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)  # a client that takes nothing: the server's write waits
    sock.connect(("127.0.0.1", api.server.port))
    sock.setblocking(False)
    reader, writer = await asyncio.open_connection(sock=sock)
    writer.write(f"GET /v1/events/stream HTTP/1.1\r\nHost: 127.0.0.1:{api.server.port}\r\n\r\n".encode())
    assert (await reader.readline()).startswith(b"HTTP/1.1 200")
    await asyncio.sleep(1)
    await asyncio.wait_for(api.server.close(), 20)
    writer.close()
