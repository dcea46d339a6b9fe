"""``Writer``: the one owner of a data directory's single writer.

Every write of a :class:`mnemolog.projections.service.MemoryService` goes
through its writer: commands (``service.run``), tenant drops, projection
catch-ups asked for by the server, the organizer's decisions. The writer is
one thread and one re-entrant lock, the event store's own write lock
(:attr:`mnemolog.eventstore.EventStore.write_lock`, which every append takes),
so that one lock serializes the process's writes whether they come through
the service or straight to the store:

- ``writer.call(fn, ...)`` runs ``fn`` now, on the calling thread, holding
  the lock (synchronous callers: the CLI, tests, code already writing);
- ``writer.submit(fn, ...)`` (it is a :class:`concurrent.futures.Executor`,
  so ``loop.run_in_executor(writer, ...)`` works) runs ``fn`` on the writer
  thread, holding the lock, so that the event loop never waits for a write;
- ``with writer.lock:`` holds the writer for a few steps that must not
  interleave with another write.

The lock is re-entrant, so a write that calls another (``drop_tenant``
committing through ``run``, a command appending) never deadlocks.
"""

from __future__ import annotations

import threading
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any, Callable, TypeVar

T = TypeVar("T")


class Writer(Executor):
    def __init__(self, lock: threading.RLock | None = None, name: str = "mnemolog-write"):
        self.lock = lock if lock is not None else threading.RLock()
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)

    def call(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run ``fn`` on the calling thread as the single writer."""
        with self.lock:
            return fn(*args, **kwargs)

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future:
        """Run ``fn`` on the writer thread as the single writer."""
        return self._thread.submit(self.call, fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._thread.shutdown(wait=wait, cancel_futures=cancel_futures)
