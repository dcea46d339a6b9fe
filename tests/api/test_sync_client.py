"""The blocking ``mnemolog.Client`` against a real ``mnemolog serve``: the same methods, correlation, the stream, errors."""

from __future__ import annotations

import inspect

import pytest

import mnemolog
from mnemolog.api.client import MnemologClient, NotFoundError
from mnemolog.api.schemas import MemoryIn, WriteResponse
from tests.api.client_support import CuttingProxy, live_server


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    with live_server(tmp_path_factory.mktemp("sync")) as server:
        yield server


def test_the_sync_client_has_every_async_method_with_its_signature():
    public = {name for name, fn in vars(MnemologClient).items() if not name.startswith("_") and (inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn))}
    for name in public:
        method = getattr(mnemolog.Client, name)
        assert not inspect.iscoroutinefunction(method), name
        assert inspect.signature(method) == inspect.signature(getattr(MnemologClient, name)), name


def test_sync_client_writes_reads_reverts_and_streams(live):
    with mnemolog.Client(live.url, api_key=live.key) as client:
        before = client.digest()["position"]
        with client.correlation() as cid:
            one = client.add_memories(MemoryIn(memory="a notebook note"))
            two = client.add_memories({"memory": "another notebook note"})
        assert isinstance(one, WriteResponse) and one.correlation_id == two.correlation_id == cid
        assert client.get_memory(one.memory_ids[0])["memory"] == "a notebook note"
        with pytest.raises(NotFoundError):
            client.get_memory(one.memory_ids[0], as_of=before)
        stream = client.stream_events(after=before)
        assert [next(stream)["position"] for _ in range(2)] == [before + 1, before + 2]
        stream.close()
        client.revert(cid)
        assert client.get_memory(two.memory_ids[0])["status"] == "deleted"


async def test_sync_client_retries_a_dropped_write_once(live):
    import asyncio

    async with CuttingProxy(live.url) as proxy:
        def write() -> WriteResponse:
            with mnemolog.Client(proxy.url, api_key=live.key) as client:
                return client.add_memories(MemoryIn(memory="blocking and retried"))

        written = await asyncio.get_running_loop().run_in_executor(None, write)
    assert written.replayed is True and proxy.connections == 2
