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
from typing import Iterator


@contextlib.contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` … ``COMMIT``, or a rollback on any error (see the module docstring)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
