"""The event store's contract, independent of the database behind it.

A backend reuses the whole suite by subclassing :class:`EventStoreContract`
and implementing :meth:`~EventStoreContract.make_store`::

    class TestPostgresContract(EventStoreContract):
        def make_store(self, tmp_path):
            return EventStore.open(fresh_postgres_database_url())

Only the public :class:`EventStore` API is used here, nothing dialect-specific.
"""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import datetime, timedelta, timezone

import msgspec
import pytest

from mnemolog.eventstore import (
    ANY,
    NO_STREAM,
    ConcurrencyError,
    Digest,
    DomainEvent,
    EventStore,
    IdempotencyConflict,
    Metadata,
    StreamAppend,
)
from mnemolog.eventstore.chain import GENESIS_HASH


class ContractNoted(DomainEvent, frozen=True):
    text: str
    n: int = 0


class ContractTagged(DomainEvent, frozen=True):
    label: str


def notes(*texts: str) -> list[ContractNoted]:
    return [ContractNoted(text=t, n=i) for i, t in enumerate(texts)]


def listing(recorded) -> list[tuple[int, str, int]]:
    """``(position, stream_id, stream_version)`` of recorded events."""
    return [(r.position, r.stream_id, r.stream_version) for r in recorded]


async def next_within(subscription, seconds: float):
    return await asyncio.wait_for(subscription.__anext__(), timeout=seconds)


