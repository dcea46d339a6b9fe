"""Revert a correlation: compensating events that undo what one request, import or pass did.

Everything the correlation touched is brought back to its state from before
it, by new events in one atomic batch after a ``CorrelationReverted`` marker:

- a memory to the version it had before (``MemoryRolledBack``), or deleted
  if the correlation created it;
- a document to the version it had before (``DocumentRolledBack``), or
  removed (``DocumentRemoved``) if the correlation imported it first;
- an entity to its state before (``EntityRolledBack`` or ``EntityTagsSet``,
  then ``RelationSet`` / ``RelationRemoved`` for its relations), or removed;
- edges it linked are unlinked, edges it removed are linked again (an end
  that a merge archived since replaced by the merged memory, as the merge
  would have moved the edge; a source's mentions, which the merge ended,
  left out);
- working memory: the entries it put in are withdrawn, the entries it
  evicted are restored at their old places (``WorkingMemoryWithdrawn``,
  ``WorkingMemoryRestored``), as many as the capacity holds, and the oldest
  entries then beyond the capacity evicted (``WorkingMemoryEvicted``). The
  FIFO's own evictions since are churn, no conflict.

Reverting twice is a no-op, and so is reverting a revert that had nothing to
compensate (it holds only its marker); but a correlation that wrote more under
its id after its revert (a session that went on) has those later events
reverted by the next revert of it. A correlation whose revert was
reverted is in effect again: reverting it again reverts that last revert. When later changes from other
correlations touched the same memories, documents, entities or edges, or
hang on a node the revert removes, the revert is refused with the list of
conflicts, unless forced; a later change undone since (its correlation
reverted, see :func:`undone_correlations`) is none when the thing is back as
the correlation left it, so that reverts taken newest first need no force.
A tenant drop cannot be reverted, nor can a forget.
"""

from __future__ import annotations

from typing import Any, Callable

import msgspec

from .. import catalogue as c
from .. import catalogue_graph as g
from ..aggregate import load
from ..model import Conflict, MemoryType, NotFound, Status, ValidationError, embeddable
from ..store import EventStore, RecordedEvent, StreamAppend
from .context import CommandContext, CommandResult, commit, nothing_done, now_iso, replayed
from .documents import load_document
from .edges import following_merges
from .entities import EntityState, load_entity
from .facts import GraphFacts
from .mentions import MemoryMentions
from .revert_chains import revert_chain, undone_correlations
from .revert_ends import NodesAfter
from .working import EVICTED, WorkingMemory

# Events that a revert leaves alone: the markers of reverts, drops, and how far the organizer got.
FORCE_HINT = "pass force to revert anyway"  # the request's field; the CLI names its option instead
UNREVERTED = {"CorrelationReverted", "TenantDropped", "OrganizerPassRecorded", "SubjectForgotten"}  # a destroyed key never comes back
_DOCUMENT_FIELDS = g.DocumentImported.__struct_fields__


class NetChange:
    """The net effect of a correlation on keyed things (edge ids, working-memory bindings).

    ``added`` holds what it put in, ``removed`` what it took out (as it was);
    a key in both was replaced. Added then removed again is no change.
    """

    def __init__(self) -> None:
        self.added: dict[str, Any] = {}
        self.removed: dict[str, Any] = {}

    def add(self, key: str, item: Any) -> None:
        self.added[key] = item

    def remove(self, key: str, item: Any) -> None:
        if key in self.added and key not in self.removed:
            del self.added[key]
            return
        self.added.pop(key, None)
        self.removed.setdefault(key, item)


