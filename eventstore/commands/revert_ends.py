"""The nodes a revert leaves, for the edges it links back.

A revert links back the edges its correlation removed. An end of such an
edge may be gone since, by a later change the revert does not undo: a memory
deleted (no read shows an edge onto it, and a link onto it is refused), an
entity or a document removed, or, for a mention, its memory archived (an
archived memory mentions nothing). Linked back, the edge dangled. A namespace
undo of a relink run skips the same edges (``LinkAwareEdgeCommands``); a
revert leaves them out and says so among its conflicts.
"""

from __future__ import annotations

from typing import Callable, Iterable

from .. import catalogue as c
from .. import catalogue_graph as g
from ..model import Status
from ..store import StreamAppend
from .facts import GraphFacts

__all__ = ["NodesAfter"]

#: The status each memory event leaves its memory in (a rollback: its own).
_STATUS_OF = {
    c.MemoryAdded: Status.ACTIVATED.value,
    c.MemoriesMerged: Status.ACTIVATED.value,
    c.MemoryRestored: Status.ACTIVATED.value,
    c.MemorySoftDeleted: Status.DELETED.value,
    c.MemoryArchived: Status.ARCHIVED.value,
    c.MemoryMergedInto: Status.ARCHIVED.value,
    c.MemorySuperseded: Status.ARCHIVED.value,
}


class NodesAfter:
    """The memories' statuses and the other nodes' existence once the revert's ``writes`` are in: what the writes
    say of the nodes they touch, else the graph's facts at the head."""

    def __init__(self, facts: GraphFacts, tenant: str, writes: Iterable[StreamAppend]):
        self.facts, self.tenant = facts, tenant
        self.statuses: dict[str, str] = {}
        self.present: dict[str, bool] = {}  # entities and documents the writes keep or remove
        for write in writes:
            for event in write.events:
                if isinstance(event, c.MemoryRolledBack):
                    self.statuses[event.memory_id] = event.status
                elif type(event) in _STATUS_OF:
                    self.statuses[event.memory_id] = _STATUS_OF[type(event)]
                elif isinstance(event, (g.EntityUpserted, g.EntityRolledBack, g.EntityRemoved)):
                    self.present[event.entity_id] = not isinstance(event, g.EntityRemoved)
                elif isinstance(event, (g.DocumentImported, g.DocumentRolledBack, g.DocumentRemoved)):
                    self.present[g.document_node(event.doc_id)] = not isinstance(event, g.DocumentRemoved)

    def status(self, node: str) -> str | None:
        """The memory's status after the revert (``None``: no memory)."""
        return self.statuses[node] if node in self.statuses else self.facts.memory_status(self.tenant, node)

    def gone(self, edge: c.EdgeRecord, mention: bool) -> str | None:
        """Why ``edge`` (a ``mention`` of its source memory, or not) cannot be linked back after the revert, or None."""
        source = self.status(edge.source)
        for node, status in ((edge.source, source), (edge.target, self.status(edge.target))):
            if status == Status.DELETED.value:
                return f"memory {node} is deleted"
            if status is None and not (self.present[node] if node in self.present else self.facts.node_exists(self.tenant, node)):
                return f"{node} no longer exists"
        if mention and source not in (None, Status.ACTIVATED.value):
            return f"memory {edge.source} is {source}: it mentions nothing"
        return None

    def keep(self, edges: list[c.EdgeRecord], mention: Callable[[c.EdgeRecord], bool], conflicts: list[str]) -> list[c.EdgeRecord]:
        """``edges`` without those that cannot be linked back, each of which is named in ``conflicts`` when a later
        change took its end away; not when the revert itself does (a memory it takes back to archived or deleted:
        churn, as working memory's, is no conflict). A relation's ``rel:`` edge follows its relation, which the
        entity compensations handle."""
        kept = []
        for edge in edges:
            why = None if edge.edge_id.startswith(g.RELATION_EDGE_PREFIX) else self.gone(edge, mention(edge))
            if why is None:
                kept.append(edge)
            elif not any(self.statuses.get(node, Status.ACTIVATED.value) != Status.ACTIVATED.value for node in (edge.source, edge.target)):
                conflicts.append(f"edge {edge.edge_id} is not linked back: {why}")  # a later change's doing, not the revert's own
        return kept
