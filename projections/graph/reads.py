"""Reads over the graph projection: nodes, edges, BFS (the facts commands need are :mod:`.facts`).

Every function takes the tenant as a mandatory argument and filters by it
in SQL; ``as_of`` (a log position) reads the rows valid at that position.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any, Callable, Iterable, Sequence

import msgspec

from mnemolog.eventstore.catalogue_graph import DOCUMENT_NODE_PREFIX
from mnemolog.eventstore.model import MemoryContent

from .projector import EDGE_COLUMNS as _EDGE_COLUMNS, edge_from_row, folded_key
from ..filters import INLINE_VALUES, one_of
from ..memory_rows import decode_content, head_clause, known_end

DIRECTIONS = ("out", "in", "both")


class MemoryView(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    tenant: str
    memory: str
    version: int
    status: str
    memory_type: str
    key: str | None
    tags: tuple[str, ...]
    sources: tuple[str, ...]
    background: str | None
    confidence: float | None
    created_at: str
    updated_at: str
    working_binding: str | None
    valid_from: int
    valid_to: int | None
    metadata: dict[str, Any]
    properties: dict[str, Any]
    has_embedding: bool
    subject: str | None = None  # whose data it is (None: the tenant's)
    erased: bool = False  # the subject was forgotten: the text is a marker, personal fields are empty


class EdgeView(msgspec.Struct, frozen=True, kw_only=True):
    edge_id: str
    edge_type: str
    source: str
    target: str
    weight: float
    properties: dict[str, Any]
    valid_from: int
    valid_to: int | None
    merged_from: tuple[str, ...] = ()  # the ids of the edges a merge folded into this one (see EdgeRecord)


class WorkingEntryView(msgspec.Struct, frozen=True, kw_only=True):
    """An entry of a tenant's working memory: ``entered_at`` (the position it entered at) orders the FIFO."""

    binding: str
    memory_id: str
    memory_type: str
    entered_at: int
    valid_from: int
    valid_to: int | None
    memory: MemoryView | None = None  # the memory as of the same point, when asked for


class Reached(msgspec.Struct, frozen=True):
    """A node BFS reached: the product of the edge weights along the first path found."""

    node: str
    depth: int
    score: float
    path: tuple[str, ...]  # edge ids from the seed
    seed: str


_DOC_FIELDS = ("collection", "doc_type", "doc_id", "doc_version", "lang", "source_url", "model")


def content_fields(content: MemoryContent) -> dict[str, Any]:
    """A memory version's text and metadata as every read shows them (a get, each version of a history)."""
    return {
        "memory": content.memory,
        "memory_type": content.memory_type,
        "key": content.key,
        "tags": content.tags,
        "sources": content.sources,
        "background": content.background,
        "confidence": content.confidence,
        "metadata": {f: getattr(content, f) for f in _DOC_FIELDS if getattr(content, f) is not None},
        "properties": content.properties,
        "has_embedding": content.embedding is not None,
        "subject": content.subject,
        "erased": content.erased,
    }


def memory_from_row(row: Sequence, as_of: int | None = None) -> MemoryView:
    """The view of a stored row; read ``as_of`` a position, an end after it is not known yet (``valid_to`` None)."""
    tenant, memory_id, version, valid_from, valid_to, status, created_at, updated_at, binding, content_text = row
    return MemoryView(
        id=memory_id,
        tenant=tenant,
        version=version,
        status=status,
        created_at=created_at,
        updated_at=updated_at,
        working_binding=binding,
        valid_from=valid_from,
        valid_to=known_end(valid_to, as_of),
        **content_fields(decode_content(content_text)),
    )


_MEMORY_SELECT = (
    "SELECT tenant, memory_id, version, valid_from, valid_to, status, created_at, updated_at, working_binding, content"
    " FROM graph_memories"
)


def get_memory(conn: sqlite3.Connection, tenant: str, memory_id: str, *, as_of: int | None = None) -> MemoryView | None:
    valid, params = head_clause(as_of)
    row = conn.execute(
        f"{_MEMORY_SELECT} WHERE tenant = ? AND memory_id = ? AND {valid}", (tenant, memory_id, *params)
    ).fetchone()
    return memory_from_row(row, as_of) if row else None


def get_memories(conn: sqlite3.Connection, tenant: str, memory_ids: Iterable[str], *, as_of: int | None = None) -> dict[str, MemoryView]:
    return {m: memory_from_row(row, as_of) for m, row in memory_rows(conn, tenant, memory_ids, as_of=as_of).items()}


