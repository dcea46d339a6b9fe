"""The blocking client for scripts and notebooks: :class:`Client`, with :class:`MnemologClient`'s methods.

Its methods are not written twice: :mod:`mnemolog.api.sync_methods` is
generated from the async client's (``python -m mnemolog.tools.sync_client_gen
--write``; a test fails when it is out of date), each one call of
:meth:`Client._call`, which runs the async method on a private event loop in a
daemon thread and waits for it. ``stream_events`` becomes a plain iterator and
``correlation`` a plain context manager. Being real methods, they are seen by
editors and type checkers, with the same response Structs as the async client.

>>> with Client("http://127.0.0.1:8765", api_key="mlk_…") as client:
...     written = client.add_memories(MemoryIn(memory="I moved to Lisbon"))
...     client.get_memory(written.memory_ids[0]).memory
'I moved to Lisbon'
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import uuid
from typing import Any, Iterator

from .client import MnemologClient, _correlation
from .sync_methods import SyncMethods

__all__ = ["Client"]

#: What forked children inherited from their parent's clients (see :meth:`Client._after_fork`): kept, so that no
#: collection closes a connection the parent still uses.
_INHERITED: list[tuple[Any, Any]] = []


class _Loop:
    """An event loop running in a daemon thread of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="mnemolog-client", daemon=True)
        self.thread.start()

    def run(self, coroutine: Any) -> Any:
        """Run ``coroutine`` on the loop and wait for its result.

        An interrupt of the wait (Ctrl-C, a notebook's "interrupt") cancels the
        coroutine and is raised once it has stopped: no request goes on behind
        the caller's back, and a stream interrupted in ``next()`` closes.

        An interrupt may land anywhere, scheduling included: the callback that
        stops the coroutine is queued after the one that starts it, if that
        one was queued at all, and runs on the loop's thread after it; so the
        task is cancelled if it was made, or the coroutine closed if it never
        will be, and either way the wait ends.
        """
        started: list[asyncio.Task] = []
        finished = threading.Event()

        def start() -> None:
            task = self.loop.create_task(coroutine)
            task.add_done_callback(lambda _: finished.set())
            started.append(task)

        def stop() -> None:
            if started:
                started[0].cancel()  # done already: no-op, and ``finished`` is set
            else:
                coroutine.close()
                finished.set()

        try:
            self.loop.call_soon_threadsafe(start)
            finished.wait()
        except BaseException:
            self.loop.call_soon_threadsafe(stop)
            finished.wait()
            raise
        return started[0].result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


class Client(SyncMethods):
    """A blocking client; ``with Client(url, api_key=...) as client`` and every :class:`MnemologClient` method.

    It takes :class:`MnemologClient`'s options (``api_key``, ``tenant``,
    ``timeout``, ``max_retries``). It works in a thread that runs an event loop
    (a notebook's cells run in one), for its calls run on a loop of its own;
    but it blocks that thread's loop while it waits, so a server served by that
    same loop (a test's ``aiohttp_server``) cannot answer it and the call times
    out: there, ``await`` :class:`MnemologClient` instead.
    """

    def __init__(self, base_url: str, **options: Any) -> None:
        self._async = MnemologClient(base_url, **options)  # first: options it refuses leave no loop running
        self._loop: _Loop | None = _Loop()
        self.base_url = self._async.base_url
        self._options = options
        self._pid = os.getpid()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._loop is not None:
            loop = self._running()  # in a forked child, its own: the parent's connections stay open for the parent
            loop.run(self._async.close())
            loop.stop()
            self._loop = None

    @contextlib.contextmanager
    def correlation(self, correlation_id: str | None = None) -> Iterator[str]:
        """Every write inside runs under one correlation id (yielded), so that ``revert`` undoes them together."""
        cid = correlation_id or f"client-{uuid.uuid4().hex}"
        token = _correlation.set(cid)  # in this thread: each call carries it to the loop
        try:
            yield cid
        finally:
            _correlation.reset(token)

    def _running(self) -> _Loop:
        if self._loop is None:
            raise RuntimeError("the client is closed")
        if self._pid != os.getpid():
            self._after_fork()
        return self._loop

    def _after_fork(self) -> None:
        """A forked child (a ``multiprocessing`` worker, a pre-forking server) inherits the client without the thread
        that ran its loop, and with its parent's connections: a call waited for ever. The child makes a loop and
        connections of its own; the inherited ones are kept aside, never used nor closed (the connections are still
        the parent's)."""
        _INHERITED.append((self._async, self._loop))
        self._async = MnemologClient(self.base_url, **self._options)
        self._loop = _Loop()
        self._pid = os.getpid()

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        cid = _correlation.get()

        async def call() -> Any:
            if cid is not None:
                _correlation.set(cid)  # the task runs in a copy of the loop's context
            return await getattr(self._async, name)(*args, **kwargs)

        return self._running().run(call())

    def _iterate(self, name: str, *args: Any, **kwargs: Any) -> Iterator[Any]:
        loop = self._running()
        iterator = getattr(self._async, name)(*args, **kwargs)
        try:
            while True:
                try:
                    yield loop.run(iterator.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            if self._loop is not None:
                self._loop.run(iterator.aclose())
