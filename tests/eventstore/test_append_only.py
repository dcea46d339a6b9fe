"""The log is append-only in the database itself, and migrations build it.

Every statement here goes through the plain ``sqlite3`` module on the file,
as anyone holding the file could, never through :class:`EventStore`.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest
from sqlalchemy import inspect

from mnemolog.eventstore import DomainEvent, EventStore
from mnemolog.eventstore import migrate
from mnemolog.eventstore.dialects import create_migration_engine, sqlite_url
from tests.eventstore.support import db_path, raw


class AppendOnlyNoted(DomainEvent, frozen=True):
    text: str


@pytest.fixture
def store(tmp_path):
    store = EventStore.open(tmp_path)
    store.append("s", [AppendOnlyNoted(text="one"), AppendOnlyNoted(text="two")], idempotency_key="key-1")
    store.append("t", [AppendOnlyNoted(text="three")])
    try:
        yield store
    finally:
        store.close()


def snapshot(path) -> tuple[list[tuple], list[tuple]]:
    with raw(path) as conn:
        return (
            conn.execute("SELECT * FROM events ORDER BY position").fetchall(),
            conn.execute("SELECT * FROM idempotency_keys ORDER BY key").fetchall(),
        )


REFUSED = [
    "UPDATE events SET payload = '{}' WHERE position = 2",
    "UPDATE events SET hash = prev_hash",
    "UPDATE events SET tenant = 'other' WHERE stream_id = 't'",
    "DELETE FROM events WHERE position = 3",
    "DELETE FROM events",
    "INSERT INTO events SELECT * FROM events WHERE position = 1 ON CONFLICT(position) DO UPDATE SET payload = 'x'",
    "UPDATE idempotency_keys SET last_position = 3",
    "UPDATE idempotency_keys SET fingerprint = 'forged' WHERE key = 'key-1'",
    "DELETE FROM idempotency_keys WHERE key = 'key-1'",
    "DELETE FROM idempotency_keys",
    "UPDATE event_spans SET tenant = 'other'",
    "DELETE FROM event_spans WHERE first_position = 3",
]


@pytest.mark.parametrize("statement", REFUSED)
def test_update_and_delete_are_refused_by_triggers(store, statement):
    path = db_path(store)
    before = snapshot(path)
    assert before[0] and before[1]
    with raw(path) as conn:
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute(statement)
    assert snapshot(path) == before
    assert store.verify().ok


def test_refusal_inside_a_transaction_keeps_the_rows(store):
    path = db_path(store)
    before = snapshot(path)
    with raw(path) as conn:
        conn.execute("BEGIN")
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("DELETE FROM events WHERE position = 1")
        conn.execute("COMMIT")
    assert snapshot(path) == before


def test_appending_still_works_after_refusals(store):
    path = db_path(store)
    with raw(path) as conn:
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("DELETE FROM events")
    result = store.append("s", [AppendOnlyNoted(text="four")], expected_version=2)
    assert result.first_position == 4
    assert store.verify().ok


def test_replace_conflict_resolution_is_caught_by_the_chain(store):
    # SQLite's INSERT OR REPLACE deletes the conflicting row without firing
    # delete triggers; a per-row insert trigger to refuse it would halve the
    # append rate, so the hash chain is what catches it.
    path = db_path(store)
    before = snapshot(path)
    with raw(path) as conn:
        row = list(before[0][1])
        row[7] = row[7].replace("two", "TWO")
        conn.execute(f"INSERT OR REPLACE INTO events VALUES ({', '.join('?' * len(row))})", row)
    result = store.verify()
    assert not result.ok and result.broken_at == row[0]


# -- migrations ---------------------------------------------------------------


def schema_of(path) -> list[tuple]:
    with raw(path) as conn:
        return conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name").fetchall()


def test_open_migrates_an_empty_file_to_head(tmp_path):
    with EventStore.open(tmp_path):
        pass
    path = tmp_path / "events.db"
    with raw(path) as conn:
        versions = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        triggers = {
            (name, table)
            for name, table in conn.execute("SELECT name, tbl_name FROM sqlite_master WHERE type = 'trigger'")
        }
        journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert versions == [(migrate.head_revision(),)]
    assert triggers == {
        ("events_no_update", "events"),
        ("events_no_delete", "events"),
        ("idempotency_keys_no_update", "idempotency_keys"),
        ("idempotency_keys_no_delete", "idempotency_keys"),
        ("event_spans_no_update", "event_spans"),
        ("event_spans_no_delete", "event_spans"),
    }
    assert journal == "wal"

    engine = create_migration_engine(sqlite_url(path))
    try:
        inspector = inspect(engine)
        assert set(inspector.get_table_names()) == {"alembic_version", "events", "idempotency_keys", "event_spans"}
        columns = [c["name"] for c in inspector.get_columns("events")]
        assert columns == [
            "position",
            "event_id",
            "stream_id",
            "stream_version",
            "type",
            "schema_version",
            "tenant",
            "payload",
            "metadata",
            "correlation_id",
            "recorded_at",
            "prev_hash",
            "hash",
        ]
        # Every index on events is paid on each append: beside the unique
        # (stream_id, stream_version) and event_id ones there are none.
        assert {i["name"] for i in inspector.get_indexes("events")} == set()
        assert {i["name"] for i in inspector.get_indexes("event_spans")} == {"ix_event_spans_tenant", "ix_event_spans_correlation"}
        assert migrate.current_revision(engine) == migrate.head_revision()
    finally:
        engine.dispose()


def test_the_head_an_open_checks_without_alembic_is_the_newest_script():
    # An open of a log at HEAD migrates nothing: were a newer script left out of HEAD, logs would never reach it.
    assert migrate.HEAD == migrate.head_revision()


def test_an_open_of_a_log_at_its_newest_schema_loads_no_alembic(tmp_path):
    with EventStore.open(tmp_path):
        pass
    probe = "import sys, mnemolog.eventstore as e; e.EventStore.open(sys.argv[1]).close(); print(any(m.split('.')[0] == 'alembic' for m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_upgrade_is_idempotent(tmp_path):
    path = tmp_path / "events.db"
    engine = create_migration_engine(sqlite_url(path))
    try:
        assert migrate.current_revision(engine) is None
        assert migrate.upgrade(engine) is True
        schema = schema_of(path)
        assert migrate.upgrade(engine) is False
        assert migrate.upgrade(engine) is False
        assert schema_of(path) == schema
    finally:
        engine.dispose()


def test_an_upgrade_that_waited_for_another_says_where_it_found_the_log(tmp_path, monkeypatch):
    """A migrate that read the revision before another process migrated the log said it migrated it (and from the
    revision it had read), though it ran nothing: the revision is read again under the migration lock."""
    path = tmp_path / "events.db"
    engine = create_migration_engine(sqlite_url(path))
    try:
        migrate.upgrade(engine, "0001")
        stale = migrate.current_revision(engine)
        migrate.upgrade(engine)  # the other process, between this one's first read and its lock
        reads = iter([stale])
        real = migrate.current_revision
        monkeypatch.setattr(migrate, "current_revision", lambda where: next(reads, None) or real(where))
        assert migrate.upgrade_log(engine) == (migrate.head_revision(), False)
    finally:
        engine.dispose()


def test_plain_alembic_from_the_repository_root_migrates_the_configured_data_directory(tmp_path):
    """``alembic upgrade head`` works too (alembic.ini at the root); a data directory not made yet failed "unable to open database file"."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "MNEMOLOG_DATA_DIR": str(tmp_path / "new" / "data")}
    for argv in (["upgrade", "head"], ["downgrade", "0002"], ["upgrade", "head"]):
        done = subprocess.run([sys.executable, "-m", "alembic", *argv], cwd=root, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
    with raw(tmp_path / "new" / "data" / "events.db") as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(migrate.head_revision(),)]


def test_reopening_keeps_data_and_schema(store, tmp_path):
    path = db_path(store)
    schema = schema_of(path)
    digest = store.digest()
    store.close()
    with EventStore.open(tmp_path) as again:
        assert again.digest() == digest
        assert [r.event.text for r in again.read_all()] == ["one", "two", "three"]
    assert schema_of(path) == schema


def test_unique_constraints_hold_against_raw_inserts(store):
    path = db_path(store)
    with raw(path) as conn:
        row = list(conn.execute("SELECT * FROM events WHERE position = 3").fetchone())
        for column, value in [(0, 3), (1, row[1]), (3, 1)]:  # position, event_id, (stream, version)
            forged = list(row)
            forged[0] = 99
            forged[1] = "00000000-0000-7000-8000-000000000099"
            forged[column] = value
            with pytest.raises(sqlite3.IntegrityError):
                conn.execute(f"INSERT INTO events VALUES ({', '.join('?' * len(forged))})", forged)
