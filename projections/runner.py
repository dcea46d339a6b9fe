"""The projection runner: catch-up, rebuild, exactly-once checkpoints.

Projections live in ``projections.db`` (SQLite, disposable). A projector is
a small object with a ``name``, a ``schema_version``, ``create(conn)`` /
``drop(conn)`` for its tables and ``apply(events, conn)`` for a batch. The
runner reads the log after the projector's checkpoint and applies a batch
and the new checkpoint in the same ``projections.db`` transaction, so a crash
anywhere neither loses nor repeats an event. A projector whose schema
version changed is dropped and rebuilt from position 0.

Several processes may run a runner on the same data directory: the
checkpoint is read inside the write transaction (``BEGIN IMMEDIATE``), so
two runners never apply the same batch twice, and a runner that finds
another process's runner writing waits its turn (the busy timeout), then
skips what that one applied.

The runner's own connection (``conn``) is its writer's: it is used only
under the runner's lock. Every other thread reads checkpoints through its
own connection (:meth:`ProjectionRunner.read_conn`). SQLite waits for a
lock only when a transaction starts from no read snapshot: a ``BEGIN
IMMEDIATE`` on a connection where another thread's statement still holds
one fails at once with "database is locked" whenever another process holds
the write lock or has committed since that snapshot was taken.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Callable, Iterable, Protocol, Sequence

from mnemolog.eventstore import EventStore, RecordedEvent
from mnemolog.eventstore.erased import ErasedMemories
from mnemolog.eventstore.errors import OutsideChange, naming_database
from mnemolog.eventstore.settings import BUSY_TIMEOUT
from mnemolog.eventstore.sqlite_tx import enter_wal, immediate

from . import text_caches
from .damaged import discard_orphans, is_damaged, set_aside

DEFAULT_BATCH = 2000
REBUILD_BATCH = 10_000


class Projector(Protocol):
    name: str
    schema_version: int

    def create(self, conn: sqlite3.Connection) -> None: ...

    def drop(self, conn: sqlite3.Connection) -> None: ...

    def apply(self, events: Sequence[RecordedEvent], conn: sqlite3.Connection) -> None: ...


log = logging.getLogger(__name__)


class ProjectionsReplaced(OutsideChange):
    """``projections.db`` is no longer the file this process opened (see :meth:`ProjectionRunner.connection`)."""


def file_identity(path: Path) -> tuple[int, int] | None:
    """The file at ``path`` (device, inode); None when there is none."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return found.st_dev, found.st_ino


READ_CACHE_KIB = 8192  # per reading connection: more of it is private memory per thread and process


def connect(path: Path | str, *, readonly: bool = False, reader: bool = False, busy_timeout: float = BUSY_TIMEOUT.default) -> sqlite3.Connection:
    """A connection to ``projections.db`` with the pragmas every user needs, waiting up to ``busy_timeout``
    seconds for a lock another connection holds (``MNEMOLOG_BUSY_TIMEOUT``: see :meth:`ProjectionRunner.connection`).

    Each connection's page cache is private memory, so reading connections
    (one per reader thread, in every server process) keep a small one and
    find the rest of the file in the operating system's page cache; the
    writer keeps a large one for its batches. (Reading through a memory map
    instead measured no faster, and counts the mapped pages again in every
    process's RSS.)
    """
    with naming_database(path):  # a message names the file that is a directory, unreadable, no database
        if readonly:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None, check_same_thread=False, timeout=busy_timeout)
        else:
            conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False, timeout=busy_timeout)
            enter_wal(conn, busy_timeout)
        conn.execute("PRAGMA synchronous=NORMAL")  # disposable: a lost tail is re-applied from the log
        conn.execute("PRAGMA wal_autocheckpoint=16384")  # fewer, larger checkpoints: projection batches write many pages
        conn.execute(f"PRAGMA busy_timeout={round(busy_timeout * 1000)}")
        conn.execute(f"PRAGMA cache_size=-{READ_CACHE_KIB if reader else 65536}")
        conn.execute("PRAGMA temp_store=MEMORY")
    return conn


def execute_script(conn: sqlite3.Connection, script: str) -> None:
    """Run ``;``-separated DDL inside the current transaction.

    ``sqlite3``'s own ``executescript`` commits first, which would break the
    runner's one-transaction guarantee.
    """
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


