"""The SQL recorder: the only code that writes and reads the ``events`` table.

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

from sqlalchemy import Connection, Engine, Integer, and_, bindparam, false, func, literal, select

from . import dialects
from .chain import CANONICAL_FIELDS, GENESIS_HASH, StoredRow, canonical_encoder
from .errors import ConcurrencyError, IdempotencyConflict
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


class EventPage(NamedTuple):
    """A page of events as one JSON array text (see :func:`dialects.envelope_json`)."""

    json: str
    count: int


class Appended(NamedTuple):
    first_position: int
    last_position: int
    replayed: bool


_KEYS = StoredRow._fields  # every column, in the envelope's order
_COLUMNS = tuple(events.c[name] for name in _KEYS)
_SPAN_KEYS = ("first_position", "last_position", "tenant", "correlation_id")
# What a reader of domain events needs: the envelope without the chain.
_EVENT_COLUMNS = tuple(events.c[name] for name in CANONICAL_FIELDS)


ROWS_PER_INSERT = 50  # rows per multi-row INSERT statement (13 parameters each)


def utc_stamp(moment: datetime | None = None) -> str:
    """RFC 3339 UTC with microseconds, as stored in ``recorded_at``."""
    if moment is not None:
        return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    # Every append stamps the time: format the second once, then only the micros.
    global _stamp_second
    second, micros = divmod(time.time_ns() // 1000, 1_000_000)
    if _stamp_second[0] != second:
        _stamp_second = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
    return f"{_stamp_second[1]}.{micros:06d}Z"


_stamp_second: tuple[int, str] = (-1, "")


class IdempotencyRecord(NamedTuple):
    fingerprint: str
    first_position: int
    last_position: int


class SQLRecorder:
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

    def append(
        self,
        writes: Sequence[PendingWrite],
        *,
        idempotency_key: str | None = None,
        fingerprint: str | None = None,
    ) -> Appended:
        if self._pg is not None:
            appended = self._append_pipelined(writes, idempotency_key, fingerprint or "")
            if not appended.replayed:
                self._notify(appended.last_position)
            return appended
        with self.transaction() as conn:
            if idempotency_key is not None:
                seen = self._idempotent(conn, idempotency_key, fingerprint or "")
                if seen is not None:
                    return seen
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

    def _append_pipelined(self, writes: Sequence[PendingWrite], key: str | None, fingerprint: str) -> Appended:
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
                with driver.pipeline():
                    driver.execute("BEGIN")
                    driver.execute(dialects.PG_LOCK_SQL, (dialects.APPEND_LOCK_KEY,))
                    head = driver.execute(*statements.head(streams, key)).fetchone()  # the first round trip
                    tip_position, tip_hash, tip_stamp, current, known, first, last = head
                    if known is not None:
                        driver.execute("ROLLBACK")
                        if known != fingerprint:
                            raise IdempotencyConflict(key)
                        return Appended(first, last, True)
                    tip = (tip_position, tip_hash, tip_stamp) if tip_position is not None else None
                    versions = {stream_id: version for stream_id, version in zip(streams, current) if version is not None}
                    values, spans, appended = self._chain_rows(writes, tip, versions)
                    # One statement carries up to ROWS_PER_STATEMENT events and spans; a bigger append sends the rest in more.
                    width, most = len(_KEYS), statements.ROWS_PER_STATEMENT
                    for start in range(most * width, len(values), most * width):
                        part = values[start : start + most * width]
                        driver.execute(statements.insert(len(part) // width), part)
                    for start in range(most, len(spans), most):
                        part = spans[start : start + most]
                        driver.execute(statements.insert_spans(len(part)), [value for span in part for value in span])
                    params = values[: most * width]
                    params += (value for span in spans[:most] for value in span)
                    if key is not None:
                        params += (key, fingerprint, appended.first_position, appended.last_position)
                    params += (dialects.NOTIFY_CHANNEL, str(appended.last_position))
                    driver.execute(statements.write(min(len(values) // width, most), min(len(spans), most), key is not None), params)
                    driver.execute("COMMIT")
                # Leaving the pipeline is the second round trip: it raises any error of the statements above.
            except BaseException:
                self._abandon(driver)
                raise
        return appended

    def _pipeline_connection(self):
        """The psycopg connection of :meth:`_append_pipelined`, in autocommit mode; made on first use and after a failure."""
        driver = self._pg_driver
        if driver is None or driver.closed:
            raw = self.writer.raw_connection()
            driver = raw.driver_connection
            raw.detach()  # the recorder owns it from now on; dispose() closes it
            driver.rollback()
            driver.autocommit = True
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
        return values, spans, Appended(first, position, False)

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

    # -- reading ---------------------------------------------------------

    def select_rows(self, **filters) -> list[StoredRow]:
        """Rows exactly as stored, hashes included (audit, export)."""
        return [StoredRow._make(r) for r in self._select("rows", **filters)]

    def select_events(self, **filters) -> list[tuple]:
        """Plain tuples of the :data:`~mnemolog.eventstore.chain.CANONICAL_FIELDS`: the fast path."""
        return self._select("events", **filters)

    @property
    def builds_pages(self) -> bool:
        """Whether :meth:`select_event_page` is available on this dialect."""
        return self._envelope is not None

    def select_event_page(self, **filters) -> EventPage:
        """The rows of :meth:`select_events` as one JSON array of envelopes,
        built by the database (only where :attr:`builds_pages`)."""
        text, count = self._select("page", **filters)[0]
        return EventPage(text or "[]", count)

    def _select(
        self,
        kind: str,
        *,
        after: int = 0,
        until: int | None = None,
        limit: int | None = None,
        tenant: str | None = None,
        types: Sequence[str] | None = None,
        stream_id: str | None = None,
        correlation_id: str | None = None,
        from_version: int | None = None,
        to_version: int | None = None,
        conn: Connection | None = None,
    ) -> list[tuple]:
        values = {
            "after": after,
            "until": until,
            "limit": limit,
            "tenant": tenant,
            "stream_id": stream_id,
            "from_version": from_version if stream_id is not None else None,
            "to_version": to_version if stream_id is not None else None,
            "correlation_id": correlation_id,
            "offset": 0,
        }
        types = None if types is None else list(types)
        for i, name in enumerate(types or ()):
            values[f"type_{i}"] = name
        # One compiled statement per filter shape: compiling Core costs far
        # more than running these indexed queries.
        shape = (kind, len(types) if types is not None else None) + tuple(
            values[k] is not None for k in ("until", "limit", "tenant", "stream_id", "from_version", "to_version", "correlation_id")
        )
        prepared = self._prepared.get(shape)
        if prepared is None:
            prepared = self._prepared[shape] = self._prepare(kind, values, types)
        if conn is not None:
            return _run_prepared(conn, prepared, values)
        with self.reader.connect() as own:
            return _run_prepared(own, prepared, values)

    def _prepare(self, kind: str, values: dict, types: list[str] | None):
        """Compile the query of one shape; ``kind`` is rows, events or page.

        Tenant and correlation reads (outside one stream) walk the matching
        ``event_spans`` in order and read each span's positions: the spans'
        index replaces an index entry per event.
        """
        clauses = [events.c.position > bindparam("after")]
        if values["until"] is not None:
            clauses.append(events.c.position <= bindparam("until"))
        if values["tenant"] is not None:
            clauses.append(events.c.tenant == bindparam("tenant"))
        if types is not None:
            if types:
                clauses.append(events.c.type.in_([bindparam(f"type_{i}") for i in range(len(types))]))
            else:
                clauses.append(false())  # an empty list selects nothing
        if values["stream_id"] is not None:
            clauses.append(events.c.stream_id == bindparam("stream_id"))
            if values["from_version"] is not None:
                clauses.append(events.c.stream_version >= bindparam("from_version"))
            if values["to_version"] is not None:
                clauses.append(events.c.stream_version <= bindparam("to_version"))
        if values["correlation_id"] is not None:
            clauses.append(events.c.correlation_id == bindparam("correlation_id"))
        if kind == "page":
            columns = (self._envelope.label("envelope"),)
        else:
            columns = _COLUMNS if kind == "rows" else _EVENT_COLUMNS
        by_span = values["stream_id"] is None and (values["tenant"] is not None or values["correlation_id"] is not None)
        if by_span:
            spans = event_spans.c
            clauses.append(spans.last_position > bindparam("after"))
            if values["until"] is not None:
                clauses.append(spans.first_position <= bindparam("until"))
            if values["tenant"] is not None:
                clauses.append(spans.tenant == bindparam("tenant"))
            if values["correlation_id"] is not None:
                clauses.append(spans.correlation_id == bindparam("correlation_id"))
            # Spans never overlap, so span order then position is position order.
            query = (
                select(*columns)
                .select_from(event_spans.join(events, events.c.position.between(spans.first_position, spans.last_position)))
                .where(and_(*clauses))
                .order_by(spans.last_position, spans.first_position, events.c.position)
            )
        else:
            query = select(*columns).where(and_(*clauses)).order_by(events.c.position)
        if values["limit"] is not None:
            query = query.limit(bindparam("limit")).offset(bindparam("offset"))
        if kind == "page":  # aggregate the ordered rows into one text
            rows = query.subquery()
            query = select(dialects.concat_rows(rows.c.envelope), func.count())
        compiled = query.compile(dialect=self.reader.dialect)
        if compiled.positional:
            return (str(compiled), tuple(compiled.positiontup), query)
        return (None, None, query)

    def iter_rows(self, *, after: int = 0, until: int | None = None, batch_size: int = 5000, raw: bool = True, **filters) -> Iterator[list]:
        """Stream rows in batches, never holding the whole log in memory.

        ``raw=True`` gives :class:`StoredRow`s with hashes; otherwise the
        tuples of :meth:`select_events`.
        """
        fetch = self.select_rows if raw else self.select_events
        while True:
            batch = fetch(after=after, until=until, limit=batch_size, **filters)
            if not batch:
                return
            yield batch
            after = batch[-1][0]
            if len(batch) < batch_size:
                return

    def last_position(self, conn: Connection | None = None) -> int:
        if conn is not None:
            return _run_prepared(conn, self._last_position, {})[0][0] or 0
        with self.reader.connect() as own:
            return _run_prepared(own, self._last_position, {})[0][0] or 0

    def tip(self) -> tuple[int, str]:
        with self.reader.connect() as conn:
            row = conn.execute(select(events.c.position, events.c.hash).order_by(events.c.position.desc()).limit(1)).first()
        return (row.position, row.hash) if row else (0, GENESIS_HASH)

    def row_at(self, position: int) -> StoredRow | None:
        rows = self.select_rows(after=position - 1, until=position)
        return rows[0] if rows else None

    def stream_version(self, stream_id: str) -> int:
        with self.reader.connect() as conn:
            return conn.execute(select(func.max(events.c.stream_version)).where(events.c.stream_id == stream_id)).scalar() or 0

    def position_at(self, stamp: str) -> int:
        """The last position recorded at or before ``stamp`` (0 if none).

        Recorded times never go backwards, so a binary search over positions
        (primary-key lookups) finds it without an index on the time.
        """
        query = select(events.c.recorded_at).where(events.c.position == bindparam("p"))
        with self.reader.begin() as conn:
            low, high = 0, self.last_position(conn)
            while low < high:
                middle = (low + high + 1) // 2
                if conn.execute(query, {"p": middle}).scalar() <= stamp:
                    low = middle
                else:
                    high = middle - 1
            return low

    def existing_event_ids(self, event_ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        with self.reader.connect() as conn:
            for start in range(0, len(event_ids), 500):
                chunk = list(event_ids[start : start + 500])
                found.update(conn.execute(select(events.c.event_id).where(events.c.event_id.in_(chunk))).scalars())
        return found

    def spans_overlapping(self, first: int, last: int) -> list[tuple[int, int, str, str | None]]:
        """``event_spans`` rows that overlap positions ``first..last``, in order."""
        s = event_spans.c
        query = (
            select(s.first_position, s.last_position, s.tenant, s.correlation_id)
            .where(s.last_position >= first, s.first_position <= last)
            .order_by(s.first_position)
        )
        with self.reader.connect() as conn:
            return [tuple(row) for row in conn.execute(query)]

    def tenant_commits(self, tenant: str, limit: int) -> tuple[int, list[tuple[int, int, str | None, str]]]:
        """The tenant's commits as ``(count, [(first, last, correlation_id, recorded_at), …])`` in log order.

        A commit is one ``event_spans`` row (a run of one append's events with
        the same correlation id). With more than ``limit`` of them, at most
        ``limit`` are returned, spread evenly over the tenant's positions, the
        first and the latest always among them: each is the first commit at
        or after one of ``limit`` evenly spaced positions, one seek in the
        spans' tenant index, so the cost follows ``limit``, not the count.
        """
        spans = event_spans.c
        limit = max(int(limit), 2)
        with self.reader.begin() as conn:
            ends = conn.execute(
                select(func.count(), func.min(spans.last_position), func.max(spans.last_position)).where(spans.tenant == tenant)
            ).first()
            count, first, last = ends[0] or 0, ends[1], ends[2]
            if count == 0:
                return 0, []
            details = (spans.first_position, spans.last_position, spans.correlation_id, events.c.recorded_at)
            if count <= limit:
                query = (
                    select(*details)
                    .join(events, events.c.position == spans.last_position)
                    .where(spans.tenant == tenant)
                    .order_by(spans.last_position)
                )
                return count, [tuple(row) for row in conn.execute(query)]
            steps = select(literal(0, Integer).label("i")).cte("steps", recursive=True)
            steps = steps.union_all(select((steps.c.i + 1).label("i")).where(steps.c.i + 1 < limit))
            at = event_spans.alias("at")
            target = first + (steps.c.i * (last - first)) // (limit - 1)
            pick = select(func.min(at.c.last_position)).where(at.c.tenant == tenant, at.c.last_position >= target).correlate(steps).scalar_subquery()
            picked = sorted({p for (p,) in conn.execute(select(pick).select_from(steps)) if p is not None})
            rows: list[tuple[int, int, str | None, str]] = []
            for start in range(0, len(picked), 500):  # the commits' details, by primary keys and the tenant index
                chunk = picked[start : start + 500]
                query = (
                    select(*details)
                    .join(events, events.c.position == spans.last_position)
                    .where(spans.tenant == tenant, spans.last_position.in_(chunk))
                    .order_by(spans.last_position)
                )
                rows += [tuple(row) for row in conn.execute(query)]
            return count, rows

    def counts(self) -> dict[str, object]:
        with self.reader.connect() as conn:
            total = conn.execute(select(func.count()).select_from(events)).scalar() or 0
            by_type = {t: n for t, n in conn.execute(select(events.c.type, func.count()).group_by(events.c.type))}
            spans = event_spans.c
            by_tenant = {
                t: n
                for t, n in conn.execute(
                    select(spans.tenant, func.sum(spans.last_position - spans.first_position + 1)).group_by(spans.tenant)
                )
            }
            streams = conn.execute(select(func.count(func.distinct(events.c.stream_id)))).scalar() or 0
            # Recorded times never go backwards: the first and last rows bound them.
            span = conn.execute(
                select(
                    select(events.c.recorded_at).order_by(events.c.position).limit(1).scalar_subquery(),
                    select(events.c.recorded_at).order_by(events.c.position.desc()).limit(1).scalar_subquery(),
                )
            ).first()
        return {
            "events": total,
            "streams": streams,
            "by_type": by_type,
            "by_tenant": by_tenant,
            "first_recorded_at": span[0],
            "last_recorded_at": span[1],
        }

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


def _run_prepared(conn: Connection, prepared: tuple, values: dict) -> list[tuple]:
    """Run a statement from ``_prepare``: straight to the DBAPI cursor when positional."""
    sql, names, query = prepared
    if sql is None:
        return [tuple(row) for row in conn.execute(query, {k: v for k, v in values.items() if v is not None})]
    cursor = conn.connection.driver_connection.cursor()
    try:
        cursor.execute(sql, tuple(values[name] for name in names))
        return cursor.fetchall()
    finally:
        cursor.close()


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
