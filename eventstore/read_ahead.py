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

import queue
import threading
from contextlib import AbstractContextManager
from typing import Callable, Iterator

from sqlalchemy import Connection

from .log_reads import EventPage

DEPTH = 2  # pages fetched and waiting: enough to keep the fetching thread busy, little memory held
_DONE = object()


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
    waiting: queue.Queue = queue.Queue(maxsize=DEPTH)
    stop = threading.Event()

    def hand_over(item: object) -> bool:
        while not stop.is_set():
            try:
                waiting.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        at = page.last
        try:
            with connect() as own:
                while not stop.is_set():
                    fetched = fetch(own, at)
                    if not hand_over((at, fetched)) or fetched.count < rows:
                        break
                    at = fetched.last
        except BaseException as exc:  # raised again in the caller's thread
            hand_over(exc)
        hand_over(_DONE)

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
        stop.set()
        thread.join()
