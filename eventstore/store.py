"""The public face of the log: :class:`EventStore`.

``EventStore.open(data_dir or URL)`` migrates the schema, then offers append
(one stream or several in one transaction), reads, a live subscription, and
the hash-chain checks auditors use.
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
from datetime import datetime, timezone
from hashlib import sha256
from pathlib import Path
from typing import AsyncIterator, Callable, Iterable, Iterator, NamedTuple, Sequence

import msgspec
from sqlalchemy import Connection

from . import catalogue as c
from . import dialects, sealing
from . import migrate
from .bounds import check_name, check_stream_id
from .chain import GENESIS_HASH, ChainBreak, Digest, StoredRow, VerifyResult, digests_of, ends_before, walk
from .guards import GuardProblem, check_guards
from .reference import ReferenceCheck, anchors_of
from .seal_check import first_unopened
from .erased import late_forgets
from .ids import new_ids
from .events import (
    DomainEvent,
    Metadata,
    encode_payload,
    encoder,
    type_name,
)
from .log_reads import EventPage
from .recorded import PAGE_ROWS, PageDecoder, RecordedEvent, decode_rows
from .own_appends import AppendedHere, OwnAppends
from .read_ahead import pages_ahead
from .schema import MAX_FINGERPRINT
from .recorder import ANY, NO_STREAM, Appended, ExpectedVersion, PendingEvent, PendingWrite, SQLRecorder, utc_stamp
from .sealing import Sealer, key_store_path
from .keystore import KeyStore, KeysRetired
from .model import Conflict
from .settings import Settings

__all__ = ["ANY", "NO_STREAM", "AppendResult", "EventStore", "RecordedEvent", "StreamAppend", "Digest", "resolve_url"]


class Commit(msgspec.Struct, frozen=True):
    """One append's run of a tenant's events under one correlation id: positions ``first_position..position``."""

    first_position: int
    position: int
    correlation_id: str | None
    recorded_at: str  # of its last event (UTC, as stored)


class AppendResult(msgspec.Struct, frozen=True):
    first_position: int
    last_position: int
    replayed: bool = False

    @property
    def positions(self) -> range:
        return range(self.first_position, self.last_position + 1)


class StreamAppend(NamedTuple):
    stream_id: str
    events: Sequence[DomainEvent]
    expected_version: ExpectedVersion = ANY


def resolve_url(settings: Settings | None = None) -> str:
    settings = settings or Settings()
    if settings.log_url:
        return settings.log_url
    return dialects.sqlite_url(Path(settings.data_dir) / "events.db")


_OPENING: dict[type, bool] = {}  # event class -> whether Sealer.unseal may act on it (sealing.opens)

_STAMPS: dict[type, tuple[str, int]] = {}  # event class -> (type tag, schema version)


def _stamp_of(cls: type[DomainEvent]) -> tuple[str, int]:
    stamp = _STAMPS[cls] = (type_name(cls), cls.schema_version)
    return stamp


def fingerprint_of(writes: Sequence[StreamAppend]) -> str:
    """What an idempotency key is bound to: streams, types and payloads."""
    digest = sha256()
    for write in writes:
        digest.update(write.stream_id.encode())
        for event in write.events:
            digest.update(encode_payload(event))
    return digest.hexdigest()



#: Times an append seals its events before it gives up: each new try follows a forget that retired a key it used.
SEAL_ATTEMPTS = 5


def _pending(writes: Sequence["StreamAppend"], ids: Sequence[str], tenant: str, payloads: Sequence[str], meta_text: str, correlation: str | None) -> list[PendingWrite]:
    """The records of an append, its events' payloads as stored. The hot path of every append: PendingEvents
    are made with ``tuple.__new__``, and each class's tag and version looked up once."""
    make, stamp_of = tuple.__new__, _STAMPS
    pending = []
    i = 0
    for write in writes:
        records = []
        for event in write.events:
            cls = type(event)
            stamp = stamp_of.get(cls) or _stamp_of(cls)
            records.append(make(PendingEvent, (ids[i], stamp[0], stamp[1], tenant, payloads[i], meta_text, correlation, None)))
            i += 1
        stream_id = write.stream_id if type(write.stream_id) is str else str(write.stream_id)
        pending.append(PendingWrite(stream_id, write.expected_version, records))
    return pending


