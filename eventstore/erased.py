"""The memories a forget erased, for the reads that show the log's events themselves.

A forget destroys the keys that sealed its subject's memories, so their
events read as erased everywhere. Its ``SubjectForgotten`` also names each
memory of the subject, and every projection erases those memories whole,
every version (but those of a memory given another subject since, from its
first version of that one: ``kept_from``). A version sealed with a key that still exists (a memory given
its subject by a later version, or written unsealed, with encryption off)
would still show its text where the events themselves are read: ``mnemolog
log``, ``GET /v1/events`` and its live stream, the explorer's correlation
page, and the state a command loads (``history``, and an update or rollback
that would write it back). Those pass each event through
:meth:`ErasedMemories.mask`, which erases a memory's events written before
the last forget that names it, as the projections show them. A ``MENTIONS``
edge is its memory's (the edge's source, see
:func:`~mnemolog.eventstore.commands.mentions.with_subjects`): its alias and
evidence read erased where a later forget names that memory, or destroys the
key of the subject the edge was recorded under (none: the tenant's), as the
graph projection erases them. The entities and documents of a tenant (which
its own key seals) read erased before a forget of that key (``@tenant``), as
the entity projection erases them all, those written unsealed too. A replay
of the projections reads the log so too (:meth:`ErasedMemories.masked`): a
rebuild after the forget never projects such a version's text, not even for
the moment until the forget's event erases it.

What a forget erases but the log keeps in plaintext (no key sealed it) the
forget names (:func:`plaintext_erased`), and ``verify`` finds for every
forget in the log (:func:`plaintext_kept`).
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from typing import Any, AsyncIterator, Callable, Iterable, Sequence

import msgspec

from . import catalogue as c
from . import catalogue_graph as g
from .events import Metadata
from .keystore import TENANT_SUBJECT
from .recorded import RecordedEvent, decode_rows
from .sealed_keys import sealed_keys
from .sealing import each_struct, erase, erase_owner, is_sealed, plan_of

__all__ = ["ErasedMemories", "erase_where", "erased_recorded", "erased_through", "holds_plaintext", "late_forget", "late_forgets", "live_events", "plaintext_erased", "plaintext_kept", "plaintext_positions", "sealed_meanwhile", "stored_events"]


def holds_plaintext(event: Any, which: Callable[[Any], bool] | None = None) -> bool:
    """Whether ``event`` as stored (unopened, see ``EventStore.read_stored``) holds a personal value in plaintext:
    a Struct with personal fields (of those ``which`` is true for, when given) whose carrier is no token and whose
    values are not all empty (written with sealing off, or before it was on). No key sealed it, so no forget
    erases it from the log: the reads and the projections show it erased once a forget erases it, and the
    forget names the event."""
    plan = plan_of(type(event))
    if plan is None:
        return False
    found: list[str] = []

    def visit(slot: Any, owner: Any, index: int | None) -> Any:
        if (which is None or which(owner)) and not is_sealed(getattr(owner, slot.group.carrier)) and any(map(bool, slot.group.values(owner))):
            found.append(slot.path)
        return owner

    each_struct(event, plan, visit)
    return bool(found)


def stored_events(store, tenant: str, memory_ids: Iterable[str], until: int | None = None) -> list[RecordedEvent]:
    """The events of ``memory_ids`` (up to ``until``) as stored, unopened, in position order: their streams read
    together (see ``SQLRecorder.select_streams``), in one transaction."""
    recorder = store.recorder
    with recorder.reader.begin() as conn:
        return decode_rows(recorder.select_streams([c.memory_stream(memory_id) for memory_id in memory_ids], tenant=tenant, until=until, conn=conn))


def plaintext_positions(store, tenant: str, memory_ids: Iterable[str], until: int | None = None) -> tuple[int, ...]:
    """The positions of the events of ``memory_ids`` (up to ``until``) that hold personal fields in plaintext
    (:func:`holds_plaintext`), oldest first."""
    return tuple(sorted(r.position for r in stored_events(store, tenant, memory_ids, until) if holds_plaintext(r.event)))


def plaintext_kept(store, start: int = 1, end: int | None = None, *, tenant: str | None = None) -> tuple[int, ...]:
    """The events from ``start`` to ``end`` that the log keeps in plaintext though a forget erased them (what
    ``verify`` reports): found in the log for every ``SubjectForgotten`` in it, recorded before its
    ``plaintext_positions`` existed or imported from another log too; ``tenant``'s alone when given (what
    one tenant's key may be told: no other tenant's forgets)."""
    by_tenant: dict[str, _Forgets] = {}
    for recorded in store.read_all(types=["SubjectForgotten"], tenant=tenant):
        by_tenant.setdefault(recorded.tenant, _Forgets()).add(recorded)
    found = [p for tenant, forgets in by_tenant.items() for p in _kept(store, tenant, forgets, forgets.position)]
    return tuple(p for p in sorted(found) if p >= start and (end is None or p <= end))


def plaintext_erased(store, tenant: str, subject: str | None, memory_ids: Iterable[str], kept_from: dict[str, int] | None = None) -> tuple[int, ...]:
    """The events a forget about to be recorded erases that hold personal fields in plaintext, oldest first: the
    events of ``memory_ids`` (before ``kept_from``'s position for those it names), the mentions it erases (of those
    memories, or recorded under ``subject``; ``None``: none by subject) and, for the tenant's own key (``""``), its
    entities and documents (see :class:`ErasedMemories`)."""
    head = store.last_position()
    pending = _Forgets()
    pending.position = head + 1
    pending.through = {memory_id: (kept_from or {}).get(memory_id, head + 1) for memory_id in memory_ids}
    if subject is not None:
        pending.subjects[subject] = head + 1
    return _kept(store, tenant, pending, head)


def _kept(store, tenant: str, forgets: "_Forgets", until: int) -> list[int]:
    """The positions (up to ``until``) of the tenant's events that hold personal fields in plaintext which
    ``forgets`` erase: the events of the memories they name, and the tenant's mentions (its edge stream, read by
    its index), entities and documents (for a forget of its own key: a walk of the tenant's events)."""
    recorder = store.recorder
    with recorder.reader.begin() as conn:
        stored = decode_rows(recorder.select_events(conn=conn, tenant=tenant, until=until, stream_id=c.edges_stream(tenant), types=c.EDGE_EVENT_TYPES))
        if TENANT_SUBJECT in forgets.subjects:
            stored += decode_rows(recorder.select_events(conn=conn, tenant=tenant, until=until, types=_TENANT_TYPES))
    stored += stored_events(store, tenant, forgets.through, until)
    found = []
    for recorded in stored:
        which = _erasing(forgets, recorded.position, recorded.event)
        if which is not None and holds_plaintext(recorded.event, None if which is _whole else which):
            found.append(recorded.position)
    return sorted(found)


def sealed_meanwhile(store, tenant: str, subject: str, key_ids: Iterable[str], after: int, until: int, listed: Iterable[str]) -> tuple[str, ...]:
    """The memories another process wrote with the subject's retired keys between a forget's read of the facts
    (``after``) and its event (``until``), but those ``listed``: the forget names them in a second event (and an
    open of the store does, for a forget killed in between: ``EventStore.finish_forgets``). (Also what the keys
    sealed before a drop of the tenant, which the projections no longer hold.)

    Such a writer sealed with a key it held just before the retirement, so the memory is unreadable once
    the keys are destroyed, and it may have projected the memory's plaintext, which only an event naming
    the memory erases. A memory sealed with the subject's new key was written after the forget began: it
    stays, as every later one does. A memory of the subject written unsealed meanwhile (by a process with
    sealing off) is named too: no key says it came after the forget began, and it is in the log before it."""
    keys, skip = set(key_ids), set(listed)
    found: dict[str, None] = {}
    for recorded in store.read_stored(after, tenant=tenant, until=until):
        event = recorded.event
        memory_id = getattr(event, "memory_id", None)
        if type(memory_id) is str and memory_id not in skip and (
            any(s == subject and k in keys for s, k in sealed_keys(event)) or _unsealed_of(event, subject)
        ):
            found[memory_id] = None
    return tuple(found)


def _unsealed_of(event: Any, subject: str) -> bool:
    """Whether ``event`` (as stored) is a version of a memory of the named ``subject`` holding its personal
    fields in plaintext."""
    content = getattr(event, "content", None)
    return subject != TENANT_SUBJECT and getattr(content, "subject", None) == subject and holds_plaintext(event)


def late_forgets(store, forgets: list[RecordedEvent], pending: set[str]) -> list[tuple[str, Any, Any]]:
    """The second ``SubjectForgotten`` each of ``forgets`` naming a key of ``pending`` (still retired) owes, as
    ``(tenant, event, metadata)``: naming the memories another process sealed with its keys after it read the
    subject's memories and before its event, where the forget was killed before it named them itself
    (unnamed, their plaintext stayed in the projections). ``EventStore.finish_forgets`` appends them before
    it destroys the keys."""
    owed = []
    for r in forgets:
        event = r.event
        if not pending & set(event.key_ids):
            continue
        named = {m for f in forgets if f.tenant == r.tenant and f.event.subject == event.subject for m in f.event.memory_ids}
        late = sealed_meanwhile(store, r.tenant, event.subject, event.key_ids, event.checked_through, r.position - 1, named)
        if late:
            finished = late_forget(store, r.tenant, event.subject, event.key_ids, late, event.reason)
            owed.append((r.tenant, finished, Metadata(actor=r.metadata.actor, correlation_id=r.metadata.correlation_id)))
    return owed


def late_forget(store, tenant: str, subject: str, key_ids: Iterable[str], late: tuple[str, ...], reason: str) -> Any:
    """A forget's second ``SubjectForgotten``, naming the memories ``late`` sealed meanwhile with its keys (see
    :func:`sealed_meanwhile`), with the events of theirs the log keeps in plaintext."""
    return c.SubjectForgotten(
        subject=subject, key_ids=tuple(key_ids), memory_ids=late, reason=reason, plaintext_positions=plaintext_erased(store, tenant, None, late)
    )


def erased_recorded(recorded: RecordedEvent) -> RecordedEvent:
    """``recorded`` with its event as it reads once erased (itself when it has no personal fields)."""
    event = erase(recorded.event)
    return recorded if event is recorded.event else msgspec.structs.replace(recorded, event=event)


def erase_where(event: Any, erased: Callable[[Any], bool]) -> Any:
    """``event`` with each of its Structs with personal fields for which ``erased`` is true read as erased (itself
    when there is none)."""
    plan = plan_of(type(event))
    if plan is None:
        return event
    return each_struct(event, plan, lambda slot, owner, index: erase_owner(slot, owner) if erased(owner) else owner)


_EDGE_EVENTS = frozenset(c.EdgeEvent.__args__)
#: The events the tenant's own key seals whole (entities and documents): erased by a forget of that key.
_TENANT_EVENTS = frozenset(cls for cls in g.KnowledgeEvent.__args__ if plan_of(cls) is not None)
_TENANT_TYPES = tuple(cls.__name__ for cls in _TENANT_EVENTS)
_ERASABLE = _EDGE_EVENTS | _TENANT_EVENTS


class _Forgets:
    """One tenant's forgets as far as read: the last position of its stream read, by memory id the position of
    the last forget naming it, and by subject (``""``: the tenant's own key) the position of its last forget."""

    def __init__(self) -> None:
        self.position = 0
        self.through: dict[str, int] = {}
        self.subjects: dict[str, int] = {}
        self.lock = threading.Lock()

    def add(self, recorded: RecordedEvent) -> None:
        """Take in the tenant's next ``SubjectForgotten``."""
        event = recorded.event
        for memory_id in event.memory_ids:  # a memory given another subject since keeps its events from then on
            self.through[memory_id] = max(self.through.get(memory_id, 0), event.erased_before(memory_id, recorded.position))
        self.subjects[recorded.event.subject] = recorded.position
        self.position = max(self.position, recorded.position)

    def copy(self) -> "_Forgets":
        """A copy to read without the lock (taken under it)."""
        copied = _Forgets()
        copied.position, copied.through, copied.subjects = self.position, dict(self.through), dict(self.subjects)
        return copied


_by_store: "weakref.WeakKeyDictionary[Any, dict[str, _Forgets]]" = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _forgets(store, tenant: str) -> _Forgets:
    """``tenant``'s forgets, up to date: what this process has not read of the tenant's stream yet is read now
    (an indexed read of a short stream, new events only: a command loading a memory asks it)."""
    with _lock:
        tenants = _by_store.setdefault(store, {})
        known = tenants.get(tenant)
        if known is None:
            known = tenants[tenant] = _Forgets()
    with known.lock:
        for recorded in store.read_all(known.position, stream_id=c.tenant_stream(tenant), tenant=tenant, types=["SubjectForgotten"]):
            known.add(recorded)
        return known


def erased_through(store, tenant: str, memory_id: str) -> int:
    """The position of the last forget naming the memory (0: none): its events before it read erased."""
    return _forgets(store, tenant).through.get(memory_id, 0)


def _whole(owner: Any) -> bool:
    """Every Struct of the event: what :func:`_erasing` answers for an event erased whole."""
    return True


def _erasing(forgets: _Forgets, position: int, event: Any) -> Callable[[Any], bool] | None:
    """What of ``event`` (recorded at ``position``) ``forgets`` erase: ``None`` nothing, :func:`_whole` all of it
    (an event of a memory a later forget names; an entity's or document's, before a forget of the tenant's own
    key), or which of its edges (the mentions a later forget erases)."""
    if forgets.position <= position:
        return None  # no forget after it: the hot path of a replay
    kind = type(event)
    memory_id = getattr(event, "memory_id", None)
    if type(memory_id) is not str and kind not in _ERASABLE:
        return None  # nothing a forget erases
    if kind in _EDGE_EVENTS:
        return lambda edge: _erases_mention(forgets, position, edge)
    if kind in _TENANT_EVENTS:
        return _whole if forgets.subjects.get(TENANT_SUBJECT, 0) > position else None
    return _whole if forgets.through.get(memory_id, 0) > position else None


def _erases_mention(forgets: _Forgets, position: int, edge: c.EdgeRecord) -> bool:
    """Whether one of ``forgets`` after ``position`` erases ``edge``'s alias and evidence (a mention with them,
    as recorded there): one naming its memory, or destroying the key of its subject (none: the tenant's)."""
    if not edge.sealable():
        return False
    return forgets.through.get(edge.source, 0) > position or forgets.subjects.get(edge.subject or TENANT_SUBJECT, 0) > position


class ErasedMemories:
    """What the reads of the log show of memories a forget named: each event of one written before the last
    forget naming it, and each mention of one (or recorded under a subject whose key a forget destroyed) before
    that forget, erased. Live reads take in the forgets recorded since (:meth:`refresh`)."""

    def __init__(self, store):
        self.store = store
        self._tenants: dict[str, _Forgets] = {}  # the forgets of each tenant read so far

    @classmethod
    def of(cls, store, tenant: str | None = None) -> "ErasedMemories":
        """One for ``store``, with ``tenant``'s forgets read now (none is read later for a read that must not wait)."""
        erased = cls(store)
        if tenant is not None:
            erased.read(tenant)
        return erased

    def read(self, tenant: str) -> _Forgets:
        """The tenant's forgets, read once."""
        found = self._tenants.get(tenant)
        if found is None:
            known = _forgets(self.store, tenant)
            with known.lock:
                found = self._tenants[tenant] = known.copy()
        return found

    def refresh(self) -> None:
        """Take in the forgets recorded since each tenant's were read: a live read sends events it read ahead (see
        :func:`live_events`), and one a forget erased meanwhile, in this process or another, must not leave with its
        text."""
        for tenant, known in list(self._tenants.items()):
            fresh = _forgets(self.store, tenant)
            with fresh.lock:
                if fresh.position > known.position:
                    self._tenants[tenant] = fresh.copy()

    def event(self, tenant: str, position: int, event: Any) -> Any:
        """``event`` as the reads of the log show it: erased when a later forget names its memory, or (an
        entity's or document's) destroys the tenant's own key; an edge event with those of its mentions erased
        that a later forget erases (itself when nothing of it is erased)."""
        which = _erasing(self.read(tenant), position, event)
        if which is None:
            return event
        return erase(event) if which is _whole else erase_where(event, which)

    def mask(self, recorded: RecordedEvent) -> RecordedEvent:
        """``recorded`` as the reads of the log show it (see :meth:`event`)."""
        event = self.event(recorded.tenant, recorded.position, recorded.event)
        return recorded if event is recorded.event else msgspec.structs.replace(recorded, event=event)

    def masked(self, batch: list[RecordedEvent]) -> list[RecordedEvent]:
        """``batch`` with :meth:`mask` applied to each event (itself when none is erased).

        A replay of the projections reads its batches so: the events of a
        memory a later forget names (and their mentions) project no text,
        whether a destroyed key sealed them or they were written in plaintext
        (which no key can erase from the log), as the forget left the
        projections."""
        out = batch
        for i, recorded in enumerate(batch):
            masked = self.mask(recorded)
            if masked is not recorded:
                if out is batch:
                    out = list(batch)
                out[i] = masked
        return out


#: How many events a live read hands on at once (:func:`live_events`): the forgets are read again before each part.
LIVE_PART = 100


async def live_events(store, after: int, erased: ErasedMemories, *, tenant: str | None = None, types: Sequence[str] | None = None) -> AsyncIterator[list[RecordedEvent]]:
    """The log's events after ``after`` (``tenant``'s alone when given), as ``store.subscribe_batches`` yields them,
    each as the reads of the log show it (:meth:`ErasedMemories.mask`), in parts of at most :data:`LIVE_PART`.

    The subscription reads and opens up to a thousand events ahead of a slow reader. The forgets are read again
    (in an executor) before each part is handed on, so that no event a forget erased leaves after the forget
    committed, whether it was recorded in this process or another."""
    loop = asyncio.get_running_loop()
    async for batch in store.subscribe_batches(after, tenant=tenant, types=types):
        for start in range(0, len(batch), LIVE_PART):
            part = batch[start : start + LIVE_PART]
            await loop.run_in_executor(None, erased.refresh)
            yield erased.masked(part)
