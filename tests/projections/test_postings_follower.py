"""The in-memory lexical index follows the FTS projection in the background, in a process that searches it.

After a large import the first search took in every new row itself (seconds
after tens of thousands of document chunks); a server's follower now does it
once writes pause, and a process that never searched holds no index at all.
"""

from __future__ import annotations

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.projections.assembly import IndexFollower
from mnemolog.projections.fts.postings import PostingsIndex
from mnemolog.projections.service import MemoryService

CTX = CommandContext(tenant="t")


def _add(svc: MemoryService, n: int, start: int = 0) -> None:
    svc.run(svc.memories.add, CTX, [MemoryContent(memory=f"harbour note {i} about the lighthouse keeper") for i in range(start, start + n)])


def _rows(conn) -> int:
    return conn.execute("SELECT count(*) FROM fts_docs").fetchone()[0]


def test_the_follower_takes_in_new_rows_once_writes_pause(tmp_path):
    with MemoryService.open(tmp_path) as svc:
        _add(svc, 5)
        svc.warm()  # a server loads the index at start
        index = PostingsIndex.for_connection(svc.read_conn())
        _add(svc, 300, start=5)
        conn = svc.runner.connection()
        try:
            follower = IndexFollower(svc.vector_index, svc.runner.connection)  # never started: each look is one step()
            assert index.lag(conn) == (_rows(conn), 300)
            follower.step(conn, now=0.0)  # the projection moved since the last look: writes may go on
            follower.step(conn, now=1.0)  # quiet for one look: caught up
            assert index.cols.n == _rows(conn) == 305 and index.lag(conn)[1] == 0
        finally:
            conn.close()


def test_the_follower_starts_over_after_a_forget_and_leaves_unused_indexes_alone(tmp_path):
    with MemoryService.open(tmp_path) as svc:
        _add(svc, 20)
        conn = svc.runner.connection()
        try:
            index = PostingsIndex.for_connection(conn)
            follower = IndexFollower(svc.vector_index, svc.runner.connection)
            assert index.lag(conn) == (0, 0)  # never searched here: nothing to follow
            follower.step(conn, now=0.0)
            follower.step(conn, now=1.0)
            assert index.cols.n == 0 and not index.used
            svc.warm()
            svc.run(svc.memories.add, CTX, [MemoryContent(memory="Quillbert hums", subject="u-1")])
            svc.forget(CTX, "u-1")  # the index lets go of every term, to be built again
            assert index.lag(conn)[1] >= 1
            follower.step(conn, now=2.0)
            follower.step(conn, now=3.0)
            assert index.lag(conn)[1] == 0 and index.cols.n == _rows(conn)
        finally:
            conn.close()


def test_a_follower_that_cannot_open_its_database_stops_and_says_so(tmp_path, caplog):
    """A projections file replaced while the thread opened it was a disk I/O error that killed the thread unlogged."""
    import logging
    import sqlite3

    def unopenable():
        raise sqlite3.OperationalError("disk I/O error")

    with MemoryService.open(tmp_path) as svc, caplog.at_level(logging.ERROR, logger="mnemolog.vectors"):
        IndexFollower(svc.vector_index, unopenable).run()  # returns, rather than raising out of the thread
    assert "could not be opened" in caplog.text
