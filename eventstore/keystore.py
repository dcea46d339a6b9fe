"""The key store: one random 256-bit data key per subject, apart from the log.

A *subject* is a tenant (its own key, subject ``""`` here: what memories
without a subject, entities and documents are sealed with) or a ``subject``
named on a memory, within its tenant.
Keys live in their own SQLite database, ``keys.db`` in the data directory
(``MNEMOLOG_KEY_STORE`` names another file). A log on PostgreSQL keeps its
keys there too: the key store is never in the log's database, so a copy of
the log (a replica, a dump, an export) holds ciphertext only, and every
process that must read plaintext needs the key file (point
``MNEMOLOG_KEY_STORE`` of each replica at the same file, or copy it with
``mnemolog export --with-keys``).

A key's life: ``live`` (new events of the subject are sealed with it),
``retired`` (a forget has begun: new events get a new key, old ones still
open), then forgotten: the key bytes are deleted and only a tombstone row
(key id, tenant, time) stays, so that a reader can tell "forgotten, show as
erased" from "missing, restore the key store". Forgetting rewrites the file
so that the key bytes do not linger: ``secure_delete`` zeroes freed
content, ``VACUUM`` rewrites the database, and a ``TRUNCATE`` checkpoint
empties the write-ahead log.
"""

from __future__ import annotations

import hmac
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Iterable

from .errors import naming_database
from .files import write_unnamed
from .ids import new_id
from .settings import BUSY_TIMEOUT
from .sqlite_tx import enter_wal, immediate

KEY_BYTES = 32
TENANT_SUBJECT = ""  # the tenant's own key
FORGOTTEN = b""  # what :meth:`KeyStore.key` returns for a forgotten key
KEYED_FINGERPRINT = "s"  # how an idempotency fingerprint keyed with data keys starts (see KeyStore.keyed_fingerprint)


