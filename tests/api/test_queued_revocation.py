"""A key revoked while its request waits for the writer or a reader: the request is refused, nothing written or read.

The key is checked when the request arrives, and the request then queues
for the single writer (behind another write) or for the reader pool (behind
other reads). Revocation takes effect at once, so a request that had not
started when its key was revoked is answered 401, as one sent afterwards.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from mnemolog.api import keys
from mnemolog.api.client import ApiError


@pytest.fixture
async def secured(start):
    return await start(auth=True, read_threads=1)


def queued_on(monkeypatch, executor) -> asyncio.Event:
    """An event set once the next job is handed to ``executor`` (the job waits there behind what runs)."""
    queued = asyncio.Event()
    submit = executor.submit

    def spy(fn, /, *args, **kwargs):
        future = submit(fn, *args, **kwargs)
        queued.set()
        return future

    monkeypatch.setattr(executor, "submit", spy)
    return queued


async def revoked_while_queued(monkeypatch, executor, call, revoke) -> asyncio.Future:
    """``call()`` (a coroutine) started while ``executor`` is at work on something else, and ``revoke()`` run once
    its job waits there; what it comes to, once ``executor`` is free again."""
    release = threading.Event()
    busy = executor.submit(release.wait)
    queued = queued_on(monkeypatch, executor)
    try:
        pending = asyncio.ensure_future(call())
        await asyncio.wait_for(queued.wait(), 20)
        assert revoke()
    finally:
        release.set()
        await asyncio.wrap_future(busy)
    return pending


async def test_a_write_queued_behind_another_is_refused_when_its_key_is_revoked_meanwhile(secured, monkeypatch):
    secret, record = secured.keystore.create("acme", ["read", "write"], name="queued writer")
    client = secured.client(api_key=secret)
    reader = secured.client(api_key=secured.key("acme", "read"))
    await client.add_memories({"memory": "written while the key is good"})
    tip = (await reader.digest())["position"]
    pending = await revoked_while_queued(
        monkeypatch, secured.service.writer, lambda: client.add_memories({"memory": "queued when the key was revoked"}), lambda: secured.keystore.revoke(record.key_id)
    )
    with pytest.raises(ApiError) as err:
        await pending
    assert (err.value.status, err.value.code, err.value.field) == (401, "unauthorized", "Authorization")
    assert (await reader.digest())["position"] == tip
    assert await secured.event_count(reader) == tip


async def test_a_read_queued_behind_another_is_refused_when_its_key_is_revoked_meanwhile(secured, monkeypatch):
    writer = secured.client(api_key=secured.key("acme"))
    written = await writer.add_memories({"memory": "the tenant's private note"})
    secret, record = secured.keystore.create("acme", ["read"], name="queued reader")
    client = secured.client(api_key=secret)
    pending = await revoked_while_queued(  # the one reader thread is at work on another read
        monkeypatch, secured.app[keys.readers_key], lambda: client.get_memory(written.memory_ids[0]), lambda: secured.keystore.revoke(record.key_id)
    )
    with pytest.raises(ApiError) as err:
        await pending
    assert (err.value.status, err.value.code) == (401, "unauthorized")


async def test_an_mcp_write_queued_behind_another_is_refused_when_its_key_is_revoked_meanwhile(settings_for, monkeypatch):
    """The MCP front checks each call's key as the HTTP API does, and so again as the write it queued starts."""
    from types import SimpleNamespace

    from mnemolog.api import operations
    from mnemolog.api.errors import ApiError as Refused
    from mnemolog.api.mcp_server import TOOLS_BY_NAME, McpFront

    front = await asyncio.to_thread(McpFront.open, settings_for(auth=True), allow_writes=True)
    try:
        secret, record = front.keystore.create("acme", ["read", "write"], name="queued agent")
        ctx = SimpleNamespace(request=SimpleNamespace(headers={"Authorization": f"Bearer {secret}"}), session=None)
        tool, raw = TOOLS_BY_NAME["add_memory"], {"memory": {"memory": "queued when the key was revoked"}}
        caller = front.caller(ctx, tool.scope)
        tip = front.service.store.last_position()
        pending = await revoked_while_queued(
            monkeypatch, front.service.writer, lambda: tool.run(front, caller, operations.arguments(raw, tool.args), raw), lambda: front.keystore.revoke(record.key_id)
        )
        with pytest.raises(Refused) as err:
            await pending
        assert (err.value.status, err.value.field) == (401, "api_key")
        assert front.service.store.last_position() == tip
    finally:
        await asyncio.to_thread(front.close)
