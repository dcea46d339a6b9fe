"""The SQL recorder: the only code that writes and reads the ``events`` table (its reads in :mod:`.log_reads`).

Its public methods open the transaction and call inner ``_insert(conn, …)``
style helpers, so that an extension can write in the same transaction. One
writer at a time: a process-wide lock plus the database's own write lock
(``BEGIN IMMEDIATE`` on SQLite) keeps positions gap-free in commit order.
"""

from __future__ import annotations

import contextlib
import threading
import time
from hashlib import sha256
from datetime import datetime, timezone
from typing import Callable, Iterator, NamedTuple, Sequence

from sqlalchemy import Connection, Engine, bindparam, func, select

from . import dialects
from .bounds import holds_nul
from .chain import GENESIS_HASH, StoredRow, canonical_encoder
from .errors import ConcurrencyError, IdempotencyConflict
from .log_reads import LogReads, _run_prepared
from .schema import event_spans, events, idempotency

ANY = "any"
NO_STREAM = "no-stream"
ExpectedVersion = int | str


class PendingEvent(NamedTuple):
    """An event ready to be stored: payload and metadata already encoded."""

    event_id: str
    type: str
    schema_version: int
    tenant: str
    payload: str
    metadata: str
    correlation_id: str | None
    recorded_at: str | None = None  # kept as given (import); None stamps now


class PendingWrite(NamedTuple):
    stream_id: str
    expected_version: ExpectedVersion
    events: Sequence[PendingEvent]


class Appended(NamedTuple):
    first_position: int
    last_position: int
    replayed: bool
    #: The values of the rows written, row after row in the envelope's column order (``StoredRow``); None for a replay.
    rows: list | None = None


_KEYS = StoredRow._fields  # every column, in the envelope's order
_SPAN_KEYS = ("first_position", "last_position", "tenant", "correlation_id")
# What a reader of domain events needs: the envelope without the chain.


ROWS_PER_INSERT = 50  # rows per multi-row INSERT statement (13 parameters each)