def memory_rows(conn: sqlite3.Connection, tenant: str, memory_ids: Iterable[str], *, as_of: int | None = None) -> dict[str, tuple]:
    """The stored rows of :func:`get_memories`, by id, not yet decoded into views
    (recall decodes only the few it returns; see :func:`content_facts`)."""
    ids = list(dict.fromkeys(memory_ids))
    valid, params = head_clause(as_of)
    found: dict[str, tuple] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        for row in conn.execute(
            f"{_MEMORY_SELECT} WHERE tenant = ? AND memory_id IN ({marks}) AND {valid}", (tenant, *chunk, *params)
        ):
            found[row[1]] = row
    return found


class ContentFacts(msgspec.Struct, frozen=True, gc=False):
    """The part of a stored memory that ranking reads: its text and properties."""

    memory: str = ""
    properties: dict[str, Any] = {}


_facts_decoder = msgspec.json.Decoder(ContentFacts)


def content_facts(row: Sequence) -> ContentFacts:
    """Text and properties of a :func:`memory_rows` row; the other fields are skipped unparsed."""
    return _facts_decoder.decode(row[9])


def memories_by_key(conn: sqlite3.Connection, tenant: str, keys: Iterable[str], *, as_of: int | None = None) -> list[str]:
    """Ids of memories whose ``key`` equals one of ``keys`` (both folded: without case, in one Unicode form)."""
    wanted = list(dict.fromkeys(folded_key(k) for k in keys if k))
    if not wanted:
        return []
    valid, params = head_clause(as_of)
    marks = ",".join("?" * len(wanted))
    rows = conn.execute(
        f"SELECT memory_id FROM graph_memories WHERE tenant = ? AND key IN ({marks}) AND key IS NOT NULL AND {valid}"
        " AND status = 'activated'",
        (tenant, *wanted, *params),
    )
    return [r[0] for r in rows]


def _edge_view(row: Sequence, as_of: int | None = None) -> EdgeView:
    edge = edge_from_row(row)
    return EdgeView(
        edge_id=edge.edge_id,
        edge_type=edge.edge_type,
        source=edge.source,
        target=edge.target,
        weight=edge.weight,
        properties=edge.properties,
        valid_from=row[6],
        valid_to=known_end(row[7], as_of),
        merged_from=edge.merged_from,
    )


def edges_of(
    conn: sqlite3.Connection,
    tenant: str,
    node_id: str,
    *,
    direction: str = "both",
    edge_types: Sequence[str] | None = None,
    as_of: int | None = None,
    limit: int | None = None,
) -> list[EdgeView]:
    """The node's edges, outgoing first, each side in the order linked; at most ``limit`` of them."""
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}")
    return _edges_of(conn, tenant, node_id, direction, _types_clause(edge_types), as_of, limit)


def _edges_of(
    conn: sqlite3.Connection, tenant: str, node_id: str, direction: str, types: tuple[str, tuple[str, ...]], as_of: int | None, limit: int | None = None
) -> list[EdgeView]:
    """:func:`edges_of` with its types' clause prepared (:func:`_types_clause`): a walk prepares it once, not once a node."""
    valid, params = head_clause(as_of)
    type_sql, type_params = types
    out: list[EdgeView] = []
    sides = {"out": ("source",), "in": ("target",), "both": ("source", "target")}[direction]
    for side in sides:
        left = -1 if limit is None else limit - len(out)
        if left == 0:
            break
        rows = conn.execute(
            f"SELECT {_EDGE_COLUMNS} FROM graph_edges WHERE tenant = ? AND {side} = ? AND {valid}{type_sql} ORDER BY row_id LIMIT ?",
            (tenant, node_id, *params, *type_params, left),
        )
        out.extend(_edge_view(r, as_of) for r in rows)
    return out


def edges_into(
    conn: sqlite3.Connection, tenant: str, targets: Sequence[str], edge_type: str, *, as_of: int | None = None, per_target: int | None = None
) -> list[tuple[str, str, str, float]]:
    """``(edge_id, source, target, weight)`` of the ``edge_type`` edges ending at any of ``targets``: one indexed query per 500 targets.

    ``per_target``: at most that many edges into each target, its most recent
    (one query a target), so that an entity mentioned everywhere costs a
    bounded read.
    """
    valid, params = head_clause(as_of)
    out: list[tuple[str, str, str, float]] = []
    if per_target is not None:
        for target in targets:
            out.extend(conn.execute(
                f"SELECT edge_id, source, target, weight FROM graph_edges WHERE tenant = ? AND target = ? AND edge_type = ? AND {valid}"
                " ORDER BY row_id DESC LIMIT ?",
                (tenant, target, edge_type, *params, per_target),
            ))
        return out
    for start in range(0, len(targets), 500):
        part = targets[start : start + 500]
        out.extend(conn.execute(
            f"SELECT edge_id, source, target, weight FROM graph_edges WHERE tenant = ? AND target IN ({','.join('?' * len(part))})"
            f" AND edge_type = ? AND {valid} ORDER BY row_id",
            (tenant, *part, edge_type, *params),
        ))
    return out


