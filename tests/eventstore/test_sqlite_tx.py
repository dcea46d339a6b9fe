"""``immediate``: a write transaction whose COMMIT fails reports why, and leaves the connection usable."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from mnemolog.api.auth import KeyStore as ApiKeys
from mnemolog.eventstore import EventStore
from mnemolog.eventstore.keystore import KeyStore as DataKeys
from mnemolog.eventstore.sqlite_tx import enter_wal, immediate
from mnemolog.projections.runner import connect


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


def _open_log(path):
    EventStore.open(path.parent).close()


def _open_data_keys(path):
    DataKeys(path)._connection().close()


def _open_projections(path):
    connect(path).close()


def _open_api_keys(path):
    ApiKeys(path)


@pytest.mark.parametrize(
    "name, open_it",
    [("events.db", _open_log), ("keys.db", _open_data_keys), ("projections.db", _open_projections), ("auth.db", _open_api_keys)],
)
def test_a_file_another_connection_is_writing_in_rollback_mode_opens_once_it_commits(tmp_path, name, open_it):
    """Leaving rollback mode while another connection holds the write lock failed at once with "database is locked",
    without waiting: processes opening a fresh data directory together failed when one was already writing."""
    path = tmp_path / name
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE held (x)")
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("INSERT INTO held VALUES (1)")
    releaser = threading.Timer(0.3, lambda: holder.execute("COMMIT"))
    releaser.start()
    try:
        open_it(path)
    finally:
        releaser.join()
        holder.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_entering_wal_gives_up_at_its_deadline_with_the_lock_error(tmp_path):
    holder = sqlite3.connect(tmp_path / "t.db", isolation_level=None)
    holder.execute("CREATE TABLE held (x)")
    holder.execute("BEGIN IMMEDIATE")
    conn = sqlite3.connect(tmp_path / "t.db", isolation_level=None)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        enter_wal(conn, busy_timeout=0.2)
    holder.execute("COMMIT")
    enter_wal(conn, busy_timeout=0.2)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
