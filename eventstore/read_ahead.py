"""The log's pages read one step ahead: the database builds the next page while the caller decodes this one.

A page's JSON is built by SQLite inside ``sqlite3_step``, which Python's
``sqlite3`` runs with the GIL released, so a second thread can fetch page
N+1 while the caller decodes page N and uses its events: a long read (a
rebuild, an export, a replay) takes about the longer of the two instead of
their sum. The work done is the same; it is spread over two cores.

The thread reads exactly what the caller would have read itself: the same
statement page after page on a connection of its own, each statement seeing
every commit before it. It stays at most :data:`DEPTH` pages ahead and
stops as soon as the caller does (a ``break``, an exception, the generator
collected). A read that fits in one page never starts a thread.
"""

from __future__ import annotations

import threading
from collections import deque
from contextlib import AbstractContextManager
from typing import Callable, Iterator

from sqlalchemy import Connection

from .log_reads import EventPage

DEPTH = 2  # pages fetched and waiting: enough to keep the fetching thread busy, little memory held
_DONE = object()


class _HandOver:
    """At most ``depth`` items passed from the reading thread to the caller.

    A ``put`` waits while the hand-over is full and a ``get`` while it is
    empty, both on one condition, so neither side polls; ``close`` (the
    caller stopping) empties it and wakes a waiting ``put``, which then
    returns False and never waits again.
    """

    def __init__(self, depth: int) -> None:
        self._items: deque = deque()
        self._depth = depth
        self._closed = False
        self._changed = threading.Condition()

    @property
    def closed(self) -> bool:
        return self._closed

    def put(self, item: object) -> bool:
        """Hand ``item`` over, waiting for room; False once the caller has stopped."""
        with self._changed:
            while len(self._items) >= self._depth and not self._closed:
                self._changed.wait()
            if self._closed:
                return False
            self._items.append(item)
            self._changed.notify()
            return True

    def get(self) -> object:
        with self._changed:
            while not self._items:
                self._changed.wait()
            item = self._items.popleft()
            self._changed.notify()
            return item

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._items.clear()
            self._changed.notify_all()


def pages_ahead(
    fetch: Callable[[Connection, int], EventPage], connect: Callable[[], AbstractContextManager[Connection]], after: int, rows: int
) -> Iterator[tuple[int, EventPage]]:
    """``(after, page)`` for each page from ``after`` on, until a page holds fewer than ``rows`` rows.

    ``fetch(conn, after)`` reads the page after a position; ``page.last``
    is where the next one starts. The first page is read here; the rest
    by a thread that runs ahead of the caller.
    """
    with connect() as conn:
        page = fetch(conn, after)
    yield after, page
    if page.count < rows:
        return
    waiting = _HandOver(DEPTH)

    def read() -> None:
        at = page.last
        try:
            with connect() as own:
                while not waiting.closed:
                    fetched = fetch(own, at)
                    if not waiting.put((at, fetched)) or fetched.count < rows:
                        break
                    at = fetched.last
        except BaseException as exc:  # raised again in the caller's thread
            waiting.put(exc)
        waiting.put(_DONE)

    thread = threading.Thread(target=read, name="mnemolog-log-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            item = waiting.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        waiting.close()
        thread.join()
