"""Entities as recall items: from the entities a query names, along their relations.

Finding them
    The query's entity mentions come from the tenant's alias catalogue as of
    the read (:func:`mnemolog.projections.linking.relink.named_entities`: the
    deterministic linker of document import and of ``POST /v1/relations``).
    From each named entity, :func:`mnemolog.projections.entities.projector.get_related`
    (the BFS of ``GET /v1/entities/{id}/related``: depth, direction, relation
    types; the strongest paths expand first) reaches the others. The walk is bounded (at most
    ``max_nodes`` entities a named entity) and does not run at all when the
    query names no entity.

Scores, calibrated against memories
    An entity's score is on the graph channel's scale, a product of weights
    in [0, 1], like a memory the channel reaches (a memory named by its key
    scores 1, one edge of weight w further w):

    - an entity reached from a named one: the product of the relation weights
      along its path, times ``MNEMOLOG_RECALL_ENTITY_DEPTH_DECAY`` (0.8) for
      every relation beyond the first (``WORKS_AT`` 0.9 then
      ``HEADQUARTERED_IN`` 0.9: 0.81 x 0.8 = 0.648): weights near 1 would
      otherwise let two hops tie with one;
    - a named entity itself: ``MNEMOLOG_RECALL_ENTITY_SEED_SCORE`` (0.5): the
      question already knows it, so it ranks below a strong one-relation
      answer but is still returned as the card the answer hangs on;
    - hints: the score is multiplied by ``MNEMOLOG_RECALL_ENTITY_HINT_BOOST``
      (1.2) when the query names the entity's type ("which *team*", "*who*"
      for a person), and again when it names a word of the relation that
      reached it ("who *works* at"); capped at 1.

    Fusion then treats entities like any graph-channel hit: weighted RRF by
    their rank in the channel, score fusion by their absolute score times the
    channel's weight (0.8), never re-normalised to the channel's best. So the
    best lexical memory (1.0 x 1.0) stays above an entity one strong relation
    away (0.9 x 0.8 = 0.72), which stays above weak lexical matches: entities
    and memories interleave rather than form two blocks.

Memories the entities lead to
    The named entities (score 1) and the reached ones (their score) seed a
    one-hop walk along ``MENTIONS`` edges (item -> entity) back to the memories
    and chunks that mention them: score = seed score x mention weight x
    ``MNEMOLOG_RECALL_ENTITY_MENTION_FACTOR`` (0.9): a memory about an answer
    ranks just below the answer, a memory about the named entity (0.9) above
    the named entity's own card (0.5).
"""

from __future__ import annotations

import sqlite3
from functools import lru_cache
from typing import Sequence

import msgspec

from mnemolog.eventstore.model import NotFound
from mnemolog.eventstore.settings import setting

from ..entities import projector as ents
from ..state_memo import Held, StateMemo
from .query_analysis import stem

SEED_SCORE = setting("recall_entity_seed_score", 0.5, "Graph-channel score of an entity the query names (the entities it leads to score the product of the relation weights).", above=0)
ENTITY_DEPTH = setting("recall_entity_depth", 2, "Relations walked from the entities a query names when the request sets no graph_depth.", minimum=0, maximum=5)
HINT_BOOST = setting("recall_entity_hint_boost", 1.2, "Score factor of an entity whose type the query names, and again when it names the relation that reached it (1 switches hints off).", above=0)
DEPTH_DECAY = setting("recall_entity_depth_decay", 0.8, "Score factor per relation beyond the first on an entity's path (1: the weight product alone).", above=0, maximum=1)
MENTION_FACTOR = setting("recall_entity_mention_factor", 0.9, "Score factor of a memory reached from an entity through a MENTIONS edge (one step further than the entity; a named entity counts 1).", above=0)

#: Query words that name an entity type, beyond the type's own name.
TYPE_WORDS: dict[str, tuple[str, ...]] = {
    "person": ("who", "whom", "whose", "person", "people", "谁"),
    "organization": ("company", "companies", "employer", "organization", "organisation", "公司", "集团"),
    "city": ("where", "city", "cities", "town", "哪里", "城市"),
    "team": ("team", "teams", "组", "团队"),
    "project": ("project", "projects", "项目"),
    "technology": ("technology", "tech", "stack", "技术"),
}


class EntityReach(msgspec.Struct, frozen=True):
    """An entity recall found: named by the query (``depth`` 0, ``named_as`` the surface) or reached along ``path``."""

    id: str
    score: float
    depth: int
    path: tuple[ents.RelationView, ...] = ()
    named_as: str | None = None
    path_score: float = 1.0


