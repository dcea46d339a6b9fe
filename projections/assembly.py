"""The parts a :class:`~mnemolog.projections.service.MemoryService` is built from: its projectors, recall channels and vector index follower.

The service assembles them in its constructor; nothing here holds a service.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable

from mnemolog.eventstore.settings import Settings
from mnemolog.eventstore.errors import OutsideChange, log_failure

from .fts.postings import PostingsIndex
from .fts.projector import FtsProjector, fts_search
from .entities.projector import EntityProjector
from .graph.projector import GraphProjector
from .vectors.embedders import configured_embedder
from .vectors.index import VectorIndex
from .vectors.projector import ForeignVectors, VectorProjector, vector_search


log = logging.getLogger("mnemolog.vectors")


def default_projectors(settings: Settings, data_dir: Path) -> list[Any]:
    return [GraphProjector(), FtsProjector(), VectorProjector(configured_embedder(settings)), EntityProjector()]


def lexical_channel(read_conn: Callable[[], sqlite3.Connection]):
    """Recall's lexical channel over the FTS projection."""

    def search(tenant, query, limit, as_of, raw, filters, analysis=None):
        # The question's search terms (question and function words dropped,
        # variants added) over the word columns; CJK bigrams come from the query.
        terms = None if raw or analysis is None else analysis.search_terms
        hits = fts_search(read_conn(), tenant, query, limit=limit, as_of=as_of, raw=raw, filters=filters, terms=terms)
        return [(h.memory_id, h.score) for h in hits]

    return search


def semantic_channel(read_conn: Callable[[], sqlite3.Connection], index: VectorIndex, foreign: Callable[[str, sqlite3.Connection], str | None]):
    """Recall's semantic channel over the vector projection and its index (``foreign``: the runner's
    :meth:`~.runner.ProjectionRunner.foreign_reason`; a vector projection another embedder rebuilt is not searched)."""

    def search(tenant, vector, limit, as_of, filters):
        conn = read_conn()
        if (reason := foreign("vectors", conn)) is not None:
            raise ForeignVectors(reason)
        hits = vector_search(conn, index, tenant, vector, limit=limit, as_of=as_of, filters=filters)
        return [(h.memory_id, h.score) for h in hits]

    return search


class _Due:
    """When a follower catches an in-memory index up: once its source has not moved for one look, or lags
    ``max_lag`` row ids, or its oldest row has waited ``max_wait`` seconds (a steady trickle of writes)."""

    def __init__(self, max_lag: int, max_wait: float):
        self.max_lag, self.max_wait = max_lag, max_wait
        self._seen: int | None = None
        self._waiting_since: float | None = None

    def __call__(self, top: int, behind: int, now: float) -> bool:
        quiet, self._seen = top == self._seen, top
        if not behind:
            self._waiting_since = None
            return False
        if self._waiting_since is None:
            self._waiting_since = now
        if quiet or behind >= self.max_lag or now - self._waiting_since >= self.max_wait:
            self._waiting_since = None
            return True
        return False


class IndexFollower(threading.Thread):
    """Adds new vectors to the HNSW index, and new rows to the in-memory lexical index, in the background, out
    of the write path, once writes pause.

    An HNSW insert costs about what the rest of a memory's write costs
    (command, append, every projection), and every server process keeps its
    own index: following each commit at once made a stream of batched writes
    pay for it once per process while it lasted. So the follower waits until
    the ``vectors`` projection has not moved for one ``interval``, or until
    ``max_lag`` row ids are waiting, or until the oldest has waited
    ``max_wait`` seconds (a steady trickle of writes), then adds everything
    waiting in one batch (usearch spreads a batch over the cores).

    The lexical index (:class:`~.fts.postings.PostingsIndex`) follows
    ``fts_docs`` the same way, in a process that has searched it (a server
    loads it at start): otherwise the first search after a large import
    would take in every new row itself, seconds after tens of thousands of
    document chunks.

    It looks once every ``interval``, and at once when a commit of the
    projection (:meth:`notify`) finds it idle (its last look found nothing
    waiting), so that the quiet clock starts with the first write; while
    rows wait, commits do not wake it, so a stream of writes costs it one
    look an ``interval`` rather than a thread wake-up and a query beside
    every write (``max_lag`` and ``max_wait`` are checked on those looks).

    Searches stay exact meanwhile: rows past the index's checkpoint are
    scored exactly (``vector_search``'s tail), so nothing is missed while the
    index catches up; ``max_lag`` bounds that tail (10,000 rows: about 13 ms
    more per semantic search while a bulk write goes on). A lexical search
    takes in the rows its index lacks before it answers.

    Its adds run on one of usearch's threads (see :meth:`VectorIndex.sync`).
    """

    def __init__(
        self, index: VectorIndex, connect: Callable[[], sqlite3.Connection], interval: float = 1.0, max_lag: int = 10_000, max_wait: float = 10.0
    ):
        super().__init__(name="mnemolog-vector-index", daemon=True)
        self.index = index
        self.connect = connect  # a new connection to projections.db (the runner's)
        self.interval = interval
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self._vectors_due = _Due(max_lag, max_wait)
        self._postings_due = _Due(max_lag, max_wait)
        self._idle = True  # the last look found nothing waiting: the next commit wakes it

    def notify(self, name: str, _position: int) -> None:
        if name == "vectors" and self._idle:
            self._idle = False
            self.wake.set()

    def step(self, conn: sqlite3.Connection, now: float | None = None) -> int:
        """One look: each index caught up if its projection stood still since the last look, or lags too far or
        too long; the vectors added."""
        now = time.monotonic() if now is None else now
        self._idle = True  # a commit from now on wakes the next look, unless this one finds rows waiting
        top, behind = self.index.lag(conn)
        added, waiting = 0, False
        if self._vectors_due(top, behind, now):
            added = self.index.sync(conn)
        else:
            waiting = bool(behind)
        postings = PostingsIndex.made_for(conn)
        top, behind = postings.lag(conn) if postings is not None else (0, 0)
        if self._postings_due(top, behind, now):
            postings.load(conn)
        else:
            waiting = waiting or bool(behind)
        if waiting:
            self._idle = False
        return added

    def run(self) -> None:
        try:
            conn = self.connect()
        except OutsideChange as exc:  # projections.db deleted or replaced before the thread began: nothing to follow
            log.warning("vector index sync stopped: %s", exc)
            return
        except Exception:  # unopenable (replaced mid-open, a disk error): searches catch up themselves meanwhile
            log_failure(log, "index sync stopped: projections.db could not be opened")
            return
        try:
            while not self.stopping.is_set():
                self.wake.wait(self.interval)
                self.wake.clear()
                try:
                    self.step(conn)
                except OutsideChange as exc:  # another embedder's vectors, or the file gone: nothing to add until a restart
                    log.warning("vector index sync stopped: %s", exc)
                    return
                except Exception:  # the next round retries; searches stay exact meanwhile
                    log_failure(log, "index sync failed (vector or lexical)")
        finally:
            conn.close()

    def close(self) -> None:
        self.stopping.set()
        self.wake.set()
        self.join(timeout=60)
        conn = self.connect()
        try:
            self.index.sync(conn)
            self.index.save(conn)
        finally:
            conn.close()
