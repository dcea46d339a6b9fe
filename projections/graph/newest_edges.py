"""The newest edges into a node, held in memory while the graph projection stays as it is.

Recall leads from every entity a question reaches back to the memories that
mention it (:func:`mnemolog.projections.graph.reads.edges_into` with
``per_target``, and the mention walk): dozens of indexed reads a question,
most of them for entities nothing mentions, repeated by every question that
reaches the same entities. Their answers change only when the graph
projection does, so each process keeps them for the projection's current
state, named by its checkpoint (generation and position, which its changes
move in the same transaction): one primary-key read a call tells whether
they still hold; any change drops them all, and the next calls read again.
Reads ``as_of`` a position go to SQL every time.
"""

from __future__ import annotations

import sqlite3
from typing import Sequence

from . import reads

#: Edges held at most (all nodes together); past it, the memo starts afresh.
MAX_ROWS = 100_000

_Edge = tuple[str, str, str, float]


class NewestEdges:
    """``edges_into(..., per_target=n)`` answered from memory while the graph projection's checkpoint stays the same.

    A node's newest ``n`` edges serve any later call asking for ``n`` or fewer
    (or for more, when the node has fewer than ``n``). Safe across threads:
    each checkpoint gets its own memo, and a thread still reading for an
    older one fills only that.
    """

    def __init__(self, max_rows: int = MAX_ROWS):
        self.max_rows = max_rows
        self._memo: tuple[tuple | None, dict[tuple[str, str, str], tuple[int, list[_Edge]]], list[int]] = (None, {}, [0])

    def edges_into(
        self, conn: sqlite3.Connection, tenant: str, targets: Sequence[str], edge_type: str, *, as_of: int | None = None, per_target: int
    ) -> list[_Edge]:
        """What :func:`reads.edges_into` returns with ``per_target`` (target by target, each target's newest first)."""
        stamp = _checkpoint(conn) if as_of is None and targets else None
        if stamp is None:
            return reads.edges_into(conn, tenant, targets, edge_type, as_of=as_of, per_target=per_target)
        memo = self._memo
        if memo[0] != stamp or memo[2][0] > self.max_rows:
            memo = self._memo = (stamp, {}, [0])
        _, held, size = memo
        missing = []
        for target in dict.fromkeys(targets):
            found = held.get((tenant, edge_type, target))
            if found is None or (per_target > found[0] and len(found[1]) == found[0]):
                missing.append(target)
        if missing:
            read: dict[str, list[_Edge]] = {t: [] for t in missing}
            for edge in reads.edges_into(conn, tenant, missing, edge_type, per_target=per_target):
                read[edge[2]].append(edge)
            for target, edges in read.items():
                held[(tenant, edge_type, target)] = (per_target, edges)
                size[0] += len(edges) + 1
        out: list[_Edge] = []
        for target in targets:
            out.extend(held[(tenant, edge_type, target)][1][:per_target])
        return out


def _checkpoint(conn: sqlite3.Connection) -> tuple | None:
    """The graph projection's (generation, position), or None where it has no checkpoint (then nothing is held)."""
    try:
        return conn.execute("SELECT generation, position FROM checkpoints WHERE name = 'graph'").fetchone()
    except sqlite3.OperationalError:  # no checkpoints table: a bare projection database
        return None
