"""What recall reads about its candidates: their rows and what the priors need
of them, their conversation neighbours, and whether they pass the request's filters.

At the head every answer is held per state of the projection it comes from
(:class:`mnemolog.projections.state_memo.StateMemo`), so a memory read for one
question is not read again for the next while that projection stays as it
is. Reads as of a position always go to SQL.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Sequence

from . import fusion
from ..filters import filter_sql
from ..graph import reads as graph_reads
from ..memory_rows import head_clause
from ..state_memo import StateMemo
from ..text_caches import lru_cache
from .query_analysis import find_time_expressions, parse_datetime

if TYPE_CHECKING:
    from .searcher import RecallOptions

Neighbour = tuple[str, float, str]  # the other turn, the edge's weight, FOLLOWS or PRECEDES


def rows_and_facts(
    memo: StateMemo, conn: sqlite3.Connection, tenant: str, memory_ids: list[str], as_of: int | None, temporal: bool
) -> tuple[dict[str, tuple], dict[str, fusion.MemoryFacts]]:
    """The stored rows of ``memory_ids`` (those found) and what the priors need of each.

    At the head both are held in ``memo`` (the graph projection's), so a
    memory is read and decoded once, not once a question.
    """
    held = memo.held(conn) if as_of is None else None
    if held is None:
        rows = graph_reads.memory_rows(conn, tenant, memory_ids, as_of=as_of)
        return rows, {m: _facts(graph_reads.content_facts(row), temporal) for m, row in rows.items()}
    kind = ("row", tenant)
    held.fill(
        kind, memory_ids, lambda unread: graph_reads.memory_rows(conn, tenant, unread),
        weigh=lambda row: 1 + (len(row[9]) // 128 if row is not None else 0),
    )
    rows, facts = {}, {}
    for m in memory_ids:
        row = held[kind, m]
        if row is not None:
            rows[m] = row
            known = held.get(("facts", tenant, temporal, m))
            facts[m] = known if known is not None else held.put(("facts", tenant, temporal, m), _facts(graph_reads.content_facts(row), temporal), 0)
    return rows, facts


def _facts(content: graph_reads.ContentFacts, temporal: bool) -> fusion.MemoryFacts:
    """What the priors need of a memory: its speaker, whether it mentions a time, when it was said.

    Whether a text mentions a time matters only to a when-question, so it is
    looked at only then; both text analyses are cached across queries.
    """
    props = content.properties or {}
    speaker = props.get("speaker") if isinstance(props.get("speaker"), str) else None
    when = props.get("time") or props.get("occurred_at")
    occurred = _when(when) if isinstance(when, str) else None
    return fusion.MemoryFacts(speaker=speaker, has_time_ref=temporal and _mentions_time(content.memory), occurred_at=occurred)


@lru_cache(maxsize=65536)
def _mentions_time(text: str) -> bool:
    return bool(find_time_expressions(text))


@lru_cache(maxsize=65536)
def _when(text: str):
    return parse_datetime(text)


def follows(memo: StateMemo, conn: sqlite3.Connection, tenant: str, memory_ids: list[str], as_of: int | None) -> dict[str, list[Neighbour]]:
    """FOLLOWS neighbours of many memories: the next turn (FOLLOWS) and the previous (PRECEDES).

    At the head each memory's neighbours are held in ``memo`` (the graph
    projection's): only the memories not held yet are read.
    """
    held = memo.held(conn) if as_of is None else None
    if held is None:
        return _read_follows(conn, tenant, memory_ids, as_of)
    kind = ("follows", tenant)
    held.fill(kind, memory_ids, lambda unread: _read_follows(conn, tenant, unread, None), missing=[], weigh=lambda found: len(found) + 1)
    return {m: found for m in memory_ids if (found := held[kind, m])}


def _read_follows(conn: sqlite3.Connection, tenant: str, memory_ids: list[str], as_of: int | None) -> dict[str, list[Neighbour]]:
    """:func:`follows` from SQL: one indexed lookup a side (``source IN``, then ``target IN``).

    An ``OR`` of the two sides lets SQLite fall back to scanning the
    tenant's edges, which grows with every relation and mention in the graph.
    """
    out: dict[str, list[Neighbour]] = {}
    if not memory_ids:
        return out
    valid, params = head_clause(as_of)
    for start in range(0, len(memory_ids), 400):
        chunk = memory_ids[start : start + 400]
        marks = ",".join("?" * len(chunk))
        found = []
        for order, (side, other, label) in enumerate((("source", "target", "FOLLOWS"), ("target", "source", "PRECEDES"))):
            rows = conn.execute(
                f"SELECT row_id, {side}, {other}, weight FROM graph_edges WHERE tenant = ? AND {side} IN ({marks}) AND edge_type = 'FOLLOWS' AND {valid}",
                (tenant, *chunk, *params),
            )
            found += [(row_id, order, memory_id, (neighbour, weight, label)) for row_id, memory_id, neighbour, weight in rows]
        for _, _, memory_id, neighbour in sorted(found):  # in the edges' order, as one scan would give them
            out.setdefault(memory_id, []).append(neighbour)
    return out


def best_allowed(
    memo: StateMemo, conn: sqlite3.Connection, tenant: str, scores: dict[str, float], options: "RecallOptions", limit: int, also: Sequence[str] = (),
) -> set[str]:
    """The best ``limit`` of ``scores`` that pass the request's filters (and which of ``also`` pass), checked best first.

    A channel keeps its ``limit`` best allowed memories: those below them
    are never read, so a walk that reached hundreds costs one small check.
    """
    order = [m for m, _ in fusion.rank(scores)]
    allowed = filter_memories(memo, conn, tenant, list(also), options) if also else set()
    found = 0
    for start in range(0, len(order), max(1, limit)):
        passed = filter_memories(memo, conn, tenant, order[start : start + limit], options)
        allowed |= passed
        found += len(passed)
        if found >= limit:
            break
    return allowed


def filter_memories(memo: StateMemo, conn: sqlite3.Connection, tenant: str, memory_ids: list[str], options: "RecallOptions") -> set[str]:
    """Which of ``memory_ids`` pass the request's filters (in SQL, on the FTS docs table).

    At the head each answer is held in ``memo`` (the FTS projection's), keyed
    by the filters themselves (:class:`~mnemolog.projections.filters.SearchFilters`
    holds its sequences as tuples, so they always hash).
    """
    if not memory_ids:
        return set()
    held = memo.held(conn) if options.as_of is None else None
    if held is None:
        return _read_allowed(conn, tenant, memory_ids, options)
    kind = ("allowed", tenant, options.filters)
    held.fill(kind, memory_ids, lambda unread: dict.fromkeys(_read_allowed(conn, tenant, unread, options), True), missing=False)
    return {m for m in memory_ids if held[kind, m]}


def _read_allowed(conn: sqlite3.Connection, tenant: str, memory_ids: list[str], options: "RecallOptions") -> set[str]:
    valid, valid_params = head_clause(options.as_of, "d")
    where, where_params = filter_sql(options.filters, "d")
    allowed: set[str] = set()
    for start in range(0, len(memory_ids), 500):
        chunk = memory_ids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            f"SELECT d.memory_id FROM fts_docs AS d WHERE d.tenant = ? AND d.memory_id IN ({marks}) AND {valid} AND {where}",
            (tenant, *chunk, *valid_params, *where_params),
        )
        allowed.update(r[0] for r in rows)
    return allowed
