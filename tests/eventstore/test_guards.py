"""The append-only triggers are checked by ``verify`` and put back by ``restore_guards``.

The triggers are dropped or rewritten through the plain ``sqlite3`` module,
as anyone holding the file could; the schema revision does not change.
"""

from __future__ import annotations

import sqlite3

import pytest

from mnemolog.eventstore import DomainEvent, EventStore
from mnemolog.eventstore import migrate
from mnemolog.eventstore.dialects import append_only_triggers, create_migration_engine
from mnemolog.eventstore.guards import GuardProblem, restore_guards
from mnemolog.eventstore.schema import APPEND_ONLY_TABLES
from tests.eventstore.support import db_path, raw

TRIGGERS = [(t.table, t.name) for t in append_only_triggers("sqlite")]


class GuardNoted(DomainEvent, frozen=True):
    text: str


@pytest.fixture
def store(tmp_path):
    store = EventStore.open(tmp_path)
    store.append("s", [GuardNoted(text="one"), GuardNoted(text="two")], idempotency_key="key-1")
    try:
        yield store
    finally:
        store.close()


def restore(store: EventStore) -> list[GuardProblem]:
    engine = create_migration_engine(store.url)
    try:
        return restore_guards(engine)
    finally:
        engine.dispose()


def triggers_sql(store: EventStore) -> dict[str, str]:
    with raw(db_path(store)) as conn:
        return dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'").fetchall())


def test_every_append_only_table_has_its_triggers_checked():
    assert {table for table, _ in TRIGGERS} == set(APPEND_ONLY_TABLES)
    assert len(TRIGGERS) == 2 * len(APPEND_ONLY_TABLES)


def test_an_intact_store_has_no_guard_problems(store):
    assert store.check_guards() == []
    result = store.verify()
    assert result.ok and result.guards == ()


@pytest.mark.parametrize("table, trigger", TRIGGERS)
def test_a_dropped_trigger_fails_verify_and_is_named(store, table, trigger):
    with raw(db_path(store)) as conn:
        conn.execute(f"DROP TRIGGER {trigger}")
    assert migrate.upgrade(create_migration_engine(store.url)) is False  # the revision cannot tell

    result = store.verify()
    assert not result.ok
    assert result.guards == (GuardProblem(table, trigger, "missing"),)
    assert result.broken_at is None  # the chain itself holds
    assert trigger in result.reason and "missing" in result.reason


def test_an_altered_trigger_fails_verify(store):
    # Same name, same table, but it never fires: a quiet way to switch it off.
    with raw(db_path(store)) as conn:
        conn.execute("DROP TRIGGER events_no_update")
        conn.execute(
            "CREATE TRIGGER events_no_update BEFORE UPDATE ON events WHEN 0 "
            "BEGIN SELECT RAISE(ABORT, 'mnemolog: events is append-only; UPDATE is refused'); END"
        )
        conn.execute("UPDATE events SET tenant = tenant WHERE position = 1")  # now allowed
    result = store.verify()
    assert not result.ok
    assert result.guards == (GuardProblem("events", "events_no_update", "altered"),)


def test_a_trigger_moved_to_another_table_is_altered(store):
    with raw(db_path(store)) as conn:
        conn.execute("DROP TRIGGER event_spans_no_delete")
        conn.execute(
            "CREATE TRIGGER event_spans_no_delete BEFORE DELETE ON idempotency_keys "
            "BEGIN SELECT RAISE(ABORT, 'mnemolog: event_spans is append-only; DELETE is refused'); END"
        )
    assert store.check_guards() == [GuardProblem("event_spans", "event_spans_no_delete", "altered")]


def test_restore_puts_back_missing_and_altered_triggers_and_only_those(store):
    expected = triggers_sql(store)
    with raw(db_path(store)) as conn:
        conn.execute("DROP TRIGGER events_no_update")
        conn.execute("DROP TRIGGER idempotency_keys_no_delete")
        conn.execute("DROP TRIGGER event_spans_no_update")
        conn.execute("CREATE TRIGGER event_spans_no_update BEFORE UPDATE ON event_spans WHEN 0 BEGIN SELECT 1; END")

    restored = restore(store)
    assert sorted(restored, key=lambda p: p.trigger) == [
        GuardProblem("event_spans", "event_spans_no_update", "altered"),
        GuardProblem("events", "events_no_update", "missing"),
        GuardProblem("idempotency_keys", "idempotency_keys_no_delete", "missing"),
    ]
    assert triggers_sql(store) == expected
    assert store.verify().ok
    assert restore(store) == []  # nothing left to do
    with raw(db_path(store)) as conn:
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute("UPDATE events SET payload = '{}' WHERE position = 1")
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute("DELETE FROM idempotency_keys")


def test_whitespace_in_a_rewritten_trigger_is_not_a_difference(store):
    trigger = next(t for t in append_only_triggers("sqlite") if t.name == "events_no_delete")
    with raw(db_path(store)) as conn:
        conn.execute(trigger.drop)
        conn.execute(trigger.create.replace(" BEGIN ", "\n  BEGIN\n    ") + ";")
    assert store.check_guards() == []


def test_opening_the_store_does_not_hide_a_dropped_trigger(store, tmp_path):
    with raw(db_path(store)) as conn:
        conn.execute("DROP TRIGGER events_no_delete")
    store.close()
    with EventStore.open(tmp_path) as again:  # migrates on open, but never silently repairs
        assert again.check_guards() == [GuardProblem("events", "events_no_delete", "missing")]
