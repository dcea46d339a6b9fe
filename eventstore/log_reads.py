"""The log's reads: the ``events`` table filtered by tenant, stream, type and correlation, and the reports over it.

:class:`LogReads` is the reading half of :class:`~mnemolog.eventstore.recorder.SQLRecorder`
(which writes): it needs the recorder's ``reader`` engine, its cache of
compiled statements ``_prepared``, the dialect's page builder ``_envelope``
and the compiled ``_last_position`` query.
"""

from __future__ import annotations

import contextlib
import operator
from typing import Iterator, NamedTuple, Sequence

from sqlalchemy import Connection, Integer, and_, bindparam, false, func, literal, select

from . import dialects
from .bounds import holds_nul
from .chain import CANONICAL_FIELDS, GENESIS_HASH, StoredRow
from .schema import event_spans, events

_COLUMNS = tuple(events.c[name] for name in StoredRow._fields)  # every column, in the envelope's order
_EVENT_COLUMNS = tuple(events.c[name] for name in CANONICAL_FIELDS)
_POSITION = operator.itemgetter(CANONICAL_FIELDS.index("position"))
STREAMS_CHUNK = 500  # streams an ``IN`` list of :meth:`LogReads.select_streams` names (SQLite allows 32,766 parameters)


class EventPage(NamedTuple):
    """A page of events as one JSON array (see :func:`dialects.envelope_json`), UTF-8,
    with how many they are and the last one's position (where the next page starts)."""

    json: bytes | str
    count: int
    last: int = 0


class LogReads:
    """Reads of the log, each in a connection of its own (or the ``conn`` given)."""

    def select_rows(self, **filters) -> list[StoredRow]:
        """Rows exactly as stored, hashes included (audit, export)."""
        return [StoredRow._make(r) for r in self._select("rows", **filters)]

    def select_events(self, **filters) -> list[tuple]:
        """Plain tuples of the :data:`~mnemolog.eventstore.chain.CANONICAL_FIELDS`: the fast path."""
        return self._select("events", **filters)

    def select_streams(
        self, stream_ids: Sequence[str], *, tenant: str | None = None, until: int | None = None, chunk: int = STREAMS_CHUNK, conn: Connection | None = None
    ) -> list[tuple]:
        """The tuples of :meth:`select_events` of every event of ``stream_ids`` (in ``tenant``, up to ``until``), in
        position order: one indexed query for each ``chunk`` of streams, rather than one a stream."""
        wanted = sorted({s for s in stream_ids if not holds_nul((s,))})
        if not wanted or holds_nul((tenant,)):
            return []
        clauses = [events.c.stream_id.in_(bindparam("streams", expanding=True))]
        values: dict = {}
        if tenant is not None:
            clauses.append(events.c.tenant == bindparam("tenant"))
            values["tenant"] = tenant
        if until is not None:
            clauses.append(events.c.position <= bindparam("until"))
            values["until"] = until
        query = select(*_EVENT_COLUMNS).where(and_(*clauses))
        found: list[tuple] = []
        with contextlib.nullcontext(conn) if conn is not None else self.reader.connect() as own:
            for start in range(0, len(wanted), chunk):
                found += map(tuple, own.execute(query, {**values, "streams": wanted[start : start + chunk]}))
        found.sort(key=_POSITION)
        return found

    @property
    def builds_pages(self) -> bool:
        """Whether :meth:`select_event_page` is available on this dialect."""
        return self._envelope is not None

    def select_event_page(self, **filters) -> EventPage:
        """The rows of :meth:`select_events` as one JSON array of envelopes,
        built by the database (only where :attr:`builds_pages`)."""
        elements, count, last = self._select("page", **filters)[0]
        return EventPage(b"".join((b"[", elements, b"]")) if elements else b"[]", count, last or 0)

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
        if holds_nul((tenant, stream_id, correlation_id, *(types or ()))):
            return [(None, 0, None)] if kind == "page" else []
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
            columns = (self._envelope.label("envelope"), events.c.position)
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
            query = select(dialects.concat_rows(rows.c.envelope), func.count(), func.max(rows.c.position))
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
        if holds_nul((stream_id,)):
            return 0
        with self.reader.connect() as conn:
            return conn.execute(select(func.max(events.c.stream_version)).where(events.c.stream_id == stream_id)).scalar() or 0

    def position_and_head(self, stamp: str) -> tuple[int, int]:
        """The last position recorded at or before ``stamp`` (0 if none), and the log's head, as one read saw them.

        Recorded times never go backwards, so a binary search over positions
        (primary-key lookups) finds it without an index on the time.
        """
        query = select(events.c.recorded_at).where(events.c.position == bindparam("p"))
        with self.reader.begin() as conn:
            low, high = 0, self.last_position(conn)
            head = high
            while low < high:
                middle = (low + high + 1) // 2
                if conn.execute(query, {"p": middle}).scalar() <= stamp:
                    low = middle
                else:
                    high = middle - 1
            return low, head

    def existing_event_ids(self, event_ids: Sequence[str]) -> set[str]:
        return set(self.event_positions(event_ids))

    def event_positions(self, event_ids: Sequence[str]) -> dict[str, int]:
        """The position of each of ``event_ids`` the log holds."""
        return {row.event_id: row.position for row in self._by_event_id((events.c.event_id, events.c.position), event_ids)}

    def rows_by_event_id(self, event_ids: Sequence[str]) -> dict[str, StoredRow]:
        """The stored row of each of ``event_ids`` the log holds."""
        return {row.event_id: StoredRow._make(row) for row in self._by_event_id(_COLUMNS, event_ids)}

    def _by_event_id(self, columns, event_ids: Sequence[str]) -> Iterator:
        with self.reader.connect() as conn:
            for start in range(0, len(event_ids), 500):
                yield from conn.execute(select(*columns).where(events.c.event_id.in_(list(event_ids[start : start + 500]))))

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

    def tenant_commits(self, tenant: str, limit: int, since: int = 0) -> tuple[int, list[tuple[int, int, str | None, str]]]:
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
        if holds_nul((tenant,)):
            return 0, []
        floor = max(int(since), 0)  # commits ending before it are left out (a tenant's before its last drop)
        with self.reader.begin() as conn:
            ends = conn.execute(
                select(func.count(), func.min(spans.last_position), func.max(spans.last_position)).where(spans.tenant == tenant, spans.last_position >= floor)
            ).first()
            count, first, last = ends[0] or 0, ends[1], ends[2]
            if count == 0:
                return 0, []
            details = (spans.first_position, spans.last_position, spans.correlation_id, events.c.recorded_at)
            if count <= limit:
                query = (
                    select(*details)
                    .join(events, events.c.position == spans.last_position)
                    .where(spans.tenant == tenant, spans.last_position >= floor)
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
            # int(): PostgreSQL's sum() of bigints is a numeric (a Decimal), SQLite's an integer.
            by_tenant = {
                t: int(n)
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
