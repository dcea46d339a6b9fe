"""Which projectors and read-side extras a data directory runs with."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from eventstore.settings import Settings

from .fts import FtsProjector, fts_search
from .entities import EntityProjector
from .graph import GraphProjector
from .recall import Searcher
from .relink import attach_entities


def default_projectors(settings: Settings, data_dir: Path) -> list[Any]:
    return [GraphProjector(), FtsProjector(), EntityProjector()]


def _lexical(service):
    def search(tenant, query, limit, as_of, raw, filters):
        hits = fts_search(service.read_conn(), tenant, query, limit=limit, as_of=as_of, raw=raw, filters=filters)
        return [(h.memory_id, h.score) for h in hits]

    return search


def attach_searcher(service) -> None:
    service.searcher = Searcher(service.read_conn, _lexical(service), None, None, service.settings.embedder, service.settings)


def default_extras(settings: Settings) -> list[Callable[[Any], None]]:
    return [attach_searcher, attach_entities]
