"""Working memory on the write side: the FIFO's evictions, and the entries that follow a memory's status.

A tenant's working memory holds the long-term and user memories (and the
``WorkingMemory`` items) it was given, oldest first, at most ``capacity``.
Its changes are events on ``working-<tenant>``, written in the same atomic
batch as the command that causes them:

- an add beyond the capacity evicts the oldest entries (``WorkingMemoryEvicted``);
  it decides from working memory as its process last caught up with the log, so
  two processes adding at once can leave it over its capacity: the oldest beyond
  it are then evicted with the reason why (:meth:`WorkingMemory.beyond_capacity`,
  issued by the policy that follows the log, ``projections.policies.working``);
- a memory that leaves the activated state (merged away, superseded,
  archived, deleted, rolled back to such a version, its subject forgotten)
  leaves working memory (``WorkingMemoryWithdrawn``, with the reason and,
  for the organizer's decisions, the judge);
- a merged memory takes the place of its newest source that was there;
- a restored memory (or one rolled back to an activated version) comes back
  at its old place (``WorkingMemoryRestored``) if it left by a withdrawal
  (a FIFO eviction is for good) and the capacity holds it: an entry older
  than the ``capacity`` newest would have been evicted first; the oldest
  entries beyond the capacity are then evicted.

A ``WorkingMemory`` item lives only in working memory: evicted, whatever the
command that evicts it (an add, a restore, a rollback, a revert), it is
archived, and its mention edges are unlinked like any archived memory's
(see .mentions); one whose place is gone is never activated again outside
it (``MemoryCommands._working_following`` refuses the restore or rollback).
"""

from __future__ import annotations

from typing import Iterable

from .. import catalogue as c
from ..aggregate import load
from ..erased import erased_through
from ..ids import new_ids
from ..model import MemoryType, NotFound, Status
from ..recorder import ExpectedVersion
from ..store import ANY, EventStore, StreamAppend
from .facts import GraphFacts
from .mentions import MemoryMentions

EVICTED = "evicted from working memory"  # the reason of a WorkingMemory item's archive when the FIFO evicts it
UNLINKED_EVICTED = f"archived: {EVICTED}"  # the reason of its mention edges' unlinking


def fifo_order(entry: c.WorkingEntry) -> tuple[int, str]:
    return entry.entered_at, entry.binding


