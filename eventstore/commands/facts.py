"""The narrow read-side interface that some commands need.

Edges and working memory span many streams, so a command asks the read side
for them through this protocol; the write side never imports projections.
The implementation must answer from projections caught up with the log.
"""

from __future__ import annotations

from typing import Protocol, Sequence

from ..catalogue import EdgeRecord, WorkingEntry


class GraphFacts(Protocol):
    def live_edges_of(self, tenant: str, node_ids: Sequence[str]) -> list[EdgeRecord]:
        """Live edges that start or end at any of ``node_ids``."""

    def live_edges_with_prefix(self, tenant: str, prefix: str) -> list[EdgeRecord]:
        """Live edges whose id starts with ``prefix``."""

    def live_edge(self, tenant: str, edge_id: str) -> EdgeRecord | None: ...

    def node_exists(self, tenant: str, node_id: str) -> bool:
        """A memory, entity, document or topic of this tenant with this id."""

    def memory_status(self, tenant: str, node_id: str) -> str | None:
        """The status of the memory ``node_id`` at the head (``None``: no memory of this tenant, maybe another node)."""

    def merged_into(self, tenant: str, node_id: str) -> tuple[str, int] | None:
        """The memory a merge made of ``node_id`` (the target of its live ``MERGED_TO`` edge) and the log position
        of that merge (not of a later merge of the merged memory, which re-points the edge); ``None`` when no merge
        took it in."""

    def working_memory(self, tenant: str) -> list[tuple[str, str, str]]:
        """The working-memory FIFO, oldest first: ``(binding, memory_id, memory_type)``."""

    def working_entries(self, tenant: str) -> list[WorkingEntry]:
        """The working-memory FIFO, oldest first, with each entry's place (``entered_at``)."""

    def quoting_memories(self, tenant: str, memory_ids: Sequence[str]) -> list[str]:
        """Ids of the memories whose text was made from any of ``memory_ids``, at any time (topics over them, merges of them)."""

    def working_stay(self, tenant: str, memory_id: str) -> tuple[WorkingEntry, int | None] | None:
        """The memory's latest stay in working memory: its entry and the position that ended it (``None``: it holds)."""

    def relation_edge(self, tenant: str, source: str, relation_type: str, target: str) -> EdgeRecord | None:
        """The live ``rel:`` edge mirroring the relation ``(source, relation_type, target)``, whatever its id."""

    def moved_away(self, tenant: str, subject: str, memory_ids: Sequence[str]) -> dict[str, int]:
        """Of ``memory_ids``, those whose latest version names another subject than ``subject`` (``""``: none), by
        the position of their first version after their last one of ``subject``."""

    def subject_memories(self, tenant: str, subject: str) -> list[str]:
        """Ids of the memories any version of which names ``subject`` (``""``: names none: the tenant's own key),
        holding every event the log held when called (what another process appended just before included)."""