class KeysRetired(Exception):
    """A key that sealed an append was retired before the append reached the log (see :meth:`KeyStore.require_live`)."""


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class KeyStore:
    """Data keys by id, created on demand; thread-safe; shared safely with other processes (SQLite locking)."""

    def __init__(self, path: str | os.PathLike, busy_timeout: float = BUSY_TIMEOUT.default):
        self.path = Path(path)
        self.busy_timeout = busy_timeout  # seconds a connection waits for another process's lock (MNEMOLOG_BUSY_TIMEOUT)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._by_id: dict[str, bytes] = {}
        self._live: dict[tuple[str, str], tuple[str, bytes]] = {}
        self._data_version: int | None = None  # the file's PRAGMA data_version when the caches were last checked (see refresh)
        self._drops = 0  # keys this process has dropped from its cache of live keys (see mark)
        #: How many times this process saw keys forgotten (its own forgets, and others' that :meth:`refresh` took
        #: in): what was opened with them before reads erased now (see ``stream_folds``).
        self.forgotten = 0

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with naming_database(self.path):
                conn = self._open()
            self._conn = conn
        return self._conn

    def _open(self) -> sqlite3.Connection:
        """A connection to the key store, its tables made (the file made owner-only)."""
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=self.busy_timeout)
        try:
            conn.execute("PRAGMA secure_delete = ON")
            enter_wal(conn, self.busy_timeout)
            conn.executescript(  # one transaction: one sync for a new file's tables, not one a statement
                """
                BEGIN;
                CREATE TABLE IF NOT EXISTS data_keys (
                    key_id TEXT PRIMARY KEY,
                    tenant TEXT NOT NULL,
                    subject TEXT,
                    key BLOB,
                    state TEXT NOT NULL CHECK (state IN ('live', 'retired', 'forgotten')),
                    created_at TEXT NOT NULL,
                    forgotten_at TEXT
                );
                CREATE UNIQUE INDEX IF NOT EXISTS ux_data_keys_live ON data_keys (tenant, subject) WHERE state = 'live';
                CREATE TABLE IF NOT EXISTS scrub_due (key_id TEXT PRIMARY KEY);
                COMMIT;
                """
            )
        except BaseException:
            conn.close()
            raise
        try:
            os.chmod(self.path, 0o600)
        except OSError:
            pass
        return conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- keys ----------------------------------------------------------------------

    def key_for(self, tenant: str, subject: str | None) -> tuple[str, bytes]:
        """The live key of a subject (``None`` or ``""``: the tenant's), made on first use."""
        subject = subject or TENANT_SUBJECT
        found = self._live.get((tenant, subject))
        if found is None:
            self.ensure(tenant, {subject})
            found = self._live[(tenant, subject)]
        return found

    def ensure(self, tenant: str, subjects: set[str | None]) -> None:
        """Make the live keys of ``subjects`` that do not exist yet, in one transaction (one sync for a batch), and cache them.

        One statement a subject inserts its key, or, when another process
        made it first, returns that one (the live key is unique per subject).
        """
        live = self._live
        missing = {s for s in (subject or TENANT_SUBJECT for subject in subjects) if (tenant, s) not in live}
        if not missing:
            return
        with self._lock:
            conn = self._connection()
            with immediate(conn):
                rows = [
                    (subject, *conn.execute(
                        "INSERT INTO data_keys (key_id, tenant, subject, key, state, created_at) VALUES (?, ?, ?, ?, 'live', ?)"
                        " ON CONFLICT (tenant, subject) WHERE state = 'live' DO UPDATE SET state = 'live' RETURNING key_id, key",
                        (new_id(), tenant, subject, os.urandom(KEY_BYTES), _now()),
                    ).fetchone())
                    for subject in sorted(missing)
                ]  # fmt: skip
            for subject, key_id, key in rows:  # cached, so that sealing the batch asks the store nothing more
                found = self._live[(tenant, subject)] = (key_id, bytes(key))
                self._by_id[key_id] = found[1]

    def key(self, key_id: str) -> bytes | None:
        """The key's bytes; :data:`FORGOTTEN` (empty) if it was forgotten; ``None`` if this store never held it."""
        found = self._by_id.get(key_id)
        if found is not None:
            return found
        with self._lock:
            row = self._connection().execute("SELECT key, state FROM data_keys WHERE key_id = ?", (key_id,)).fetchone()
        if row is None:
            return None
        found = self._by_id[key_id] = FORGOTTEN if row[1] == "forgotten" else bytes(row[0])
        return found

    def keyed_fingerprint(self, digest: str, key_ids: Iterable[str]) -> str | None:
        """``digest`` (what an idempotency key is bound to: a SHA-256 of the request) keyed with the data keys
        ``key_ids`` (those that sealed the write), as the log stores it; ``None`` once one of them is gone.

        A plain digest of a request outlives a forget in the append-only idempotency table, and a guess of
        the forgotten text could be checked against it; keyed with the subject's key, it can no longer be
        recomputed once the key is destroyed. It starts with :data:`KEYED_FINGERPRINT` (a hex digest never does).
        """
        ids = sorted(set(key_ids))
        keys = [self.key(key_id) for key_id in ids]
        if not keys or any(not key for key in keys):
            return None
        mac = hmac.new(b"".join(keys), digest.encode(), "sha256").hexdigest()
        return KEYED_FINGERPRINT + mac[: 64 - len(KEYED_FINGERPRINT)]

    def holds_keys(self) -> bool:
        """Whether this store holds any key that opens something (live or retired): a log's copy taken without its keys holds none."""
        if self._no_file():
            return False
        with self._lock:
            return self._connection().execute("SELECT 1 FROM data_keys WHERE key IS NOT NULL LIMIT 1").fetchone() is not None

    def unknown(self, key_ids: Iterable[str]) -> set[str]:
        """Those of ``key_ids`` this store has no row for, neither a key nor a tombstone: what it could never
        open (every one without a key file, which this does not make)."""
        ids = set(key_ids)
        if not ids or self._no_file():
            return ids
        with self._lock:
            conn = self._connection()
            return {key_id for key_id in ids if conn.execute("SELECT 1 FROM data_keys WHERE key_id = ?", (key_id,)).fetchone() is None}

    def subject_keys(self, tenant: str, subject: str | None) -> list[str]:
        """Ids of the subject's keys that still exist (live or retired)."""
        with self._lock:
            rows = self._connection().execute(
                "SELECT key_id FROM data_keys WHERE tenant = ? AND subject = ? AND state != 'forgotten' ORDER BY created_at, key_id",
                (tenant, subject or TENANT_SUBJECT),
            ).fetchall()
        return [r[0] for r in rows]

    def retired(self) -> set[str]:
        """Ids of every retired key: a forget has begun on them and not destroyed them yet (none without a key file)."""
        if self._no_file():
            return set()
        with self._lock:
            return {r[0] for r in self._connection().execute("SELECT key_id FROM data_keys WHERE state = 'retired'")}

    def retire(self, tenant: str, subject: str | None) -> list[str]:
        """Stop sealing with the subject's keys (new events get a new key); the ids retired or already retired.

        One transaction: a key another process makes for the subject just after (its next write) is live, and
        neither named nor destroyed by this forget; listed after the update, it was named and then destroyed.
        """
        subject = subject or TENANT_SUBJECT
        with self._lock:
            conn = self._connection()
            with immediate(conn):
                conn.execute("UPDATE data_keys SET state = 'retired' WHERE tenant = ? AND subject = ? AND state = 'live'", (tenant, subject))
                rows = conn.execute(
                    "SELECT key_id FROM data_keys WHERE tenant = ? AND subject = ? AND state = 'retired' ORDER BY created_at, key_id", (tenant, subject)
                ).fetchall()
            self._live.pop((tenant, subject), None)
            self._drops += 1
        return [r[0] for r in rows]

    def forget(self, key_ids: Iterable[str]) -> int:
        """Destroy the keys: the rows become tombstones, and the file is rewritten without the key bytes."""
        ids = list(key_ids)
        with self._lock:
            conn = self._connection()
            with immediate(conn):
                for key_id in ids:
                    row = conn.execute("SELECT tenant FROM data_keys WHERE key_id = ?", (key_id,)).fetchone()
                    conn.execute("DELETE FROM data_keys WHERE key_id = ?", (key_id,))
                    conn.execute(
                        "INSERT INTO data_keys (key_id, tenant, subject, key, state, created_at, forgotten_at)"
                        " VALUES (?, ?, NULL, NULL, 'forgotten', ?, ?)",
                        (key_id, row[0] if row else "", _now(), _now()),
                    )
                    conn.execute("INSERT OR IGNORE INTO scrub_due (key_id) VALUES (?)", (key_id,))  # until :meth:`scrub` has rewritten the file
            for key_id in ids:
                self._by_id[key_id] = FORGOTTEN
            self.forgotten += 1
            self._drop_live(ids)
            self.scrub()
        return len(ids)

    def tombstone(self, key_ids: Iterable[str], tenant: str, *, destroy: bool = True) -> None:
        """Record keys as forgotten (an import of a log with forgotten subjects): destroyed if held, else a tombstone.

        ``destroy=False`` only retires the held ones (an import about to append the forget
        that names them, and to call again once it is appended: killed in between, the
        next open of the store destroys them, as for an interrupted forget).
        """
        ids = list(key_ids)
        with self._lock:
            conn = self._connection()
            held = [k for k in ids if conn.execute("SELECT 1 FROM data_keys WHERE key_id = ? AND state != 'forgotten'", (k,)).fetchone()]
            for key_id in ids:
                conn.execute(
                    "INSERT OR IGNORE INTO data_keys (key_id, tenant, subject, key, state, created_at, forgotten_at)"
                    " VALUES (?, ?, NULL, NULL, 'forgotten', ?, ?)",
                    (key_id, tenant, _now(), _now()),
                )
            if held and not destroy:
                conn.executemany("UPDATE data_keys SET state = 'retired' WHERE key_id = ? AND state = 'live'", [(k,) for k in held])
                self._drop_live(held)
            elif held:
                self.forget(held)

    def refresh(self) -> None:
        """Drop from the caches the keys another process has retired or forgotten since this one last looked.

        One ``PRAGMA data_version`` (it changes when another connection
        commits to the file), and only then one read of the keys no longer
        live. Without it, a process whose cache held a subject's live key
        sealed the subject's next events with it after another process had
        forgotten the subject (writes answered, then unreadable), and read the
        forgotten events in plaintext until its follower reached the forget.
        A seal made just before another process retires the key is checked
        again in the append's transaction on the log (:meth:`require_live`).
        """
        if self._conn is None:  # nothing read from the file yet: nothing cached
            return
        with self._lock:
            self._take_changes(self._conn.execute("PRAGMA data_version").fetchone()[0])

    def _take_changes(self, version: int) -> None:
        """With the lock held and ``version`` the file's ``data_version`` now: when another process committed
        since the last look, drop from the caches the keys no longer live (see :meth:`refresh`)."""
        if version == self._data_version:
            return
        self._data_version = version
        rows = self._conn.execute("SELECT key_id, state FROM data_keys WHERE state != 'live'").fetchall()
        self._drop_live(key_id for key_id, _ in rows)
        self.forget_cached(key_id for key_id, state in rows if state == "forgotten" and self._by_id.get(key_id))

    def forget_cached(self, key_ids: Iterable[str]) -> None:
        """Drop keys another process forgot from this process's cache."""
        ids = set(key_ids)
        if ids:
            self.forgotten += 1
        for key_id in ids:
            self._by_id.pop(key_id, None)
        self._drop_live(ids)

    def _drop_live(self, key_ids: Iterable[str]) -> None:
        """Forget from the cache of live keys the subjects sealed with ``key_ids``: their next seal looks again."""
        gone = set(key_ids)
        for live_key, (key_id, _) in list(self._live.items()):
            if key_id in gone:
                del self._live[live_key]
                self._drops += 1

    def mark(self) -> tuple[int | None, int]:
        """What :meth:`require_live` compares with: the file's ``data_version`` as this process last read it
        (see :meth:`refresh`), and how many live keys this process has dropped from its cache."""
        return self._data_version, self._drops

    def require_live(self, mark: tuple[int | None, int], key_ids: Iterable[str]) -> None:
        """Raise :class:`KeysRetired` if any of ``key_ids`` is no longer live, where the store changed since
        :meth:`mark` gave ``mark``: one ``PRAGMA data_version`` when nothing changed, else the caches
        refreshed (see :meth:`refresh`) and one read of the keys no longer live.

        An append runs it in its transaction on the log (see ``EventStore.append_batch``). A forget retires
        the subject's keys, appends its event, then destroys them: an append that sealed with a key just
        before the retirement and reached the log after that event would hold events no forget names and no
        key opens (and its writer would project their plaintext). Refused here, it seals them again with the
        subject's new key; one that passes is in the log before the forget's event, where the forget finds
        it (see ``SubjectCommands.forget``)."""
        ids = set(key_ids)
        if not ids or self._conn is None:
            return
        with self._lock:
            version = self._conn.execute("PRAGMA data_version").fetchone()[0]
            if (version, self._drops) == mark:
                return
            self._take_changes(version)  # the caches follow, so that the next append's mark is current
            marks = ",".join("?" * len(ids))
            retired = self._conn.execute(f"SELECT 1 FROM data_keys WHERE state != 'live' AND key_id IN ({marks}) LIMIT 1", tuple(ids)).fetchone()
        if retired is not None:
            raise KeysRetired(sorted(ids))

    def _no_file(self) -> bool:
        """Whether this store has no file yet (nothing opened it, and nothing made it): it holds nothing."""
        return self._conn is None and not self.path.exists()

    def scrub(self) -> None:
        """Rewrite the file so that freed pages and the WAL hold no deleted key bytes."""
        with self._lock:
            conn = self._connection()
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("VACUUM")
            conn.execute("DELETE FROM scrub_due")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def scrub_if_due(self) -> bool:
        """Finish the rewrite of a :meth:`forget` killed after it destroyed keys (their bytes may still be in
        the WAL or in free pages until :meth:`scrub` has run); whether one was due. Nothing without a key file."""
        if self._no_file():
            return False
        with self._lock:
            due = self._connection().execute("SELECT 1 FROM scrub_due LIMIT 1").fetchone() is not None
            if due:
                self.scrub()
        return due

    # -- moving keys with an export --------------------------------------------------

    def export_rows(self, tenant: str | None = None) -> list[dict]:
        """Every key (tombstones included), for ``export --with-keys``; the caller writes them to a marked file."""
        with self._lock:
            rows = self._connection().execute(
                "SELECT key_id, tenant, subject, key, state, created_at, forgotten_at FROM data_keys"
                + (" WHERE tenant = ?" if tenant is not None else "")
                + " ORDER BY created_at, key_id",
                (tenant,) if tenant is not None else (),
            ).fetchall()
        return [
            {"key_id": r[0], "tenant": r[1], "subject": r[2], "key": r[3].hex() if r[3] else None, "state": r[4], "created_at": r[5], "forgotten_at": r[6]}
            for r in rows
        ]

    def import_rows(self, rows: Iterable[dict]) -> int:
        """Add keys from an export's key file; a key already here (by id) is kept as it is. The rows added."""
        added = 0
        with self._lock:
            conn = self._connection()
            with immediate(conn):
                for r in rows:
                    state = r["state"] if r.get("key") else "forgotten"
                    if state == "live" and conn.execute(
                        "SELECT 1 FROM data_keys WHERE tenant = ? AND subject = ? AND state = 'live'", (r["tenant"], r["subject"])
                    ).fetchone():
                        state = "retired"  # this store already seals the subject with a key of its own
                    cur = conn.execute(
                        "INSERT OR IGNORE INTO data_keys (key_id, tenant, subject, key, state, created_at, forgotten_at) VALUES (?,?,?,?,?,?,?)",
                        (
                            r["key_id"], r["tenant"], r.get("subject") if state != "forgotten" else None,
                            bytes.fromhex(r["key"]) if state != "forgotten" else None, state, r.get("created_at") or _now(), r.get("forgotten_at"),
                        ),
                    )  # fmt: skip
                    added += cur.rowcount
        return added


