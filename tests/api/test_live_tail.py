"""The live tail over real HTTP (``GET /v1/events/stream``): new events, resumption, keep-alives, a tail from
beyond the head, and a server shutting down ending its tails at once, idle or held by a client that takes nothing."""

from __future__ import annotations

import asyncio
import socket
import time

import aiohttp
import pytest

from mnemolog.api import routes_log


async def _sse_frames(response, count: int, timeout: float = 10.0) -> list[dict[str, str]]:
    """Read ``count`` SSE frames (comments skipped) as dicts of their fields."""
    frames, current = [], {}

    async def read():
        nonlocal current
        while len(frames) < count:
            line = (await response.content.readline()).decode()
            if not line:
                raise AssertionError("the stream ended")
            line = line.rstrip("\n")
            if line == "":
                if current:
                    frames.append(current)
                current = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(": ")
                current[name] = value

    await asyncio.wait_for(read(), timeout)
    return frames


async def test_sse_tail_receives_new_events_and_resumes_with_last_event_id(api, client):
    await client.add_memories({"memory": "before the tail"})
    async with api.raw.get("/v1/events/stream") as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/event-stream")
        [old] = await _sse_frames(response, 1)
        assert old["id"] == "1" and old["event"] == "MemoryAdded"
        written = await client.add_memories({"memory": "written while tailing"})
        [new] = await _sse_frames(response, 1)
        assert int(new["id"]) == written.positions[0]
        assert '"written while tailing"' in new["data"]
    # Two more writes while disconnected; resume after the last id seen.
    missed = await client.add_memories(memories=[{"memory": "missed one"}, {"memory": "missed two"}])
    async with api.raw.get("/v1/events/stream", headers={"Last-Event-ID": new["id"]}) as response:
        frames = await _sse_frames(response, 2)
        assert [int(f["id"]) for f in frames] == missed.positions


async def test_an_sse_tail_opened_at_the_head_answers_at_once(api, client):
    """Nothing to send yet: the status and headers came with the first event or keep-alive, 15 s later."""
    written = await client.add_memories({"memory": "the head"})
    started = time.monotonic()
    async with api.raw.get("/v1/events/stream", params={"after": str(written.positions[-1])}, timeout=aiohttp.ClientTimeout(sock_read=3)) as response:
        assert response.status == 200 and time.monotonic() - started < 3
        assert await asyncio.wait_for(response.content.readline(), 3) == b": tailing\n"
        later = await client.add_memories({"memory": "after the head"})
        [frame] = await _sse_frames(response, 1)
        assert int(frame["id"]) == later.positions[0]


async def test_sse_tail_through_the_client(api, client):
    written = await client.add_memories(memories=[{"memory": "tail a"}, {"memory": "tail b"}])
    received = []
    async for event in client.stream_events(after=written.positions[0]):
        received.append(event)
        break
    assert received[0]["position"] == written.positions[1]
    assert received[0]["payload"]["content"]["memory"] == "tail b"


async def test_sse_tail_survives_keep_alives(api, client, monkeypatch):
    monkeypatch.setattr(routes_log, "KEEPALIVE_SECONDS", 0.1, raising=False)
    async with api.raw.get("/v1/events/stream") as response:
        assert response.status == 200
        comments = 0
        deadline = time.monotonic() + 5
        while comments < 3 and time.monotonic() < deadline:
            line = await asyncio.wait_for(response.content.readline(), 5)
            comments += line.startswith(b": keep-alive")
        assert comments == 3
        written = await client.add_memories({"memory": "after a quiet spell"})
        [frame] = await _sse_frames(response, 1)
        assert int(frame["id"]) == written.positions[0]


@pytest.mark.parametrize("resume", ["query", "Last-Event-ID"])
async def test_sse_tail_from_beyond_the_head_sends_only_later_events(api, client, resume):
    await client.add_memories({"memory": "already there"})
    ahead = 4
    if resume == "query":
        request = api.raw.get("/v1/events/stream", params={"after": str(ahead)})
    else:
        request = api.raw.get("/v1/events/stream", headers={"Last-Event-ID": str(ahead)})
    async with request as response:
        assert response.status == 200
        written = await client.add_memories(memories=[{"memory": f"later {i}"} for i in range(5)])
        assert written.positions == [2, 3, 4, 5, 6]
        frames = await _sse_frames(response, 2)
        assert [int(f["id"]) for f in frames] == [5, 6]
        assert '"later 3"' in frames[0]["data"]


async def test_sse_bad_last_event_id_is_400(api):
    response = await api.raw.get("/v1/events/stream", headers={"Last-Event-ID": "abc"})
    assert response.status == 400
    assert (await response.json())["error"]["field"] == "Last-Event-ID"


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


def _replaced(*_args, **_kwargs):
    from mnemolog.projections.runner import ProjectionsReplaced

    raise ProjectionsReplaced("/data/projections.db was deleted or replaced while this process ran: restart it")


async def _raw_answer(api, path: str) -> bytes:
    """Everything the server sends for a GET of ``path`` until it closes the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", api.server.port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{api.server.port}\r\nConnection: close\r\n\r\n".encode())
    try:
        return await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()


async def test_a_tail_whose_first_reads_fail_is_answered_their_error(api, client, monkeypatch):
    """The tail read the forgets after its 200 and headers had left: a 503 went out as a second answer inside the stream."""
    await client.add_memories({"memory": "before the tail"})
    monkeypatch.setattr(routes_log.ErasedMemories, "of", _replaced)
    answer = await _raw_answer(api, "/v1/events/stream")
    assert answer.startswith(b"HTTP/1.1 503") and answer.count(b"HTTP/1.1") == 1
    assert b'"code":"unavailable"' in answer and b"projections.db" in answer


async def test_a_tail_failing_midway_ends_its_stream_and_a_resumption_is_answered_the_error(api, client, monkeypatch):
    written = await client.add_memories({"memory": "sent before the failure"})
    tail = routes_log.live_events

    async def failing(*args, **kwargs):
        async for part in tail(*args, **kwargs):
            yield part
            _replaced()

    monkeypatch.setattr(routes_log, "live_events", failing)
    answer = await _raw_answer(api, "/v1/events/stream")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and answer.count(b"HTTP/1.1") == 1  # no second answer inside the body
    assert b"sent before the failure" in body and body.endswith(b"0\r\n\r\n")  # the event, then the stream's proper end
    monkeypatch.setattr(routes_log.ErasedMemories, "of", _replaced)
    async with api.raw.get("/v1/events/stream", headers={"Last-Event-ID": str(written.positions[0])}) as response:
        assert response.status == 503 and (await response.json())["error"]["code"] == "unavailable"
