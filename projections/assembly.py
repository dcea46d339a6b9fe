"""Which projectors and read-side extras a data directory runs with."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Callable

from mnemolog.eventstore.settings import Settings

from .fts.projector import FtsProjector, fts_search
from .entities.projector import EntityProjector
from .graph.projector import GraphProjector
from .vectors.embedders import get_embedder
from .recall.searcher import Searcher
from .runner import connect
from .vectors.index import VectorIndex
from .vectors.projector import VectorProjector, vector_search
from .linking.relink import attach_entities


log = logging.getLogger("mnemolog.vectors")


def default_projectors(settings: Settings, data_dir: Path) -> list[Any]:
    return [GraphProjector(), FtsProjector(), VectorProjector(get_embedder(settings.embedder)), EntityProjector()]


def _lexical(service):
    def search(tenant, query, limit, as_of, raw, filters, analysis=None):
        # The question's search terms (question and function words dropped,
        # variants added) over the word columns; CJK bigrams come from the query.
        terms = None if raw or analysis is None else analysis.search_terms
        hits = fts_search(service.read_conn(), tenant, query, limit=limit, as_of=as_of, raw=raw, filters=filters, terms=terms)
        return [(h.memory_id, h.score) for h in hits]

    return search


class IndexFollower(threading.Thread):
    """Adds new vectors to the HNSW index in the background, out of the write path.

    Searches stay exact meanwhile: rows past the index's checkpoint are
    scored exactly (``vector_search``'s tail), so nothing is missed while the
    index catches up.
    """

    def __init__(self, index: VectorIndex, path, interval: float = 1.0):
        super().__init__(name="mnemolog-vector-index", daemon=True)
        self.index = index
        self.path = path
        self.interval = interval
        self.wake = threading.Event()
        self.stopping = threading.Event()

    def notify(self, name: str, _position: int) -> None:
        if name == "vectors":
            self.wake.set()

    def run(self) -> None:
        conn = connect(self.path)
        try:
            while not self.stopping.is_set():
                self.wake.wait(self.interval)
                self.wake.clear()
                try:
                    self.index.sync(conn)
                except Exception:  # the next round retries; searches stay exact meanwhile
                    log.exception("vector index sync failed")
        finally:
            conn.close()

    def close(self) -> None:
        self.stopping.set()
        self.wake.set()
        self.join(timeout=60)
        conn = connect(self.path)
        try:
            self.index.sync(conn)
        finally:
            conn.close()
        self.index.save()


def attach_searcher(service) -> None:
    """The recall channels over this data directory's projections, and the vector index they need."""
    embedder = get_embedder(service.settings.embedder)
    index = VectorIndex.open(service.data_dir, service.runner.conn, embedder_name=embedder.name, dim=embedder.dim)
    service.vector_index = index
    service.embedding_dim = embedder.dim
    follower = IndexFollower(index, service.runner.path)
    follower.start()
    service.add_after_commit(follower.notify)
    service.add_closer(follower.close)

    def semantic(tenant, vector, limit, as_of, filters):
        hits = vector_search(service.read_conn(), index, tenant, vector, limit=limit, as_of=as_of, filters=filters)
        return [(h.memory_id, h.score) for h in hits]

    service.searcher = Searcher(service.read_conn, _lexical(service), semantic, embedder.embed_query, embedder.name, service.settings)


def default_extras(settings: Settings) -> list[Callable[[Any], None]]:
    return [attach_searcher, attach_entities]