class WorkingMemory:
    def __init__(self, store: EventStore, facts: GraphFacts, capacity: int | None = None, mentions: MemoryMentions | None = None):
        self.store = store
        self.facts = facts
        self.capacity = capacity
        self.mentions = mentions  # whose mention edges an evicted WorkingMemory item leaves (None: no linker, none)

    def write(self, tenant: str, events: list, expected: ExpectedVersion = ANY) -> list[StreamAppend]:
        """The working-stream write of ``events``, if any."""
        return [StreamAppend(c.working_stream(tenant), events, expected)] if events else []

    # -- the FIFO ---------------------------------------------------------------------------------

    def evictions(self, tenant: str, entered: list[tuple[str, str, str]], stamp: str) -> list[StreamAppend]:
        """Events that keep the tenant's working memory within its capacity (FIFO), for the
        ``(binding, memory_id, memory_type)`` entries an add puts in: the eviction first, then the
        archive of each ``WorkingMemory`` item it evicts."""
        if not entered or self.capacity is None:
            return []
        return self._evict(tenant, self._oldest_beyond(self.facts.working_memory(tenant) + entered), {m for _, m, _ in entered}, stamp)

    def beyond_capacity(self, tenant: str, reason: str, stamp: str, expected: ExpectedVersion = ANY) -> list[StreamAppend]:
        """The eviction of the entries working memory holds beyond its capacity, the oldest (none: no write), with
        ``reason``; the working stream's write expects its version ``expected``: one read before the catch-up these
        facts come from, so that an eviction decided on entries another writer has evicted or withdrawn since
        fails (``ConcurrencyError``) instead of evicting more."""
        if self.capacity is None:
            return []
        return self._evict(tenant, self._oldest_beyond(self.facts.working_memory(tenant)), set(), stamp, reason=reason, expected=expected)

    def _oldest_beyond(self, fifo: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
        """The entries of ``fifo`` (oldest first) beyond the capacity: its oldest."""
        return fifo[: max(0, len(fifo) - self.capacity)]

    def _evict(
        self, tenant: str, leaving: list[tuple[str, str, str]], new: set[str], stamp: str, *, reason: str = "", expected: ExpectedVersion = ANY
    ) -> list[StreamAppend]:
        """The eviction of ``leaving`` (``(binding, memory_id, memory_type)``, none: no write), then the archive of each
        ``WorkingMemory`` item among them: such an item lives only in working memory (a deleted one stays deleted).
        ``new``: memories the same batch adds, archived whatever the log says of them."""
        if not leaving:
            return []
        evicted = c.WorkingMemoryEvicted(
            bindings=tuple(b for b, _, _ in leaving), memory_ids=tuple(m for _, m, _ in leaving), capacity=self.capacity, reason=reason
        )
        writes = self.write(tenant, [evicted], expected)
        for _, memory_id, memory_type in leaving:
            if memory_type != MemoryType.WORKING.value:
                continue
            expected = ANY
            if memory_id not in new:
                try:
                    state = load(self.store, tenant, memory_id)
                except NotFound:
                    continue
                if state.status != Status.ACTIVATED.value:
                    continue
                expected = state.version
            writes.append(
                StreamAppend(
                    c.memory_stream(memory_id),
                    [c.MemoryArchived(memory_id=memory_id, updated_at=stamp, reason=EVICTED)],
                    expected,
                )
            )
        return writes

    def back(self, tenant: str, entries: list[c.WorkingEntry], reason: str, stamp: str, *, leaving: Iterable[str] = ()) -> list[StreamAppend]:
        """``entries`` put back at their places, those the capacity holds (an entry older than the ``capacity``
        newest would have been evicted first), and the oldest entries beyond the capacity then evicted.
        ``leaving``: bindings of live entries the same batch withdraws first (they hold no place). A memory a
        forget erased stays out, as the forget withdrew it: its entry would recall nothing but take a place."""
        entries = [e for e in entries if not erased_through(self.store, tenant, e.memory_id)]
        if not entries:
            return []
        if self.capacity is None:
            return self.write(tenant, [c.WorkingMemoryRestored(entries=tuple(sorted(entries, key=fifo_order)), reason=reason)])
        gone = set(leaving)
        fifo = sorted([*(e for e in self.facts.working_entries(tenant) if e.binding not in gone), *entries], key=fifo_order)
        cut = max(0, len(fifo) - self.capacity)
        back = [e for e in fifo[cut:] if e in entries]
        if not back:
            return []
        leaving = [(e.binding, e.memory_id, e.memory_type) for e in fifo[:cut] if e not in entries]
        evicted = self._evict(tenant, leaving, set(), stamp)  # on the working stream, then the archives it causes
        restored = c.WorkingMemoryRestored(entries=tuple(back), reason=reason)
        return self.write(tenant, [restored, *(evicted[0].events if evicted else ())]) + evicted[1:]

    def evicted_mentions(self, tenant: str, writes: Iterable[StreamAppend], before: Iterable[StreamAppend] = ()) -> list[c.EdgeUnlinked]:
        """The unlinking of the mention edges of the ``WorkingMemory`` items ``writes`` archive as evicted; ``before``:
        the batch's writes ahead of it, whose edge events count (a revert's relinks, a restore's)."""
        archived = {e.memory_id for w in writes for e in w.events if isinstance(e, c.MemoryArchived) and e.reason == EVICTED}
        if self.mentions is None or not archived:
            return []
        live = {e.edge_id: e for e in self.mentions.live(tenant, sorted(archived))}
        for event in (e for w in before if w.stream_id == c.edges_stream(tenant) for e in w.events):
            closed, opened = c.edge_changes(event)
            for edge in closed:
                live.pop(edge.edge_id, None)
            live.update((e.edge_id, e) for e in opened if e.source in archived and self.mentions.owns(e))
        return [c.EdgeUnlinked(edge=e, reason=UNLINKED_EVICTED) for e in live.values()]

    # -- following a memory's status ------------------------------------------------------------------

    def leaving(self, tenant: str, memory_ids: Iterable[str], reason: str, *, judge: str | None = None) -> list:
        """The withdrawal of the live entries of ``memory_ids`` (none: no event)."""
        ids = set(memory_ids)
        gone = [e for e in self.facts.working_entries(tenant) if e.memory_id in ids] if ids else []
        if not gone:
            return []
        return [c.WorkingMemoryWithdrawn(bindings=tuple(e.binding for e in gone), memory_ids=tuple(e.memory_id for e in gone), reason=reason, judge=judge)]

    def merged(self, tenant: str, source_ids: Iterable[str], merged_id: str, memory_type: str, *, judge: str | None = None) -> list:
        """The sources' entries withdrawn, and the merged memory in the place of the newest of them."""
        events = self.leaving(tenant, source_ids, f"merged into {merged_id}", judge=judge)
        if not events:
            return []
        sources = set(source_ids)
        newest = max((e for e in self.facts.working_entries(tenant) if e.memory_id in sources), key=fifo_order)
        entry = c.WorkingEntry(binding=new_ids(1)[0], memory_id=merged_id, memory_type=memory_type, entered_at=newest.entered_at)
        return events + [c.WorkingMemoryRestored(entries=(entry,), reason=f"merged from {', '.join(dict.fromkeys(source_ids))}")]

    def returning(self, tenant: str, memory_id: str, reason: str, stamp: str) -> list[StreamAppend]:
        """The memory's last entry back at its place (see :meth:`back`), if a withdrawal, not the FIFO, took it out."""
        stay = self.facts.working_stay(tenant, memory_id)
        if stay is None or stay[1] is None:
            return []  # never in working memory, or still there
        entry, ended_at = stay
        closing = self.store.read_all(after=ended_at - 1, until=ended_at, tenant=tenant, types=["WorkingMemoryWithdrawn"])
        if not any(entry.binding in r.event.bindings for r in closing):
            return []
        return self.back(tenant, [entry], reason, stamp)

    def following(self, tenant: str, memory_id: str, before: str, after: str, reason: str, stamp: str) -> list[StreamAppend]:
        """The writes that make working memory follow a change of the memory's status from ``before`` to ``after``."""
        active = Status.ACTIVATED.value
        if before == active and after != active:
            return self.write(tenant, self.leaving(tenant, [memory_id], reason))
        if before != active and after == active:
            return self.returning(tenant, memory_id, reason, stamp)
        return []
