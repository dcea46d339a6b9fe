"""``EntityReads``: the entity projection's reads, bound to one service.

The SQL lives in :mod:`mnemolog.projections.entities.projector`; this object
gives the API and the CLI the same reads without a connection in every
call: it holds the service's per-thread read connection and resolves
``as_of`` (a position, an ISO-8601 time or a datetime) like every read of the
service. The tenant stays a mandatory argument of every method.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Callable, Iterable, Sequence

from . import projector as ents


class EntityReads:
    def __init__(self, connect: Callable[[], sqlite3.Connection], resolve_as_of: Callable[[Any], int | None]):
        self._connect = connect
        self._resolve = resolve_as_of

    def get(self, tenant: str, entity_id: str, *, as_of: Any = None) -> ents.EntityView | None:
        return ents.get_entity(self._connect(), tenant, entity_id, as_of=self._resolve(as_of))

    def many(self, tenant: str, entity_ids: Iterable[str], *, as_of: Any = None) -> dict[str, ents.EntityView]:
        return ents.get_entities(self._connect(), tenant, entity_ids, as_of=self._resolve(as_of))

    def find_by_keywords(
        self,
        tenant: str,
        keywords: str | Sequence[str] = (),
        *,
        tag: str | None = None,
        entity_type: str | None = None,
        limit: int = 50,
        as_of: Any = None,
    ) -> list[ents.EntityView]:
        return ents.find_by_keywords(self._connect(), tenant, keywords, tag=tag, entity_type=entity_type, limit=limit, as_of=self._resolve(as_of))

    def find_tags(self, tenant: str, prefix: str = "", *, limit: int = 100, as_of: Any = None) -> list[tuple[str, int]]:
        return ents.find_tags(self._connect(), tenant, prefix, limit=limit, as_of=self._resolve(as_of))

    def relations_of(self, tenant: str, entity_id: str, *, direction: str = "both", relation_types=None, as_of: Any = None) -> list[ents.RelationView]:
        return ents.relations_of(self._connect(), tenant, entity_id, direction=direction, relation_types=relation_types, as_of=self._resolve(as_of))

    def related_walk(
        self,
        tenant: str,
        entity_id: str,
        depth: int = 1,
        direction: str = "out",
        relation_types: Sequence[str] | None = None,
        *,
        as_of: Any = None,
        max_nodes: int | None = None,
        by_score: bool = True,
    ) -> tuple[list[ents.Related], bool]:
        """The entities reached from ``entity_id`` by relations, and whether the walk stopped at ``max_nodes`` (default
        :data:`~mnemolog.projections.entities.projector.RELATED_MAX_NODES`) entities with more beyond; ``by_score``: see
        :func:`~mnemolog.projections.entities.projector.related_walk`."""
        return ents.related_walk(
            self._connect(), tenant, entity_id, depth, direction, relation_types, self._resolve(as_of), max_nodes=max_nodes, by_score=by_score
        )

    def incoming_relations(self, tenant: str, entity_id: str) -> list[tuple[str, str]]:
        """``(source, relation type)`` of the live relations pointing at ``entity_id``."""
        return ents.incoming_relations(self._connect(), tenant, entity_id)

    def document(self, tenant: str, doc_id: str, *, as_of: Any = None) -> ents.DocumentView | None:
        return ents.get_document(self._connect(), tenant, doc_id, as_of=self._resolve(as_of))

    def documents(self, tenant: str, *, collection: str | None = None, as_of: Any = None) -> list[ents.DocumentView]:
        return ents.list_documents(self._connect(), tenant, collection=collection, as_of=self._resolve(as_of))
