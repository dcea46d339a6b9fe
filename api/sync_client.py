"""The blocking client for scripts and notebooks: :class:`Client`, with :class:`MnemologClient`'s methods.

Its methods are generated from the async client's, not written twice: each
runs the async method on a private event loop in a daemon thread and waits
for it. ``stream_events`` becomes a plain iterator and ``correlation`` a
plain context manager.

>>> with Client("http://127.0.0.1:8765", api_key="mlk_…") as client:
...     written = client.add_memories({"memory": "I moved to Lisbon"})
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import threading
import uuid
from typing import Any, Iterator

from .client import MnemologClient, _correlation


class _Loop:
    """An event loop running in a daemon thread of its own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="mnemolog-client", daemon=True)
        self.thread.start()

    def run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


class Client:
    """A blocking client; ``with Client(url, api_key=...) as client`` and every :class:`MnemologClient` method."""

    def __init__(self, base_url: str, **options: Any) -> None:
        self._loop = _Loop()
        self._async = MnemologClient(base_url, **options)
        self.base_url = self._async.base_url

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._loop is not None:
            self._loop.run(self._async.close())
            self._loop.stop()
            self._loop = None

    @contextlib.contextmanager
    def correlation(self, correlation_id: str | None = None) -> Iterator[str]:
        """Every write inside runs under one correlation id (yielded), so that ``revert`` undoes them together."""
        token = _correlation.set(correlation_id or f"client-{uuid.uuid4().hex}")  # in this thread: each call carries it to the loop
        try:
            yield _correlation.get()  # type: ignore[misc]
        finally:
            _correlation.reset(token)

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        cid = _correlation.get()

        async def call() -> Any:
            if cid is not None:
                _correlation.set(cid)  # the task runs in a copy of the loop's context
            return await getattr(self._async, name)(*args, **kwargs)

        return self._loop.run(call())

    def _iterate(self, name: str, *args: Any, **kwargs: Any) -> Iterator[Any]:
        iterator = getattr(self._async, name)(*args, **kwargs)
        try:
            while True:
                try:
                    yield self._loop.run(iterator.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            if self._loop is not None:
                self._loop.run(iterator.aclose())


def _blocking(name: str, method: Any) -> Any:
    if inspect.isasyncgenfunction(method):

        @functools.wraps(method)
        def iterate(self: Client, *args: Any, **kwargs: Any) -> Iterator[Any]:
            return self._iterate(name, *args, **kwargs)

        return iterate

    @functools.wraps(method)
    def call(self: Client, *args: Any, **kwargs: Any) -> Any:
        return self._call(name, *args, **kwargs)

    return call


for _name, _method in vars(MnemologClient).items():
    if not _name.startswith("_") and _name not in vars(Client) and (inspect.iscoroutinefunction(_method) or inspect.isasyncgenfunction(_method)):
        setattr(Client, _name, _blocking(_name, _method))
