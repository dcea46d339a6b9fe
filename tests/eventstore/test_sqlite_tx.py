"""``immediate``: a write transaction whose COMMIT fails reports why, and leaves the connection usable."""

from __future__ import annotations

import sqlite3

import pytest

from mnemolog.eventstore.sqlite_tx import immediate


class _CommitFails:
    """A connection whose COMMIT fails: after SQLite ended the transaction itself (a full disk), or leaving it open (busy)."""

    def __init__(self, conn: sqlite3.Connection, *, ends_it: bool):
        self.conn, self.ends_it = conn, ends_it

    @property
    def in_transaction(self) -> bool:
        return self.conn.in_transaction

    def execute(self, sql: str, *args):
        if sql == "COMMIT":
            if self.ends_it:
                self.conn.execute("ROLLBACK")
                raise sqlite3.OperationalError("database or disk is full")
            raise sqlite3.OperationalError("database is locked")
        return self.conn.execute(sql, *args)


@pytest.mark.parametrize("ends_it, message", [(True, "disk is full"), (False, "locked")])
def test_a_failed_commit_is_the_error_raised_and_the_connection_takes_the_next_transaction(tmp_path, ends_it, message):
    conn = sqlite3.connect(tmp_path / "t.db", isolation_level=None)
    conn.execute("CREATE TABLE t (x)")
    failing = _CommitFails(conn, ends_it=ends_it)
    with pytest.raises(sqlite3.OperationalError, match=message):
        with immediate(failing):
            failing.execute("INSERT INTO t VALUES (1)")
    assert not conn.in_transaction
    with immediate(conn):
        conn.execute("INSERT INTO t VALUES (2)")
    assert conn.execute("SELECT x FROM t").fetchall() == [(2,)]
