"""Threads racing on one log: optimistic concurrency, gap-free positions, WAL readers.

"shared" runs every thread through one :class:`EventStore` (its process lock
serialises writers); "separate" gives each thread its own instance on the
same file, so only SQLite's ``BEGIN IMMEDIATE`` write lock keeps order.
Durability is not under test here (see test_crash.py), so the logs run with
``synchronous=NORMAL`` to spare the shared disk an fsync per commit.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from mnemolog.eventstore import ConcurrencyError, DomainEvent, EventStore, StreamAppend
from mnemolog.eventstore.recorder import PendingEvent, PendingWrite
from tests.eventstore.support import assert_gap_free, db_path, positions, raw

THREADS = 8


class RaceNoted(DomainEvent, frozen=True):
    worker: int
    round: int = 0
    index: int = 0


@pytest.fixture(params=["shared", "separate"])
def stores(request, tmp_path):
    """``stores(n)``: n handles on one fresh log, shared or separate instances."""
    opened: list[EventStore] = []
    first = EventStore.open(tmp_path, synchronous="NORMAL")
    opened.append(first)

    def make(n: int) -> list[EventStore]:
        if request.param == "shared":
            return [first] * n
        while len(opened) < n:
            opened.append(EventStore.open(tmp_path, synchronous="NORMAL"))
        return opened[:n]

    try:
        yield make
    finally:
        for store in opened:
            store.close()


def test_one_winner_per_expected_version(stores):
    rounds = 15
    handles = stores(THREADS)
    barrier = threading.Barrier(THREADS)
    outcomes: dict[tuple[int, int], object] = {}

    def worker(n: int) -> None:
        store = handles[n]
        for k in range(rounds):
            barrier.wait(timeout=30)
            try:
                result = store.append("contested", [RaceNoted(worker=n, round=k)], expected_version=k)
                outcomes[(k, n)] = result.first_position
            except ConcurrencyError as exc:
                outcomes[(k, n)] = exc
            barrier.wait(timeout=30)  # everyone has tried version k before anyone tries k + 1

    with ThreadPoolExecutor(THREADS) as pool:
        for future in [pool.submit(worker, n) for n in range(THREADS)]:
            future.result()

    store = handles[0]
    winners = {}
    for k in range(rounds):
        won = [n for n in range(THREADS) if isinstance(outcomes[(k, n)], int)]
        assert len(won) == 1, f"version {k}: winners {won}"
        winners[k] = won[0]
        for n in range(THREADS):
            if n != won[0]:
                error = outcomes[(k, n)]
                assert isinstance(error, ConcurrencyError)
                assert (error.expected, error.actual) == (k, k + 1)
    assert store.stream_version("contested") == rounds
    recorded = store.read_stream("contested")
    assert [r.stream_version for r in recorded] == list(range(1, rounds + 1))
    assert [(r.event.round, r.event.worker) for r in recorded] == [(k, winners[k]) for k in range(rounds)]
    assert [outcomes[(k, winners[k])] for k in range(rounds)] == [r.position for r in recorded]
    assert_gap_free(positions(db_path(store)), rounds)
    assert store.verify().ok


def test_losers_leave_no_gap(stores):
    """Uncontested appends interleave with failing ones; the log stays 1..N."""
    handles = stores(THREADS)
    per_thread = 25
    succeeded = Counter()
    failed = Counter()

    def worker(n: int) -> None:
        store = handles[n]
        for i in range(per_thread):
            if i % 2:
                store.append(f"own-{n}", [RaceNoted(worker=n, index=i)] * (1 + i % 3), expected_version="any")
                succeeded[n] += 1 + i % 3
                continue
            if i % 4 == 0:  # certainly stale: a loser on every fourth turn, whatever the timing
                with pytest.raises(ConcurrencyError):
                    store.append_batch([StreamAppend(f"side-{n}", [RaceNoted(worker=n, index=i)] * 2),
                                        StreamAppend("hot", [RaceNoted(worker=n, index=i)], 10**6)])
                failed[n] += 1
            version = store.stream_version("hot")
            try:
                store.append_batch(
                    [
                        StreamAppend(f"side-{n}", [RaceNoted(worker=n, index=i)] * 2),
                        StreamAppend("hot", [RaceNoted(worker=n, index=i)], version),
                    ]
                )
                succeeded[n] += 3
            except ConcurrencyError:
                failed[n] += 1

    with ThreadPoolExecutor(THREADS) as pool:
        for future in [pool.submit(worker, n) for n in range(THREADS)]:
            future.result()

    assert sum(failed.values()) >= THREADS * 7  # 7 certain losers per thread, plus lost races
    store = handles[0]
    total = sum(succeeded.values())
    assert_gap_free(positions(db_path(store)), total)
    assert store.last_position() == total
    hot = store.read_stream("hot")
    assert [r.stream_version for r in hot] == list(range(1, len(hot) + 1))
    # Every winning hot append brought its side write along; no loser left one behind.
    side_events = sum(len(store.read_stream(f"side-{n}")) for n in range(THREADS))
    assert side_events == 2 * len(hot)
    assert store.verify().ok


@pytest.fixture
def separate_stores(tmp_path):
    opened = [EventStore.open(tmp_path, synchronous="NORMAL") for _ in range(2)]
    try:
        yield opened
    finally:
        for store in opened:
            store.close()


def test_large_concurrent_batches_get_contiguous_ranges(separate_stores):
    """Two instances (only the database lock between them) write 10,000-event batches."""
    batch, calls, writers = 10_000, 3, 2
    handles = separate_stores
    ranges: dict[tuple[int, int], range] = {}
    start = threading.Barrier(writers)

    def worker(n: int) -> None:
        start.wait(timeout=30)
        for call in range(calls):
            events = [RaceNoted(worker=n, round=call, index=i) for i in range(batch)]
            result = handles[n].append(f"bulk-{n}", events)
            ranges[(n, call)] = result.positions

    with ThreadPoolExecutor(writers) as pool:
        for future in [pool.submit(worker, n) for n in range(writers)]:
            future.result()

    total = batch * calls * writers
    assert all(len(r) == batch for r in ranges.values())
    ordered = sorted(ranges.items(), key=lambda item: item[1].start)
    assert ordered[0][1].start == 1 and ordered[-1][1].stop == total + 1
    for (_, a), (_, b) in zip(ordered, ordered[1:]):
        assert a.stop == b.start  # adjacent, never overlapping
    store = handles[0]
    assert_gap_free(positions(db_path(store)), total)
    for (n, call), span in ranges.items():
        got = [
            (r.stream_id, r.event.worker, r.event.round, r.event.index)
            for chunk in store.iter_all(after=span.start - 1, until=span.stop - 1, batch_size=batch)
            for r in chunk
        ]
        assert got == [(f"bulk-{n}", n, call, i) for i in range(batch)], f"range {span} of writer {n} is interleaved"
    for n in range(writers):
        assert store.stream_version(f"bulk-{n}") == batch * calls
    assert store.verify().ok


def test_readers_are_not_blocked_by_an_open_write_transaction(tmp_path):
    store = EventStore.open(tmp_path)
    other = EventStore.open(tmp_path)
    try:
        store.append("s", [RaceNoted(worker=0, index=i) for i in range(3)])
        committed_digest = store.digest()
        written = threading.Event()
        release = threading.Event()
        errors: list[BaseException] = []

        def hold_writer() -> None:
            try:
                recorder = store.recorder
                with recorder.transaction() as conn:  # BEGIN IMMEDIATE: holds the write lock
                    write = PendingWrite(
                        "s",
                        3,
                        [PendingEvent(f"00000000-0000-7000-8000-00000000000{i}", "RaceNoted", 1, "default",
                                      f'{{"type":"RaceNoted","worker":9,"index":{i}}}', "{}", None) for i in range(2)],
                    )
                    recorder._insert(conn, [write])
                    written.set()
                    assert release.wait(timeout=30)
            except BaseException as exc:  # surfaced in the main thread
                errors.append(exc)
                written.set()

        holder = threading.Thread(target=hold_writer)
        holder.start()
        try:
            assert written.wait(timeout=10) and not errors
            for reader in (store, other):
                began = time.monotonic()
                assert reader.last_position() == 3  # the uncommitted rows are invisible
                assert len(reader.read_all()) == 3
                assert reader.digest() == committed_digest
                assert reader.verify().ok
                assert reader.stats()["events"] == 3
                assert time.monotonic() - began < 5.0, "a reader waited on the writer"  # blocked would be 30 s
            # The write lock really is held: another instance cannot begin a write.
            with raw(db_path(store)) as conn:
                conn.execute("PRAGMA busy_timeout=50")
                with pytest.raises(sqlite3.OperationalError, match="locked"):
                    conn.execute("BEGIN IMMEDIATE")
        finally:
            release.set()
            holder.join(timeout=30)
        assert not errors
        assert store.last_position() == 5
        assert other.last_position() == 5
        assert [r.event.worker for r in other.read_stream("s")] == [0, 0, 0, 9, 9]
        assert other.verify().ok
    finally:
        other.close()
        store.close()


def test_racing_retries_with_one_idempotency_key_write_once(stores):
    handles = stores(THREADS)
    barrier = threading.Barrier(THREADS)
    events = [RaceNoted(worker=0, index=i) for i in range(4)]

    def worker(n: int):
        barrier.wait(timeout=30)
        return handles[n].append("once", events, idempotency_key="retry-storm")

    with ThreadPoolExecutor(THREADS) as pool:
        results = [f.result() for f in [pool.submit(worker, n) for n in range(THREADS)]]

    assert {r.positions for r in results} == {range(1, 5)}
    assert sum(not r.replayed for r in results) == 1
    store = handles[0]
    assert store.last_position() == 4
    assert [r.event for r in store.read_stream("once")] == events