class RevertCommands:
    """``working_capacity`` bounds the working memory a revert restores (None: unbounded)."""

    def __init__(
        self,
        store: EventStore,
        facts: GraphFacts,
        *,
        working_capacity: int | None = None,
        mentions: MemoryMentions | None = None,
        embedding_dim: int | None = None,
    ):
        self.store = store
        self.facts = facts
        self.working_capacity = working_capacity
        #: The length of the read side's vectors: a version brought back with a caller embedding of another length is embedded afresh.
        self.embedding_dim = embedding_dim
        self.working = WorkingMemory(store, facts, working_capacity, mentions)
        #: A mention edge its memory's text made (a merge ends a source's: a revert does not move one to the merged memory).
        self._mention = mentions.owns if mentions is not None else (lambda edge: False)
        self.mentions = mentions

    def revert(self, ctx: CommandContext, correlation_id: str, *, force: bool = False, dry_run: bool = False) -> CommandResult:
        """Undo ``correlation_id``; with ``dry_run``, write nothing and say what a revert would do.

        A dry run reports ``would_revert`` (the events it would compensate),
        ``memory_ids`` (the memories it would touch, those working memory's
        evictions archive included), ``conflicts`` (the later changes that
        would make a real revert refuse unless forced) and ``forced`` (as the
        same request, run, would report it).
        """
        if not correlation_id:
            raise ValidationError("correlation_id", "must not be empty")
        if correlation_id == ctx.correlation_id:
            raise ValidationError("correlation_id", "a revert cannot revert itself")
        if not dry_run and (done := replayed(self.store, ctx, "revert", [correlation_id, force])) is not None:
            return done
        tenant_events = list(self.store.read_stream(c.tenant_stream(ctx.tenant)))
        # A dropped tenant's past cannot be reverted, and its reverts no longer count: a correlation id used again since starts afresh.
        drops = [r for r in tenant_events if isinstance(r.event, c.TenantDropped)]
        dropped = max((r.position for r in drops), default=0)
        tenant_events = [r for r in tenant_events if r.position > dropped]
        chain = revert_chain(tenant_events, correlation_id)
        asked, through, only = correlation_id, None, None
        if len(chain) % 2:  # its revert is in effect (a revert of that revert, if any, was reverted in turn)
            only = self._not_undone_since_revert(ctx.tenant, tenant_events, correlation_id)
            if not only:
                return CommandResult(correlation_id=ctx.correlation_id, data={"already_reverted": True, "reverted": 0})
        elif chain:  # it was reverted, and that revert undone: reverting the last revert in the chain reverts it again
            through = correlation_id = chain[-1]
        found = [
            r for r in self.store.read_all(tenant=ctx.tenant, correlation_id=correlation_id) if r.position > dropped and (only is None or r.position in only)
        ]
        if any(isinstance(r.event, c.SubjectForgotten) for r in found):
            # Its other events (the erased memories leaving working memory) are part of the forget: undone, they would put erased text back.
            raise ValidationError("correlation_id", f"{correlation_id} forgot a subject: a forget cannot be reverted")
        recorded = [r for r in found if r.type not in UNREVERTED]
        if not recorded:
            if not found:
                if any(r.metadata.correlation_id == correlation_id for r in drops):  # the drop itself: the one event before the tenant's new start
                    raise ValidationError("correlation_id", f"{correlation_id} dropped the tenant: a tenant drop cannot be reverted")
                raise NotFound("correlation", correlation_id)
            if all(isinstance(r.event, c.CorrelationReverted) for r in found):
                # A revert that had nothing to compensate changed nothing: undoing it changes nothing either.
                return nothing_done(ctx, reverted=0, conflicts=[], forced=False, nothing_to_revert=True)
            raise ValidationError(
                "correlation_id",
                f"{correlation_id} holds nothing to revert (only {', '.join(sorted({r.type for r in found}))})",
            )
        reason = f"revert of {correlation_id}"
        stamp = now_iso()
        conflicts: list[str] = []
        writes: list[StreamAppend] = []
        removed_memories: list[str] = []
        undone = undone_correlations(tenant_events)
        writes += self._memory_compensations(ctx, recorded, stamp, reason, conflicts, removed_memories, undone)
        documents, chunks, removed_documents, removed_chunks = self._document_compensations(ctx, recorded, reason, conflicts, undone)
        writes += chunks
        removed_memories += removed_chunks
        entities, removed_entities = self._entity_compensations(ctx, recorded, reason, conflicts, undone)
        settled = {w.stream_id[len("memory-") :] for w in writes if w.stream_id.startswith("memory-")}  # whose status the revert sets
        rolled_back = {g.document_node(e.doc_id) for w in documents for e in w.events if isinstance(e, g.DocumentRolledBack)}
        after = NodesAfter(self.facts, ctx.tenant, writes + documents + entities)
        edge_events = self._edge_compensations(ctx, recorded, conflicts, settled, rolled_back, after)
        edge_events = self._mentions_following(ctx, writes, edge_events, reason)
        writes += documents + entities
        compensated = {w.stream_id for w in entities}
        writes += self._dangling(ctx, removed_entities, removed_documents + removed_memories, edge_events, reason, conflicts, compensated)
        if conflicts and not force and not dry_run:
            raise Conflict(
                f"cannot revert {correlation_id}: later changes touch what it did ({'; '.join(conflicts[:10])}"
                f"{'; …' if len(conflicts) > 10 else ''}); {FORCE_HINT}",
                field="force",
            )
        if edge_events:
            writes.append(StreamAppend(c.edges_stream(ctx.tenant), edge_events))
        writes += self._working_compensations(ctx, recorded, reason, stamp, writes)
        if unlinked := self.working.evicted_mentions(ctx.tenant, writes, writes):  # the WorkingMemory items it evicts mention nothing
            writes.append(StreamAppend(c.edges_stream(ctx.tenant), unlinked))
        if dry_run:  # what the revert would write, working memory's evictions included, and whether it would force the conflicts
            touched = tuple(dict.fromkeys(w.stream_id[len("memory-") :] for w in writes if w.stream_id.startswith("memory-")))
            return CommandResult(
                correlation_id=ctx.correlation_id,
                memory_ids=touched,
                data={"dry_run": True, "would_revert": len(recorded), "conflicts": conflicts, "forced": bool(force and conflicts), **_through(through)},
            )
        marker = c.CorrelationReverted(
            correlation_id=correlation_id,
            reverted_positions=tuple(r.position for r in recorded),
            forced=bool(force and conflicts),
            conflicts=tuple(conflicts),
        )
        writes.insert(0, StreamAppend(c.tenant_stream(ctx.tenant), [marker]))
        touched = [w.stream_id[len("memory-") :] for w in writes if w.stream_id.startswith("memory-")]
        result = commit(self.store, ctx, "revert", writes, request=[asked, force], memory_ids=touched)
        result.data.update(reverted=len(recorded), conflicts=conflicts, forced=marker.forced, **_through(through))
        return result

    def _not_undone_since_revert(self, tenant: str, tenant_events: list[RecordedEvent], correlation_id: str) -> set[int]:
        """The positions of the events a reverted correlation wrote after its revert (a session that went on under
        its id) that no revert in effect undoes: its first revert compensated only what came before it, and the
        reverts of those later events are its markers after the first (each in effect unless reverted in turn)."""
        markers = [r for r in tenant_events if isinstance(r.event, c.CorrelationReverted) and r.event.correlation_id == correlation_id]
        undone = {
            position
            for marker in markers[1:]
            if not len(revert_chain(tenant_events, marker.metadata.correlation_id)) % 2
            for position in marker.event.reverted_positions
        }
        later = self.store.read_all(markers[0].position, tenant=tenant, correlation_id=correlation_id)
        return {r.position for r in later if r.type not in UNREVERTED and r.position not in undone}

    # -- memories ----------------------------------------------------------------------------

    def _memory_compensations(
        self, ctx: CommandContext, recorded: list[RecordedEvent], stamp: str, reason: str, conflicts: list[str], removed: list[str], undone: set[str]
    ) -> list[StreamAppend]:
        """Each memory back to its version before the correlation; those it created deleted (their ids added to ``removed``).

        Later versions are no conflict when every one of them was written by a correlation whose changes no
        longer show (``undone``, see :func:`undone_correlations`) and the memory is as the correlation left
        it: reverts taken in the reverse order of the changes (an undo stack) need no force."""
        touched = _touched(recorded, lambda r: r.stream_id[len("memory-") :] if r.stream_id.startswith("memory-") else None)
        writes = []
        for memory_id, (first, last, others) in touched.items():
            state = load(self.store, ctx.tenant, memory_id)
            # Working memory is churn: the archive of a WorkingMemory item the FIFO evicted is no conflict, and it stays.
            churn = self._fifo_archives(ctx.tenant, memory_id, [*others, *range(last + 1, state.version + 1)])
            others = [v for v in others if v not in churn]
            later = [v for v in range(last + 1, state.version + 1) if v not in churn]
            # Undone since, the memory as the correlation left it: no conflict (what the revert writes is as before).
            as_left = lambda: _same(state.at(last), state.at(state.version))  # noqa: E731
            undone_since = _undone_since({state.at(v).correlation_id for v in later}, undone, as_left)
            conflicts += _changed_by_others(f"memory {memory_id}", "version", first, last, others, state.version if later and not undone_since else last)
            if first == 1:
                if state.status == Status.DELETED.value:
                    continue
                event = c.MemorySoftDeleted(memory_id=memory_id, updated_at=stamp, reason=reason)
                removed.append(memory_id)
            else:
                before = state.at(first - 1)
                if _same(before, state):
                    continue  # nothing to change (both versions erased alike, too)
                if before.content.erased or state.content.erased:
                    # A forget is final: the memory as it was is gone with its key, so it cannot come back.
                    conflicts.append(f"memory {memory_id} was erased (its subject was forgotten): it stays as it is")
                    continue
                out = churn and not later and state.status == Status.ARCHIVED.value  # evicted since: it stays out
                if out and before.content == state.content:
                    continue
                event = c.MemoryRolledBack(
                    memory_id=memory_id,
                    to_version=first - 1,
                    content=embeddable(before.content, self.embedding_dim),
                    status=state.status if out else before.status,
                    updated_at=stamp,
                    reason=reason,
                )
                if event.status == Status.DELETED.value != state.status:
                    removed.append(memory_id)  # deleted again: the edges linked onto it since go, as with a delete
            writes.append(StreamAppend(c.memory_stream(memory_id), [event], state.version))
        return writes

    def _mentions_following(self, ctx: CommandContext, writes: list[StreamAppend], edge_events: list, reason: str) -> list:
        """``edge_events`` such that a memory the revert takes back to archived mentions nothing, as after an archive.

        The correlation's own edges are what a revert undoes; forced past later changes, those may have linked the
        memory's mentions again since (a later restore): they end with it, and none of its mentions is linked back.
        """
        if self.mentions is None:
            return edge_events
        inactive = {
            e.memory_id
            for w in writes
            if w.stream_id.startswith("memory-")
            for e in w.events
            if isinstance(e, c.MemoryRolledBack) and e.status != Status.ACTIVATED.value
        }
        if not inactive:
            return edge_events
        kept = [e for e in edge_events if not (isinstance(e, c.EdgeLinked) and self._mention(e.edge) and e.edge.source in inactive)]
        unlinking = {e.edge.edge_id for e in kept if isinstance(e, c.EdgeUnlinked)}
        return kept + [e for e in self.mentions.unlink(ctx.tenant, sorted(inactive), reason) if e.edge.edge_id not in unlinking]

    def _fifo_archives(self, tenant: str, memory_id: str, versions: list[int]) -> set[int]:
        """Those of ``versions`` of the memory's stream that archived it with its eviction from working memory by the FIFO
        (a ``WorkingMemoryEvicted`` naming it before, in the same correlation), not by a request to archive it."""
        if not versions:
            return set()
        wanted = set(versions)
        found = set()
        for r in self.store.read_stream(c.memory_stream(memory_id), from_version=min(wanted), to_version=max(wanted)):
            if r.stream_version not in wanted or not isinstance(r.event, c.MemoryArchived) or r.event.reason != EVICTED:
                continue
            evicted = self.store.read_all(until=r.position, tenant=tenant, types=["WorkingMemoryEvicted"], correlation_id=r.metadata.correlation_id)
            if any(memory_id in e.event.memory_ids for e in evicted):
                found.add(r.stream_version)
        return found

    # -- documents and entities ------------------------------------------------------------------

    def _current_unless_undone(self, stream_id: str, last: int, current: int, undone: set[str], as_left: Callable[[], bool]) -> int:
        """``current``, the stream's version; ``last`` (no later change) when every version after ``last`` was written by
        a correlation whose changes no longer show (``undone``) and ``as_left()``: the thing is as the correlation left it."""
        if current == last:
            return current
        later = self.store.read_stream(stream_id, from_version=last + 1, to_version=current)
        return last if _undone_since({r.metadata.correlation_id for r in later}, undone, as_left) else current

    def _document_compensations(
        self, ctx: CommandContext, recorded: list[RecordedEvent], reason: str, conflicts: list[str], undone: set[str]
    ) -> tuple[list[StreamAppend], list[StreamAppend], list[str], list[str]]:
        """Each document back to its version before the correlation; the deletion of the live chunks later versions
        made (outside the version it goes back to); the graph nodes of documents removed, and the ids of those chunks.
        Later versions that are undone since are no conflict (see :meth:`_memory_compensations`)."""
        documents = [r for r in recorded if isinstance(r.event, g.DocumentEvent.__args__)]
        for doc_id in sorted({r.event.doc_id for r in documents if r.stream_id != g.document_stream(ctx.tenant, r.event.doc_id)}):
            # written to the stream the tenant's name once shared with other tenants' documents, whose versions do not count its own
            conflicts.append(f"document {doc_id} was written to a stream shared with other tenants: import the version to keep")
        touched = _touched(documents, lambda r: r.event.doc_id if r.stream_id == g.document_stream(ctx.tenant, r.event.doc_id) else None)
        writes, removed, chunk_writes, chunks = [], [], [], []
        mine = {r.stream_id for r in recorded if r.stream_id.startswith("memory-")}  # the memories the memory compensations settle
        for doc_id, (first, last, others) in touched.items():
            now = load_document(self.store, ctx.tenant, doc_id)
            as_left = lambda: _document_record(load_document(self.store, ctx.tenant, doc_id, until_version=last).current) == (  # noqa: E731
                _document_record(now.current)
            )
            current = self._current_unless_undone(g.document_stream(ctx.tenant, doc_id), last, now.stream_version, undone, as_left)
            conflicts += _changed_by_others(f"document {doc_id}", "stream version", first, last, others, current)
            before = load_document(self.store, ctx.tenant, doc_id, until_version=first - 1).current
            if _document_record(before) == _document_record(now.current):
                continue
            if before is None:
                event = g.DocumentRemoved(doc_id=doc_id, reason=reason)
                removed.append(g.document_node(doc_id))
            else:
                event = g.DocumentRolledBack(**_document_record(before), reason=reason)
            # Chunks a later version made (the revert forced past it) go: none stays active outside the document's version.
            # One archived already (by hand, or by a later import) is no chunk of any version and stays as it is.
            kept = set(before.chunk_ids) if before is not None else set()
            for chunk_id in now.current.chunk_ids if now.current is not None else ():
                if chunk_id in kept or c.memory_stream(chunk_id) in mine or chunk_id in chunks:
                    continue
                try:
                    state = load(self.store, ctx.tenant, chunk_id)
                except NotFound:
                    continue
                if state.status == Status.ACTIVATED.value:
                    chunk = c.MemorySoftDeleted(memory_id=chunk_id, updated_at=now_iso(), reason=reason)
                    chunk_writes.append(StreamAppend(c.memory_stream(chunk_id), [chunk], state.version))
                    chunks.append(chunk_id)
            writes.append(StreamAppend(g.document_stream(ctx.tenant, doc_id), [event], now.stream_version))
        return writes, chunk_writes, removed, chunks

    def _entity_compensations(
        self, ctx: CommandContext, recorded: list[RecordedEvent], reason: str, conflicts: list[str], undone: set[str]
    ) -> tuple[list[StreamAppend], list[str]]:
        """Each entity stream back to its state before the correlation; the ids of entities removed. Later
        versions that are undone since are no conflict (see :meth:`_memory_compensations`)."""
        prefix = g.entity_stream(ctx.tenant, "")
        touched = _touched(recorded, lambda r: r.stream_id[len(prefix) :] if r.stream_id.startswith(prefix) else None)
        writes, removed = [], []
        for entity_id, (first, last, others) in touched.items():
            now = load_entity(self.store, ctx.tenant, entity_id)
            as_left = lambda: _entity_facts(load_entity(self.store, ctx.tenant, entity_id, until_version=last)) == _entity_facts(now)  # noqa: E731
            current = self._current_unless_undone(g.entity_stream(ctx.tenant, entity_id), last, now.stream_version, undone, as_left)
            conflicts += _changed_by_others(f"entity {entity_id}", "stream version", first, last, others, current)
            before = load_entity(self.store, ctx.tenant, entity_id, until_version=first - 1)
            events = _entity_events(entity_id, now, before, reason)
            if events:
                writes.append(StreamAppend(g.entity_stream(ctx.tenant, entity_id), events, now.expected))
            if now.active and not before.active:
                removed.append(entity_id)
        return writes, removed

    def _dangling(
        self,
        ctx: CommandContext,
        entities: list[str],
        nodes: list[str],
        edge_events: list,
        reason: str,
        conflicts: list[str],
        compensated: set[str],
    ) -> list[StreamAppend]:
        """What later changes hung on the nodes this revert removes: conflicts, and their removal when forced (the
        organizer's topic and conversation edges, which its next run derives again, go with the node, no conflict).

        ``nodes`` are the other nodes it removes: documents (``document:<doc_id>``), and the memories it deletes
        (created by the correlation, or deleted before it). Live edges touching a removed node (other than those
        the revert unlinks) are appended to ``edge_events`` as unlinks; relations into a removed entity from
        entities the revert leaves alone are removed on their streams (returned).
        """
        nodes = entities + nodes
        if not nodes:
            return []
        unlinked = {e.edge.edge_id for e in edge_events if isinstance(e, c.EdgeUnlinked)}
        for edge in self.facts.live_edges_of(ctx.tenant, nodes):
            if edge.edge_id not in unlinked:
                if not any(edge.edge_id.startswith(prefix) and edge.edge_type == kind for prefix, kind in g.ORGANIZER_STRUCTURE):
                    conflicts.append(f"edge {edge.edge_id} touches {edge.source if edge.source in nodes else edge.target}, which the revert removes")
                edge_events.append(c.EdgeUnlinked(edge=edge, reason=reason))
                unlinked.add(edge.edge_id)
        writes = []
        gone = set(entities)
        sources = {e.source for e in self.facts.live_edges_of(ctx.tenant, entities) if e.edge_id.startswith(g.RELATION_EDGE_PREFIX)} - gone
        for source in sorted(sources):
            if g.entity_stream(ctx.tenant, source) in compensated:
                continue
            state = load_entity(self.store, ctx.tenant, source)
            into = [
                g.RelationRemoved(source_id=source, target_id=target, relation_type=rtype, reason=reason)
                for (target, rtype) in sorted(state.relations)
                if target in gone
            ]
            if into:
                conflicts.append(f"entity {source} has relations set later into {', '.join(sorted({e.target_id for e in into}))}")
                writes.append(StreamAppend(g.entity_stream(ctx.tenant, source), into, state.expected))
        return writes

    # -- edges --------------------------------------------------------------------------------------

    def _edge_compensations(
        self, ctx: CommandContext, recorded: list[RecordedEvent], conflicts: list[str], settled: set[str], rolled_back: set[str], after: NodesAfter
    ) -> list:
        """The inverse of the correlation's net effect on each edge id. An edge linked back whose end a merge archived
        since (but a memory in ``settled``, which the revert itself sets) follows the merge (see ``following_merges``).
        The live mentions of the documents ``rolled_back`` go, whoever linked them (a later import the revert is forced
        past, a relink): they would stand in the way of those of the version it goes back to. An edge whose end is gone
        ``after`` the revert is not linked back (a conflict)."""
        net = NetChange()
        for r in recorded:
            if isinstance(r.event, c.EdgeEvent.__args__):
                closed, opened = c.edge_changes(r.event)
                for edge in closed:
                    net.remove(edge.edge_id, edge)
                for edge in opened:
                    net.add(edge.edge_id, edge)
        events: list = []
        for edge_id, edge in net.added.items():
            live = self.facts.live_edge(ctx.tenant, edge_id)
            if live is None or (edge_id not in net.removed and _another_relation(live, edge)):  # that one is not this one's
                conflicts.append(f"edge {edge_id} was already removed later")
                continue
            if live != edge:
                conflicts.append(f"edge {edge_id} changed after")
            if edge_id in net.removed:
                continue  # replaced in place below
            events.append(c.EdgeUnlinked(edge=live, reason="revert"))
        relink = []
        for edge_id, edge in net.removed.items():
            live = self.facts.live_edge(ctx.tenant, edge_id)
            if live is not None and edge_id not in net.added and _another_relation(live, edge):
                edge = _escaped_relation_edge(edge)  # its id spelled since by another relation, as set_relation names it then
                edge_id, live = edge.edge_id, self.facts.live_edge(ctx.tenant, edge.edge_id)
            if live is not None and edge_id not in net.added:
                conflicts.append(f"edge {edge_id} was linked again later")
                continue
            if live is not None:
                events.append(c.EdgeUnlinked(edge=live, reason="revert"))
            relink.append(edge)
        unlinking = {e.edge.edge_id for e in events}
        for live in self.facts.live_edges_of(ctx.tenant, sorted(rolled_back)) if rolled_back else ():
            if live.source in rolled_back and self._mention(live) and live.edge_id not in unlinking:
                events.append(c.EdgeUnlinked(edge=live, reason="revert"))
                unlinking.add(live.edge_id)
        # Only a merge after the correlation began moved what it took out: an edge live then beside a merge made before
        # was linked to the archived memory as it is.
        relink, folds = following_merges(
            self.facts, ctx.tenant, relink, settled=settled, unlinking=unlinking, ended=self._mention, since=recorded[0].position - 1
        )
        relink = after.keep(self._not_mentioned_yet(ctx.tenant, relink, unlinking), self._mention, conflicts)
        if relink:
            events.append(c.NamespaceRestored(prefix="", edges=tuple(relink), undo_position=recorded[-1].position))
        return events + folds

    def _not_mentioned_yet(self, tenant: str, relink: list[c.EdgeRecord], unlinking: set[str]) -> list[c.EdgeRecord]:
        """``relink`` without the mentions whose memory mentions their entity already: a memory's mentions follow
        its text, one edge per entity, and a later change (a restore, an update) may have linked them again under
        new ids. Linked back beside those, they would double them, and outlive them when that change is reverted."""
        sources = sorted({e.source for e in relink if self._mention(e)})
        if not sources:
            return relink
        held = {(e.source, e.target) for e in self.facts.live_edges_of(tenant, sources) if self._mention(e) and e.edge_id not in unlinking}
        kept = []
        for edge in relink:
            if self._mention(edge):
                if (edge.source, edge.target) in held:
                    continue
                held.add((edge.source, edge.target))
            kept.append(edge)
        return kept

    # -- working memory -------------------------------------------------------------------------------

    def _working_compensations(
        self, ctx: CommandContext, recorded: list[RecordedEvent], reason: str, stamp: str, writes: list[StreamAppend]
    ) -> list[StreamAppend]:
        """Withdraw the entries the correlation put in, and those of the memories the revert takes out of the activated
        state; restore the entries it took out; ``writes``: the revert's other writes.

        Working memory is churn, not content: later changes to it are no
        conflict. An entry evicted since is not withdrawn again; restored
        entries take their old places, those the newest ``working_capacity``
        entries include, and the oldest entries beyond the capacity are then
        evicted (as an add evicts: a ``WorkingMemory`` item evicted is
        archived, on top of the revert's own rollback of it if any). A
        ``WorkingMemory`` item the revert makes active again stays archived
        when the capacity leaves its entry out.
        """
        net = NetChange()
        for r in recorded:
            event = r.event
            if isinstance(event, c.MemoryAdded) and event.working_binding and r.stream_version == 1:
                entry = c.WorkingEntry(
                    binding=event.working_binding, memory_id=event.memory_id, memory_type=event.content.memory_type, entered_at=r.position
                )
                net.add(entry.binding, entry)
            elif isinstance(event, c.WorkingMemoryRestored):
                for entry in event.entries:
                    net.add(entry.binding, entry)
            elif isinstance(event, (c.WorkingMemoryEvicted, c.WorkingMemoryWithdrawn)):
                for binding, memory_id in zip(event.bindings, event.memory_ids):
                    net.remove(binding, memory_id)
        # A memory the revert takes out of the activated state leaves working memory, as after any rollback.
        leaving = {w.stream_id[len("memory-") :] for w in writes if w.stream_id.startswith("memory-") and not _activates(w)}
        if not (net.added or net.removed or leaving):
            return []
        live = {e.binding: e for e in self.facts.working_entries(ctx.tenant)}
        withdraw = [e for b, e in net.added.items() if b not in net.removed and b in live]
        withdraw += [e for b, e in live.items() if e.memory_id in leaving and e not in withdraw]
        restore = []
        for binding, memory_id in net.removed.items():
            if binding not in net.added and binding not in live:
                entry = self._entry(ctx.tenant, binding, memory_id)
                if entry is not None and self._active_after(ctx.tenant, memory_id, writes):
                    restore.append(entry)
        events: list = []
        if withdraw:
            events.append(
                c.WorkingMemoryWithdrawn(bindings=tuple(e.binding for e in withdraw), memory_ids=tuple(e.memory_id for e in withdraw), reason=reason)
            )
        back = self.working.back(ctx.tenant, restore, reason, stamp, leaving=[e.binding for e in withdraw])
        archives = []
        if back:
            events += back[0].events  # the restore, then the evictions it causes
            archives = back[1:]
        restored = {e.binding for event in events if isinstance(event, c.WorkingMemoryRestored) for e in event.entries}
        left_out = [e for e in restore if e.binding not in restored and e.memory_type == MemoryType.WORKING.value]
        for entry in left_out:  # put on its rollback to an active version only: without one, the item is not active now
            _onto(writes, c.memory_stream(entry.memory_id), c.MemoryArchived(memory_id=entry.memory_id, updated_at=stamp, reason=EVICTED))
        extra = [a for a in archives if not _onto(writes, a.stream_id, *a.events)]
        return self.working.write(ctx.tenant, events) + extra

    def _active_after(self, tenant: str, memory_id: str, writes: list[StreamAppend]) -> bool:
        """Whether ``memory_id`` is activated once ``writes`` (the revert's) are applied: an entry comes back only for such a memory."""
        for write in writes:
            if write.stream_id == c.memory_stream(memory_id):
                return _activates(write)
        try:
            return load(self.store, tenant, memory_id).status == Status.ACTIVATED.value
        except NotFound:
            return False

    def _entry(self, tenant: str, binding: str, memory_id: str) -> c.WorkingEntry | None:
        """The working-memory place ``binding`` of ``memory_id`` had: its latest stay's, or the ``MemoryAdded``'s that made it."""
        stay = self.facts.working_stay(tenant, memory_id)
        if stay is not None and stay[0].binding == binding:
            return stay[0]  # its latest stay (a merged memory's is in the place of a source)
        first = self.store.read_stream(c.memory_stream(memory_id), to_version=1)
        if not first or first[0].tenant != tenant:
            return None
        event = first[0].event
        if not isinstance(event, c.MemoryAdded) or event.working_binding != binding:
            return None
        return c.WorkingEntry(binding=binding, memory_id=memory_id, memory_type=event.content.memory_type, entered_at=first[0].position)