_TYPE_SEPARATORS = re.compile(r"[\s-]+")
#: A type as a filter may be written: what :func:`type_filter` reads as an edge or relation type (``works at``, ``WORKS_AT``).
#: (Each run of separators is followed by a word or ends the text: no two ways to read one text, so no backtracking blow-up.)
TYPE_FILTER_RE = re.compile(r"^\s*[A-Za-z][A-Za-z0-9_]*(?:[\s-]+[A-Za-z0-9_]+)*[\s-]*$")


def type_filter(types: Iterable[str] | None) -> tuple[str, ...]:
    """Edge or relation types as a filter reads them: trimmed, each run of spaces and dashes an ``_``, in upper
    case, blanks and repeats dropped, as the commands store them (``related`` is ``RELATED``, ``works at`` ``WORKS_AT``)."""
    return tuple(dict.fromkeys(_TYPE_SEPARATORS.sub("_", t.strip()).upper() for t in types or () if t and t.strip()))


def _types_clause(edge_types: Sequence[str] | None) -> tuple[str, tuple[str, ...]]:
    """`` AND edge_type IN (...)`` and its parameters (:func:`type_filter`); nothing for no types (every type)."""
    types = type_filter(edge_types)
    if not types:
        return "", ()
    sql, params = one_of("edge_type", types)
    return f" AND {sql}", params


def edges_between(
    conn: sqlite3.Connection, tenant: str, node_ids: Sequence[str], *, edge_types: Sequence[str] | None = None, as_of: int | None = None
) -> list[EdgeView]:
    """Edges whose both ends are among ``node_ids`` (relationships between results); with ``edge_types``, of those types only."""
    ids = list(dict.fromkeys(node_ids))
    if len(ids) < 2:
        return []
    valid, params = head_clause(as_of)
    type_sql, type_params = _types_clause(edge_types)
    marks = ",".join("?" * len(ids))
    rows = conn.execute(
        f"SELECT {_EDGE_COLUMNS} FROM graph_edges WHERE tenant = ? AND source IN ({marks}) AND target IN ({marks})"
        f" AND {valid}{type_sql} ORDER BY row_id",
        (tenant, *ids, *ids, *params, *type_params),
    )
    return [_edge_view(r, as_of) for r in rows]


