"""The store's hand-over of its own latest appends (see ``eventstore.own_appends``).

What ``take_own_appends`` gives is exactly what ``read_all`` reads back for
the same positions: the same values of the same types (a tuple where the
event was built with a list, a float where it was built with an int), the
plaintext of sealed events, the same ``recorded_at``. It gives only the
positions right after ``after`` and up to ``until``, and nothing after a
failed append.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from mnemolog.eventstore import NO_STREAM, ConcurrencyError, EventStore, Metadata, StreamAppend
from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore import catalogue_graph as g
from mnemolog.eventstore import dialects
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.sealing import PLAIN_MARK, PREFIX, TOKEN_MARK
from mnemolog.eventstore.settings import Settings

STAMP = "2026-01-01T00:00:00Z"


def _open(path: Path, encryption: str = "on") -> EventStore:
    return EventStore.open(path, settings=Settings({"data_dir": str(path), "encryption": encryption}, env={}))


def same(got, expected) -> None:
    """Equal, and equal in every value's type (``repr`` tells a list from a tuple, 1 from 1.0, tz-aware from naive)."""
    assert got == expected
    assert repr(got) == repr(expected)


def _mention(n: int, alias: str = "Ana") -> c.EdgeRecord:
    return c.EdgeRecord(edge_id=f"mention:r1:{n}", edge_type="MENTIONS", source="m-1", target="e-1", weight=1, properties={"alias": alias}, subject="u-1")


def _appends() -> list[tuple[list[StreamAppend], dict]]:
    """Appends of most kinds of sealed and plain events, some built the loose way Python allows (lists, ints)."""
    content = MemoryContent(memory="Ana crossed the Old Bridge", tags=["walks", "bridges"], key="walk", properties={"b": 2, "a": [1, 2]}, subject="u-1", embedding=[1, 0.5], confidence=1)  # type: ignore[arg-type]
    plain_edge = c.EdgeRecord(edge_id="user:r1:1", edge_type="RELATED", source="m-1", target="m-2", weight=0, properties={"note": "kept"})
    return [
        ([StreamAppend("memory-m-1", [c.MemoryAdded(memory_id="m-1", content=content, created_at=STAMP, working_binding="b1")], NO_STREAM)], {}),
        (
            [
                StreamAppend("memory-m-2", [c.MemoryAdded(memory_id="m-2", content=MemoryContent(memory="the river was high"), created_at=STAMP)]),
                StreamAppend("memory-m-1", [c.MemoryUpdated(memory_id="m-1", content=MemoryContent(memory="Ana again", subject="u-1"), changed=["memory"], updated_at=STAMP)]),  # type: ignore[arg-type]
                StreamAppend("edges-t", [c.EdgeLinked(edge=_mention(1)), c.EdgeLinked(edge=plain_edge)]),
            ],
            {"metadata": Metadata(actor="tester", correlation_id="corr-1", causation_id="cause-1"), "idempotency_key": "req-1"},
        ),
        ([StreamAppend("entity-e-1", [g.EntityUpserted(entity_id="e-1", name="Ana", aliases=["Ana L"], tags=["person"], properties={"x": "y"})])], {}),
        ([StreamAppend("edges-t", [c.NamespaceUndone(prefix="mention:", edges=(_mention(1), plain_edge, _mention(2, "Ana L")), reason="undo")])], {}),
        ([StreamAppend("memory-m-2", [c.MemoryArchived(memory_id="m-2", updated_at=STAMP)])], {"metadata": Metadata(actor="x")}),
    ]


@pytest.mark.parametrize("encryption", ["on", "off"])
def test_handed_over_events_are_what_a_read_returns(tmp_path, encryption):
    with _open(tmp_path, encryption) as store:
        for writes, options in _appends():
            result = store.append_batch(writes, tenant="t", **options)
            taken = store.take_own_appends(result.first_position - 1, result.last_position)
            assert taken is not None
            read = store.read_all(after=result.first_position - 1, until=result.last_position)
            assert [r.position for r in taken] == list(result.positions)
            same(taken, read)
            assert store.take_own_appends(result.first_position - 1, result.last_position) is None  # taken once
        payloads = [row[0] for row in sqlite3.connect(tmp_path / "events.db").execute("SELECT payload FROM events")]
        assert any(TOKEN_MARK in p for p in payloads) == (encryption == "on")
        assert all(TOKEN_MARK not in repr(r.event) for r in store.read_all())


def test_sealed_events_are_handed_over_in_plaintext(tmp_path):
    with _open(tmp_path) as store:
        content = MemoryContent(memory="Zebrafinch sings at dawn", tags=("birds",), subject="u-1")
        store.append("memory-m-1", [c.MemoryAdded(memory_id="m-1", content=content, created_at=STAMP)], tenant="t")
        [payload] = [row[0] for row in sqlite3.connect(tmp_path / "events.db").execute("SELECT payload FROM events")]
        assert "Zebrafinch" not in payload and TOKEN_MARK in payload
        [taken] = store.take_own_appends(0, 1)
        assert taken.event.content == content
        same(taken, store.read_all()[0])


@pytest.mark.parametrize("encryption", ["on", "off"])
@pytest.mark.parametrize("text", [TOKEN_MARK + "AAAA not a token", PREFIX + "k:AAAA", PLAIN_MARK + "as written"])
def test_a_text_holding_a_reserved_mark_is_read_back_instead(tmp_path, encryption, text):
    """Plaintext with a mark is stored escaped (sealing off), or could read otherwise: the catch-up reads the log."""
    with _open(tmp_path, encryption) as store:
        store.append("memory-m-1", [c.MemoryAdded(memory_id="m-1", content=MemoryContent(memory=text), created_at=STAMP)], tenant="t")
        assert store.own_appends.held() == (1, 1)
        assert store.take_own_appends(0, 1) is None
        assert store.read_all()[0].event.content.memory == text