def hint_words(query: str, terms: Sequence[str]) -> set[str]:
    """The query's words as hints compare them: lower-cased terms, their stems, and the query's CJK text."""
    words = {t.lower() for t in terms} | {stem(t.lower()) for t in terms}
    words |= {w.strip("?!.,;:'\"").lower() for w in query.split()}
    return words


@lru_cache(maxsize=4096)
def _type_words(entity_type: str) -> tuple[str, ...]:
    kind = entity_type.lower()
    return tuple(w for w in (kind, *TYPE_WORDS.get(kind, ())) if w)


@lru_cache(maxsize=4096)
def _relation_words(relation_type: str) -> frozenset[str]:
    """A relation type's words of 3+ letters and their stems ("WORKS_AT": works, work)."""
    parts = [p.lower() for p in relation_type.split("_") if len(p) > 2]
    return frozenset(parts) | {stem(p) for p in parts}


def hints(reach: EntityReach, entity_type: str, words: set[str], query: str) -> int:
    """How many hints the query gives for ``reach``: its type named (0 or 1), plus the last relation named (0 or 1)."""
    named_type = any(w in words or (not w.isascii() and w in query) for w in _type_words(entity_type))
    named_relation = bool(reach.path) and not words.isdisjoint(_relation_words(reach.path[-1].relation_type))
    return int(named_type) + int(named_relation)


def walk(
    conn: sqlite3.Connection,
    tenant: str,
    named: dict[str, str],
    *,
    query: str,
    terms: Sequence[str],
    depth: int,
    direction: str,
    relation_types: Sequence[str] | None,
    as_of: int | None,
    max_nodes: int,
    seed_score: float,
    hint_boost: float,
    depth_decay: float = 1.0,
    memo: StateMemo | None = None,
) -> list[EntityReach]:
    """The named entities and those their relations reach, best first (score, depth, id).

    ``memo`` (the entity projection's) holds, at the head, each entity's
    walk and type while the projection stays as it is.
    """
    held = memo.held(conn) if memo is not None and as_of is None else None
    best: dict[str, EntityReach] = {e: EntityReach(e, seed_score, 0, (), alias, 1.0) for e, alias in named.items()}
    for entity_id in named:
        try:
            reached = _related(conn, tenant, entity_id, depth, direction, relation_types, as_of, max_nodes, held)
        except NotFound:  # removed since the catalogue was read
            best.pop(entity_id, None)
            continue
        for r in reached:
            current = best.get(r.id)
            if current is None or (current.depth > 0 and r.score > current.score):
                best[r.id] = EntityReach(r.id, r.score * depth_decay ** (r.depth - 1), r.depth, r.path, None, r.score)
    if hint_boost != 1.0 and best:
        words = hint_words(query, terms)
        types = _types(conn, tenant, list(best), as_of, held)
        for e, r in best.items():
            if r.depth and (n := hints(r, types.get(e, ""), words, query)):
                best[e] = msgspec.structs.replace(r, score=min(1.0, r.score * hint_boost**n))
    return sorted(best.values(), key=lambda r: (-r.score, r.depth, r.id))


def _related(conn, tenant: str, entity_id: str, depth: int, direction: str, relation_types, as_of: int | None, max_nodes: int, held: Held | None):
    """:func:`ents.get_related`, from ``held`` when it holds the same walk."""
    if held is None:
        return ents.get_related(conn, tenant, entity_id, depth, direction, relation_types, as_of, max_nodes=max_nodes)
    key = ("related", tenant, entity_id, depth, direction, tuple(relation_types) if relation_types is not None else None, max_nodes)
    found = held.get(key)
    if found is None:
        found = ents.get_related(conn, tenant, entity_id, depth, direction, relation_types, as_of, max_nodes=max_nodes)
        held.put(key, found, len(found) + 1)
    return found


def _types(conn, tenant: str, entity_ids: list[str], as_of: int | None, held: Held | None) -> dict[str, str]:
    """:func:`ents.entity_types` (an entity it does not find: ""), reading only what ``held`` does not hold."""
    if held is None:
        return ents.entity_types(conn, tenant, entity_ids, as_of=as_of)
    kind = ("type", tenant)
    held.fill(kind, entity_ids, lambda unread: ents.entity_types(conn, tenant, unread, as_of=as_of), missing="")
    return {e: held[kind, e] for e in entity_ids}
