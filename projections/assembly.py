"""Which projectors and read-side extras a data directory runs with."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from eventstore.settings import Settings

from .fts import WORD_COLUMNS, FtsProjector, fts_search
from .textsearch import cjk_match_expression, fts_match_expression, has_cjk
from .entities import EntityProjector
from .graph import GraphProjector
from .recall import Searcher
from .relink import attach_entities


def default_projectors(settings: Settings, data_dir: Path) -> list[Any]:
    return [GraphProjector(), FtsProjector(), EntityProjector()]


def lexical_match(query: str, analysis) -> str | None:
    """The MATCH for a question: its search terms (question and function words
    dropped, variants added) over the word columns, and CJK bigrams over ``cjk``."""
    parts = []
    words = fts_match_expression(analysis.search_terms, mode="or", column=WORD_COLUMNS)
    if words:
        parts.append(words)
    if has_cjk(query):
        cjk = cjk_match_expression(query, column="cjk")
        if cjk:
            parts.append(cjk)
    return " OR ".join(f"({p})" for p in parts) if parts else None


def _lexical(service):
    def search(tenant, query, limit, as_of, raw, filters, analysis=None):
        match = query if raw or analysis is None else lexical_match(query, analysis)
        if match is None:
            return []
        hits = fts_search(service.read_conn(), tenant, match, limit=limit, as_of=as_of, raw=True, filters=filters)
        return [(h.memory_id, h.score) for h in hits]

    return search


def attach_searcher(service) -> None:
    service.searcher = Searcher(service.read_conn, _lexical(service), None, None, service.settings.embedder, service.settings)


def default_extras(settings: Settings) -> list[Callable[[Any], None]]:
    return [attach_searcher, attach_entities]
