"""The newest edges into a node, held in memory while the graph projection stays as it is.

Recall leads from every entity a question reaches back to the memories that
mention it (:func:`mnemolog.projections.graph.reads.edges_into` with
``per_target``, and the mention walk): dozens of indexed reads a question,
most of them for entities nothing mentions, repeated by every question that
reaches the same entities. Their answers change only when the graph
projection does, so they are held per state of its checkpoint
(:class:`mnemolog.projections.state_memo.StateMemo`). Reads ``as_of`` a
position go to SQL every time.
"""

from __future__ import annotations

import sqlite3
from typing import Sequence

from . import reads
from ..state_memo import StateMemo

_Edge = tuple[str, str, str, float]


class NewestEdges:
    """``edges_into(..., per_target=n)`` answered from ``memo`` (the graph projection's) when it can.

    A node's newest ``n`` edges serve any later call asking for ``n`` or fewer
    (or for more, when the node has fewer than ``n``).
    """

    def __init__(self, memo: StateMemo):
        self.memo = memo

    def edges_into(
        self, conn: sqlite3.Connection, tenant: str, targets: Sequence[str], edge_type: str, *, as_of: int | None = None, per_target: int
    ) -> list[_Edge]:
        """What :func:`reads.edges_into` returns with ``per_target`` (target by target, each target's newest first)."""
        held = self.memo.held(conn) if as_of is None and targets else None
        if held is None:
            return reads.edges_into(conn, tenant, targets, edge_type, as_of=as_of, per_target=per_target)
        missing = []
        for target in dict.fromkeys(targets):
            found = held.get(("into", tenant, edge_type, target))
            if found is None or (per_target > found[0] and len(found[1]) == found[0]):
                missing.append(target)
        if missing:
            read: dict[str, list[_Edge]] = {t: [] for t in missing}
            for edge in reads.edges_into(conn, tenant, missing, edge_type, per_target=per_target):
                read[edge[2]].append(edge)
            for target, edges in read.items():
                held.put(("into", tenant, edge_type, target), (per_target, edges), len(edges) + 1)
        out: list[_Edge] = []
        for target in targets:
            out.extend(held[("into", tenant, edge_type, target)][1][:per_target])
        return out
