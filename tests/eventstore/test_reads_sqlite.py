"""SQLite's read path: JSON pages built by the database, and the lean indexes.

Readers get each page as one JSON array rendered by SQLite and decoded by
one msgspec call; these tests hold that path to the row-by-row one, and
check that the index migration keeps every row and every query plan.
"""

from __future__ import annotations

from alembic import command

from eventstore import DomainEvent, EventStore, Metadata, StreamAppend, migrate
from eventstore.dialects import create_migration_engine, sqlite_url
from eventstore.store import decode_rows
from tests.eventstore.support import db_path, raw


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


def test_the_correlation_index_serves_correlation_reads(tmp_path):
    store = EventStore.open(tmp_path)
    _varied_log(store)
    store.close()
    with raw(db_path(store)) as conn:
        plan = conn.execute("EXPLAIN QUERY PLAN SELECT * FROM events WHERE correlation_id = ? ORDER BY position", ("run-1",)).fetchall()
        assert "ix_events_correlation" in " ".join(str(step) for step in plan)
        # Only events that carry a correlation id are in the partial index.
        indexed = conn.execute("SELECT count(*) FROM events INDEXED BY ix_events_correlation WHERE correlation_id IS NOT NULL").fetchone()[0]
        assert indexed == conn.execute("SELECT count(*) FROM events WHERE correlation_id IS NOT NULL").fetchone()[0] < 80


def test_the_index_migration_keeps_every_row_and_goes_both_ways(tmp_path):
    url = sqlite_url(tmp_path / "events.db")
    engine = create_migration_engine(url)
    config = migrate.alembic_config()
    with engine.connect() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "0001")
        conn.commit()
    store = EventStore.open(tmp_path, migrate_schema=False)
    _varied_log(store)
    before = store.read_all()
    store.close()

    def indexes() -> set[str]:
        with raw(tmp_path / "events.db") as c:
            return {n for (n,) in c.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'ix_%'")}

    assert indexes() == {"ix_events_tenant_position", "ix_events_type_position", "ix_events_correlation", "ix_events_recorded_at"}
    store = EventStore.open(tmp_path)  # migrates to head
    assert migrate.current_revision(engine) == migrate.head_revision()
    assert indexes() == {"ix_events_tenant", "ix_events_correlation"}
    assert store.read_all() == before and store.verify().ok
    store.close()
    with engine.connect() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0001")
        conn.commit()
    assert indexes() == {"ix_events_tenant_position", "ix_events_type_position", "ix_events_correlation", "ix_events_recorded_at"}
    engine.dispose()
