"""The blocking ``mnemolog.Client`` against a real ``mnemolog serve``: the same methods, correlation, the stream, errors.

Its methods are generated source (:mod:`mnemolog.api.sync_methods`); a test
fails when that module is out of date with the async client.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import mnemolog
from mnemolog.api import sync_methods
from mnemolog.api.client import MnemologClient, NotFoundError
from mnemolog.api.schemas import MemoryIn, WriteResponse
from mnemolog.api.schemas_responses import DigestResponse, EventView, MemoryView
from mnemolog.tools import sync_client_gen
from tests.api.client_support import CuttingProxy, live_server


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    with live_server(tmp_path_factory.mktemp("sync")) as server:
        yield server


def test_the_generated_methods_are_up_to_date_with_the_async_client():
    assert Path(sync_methods.__file__).read_text() == sync_client_gen.render(), "run: python -m mnemolog.tools.sync_client_gen --write"
    assert sync_client_gen.main(["--check"]) == 0


def test_the_sync_client_has_every_async_method_with_its_parameters_and_result():
    public = {name for name, fn in vars(MnemologClient).items() if not name.startswith("_") and (inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn))}
    assert len(public) >= 40
    for name in public:
        method = getattr(mnemolog.Client, name)
        assert not inspect.iscoroutinefunction(method) and not inspect.isasyncgenfunction(method), name
        blocking, original = inspect.signature(method), inspect.signature(getattr(MnemologClient, name))
        assert blocking.parameters == original.parameters, name
        expected = original.return_annotation.replace("AsyncIterator[", "Iterator[") if name == "stream_events" else original.return_annotation
        assert blocking.return_annotation == expected or name == "close", name


def test_a_client_refused_its_options_leaves_no_thread_behind():
    """Each refused construction left a running event loop in a thread of its own, which nothing could stop."""
    import threading

    before = set(threading.enumerate())
    for _ in range(3):
        with pytest.raises(TypeError):
            mnemolog.Client("http://127.0.0.1:9", api_key="k", timout=5)  # a misspelt option
    assert [t.name for t in set(threading.enumerate()) - before] == []


def test_sync_client_writes_reads_reverts_and_streams(live):
    with mnemolog.Client(live.url, api_key=live.key) as client:
        tip = client.digest()
        assert isinstance(tip, DigestResponse)
        before = tip.position
        with client.correlation() as cid:
            one = client.add_memories(MemoryIn(memory="a notebook note"))
            two = client.add_memories({"memory": "another notebook note"})
        assert isinstance(one, WriteResponse) and one.correlation_id == two.correlation_id == cid
        note = client.get_memory(one.memory_ids[0])
        assert isinstance(note, MemoryView) and note.memory == "a notebook note"
        with pytest.raises(NotFoundError):
            client.get_memory(one.memory_ids[0], as_of=before)
        stream = client.stream_events(after=before)
        events = [next(stream) for _ in range(2)]
        assert all(isinstance(e, EventView) for e in events) and [e.position for e in events] == [before + 1, before + 2]
        stream.close()
        client.revert(cid)
        assert client.get_memory(two.memory_ids[0]).status == "deleted"


def test_a_client_made_before_a_fork_works_in_the_child_and_still_in_the_parent(live):
    """The child inherited the client without the thread that ran its loop: its first call waited for ever."""
    import multiprocessing

    with mnemolog.Client(live.url, api_key=live.key) as client:
        mine = client.add_memories(MemoryIn(memory="written before the fork")).memory_ids[0]
        results = multiprocessing.get_context("fork").Queue()
        child = multiprocessing.get_context("fork").Process(target=_in_child, args=(client, mine, results))
        child.start()
        child.join(60)
        if child.is_alive():
            child.kill()
        assert child.exitcode == 0 and results.get(timeout=5) == "written before the fork"
        assert client.get_memory(mine).memory == "written before the fork"  # the parent's connections were left to it


def _in_child(client, memory_id, results) -> None:
    note = client.get_memory(memory_id).memory
    client.close()
    results.put(note)


async def test_sync_client_retries_a_dropped_write_once(live):
    import asyncio

    async with CuttingProxy(live.url) as proxy:
        def write() -> WriteResponse:
            with mnemolog.Client(proxy.url, api_key=live.key) as client:
                return client.add_memories(MemoryIn(memory="blocking and retried"))

        written = await asyncio.get_running_loop().run_in_executor(None, write)
    assert written.replayed is True and proxy.connections == 2


def test_the_blocking_stream_is_documented_as_the_plain_iterator_it_is():
    doc = inspect.getdoc(mnemolog.Client.stream_events)
    assert "iterator" in doc and "async" not in doc.lower()
