"""The entities a memory mentions, as ``MENTIONS`` edge events of the command that changes the memory.

The entity linker lives on the read side (it needs the entity catalogue), so
the commands get it injected as a :data:`Linker` and record what it found as
facts: ``EdgeLinked`` / ``EdgeUnlinked`` events on the tenant's edge stream,
in the same atomic batch (and so the same correlation) as the memory change.
Reverting that correlation removes or restores them with it, ``as_of`` reads
them at their time, and replay never runs the linker again.

What each memory change does to its mentions:

- add, merge (the merged memory): the new text's mentions are linked under
  ``mention:<run>:<n>`` (memory -> entity, weight = the linker's confidence,
  properties ``alias``, ``occurrences``, ``confidence`` and ``evidence``: the
  linker's reason; the edge carries the memory's ``subject``, whose key seals
  those properties, so that forgetting the subject erases the alias too);
- update, rollback to an activated version, restore: the memory's live
  mentions are compared with those of its (new) text, by entity: an equal
  edge is kept, the others are unlinked and linked again;
- archive, soft delete, merged into another, superseded, evicted from
  working memory (archived), rollback to an inactive version: the live
  mentions are unlinked. The memory has left recall, so the graph stops
  walking through it; ``as_of`` a position before still shows the edges.

Topic memories (the organizer's summaries) are not linked.
"""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

import msgspec

from .. import catalogue as c
from .. import catalogue_graph as g
from ..ids import new_id
from ..model import MemoryType
from .edges import check_edge
from .facts import GraphFacts

#: ``linker(tenant, doc_node or None, run_id, [(memory_id, text)])`` -> the mention edges, numbered ``mention:<run_id>:<n>``.
Linker = Callable[[str, str | None, str, Sequence[tuple[str, str]]], list[c.EdgeRecord]]

UNLINKED = MemoryType.TOPIC.value


def with_subjects(edges: list[c.EdgeRecord], subjects: dict[str, str]) -> list[c.EdgeRecord]:
    """``edges`` with the subject of the memory each starts at (whose key seals its alias; none: the tenant's).

    ``subjects`` maps a memory id to its subject, for the memories that name
    one. The commands and a relink both put subjects on mention edges this way.
    """
    if not subjects:
        return edges
    return [msgspec.structs.replace(e, subject=subjects[e.source]) if e.source in subjects else e for e in edges]


class MemoryMentions:
    """Mention edge events for memory commands; with no linker, every method returns no events."""

    def __init__(self, facts: GraphFacts, linker: Linker | None = None):
        self.facts = facts
        self.linker = linker

    def link(self, tenant: str, items: Sequence[tuple[str, str, str | None]]) -> list[c.EdgeLinked]:
        """``EdgeLinked`` for the mentions of new memories ``[(memory_id, text, subject)]``: one linker pass over the batch."""
        if self.linker is None or not items:
            return []
        return [c.EdgeLinked(edge=e) for e in self._found(tenant, items)]

    def unlink(self, tenant: str, memory_ids: Iterable[str], reason: str) -> list[c.EdgeUnlinked]:
        """``EdgeUnlinked`` for every live mention edge starting at ``memory_ids``."""
        if self.linker is None:
            return []
        ids = list(dict.fromkeys(memory_ids))
        if not ids:
            return []
        return [c.EdgeUnlinked(edge=e, reason=reason) for e in self.live(tenant, ids)]

    def adjust(self, tenant: str, memory_id: str, text: str | None, memory_type: str, reason: str, subject: str | None = None) -> list:
        """The events that make ``memory_id``'s live mentions those of ``text`` (``None``: no mentions); ``subject``: the memory's."""
        if self.linker is None:
            return []
        wanted = {} if text is None or memory_type == UNLINKED else {e.target: e for e in self._found(tenant, [(memory_id, text, subject)])}
        events: list = []
        seen: set[str] = set()
        for edge in self.live(tenant, [memory_id]):
            target = edge.target
            if target in seen:  # one mention per entity: a second live edge goes
                events.append(c.EdgeUnlinked(edge=edge, reason=f"{reason}: duplicate mention"))
                continue
            seen.add(target)
            new = wanted.get(target)
            if new is not None and new.weight == edge.weight and new.properties == edge.properties and new.subject == edge.subject:
                del wanted[target]  # the same mention: kept as it is
            else:
                # The entity's id, not the alias matched: a reason is stored as it is, and the alias is personal (sealed with the edge).
                why = f"{reason}: no longer mentions {target!r}" if new is None else f"{reason}: mention changed"
                events.append(c.EdgeUnlinked(edge=edge, reason=why))
        events.extend(c.EdgeLinked(edge=e) for e in wanted.values())
        return events

    def owns(self, edge: c.EdgeRecord) -> bool:
        """True for a mention edge these commands keep in line with its memory's text (only with a linker)."""
        return self.linker is not None and edge.edge_type == g.MENTIONS and edge.edge_id.startswith(g.MENTION_EDGE_PREFIX)

    def _found(self, tenant: str, items: Sequence[tuple[str, str, str | None]]) -> list[c.EdgeRecord]:
        """The linker's edges for ``[(memory_id, text, subject)]``, each carrying its memory's subject."""
        assert self.linker is not None
        subjects = {memory_id: subject for memory_id, _, subject in items if subject}
        edges = with_subjects(self.linker(tenant, None, new_id(), [(memory_id, text) for memory_id, text, _ in items]), subjects)
        for edge in edges:
            check_edge(edge)
        return edges

    def live(self, tenant: str, memory_ids: list[str]) -> list[c.EdgeRecord]:
        """The live mention edges starting at ``memory_ids`` (none without a linker)."""
        if self.linker is None:
            return []
        mine = set(memory_ids)
        return [e for e in self.facts.live_edges_of(tenant, memory_ids) if e.source in mine and self.owns(e)]