def _undone_since(later: set[str | None], undone: set[str], as_left: Callable[[], bool]) -> bool:
    """Whether changes made after a correlation (``later``: the correlations that wrote them) are no conflict for its
    revert: there are some, every one of their correlations no longer shows (``undone``), and ``as_left()``: the thing
    is as the correlation left it."""
    return bool(later) and later <= undone and as_left()


def _same(one, other) -> bool:
    """Whether two states of a memory (a version of it, or the memory now) hold the same content and status."""
    return one.content == other.content and one.status == other.status


def _entity_facts(state: EntityState) -> tuple:
    """What an entity is, apart from where its stream and its creation stand."""
    return tuple(getattr(state, f) for f in EntityState.__struct_fields__ if f not in ("stream_version", "created_position"))


def _through(revert_id: str | None) -> dict[str, str]:
    """``through``: the revert undone to revert a correlation again, whose earlier revert was reverted."""
    return {"through": revert_id} if revert_id else {}


def _onto(writes: list[StreamAppend], stream_id: str, *events) -> bool:
    """Put ``events`` after the revert's own write on ``stream_id``, a rollback of a memory to an active version (one
    stream, one write in a batch); ``True`` when the revert writes that stream (else nothing is put)."""
    for i, write in enumerate(writes):
        if write.stream_id == stream_id:
            if _activates(write):
                writes[i] = write._replace(events=[*write.events, *events])
            return True
    return False