def _note(n: int) -> list:
    return [c.MemoryArchived(memory_id=f"m-{n}", updated_at=STAMP)]


def test_only_the_next_positions_up_to_until_are_handed_over(tmp_path):
    with _open(tmp_path) as store:
        store.append("s", _note(1) * 3)
        assert store.own_appends.held() == (1, 3)
        assert store.take_own_appends(1, 3) is None  # not right after the caller's position
        assert store.own_appends.held() is None  # and dropped
        store.append("s", _note(2) * 2)
        assert store.take_own_appends(3, 4) is None  # the held rows go beyond until
        store.append("s", _note(3) * 3)
        assert [r.position for r in store.take_own_appends(5, 8, limit=2)] == [6, 7]  # a prefix; the rest stays
        assert store.own_appends.held() == (8, 8)
        same(store.take_own_appends(7, 8), store.read_all(after=7))


def test_appends_that_continue_the_held_ones_join_them_and_others_replace_them(tmp_path):
    with _open(tmp_path) as store, _open(tmp_path) as other:
        store.append("s", _note(1))
        store.append("s", _note(2) * 2)
        assert store.own_appends.held() == (1, 3)
        other.append("s", _note(3))  # another writer on the log: position 4 is not this store's
        store.append("s", _note(4))
        assert store.own_appends.held() == (5, 5)
        assert store.take_own_appends(3, 5) is None  # position 4 must be read from the log
        store.append("s", _note(5))
        same(store.take_own_appends(5, 6), store.read_all(after=5))


def test_the_positions_between_a_stores_own_appends_are_others_and_each_is_told_once(tmp_path):
    with _open(tmp_path) as store, _open(tmp_path) as other:
        store.append("s", _note(1) * 2)
        store.append("s", _note(2))  # continues the first: one run, 1..3
        other.append("s", _note(3) * 2)  # 4..5
        store.append("s", _note(4))  # 6
        other.append("s", _note(5))  # 7
        store.append("s", _note(6))  # 8
        assert store.appended_here.others(0, 6) == [(4, 5)]
        assert store.appended_here.others(6, 8) == [(7, 7)]  # its runs up to 6 were forgotten; 8 is its own
        assert store.appended_here.others(8, 8) == []
        assert other.appended_here.others(0, 8) == [(1, 3), (6, 6), (8, 8)]
        with pytest.raises(ConcurrencyError):
            store.append("s", _note(7), expected_version=NO_STREAM)
        store.append("s", _note(8), idempotency_key="k")
        assert store.append("s", _note(8), idempotency_key="k").replayed  # a replay appends no position
        other.append("s", _note(9))
        assert store.appended_here.others(8, 10) == [(10, 10)]
        assert store.appended_here.others(3, 10) == [(4, 10)]  # once forgotten, its positions count as another's


def test_nothing_is_held_after_a_failed_append(tmp_path, monkeypatch):
    with _open(tmp_path) as store:
        store.append("s", _note(1), expected_version=NO_STREAM)
        assert store.own_appends.held() == (1, 1)
        with pytest.raises(ConcurrencyError):
            store.append("s", _note(2), expected_version=NO_STREAM)
        assert store.own_appends.held() is None
        assert store.take_own_appends(0, 1) is None

        store.append("s", _note(3))
        assert store.own_appends.held() == (2, 2)

        def broken(conn, position):
            raise RuntimeError("the append fails after its rows were inserted")

        monkeypatch.setattr(dialects, "announce_append", broken)
        with pytest.raises(RuntimeError):
            store.append("s", _note(4))
        assert store.last_position() == 2  # rolled back
        assert store.own_appends.held() is None and store.appended_through == 2


def test_a_replay_appends_nothing_and_hands_over_nothing(tmp_path):
    with _open(tmp_path) as store:
        store.append("s", _note(1), idempotency_key="k")
        assert store.take_own_appends(0, 1) is not None
        again = store.append("s", _note(1), idempotency_key="k")
        assert again.replayed and store.own_appends.held() is None


def test_imported_records_are_not_held(tmp_path):
    with _open(tmp_path) as store, _open(tmp_path / "copy") as copy:
        store.append("s", _note(1))
        copy.append("s", _note(2))
        assert copy.own_appends.held() == (1, 1)
        copy.append_records([row for row in _pending_of(store)])
        assert copy.own_appends.held() is None


def _pending_of(store: EventStore):
    from mnemolog.eventstore.recorder import PendingEvent, PendingWrite

    for rows in store.iter_rows():
        for row in rows:
            yield PendingWrite(row.stream_id, "any", [PendingEvent(row.event_id, row.type, row.schema_version, row.tenant, row.payload, row.metadata, row.correlation_id, row.recorded_at)])


def test_appended_through_moves_only_under_the_write_lock(tmp_path):
    with _open(tmp_path) as store:
        store.append("s", _note(1))
        done = threading.Event()

        def append() -> None:
            store.append("s", _note(2))
            done.set()

        with store.write_lock:
            worker = threading.Thread(target=append)
            worker.start()
            assert not done.wait(0.2)  # the append waits for the lock ...
            assert store.appended_through == 1 and store.own_appends.held() == (1, 1)  # ... and has changed nothing
        worker.join()
        assert store.appended_through == 2 and store.own_appends.held() == (1, 2)  # it continues the held append