class EventStore:
    """The append-only, hash-chained event log."""

    def __init__(self, recorder: SQLRecorder, url: str, sealer: Sealer | None = None):
        self._recorder = recorder
        self.url = url
        self._pages = PageDecoder()
        #: The latest appends' events, for this store's writer to project without reading them back (see .own_appends).
        self.own_appends = OwnAppends(self._open_sealed)
        self.appended_here = AppendedHere()  # the positions it appended: what lies between, others did (see .own_appends)
        # Personal fields are sealed on append and opened on read (see .sealing); without a
        # sealer of its own a store seals nothing but still opens what it finds beside its log.
        self.sealer = sealer or Sealer(KeyStore(key_store_path(url, Settings())), enabled=False)

    @classmethod
    def open(
        cls,
        target: str | os.PathLike | None = None,
        *,
        settings: Settings | None = None,
        synchronous: str | None = None,
        migrate_schema: bool = True,
    ) -> "EventStore":
        """Open a data directory (``events.db`` inside it) or a SQLAlchemy URL."""
        settings = settings or Settings()
        if target is None:
            url = resolve_url(settings)
        elif "://" in str(target):
            url = str(target)
        else:
            url = dialects.sqlite_url(Path(target) / "events.db")
        if url.startswith("sqlite:///"):
            Path(url[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
        writer, reader = dialects.create_log_engines(url, synchronous=synchronous or settings.synchronous, busy_timeout=float(settings.busy_timeout))
        if migrate_schema:
            migrate.upgrade_on_open(url, reader, float(settings.busy_timeout))
        store = cls(SQLRecorder(writer, reader), url, Sealer.open(url, settings))
        store.poll_seconds = float(settings.subscribe_poll_seconds)
        store.finish_forgets()
        return store

    def finish_forgets(self) -> int:
        """Destroy the keys that a recorded ``SubjectForgotten`` names and the key store still holds; the keys destroyed.

        A forget appends its event, then destroys the keys (see
        :mod:`.commands.subjects`): a process killed between the two leaves the
        keys retired, and the subject readable although the log says it was
        forgotten. Every open finishes it. Only retired keys can be in that gap,
        so a key store without any costs one query; one with some, one read of
        the (indexed) ``SubjectForgotten`` events. A retired key no such event
        names is left alone: its forget was killed before its event (nothing
        was forgotten) or is under way in another process. A forget killed
        after destroying the keys but before rewriting the key file (their
        bytes may linger in its WAL or free pages) is rewritten too.
        """
        keys = self.sealer.keys
        retired = keys.retired()
        if not retired:
            keys.scrub_if_due()  # killed after destroying the keys, before rewriting the key file
            return 0
        forgets = self.read_all(types=["SubjectForgotten"])
        pending = sorted(retired & {k for r in forgets for k in r.event.key_ids})
        if not pending:
            keys.scrub_if_due()
            return 0
        for tenant, event, metadata in late_forgets(self, forgets, set(pending)):
            self.append_batch([StreamAppend(c.tenant_stream(tenant), [event])], tenant=tenant, metadata=metadata)
        return keys.forget(pending)

    poll_seconds: float = 1.0
    #: The last position this store object appended (0: none yet): what a writer must project to read its own writes.
    #: Written only under :attr:`write_lock`, together with the rows handed over (see :meth:`_commit`); read without it
    #: (an int, replaced whole), it is the value of some completed append, never of one half done.
    appended_through: int = 0

    @property
    def recorder(self) -> SQLRecorder:
        return self._recorder

    @property
    def write_lock(self) -> threading.RLock:
        """The lock every append of this store takes (re-entrant); a writer that holds it appends without interleaving."""
        return self._recorder.write_lock

    def add_commit_listener(self, listener) -> None:
        """Call ``listener(position)`` from another thread after each commit (see ``SQLRecorder.add_listener``)."""
        self._recorder.add_listener(listener)

    def remove_commit_listener(self, listener) -> None:
        self._recorder.remove_listener(listener)

    def lease(self, name: str) -> dialects.Lease:
        """A lease named ``name`` that one process at a time holds across every server on this log."""
        return dialects.Lease(self._recorder.reader, name)

    def close(self) -> None:
        self._recorder.dispose()
        self.sealer.close()

    def __enter__(self) -> "EventStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- appending ---------------------------------------------------------

    def append(
        self,
        stream_id: str,
        events: Sequence[DomainEvent],
        *,
        expected_version: ExpectedVersion = ANY,
        tenant: str = "default",
        idempotency_key: str | None = None,
        metadata: Metadata | None = None,
        fingerprint: str | None = None,
    ) -> AppendResult:
        """Append events to one stream, atomically: all of them or none."""
        return self.append_batch(
            [StreamAppend(stream_id, events, expected_version)],
            tenant=tenant,
            idempotency_key=idempotency_key,
            metadata=metadata,
            fingerprint=fingerprint,
        )

    def append_batch(
        self,
        writes: Sequence[StreamAppend],
        *,
        tenant: str = "default",
        idempotency_key: str | None = None,
        metadata: Metadata | None = None,
        fingerprint: str | None = None,
    ) -> AppendResult:
        """Append to several streams in one transaction, in the order given.

        With an idempotency key, a repeat of the same content returns the
        original positions and writes nothing; ``fingerprint`` lets a caller
        bind the key to its own request (by default: the events' content).
        """
        if not writes or not any(w.events for w in writes):
            raise ValueError("an append needs at least one event")
        if not tenant:
            raise ValueError("tenant must not be empty")
        if type(tenant) is not str:  # stored, and read back, as a plain str (see .own_appends)
            tenant = str(tenant)
        metadata = metadata or Metadata()
        check_name("tenant", tenant)
        check_name("correlation_id", metadata.correlation_id)
        check_name("idempotency_key", idempotency_key)
        check_name("fingerprint", fingerprint, MAX_FINGERPRINT)
        for write in writes:
            check_stream_id(write.stream_id if type(write.stream_id) is str else str(write.stream_id))
        if idempotency_key is not None:
            metadata = msgspec.structs.replace(metadata, idempotency_key=idempotency_key)
            fingerprint = fingerprint or fingerprint_of(writes)
        meta_text = encoder.encode(metadata).decode()
        ids = new_ids(sum(len(w.events) for w in writes))
        events = [e for w in writes for e in w.events]
        for _ in range(SEAL_ATTEMPTS):
            # Payloads as stored: personal fields sealed, the whole batch at once, or escaped plaintext (see .sealing).
            used: set[str] = set()
            check = None
            if self.sealer.enabled:
                # Another process may have retired a key this one holds: the check in the log's transaction finds
                # it and refreshes the key caches, and the batch is sealed again, with the subject's new key.
                keys = self.sealer.keys
                check = functools.partial(keys.require_live, keys.mark(), used)
            payloads = self.sealer.payloads(events, ids, tenant, used)
            bound = fingerprint
            if fingerprint is not None and used:  # a sealed write's fingerprint, keyed: a forget leaves nothing to check a guess against
                bound = self.sealer.keys.keyed_fingerprint(fingerprint, used)
            # For the hand-over to this store's catch-up, each event as a read opens it: its stored payload, or when
            # sealing is on the event itself, encoded only if a catch-up takes it (see .own_appends).
            plain = events if self.sealer.enabled else payloads
            pending = _pending(writes, ids, tenant, payloads, meta_text, metadata.correlation_id)
            try:
                appended = self._commit(pending, idempotency_key, bound, plain, check)
            except KeysRetired:
                continue  # sealed again, with the subject's new key
            return AppendResult(appended.first_position, appended.last_position, appended.replayed)
        raise Conflict(f"the keys of this append's subjects were retired {SEAL_ATTEMPTS} times while it was written: forgets under way; retry")

    def append_records(self, writes: Sequence[PendingWrite]) -> Appended:
        """Append already-encoded records (import): payloads are stored as given."""
        for write in writes:
            check_stream_id(write.stream_id)
            for record in write.events:
                check_name("tenant", record.tenant)
                check_name("correlation_id", record.correlation_id)
        return self._commit(writes, None, None, None)

    def _commit(
        self, pending: Sequence[PendingWrite], idempotency_key: str | None, fingerprint: str | None, plain: list | None, check: Callable[[], None] | None = None
    ) -> Appended:
        """Append through the recorder under the write lock (``check`` run in its transaction, see
        ``SQLRecorder.append``), and note what was appended: :attr:`appended_through`, and the rows
        handed over to this store's catch-up (``plain``: each event's payload as a read opens it; None:
        hold nothing)."""
        with self.write_lock:
            try:
                appended = self._recorder.append(pending, idempotency_key=idempotency_key, fingerprint=fingerprint, check=check)
            except BaseException:
                self.own_appends.drop()
                raise
            if not appended.replayed:
                self.appended_through = max(self.appended_through, appended.last_position)
                self.appended_here.note(appended.first_position, appended.last_position)
                if plain is None or appended.rows is None:
                    self.own_appends.drop()  # imported records: read back
                else:
                    try:
                        self.own_appends.hold(appended.rows, len(StoredRow._fields), plain)
                    except Exception:  # committed all the same: its catch-up reads it back
                        self.own_appends.drop()
        return appended

    def take_own_appends(self, after: int, until: int, limit: int | None = None) -> list[RecordedEvent] | None:
        """The events this store appended at ``after + 1`` onwards, as :meth:`read_all` would return them,
        if it still holds them and they end at or before ``until``; else None (read the log). See :mod:`.own_appends`."""
        return self.own_appends.take(after, until, limit)

    # -- reading -----------------------------------------------------------

    def _read(self, after: int = 0, limit: int | None = None, conn: Connection | None = None, **filters) -> list[RecordedEvent]:
        """Events after ``after`` matching ``filters``, their sealed fields opened (see :meth:`_read_stored`)."""
        events, sealable = self._read_stored(after, limit, conn, **filters)
        return self._open_sealed(events) if sealable else events

    def _open_sealed(self, events: list[RecordedEvent]) -> list[RecordedEvent]:
        """``events`` with sealed fields opened; events of a class unseal never acts on are passed over without a call."""
        self.sealer.keys.refresh()  # another process may have forgotten a key this one holds
        unseal, replace, opening = self.sealer.unseal, msgspec.structs.replace, _OPENING
        for i, recorded in enumerate(events):
            event = recorded.event
            cls = type(event)
            opens = opening.get(cls)
            if opens is None:
                opens = opening[cls] = sealing.opens(cls)
            if opens:
                opened = unseal(event, recorded.event_id)
                if opened is not event:
                    events[i] = replace(recorded, event=opened)
        return events

    def _read_stored(
        self, after: int = 0, limit: int | None = None, conn: Connection | None = None, **filters
    ) -> tuple[list[RecordedEvent], bool]:
        """Events after ``after`` matching ``filters`` (see ``SQLRecorder.select_events``), as stored,
        and whether any of them may need unsealing (False only when known for certain).

        Where the database builds JSON pages, they are read PAGE_ROWS at a
        time in one read transaction and each is decoded by one msgspec
        call; a page that needs upcasting is read again row by row.
        """
        recorder = self._recorder
        if not recorder.builds_pages:
            return decode_rows(recorder.select_events(after=after, limit=limit, conn=conn, **filters)), True
        if conn is None:
            with recorder.reader.begin() as own:
                return self._read_stored(after, limit, own, **filters)
        out: list[RecordedEvent] = []
        sealable = False
        while limit is None or len(out) < limit:
            want = PAGE_ROWS if limit is None else min(PAGE_ROWS, limit - len(out))
            page, opening = self._decode_page(recorder.select_event_page(after=after, limit=want, conn=conn, **filters), after, want, conn, filters)
            sealable = sealable or opening
            out.extend(page)
            if len(page) < want:
                break
            after = page[-1].position
        return out, sealable

    def _decode_page(self, page: EventPage, after: int, rows: int, conn: Connection | None, filters: dict) -> tuple[list[RecordedEvent], bool]:
        """A page's events, read again row by row if the decoder refuses it (a version that needs upcasting),
        and whether any may need unsealing."""
        events, opening = self._pages.decode_sealable(page)
        if events is None:
            return decode_rows(self._recorder.select_events(after=after, limit=rows, conn=conn, **filters)), True
        return events, opening

    def read_stream(self, stream_id: str, from_version: int = 1, to_version: int | None = None) -> list[RecordedEvent]:
        return self._read(stream_id=stream_id, from_version=from_version, to_version=to_version)

    def stream_version(self, stream_id: str) -> int:
        return self._recorder.stream_version(stream_id)

    def read_all(
        self,
        after: int = 0,
        limit: int | None = None,
        *,
        tenant: str | None = None,
        types: Sequence[str] | None = None,
        until: int | None = None,
        stream_id: str | None = None,
        correlation_id: str | None = None,
    ) -> list[RecordedEvent]:
        return self._read(
            after=after,
            until=until,
            limit=limit,
            tenant=tenant,
            types=types,
            stream_id=stream_id,
            correlation_id=correlation_id,
        )

    def read_stored(self, after: int = 0, *, tenant: str | None = None, until: int | None = None) -> list[RecordedEvent]:
        """Events after ``after`` as stored: their sealed fields the tokens, unopened (whose keys sealed
        them: :func:`~.sealed_keys.sealed_keys`)."""
        return self._read_stored(after, None, None, tenant=tenant, until=until)[0]

    def iter_all(
        self, after: int = 0, *, until: int | None = None, batch_size: int = PAGE_ROWS, **filters
    ) -> Iterator[list[RecordedEvent]]:
        """Decoded events in batches, for replays that must not load the whole log.

        Each statement sees every commit before it, and positions are
        gap-free in commit order, so batches join up exactly. Where the
        database builds pages, the next page is fetched while this one is
        decoded and used (see :mod:`.read_ahead`). Small batches are the
        fastest to read.
        """
        recorder = self._recorder
        if recorder.builds_pages:
            yield from self._iter_pages(after, until, batch_size, filters)
            return
        with recorder.reader.connect() as conn:
            while True:
                batch = self._read(after, batch_size, conn, until=until, **filters)
                if not batch:
                    return
                yield batch
                if len(batch) < batch_size:
                    return
                after = batch[-1].position

    def _iter_pages(self, after: int, until: int | None, batch_size: int, filters: dict) -> Iterator[list[RecordedEvent]]:
        """:meth:`iter_all` over pages read ahead; a page that needs upcasting is read again row by row."""
        recorder = self._recorder

        def fetch(conn: Connection, at: int) -> EventPage:
            return recorder.select_event_page(after=at, limit=PAGE_ROWS, conn=conn, until=until, **filters)

        batch: list[RecordedEvent] = []
        for at, page in pages_ahead(fetch, recorder.reader.connect, after, PAGE_ROWS):
            events, opening = self._decode_page(page, at, PAGE_ROWS, None, {"until": until, **filters})
            batch.extend(self._open_sealed(events) if opening else events)
            while len(batch) >= batch_size:
                if len(batch) == batch_size:
                    yield batch
                    batch = []
                else:
                    yield batch[:batch_size]
                    del batch[:batch_size]
        if batch:
            yield batch

    def iter_rows(self, after: int = 0, *, until: int | None = None, batch_size: int = 5000, **filters) -> Iterator[list[StoredRow]]:
        return self._recorder.iter_rows(after=after, until=until, batch_size=batch_size, **filters)

    def last_position(self) -> int:
        return self._recorder.last_position()

    def position_at(self, moment: datetime) -> int:
        """The log's position as it stood at ``moment`` (UTC if naive): :meth:`position_and_head`'s position."""
        return self.position_and_head(moment)[0]

    def position_and_head(self, moment: datetime) -> tuple[int, int]:
        """The log's position at ``moment`` (UTC if naive) and its head, as one read saw them. A moment past the last
        event waits for an append in flight, stamped but not committed (:meth:`~.recorder.SQLRecorder.settle`): a past
        moment gives the same position whenever asked. One in range only in its own offset is before or after all."""
        moment = moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)
        try:
            stamp = utc_stamp(moment)
        except OverflowError:
            head = self.last_position()
            return (0 if moment.year == 1 else head), head
        position, head = self._recorder.position_and_head(stamp)
        if position == head:
            self._recorder.settle()
            position, head = self._recorder.position_and_head(stamp)
        return position, head

    def tenant_commits(self, tenant: str, limit: int = 500, *, since: int = 0) -> tuple[int, list[Commit]]:
        """How many commits (runs of one append's events, one correlation id) the tenant has, and up to about ``limit`` of them.

        Beyond ``limit`` they are an even sample in log order, the latest
        always included: marks for a timeline over the tenant's history.
        ``since``: only the commits that end at that position or later.
        """
        count, rows = self._recorder.tenant_commits(tenant, limit, since)
        return count, [Commit(first, last, correlation, recorded_at) for first, last, correlation, recorded_at in rows]

    def stats(self) -> dict[str, object]:
        stats = self._recorder.counts()
        stats["last_position"] = self.last_position()
        return stats

    # -- following ---------------------------------------------------------

    async def subscribe(self, after: int = 0, **options) -> AsyncIterator[RecordedEvent]:
        """Catch up from ``after``, then wait for new commits and yield them, one at a time: :meth:`subscribe_batches`
        (with its keyword options: ``tenant``, ``types``, ``batch_size``, ``poll_seconds``) unbatched."""
        async for batch in self.subscribe_batches(after, **options):
            for recorded in batch:
                yield recorded

    async def subscribe_batches(
        self,
        after: int = 0,
        *,
        tenant: str | None = None,
        types: Sequence[str] | None = None,
        batch_size: int = 1000,
        poll_seconds: float | None = None,
    ) -> AsyncIterator[list[RecordedEvent]]:
        """Catch up from ``after``, then wait for new commits and yield them, as read: in lists of at most
        ``batch_size`` (never empty).

        Only events after ``after`` are ever yielded, even when ``after``
        lies beyond the current head.

        Commits in this process wake the subscriber at once; a slow poll
        notices writers in other processes.
        """
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()
        poll = self.poll_seconds if poll_seconds is None else poll_seconds

        def listener(_position: int) -> None:
            loop.call_soon_threadsafe(wake.set)

        self._recorder.add_listener(listener)
        position = after
        try:
            while True:
                wake.clear()
                head, batch = await loop.run_in_executor(None, self._read_tail, position, batch_size, tenant, types)
                if batch:
                    yield batch
                # Never back: ``after`` may lie beyond the head (a client
                # resuming from another replica, or ahead of this one).
                position = max(position, head)
                if len(batch) == batch_size:
                    continue
                try:
                    await asyncio.wait_for(wake.wait(), timeout=poll)
                except asyncio.TimeoutError:
                    pass
        finally:
            self._recorder.remove_listener(listener)

    def _read_tail(self, after: int, limit: int, tenant: str | None, types: Sequence[str] | None):
        # One read transaction: the head seen and the rows read agree, so a
        # filtered tail can advance past positions it does not return.
        with self._recorder.reader.begin() as conn:
            head = self._recorder.last_position(conn)
            batch = self._read(after=after, until=head, limit=limit, tenant=tenant, types=types, conn=conn)
        if len(batch) == limit:
            head = batch[-1].position
        return head, batch

    # -- auditing ----------------------------------------------------------

    def _check_spans(self, rows: Sequence[StoredRow]) -> ChainBreak | None:
        """Every event lies in an ``event_spans`` row of its tenant and
        correlation id, or tenant and correlation reads would miss it."""
        spans = iter(self._recorder.spans_overlapping(rows[0].position, rows[-1].position))
        span = next(spans, None)
        for index, row in enumerate(rows):
            while span is not None and span[1] < row.position:
                span = next(spans, None)
            if span is None or span[0] > row.position or span[2] != row.tenant or span[3] != row.correlation_id:
                return ChainBreak(row.position, "no event span covers this event with its tenant and correlation id", index)
        return None

    def digest(self) -> Digest:
        position, digest = self._recorder.tip()
        return Digest(position, digest)

    def check_guards(self) -> list[GuardProblem]:
        """Append-only triggers that are missing or differ from the schema's DDL."""
        with self._recorder.reader.connect() as conn:
            return check_guards(conn)

    def verify(
        self,
        from_: int = 1,
        to: int | None = None,
        *,
        against: Digest | tuple[int, str] | Sequence[Digest | tuple[int, str]] | None = None,
        export: Iterable[StoredRow] | None = None,
        progress=None,
        guards: bool = True,
        seals: bool = True,
    ) -> VerifyResult:
        """Walk the hash chain; the result names the first position where it breaks.

        ``against=(position, hash)``, a digest kept outside the store (or a
        list of them), proves that the log up to that position is unchanged,
        even against someone who rewrote the file and recomputed every hash.
        ``export``, the rows of a stored export in position order, does too
        and pins the first edited row. Either walks the log from position 1.
        With ``guards``, the append-only triggers are checked as well; with
        ``seals``, that every event opens with this key store (see :mod:`.seal_check`).
        """
        digests = digests_of(against)
        check = ReferenceCheck(anchors_of(digests, export)) if digests or export is not None else None
        wanted = max(from_ if from_ > 1 else 0, to or 0)  # a range the log does not reach is not verified: it may have lost its tail
        if check is not None:
            from_ = 1
            to = max(d.position for d in digests) if digests and export is None else None
        problems = tuple(self.check_guards()) if guards else ()
        from_ = max(1, from_)
        if from_ == 1:
            prev_hash, prev_position = GENESIS_HASH, 0
        else:
            before = self._recorder.row_at(from_ - 1)
            if before is None:
                head = self.last_position()
                if head < from_ - 1:
                    return VerifyResult(False, 0, None, None, None, head + 1, ends_before(head, wanted), guards=problems)
                return VerifyResult(False, 0, None, None, None, from_ - 1, f"position {from_ - 1} is missing", guards=problems)
            prev_hash, prev_position = before.hash, before.position
        checked = 0
        first = last = None
        last_hash = None
        broken: ChainBreak | None = None
        for rows in self._recorder.iter_rows(after=from_ - 1, until=to, batch_size=10_000):
            if check is not None:
                check.feed(rows)
            broken = walk(rows, prev_hash=prev_hash, prev_position=prev_position) or self._check_spans(rows)
            if broken is not None:
                break
            first = first if first is not None else rows[0].position
            last, last_hash = rows[-1].position, rows[-1].hash
            prev_hash, prev_position = last_hash, last
            checked += len(rows)
            if progress is not None:
                progress(checked)
        unopened = first_unopened(self, first, last) if broken is None and seals and first is not None else None
        differences = {}
        if check is not None:
            if broken is None:
                check.finish(last or 0)
            if check.first is not None:
                differences = {"differs_at": check.first.position, "unchanged_through": check.unchanged_through, "difference": check.describe()}
        if broken is not None:
            return VerifyResult(False, checked + broken.checked, first, last, last_hash, broken.position, broken.reason, guards=problems, **differences)
        end = from_ - 1 if last is None else last
        if check is None and wanted > end:
            return VerifyResult(False, checked, first, last, last_hash, end + 1, ends_before(end, wanted), guards=problems)
        if unopened is not None:  # before a digest's disagreement: it names the row itself
            return VerifyResult(False, unopened[0] - first, first, last, last_hash, *unopened, guards=problems, **differences)
        if check is not None and check.last is not None:
            tip = check.last
            if tip.position > (last or 0):
                broken_at, reason = last or 0, f"the log ends before position {tip.position}"
            elif any(d.position == tip.position for d in digests):
                broken_at, reason = tip.position, "hash at the digest's position differs from the digest"
            else:
                broken_at, reason = tip.position, "the log differs from the export's row here (the last row that differs)"
            return VerifyResult(False, checked, first, last, last_hash, broken_at, reason, guards=problems, **differences)
        if problems:
            reason = "; ".join(str(p) for p in problems) + " (mnemolog migrate restores it)"
            return VerifyResult(False, checked, first, last, last_hash, None, reason, guards=problems)
        # Against a reference: how far it reaches (a digest, or an export's last row), which the answer says.
        return VerifyResult(True, checked, first, last, last_hash, unchanged_through=check.unchanged_through if check is not None else None)
