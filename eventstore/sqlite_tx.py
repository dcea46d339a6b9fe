"""One write transaction on a ``sqlite3`` connection of its own (autocommit mode, ``isolation_level=None``).

The key store, the projections and the organizer's checkpoint each write
through such a connection. ``BEGIN IMMEDIATE`` takes the write lock at once;
on any error the transaction is rolled back, unless SQLite has already done
so itself: a ``COMMIT`` refused because the disk is full ends the
transaction, and a ``ROLLBACK`` then would fail with "no transaction is
active" and hide the error that says why. A ``COMMIT`` that leaves it open
(still busy) is rolled back, so that the connection's next ``BEGIN`` works.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from typing import Iterator, Protocol

from .errors import is_lock_contention, name_database


@contextlib.contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` … ``COMMIT``, or a rollback on any error (see the module docstring). A write lock
    still held elsewhere past the busy timeout names the database file, for a message that says which."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        if is_lock_contention(exc):
            name_database(exc, _file_of(conn))
        raise
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _file_of(conn: sqlite3.Connection) -> str:
    """The file of the connection's main database (empty for one in memory)."""
    return next((row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main"), "")


#: The pragma :func:`enter_wal` runs; :func:`eventstore.dialects.sqlite_pragmas` lists it first.
WAL_PRAGMA = "PRAGMA journal_mode=WAL"


class _Executes(Protocol):
    def execute(self, sql: str, /) -> object: ...


def enter_wal(conn: _Executes, busy_timeout: float = 30.0) -> None:
    """Put the connection's file in WAL mode, waiting up to ``busy_timeout`` seconds for other connections.

    Leaving rollback mode needs the file's exclusive lock, and while another
    connection holds its write lock SQLite refuses at once ("database is
    locked") rather than call the busy handler, which could deadlock. So
    processes opening a fresh file together, one already writing its tables,
    would fail; this retries until the deadline. A file already in WAL mode
    answers at once.
    """
    deadline = time.monotonic() + busy_timeout
    pause = 0.001
    while True:
        try:
            conn.execute(WAL_PRAGMA)
            return
        except sqlite3.OperationalError as exc:
            if not is_lock_contention(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