def bfs(
    conn: sqlite3.Connection,
    tenant: str,
    seeds: dict[str, float] | Sequence[str],
    *,
    depth: int = 2,
    direction: str = "both",
    edge_types: Sequence[str] | None = None,
    as_of: int | None = None,
    max_nodes: int = 1000,
    by_score: bool = True,
) -> list[Reached]:
    """Breadth-first expansion from ``seeds``, cycle-safe: each node at its shortest depth.

    A reached node's score is its seed's score times the product of the edge
    weights along its path. Seeds themselves are not returned. Results are
    sorted by score (then depth, then node id), and a node's path is the
    strongest of its shortest paths (whatever the order its edges were linked
    in, or the order of the nodes that lead to it; the first found among
    equals). With ``by_score`` false, they come in the order the walk reached
    them, each by the first path found, so that the walk cut at ``max_nodes``
    is the first part of the whole walk (pages of a neighbourhood).
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}")
    if depth < 0:
        raise ValueError("depth must be >= 0")
    # Prepared once: a request may name a long list of types, and a walk reads many nodes. Past what goes inline,
    # SQLite would read the list's JSON again in each statement (two a node): the walk keeps it as a set instead.
    wanted = type_filter(edge_types)
    kept = frozenset(wanted) if len(wanted) > INLINE_VALUES else None
    types = ("", ()) if kept is not None else _types_clause(wanted)
    start = dict(seeds) if isinstance(seeds, dict) else {s: 1.0 for s in seeds}
    seen: dict[str, Reached] = {}
    visited = set(start)
    frontier = [Reached(node, 0, score, (), node) for node, score in start.items()]
    full = False
    for level in range(1, depth + 1):
        if not frontier or full:
            break
        found: dict[str, Reached] = {}  # this level's nodes, in the order first reached
        for parent in frontier:
            if full and not by_score:
                break
            for edge in _edges_of(conn, tenant, parent.node, direction, types, as_of):
                if kept is not None and edge.edge_type not in kept:
                    continue
                other = edge.target if edge.source == parent.node else edge.source
                if other in visited:
                    continue
                reached = Reached(other, level, parent.score * edge.weight, parent.path + (edge.edge_id,), parent.seed)
                if other in found:
                    if by_score and reached.score > found[other].score:
                        found[other] = reached
                    continue
                if full:
                    continue  # the walk is full: the rest of the level may only find stronger paths to the nodes it holds
                found[other] = reached
                if len(seen) + len(found) >= max_nodes:
                    full = True
                    if not by_score:
                        break
        visited.update(found)
        seen.update(found)
        frontier = list(found.values())
    if not by_score:
        return list(seen.values())
    return sorted(seen.values(), key=lambda r: (-r.score, r.depth, r.node))


def edge_lives(conn: sqlite3.Connection, tenant: str, source: str, edge_type: str) -> list[EdgeView]:
    """Every life of the ``edge_type`` edges starting at ``source``, ended ones included, in the order they were linked."""
    rows = conn.execute(
        f"SELECT {_EDGE_COLUMNS} FROM graph_edges WHERE tenant = ? AND source = ? AND edge_type = ? ORDER BY valid_from, row_id",
        (tenant, source, edge_type),
    )
    return [_edge_view(r) for r in rows]


def mention_walk(
    conn: sqlite3.Connection,
    tenant: str,
    starts: dict[str, float],
    *,
    as_of: int | None = None,
    per_entity: int = 50,
    max_nodes: int = 200,
    newest_into: Callable[..., list[tuple[str, str, str, float]]] | None = None,
) -> list[Reached]:
    """Memories that share an entity with ``starts`` (memory id -> score): memory -> entity -> other memory over ``MENTIONS``.

    A reached memory scores its start's score times both edge weights, and
    its path is the two edge ids; the best path wins. Each entity leads to
    at most ``per_entity`` memories (its most recent mentions), so an entity
    named everywhere costs a bounded read. One query for the starts'
    mentions whatever their number, then the entities' newest mentions
    (:func:`edges_into`, or ``newest_into``, which answers as it does from a
    memo); none reach anything in a tenant with no mentions.
    """
    if not starts:
        return []
    valid, params = head_clause(as_of)
    marks = ",".join("?" * len(starts))
    out_rows = conn.execute(
        f"SELECT edge_id, source, target, weight FROM graph_edges WHERE tenant = ? AND source IN ({marks}) AND edge_type = 'MENTIONS' AND {valid}",
        (tenant, *starts, *params),
    ).fetchall()
    best_in: dict[str, tuple[float, str, str]] = {}  # entity -> (score, start, edge id)
    for edge_id, source, target, weight in out_rows:
        score = starts[source] * weight
        if target not in best_in or (-score, edge_id) < (-best_in[target][0], best_in[target][2]):
            best_in[target] = (score, source, edge_id)
    reached: dict[str, Reached] = {}
    into = newest_into or edges_into
    for edge_id, source, entity, weight in into(conn, tenant, sorted(best_in), "MENTIONS", as_of=as_of, per_target=per_entity + len(starts)):
        if source in starts or source.startswith(DOCUMENT_NODE_PREFIX):
            continue
        score, start, first = best_in[entity]
        found = Reached(source, 2, score * weight, (first, edge_id), start)
        current = reached.get(source)
        if current is None or (-found.score, found.path) < (-current.score, current.path):
            reached[source] = found
    return sorted(reached.values(), key=lambda r: (-r.score, r.node))[:max_nodes]


def working_memory(conn: sqlite3.Connection, tenant: str, *, as_of: int | None = None, memories: bool = False) -> list[WorkingEntryView]:
    """The tenant's working memory, oldest entry first; with ``memories``, each with its memory."""
    valid, params = head_clause(as_of)
    rows = conn.execute(
        f"SELECT binding, memory_id, memory_type, position, valid_from, valid_to FROM graph_working WHERE tenant = ? AND {valid}"
        " ORDER BY position, binding",
        (tenant, *params),
    ).fetchall()
    views = get_memories(conn, tenant, [r[1] for r in rows], as_of=as_of) if memories else {}
    return [
        WorkingEntryView(
            binding=b, memory_id=m, memory_type=t, entered_at=p, valid_from=vf, valid_to=known_end(vt, as_of), memory=views.get(m)
        )
        for b, m, t, p, vf, vt in rows
    ]


