"""Revert a correlation: compensating events that undo what one request, import or pass did.

For every memory the correlation touched, the compensation brings it back to
the version it had before (or deletes it, if the correlation created it);
edges it linked are unlinked, edges it removed are linked again. Reverting
twice is a no-op. When later changes from other correlations touched the
same memories or edges, the revert is refused with the list of conflicts,
unless forced.
"""

from __future__ import annotations

from .. import catalogue as c
from ..aggregate import dropped_at, load
from ..model import Conflict, NotFound, Status, ValidationError
from ..store import EventStore, RecordedEvent, StreamAppend
from .context import CommandContext, CommandResult, commit, now_iso, replayed
from .facts import GraphFacts

# Events that a revert leaves alone: working-memory churn, reverts, drops, and how far the organizer got.
UNREVERTED = {"WorkingMemoryEvicted", "CorrelationReverted", "TenantDropped", "OrganizerPassRecorded"}


class RevertCommands:
    def __init__(self, store: EventStore, facts: GraphFacts):
        self.store = store
        self.facts = facts

    def revert(self, ctx: CommandContext, correlation_id: str, *, force: bool = False) -> CommandResult:
        if not correlation_id:
            raise ValidationError("correlation_id", "must not be empty")
        if correlation_id == ctx.correlation_id:
            raise ValidationError("correlation_id", "a revert cannot revert itself")
        if (done := replayed(self.store, ctx, "revert", [correlation_id, force])) is not None:
            return done
        if self._already_reverted(ctx.tenant, correlation_id):
            return CommandResult(correlation_id=ctx.correlation_id, data={"already_reverted": True, "reverted": 0})
        dropped = dropped_at(self.store, ctx.tenant)  # a dropped tenant's past cannot be reverted
        found = [r for r in self.store.read_all(tenant=ctx.tenant, correlation_id=correlation_id) if r.position > dropped]
        recorded = [r for r in found if r.type not in UNREVERTED]
        if not recorded:
            if found:
                raise ValidationError(
                    "correlation_id",
                    f"{correlation_id} holds nothing to revert (only {', '.join(sorted({r.type for r in found}))})",
                )
            raise NotFound("correlation", correlation_id)
        stamp = now_iso()
        conflicts: list[str] = []
        writes: list[StreamAppend] = []
        writes += self._memory_compensations(ctx, recorded, stamp, conflicts)
        edge_events = self._edge_compensations(ctx, recorded, conflicts)
        if conflicts and not force:
            raise Conflict(
                f"cannot revert {correlation_id}: later changes touch what it did ({'; '.join(conflicts[:10])}"
                f"{'; …' if len(conflicts) > 10 else ''}); pass force to revert anyway"
            )
        if edge_events:
            writes.append(StreamAppend(c.edges_stream(ctx.tenant), edge_events))
        marker = c.CorrelationReverted(
            correlation_id=correlation_id,
            reverted_positions=tuple(r.position for r in recorded),
            forced=bool(force and conflicts),
            conflicts=tuple(conflicts),
        )
        writes.insert(0, StreamAppend(c.tenant_stream(ctx.tenant), [marker]))
        touched = [w.stream_id[len("memory-") :] for w in writes if w.stream_id.startswith("memory-")]
        result = commit(self.store, ctx, "revert", writes, request=[correlation_id, force], memory_ids=touched)
        result.data.update(reverted=len(recorded), conflicts=conflicts, forced=marker.forced)
        return result

    def _already_reverted(self, tenant: str, correlation_id: str) -> bool:
        for recorded in self.store.read_stream(c.tenant_stream(tenant)):
            if isinstance(recorded.event, c.CorrelationReverted) and recorded.event.correlation_id == correlation_id:
                return True
        return False

    def _memory_compensations(self, ctx: CommandContext, recorded: list[RecordedEvent], stamp: str, conflicts: list[str]) -> list[StreamAppend]:
        touched: dict[str, tuple[int, int]] = {}  # memory id -> (first, last) version the correlation wrote
        for r in recorded:
            if r.stream_id.startswith("memory-"):
                memory_id = r.stream_id[len("memory-") :]
                first, _ = touched.get(memory_id, (r.stream_version, r.stream_version))
                touched[memory_id] = (first, r.stream_version)
        writes = []
        for memory_id, (first, last) in touched.items():
            state = load(self.store, ctx.tenant, memory_id)
            if state.version != last:
                conflicts.append(f"memory {memory_id} changed after (version {state.version}, the correlation wrote up to {last})")
            reason = f"revert of {recorded[0].metadata.correlation_id}"
            if first == 1:
                if state.status == Status.DELETED.value:
                    continue
                event = c.MemorySoftDeleted(memory_id=memory_id, updated_at=stamp, reason=reason)
            else:
                before = state.at(first - 1)
                if before.content == state.content and before.status == state.status:
                    continue
                event = c.MemoryRolledBack(
                    memory_id=memory_id,
                    to_version=first - 1,
                    content=before.content,
                    status=before.status,
                    updated_at=stamp,
                    reason=reason,
                )
            writes.append(StreamAppend(c.memory_stream(memory_id), [event], state.version))
        return writes

    def _edge_compensations(self, ctx: CommandContext, recorded: list[RecordedEvent], conflicts: list[str]) -> list:
        # Net effect of the correlation on each edge id, then its inverse.
        linked: dict[str, c.EdgeRecord] = {}
        removed: dict[str, c.EdgeRecord] = {}
        for r in recorded:
            event = r.event
            if isinstance(event, c.EdgeLinked):
                _added(linked, removed, event.edge)
            elif isinstance(event, c.EdgeUnlinked):
                _removed(linked, removed, event.edge)
            elif isinstance(event, (c.NamespaceUndone,)):
                for edge in event.edges:
                    _removed(linked, removed, edge)
            elif isinstance(event, c.NamespaceRestored):
                for edge in event.edges:
                    _added(linked, removed, edge)
            elif isinstance(event, c.EdgesRepointed):
                for edge in event.previous:
                    _removed(linked, removed, edge)
                for edge in event.current:
                    _added(linked, removed, edge)
        events: list = []
        for edge_id, edge in linked.items():
            live = self.facts.live_edge(ctx.tenant, edge_id)
            if live is None:
                conflicts.append(f"edge {edge_id} was already removed later")
                continue
            if live != edge:
                conflicts.append(f"edge {edge_id} changed after")
            if edge_id in removed:
                continue  # replaced in place below
            events.append(c.EdgeUnlinked(edge=live, reason="revert"))
        relink = []
        for edge_id, edge in removed.items():
            live = self.facts.live_edge(ctx.tenant, edge_id)
            if live is not None and edge_id not in linked:
                conflicts.append(f"edge {edge_id} was linked again later")
                continue
            if live is not None:
                events.append(c.EdgeUnlinked(edge=live, reason="revert"))
            relink.append(edge)
        if relink:
            events.append(c.NamespaceRestored(prefix="", edges=tuple(relink), undo_position=recorded[-1].position))
        return events


def _added(linked: dict, removed: dict, edge: c.EdgeRecord) -> None:
    linked[edge.edge_id] = edge


def _removed(linked: dict, removed: dict, edge: c.EdgeRecord) -> None:
    if edge.edge_id in linked and edge.edge_id not in removed:
        del linked[edge.edge_id]  # linked then removed by the same correlation: no net change
        return
    linked.pop(edge.edge_id, None)
    removed.setdefault(edge.edge_id, edge)
