"""SQLite's read path: JSON pages built by the database, and the lean indexes.

Readers get each page as one JSON array rendered by SQLite and decoded by
one msgspec call; these tests hold that path to the row-by-row one, and
check that the index migration keeps every row and every query plan.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemolog.eventstore import DomainEvent, EventStore, Metadata, RecordedEvent, StreamAppend
from mnemolog.eventstore import migrate
from mnemolog.eventstore.dialects import create_migration_engine, sqlite_url
from mnemolog.eventstore.log_reads import EventPage
from mnemolog.eventstore.recorded import PageDecoder, decode_rows
from tests.eventstore.support import db_path, raw, tampering


class PageNoted(DomainEvent, frozen=True):
    text: str
    tags: list[str] = []
    score: float | None = None
    extra: dict[str, int] = {}


class PageLinked(DomainEvent, frozen=True):
    source: str
    target: str
    weight: float = 1.0


def _varied_log(store: EventStore) -> None:
    for i in range(40):
        store.append_batch(
            [
                StreamAppend(f"note-{i % 7}", [PageNoted(text=f"note {i} «ü» \u2028", tags=["a", str(i)], score=i / 3, extra={"k": i})]),
                StreamAppend(f"edge-{i % 3}", [PageLinked(source=f"note-{i}", target="note-0", weight=0.5)]),
            ],
            tenant="t1" if i % 2 else "t2",
            metadata=Metadata(actor=f"agent {i}", correlation_id=f"run-{i % 4}") if i % 5 else None,
        )


def test_a_page_decodes_to_exactly_what_rows_decode_to(tmp_path):
    store = EventStore.open(tmp_path)
    _varied_log(store)
    recorder = store.recorder
    assert recorder.builds_pages
    for filters in ({}, {"tenant": "t1"}, {"types": ["PageLinked"]}, {"stream_id": "note-3"}, {"correlation_id": "run-2"}, {"after": 17, "limit": 9}):
        by_rows = decode_rows(recorder.select_events(**filters))
        assert by_rows, filters
        assert store.read_all(**filters) == by_rows, filters
        for mine, theirs in zip(store.read_all(**filters), by_rows):
            assert type(mine) is type(theirs)
            assert mine.recorded_at == theirs.recorded_at and mine.recorded_at.tzinfo is not None
    store.close()


def test_an_empty_page_and_an_empty_log(tmp_path):
    store = EventStore.open(tmp_path)
    assert store.read_all() == [] and list(store.iter_all()) == []
    assert store.recorder.select_event_page(after=0).count == 0
    store.append("s", [PageNoted(text="x")])
    assert store.read_all(after=1) == []
    store.close()


def test_tenant_and_correlation_reads_walk_the_spans_in_order(tmp_path):
    store = EventStore.open(tmp_path)
    _varied_log(store)
    with raw(db_path(store)) as conn:
        spans = conn.execute("SELECT first_position, last_position, tenant, correlation_id FROM event_spans ORDER BY 1").fetchall()
    # One span per append here: each append has one tenant and one correlation id.
    assert [(first, last) for first, last, _, _ in spans] == [(p, p + 1) for p in range(1, 81, 2)]
    recorder = store.recorder
    for filters in ({"tenant": "t1"}, {"correlation_id": "run-1"}, {"tenant": "t2", "correlation_id": "run-2"}, {"tenant": "t1", "until": 40, "limit": 5}):
        expected = [
            r.position
            for r in store.read_all()
            if r.tenant == filters.get("tenant", r.tenant)
            and r.metadata.correlation_id == filters.get("correlation_id", r.metadata.correlation_id)
            and r.position <= filters.get("until", r.position)
        ][: filters.get("limit")]
        assert [r.position for r in store.read_all(**filters)] == expected, filters
    store.close()
    with raw(db_path(store)) as conn:
        for sql, names, _ in recorder._prepared.values():
            if sql and "event_spans" in sql:
                plan = " | ".join(step[3] for step in conn.execute("EXPLAIN QUERY PLAN " + sql, ["x"] * len(names)))
                assert "ix_event_spans_" in plan and "TEMP B-TREE" not in plan, plan


def test_an_event_without_its_span_fails_verify(tmp_path):
    store = EventStore.open(tmp_path)
    _varied_log(store)
    assert store.verify().ok
    with tampering(db_path(store)) as conn:
        conn.execute("DELETE FROM event_spans WHERE first_position = 21")
    result = store.verify()
    assert not result.ok and result.broken_at == 21 and "span" in result.reason
    with raw(db_path(store)) as conn:
        conn.execute("INSERT INTO event_spans VALUES (21, 22, 'someone else', 'run-2')")
    result = store.verify()
    assert not result.ok and result.broken_at == 21
    store.close()


def test_the_index_migration_keeps_every_row_and_goes_both_ways(tmp_path):
    engine = create_migration_engine(sqlite_url(tmp_path / "events.db"))
    migrate.upgrade(engine, "0001")
    old = sqlite3_rows_for_0001(tmp_path)
    assert old

    def indexes() -> set[str]:
        with raw(tmp_path / "events.db") as c:
            return {n for (n,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'ix_%'")}

    assert indexes() == {"ix_events_tenant_position", "ix_events_type_position", "ix_events_correlation", "ix_events_recorded_at"}
    store = EventStore.open(tmp_path)  # migrates to head, building the spans
    assert migrate.current_revision(engine) == migrate.head_revision()
    assert indexes() == {"ix_event_spans_tenant", "ix_event_spans_correlation"}
    assert store.verify().ok
    everything = store.read_all()
    assert len(everything) == len(old)
    for tenant in ("t1", "t2"):
        assert store.read_all(tenant=tenant) == [r for r in everything if r.tenant == tenant]
    assert store.read_all(correlation_id="run-3") == [r for r in everything if r.metadata.correlation_id == "run-3"]
    store.close()
    migrate.downgrade(engine, "0001")
    assert indexes() == {"ix_events_tenant_position", "ix_events_type_position", "ix_events_correlation", "ix_events_recorded_at"}
    engine.dispose()


def sqlite3_rows_for_0001(path) -> list[tuple]:
    """Rows written into a revision-0001 file the way its recorder did (no spans)."""
    source = EventStore.open(path / "source")
    _varied_log(source)
    rows = [tuple(r) for r in source.recorder.select_rows()]
    source.close()
    with raw(path / "events.db") as conn:
        conn.executemany(f"INSERT INTO events VALUES ({', '.join('?' * 13)})", rows)
    return rows


def test_a_dialect_without_json_pages_reads_the_same(tmp_path):
    # What a backend without envelope_json (PostgreSQL today) runs: row by row.
    store = EventStore.open(tmp_path)
    _varied_log(store)
    paged = {"all": store.read_all(), "tenant": store.read_all(tenant="t2"), "stream": store.read_stream("note-4")}
    batches = [len(b) for b in store.iter_all(batch_size=7)]
    store.recorder._envelope = None
    assert not store.recorder.builds_pages
    assert {"all": store.read_all(), "tenant": store.read_all(tenant="t2"), "stream": store.read_stream("note-4")} == paged
    assert [len(b) for b in store.iter_all(batch_size=7)] == batches
    store.close()


_ODD_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=12)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(streams=st.lists(_ODD_TEXT, min_size=1, max_size=4, unique=True), tenant=_ODD_TEXT, text=st.text(max_size=40))
def test_pages_quote_any_stream_id_and_tenant(tmp_path_factory, streams, tenant, text):
    """The envelope is rendered by SQLite around the stored payload: quotes,
    backslashes and control characters in stream ids and tenants must come
    back exactly, through the page itself (not the row-by-row fallback)."""
    store = EventStore.open(tmp_path_factory.mktemp("odd"))
    try:
        for i, stream in enumerate(streams):
            store.append(stream, [PageNoted(text=text, tags=[stream], score=i)], tenant=tenant)
        page = store.recorder.select_event_page(after=0)
        decoded = store._pages.decode(page)
        assert decoded is not None and page.count == len(streams)
        assert decoded == decode_rows(store.recorder.select_events()) == store.read_all(tenant=tenant)
        assert [(r.stream_id, r.tenant, r.event.text) for r in decoded] == [(s, tenant, text) for s in streams]
    finally:
        store.close()


def test_a_page_out_of_order_is_still_checked_for_old_versions_after_the_disorder(tmp_path):
    """A row out of order sorts the page, and every later row is still
    checked: one stored at an older schema version sends the page to the
    row-by-row path (its upcasters) instead of being taken as current."""
    store = EventStore.open(tmp_path)
    store.append("s", [PageNoted(text=str(i)) for i in range(3)])
    rows = store.recorder.select_event_page(after=0)
    store.close()
    decoder = PageDecoder()
    envelopes = json.loads(rows.json)
    swapped = [envelopes[1], envelopes[0], envelopes[2]]
    in_order = decoder.decode(EventPage(json.dumps(swapped), 3))
    assert [r.position for r in in_order] == [1, 2, 3]  # sorted back
    swapped[2][RecordedEvent.__struct_fields__.index("schema_version")] = 0  # stored before the current version: needs upcasting
    assert decoder.decode(EventPage(json.dumps(swapped), 3)) is None


def test_a_page_comes_as_utf8_bytes_of_envelope_arrays(tmp_path):
    """SQLite hands the page over as UTF-8 bytes (no Python string to build
    and encode back), each envelope an array of RecordedEvent's fields in
    order; non-ASCII text reads back exactly, through the page itself."""
    store = EventStore.open(tmp_path)
    try:
        store.append("straße-1", [PageNoted(text="naïve 日本 \u2028 ok")], tenant="tenänt")
        page = store.recorder.select_event_page(after=0)
        assert isinstance(page.json, bytes)
        [envelope] = json.loads(page.json)
        assert envelope[:7] == [1, envelope[1], "straße-1", 1, "PageNoted", 1, "tenänt"]
        [decoded] = store._pages.decode(page)
        assert (decoded.stream_id, decoded.tenant, decoded.event.text) == ("straße-1", "tenänt", "naïve 日本 \u2028 ok")
        assert [decoded] == decode_rows(store.recorder.select_events()) == store.read_all()
    finally:
        store.close()