def utc_stamp(moment: datetime | None = None) -> str:
    """RFC 3339 UTC with microseconds, as stored in ``recorded_at``."""
    if moment is not None:
        # isoformat, not strftime: %Y leaves years before 1000 unpadded ("999-…"), which would sort after "2026-…".
        return moment.astimezone(timezone.utc).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
    # Every append stamps the time: format the second once, then only the micros.
    global _stamp_second
    second, micros = divmod(time.time_ns() // 1000, 1_000_000)
    if _stamp_second[0] != second:
        _stamp_second = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    return f"{_stamp_second[1]}.{micros:06d}Z"


_stamp_second: tuple[int, str] = (-1, "")


def parse_moment(text: str) -> datetime:
    """An ISO-8601 / RFC 3339 time (``Z`` or ``z`` for UTC; naive: UTC, a bare date its midnight); ValueError if it is none."""
    text = text.strip()
    if text[-1:] in ("Z", "z"):
        text = text[:-1] + "+00:00"
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


class IdempotencyRecord(NamedTuple):
    fingerprint: str
    first_position: int
    last_position: int


class SQLRecorder(LogReads):
    def __init__(self, writer: Engine, reader: Engine):
        self.writer = writer
        self.reader = reader
        self._lock = threading.RLock()  # re-entrant: a caller holding write_lock may append
        self._conn: Connection | None = None  # the writer's held connection (see transaction)
        self._listeners: list[Callable[[int], None]] = []
        self._commit_listener: dialects.CommitListener | None = None  # PostgreSQL: other processes' commits
        self._idem_stmt = idempotency.insert()
        # The hot path sends plain tuples through the driver; the statement
        # itself is still compiled from the Core table for the dialect.
        compiled = events.insert().compile(dialect=writer.dialect)
        self._insert_sql = str(compiled)
        self._insert_keys = tuple(compiled.positiontup or ()) if compiled.positional else None
        self._span_sql = str(event_spans.insert().compile(dialect=writer.dialect))
        self._insert_many_sql = None
        if writer.dialect.paramstyle == "qmark" and self._insert_keys == _KEYS:
            head, values = self._insert_sql.rsplit(" VALUES ", 1)
            self._insert_many_sql = f"{head} VALUES {', '.join([values] * ROWS_PER_INSERT)}"
        # psycopg 3: an append is two statements sent straight to the driver
        # in pipeline mode (see _append_pipelined).
        self._pg = dialects.PgAppendStatements(_KEYS, _SPAN_KEYS) if writer.dialect.name == "postgresql" else None
        self._pg_driver = None  # the psycopg connection appends use on PostgreSQL (see _append_pipelined)
        self._tip_query = select(events.c.position, events.c.hash, events.c.recorded_at).order_by(events.c.position.desc()).limit(1)
        self._version_query = select(func.max(events.c.stream_version)).where(events.c.stream_id == bindparam("stream_id"))
        # With a qmark driver (sqlite3) the two per-append queries run as
        # precompiled SQL: building Core statements costs more than running them.
        self._fast = writer.dialect.paramstyle == "qmark"
        self._prepared: dict[tuple, tuple] = {}
        self._envelope = dialects.envelope_json(reader.dialect.name)
        last = select(func.max(events.c.position))
        compiled = last.compile(dialect=reader.dialect)
        self._last_position = (str(compiled), (), last) if compiled.positional else (None, None, last)
        # Every command with an idempotency key looks it up, once to answer a retry and once under the lock.
        idem = select(idempotency.c.fingerprint, idempotency.c.first_position, idempotency.c.last_position).where(
            idempotency.c.key == bindparam("key")
        )
        compiled = idem.compile(dialect=reader.dialect)
        self._idem_lookup = (str(compiled), tuple(compiled.positiontup), idem) if compiled.positional else (None, None, idem)
        if self._fast:
            self._tip_sql = str(self._tip_query.compile(dialect=writer.dialect, compile_kwargs={"literal_binds": True}))
            self._version_sql = str(self._version_query.compile(dialect=writer.dialect))

    # -- writing ---------------------------------------------------------

    @property
    def write_lock(self) -> threading.RLock:
        """The process-wide lock every append takes; hold it to make several steps one write."""
        return self._lock

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Connection]:
        """The single writer's transaction, committed on leaving.

        Takes the process-wide lock, then ``BEGIN IMMEDIATE`` on the writer's
        one connection, which stays open between appends (checking a
        connection out of a pool costs more than a small append's SQL).
        Extensions write in it through the inner ``_insert(conn, …)`` helpers.
        """
        with self._lock:
            conn = self._held_connection()
            with conn.begin():
                dialects.lock_log(conn)
                yield conn

    def settle(self) -> None:
        """Wait until no append is in flight, in this process or another: take the log's write lock, and leave it.

        An append stamps its events' time before it commits; until then a reader of the time after that stamp
        finds the log without them, and once it commits, with them. A read at a time past the log's last
        event settles first (see ``EventStore.position_at``): an append that starts after this stamps a later
        time. A thread inside an append of its own has nothing of another's in flight."""
        with self._lock:
            conn = self._held_connection()
            if conn.in_transaction():
                return
            with conn.begin():
                dialects.lock_log(conn)

    def append(
        self,
        writes: Sequence[PendingWrite],
        *,
        idempotency_key: str | None = None,
        fingerprint: str | None = None,
        check: Callable[[], None] | None = None,
    ) -> Appended:
        """Append ``writes`` in one transaction. ``check``, when given, runs in it once the log's lock is held
        and before anything is written; whatever it raises rolls the append back."""
        if self._pg is not None:
            appended = self._append_pipelined(writes, idempotency_key, fingerprint or "", check)
            if not appended.replayed:
                self._notify(appended.last_position)
            return appended
        with self.transaction() as conn:
            if idempotency_key is not None:
                seen = self._idempotent(conn, idempotency_key, fingerprint or "")
                if seen is not None:
                    return seen
            if check is not None:
                check()
            appended = self._insert(conn, writes)
            dialects.announce_append(conn, appended.last_position)
            if idempotency_key is not None:
                conn.execute(
                    self._idem_stmt,
                    {
                        "key": idempotency_key,
                        "fingerprint": fingerprint or "",
                        "first_position": appended.first_position,
                        "last_position": appended.last_position,
                    },
                )
        self._notify(appended.last_position)
        return appended

    def _append_pipelined(self, writes: Sequence[PendingWrite], key: str | None, fingerprint: str, check: Callable[[], None] | None = None) -> Appended:
        """One append on PostgreSQL in two round trips, whatever its size.

        psycopg's pipeline mode sends statements without waiting for each
        answer, on a connection of the recorder's own in autocommit mode, so
        that ``BEGIN`` travels with the rest (psycopg waits for its own
        implicit one). The first round trip carries ``BEGIN``, the append
        lock (:func:`dialects.lock_log`) and one query for the tip, each
        stream's version and the idempotency key, as a statement of its own
        so that (READ COMMITTED) it reads a snapshot taken once the lock is
        held. The rows are then checked, numbered and chained here, and the
        second round trip carries one statement that inserts the events,
        their spans and the key and sends the notification, then ``COMMIT``.
        The guarantees are those of :meth:`transaction`: one writer at a time
        under the lock, every check made before anything is written, and an
        error anywhere rolls the whole append back.
        """
        statements = self._pg
        streams = list(dict.fromkeys(w.stream_id for w in writes))
        with self._lock:
            driver = self._pipeline_connection()
            try:
                with driver.cursor() as cursor, driver.pipeline():  # one cursor for every statement of the append
                    cursor.execute("BEGIN")
                    cursor.execute(dialects.PG_LOCK_SQL, (dialects.APPEND_LOCK_KEY,))
                    head = cursor.execute(*statements.head(streams, key)).fetchone()  # the first round trip
                    tip_position, tip_hash, tip_stamp, current, known, first, last = head
                    if known is not None:
                        cursor.execute("ROLLBACK")
                        if known != fingerprint:
                            raise IdempotencyConflict(key)
                        return Appended(first, last, True)
                    if check is not None:
                        check()
                    tip = (tip_position, tip_hash, tip_stamp) if tip_position is not None else None
                    versions = {stream_id: version for stream_id, version in zip(streams, current) if version is not None}
                    values, spans, appended = self._chain_rows(writes, tip, versions)
                    # One statement carries up to ROWS_PER_STATEMENT events and spans, column by column; a bigger append sends the rest in more.
                    width, most = len(_KEYS), statements.ROWS_PER_STATEMENT
                    for start in range(most * width, len(values), most * width):
                        cursor.execute(statements.insert_events, statements.event_columns(values[start : start + most * width]))
                    for start in range(most, len(spans), most):
                        cursor.execute(statements.insert_spans, statements.span_columns(spans[start : start + most]))
                    record = (key, fingerprint, appended.first_position, appended.last_position) if key is not None else None
                    notify = (dialects.NOTIFY_CHANNEL, str(appended.last_position))
                    cursor.execute(*statements.write(values[: most * width], spans[:most], record, notify))
                    cursor.execute("COMMIT")
                # Leaving the pipeline is the second round trip: it raises any error of the statements above.
            except BaseException:
                self._abandon(driver)
                raise
        return appended

    def _pipeline_connection(self):
        """The psycopg connection of :meth:`_append_pipelined`, in autocommit mode; made on first use, after a failure
        and when the server has closed it."""
        driver = self._pg_driver
        if driver is not None and dialects.connection_dropped(driver):  # closed by the server while idle: replaced, not failed on
            driver.close()
        if driver is None or driver.closed:
            raw = self.writer.raw_connection()
            driver = raw.driver_connection
            raw.detach()  # the recorder owns it from now on; dispose() closes it
            driver.rollback()
            driver.autocommit = True
            dialects.register_pg_arrays(driver)
            # The planner cannot see an array parameter's length in a generic
            # plan, so it judged its cost above a custom plan's and planned the
            # head query again on every append: plan each statement once.
            driver.execute("SET plan_cache_mode = force_generic_plan")
            self._pg_driver = driver
        return driver

    def _abandon(self, driver) -> None:
        """Roll back what a failed append began; a connection that cannot is closed (the next append makes another)."""
        try:
            from psycopg.pq import TransactionStatus

            if driver.info.transaction_status != TransactionStatus.IDLE:
                driver.execute("ROLLBACK")
        except Exception:
            driver.close()
            self._pg_driver = None

    def _held_connection(self) -> Connection:
        """The writer's one connection, kept open between appends (call with the lock held)."""
        conn = self._conn
        if conn is None or conn.closed:
            conn = self._conn = self.writer.connect()
        return conn

    def _idempotent(self, conn: Connection, key: str, fingerprint: str) -> Appended | None:
        row = self.idempotency_record(key, conn)
        if row is None:
            return None
        if row.fingerprint != fingerprint:
            raise IdempotencyConflict(key)
        return Appended(row.first_position, row.last_position, True)

    def idempotency_record(self, key: str, conn: Connection | None = None) -> "IdempotencyRecord | None":
        """The stored ``(fingerprint, first_position, last_position)`` of an idempotency key, or None."""
        if holds_nul((key,)):
            return None
        if conn is not None:
            rows = _run_prepared(conn, self._idem_lookup, {"key": key})
        else:
            with self.reader.connect() as own:
                rows = _run_prepared(own, self._idem_lookup, {"key": key})
        return IdempotencyRecord(*rows[0]) if rows else None

    def _insert(self, conn: Connection, writes: Sequence[PendingWrite]) -> Appended:
        if self._fast:
            tip = self._driver_rows(conn, self._tip_sql, ())
            tip = tip[0] if tip else None
        else:
            tip = conn.execute(self._tip_query).first()
        versions = self._current_versions(conn, {w.stream_id for w in writes})
        values, spans, appended = self._chain_rows(writes, tip, versions)
        self._execute_insert(conn, values)
        if self._fast:
            conn.connection.driver_connection.executemany(self._span_sql, spans)
        else:
            conn.execute(event_spans.insert(), [dict(zip(_SPAN_KEYS, span)) for span in spans])
        return appended

    def _chain_rows(self, writes: Sequence[PendingWrite], tip, versions: dict[str, int]) -> tuple[list, list[tuple], Appended]:
        """Number, stamp and chain the rows of ``writes`` after ``tip`` (``(position, hash, recorded_at)`` or None).

        Checks each stream's expected version against ``versions`` (the
        current ones) first. Returns every row's values in one flat list, the
        spans (see ``schema.event_spans``) and the positions taken.
        """
        position, prev_hash, last_stamp = (tip[0], tip[1], tip[2]) if tip else (0, GENESIS_HASH, "")
        # Recorded times never go backwards, so that time -> position is monotone.
        now = max(utc_stamp(), last_stamp)
        first = position + 1
        prev_bytes = prev_hash.encode("ascii")
        values: list = []  # every row's 13 values, one row after another
        spans = []  # (first, last, tenant, correlation) of each run; see schema.event_spans
        span_tenant = span_correlation = span_first = None
        encode, digest_of = canonical_encoder.encode, sha256  # the chain's formula (chain.expected_hash), inlined: the hot loop
        for write in writes:
            stream_id = write.stream_id
            current = versions.get(stream_id, 0)
            _check_expected(stream_id, write.expected_version, current)
            for event_id, type_, schema, tenant, payload, metadata, correlation, recorded in write.events:
                position += 1
                current += 1
                if tenant != span_tenant or correlation != span_correlation or span_first is None:
                    if span_first is not None:
                        spans.append((span_first, position - 1, span_tenant, span_correlation))
                    span_first, span_tenant, span_correlation = position, tenant, correlation
                stamp = max(recorded, last_stamp) if recorded else now
                last_stamp = stamp
                canonical = encode((position, event_id, stream_id, current, type_, schema, tenant, payload, metadata, stamp))
                hasher = digest_of(prev_bytes)
                hasher.update(canonical)
                digest = hasher.hexdigest()
                values += (position, event_id, stream_id, current, type_, schema, tenant, payload, metadata, correlation, stamp, prev_hash, digest)
                prev_hash, prev_bytes = digest, digest.encode("ascii")
            versions[write.stream_id] = current
        if not values:
            raise ValueError("an append needs at least one event")
        spans.append((span_first, position, span_tenant, span_correlation))
        return values, spans, Appended(first, position, False, values)

    def _execute_insert(self, conn: Connection, values: list) -> None:
        """Insert rows given as their values in one flat list, row after row."""
        width = len(_KEYS)
        if self._insert_many_sql is not None:
            # Whole groups go in as multi-row INSERTs: one statement step
            # per ROWS_PER_INSERT rows instead of one per row.
            group = ROWS_PER_INSERT * width
            grouped = len(values) - len(values) % group
            cursor = conn.connection.driver_connection.cursor()
            try:
                if grouped:
                    cursor.executemany(self._insert_many_sql, [values[i : i + group] for i in range(0, grouped, group)])
                if grouped < len(values):
                    cursor.executemany(self._insert_sql, [values[i : i + width] for i in range(grouped, len(values), width)])
            finally:
                cursor.close()
        else:
            rows = [values[i : i + width] for i in range(0, len(values), width)]
            conn.execute(events.insert(), [dict(zip(_KEYS, row)) for row in rows])

    def _current_versions(self, conn: Connection, stream_ids: set[str]) -> dict[str, int]:
        # One max() per stream: answered from the end of the (stream_id,
        # stream_version) index, where a grouped IN query would read every row.
        found: dict[str, int] = {}
        for stream_id in sorted(stream_ids):
            if self._fast:
                rows = self._driver_rows(conn, self._version_sql, (stream_id,))
            else:
                rows = conn.execute(self._version_query, {"stream_id": stream_id}).fetchall()
            if rows and rows[0][0] is not None:
                found[stream_id] = rows[0][0]
        return found

    @staticmethod
    def _driver_rows(conn: Connection, sql: str, params) -> list[tuple]:
        cursor = conn.connection.driver_connection.cursor()
        try:
            cursor.execute(sql, tuple(params))
            return cursor.fetchall()
        finally:
            cursor.close()

    # -- notifications ---------------------------------------------------

    def add_listener(self, listener: Callable[[int], None]) -> None:
        """Call ``listener(position)`` after each commit: this process's at once, and on
        PostgreSQL every other process's too (LISTEN/NOTIFY)."""
        with self._lock:
            self._listeners.append(listener)
            if self._commit_listener is None and self.reader.dialect.name == "postgresql":
                self._commit_listener = dialects.CommitListener(self.reader, self._notify)

    def remove_listener(self, listener: Callable[[int], None]) -> None:
        try:
            self._listeners.remove(listener)
        except ValueError:
            pass

    def _notify(self, position: int) -> None:
        for listener in list(self._listeners):
            listener(position)

    def dispose(self) -> None:
        if self._commit_listener is not None:
            self._commit_listener.stop()
            self._commit_listener = None
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            if self._pg_driver is not None:
                self._pg_driver.close()
                self._pg_driver = None
        self.writer.dispose()
        self.reader.dispose()


def _check_expected(stream_id: str, expected: ExpectedVersion, current: int) -> None:
    if expected == ANY:
        return
    if expected == NO_STREAM:
        if current != 0:
            raise ConcurrencyError(stream_id, NO_STREAM, current)
        return
    if not isinstance(expected, int) or isinstance(expected, bool) or expected < 0:
        raise ValueError(f"expected_version must be 'any', 'no-stream' or a version >= 0, got {expected!r}")
    if current != expected:
        raise ConcurrencyError(stream_id, expected, current)
