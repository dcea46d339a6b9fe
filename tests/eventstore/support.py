"""Small helpers shared by the event-store tests: raw access to the SQLite file.

The tests poke at the database with the plain ``sqlite3`` module, the way an
operator (or an attacker) with the file would, never through the store.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Iterator

from mnemolog.eventstore import EventStore
from mnemolog.eventstore.dialects import append_only_triggers


def db_path(store: EventStore) -> Path:
    assert store.url.startswith("sqlite:///"), store.url
    return Path(store.url[len("sqlite:///") :])


@contextlib.contextmanager
def raw(path: Path | str) -> Iterator[sqlite3.Connection]:
    """An autocommit ``sqlite3`` connection to the file, closed afterwards."""
    conn = sqlite3.connect(str(path), isolation_level=None, timeout=30)
    try:
        yield conn
    finally:
        conn.close()


def drop_append_only_triggers(path: Path | str) -> None:
    with raw(path) as conn:
        names = [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")]
        for name in names:
            conn.execute(f"DROP TRIGGER {name}")
        assert conn.execute("SELECT count(*) FROM sqlite_master WHERE type = 'trigger'").fetchone()[0] == 0


def restore_append_only_triggers(path: Path | str) -> None:
    """Put the triggers back exactly as the schema makes them, as a careful forger would."""
    with raw(path) as conn:
        for trigger in append_only_triggers("sqlite"):
            conn.execute(trigger.drop)
            conn.execute(trigger.create)


@contextlib.contextmanager
def tampering(path: Path | str) -> Iterator[sqlite3.Connection]:
    """A raw connection with the append-only triggers dropped for its use, and restored after.

    The edits it makes leave no trace in the schema: only the hash chain
    (and digests kept elsewhere) can tell.
    """
    drop_append_only_triggers(path)
    try:
        with raw(path) as conn:
            yield conn
    finally:
        restore_append_only_triggers(path)


def positions(path: Path | str) -> list[int]:
    with raw(path) as conn:
        return [p for (p,) in conn.execute("SELECT position FROM events ORDER BY position")]


def assert_gap_free(found: list[int], expected_count: int | None = None) -> None:
    assert found == list(range(1, len(found) + 1)), "positions are not 1..N without gaps"
    if expected_count is not None:
        assert len(found) == expected_count