def not_from_log(store: EventStore, position: int, event_id: str | None, head: int, in_log: dict[int, str | None] | None = None) -> str | None:
    """Why projections that applied the log up to ``position``, whose last event was ``event_id``, were not
    built from ``store``'s log (whose head is ``head``), or None.

    The log ends before ``position`` (its tail was cut, or an older ``events.db`` put back), or its event
    at ``position`` is another one (an older ``events.db`` put back, then written past ``position``: the
    chain verifies, the lost events' positions hold others). A checkpoint written before the runner kept
    event ids (``None``) is checked against the head alone. ``in_log`` caches the log's event ids by position.
    """
    if position > head:
        return f"they applied the log up to position {position}, but it ends at position {head}: the log lost its tail"
    if not position or event_id is None:
        return None
    if in_log is None:
        in_log = {}
    if position not in in_log:
        found = next(iter(store.iter_rows(position - 1, until=position, batch_size=1)), [])
        in_log[position] = found[0].event_id if found else None
    if in_log[position] == event_id:
        return None
    return (
        f"they applied event {event_id} at position {position}, but the log holds {in_log[position]} there:"
        " the log lost the events they were built from and was written past them again"
    )


class ProjectionRunner:
    """Keeps a set of projectors caught up with the log."""

    def __init__(
        self,
        store: EventStore,
        path: Path | str,
        projectors: Iterable[Projector],
        *,
        after_commit: Callable[[str, int], None] | None = None,
        busy_timeout: float = BUSY_TIMEOUT.default,
    ):
        self.store = store
        self.path = Path(path)
        self.busy_timeout = busy_timeout
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.projectors = list(projectors)
        self.by_name = {p.name: p for p in self.projectors}
        self._after_commit = after_commit
        self._lock = threading.Lock()
        self._local = threading.local()
        discard_orphans(self.path)
        try:
            self.conn = self._open()
        except sqlite3.DatabaseError as exc:  # a file SQLite cannot read: set aside, and every projection rebuilt
            if not is_damaged(exc):
                raise
            set_aside(self.path, exc)
            self.conn = self._open()
        self._identity = file_identity(self.path)  # the file its connections open (see connection)
        self.foreign: dict[str, str] = {}  # the projections another process rebuilt at another schema version, and why they stand still here
        self.rebuilt_on_start: list[str] = []
        self._compacted_through = 0  # the last erasure mark this runner compacted after (see erasures_due)
        # The checkpoints before the head: another process that appends and projects in between moves the
        # head first, and is never taken for a projection ahead of the log (see lag()).
        found = {r[0]: r[1:] for r in self.conn.execute("SELECT name, position, schema_version, event_id FROM checkpoints")}
        head = store.last_position()
        in_log: dict[int, str | None] = {}  # the log's event id at each checkpoint's position, read once
        for projector in self.projectors:
            if self._needs_rebuild(projector, found.get(projector.name), head, in_log):
                self.reset(projector.name)
                self.rebuilt_on_start.append(projector.name)

    # -- bookkeeping -----------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        """The writer's connection (only under ``self._lock``, see the module docstring), the bookkeeping tables
        made and the checkpoints read: SQLite reads the pages a start needs, and says if they are damaged."""
        conn = connect(self.path, busy_timeout=self.busy_timeout)
        try:
            with immediate(conn):
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS checkpoints (name TEXT PRIMARY KEY, position INTEGER NOT NULL,"
                    " schema_version INTEGER NOT NULL, generation TEXT NOT NULL, updated_at REAL NOT NULL, event_id TEXT)"
                )
                if "event_id" not in {row[1] for row in conn.execute("PRAGMA table_info(checkpoints)")}:
                    conn.execute("ALTER TABLE checkpoints ADD COLUMN event_id TEXT")  # a file written before it: checked from its next batch on
                conn.execute("CREATE TABLE IF NOT EXISTS erasures_due (position INTEGER PRIMARY KEY)")
            conn.execute("SELECT * FROM checkpoints").fetchall()
        except BaseException:
            conn.close()
            raise
        return conn

    def read_conn(self) -> sqlite3.Connection:
        """This thread's read connection to ``projections.db`` (never the runner's own one)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self.connection(reader=True)
        return conn

    def connection(self, *, reader: bool = False) -> sqlite3.Connection:
        """A new connection to ``projections.db`` (the caller closes it) that waits for a lock as long as the
        log's connections do: ``MNEMOLOG_BUSY_TIMEOUT`` holds for every database file of the data directory.

        The file must still be the one this runner opened. Deleted while the process runs (the next start rebuilds
        it), a new connection made an empty file and failed every read on it; another database moved over it
        answered that database's memories. The connections open keep the file they opened, and go on answering."""
        if file_identity(self.path) != self._identity:
            raise ProjectionsReplaced(f"{self.path} was deleted or replaced while this process ran: restart it, and the projections are rebuilt from the log")
        return connect(self.path, reader=reader, busy_timeout=self.busy_timeout)

    def checkpoint(self, name: str, conn: sqlite3.Connection | None = None) -> tuple[int, int, str] | None:
        row = (conn or self.read_conn()).execute(
            "SELECT position, schema_version, generation FROM checkpoints WHERE name = ?", (name,)
        ).fetchone()
        return tuple(row) if row else None

    def generation(self, name: str) -> str | None:
        """An id that changes whenever a projection is rebuilt (derived caches key on it)."""
        found = self.checkpoint(name)
        return found[2] if found else None

    def _needs_rebuild(self, projector: Projector, found: tuple | None, head: int, in_log: dict[int, str | None]) -> bool:
        """No checkpoint, another schema version, or a checkpoint the log does not hold (:func:`not_from_log`);
        ``found``: the checkpoint row (position, schema version, event id), read before ``head``.

        A projection ahead of the log, or whose last applied event is not the
        log's event at that position, was built from events the log no longer
        holds (its tail was cut, or an older ``events.db`` was put back, and
        written past the checkpoint since): it would go on serving them and
        skip the appends that took their positions.
        """
        if found is None or found[1] != projector.schema_version:
            return True
        return not_from_log(self.store, found[0], found[2], head, in_log) is not None

    def _transaction(self):
        return immediate(self.conn)

    # -- running ----------------------------------------------------------

    def reset(self, name: str) -> None:
        """Drop a projection's tables and checkpoint; the next catch-up rebuilds it."""
        projector = self.by_name[name]
        with self._lock, self._transaction() as conn:
            projector.drop(conn)
            projector.create(conn)
            conn.execute(
                "INSERT OR REPLACE INTO checkpoints (name, position, schema_version, generation, updated_at) VALUES (?, 0, ?, ?, ?)",
                (name, projector.schema_version, uuid.uuid4().hex, time.time()),
            )
        if self._after_commit is not None:
            self._after_commit(name, 0)

    def lag(self) -> dict[str, int]:
        """How far each projection is behind the log's head. The checkpoints are read first: another
        process's runner that appends and applies in between moves the head too, so a lag below 0
        means a projection ahead of the log (its tail was cut), never a race."""
        positions = self._positions()
        head = self.store.last_position()
        return {p.name: head - positions.get(p.name, 0) for p in self.projectors}

    def position(self, conn: sqlite3.Connection | None = None) -> int:
        """The lowest checkpoint: every projection has applied the log up to here.

        Read through ``conn`` or this thread's read connection, never the
        runner's own one: that one may be inside a batch whose checkpoint is
        written but not committed, which no reader can see yet, and a read
        on it from another thread would break the next ``BEGIN IMMEDIATE``.
        """
        following = self.following()
        if not following:
            return 0
        found = self._positions(conn)  # every read asks: one query
        return min(found.get(p.name, 0) for p in following)

    def following(self) -> list[Projector]:
        """The projectors this process keeps up to date: all but those another process rebuilt at another schema
        version (see :meth:`_foreign`), which stand still here and wait for nothing."""
        return [p for p in self.projectors if p.name not in self.foreign] if self.foreign else self.projectors

    def _positions(self, conn: sqlite3.Connection | None = None) -> dict[str, int]:
        """Every projection's checkpoint position, in one query."""
        return dict((conn or self.read_conn()).execute("SELECT name, position FROM checkpoints").fetchall())

    def catch_up(self, *, until: int | None = None, batch_size: int = DEFAULT_BATCH, progress=None) -> int:
        """Apply the log to every projector up to ``until`` (default: the head).

        Returns the number of events applied. Projectors at the same
        checkpoint share one read of the log and one transaction. The events
        this process has just appended are taken from the store, not read
        back, when they are exactly the next batch (see
        ``EventStore.take_own_appends``); the checkpoints move in the
        projection's transaction either way.
        """
        applied = 0
        with self._lock:
            target = self.store.last_position() if until is None else until
            while True:
                groups: dict[int, list[Projector]] = {}
                positions = self._positions(self.conn)  # one query: each command asks twice (before and after)
                for projector in self.following():
                    position = positions.get(projector.name, 0)
                    if position < target:
                        groups.setdefault(position, []).append(projector)
                if not groups:
                    return applied
                start = min(groups)
                # This process's own latest append, when it is exactly the next batch of every projection behind
                # (one group, at the position before it); anything else is read from the log.
                batch = self.store.take_own_appends(start, target, batch_size) if len(groups) == 1 else None
                if batch is None:  # read erased where a forget after it names its memory (see ErasedMemories.masked)
                    batch = ErasedMemories(self.store).masked(self.store.read_all(after=start, limit=batch_size, until=target))
                if not batch:
                    return applied
                batch = self._through_its_append(batch, target)
                done = self._apply(groups[start], start, batch)
                applied += len(batch)
                if any(r.type == "SubjectForgotten" for r in batch):
                    self._compact()  # the erased rows' old bytes must not stay in free pages or the WAL
                    text_caches.drop()  # nor the text this process computed from them in its memory
                if progress is not None:
                    progress(batch[-1].position)
                if len(groups) == 1 and len(done) == len(groups[start]) and batch[-1].position >= target:
                    return applied  # every projection behind was at this batch's start and is at the target now

    def _through_its_append(self, batch: list[RecordedEvent], target: int) -> list[RecordedEvent]:
        """``batch`` run on to the last event of the append its last event belongs to (the end of its
        ``event_spans`` row): a batch cut at its size inside an atomic command's append would commit part of
        it, and a read between the two commits (this process's or another's) would see that part alone."""
        last = batch[-1].position
        if last >= target:
            return batch
        spans = self.store.recorder.spans_overlapping(last, last)
        end = min(spans[-1][1], target) if spans else last
        if end <= last:
            return batch
        return batch + ErasedMemories(self.store).masked(self.store.read_all(after=last, until=end))

    def erasures_due(self) -> bool:
        """Whether an applied ``SubjectForgotten`` awaits its scrub: a runner (this one or another
        process's) applied it, in the same transaction as this mark, and the mark has not been
        cleared since (:meth:`scrubbed`, once this file is compacted and the files derived from it
        scrubbed). A process killed in between leaves the mark for the next start."""
        with self._lock:
            return self.conn.execute("SELECT 1 FROM erasures_due LIMIT 1").fetchone() is not None

    def compact_erasures(self) -> None:
        """Compact (see :meth:`_compact`) unless this runner has already compacted after every marked erasure."""
        with self._lock:
            if self.conn.execute("SELECT 1 FROM erasures_due WHERE position > ? LIMIT 1", (self._compacted_through,)).fetchone():
                self._compact()

    def scrubbed(self) -> None:
        """Clear the marks of the erasures this runner has compacted after (the caller scrubbed the derived files since)."""
        with self._lock:
            self.conn.execute("DELETE FROM erasures_due WHERE position <= ?", (self._compacted_through,))
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def _compact(self) -> None:
        """Purge deleted content (lock held): each projector's ``purge(conn)`` if it has one (the
        full-text index merges its segments), then ``VACUUM`` and an emptied WAL. ``secure_delete``
        is turned on for the rest of the connection's life, so later deletions are zeroed in place too.
        Run after a batch erased a forgotten subject's rows, and again at a start that finds
        :meth:`erasures_due` (the batch committed, the process was killed before the compaction)."""
        self.conn.execute("PRAGMA secure_delete = ON")
        marked = self.conn.execute("SELECT coalesce(max(position), 0) FROM erasures_due").fetchone()[0]
        for projector in self.projectors:
            purge = getattr(projector, "purge", None)
            if purge is not None:
                purge(self.conn)
        self.conn.execute("VACUUM")
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self._compacted_through = max(self._compacted_through, marked)

    def _apply(
        self, projectors: list[Projector], start: int, batch: list[RecordedEvent], *, timings: dict[str, float] | None = None
    ) -> list[str]:
        """Apply ``batch`` to those of ``projectors`` still at ``start``, each with its checkpoint, in one
        transaction; the names of those applied (and, in ``timings``, the seconds each projector spent)."""
        end = batch[-1].position
        done: list[str] = []
        with self._transaction() as conn:
            # Re-read inside the write lock: another runner may have moved on, or rebuilt a projection at another
            # schema version (another embedder): this process's events must not be mixed into it.
            checkpoints = {name: (position, version) for name, position, version in conn.execute("SELECT name, position, schema_version FROM checkpoints")}
            for projector in projectors:
                position, version = checkpoints.get(projector.name, (None, projector.schema_version))
                if position != start:
                    continue
                if self._foreign(projector, version):
                    continue
                began = time.perf_counter()
                projector.apply(batch, conn)
                if timings is not None:
                    timings[projector.name] += time.perf_counter() - began
                conn.execute(
                    "UPDATE checkpoints SET position = ?, event_id = ?, updated_at = ? WHERE name = ?",
                    (end, batch[-1].event_id, time.time(), projector.name),
                )
                done.append(projector.name)
            if done and any(r.type == "SubjectForgotten" for r in batch):
                conn.execute("INSERT OR IGNORE INTO erasures_due (position) VALUES (?)", (end,))  # with the erasure: a crash cannot lose it
        if self._after_commit is not None:
            for name in done:
                self._after_commit(name, end)
        return done

    def foreign_reason(self, name: str, conn: sqlite3.Connection) -> str | None:
        """Why projection ``name`` is not this process's to read (another process rebuilt it at another schema
        version), as ``conn`` sees its checkpoint; None while it is. A read asks before it searches: a process that
        writes nothing would only notice at its next batch, and search another embedder's vectors until then."""
        if name not in self.foreign:
            row = conn.execute("SELECT schema_version FROM checkpoints WHERE name = ?", (name,)).fetchone()
            projector = next((p for p in self.projectors if p.name == name), None)
            if row is not None and projector is not None:
                self._foreign(projector, row[0])
        return self.foreign.get(name)

    def _foreign(self, projector: Projector, version: int) -> bool:
        """Whether ``projector``'s projection, at schema ``version`` in the file, is another process's rebuild (another
        schema version than this one projects); noted, and warned of once."""
        if version == projector.schema_version:
            return False
        if projector.name not in self.foreign:
            self.foreign[projector.name] = (
                f"another process rebuilt the {projector.name} projection at schema version {version} (this one projects"
                f" version {projector.schema_version}: another MNEMOLOG_EMBEDDER?); restart this one with the same settings"
            )
            log.warning("%s", self.foreign[projector.name])
        return True

    def rebuild(self, names: Sequence[str] | None = None, *, progress=None) -> dict[str, float]:
        """Drop and replay projections from position 0; seconds spent per projector.

        Another process's runner (a server beside ``mnemolog rebuild``) sees
        the reset checkpoints and may catch up some of the replay itself: each
        batch is applied only to the projections still at its start (as in
        :meth:`catch_up`), and the replay goes on from wherever the
        checkpoints are, so no event is applied twice.
        """
        names = list(dict.fromkeys(names or self.by_name))  # a name given twice is rebuilt once (twice, its replay applied each batch twice)
        unknown = [n for n in names if n not in self.by_name]
        if unknown:
            raise ValueError(f"unknown projection(s): {', '.join(unknown)}; known: {', '.join(self.by_name)}")
        for name in names:
            self.reset(name)
        timings = {name: 0.0 for name in names}
        target = self.store.last_position()
        chosen = [self.by_name[n] for n in names]
        with self._lock:
            while True:
                positions = self._positions(self.conn)
                behind = [p for p in chosen if positions.get(p.name, 0) < target and p.name not in self.foreign]
                if not behind:
                    break
                start = min(positions.get(p.name, 0) for p in behind)
                group = [p for p in behind if positions.get(p.name, 0) == start]
                replayed = False
                erased = ErasedMemories(self.store)  # what a forget erased replays erased, sealed or not: never projected
                for batch in self.store.iter_all(start, until=target, batch_size=REBUILD_BATCH):
                    replayed = True
                    batch = erased.masked(batch)
                    done = self._apply(group, start, batch, timings=timings)
                    start = batch[-1].position
                    if progress is not None:
                        progress(start)
                    if len(done) != len(group):
                        break  # another runner moved some of them (or reset them again): read the checkpoints again
                if not replayed:
                    break
        return timings

    def status(self) -> list[dict[str, object]]:
        positions = self._positions()  # before the head, as in lag()
        head = self.store.last_position()
        out = []
        for projector in self.projectors:
            checkpoint = positions.get(projector.name, 0)
            size = getattr(projector, "size", None)
            out.append(
                {
                    "name": projector.name,
                    "schema_version": projector.schema_version,
                    "checkpoint": checkpoint,
                    "lag": head - checkpoint,
                    "rows": size(self.read_conn()) if callable(size) else None,
                }
            )
        return out

    def close(self) -> None:
        with self._lock:
            self.conn.close()
        reader = getattr(self._local, "conn", None)
        if reader is not None:
            reader.close()
            self._local.conn = None

