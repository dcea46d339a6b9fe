"""Property tests: arbitrary payloads round-trip exactly; arbitrary append
sequences keep versions contiguous, positions gap-free and the chain valid."""

from __future__ import annotations

import contextlib
import math
import shutil
import struct
import tempfile
import uuid
from pathlib import Path
from typing import Any, Iterator

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemolog.eventstore import ANY, NO_STREAM, ConcurrencyError, DomainEvent, EventStore, Metadata, StreamAppend
from tests.eventstore.support import assert_gap_free, db_path, positions
from tests.pg import CLUSTER, ROLE, fresh_database_url


class PropertyPayloadNoted(DomainEvent, frozen=True):
    text: str
    number: int
    real: float
    nested: Any = None


class PropertyTicked(DomainEvent, frozen=True):
    n: int


ROUND_TRIPS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

texts = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=40)
names = st.text(alphabet=st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), min_size=1, max_size=30)  # no NUL in names (see eventstore.bounds)
integers = st.integers(min_value=-(2**70), max_value=2**70)
reals = st.floats(allow_nan=False, allow_infinity=False)
json_values = st.recursive(
    st.none() | st.booleans() | integers | reals | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=12,
)
SEQUENCES = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

payload_events = st.builds(PropertyPayloadNoted, text=texts, number=integers, real=reals, nested=json_values)


def same(a: Any, b: Any) -> bool:
    """Equal, with the same JSON types all the way down (1 is not 1.0 or True; -0.0 is not 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, msgspec.Struct):
        return same(msgspec.structs.asdict(a), msgspec.structs.asdict(b))
    return a == b


def test_same_is_strict():
    assert same([1, 2.5, "x", {"k": [None]}], [1, 2.5, "x", {"k": [None]}])
    assert not same(1, 1.0) and not same(1, True) and not same(0.0, -0.0) and not same([1], [1, 2])
    assert math.copysign(1, -0.0) < 0


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def shared_store(request, tmp_path_factory):
    if request.param == "sqlite":
        store = EventStore.open(tmp_path_factory.mktemp("roundtrip"), synchronous="NORMAL")  # no fsync per commit
    else:
        store = EventStore.open(fresh_database_url())
    try:
        yield store
    finally:
        store.close()


@ROUND_TRIPS
@given(
    events=st.lists(payload_events, min_size=1, max_size=5),
    stream=names,
    tenant=names,
    actor=st.none() | texts,
    correlation=st.none() | names,
)
def test_payloads_round_trip_exactly(shared_store, events, stream, tenant, actor, correlation):
    store = shared_store
    meta = Metadata(actor=actor, correlation_id=correlation)
    result = store.append(stream, events, tenant=tenant, metadata=meta)
    assert len(result.positions) == len(events)
    read = store.read_all(after=result.first_position - 1, until=result.last_position)
    assert [r.position for r in read] == list(result.positions)
    for original, recorded in zip(events, read):
        assert same(recorded.event, original), (recorded.event, original)
        assert (recorded.stream_id, recorded.tenant, recorded.metadata) == (stream, tenant, meta)
    versions = [r.stream_version for r in store.read_stream(stream)]
    assert versions == list(range(1, len(versions) + 1))
    if correlation is not None:
        assert [r.position for r in store.read_all(correlation_id=correlation, after=result.first_position - 1)] == list(
            result.positions
        )
    assert store.verify(from_=result.first_position).ok


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def template(request, tmp_path_factory):
    """An empty, migrated log to copy: one migration per module, not per example.
    Its copy, a new store for each example: a file copied, or a PostgreSQL database made from it as a template."""
    if request.param == "sqlite":
        folder = tmp_path_factory.mktemp("template")
        EventStore.open(folder).close()
        yield folder / "events.db"
        return
    url = fresh_database_url()
    EventStore.open(url).close()  # no connection may stay open to a template
    yield url


@contextlib.contextmanager
def copy_of(template) -> Iterator[EventStore]:
    if isinstance(template, str):
        name = f"copy_{uuid.uuid4().hex}"
        CLUSTER.admin(f"CREATE DATABASE {name} TEMPLATE {template.split('/')[3].split('?')[0]} OWNER {ROLE}")
        try:
            with EventStore.open(CLUSTER.url(name), migrate_schema=False) as store:
                yield store
        finally:
            CLUSTER.admin(f"DROP DATABASE {name}")
        return
    folder = Path(tempfile.mkdtemp(dir=template.parent.parent))
    try:
        shutil.copy(template, folder / "events.db")
        with EventStore.open(folder, synchronous="NORMAL") as store:
            yield store
    finally:
        shutil.rmtree(folder, ignore_errors=True)


STREAMS = ["alpha", "beta", "gamma"]
writes = st.tuples(
    st.sampled_from(range(len(STREAMS))),
    st.integers(min_value=1, max_value=4),
    st.sampled_from(["any", "exact", "stale", "no-stream"]),
    st.integers(min_value=1, max_value=3),  # how far off a stale expectation is
)
operations = st.lists(st.lists(writes, min_size=1, max_size=3), min_size=1, max_size=12)


@SEQUENCES
@given(ops=operations)
def test_random_append_sequences_keep_the_log_whole(template, ops):
    with copy_of(template) as store:
        check_sequence(store, ops)


def check_sequence(store: EventStore, ops) -> None:
    model = {s: 0 for s in STREAMS}
    total = 0
    for op in ops:
        trial = dict(model)
        batch = []
        seq = total
        should_fail = None
        for index, count, mode, off in op:
            stream = STREAMS[index]
            current = trial[stream]
            if mode == "any":
                expected = ANY
            elif mode == "exact":
                expected = current
            elif mode == "no-stream":
                expected = NO_STREAM
            else:
                expected = current + off if current < off or off % 2 else current - off
            ok = expected == ANY or expected == current or (expected == NO_STREAM and current == 0)
            if not ok and should_fail is None:
                should_fail = (stream, current)
            trial[stream] = current + count
            batch.append(StreamAppend(stream, [PropertyTicked(n=seq + k) for k in range(count)], expected))
            seq += count
        size = sum(len(w.events) for w in batch)
        if should_fail is not None:
            with pytest.raises(ConcurrencyError) as caught:
                store.append_batch(batch)
            assert (caught.value.stream_id, caught.value.actual) == should_fail
            assert store.last_position() == total
            continue
        result = store.append_batch(batch)
        assert (result.first_position, result.last_position) == (total + 1, total + size)
        total += size
        model = trial

    stored = positions(db_path(store)) if store.url.startswith("sqlite") else [r.position for r in store.recorder.select_rows()]
    assert_gap_free(stored, total)
    for stream in STREAMS:
        recorded = store.read_stream(stream)
        assert [r.stream_version for r in recorded] == list(range(1, model[stream] + 1))
        assert [r.position for r in recorded] == sorted(r.position for r in recorded)
        assert store.stream_version(stream) == model[stream]
    assert [r.event.n for r in store.read_all()] == list(range(total))  # commit order = position order
    result = store.verify()
    assert result.ok and result.checked == total
    assert store.digest().position == total
