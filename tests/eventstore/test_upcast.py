"""Events stored at an old schema version still read as today's Struct.

``fixtures/upcast_v1.jsonl`` holds rows of the ``events`` table exactly as an
older mnemolog stored them (hashes included), one JSON object per line, when
``UpcastNoteRecorded`` was at schema version 1 and had no ``word_count``.
It was generated once by :func:`make_fixture`; to regenerate::

    cd /work/main && .venv/bin/python -m tests.eventstore.test_upcast

Regenerating changes ids, times and hashes but not what the tests assert.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import msgspec
import pytest

from mnemolog.eventstore import ANY, DomainEvent, EventStore, UnknownEventType, UpcastError, upcaster
from mnemolog.eventstore import migrate
from mnemolog.eventstore.dialects import create_migration_engine, sqlite_url
from mnemolog.eventstore.chain import StoredRow
from mnemolog.eventstore.ids import new_id
from mnemolog.eventstore.recorder import PendingEvent, PendingWrite
from tests.eventstore.support import raw

FIXTURE = Path(__file__).with_name("fixtures") / "upcast_v1.jsonl"
OLD_TEXTS = ["remember the milk", "the user prefers dark mode", "ok"]


class UpcastNoteRecorded(DomainEvent, frozen=True):
    """Version 2 added ``word_count``; version 1 payloads get it from the upcaster."""

    schema_version = 2
    text: str
    word_count: int = 0


class UpcastTagAdded(DomainEvent, frozen=True):
    """Unchanged since version 1."""

    tag: str


class UpcastGapNoted(DomainEvent, frozen=True):
    """At version 3 with an upcaster from 2 only: version 1 rows cannot be read."""

    schema_version = 3
    text: str


class UpcastStrictNoted(DomainEvent, frozen=True):
    """Version 2 requires ``level``; its upcaster forgets to fill it."""

    schema_version = 2
    text: str
    level: int


@upcaster("UpcastNoteRecorded", 1)
def _note_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "word_count": len(data["text"].split())}


@upcaster("UpcastGapNoted", 2)
def _gap_v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    return data


@upcaster("UpcastStrictNoted", 1)
def _strict_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    return data


def make_fixture(target: Path = FIXTURE) -> None:
    """Write the old log, encoding payloads as the version-1 code did."""

    class NoteV1(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="UpcastNoteRecorded"):
        text: str

    class TagV1(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="UpcastTagAdded"):
        tag: str

    def pending(struct, type_: str) -> PendingEvent:
        return PendingEvent(new_id(), type_, 1, "default", msgspec.json.encode(struct).decode(), "{}", None)

    with tempfile.TemporaryDirectory() as folder:
        with EventStore.open(folder) as store:
            store.append_records(
                [
                    PendingWrite("note-1", ANY, [pending(NoteV1(text=t), "UpcastNoteRecorded") for t in OLD_TEXTS[:2]]),
                    PendingWrite("note-1", ANY, [pending(TagV1(tag="prefs"), "UpcastTagAdded")]),
                ]
            )
            store.append_records([PendingWrite("note-2", ANY, [pending(NoteV1(text=OLD_TEXTS[2]), "UpcastNoteRecorded")])])
            rows = store.recorder.select_rows()
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row._asdict(), ensure_ascii=False) + "\n")


def load_fixture_rows() -> list[StoredRow]:
    with open(FIXTURE, encoding="utf-8") as lines:
        return [StoredRow(**json.loads(line)) for line in lines if line.strip()]


@pytest.fixture
def old_store(tmp_path):
    """A log holding the fixture's rows byte for byte, as if written long ago:
    stored into the first revision's schema, then migrated on open."""
    engine = create_migration_engine(sqlite_url(tmp_path / "events.db"))
    migrate.upgrade(engine, "0001")
    engine.dispose()
    with raw(tmp_path / "events.db") as conn:
        conn.executemany(f"INSERT INTO events ({', '.join(StoredRow._fields)}) VALUES ({', '.join('?' * 13)})", load_fixture_rows())
    store = EventStore.open(tmp_path)
    try:
        yield store
    finally:
        store.close()


