"""Memory commands: add, update, merge, supersede, archive, delete, restore, rollback."""

from __future__ import annotations

from typing import Any, Sequence

import msgspec

from .. import catalogue as c
from .. import catalogue_graph as g
from ..aggregate import MemoryState, load
from ..ids import new_ids
from ..model import (
    CONTENT_FIELDS,
    ENTERS_WORKING_MEMORY,
    Conflict,
    MemoryContent,
    MemoryType,
    NotFound,
    Status,
    ValidationError,
    embeddable,
    merge_contents,
    merge_losses,
    validate_content,
)
from ..recorder import ExpectedVersion
from ..store import ANY, NO_STREAM, EventStore, StreamAppend
from .context import CommandContext, CommandResult, commit, nothing_done, now_iso, replayed
from .facts import GraphFacts
from .edges import MERGED_TO, detached, fold, reattached
from .mentions import Linker, MemoryMentions
from .working import WorkingMemory

_STATUS_WORD = {"archive": "archived", "delete": "deleted"}
_LINEAGE = ("MERGED_TO", "SUPERSEDED_BY")  # the edges that say a memory left for another
UPDATABLE_FIELDS = tuple(f for f in CONTENT_FIELDS if f != "memory_type")
MAX_BATCH = 10_000


class MemoryCommands:
    def __init__(self, store: EventStore, facts: GraphFacts, *, working_capacity: int = 20, linker: Linker | None = None, embedding_dim: int | None = None):
        self.store = store
        self.facts = facts
        self.working_capacity = working_capacity
        self.mentions = MemoryMentions(facts, linker)  # the entities each memory mentions (see .mentions)
        self.working = WorkingMemory(store, facts, working_capacity, self.mentions)  # the FIFO, and its entries following each memory's status
        #: The length of the read side's vectors (its embedder's): a caller's embedding of another length would get none.
        self.embedding_dim = embedding_dim

    def _check_embedding(self, content: MemoryContent, field: str) -> None:
        dim = self.embedding_dim
        if content.embedding is not None and dim and len(content.embedding) != dim:
            raise ValidationError(field, f"must have {dim} dimensions (the embedder's), got {len(content.embedding)}: it would never be searched")

    # -- add -------------------------------------------------------------------

    def add(self, ctx: CommandContext, items: Sequence[MemoryContent]) -> CommandResult:
        """Add one memory or a batch, atomically: a single add is a batch of one."""
        if not items:
            raise ValidationError("memories", "at least one memory is needed")
        if len(items) > MAX_BATCH:
            raise ValidationError("memories", f"at most {MAX_BATCH} memories per batch")
        contents = []
        for i, item in enumerate(items):
            prefix = f"memories[{i}]." if len(items) > 1 else ""
            content = validate_content(item, field_prefix=prefix)
            self._check_embedding(content, prefix + "embedding")
            if content.memory_type == MemoryType.TOPIC.value:
                raise ValidationError(prefix + "memory_type", "TopicMemory is written by the organizer only")
            contents.append(content)
        if (done := replayed(self.store, ctx, "add", contents)) is not None:
            return done
        ids = new_ids(len(contents) * 2)
        memory_ids, bindings = ids[0::2], ids[1::2]
        created = now_iso()
        writes: list[StreamAppend] = []
        entered: list[tuple[str, str, str]] = []
        for memory_id, binding, content in zip(memory_ids, bindings, contents):
            enters = content.memory_type in ENTERS_WORKING_MEMORY or content.memory_type == MemoryType.WORKING.value
            writes.append(
                StreamAppend(
                    c.memory_stream(memory_id),
                    [c.MemoryAdded(memory_id=memory_id, content=content, created_at=created, working_binding=binding if enters else None)],
                    NO_STREAM,
                )
            )
            if enters:
                entered.append((binding, memory_id, content.memory_type))
        evicted = self.working.evictions(ctx.tenant, entered, created)
        writes.extend(evicted)
        archived = {w.events[0].memory_id for w in evicted[1:]}  # WorkingMemory items that left with the eviction
        linked = self.mentions.link(ctx.tenant, [(m, content.memory, content.subject) for m, content in zip(memory_ids, contents) if m not in archived])
        edge_events = linked + self.working.evicted_mentions(ctx.tenant, evicted)
        if edge_events:
            writes.append(StreamAppend(c.edges_stream(ctx.tenant), edge_events))
        return commit(
            self.store,
            ctx,
            "add",
            writes,
            request=contents,
            memory_ids=memory_ids,
            data={"evicted": len(evicted[0].events[0].bindings) if evicted else 0, "mentions": len(linked)},
        )

    def evict_beyond_capacity(self, ctx: CommandContext, *, reason: str, expected_version: ExpectedVersion = ANY) -> CommandResult:
        """Evict the oldest entries the tenant's working memory holds beyond its capacity (none: nothing written), as
        an add evicts (a ``WorkingMemory`` item archived, its mentions unlinked), with ``reason``. ``expected_version``:
        the version of the tenant's working stream read before the catch-up this command runs on; another writer's
        change of working memory since fails it with ``ConcurrencyError`` (see ``WorkingMemory.beyond_capacity``)."""
        writes = self.working.beyond_capacity(ctx.tenant, reason, now_iso(), expected_version)
        if not writes:
            return nothing_done(ctx, evicted=0)
        evicted = writes[0].events[0]
        if unlinked := self.working.evicted_mentions(ctx.tenant, writes):
            writes.append(StreamAppend(c.edges_stream(ctx.tenant), unlinked))
        request = [list(evicted.bindings), reason]
        return commit(self.store, ctx, "evict", writes, request=request, data={"evicted": len(evicted.bindings)})

    # -- content changes ---------------------------------------------------------

    def update(
        self,
        ctx: CommandContext,
        memory_id: str,
        changes: dict[str, Any],
        *,
        expected_version: int | None = None,
        reason: str = "",
    ) -> CommandResult:
        """A new version with new text and/or metadata; the old one stays in history.

        Only an activated memory is updated: an archived or deleted one is
        refused (409) until it is restored.
        """
        unknown = sorted(set(changes) - set(UPDATABLE_FIELDS))
        if unknown:
            raise ValidationError(unknown[0], "cannot be updated" if unknown[0] == "memory_type" else "unknown field")
        if not changes:
            raise ValidationError("changes", "nothing to update")
        request = _request([memory_id, changes, reason], expected_version=expected_version)
        if (done := replayed(self.store, ctx, "update", request, [memory_id])) is not None:
            return done
        state = self._load(ctx, memory_id, expected_version)
        if state.content.erased:
            raise Conflict(f"memory {memory_id} was erased (its subject was forgotten)", current_version=state.version)
        if state.status != Status.ACTIVATED.value:
            # An archived memory is out of recall (merged, superseded, evicted, archived by hand):
            # editing it in place would change what it was when it left, so it comes back first.
            raise Conflict(f"memory {memory_id} is {state.status}; restore it first", current_version=state.version)
        try:
            content = msgspec.structs.replace(state.content, **changes)
        except (TypeError, msgspec.ValidationError) as exc:
            raise ValidationError(next(iter(changes)), str(exc)) from None
        content = validate_content(_convert(content))
        if changes.get("embedding") is not None:
            self._check_embedding(content, "embedding")
        changed = tuple(f for f in UPDATABLE_FIELDS if getattr(content, f) != getattr(state.content, f))
        if not changed:
            return CommandResult(correlation_id=ctx.correlation_id, memory_ids=(memory_id,), data={"version": state.version, "changed": []})
        if "memory" in changed and "embedding" not in changes:
            content = msgspec.structs.replace(content, embedding=None)  # a stale caller embedding would lie
        event = c.MemoryUpdated(memory_id=memory_id, content=content, changed=changed, updated_at=now_iso(), reason=reason)
        writes = [StreamAppend(c.memory_stream(memory_id), [event], state.version)]
        if "memory" in changed:
            writes += self._mention_writes(ctx, memory_id, content.memory, content, f"version {state.version + 1}")
        result = commit(self.store, ctx, "update", writes, request=request, memory_ids=[memory_id])
        return _with(result, version=state.version + 1, changed=list(changed))

    def rollback(self, ctx: CommandContext, memory_id: str, to_version: int, *, expected_version: int | None = None, reason: str = "") -> CommandResult:
        """A new version whose content and status equal version ``to_version``'s."""
        request = _request([memory_id, to_version], reason=reason, expected_version=expected_version)
        if (done := replayed(self.store, ctx, "rollback", request, [memory_id])) is not None:
            return done
        state = self._load(ctx, memory_id, expected_version)
        if not isinstance(to_version, int) or to_version < 1:
            raise ValidationError("to_version", f"must be between 1 and {state.version}")
        if to_version > state.version:  # a version the memory has not reached: missing, like an unknown memory
            raise NotFound(f"version {to_version} of memory", memory_id)
        if to_version == state.version:
            raise Conflict(f"memory {memory_id} is already at version {to_version}", current_version=state.version)
        target = state.at(to_version)
        if state.content.erased or target.content.erased:
            raise Conflict(f"memory {memory_id} was erased (its subject was forgotten)", current_version=state.version)
        if target.status == Status.ACTIVATED.value and (replaced_by := state.merged_into or state.superseded_by) is not None:
            # Live again, it would stand beside the memory that replaced it (its MERGED_TO or SUPERSEDED_BY edge
            # still there, the edges a merge moved still on the merged memory): the revert takes it all back.
            how = "merged into" if state.merged_into else "superseded by"
            since = next(v for v in reversed(state.versions) if v.event_type in ("MemoryMergedInto", "MemorySuperseded"))
            raise Conflict(
                f"memory {memory_id} was {how} {replaced_by} (correlation {since.correlation_id}): "
                f"revert that correlation to bring it back",
                current_version=state.version,
            )
        content = embeddable(target.content, self.embedding_dim)  # a caller embedding from before the embedder changed: embedded afresh
        event = c.MemoryRolledBack(
            memory_id=memory_id,
            to_version=to_version,
            content=content,
            status=target.status,
            updated_at=now_iso(),
            reason=reason or f"rolled back to version {to_version}",
        )
        text = content.memory if target.status == Status.ACTIVATED.value else None
        writes = [StreamAppend(c.memory_stream(memory_id), [event], state.version)]
        writes += self._graph_following(ctx, state, target.status)
        writes += self._mention_writes(ctx, memory_id, text, content, f"rolled back to version {to_version}")
        writes += self._working_following(ctx, state, target.status, event.reason, event.updated_at, writes, content.memory_type)
        result = commit(self.store, ctx, "rollback", writes, request=request, memory_ids=[memory_id])
        return _with(result, version=state.version + 1)

    # -- merge and supersede -----------------------------------------------------------

    def merge(
        self,
        ctx: CommandContext,
        memory_ids: Sequence[str],
        *,
        text: str | None = None,
        decision: c.Decision | None = None,
        expected_versions: dict[str, int] | None = None,
    ) -> CommandResult:
        """Merge two or more memories into a new one, in one atomic batch.

        The sources are archived with a ``MERGED_TO`` edge to the new memory,
        and every other live edge of theirs is re-pointed to it.
        """
        ids = list(dict.fromkeys(memory_ids))
        if len(ids) < 2:
            raise ValidationError("memory_ids", "a merge needs at least two distinct memories")
        if text is not None and not text.strip():
            raise ValidationError("text", "must not be empty")
        request = _request([ids, text], expected_versions=expected_versions or None)
        if (done := replayed(self.store, ctx, "merge", request)) is not None:
            return done
        expected_versions = expected_versions or {}
        for memory_id, version in expected_versions.items():
            if memory_id not in ids:
                raise ValidationError("expected_versions", f"{memory_id!r} is not among memory_ids")
            if not isinstance(version, int) or isinstance(version, bool) or version < 1:
                raise ValidationError("expected_versions", f"the version of {memory_id!r} must be a number from 1")
        states = [self._load(ctx, m, expected_versions.get(m), f"expected_versions.{m}", "memory_ids") for m in ids]
        for state in states:
            if state.status != Status.ACTIVATED.value:
                raise Conflict(f"memory {state.memory_id} is {state.status}; only activated memories merge", current_version=state.version, field="memory_ids")
            if state.content.erased:
                raise Conflict(f"memory {state.memory_id} was erased (its subject was forgotten)", current_version=state.version, field="memory_ids")
        topics = [s.memory_id for s in states if s.content.memory_type == MemoryType.TOPIC.value]
        if topics and len(topics) < len(states):  # a topic's members would hang on a memory, or a memory become the organizer's topic
            raise Conflict(f"memory {topics[0]} is a TopicMemory: topics merge only with topics", field="memory_ids")
        if len({s.content.subject for s in states}) > 1:
            # A merged memory has one subject: forgetting one of them must not leave its text in another's.
            raise Conflict("memories of different subjects do not merge", field="memory_ids")
        if decision is not None and (lost := merge_losses([s.content for s in states])):
            # An automatic merge keeps every value of its sources; an operator's merge keeps the first source's.
            raise Conflict(f"an automatic merge never drops a value; these memories differ in {'; '.join(lost)}")
        content = embeddable(validate_content(merge_contents([s.content for s in states], text)), self.embedding_dim)
        merged_id = new_ids(1)[0]
        stamp = now_iso()
        writes = [
            StreamAppend(
                c.memory_stream(merged_id),
                [c.MemoriesMerged(memory_id=merged_id, source_ids=tuple(ids), content=content, created_at=stamp, **c.decided(decision, content.subject))],
                NO_STREAM,
            )
        ]
        for state in states:
            writes.append(
                StreamAppend(
                    c.memory_stream(state.memory_id),
                    [c.MemoryMergedInto(memory_id=state.memory_id, merged_into=merged_id, updated_at=stamp)],
                    state.version,
                )
            )
        edge_events: list = []
        previous, current = [], []
        source_set = set(ids)
        mentions_out = []  # a source's mentions end with it; the merged memory's come from its own text
        for edge in self.facts.live_edges_of(ctx.tenant, ids):
            if self.mentions.owns(edge) and edge.source in source_set:
                mentions_out.append(c.EdgeUnlinked(edge=edge, reason=f"merged into {merged_id}"))
                continue
            source = merged_id if edge.source in source_set else edge.source
            target = merged_id if edge.target in source_set else edge.target
            previous.append(edge)
            current.append(msgspec.structs.replace(edge, source=source, target=target))
        if previous:
            # An edge between two sources would loop on the merged node; two of one type to one node become one.
            edge_events.append(c.EdgesRepointed(previous=tuple(previous), current=tuple(fold(current)), merged_into=merged_id))
        for n, state in enumerate(states, 1):
            edge_events.append(
                c.EdgeLinked(
                    edge=c.EdgeRecord(
                        edge_id=f"{g.MERGED_EDGE_PREFIX}{ctx.correlation_id}:{merged_id}:{n}",
                        edge_type=MERGED_TO,
                        source=state.memory_id,
                        target=merged_id,
                        weight=1.0,
                    )
                )
            )
        edge_events += mentions_out + self.mentions.link(ctx.tenant, [(merged_id, content.memory, content.subject)] if content.memory_type != MemoryType.TOPIC.value else [])
        writes.append(StreamAppend(c.edges_stream(ctx.tenant), edge_events))
        judge = decision.judge if decision is not None else None
        writes += self.working.write(ctx.tenant, self.working.merged(ctx.tenant, ids, merged_id, content.memory_type, judge=judge))
        result = commit(self.store, ctx, "merge", writes, request=request, memory_ids=[merged_id])
        return _with(result, merged_id=merged_id, sources=ids, repointed=len(previous))

    def supersede(
        self,
        ctx: CommandContext,
        older_id: str,
        newer_id: str,
        *,
        decision: c.Decision | None = None,
        expected_version: int | None = None,
        expected_newer_version: int | None = None,
    ) -> CommandResult:
        """The newer memory replaces the older contradictory one, which is archived (reason ``conflict``).

        ``expected_version`` and ``expected_newer_version``: the versions a judge read (a 409 when either moved on).
        """
        if older_id == newer_id:
            raise ValidationError("superseded_by", "a memory cannot supersede itself")
        request = _request([older_id, newer_id], expected_version=expected_version, expected_newer_version=expected_newer_version)
        if (done := replayed(self.store, ctx, "supersede", request, [older_id, newer_id])) is not None:
            return done
        older = self._load(ctx, older_id, expected_version)
        newer = self._load(ctx, newer_id, expected_newer_version, "expected_newer_version", "superseded_by")
        if older.status != Status.ACTIVATED.value:
            raise Conflict(f"memory {older_id} is {older.status}; only an activated memory can be superseded", current_version=older.version)
        if newer.status != Status.ACTIVATED.value:
            raise Conflict(f"memory {newer_id} is {newer.status}; it cannot supersede another", current_version=newer.version, field="superseded_by")
        # An erased memory says nothing: it would supersede a fact with "[erased]", and one superseded is gone already
        # (a decision's reason, which quotes both memories, is never written once they were erased either).
        if older.content.erased:
            raise Conflict(f"memory {older_id} was erased (its subject was forgotten)", current_version=older.version)
        if newer.content.erased:
            raise Conflict(f"memory {newer_id} was erased (its subject was forgotten)", current_version=newer.version, field="superseded_by")
        if decision is not None:
            # A decision's reason quotes both memories and is sealed under their subject: it is never written for another
            # subject's memory (forgetting that one must erase it too).
            if older.content.subject != newer.content.subject:
                raise Conflict("an automatic decision never supersedes a memory of one subject by another's")
        stamp = now_iso()
        writes = [
            StreamAppend(
                c.memory_stream(older_id),
                [c.MemorySuperseded(memory_id=older_id, superseded_by=newer_id, updated_at=stamp, **c.decided(decision, older.content.subject))],
                older.version,
            ),
            StreamAppend(
                c.edges_stream(ctx.tenant),
                [
                    c.EdgeLinked(
                        edge=c.EdgeRecord(
                            edge_id=f"{g.SUPERSEDED_EDGE_PREFIX}{ctx.correlation_id}:{older_id}",
                            edge_type="SUPERSEDED_BY",
                            source=older_id,
                            target=newer_id,
                            weight=1.0,
                            properties={"reason": "conflict"},
                        )
                    ),
                    *self.mentions.unlink(ctx.tenant, [older_id], f"superseded by {newer_id}"),
                ],
            ),
        ]
        judge = decision.judge if decision is not None else None
        writes += self.working.write(ctx.tenant, self.working.leaving(ctx.tenant, [older_id], f"superseded by {newer_id}", judge=judge))
        result = commit(self.store, ctx, "supersede", writes, request=request, memory_ids=[older_id, newer_id])
        return _with(result, version=older.version + 1)  # the superseded memory's, as a retry reads it back

    # -- status ----------------------------------------------------------------------

    def archive(self, ctx: CommandContext, memory_id: str, *, reason: str = "", expected_version: int | None = None) -> CommandResult:
        request = _request([memory_id, c.MemoryArchived.__name__, reason], expected_version=expected_version)
        if (done := replayed(self.store, ctx, "archive", request, [memory_id])) is not None:
            return done
        state = self._load(ctx, memory_id, expected_version)
        if state.status != Status.ACTIVATED.value:
            raise Conflict(f"memory {memory_id} is {state.status}; only an activated memory can be archived", current_version=state.version)
        event = c.MemoryArchived(memory_id=memory_id, updated_at=now_iso(), reason=reason)
        return self._status_change(ctx, "archive", state, event, request)

    def soft_delete(
        self,
        ctx: CommandContext,
        memory_id: str,
        *,
        reason: str = "",
        evolve_to: str | None = None,
        expected_version: int | None = None,
    ) -> CommandResult:
        request = _request([memory_id, c.MemorySoftDeleted.__name__, reason], evolve_to=evolve_to, expected_version=expected_version)
        if (done := replayed(self.store, ctx, "delete", request, [memory_id])) is not None:
            return done
        state = self._load(ctx, memory_id, expected_version)
        if state.status == Status.DELETED.value:
            raise Conflict(f"memory {memory_id} is already deleted", current_version=state.version)
        if evolve_to is not None:
            if evolve_to == memory_id:
                raise ValidationError("evolve_to", "a memory cannot evolve into itself")
            target = self._load(ctx, evolve_to, None, named_by="evolve_to")
            if target.status != Status.ACTIVATED.value:
                raise Conflict(f"memory {evolve_to} is {target.status}; a memory evolves only into an activated one", field="evolve_to")
            if target.content.erased:  # as for a supersede: the fact would live on as "[erased]"
                raise Conflict(f"memory {evolve_to} was erased (its subject was forgotten)", field="evolve_to")
        event = c.MemorySoftDeleted(memory_id=memory_id, updated_at=now_iso(), reason=reason, evolve_to=evolve_to)
        return self._status_change(ctx, "delete", state, event, request)

    def restore(self, ctx: CommandContext, memory_id: str, *, reason: str = "", expected_version: int | None = None) -> CommandResult:
        request = _request([memory_id, c.MemoryRestored.__name__, reason], expected_version=expected_version)
        if (done := replayed(self.store, ctx, "restore", request, [memory_id])) is not None:
            return done
        state = self._load(ctx, memory_id, expected_version)
        if state.status == Status.ACTIVATED.value:
            raise Conflict(f"memory {memory_id} is already activated", current_version=state.version)
        event = c.MemoryRestored(memory_id=memory_id, updated_at=now_iso(), reason=reason)
        return self._status_change(ctx, "restore", state, event, request)

    def _status_change(self, ctx: CommandContext, command: str, state: MemoryState, event, request: list) -> CommandResult:
        restored = isinstance(event, c.MemoryRestored)
        writes = [StreamAppend(c.memory_stream(state.memory_id), [event], state.version)]
        writes += self._graph_following(ctx, state, Status.ACTIVATED.value if restored else _STATUS_WORD[command])
        text = state.content.memory if restored and not state.content.erased else None  # restored: linked again with today's catalogue (erased: the marker mentions nothing)
        word = "restored" if restored else _STATUS_WORD[command]
        writes += self._mention_writes(ctx, state.memory_id, text, state.content, word)
        after = Status.ACTIVATED.value if restored else word
        writes += self._working_following(ctx, state, after, word, event.updated_at, writes)
        result = commit(
            self.store,
            ctx,
            command,
            writes,
            request=request,
            memory_ids=[state.memory_id],
        )
        return _with(result, version=state.version + 1)

    def _graph_following(self, ctx: CommandContext, state: MemoryState, after: str) -> list[StreamAppend]:
        """The edge write, right after the memory's event, that makes the graph follow its status from ``state``'s to
        ``after``: a delete takes its edges out, the end of a delete links them back (see .edges)."""
        deleted, active, memory_id = Status.DELETED.value, Status.ACTIVATED.value, state.memory_id

        def left(edge: c.EdgeRecord) -> bool:  # current again, it is no longer merged into, nor superseded by, another
            return after == active and edge.source == memory_id and edge.edge_type in _LINEAGE

        events: list = []
        if after == deleted and state.status != deleted:
            events = detached(self.facts, ctx.tenant, memory_id, self.mentions.owns)
        elif state.status == deleted and after != deleted:
            since = len(state.versions) - 1
            while since > 0 and state.versions[since - 1].status == deleted:
                since -= 1  # rolled back to another deleted version meanwhile: the delete is the first of them
            events = reattached(self.store, self.facts, ctx.tenant, memory_id, state.versions[since].position, left)
        if after == active and state.status != active:
            events += [c.EdgeUnlinked(edge=e, reason=f"memory {memory_id} restored") for e in self.facts.live_edges_of(ctx.tenant, [memory_id]) if left(e)]
        return [StreamAppend(c.edges_stream(ctx.tenant), events)] if events else []

    def _working_following(
        self, ctx: CommandContext, state: MemoryState, after: str, reason: str, stamp: str, writes: list[StreamAppend], memory_type: str | None = None
    ) -> list[StreamAppend]:
        """The working-memory writes that follow the memory's change of status to ``after`` (see .working), then the
        unlinking of the mentions of the ``WorkingMemory`` items it evicts; ``writes``: the batch's writes before;
        ``memory_type``: the memory's type after the change (default: its type now).

        A ``WorkingMemory`` item lives only in working memory: one activated again (a restore, a rollback) whose place
        there is gone (the FIFO evicted it, or newer entries fill the capacity) is refused, where it became an
        activated memory outside working memory."""
        following = self.working.following(ctx.tenant, state.memory_id, state.status, after, reason, stamp)
        active = Status.ACTIVATED.value
        if (memory_type or state.content.memory_type) == MemoryType.WORKING.value and after == active and state.status != active:
            if not any(isinstance(e, c.WorkingMemoryRestored) and any(entry.memory_id == state.memory_id for entry in e.entries) for w in following for e in w.events):
                raise Conflict(
                    f"memory {state.memory_id} is a WorkingMemory item, which lives only in working memory, and its place there is gone"
                    " (the FIFO evicted it, or newer entries fill the capacity): add it again, or revert the correlation that evicted it",
                    current_version=state.version,
                )
        unlinked = self.working.evicted_mentions(ctx.tenant, following, writes)
        return following + ([StreamAppend(c.edges_stream(ctx.tenant), unlinked)] if unlinked else [])

    def _mention_writes(self, ctx: CommandContext, memory_id: str, text: str | None, content: MemoryContent, reason: str) -> list[StreamAppend]:
        """The edge-stream write that brings the memory's mentions in line with ``text`` (``None``: none), if any; ``content``: its type and subject."""
        events = self.mentions.adjust(ctx.tenant, memory_id, text, content.memory_type, f"memory {memory_id} {reason}", content.subject)
        return [StreamAppend(c.edges_stream(ctx.tenant), events)] if events else []

    # -- helpers -----------------------------------------------------------------------

    def _load(
        self, ctx: CommandContext, memory_id: str, expected_version: int | None, field: str = "expected_version", named_by: str | None = None
    ) -> MemoryState:
        """The memory's state from the log; a :class:`Conflict` naming ``field`` (the argument that gave
        ``expected_version``) when the memory is at another version, a :class:`NotFound` naming ``named_by``
        (the argument that gave ``memory_id``, when not the path)."""
        if not isinstance(memory_id, str) or not memory_id:
            raise ValidationError(named_by or "memory_id", "must be a non-empty string")
        try:
            state = load(self.store, ctx.tenant, memory_id)
        except NotFound as exc:
            raise NotFound(exc.what, exc.ident, field=named_by) from None
        if expected_version is not None and expected_version != state.version:
            raise Conflict(
                f"memory {memory_id} is at version {state.version}, not {expected_version}",
                current_version=state.version,
                field=field,
            )
        return state


def _convert(content: MemoryContent) -> MemoryContent:
    """Re-validate field types after a replace (msgspec does not check on replace)."""
    try:
        return msgspec.convert(msgspec.to_builtins(content), MemoryContent)
    except msgspec.ValidationError as exc:
        path = str(exc).rsplit("`$.", 1)
        field = path[1].rstrip("`").split(".")[0].split("[")[0] if len(path) == 2 else "changes"
        raise ValidationError(field, str(exc)) from None


def _request(base: list, **options: Any) -> list:
    """What an idempotency key stands for: the request ``base`` and every option given (``None``, ``""``: not given).

    An option not given leaves the request as it was before the option counted, so keys stored then still replay.
    """
    given = {k: v for k, v in options.items() if v is not None and v != ""}
    return [*base, given] if given else base


def _with(result: CommandResult, **data: Any) -> CommandResult:
    return msgspec.structs.replace(result, data={**result.data, **data})