def _activates(write: StreamAppend) -> bool:
    """Whether the revert's ``write`` on a memory's stream ends by rolling it back to an active version."""
    last = write.events[-1]
    return isinstance(last, c.MemoryRolledBack) and last.status == Status.ACTIVATED.value


def _touched(recorded: list[RecordedEvent], key) -> dict[str, tuple[int, int, list[int]]]:
    """``key(event)`` -> the first and last stream versions the correlation wrote on its stream, and the
    versions between them that it did not write (other correlations wrote them, between two of its requests)."""
    written: dict[str, list[int]] = {}
    for r in recorded:
        name = key(r)
        if name is not None:
            written.setdefault(name, []).append(r.stream_version)
    touched = {}
    for name, versions in written.items():
        first, last = versions[0], versions[-1]
        touched[name] = (first, last, sorted(set(range(first, last + 1)) - set(versions)))
    return touched


def _changed_by_others(what: str, unit: str, first: int, last: int, others: list[int], current: int) -> list[str]:
    """Conflicts on a stream the correlation wrote versions ``first``..``last`` of: versions other correlations wrote
    between its own (``others``) or after them (up to ``current``), which a revert to version ``first - 1`` would undo too."""
    found = []
    if others:
        found.append(f"{what} changed in between by another correlation ({unit}{'s' * (len(others) > 1)} {', '.join(map(str, others[:5]))}{', …' if len(others) > 5 else ''})")
    if current != last:
        found.append(f"{what} changed after ({unit} {current}, the correlation wrote up to {last})")
    return found