def test_the_fixture_is_an_old_log():
    rows = load_fixture_rows()
    assert [r.position for r in rows] == [1, 2, 3, 4]
    notes = [r for r in rows if r.type == "UpcastNoteRecorded"]
    assert len(notes) == 3
    assert all(r.schema_version == 1 for r in rows)
    assert all("word_count" not in json.loads(r.payload) for r in notes)
    assert [json.loads(r.payload)["text"] for r in notes] == OLD_TEXTS


def test_old_events_are_upcast_on_read(old_store):
    assert old_store.verify().ok  # the stored chain is intact
    recorded = old_store.read_stream("note-1")
    assert [r.event for r in recorded] == [
        UpcastNoteRecorded(text="remember the milk", word_count=3),
        UpcastNoteRecorded(text="the user prefers dark mode", word_count=5),
        UpcastTagAdded(tag="prefs"),
    ]
    assert all(type(r.event) is UpcastNoteRecorded for r in recorded[:2])
    # The envelope still tells the version the event was stored at.
    assert [r.schema_version for r in recorded] == [1, 1, 1]
    assert [r.event for r in old_store.read_all(stream_id="note-2")] == [UpcastNoteRecorded(text="ok", word_count=1)]


def test_new_events_are_stored_at_the_current_version(old_store):
    old_store.append("note-2", [UpcastNoteRecorded(text="fresh words here", word_count=99)], expected_version=1)
    newest = old_store.read_all(after=4)
    assert [(r.schema_version, r.event) for r in newest] == [(2, UpcastNoteRecorded(text="fresh words here", word_count=99))]
    stored = old_store.recorder.row_at(5)
    assert json.loads(stored.payload)["word_count"] == 99  # not recomputed: no upcast for current rows
    mixed = old_store.read_all(types=["UpcastNoteRecorded"])
    assert [r.event.word_count for r in mixed] == [3, 5, 1, 99]
    assert old_store.verify().ok


def _append_raw(store: EventStore, stream: str, type_: str, version: int, payload: dict) -> None:
    store.append_records(
        [PendingWrite(stream, ANY, [PendingEvent(new_id(), type_, version, "default", json.dumps(payload), "{}", None)])]
    )


def test_a_version_newer_than_the_code_raises(old_store):
    _append_raw(old_store, "future", "UpcastNoteRecorded", 3, {"type": "UpcastNoteRecorded", "text": "from tomorrow"})
    with pytest.raises(UpcastError, match="newer than this code"):
        old_store.read_stream("future")
    with pytest.raises(UpcastError):
        old_store.read_all()
    assert len(old_store.read_all(until=4)) == 4  # the old rows are still readable


def test_an_unknown_type_raises(old_store):
    _append_raw(old_store, "mystery", "UpcastNeverDefined", 1, {"type": "UpcastNeverDefined"})
    with pytest.raises(UnknownEventType, match="UpcastNeverDefined"):
        old_store.read_stream("mystery")


def test_a_missing_upcaster_step_raises(old_store):
    _append_raw(old_store, "gap", "UpcastGapNoted", 1, {"type": "UpcastGapNoted", "text": "old"})
    _append_raw(old_store, "gap", "UpcastGapNoted", 2, {"type": "UpcastGapNoted", "text": "newer"})
    with pytest.raises(UpcastError, match="no upcaster for UpcastGapNoted from schema version 1"):
        old_store.read_stream("gap", to_version=1)
    assert [r.event for r in old_store.read_stream("gap", from_version=2)] == [UpcastGapNoted(text="newer")]


def test_an_upcast_that_does_not_fit_the_struct_raises(old_store):
    _append_raw(old_store, "strict", "UpcastStrictNoted", 1, {"type": "UpcastStrictNoted", "text": "no level"})
    with pytest.raises(UpcastError, match="does not upcast cleanly"):
        old_store.read_stream("strict")


if __name__ == "__main__":
    make_fixture()
    print(f"wrote {FIXTURE}")