class EventStoreContract:
    """What every backend of :class:`EventStore` must do.

    ``make_store`` must return a new, *empty* store for each call.
    """

    def make_store(self, tmp_path) -> EventStore:
        raise NotImplementedError

    def open_another(self, store: EventStore, tmp_path) -> EventStore:
        """A second, independent instance on the same log, as another process would open it."""
        return EventStore.open(store.url)

    @pytest.fixture
    def store(self, tmp_path):
        store = self.make_store(tmp_path)
        try:
            yield store
        finally:
            store.close()

    # -- empty store -------------------------------------------------------

    def test_empty_store(self, store):
        assert store.last_position() == 0
        assert store.read_all() == []
        assert store.read_stream("nothing") == []
        assert store.stream_version("nothing") == 0
        assert store.digest() == Digest(0, GENESIS_HASH)
        result = store.verify()
        assert result.ok and result.checked == 0
        assert store.stats()["events"] == 0

    def test_digest_of_empty_store_verifies(self, store):
        # A digest kept at installation time must stay valid as the log grows.
        empty = store.digest()
        assert store.verify(against=empty).ok
        store.append("s", notes("a"))
        assert store.verify(against=empty).ok
        assert not store.verify(against=Digest(0, "f" * 64)).ok

    # -- append / read -----------------------------------------------------

    def test_append_then_read_round_trip(self, store):
        before = datetime.now(timezone.utc)
        meta = Metadata(actor="agent-7", correlation_id="corr-1", causation_id="cause-1")
        events = [ContractNoted(text="first", n=1), ContractTagged(label="x"), ContractNoted(text="third ✓", n=3)]
        result = store.append("mem-1", events, tenant="acme", metadata=meta)
        after = datetime.now(timezone.utc)

        assert (result.first_position, result.last_position, result.replayed) == (1, 3, False)
        assert list(result.positions) == [1, 2, 3]
        read = store.read_stream("mem-1")
        assert [r.event for r in read] == events
        assert listing(read) == [(1, "mem-1", 1), (2, "mem-1", 2), (3, "mem-1", 3)]
        assert [r.type for r in read] == ["ContractNoted", "ContractTagged", "ContractNoted"]
        assert all(r.schema_version == 1 and r.tenant == "acme" for r in read)
        assert all(r.metadata == meta for r in read)
        assert len({r.event_id for r in read}) == 3
        assert all(len(r.event_id) == 36 for r in read)
        for r in read:
            assert r.recorded_at.tzinfo is not None
            assert before - timedelta(seconds=1) <= r.recorded_at <= after + timedelta(seconds=1)
        assert store.read_all() == read
        assert store.stream_version("mem-1") == 3
        assert store.last_position() == 3

    def test_appends_continue_positions_and_versions(self, store):
        store.append("a", notes("1", "2"))
        store.append("b", notes("1"))
        result = store.append("a", notes("3"))
        assert (result.first_position, result.last_position) == (4, 4)
        assert listing(store.read_all()) == [(1, "a", 1), (2, "a", 2), (3, "b", 1), (4, "a", 3)]

    def test_empty_appends_and_empty_tenant_are_refused(self, store):
        with pytest.raises(ValueError):
            store.append("s", [])
        with pytest.raises(ValueError):
            store.append_batch([])
        with pytest.raises(ValueError):
            store.append_batch([StreamAppend("s", []), StreamAppend("t", [])])
        with pytest.raises(ValueError):
            store.append("s", notes("x"), tenant="")
        assert store.last_position() == 0

    # -- expected versions -------------------------------------------------

    def test_expected_version_no_stream(self, store):
        store.append("s", notes("a"), expected_version=NO_STREAM)
        with pytest.raises(ConcurrencyError) as caught:
            store.append("s", notes("b"), expected_version=NO_STREAM)
        assert caught.value.actual == 1
        assert caught.value.expected == NO_STREAM
        assert caught.value.stream_id == "s"
        assert store.last_position() == 1

    def test_expected_version_exact(self, store):
        store.append("s", notes("a"), expected_version=0)
        store.append("s", notes("b", "c"), expected_version=1)
        assert store.stream_version("s") == 3
        for stale in (0, 1, 2, 4, 99):
            with pytest.raises(ConcurrencyError) as caught:
                store.append("s", notes("lost"), expected_version=stale)
            assert caught.value.actual == 3
            assert caught.value.expected == stale
        assert store.last_position() == 3
        result = store.append("s", notes("d"), expected_version=3)
        assert result.first_position == 4

    def test_expected_version_any(self, store):
        store.append("s", notes("a"), expected_version=ANY)
        store.append("s", notes("b"), expected_version=ANY)
        assert store.stream_version("s") == 2

    @pytest.mark.parametrize("bad", [-1, "latest", 1.0, True, None])
    def test_invalid_expected_version_is_refused(self, store, bad):
        store.append("s", notes("a"))
        with pytest.raises(ValueError):
            store.append("s", notes("b"), expected_version=bad)
        assert store.last_position() == 1

    # -- atomicity / batches -----------------------------------------------

    def test_failed_batch_writes_nothing_and_leaves_no_gap(self, store):
        store.append("b", notes("b1"))
        digest = store.digest()
        with pytest.raises(ConcurrencyError) as caught:
            store.append_batch(
                [
                    StreamAppend("a", notes("a1", "a2"), NO_STREAM),
                    StreamAppend("b", notes("b2"), 5),
                    StreamAppend("c", notes("c1"), ANY),
                ]
            )
        assert caught.value.stream_id == "b" and caught.value.actual == 1
        assert store.last_position() == 1
        assert store.read_stream("a") == [] and store.read_stream("c") == []
        assert store.digest() == digest
        result = store.append("a", notes("a1"), expected_version=NO_STREAM)
        assert result.first_position == 2
        assert [r.position for r in store.read_all()] == [1, 2]
        assert store.verify().ok

    def test_batch_across_streams_is_one_contiguous_range(self, store):
        store.append("y", notes("y1"))
        result = store.append_batch(
            [
                StreamAppend("x", notes("x1", "x2"), NO_STREAM),
                StreamAppend("y", notes("y2", "y3", "y4"), 1),
                StreamAppend("z", [ContractTagged(label="z1")], ANY),
            ],
            tenant="t",
        )
        assert (result.first_position, result.last_position) == (2, 7)
        assert listing(store.read_all(after=1)) == [
            (2, "x", 1),
            (3, "x", 2),
            (4, "y", 2),
            (5, "y", 3),
            (6, "y", 4),
            (7, "z", 1),
        ]

    def test_same_stream_twice_in_one_batch(self, store):
        result = store.append_batch(
            [StreamAppend("s", notes("1"), NO_STREAM), StreamAppend("s", notes("2", "3"), 1)]
        )
        assert (result.first_position, result.last_position) == (1, 3)
        assert [r.stream_version for r in store.read_stream("s")] == [1, 2, 3]
        with pytest.raises(ConcurrencyError):
            store.append_batch([StreamAppend("s", notes("4"), 3), StreamAppend("s", notes("5"), 3)])
        assert store.last_position() == 3

    # -- idempotency -------------------------------------------------------

    def test_idempotent_repeat_returns_original_positions(self, store):
        assert store.appended_through == 0
        store.append("other", notes("o"))
        assert store.appended_through == 1
        first = store.append("s", notes("a", "b"), expected_version=NO_STREAM, idempotency_key="req-1")
        digest = store.digest()
        # A retry after a lost response: the expected version would now fail,
        # but the key answers with the original result and writes nothing.
        again = store.append("s", notes("a", "b"), expected_version=NO_STREAM, idempotency_key="req-1")
        assert (again.first_position, again.last_position) == (first.first_position, first.last_position) == (2, 3)
        assert not first.replayed and again.replayed
        assert store.digest() == digest
        assert [r.metadata.idempotency_key for r in store.read_stream("s")] == ["req-1", "req-1"]
        assert store.appended_through == 3  # what this store appended; the replay appended nothing

    def test_idempotency_key_with_different_content_conflicts(self, store):
        store.append("s", notes("a"), idempotency_key="req-1")
        digest = store.digest()
        for stream, events in [("s", notes("changed")), ("s", notes("a", "b")), ("elsewhere", notes("a"))]:
            with pytest.raises(IdempotencyConflict) as caught:
                store.append(stream, events, idempotency_key="req-1")
            assert caught.value.key == "req-1"
        assert store.digest() == digest

    def test_idempotent_batch(self, store):
        writes = [StreamAppend("a", notes("1")), StreamAppend("b", notes("2", "3"))]
        first = store.append_batch(writes, idempotency_key="batch-1")
        again = store.append_batch(writes, idempotency_key="batch-1")
        assert again.replayed and again.positions == first.positions == range(1, 4)
        assert store.last_position() == 3

    def test_caller_fingerprint_binds_the_key(self, store):
        first = store.append("s", notes("a"), idempotency_key="k", fingerprint="request-42")
        # Different events, same caller-side request: the key answers.
        again = store.append("s", notes("b"), idempotency_key="k", fingerprint="request-42")
        assert again.replayed and again.positions == first.positions
        with pytest.raises(IdempotencyConflict):
            store.append("s", notes("a"), idempotency_key="k", fingerprint="request-43")
        assert store.last_position() == 1

    # -- reading -----------------------------------------------------------

    def test_read_stream_version_ranges(self, store):
        store.append("s", notes(*"abc"))
        store.append("noise", notes("n"))
        store.append("s", notes(*"def"))
        versions = lambda recorded: [r.stream_version for r in recorded]  # noqa: E731
        assert versions(store.read_stream("s")) == [1, 2, 3, 4, 5, 6]
        assert [r.event.text for r in store.read_stream("s")] == list("abcdef")
        assert versions(store.read_stream("s", from_version=3)) == [3, 4, 5, 6]
        assert versions(store.read_stream("s", from_version=2, to_version=4)) == [2, 3, 4]
        assert versions(store.read_stream("s", to_version=1)) == [1]
        assert versions(store.read_stream("s", from_version=4, to_version=4)) == [4]
        assert store.read_stream("s", from_version=7) == []
        assert store.read_stream("s", from_version=5, to_version=4) == []
        assert [r.position for r in store.read_stream("s", from_version=3, to_version=5)] == [3, 5, 6]

    def test_select_streams_reads_many_streams_in_position_order_in_chunks(self, store):
        from mnemolog.eventstore.recorded import decode_rows

        for i in range(12):
            store.append(f"s{i % 6}", notes(f"t{i}"), tenant="acme" if i % 4 else "beta")
        wanted = [f"s{i}" for i in (5, 0, 3, 3, 9)]  # one repeated, one with no events
        read = lambda **kw: listing(decode_rows(store.recorder.select_streams(wanted, **kw)))  # noqa: E731
        by_stream = lambda **kw: sorted(p for s in {"s0", "s3", "s5"} for p, *_ in listing(store.read_all(stream_id=s, **kw)))  # noqa: E731
        assert [p for p, *_ in read()] == by_stream()
        assert [p for p, *_ in read(tenant="acme", until=9)] == by_stream(tenant="acme", until=9)
        assert [p for p, *_ in read(chunk=2)] == by_stream()  # chunked: each stream once, all in order
        assert store.recorder.select_streams([]) == []
        assert store.recorder.select_streams(["a\0b"]) == []

    def _mixed_log(self, store: EventStore) -> None:
        store.append("m1", notes("a", "b"), tenant="acme", metadata=Metadata(correlation_id="c1"))  # 1, 2
        store.append("m2", [ContractTagged(label="t")], tenant="beta", metadata=Metadata(correlation_id="c2"))  # 3
        store.append("m1", [ContractTagged(label="u")], tenant="acme")  # 4
        store.append("m3", notes("c"), tenant="beta", metadata=Metadata(correlation_id="c1"))  # 5
        store.append("m2", notes("d", "e"), tenant="beta")  # 6, 7

    def test_tenant_commits_mark_each_append_of_a_tenant_and_sample_evenly(self, store):
        self._mixed_log(store)
        count, commits = store.tenant_commits("beta")
        assert count == 3
        assert [(c.first_position, c.position, c.correlation_id) for c in commits] == [(3, 3, "c2"), (5, 5, "c1"), (6, 7, None)]
        times = {r.position: r.to_dict()["recorded_at"] for r in store.read_all()}
        assert [c.recorded_at for c in commits] == [times[3], times[5], times[7]]
        assert store.tenant_commits("nobody") == (0, [])
        count, commits = store.tenant_commits("beta", since=5)  # the commits ending at 5 or later (the tenant's since its drop)
        assert count == 2 and [c.position for c in commits] == [5, 7]
        assert store.tenant_commits("beta", 2, since=6)[0] == 1
        for i in range(20):
            store.append(f"x{i}", notes("n"), tenant="many")
        for limit in range(2, 23):
            count, commits = store.tenant_commits("many", limit)
            marks = [c.position for c in commits]
            assert count == 20 and min(limit, 20) // 2 < len(marks) <= min(limit, 20), (limit, marks)
            assert limit < 20 or marks == list(range(8, 28))
            assert marks[0] == 8 and marks[-1] == 27 and marks == sorted(set(marks))

    def test_read_all_filters(self, store):
        self._mixed_log(store)
        pos = lambda recorded: [r.position for r in recorded]  # noqa: E731
        assert pos(store.read_all()) == [1, 2, 3, 4, 5, 6, 7]
        assert pos(store.read_all(after=2)) == [3, 4, 5, 6, 7]
        assert pos(store.read_all(after=2, limit=3)) == [3, 4, 5]
        assert pos(store.read_all(limit=1)) == [1]
        assert pos(store.read_all(after=7)) == []
        assert pos(store.read_all(until=3)) == [1, 2, 3]
        assert pos(store.read_all(after=1, until=4)) == [2, 3, 4]
        assert pos(store.read_all(tenant="acme")) == [1, 2, 4]
        assert pos(store.read_all(tenant="beta", after=3)) == [5, 6, 7]
        assert pos(store.read_all(tenant="nobody")) == []
        assert pos(store.read_all(types=["ContractTagged"])) == [3, 4]
        assert pos(store.read_all(types=["ContractTagged", "ContractNoted"])) == [1, 2, 3, 4, 5, 6, 7]
        assert pos(store.read_all(types=["NoSuchType"])) == []
        assert pos(store.read_all(correlation_id="c1")) == [1, 2, 5]
        assert pos(store.read_all(correlation_id="c2")) == [3]
        assert pos(store.read_all(stream_id="m2")) == [3, 6, 7]
        assert pos(store.read_all(tenant="beta", types=["ContractNoted"], limit=2)) == [5, 6]
        assert pos(store.read_all(tenant="acme", types=["ContractNoted"], until=4)) == [1, 2]

    def test_iter_all_batches_cover_the_log_once(self, store):
        self._mixed_log(store)
        batches = list(store.iter_all(batch_size=3))
        assert [len(b) for b in batches] == [3, 3, 1]
        assert [r for b in batches for r in b] == store.read_all()
        assert [r.position for b in store.iter_all(after=2, until=6, batch_size=2) for r in b] == [3, 4, 5, 6]
        filtered = [r.position for b in store.iter_all(batch_size=1, tenant="beta") for r in b]
        assert filtered == [3, 5, 6, 7]

    def test_reads_longer_than_a_page_join_up_exactly(self, store):
        # Reads are served in pages of PAGE_ROWS; limits, filters and
        # batches that straddle page boundaries must still be exact.
        from mnemolog.eventstore.store import PAGE_ROWS

        total = PAGE_ROWS * 2 + 7
        for start in range(0, total, 50):
            count = min(50, total - start)
            store.append(f"s{start % 3}", notes(*[f"n{i}" for i in range(start, start + count)]), tenant="acme" if start % 100 else "beta")
        everything = store.read_all()
        assert [r.position for r in everything] == list(range(1, total + 1))
        assert [r.event.text for r in everything] == [f"n{i}" for i in range(total)]
        assert [r.position for r in store.read_all(after=PAGE_ROWS - 3, limit=PAGE_ROWS + 5)] == list(
            range(PAGE_ROWS - 2, 2 * PAGE_ROWS + 3)
        )
        for size in (PAGE_ROWS - 1, PAGE_ROWS, PAGE_ROWS + 1, 1000):
            batches = list(store.iter_all(batch_size=size))
            assert all(len(b) == size for b in batches[:-1])
            assert [r for b in batches for r in b] == everything
        beta = [r.position for r in everything if r.tenant == "beta"]
        assert [r.position for b in store.iter_all(batch_size=PAGE_ROWS - 1, tenant="beta") for r in b] == beta
        stream = store.read_stream("s1", from_version=3)
        assert [r.stream_version for r in stream] == list(range(3, len(stream) + 3))

    def test_names_with_json_special_characters_read_back(self, store):
        stream = 'memory "quoted" \\ back\nslash \t ☃ 記憶'
        tenant = 'tenant "x"\\y'
        store.append(stream, notes("a", "b"), tenant=tenant, metadata=Metadata(actor='actor "q"'))
        (first, second) = store.read_stream(stream)
        assert (first.stream_id, first.tenant, first.metadata.actor) == (stream, tenant, 'actor "q"')
        assert [r.stream_id for r in store.read_all(tenant=tenant)] == [stream, stream]
        assert second.event == ContractNoted(text="b", n=1)

    def test_payload_text_of_any_character_and_size_reads_back(self, store):
        """Payloads are JSON text: NUL (which PostgreSQL's text refuses) travels escaped, and size is not bounded by a column."""
        texts = ["nul \x00 inside", "\u2028 \U0001F600 e\u0301 記憶", "\\ \" ' \n\t", "x" * 5_000_000]
        store.append("s", notes(*texts), metadata=Metadata(actor="nul \x00 actor"))
        read = store.read_stream("s")
        assert [r.event.text for r in read] == texts and read[0].metadata.actor == "nul \x00 actor"
        assert [r.event.text for r in store.read_all(after=1, limit=2)] == texts[1:3]
        assert store.verify().ok

    def test_names_up_to_their_bounds_read_back_on_every_backend(self, store):
        from mnemolog.eventstore.schema import MAX_NAME, MAX_STREAM_ID

        # Characters, not bytes: four UTF-8 bytes each, and a stream id as long as the product makes (entity-<tenant>/<id>).
        stream, tenant, correlation, key = "😀" * MAX_STREAM_ID, "é" * MAX_NAME, "c" * MAX_NAME, "k" * MAX_NAME
        meta = Metadata(correlation_id=correlation)
        store.append(stream, notes("a", "b"), expected_version=NO_STREAM, tenant=tenant, idempotency_key="k", metadata=meta)
        first = store.append(stream, notes("c", "d"), expected_version=2, tenant=tenant, idempotency_key=key, metadata=meta)
        again = store.append(stream, notes("c", "d"), expected_version=2, tenant=tenant, idempotency_key=key, metadata=meta)
        assert again.replayed and again.positions == first.positions == range(3, 5)
        assert [r.stream_version for r in store.read_stream(stream)] == [1, 2, 3, 4]
        assert store.stream_version(stream) == 4
        assert [r.position for r in store.read_all(tenant=tenant, correlation_id=correlation)] == [1, 2, 3, 4]
        assert store.tenant_commits(tenant)[0] == 2 and store.verify().ok

    @pytest.mark.parametrize(
        "field, value",
        [
            ("stream_id", "s" * 601),
            ("tenant", "t" * 256),
            ("correlation_id", "c" * 256),
            ("idempotency_key", "k" * 256),
            ("fingerprint", "f" * 65),
            ("stream_id", "s\x00"),
            ("tenant", "t\x00"),
            ("correlation_id", "\x00"),
            ("idempotency_key", "k\x00"),
            ("fingerprint", "f\x00"),
        ],
    )
    def test_names_beyond_their_columns_or_holding_nul_are_refused_on_every_backend(self, store, field, value):
        """SQLite stores any string; PostgreSQL refuses what outgrows a column or holds NUL: the log refuses both, alike, first."""
        store.append("s", notes("a"))
        digest = store.digest()
        args = {"stream_id": "s", "tenant": "t", "correlation_id": "c", "idempotency_key": "k", "fingerprint": "f", field: value}
        with pytest.raises(ValueError, match=field):
            store.append_batch(
                [StreamAppend("s", notes("b")), StreamAppend(args["stream_id"], notes("c"))],
                tenant=args["tenant"],
                idempotency_key=args["idempotency_key"],
                fingerprint=args["fingerprint"],
                metadata=Metadata(correlation_id=args["correlation_id"]),
            )
        assert store.digest() == digest and store.stream_version("s") == 1
        assert store.append("s", notes("b"), idempotency_key="k", tenant="t").positions == range(2, 3)

    def test_a_filter_holding_nul_matches_nothing_on_every_backend(self, store):
        """No stored name holds NUL, which PostgreSQL cannot even be asked about: such a filter finds nothing, as on SQLite."""
        store.append("s", notes("a"), metadata=Metadata(correlation_id="c"))
        for filters in ({"tenant": "default\x00"}, {"correlation_id": "c\x00"}, {"stream_id": "s\x00"}, {"types": ["ContractNoted\x00"]}):
            assert store.read_all(**filters) == []
            assert list(store.iter_all(**filters)) == []
        assert store.read_stream("s\x00") == [] and store.stream_version("s\x00") == 0
        assert store.tenant_commits("default\x00") == (0, [])
        assert store.recorder.idempotency_record("k\x00") is None
        assert [r.position for r in store.read_all(tenant="default", correlation_id="c", stream_id="s")] == [1]

    def test_last_position_and_stats(self, store):
        self._mixed_log(store)
        assert store.last_position() == 7
        stats = store.stats()
        assert stats["events"] == 7 and stats["last_position"] == 7 and stats["streams"] == 3
        assert stats["by_tenant"] == {"acme": 3, "beta": 4}
        assert stats["by_type"] == {"ContractNoted": 5, "ContractTagged": 2}
        # Plain ints on every backend (PostgreSQL's sum() of bigints is a numeric, a Decimal that JSON writes as a string).
        assert msgspec.json.encode(stats["by_tenant"]) == b'{"acme":3,"beta":4}'
        assert all(type(n) is int for n in (stats["events"], stats["streams"], *stats["by_type"].values()))

    def test_position_at_is_monotone_in_time(self, store):
        start = datetime.now(timezone.utc) - timedelta(seconds=1)
        marks = []
        for i in range(4):
            store.append(f"s{i % 2}", notes(*[str(i)] * (i + 1)))
            time.sleep(0.002)
            marks.append((datetime.now(timezone.utc), store.last_position()))
            time.sleep(0.002)
        assert store.position_at(start) == 0
        for moment, position in marks:
            assert store.position_at(moment) == position
            assert store.position_at(moment.replace(tzinfo=None)) == position  # naive = UTC
            assert store.position_at(moment.astimezone(timezone(timedelta(hours=-7)))) == position
        assert store.position_at(datetime.now(timezone.utc) + timedelta(days=1)) == store.last_position()
        recorded = store.read_all()
        stamps = [r.recorded_at for r in recorded]
        assert stamps == sorted(stamps)
        answers = [store.position_at(s) for s in stamps]
        assert answers == sorted(answers)
        assert all(answer >= r.position for answer, r in zip(answers, recorded))

    def test_a_moment_an_append_in_flight_has_stamped_is_answered_once_it_commits(self, store, tmp_path):
        """An append stamps its events' time before it commits: asked in between for a moment after that stamp,
        another store answered without them, and with them once committed: a past moment's answer changed."""
        other = self.open_another(store, tmp_path)
        try:
            store.append("a", notes("1"))
            stamped, go = threading.Event(), threading.Event()
            chain = store._recorder._chain_rows

            def held(*args):
                rows = chain(*args)
                stamped.set()
                go.wait(10)  # stamped, written, not committed
                return rows

            store._recorder._chain_rows = held
            writer = threading.Thread(target=store.append, args=("a", notes("2")))
            writer.start()
            assert stamped.wait(10)
            head = other.last_position

            def committed_meanwhile(*args):  # the head read apart from the search: the append commits in between
                go.set()
                writer.join(10)
                return head(*args)

            other.last_position = committed_meanwhile
            moment = datetime.now(timezone.utc)
            answers: list[int] = []
            reader = threading.Thread(target=lambda: answers.append(other.position_at(moment)))
            reader.start()
            reader.join(0.5)
            go.set()
            writer.join(10)
            reader.join(10)
            assert answers == [2] and other.position_at(moment) == 2
        finally:
            go.set()
            other.close()

    # -- the hand-over of this store's own appends ---------------------------

    def test_own_appends_are_handed_over_as_a_read_returns_them(self, store, tmp_path):
        """What ``take_own_appends`` gives equals the read-back, value and type (see ``eventstore.own_appends``)."""
        other = self.open_another(store, tmp_path)
        try:
            store.append("a", notes("1"))
            appended = store.append_batch(
                [StreamAppend("a", notes("2")), StreamAppend("b", [ContractTagged(label="x"), *notes("3", "4")])],
                tenant="t",
                metadata=Metadata(actor="me", correlation_id="c-1"),
                idempotency_key="k-1",
            )
            assert store.own_appends.held() == (1, 5)  # it continued the first append
            taken = store.take_own_appends(0, appended.last_position)
            read = store.read_all()
            assert taken == read and repr(taken) == repr(read)
            other.append("c", notes("theirs"))  # another writer's commit comes first ...
            mine = store.append("c", notes("mine"))
            assert store.take_own_appends(mine.first_position - 2, mine.last_position) is None  # ... so its position is read from the log
            with pytest.raises(ConcurrencyError):
                store.append("c", notes("late"), expected_version=NO_STREAM)
            assert store.own_appends.held() is None
        finally:
            other.close()

    # -- subscribing -------------------------------------------------------

    async def test_subscribe_catches_up_then_follows_in_process_commits(self, store):
        store.append("s", notes(*"abcde"))
        # A long poll: only the in-process wake-up can deliver in time.
        subscription = store.subscribe(after=2, poll_seconds=30)
        try:
            caught_up = [await next_within(subscription, 5) for _ in range(3)]
            assert [r.position for r in caught_up] == [3, 4, 5]
            assert [r.event.text for r in caught_up] == ["c", "d", "e"]

            pending = asyncio.ensure_future(subscription.__anext__())
            await asyncio.sleep(0.2)
            assert not pending.done()
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, lambda: store.append("t", notes("live")))
            committed = time.monotonic()
            live = await asyncio.wait_for(pending, timeout=5)
            assert time.monotonic() - committed < 3.0  # the poll alone would take 30 s
            assert (live.position, live.stream_id, live.event.text) == (6, "t", "live")
        finally:
            await subscription.aclose()

    async def test_subscribe_filters_live_events(self, store):
        store.append("a", notes("x"), tenant="acme")
        store.append("b", notes("y"), tenant="beta")
        subscription = store.subscribe(tenant="beta", types=["ContractTagged", "ContractNoted"], poll_seconds=30)
        try:
            assert (await next_within(subscription, 5)).position == 2
            pending = asyncio.ensure_future(subscription.__anext__())
            await asyncio.sleep(0.05)
            store.append("a", notes("ignored"), tenant="acme")
            store.append("b", [ContractTagged(label="seen")], tenant="beta")
            live = await asyncio.wait_for(pending, timeout=5)
            assert (live.position, live.tenant, live.event) == (4, "beta", ContractTagged(label="seen"))
        finally:
            await subscription.aclose()

    async def test_subscribe_after_a_position_beyond_the_head_waits_for_it(self, store):
        store.append("s", notes("a", "b"))
        subscription = store.subscribe(after=5, poll_seconds=0.05)
        try:
            pending = asyncio.ensure_future(subscription.__anext__())
            await asyncio.sleep(0.2)  # several polls pass with the head still below 5
            for text in "cdefg":
                store.append("s", notes(text))
            live = await asyncio.wait_for(pending, timeout=5)
            assert (live.position, live.event.text) == (6, "f")
            assert (await next_within(subscription, 5)).position == 7
        finally:
            await subscription.aclose()

    async def test_subscribe_sees_commits_of_another_instance(self, store, tmp_path):
        store.append("s", notes("before"))
        other = self.open_another(store, tmp_path)
        subscription = store.subscribe(poll_seconds=0.2)
        try:
            assert (await next_within(subscription, 5)).position == 1
            pending = asyncio.ensure_future(subscription.__anext__())
            await asyncio.sleep(0.05)
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, lambda: other.append("s", notes("from elsewhere")))
            # No in-process wake-up reaches this subscriber: only its poll does.
            live = await asyncio.wait_for(pending, timeout=5)
            assert (live.position, live.event.text) == (2, "from elsewhere")
        finally:
            await subscription.aclose()
            other.close()

    # -- auditing ----------------------------------------------------------

    def test_digest_and_verify(self, store):
        store.append("a", notes("1", "2", "3"))
        early = store.digest()
        assert early.position == 3 and len(early.hash) == 64
        assert Digest.parse(str(early)) == early
        store.append_batch([StreamAppend("b", notes("4")), StreamAppend("c", notes("5", "6"))])
        digest = store.digest()
        assert digest.position == 6 and digest.hash != early.hash

        result = store.verify()
        assert (result.ok, result.checked, result.first_position, result.last_position) == (True, 6, 1, 6)
        assert result.tip_hash == digest.hash
        partial = store.verify(from_=3, to=5)
        assert (partial.ok, partial.checked, partial.first_position, partial.last_position) == (True, 3, 3, 5)

        # Digests kept outside the store stay valid as the log grows.
        assert store.verify(against=digest).ok
        assert store.verify(against=early).ok
        assert store.verify(against=(early.position, early.hash)).ok
        assert store.verify(against=early).checked == 3

    def test_verify_against_a_wrong_hash_fails(self, store):
        store.append("a", notes("1", "2", "3"))
        good = store.digest()
        wrong = Digest(good.position, "0" * 63 + ("1" if good.hash[-1] != "1" else "2"))
        result = store.verify(against=wrong)
        assert not result.ok
        assert result.broken_at == good.position
        assert "differs" in result.reason
        # A real hash, but of another position.
        middle = store.verify(to=2).tip_hash
        assert not store.verify(against=Digest(3, middle)).ok
        assert not store.verify(against=Digest(1, middle)).ok

    def test_verify_against_a_position_beyond_the_tip_fails(self, store):
        store.append("a", notes("1", "2"))
        tip = store.digest()
        result = store.verify(against=Digest(tip.position + 1, tip.hash))
        assert not result.ok
        assert result.broken_at == tip.position
        assert "ends before" in result.reason
        assert not store.verify(against=(1000, tip.hash)).ok

    # -- leases ------------------------------------------------------------

    def test_a_lease_is_held_by_one_instance_at_a_time_and_frees_when_released(self, store, tmp_path):
        """A server and ``mnemolog organize`` may share a log: one of them organizes at a time."""
        other = self.open_another(store, tmp_path)
        try:
            first, second = store.lease("organizer"), other.lease("organizer")
            assert first.held() and first.held()
            assert not second.held() and not store.lease("organizer").held()  # another holder, even in this process
            assert other.lease("another").held()  # leases are per name
            first.release()
            assert second.held() and not first.held()
            second.release()
        finally:
            other.close()