def _document_record(event: g.DocumentImported | g.DocumentRolledBack | None) -> dict[str, Any] | None:
    """A document version's fields, whichever event recorded it."""
    return None if event is None else {f: getattr(event, f) for f in _DOCUMENT_FIELDS}


def _entity_events(entity_id: str, now: EntityState, before: EntityState, reason: str) -> list:
    """Events that take an entity's stream from state ``now`` back to state ``before``."""
    if not before.active:
        if not now.active:
            return []
        relations = [
            g.RelationRemoved(source_id=entity_id, target_id=target, relation_type=rtype, reason=reason) for (target, rtype) in sorted(now.relations)
        ]
        return [*relations, g.EntityRemoved(entity_id=entity_id, reason=reason)]
    events: list = []
    fields = lambda s: (s.name, s.entity_type, s.description, s.aliases, s.properties, s.created_position)  # noqa: E731
    if not now.active or fields(now) != fields(before):
        events.append(g.EntityRolledBack(
            entity_id=entity_id, name=before.name, entity_type=before.entity_type, description=before.description, aliases=before.aliases,
            tags=before.tags, properties=dict(before.properties), created_position=before.created_position, reason=reason,
        ))
    elif now.tags != before.tags:
        events.append(g.EntityTagsSet(entity_id=entity_id, tags=before.tags))
    for target, rtype in sorted(set(now.relations) - set(before.relations)):
        events.append(g.RelationRemoved(source_id=entity_id, target_id=target, relation_type=rtype, reason=reason))
    for (target, rtype), weight in sorted(before.relations.items()):
        if now.relations.get((target, rtype)) != weight:
            events.append(g.RelationSet(source_id=entity_id, target_id=target, relation_type=rtype, weight=weight))
    return events


def _another_relation(live: c.EdgeRecord, edge: c.EdgeRecord) -> bool:
    """Whether ``live`` mirrors another relation than ``edge`` under the same id: entity ids may hold ``:``, so two
    relations can spell one (see :func:`~mnemolog.eventstore.catalogue_graph.relation_edge_id`)."""
    return edge.edge_id.startswith(g.RELATION_EDGE_PREFIX) and (live.source, live.edge_type, live.target) != (edge.source, edge.edge_type, edge.target)


def _escaped_relation_edge(edge: c.EdgeRecord) -> c.EdgeRecord:
    return msgspec.structs.replace(edge, edge_id=g.relation_edge_id(edge.source, edge.edge_type, edge.target, escaped=True))
