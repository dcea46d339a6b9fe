"""A full disk: a clear 507 and nothing half-written, never a 500.

SQLite answers "database or disk is full" (``SQLITE_FULL``) when a write
needs a page it cannot have; ``PRAGMA max_page_count`` makes a database that
full without filling a disk. When the log itself is full, the write is
refused whole: the answer says the disk is full and the request may be sent
again. When the log took the write but the projections cannot follow it,
the answer says it was written and must not be sent again; once there is
room, reads show it.
"""

from __future__ import annotations

import errno
import sqlite3

from mnemolog.api.errors import as_api_error, is_storage_full

BATCH = {"memories": [{"memory": f"note {i}: " + "words that take room in the log " * 8} for i in range(200)]}


def _limit(conn, pages: int | None) -> None:
    """``max_page_count`` of a sqlite3 connection: its current page count (full), or ``pages``."""
    size = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages if pages is not None else size}")


def _log_connection(service):
    recorder = service.store.recorder
    with recorder.write_lock:
        return recorder._held_connection().connection.driver_connection


async def test_a_full_log_is_507_and_nothing_is_written(api):
    service = api.service
    head = service.store.last_position()
    with service.store.recorder.write_lock:
        _limit(_log_connection(service), None)
    response = await api.raw.post("/v1/memories", json=BATCH)
    body = await response.json()
    assert response.status == 507, body
    assert body["error"]["code"] == "insufficient_storage" and "full" in body["error"]["message"], body
    assert service.store.last_position() == head
    with service.store.recorder.write_lock:
        _limit(_log_connection(service), 1_000_000)
    response = await api.raw.post("/v1/memories", json=BATCH)  # sent again once there is room
    assert response.status == 201, await response.text()


async def test_a_write_the_projections_cannot_follow_says_it_was_written(api):
    service = api.service
    runner = service.runner
    with runner._lock:
        _limit(runner.conn, None)
    batch = {"memories": [{"memory": "written while the projections had no room"}, *BATCH["memories"]]}
    response = await api.raw.post("/v1/memories", json=batch)
    body = await response.json()
    assert response.status == 507, body
    error = body["error"]
    assert error["code"] == "insufficient_storage" and error["written"] is True and "do not send it again" in error["message"], error
    assert service.store.last_position() == error["last_position"]
    response = await api.raw.post("/v1/recall", json={"query": "projections had no room"})  # never an answer without the write
    assert response.status == 507, await response.text()
    with runner._lock:
        _limit(runner.conn, 1_000_000)
    response = await api.raw.post("/v1/recall", json={"query": "projections had no room"})
    assert response.status == 200, await response.text()
    found = [h["memory"]["memory"] for h in (await response.json())["hits"]]
    assert "written while the projections had no room" in found


def test_what_counts_as_a_full_disk():
    full = sqlite3.connect(":memory:")
    full.execute("CREATE TABLE t (x)")
    _limit(full, None)
    try:
        full.execute("INSERT INTO t VALUES (zeroblob(100000))")
    except sqlite3.OperationalError as error:
        assert is_storage_full(error) and as_api_error(error).status == 507
    else:
        raise AssertionError("a database at its max_page_count took a write")
    assert is_storage_full(OSError(errno.ENOSPC, "No space left on device"))
    assert not is_storage_full(OSError(errno.EACCES, "Permission denied"))
    assert not is_storage_full(sqlite3.OperationalError("database is locked"))
