"""Where the API keys' rows are kept on SQLite: ``auth.db`` in the data directory (see :class:`~mnemolog.api.auth.KeyStore`)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from mnemolog.eventstore.errors import naming_database
from mnemolog.eventstore.sqlite_tx import enter_wal

#: The columns of a key's row, in the order every store reads and writes them (the digest after the id).
COLUMNS = ("key_id", "digest", "tenant", "scopes", "name", "created_at", "revoked_at")
_SELECT = "SELECT key_id, tenant, scopes, name, created_at, revoked_at FROM api_keys"


class SqliteKeyRows:
    """The rows of ``auth.db``: one connection, used under the lock of :class:`~mnemolog.api.auth.KeyStore`."""

    recheck_seconds = 0.0  # the change marker is a pragma, read on every lookup

    def __init__(self, path: Path, busy_timeout: float):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        with naming_database(path):  # a message names the file that is a directory, unreadable, no database
            self._conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None, timeout=busy_timeout)
            enter_wal(self._conn, busy_timeout)
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS api_keys (key_id TEXT PRIMARY KEY, digest TEXT UNIQUE NOT NULL, tenant TEXT NOT NULL,"
                " scopes TEXT NOT NULL, name TEXT NOT NULL, created_at REAL NOT NULL, revoked_at REAL)"
            )

    def insert(self, row: tuple) -> None:
        with naming_database(self.path):
            self._conn.execute("INSERT INTO api_keys VALUES (?,?,?,?,?,?,?)", row)

    def rows(self) -> list[tuple]:
        """Every key's row, digest left out (:data:`_SELECT`), oldest first."""
        return self._conn.execute(_SELECT + " ORDER BY created_at").fetchall()

    def every_row(self) -> list[tuple]:
        """Every key's whole row (:data:`COLUMNS`): what a shared store takes in from this file."""
        return self._conn.execute(f"SELECT {', '.join(COLUMNS)} FROM api_keys").fetchall()

    def find(self, digest: str) -> tuple | None:
        return self._conn.execute(_SELECT + " WHERE digest = ?", (digest,)).fetchone()

    def revoke(self, key_id: str, at: float) -> bool:
        with naming_database(self.path):
            return self._conn.execute("UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL", (at, key_id)).rowcount == 1

    def count_active(self) -> int:
        return self._conn.execute("SELECT count(*) FROM api_keys WHERE revoked_at IS NULL").fetchone()[0]

    def version(self) -> int:
        """auth.db's data version: it changes when another connection (process, worker, CLI) commits to it."""
        return self._conn.execute("PRAGMA data_version").fetchone()[0]

    def close(self) -> None:
        self._conn.close()