def graph_stats(conn: sqlite3.Connection, tenant: str, *, as_of: int | None = None) -> dict[str, Any]:
    """Counts of memories by status, edges by type, and working memory: at the head or as of a position."""
    valid, params = head_clause(as_of)
    memories = dict(
        conn.execute(
            f"SELECT status, count(*) FROM graph_memories WHERE tenant = ? AND {valid} GROUP BY status", (tenant, *params)
        ).fetchall()
    )
    edge_types = dict(
        conn.execute(
            f"SELECT edge_type, count(*) FROM graph_edges WHERE tenant = ? AND {valid} GROUP BY edge_type", (tenant, *params)
        ).fetchall()
    )
    working = conn.execute(f"SELECT count(*) FROM graph_working WHERE tenant = ? AND {valid}", (tenant, *params)).fetchone()[0]
    return {
        "memories": memories,
        "memories_total": sum(memories.values()),
        "edges": edge_types,
        "edges_total": sum(edge_types.values()),
        "working_memory": working,
        "as_of": as_of,
    }


def memory_versions(conn: sqlite3.Connection, tenant: str, memory_id: str) -> list[MemoryView]:
    """Every projected version of a memory, oldest first (a dropped tenant's are gone)."""
    rows = conn.execute(f"{_MEMORY_SELECT} WHERE tenant = ? AND memory_id = ? ORDER BY version", (tenant, memory_id))
    return [memory_from_row(r) for r in rows]


def activated_memories(conn: sqlite3.Connection, tenant: str) -> list[MemoryView]:
    """The tenant's activated memories at the head, by id."""
    rows = conn.execute(
        f"{_MEMORY_SELECT} WHERE tenant = ? AND status = 'activated' AND valid_to IS NULL ORDER BY memory_id", (tenant,)
    )
    return [memory_from_row(r) for r in rows]


class GraphReads:
    """The graph projection's reads, bound to one service.

    It holds the service's per-thread read connection and resolves ``as_of``
    (a position, an ISO-8601 time or a datetime) as every read of the
    service does; a caller that makes several reads of one point in time
    resolves it once (``service.resolve_as_of``) and passes the position.
    """

    def __init__(self, connect: Callable[[], sqlite3.Connection], resolve_as_of: Callable[[Any], int | None]):
        self._connect = connect
        self._resolve = resolve_as_of

    def memory(self, tenant: str, memory_id: str, *, as_of: Any = None) -> MemoryView | None:
        return get_memory(self._connect(), tenant, memory_id, as_of=self._resolve(as_of))

    def memories(self, tenant: str, memory_ids: Iterable[str], *, as_of: Any = None) -> dict[str, MemoryView]:
        return get_memories(self._connect(), tenant, memory_ids, as_of=self._resolve(as_of))

    def versions(self, tenant: str, memory_id: str) -> list[MemoryView]:
        return memory_versions(self._connect(), tenant, memory_id)

    def activated(self, tenant: str) -> list[MemoryView]:
        return activated_memories(self._connect(), tenant)

    def working_memory(self, tenant: str, *, as_of: Any = None, memories: bool = False) -> list[WorkingEntryView]:
        return working_memory(self._connect(), tenant, as_of=self._resolve(as_of), memories=memories)

    def edges_of(
        self, tenant: str, node_id: str, *, direction: str = "both", edge_types: Sequence[str] | None = None, as_of: Any = None, limit: int | None = None
    ) -> list[EdgeView]:
        return edges_of(self._connect(), tenant, node_id, direction=direction, edge_types=edge_types, as_of=self._resolve(as_of), limit=limit)

    def edges_between(self, tenant: str, node_ids: Sequence[str], *, edge_types: Sequence[str] | None = None, as_of: Any = None) -> list[EdgeView]:
        return edges_between(self._connect(), tenant, node_ids, edge_types=edge_types, as_of=self._resolve(as_of))

    def bfs(
        self,
        tenant: str,
        seeds: dict[str, float] | Sequence[str],
        *,
        depth: int = 2,
        direction: str = "both",
        edge_types: Sequence[str] | None = None,
        as_of: Any = None,
        max_nodes: int = 1000,
        by_score: bool = True,
    ) -> list[Reached]:
        return bfs(
            self._connect(), tenant, seeds, depth=depth, direction=direction, edge_types=edge_types, as_of=self._resolve(as_of), max_nodes=max_nodes,
            by_score=by_score,
        )

    def edge_lives(self, tenant: str, source: str, edge_type: str) -> list[EdgeView]:
        return edge_lives(self._connect(), tenant, source, edge_type)

    def stats(self, tenant: str, *, as_of: Any = None) -> dict[str, Any]:
        return graph_stats(self._connect(), tenant, as_of=self._resolve(as_of))