KEY_FILE_FORMAT = 1
KEY_FILE_WARNING = (
    "SECRET: mnemolog data keys. Whoever holds this file and the log reads every sealed field."
    " Keep it apart from the export; destroy it when done."
)


def write_key_file(keys: KeyStore, path: str | os.PathLike, *, tenant: str | None = None) -> int:
    """Write the keys (of one tenant, or all) to a marked JSON-lines file readable by its owner only; the keys written."""
    import json

    rows = keys.export_rows(tenant)
    with write_unnamed(path, 0o600) as out:  # a kill midway leaves no key behind
        out.write(json.dumps({"mnemolog_keys": KEY_FILE_FORMAT, "warning": KEY_FILE_WARNING, "tenant": tenant}) + "\n")
        for row in rows:
            out.write(_key_line(row))
    return len(rows)


def _key_line(row: dict) -> str:
    import json

    return json.dumps(row) + "\n"


_KEY_STATES = ("live", "retired", "forgotten")


def _is_key_record(row: object) -> bool:
    """Whether ``row`` has every field :meth:`KeyStore.import_rows` takes, each of its type: a key (live or
    retired) with its subject, or a tombstone."""
    if not isinstance(row, dict) or not all(isinstance(row.get(f), str) for f in ("key_id", "tenant", "state")):
        return False
    if row["state"] not in _KEY_STATES or not all(isinstance(row.get(f), (str, type(None))) for f in ("key", "created_at", "forgotten_at")):
        return False
    return row.get("key") is None or (row["state"] != "forgotten" and isinstance(row.get("subject"), str))


def read_key_file(path: str | os.PathLike) -> list[dict]:
    """The keys of a file :func:`write_key_file` wrote; ``ValueError`` naming the line if it is not one."""
    import json

    with open(path, "rb") as file:  # a key file is small: read whole, its text checked once
        raw = file.read()
    try:
        header, *lines = raw.decode("utf-8").splitlines() or [""]
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a mnemolog key file (not UTF-8 text)") from None
    try:
        if json.loads(header).get("mnemolog_keys") != KEY_FILE_FORMAT:
            raise ValueError
    except (ValueError, AttributeError, RecursionError):
        raise ValueError(f"{path}: not a mnemolog key file (line 1 is no key-file header)") from None
    rows = []
    for lineno, line in enumerate(lines, start=2):
        try:
            row = json.loads(line)
            if not _is_key_record(row):
                raise ValueError
            if row.get("key") is not None:
                if len(bytes.fromhex(row["key"])) != KEY_BYTES:
                    raise ValueError
        except (ValueError, TypeError, RecursionError):  # RecursionError: JSON nested some thousand deep
            raise ValueError(f"{path}: line {lineno} is not a key record") from None
        rows.append(row)
    return rows
