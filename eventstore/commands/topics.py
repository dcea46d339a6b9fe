"""Topic commands: the organizer's own write path for ``TopicMemory`` nodes and their edges.

``MemoryCommands.add`` refuses ``TopicMemory``: topics are derived structure,
written only here. :meth:`TopicCommands.organize` appends, in ONE atomic
batch, the archival of replaced topics (with the unlinking of every live edge
that touches them), new topic nodes (``MemoryAdded`` with ``origin="topic"``),
edges to unlink and edges to link. A clustering run writes each cluster as one
such batch, so a run stopped between clusters leaves nothing half-written.
Everything is an ordinary memory or edge event, so ``revert`` of the run's
correlation undoes it.
"""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

from .. import catalogue as c
from ..aggregate import load
from ..model import Conflict, MemoryContent, MemoryType, Status, ValidationError, validate_content
from ..store import NO_STREAM, EventStore, StreamAppend
from .context import CommandContext, CommandResult, commit, now_iso, replayed
from .edges import check_edge
from .facts import GraphFacts

TOPIC = MemoryType.TOPIC.value


class TopicCommands:
    """``existing(tenant, node_ids) -> the ids that exist`` may be given to check many endpoints at once."""

    def __init__(self, store: EventStore, facts: GraphFacts, existing: Callable[[str, Iterable[str]], set[str]] | None = None):
        self.store = store
        self.facts = facts
        self.existing = existing

    def organize(
        self,
        ctx: CommandContext,
        *,
        add: Sequence[tuple[str, MemoryContent]] = (),
        link: Sequence[c.EdgeRecord] = (),
        retire: Sequence[str] = (),
        unlink: Sequence[str] = (),
        update: Sequence[tuple[str, MemoryContent]] = (),
        reason: str = "replaced by a new clustering",
    ) -> CommandResult:
        """Archive ``retire`` topics, add ``add`` topics, revise ``update`` topics, unlink ``unlink`` edge ids, link
        ``link``: all or nothing.

        ``add`` holds ``(memory_id, content)`` pairs whose content must be a
        ``TopicMemory``; ``update`` the same for activated topics of this
        tenant (their new text and properties, one ``MemoryUpdated`` each:
        a cluster that kept most of its members is revised in place, its
        member edges changed one by one, where replacing it rewrote every
        one); ``retire`` names activated topics of this tenant. Edge
        endpoints must exist or be added in the same batch.
        """
        if not (add or link or retire or unlink or update):
            raise ValidationError("topics", "nothing to write")
        request = [[[m, content] for m, content in add], list(link), list(retire), list(unlink), reason]
        if update:  # kept out of the request of the writes without it: their idempotency records read as before
            request.append([[m, content] for m, content in update])
        if (done := replayed(self.store, ctx, "organize-topics", request, [m for m, _ in add])) is not None:
            return done
        stamp = now_iso()
        writes: list[StreamAppend] = []
        new_ids: set[str] = set()
        for memory_id, content in add:
            if not isinstance(memory_id, str) or not memory_id:
                raise ValidationError("memory_id", "must be a non-empty string")
            content = validate_content(content)
            if content.memory_type != TOPIC:
                raise ValidationError("memory_type", f"the topic path writes {TOPIC} only")
            new_ids.add(memory_id)
            writes.append(
                StreamAppend(
                    c.memory_stream(memory_id),
                    [c.MemoryAdded(memory_id=memory_id, content=content, created_at=stamp, origin="topic")],
                    NO_STREAM,
                )
            )
        retired = list(dict.fromkeys(retire))
        for memory_id, content in update:
            content = validate_content(content)
            state = self._topic(ctx, memory_id, "update")
            if memory_id in retired or memory_id in new_ids:
                raise ValidationError("update", f"topic {memory_id} is revised and added or retired in one batch")
            if content.memory_type != TOPIC:
                raise ValidationError("memory_type", f"the topic path writes {TOPIC} only")
            changed = tuple(f for f in content.__struct_fields__ if getattr(content, f) != getattr(state.content, f))
            writes.append(
                StreamAppend(
                    c.memory_stream(memory_id),
                    [c.MemoryUpdated(memory_id=memory_id, content=content, changed=changed, updated_at=stamp, reason="revised by a new clustering")],
                    state.version,
                )
            )
        for memory_id in retired:
            state = self._topic(ctx, memory_id, "retire")
            writes.append(
                StreamAppend(
                    c.memory_stream(memory_id),
                    [c.MemoryArchived(memory_id=memory_id, updated_at=stamp, reason=reason)],
                    state.version,
                )
            )
        edge_events: list = []
        gone: set[str] = set()
        for edge in self.facts.live_edges_of(ctx.tenant, retired) if retired else []:
            gone.add(edge.edge_id)
            edge_events.append(c.EdgeUnlinked(edge=edge, reason=reason))
        for edge_id in dict.fromkeys(unlink):
            if edge_id in gone:
                continue
            edge = self.facts.live_edge(ctx.tenant, edge_id)
            if edge is None:
                raise Conflict(f"edge {edge_id!r} is not live; nothing to unlink")
            gone.add(edge_id)
            edge_events.append(c.EdgeUnlinked(edge=edge, reason=reason))
        seen: set[str] = set()
        for edge in link:
            check_edge(edge)
            if edge.edge_id in seen:
                raise ValidationError("edge_id", f"{edge.edge_id!r} appears twice")
            seen.add(edge.edge_id)
            for node in (edge.source, edge.target):
                if node in retired:
                    raise ValidationError("edges", f"edge {edge.edge_id!r} touches the retired topic {node}")
        nodes = {n for e in link for n in (e.source, e.target)} - new_ids
        found = self.existing(ctx.tenant, nodes) if self.existing is not None and nodes else set()
        for node in sorted(nodes - found):
            if not self.facts.node_exists(ctx.tenant, node):
                raise ValidationError("edges", f"node {node!r} does not exist")
        live: set[str] = set()
        for prefix in {e.edge_id.rsplit(":", 1)[0] + ":" for e in link}:
            live |= {e.edge_id for e in self.facts.live_edges_with_prefix(ctx.tenant, prefix)}
        for edge in link:
            if edge.edge_id in live and edge.edge_id not in gone:
                raise Conflict(f"edge {edge.edge_id!r} already exists; unlink it first")
            edge_events.append(c.EdgeLinked(edge=edge))
        if edge_events:
            writes.append(StreamAppend(c.edges_stream(ctx.tenant), edge_events))
        return commit(
            self.store,
            ctx,
            "organize-topics",
            writes,
            request=request,
            memory_ids=[m for m, _ in add],
            data={"added": len(add), "revised": len(update), "retired": len(retired), "linked": len(link), "unlinked": len(gone)},
        )

    def _topic(self, ctx: CommandContext, memory_id: str, field: str):
        """The state of the activated topic ``memory_id`` that ``field`` names (to retire or revise it)."""
        state = load(self.store, ctx.tenant, memory_id)
        if state.content is None or state.content.memory_type != TOPIC:
            raise ValidationError(field, f"memory {memory_id} is not a topic")
        if state.status != Status.ACTIVATED.value:
            word = "retired" if field == "retire" else "revised"
            raise Conflict(f"topic {memory_id} is {state.status}; only an activated topic can be {word}", current_version=state.version)
        return state
