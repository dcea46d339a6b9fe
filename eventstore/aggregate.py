"""A memory's current state, folded from its own stream.

Command handlers validate against this, never against a projection: the
stream is the truth and reading one stream is an indexed lookup. A memory's
version is its stream version: every change, content or status, is one.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import msgspec

from . import catalogue as c
from .erased import erased_recorded, erased_through
from .model import CONTENT_FIELDS, MemoryContent, NotFound, Status
from .recorder import utc_stamp
from .store import EventStore, RecordedEvent
from .stream_folds import folds_of


class MemoryVersion(msgspec.Struct, frozen=True):
    version: int
    position: int
    event_type: str
    content: MemoryContent
    status: str
    reason: str
    recorded_at: str
    actor: str | None
    correlation_id: str | None
    #: The content fields (and ``status``) this version changed from the one before it (none for the first).
    changed: tuple[str, ...] = ()


class MemoryState(msgspec.Struct):
    memory_id: str
    tenant: str
    version: int = 0
    status: str = Status.ACTIVATED.value
    content: MemoryContent | None = None
    created_at: str = ""
    updated_at: str = ""
    working_binding: str | None = None
    merged_into: str | None = None
    superseded_by: str | None = None
    evolve_to: str | None = None
    versions: list[MemoryVersion] = []

    def at(self, version: int) -> MemoryVersion:
        if not 1 <= version <= len(self.versions):
            raise NotFound("version", f"{self.memory_id}@{version}")
        return self.versions[version - 1]


def fold(memory_id: str, events: Iterable[RecordedEvent], state: MemoryState | None = None) -> MemoryState | None:
    """The memory's state after ``events``, folded into ``state`` (changed in place; None: from nothing)."""
    for recorded in events:
        event = recorded.event
        if state is None:
            state = MemoryState(memory_id=memory_id, tenant=recorded.tenant)
        reason = ""
        if isinstance(event, (c.MemoryAdded, c.MemoriesMerged)):
            state.content = event.content
            state.created_at = state.updated_at = event.created_at
            state.status = Status.ACTIVATED.value
            if isinstance(event, c.MemoryAdded):
                state.working_binding = event.working_binding
            else:
                reason = "merged from " + ", ".join(event.source_ids)
                if (decision := c.decision_of(event)) is not None:
                    reason += f" ({decision.judge}: {decision.reason})"
        elif isinstance(event, c.MemoryUpdated):
            state.content = event.content
            state.updated_at = event.updated_at
            reason = event.reason or "updated " + ", ".join(event.changed)
        elif isinstance(event, c.MemoryRolledBack):
            state.content = event.content
            state.status = event.status
            state.updated_at = event.updated_at
            reason = event.reason or f"rolled back to version {event.to_version}"
        elif isinstance(event, c.MemoryMergedInto):
            state.status = Status.ARCHIVED.value
            state.merged_into = event.merged_into
            state.updated_at = event.updated_at
            reason = f"merged into {event.merged_into}"
        elif isinstance(event, c.MemorySuperseded):
            state.status = Status.ARCHIVED.value
            state.superseded_by = event.superseded_by
            state.updated_at = event.updated_at
            reason = f"conflict: superseded by {event.superseded_by}"
            if (decision := c.decision_of(event)) is not None:
                reason += f" ({decision.judge}: {decision.reason})"
        elif isinstance(event, c.MemoryArchived):
            state.status = Status.ARCHIVED.value
            state.updated_at = event.updated_at
            reason = event.reason or "archived"
        elif isinstance(event, c.MemorySoftDeleted):
            state.status = Status.DELETED.value
            state.evolve_to = event.evolve_to
            state.updated_at = event.updated_at
            reason = event.reason or "deleted"
        elif isinstance(event, c.MemoryRestored):
            state.status = Status.ACTIVATED.value
            state.updated_at = event.updated_at
            reason = event.reason or "restored"
        else:
            continue
        if state.status == Status.ACTIVATED.value:
            state.merged_into = state.superseded_by = None
        state.version = recorded.stream_version
        previous = state.versions[-1] if state.versions else None
        if previous is None:
            changed: tuple[str, ...] = ()
        elif isinstance(event, c.MemoryUpdated) and state.content.erased:
            # Erased, the versions' contents read alike; the update's event still names the fields it changed (no personal data).
            changed = tuple(f for f in CONTENT_FIELDS if f in event.changed)
        else:
            changed = changed_fields(previous.content, previous.status, state.content, state.status)
        state.versions.append(
            MemoryVersion(
                version=recorded.stream_version,
                position=recorded.position,
                event_type=recorded.type,
                content=state.content,
                status=state.status,
                reason=reason,
                recorded_at=utc_stamp(recorded.recorded_at),  # as the log stores it and every other answer gives it
                actor=recorded.metadata.actor,
                correlation_id=recorded.metadata.correlation_id,
                changed=changed,
            )
        )
    return state


def changed_fields(before: MemoryContent, before_status: str, after: MemoryContent, after_status: str) -> tuple[str, ...]:
    """The content fields that differ between two versions, in their order, then ``status`` if it differs."""
    if before is after:
        return ("status",) if before_status != after_status else ()
    fields = tuple(f for f, a, b in zip(CONTENT_FIELDS, _astuple(before), _astuple(after)) if a != b)  # the Struct's order
    return fields + ("status",) if before_status != after_status else fields


def dropped_at(store: EventStore, tenant: str) -> int:
    """The position of the tenant's last drop (0 if never dropped): what came before it is gone.

    A drop is appended to the tenant's own stream (``tenant-<tenant>``, which
    holds only drops and revert markers), so this is an indexed read of a
    short stream, not a scan of the tenant's events: every command and every
    aggregate load asks it.
    """
    drops = store.read_all(stream_id=c.tenant_stream(tenant), tenant=tenant, types=["TenantDropped"])
    return drops[-1].position if drops else 0


def load(store: EventStore, tenant: str, memory_id: str, *, until: int | None = None) -> MemoryState:
    """The memory's state (as of position ``until``), or :class:`NotFound` for other tenants too.

    A memory of a tenant that was dropped after it was created is not found either. At the head, a long
    stream's state is continued from the one this process folded last (see :mod:`.stream_folds`).
    """
    # A version a forget erased reads erased even when a key that still exists sealed it (the memory given its
    # subject later, a topic quoting it): no command writes its text back (see .erased).
    erased_to = erased_through(store, tenant, memory_id)

    def step(state: MemoryState | None, events: Sequence[RecordedEvent]) -> MemoryState | None:
        if erased_to and events[0].tenant == tenant:
            events = [erased_recorded(e) if e.position < erased_to else e for e in events]
        return fold(memory_id, events, state)

    stream = c.memory_stream(memory_id)
    if until is None:
        state, first = folds_of(store).fold(tenant, stream, step, _copy_state, _weight, basis=erased_to)
    else:
        events = [e for e in store.read_stream(stream) if e.position <= until]
        state, first = (step(None, events), events[0]) if events else (None, None)
    if state is None or state.tenant != tenant or first.position < dropped_at(store, tenant):
        raise NotFound("memory", memory_id)
    return state


def _copy_state(state: MemoryState) -> MemoryState:
    """A copy that folding more events into leaves ``state`` as it is (its versions are frozen)."""
    return msgspec.structs.replace(state, versions=list(state.versions))


def _weight(events: Sequence[RecordedEvent]) -> int:
    """About the bytes a memory's versions from ``events`` hold: each version's whole content (text,
    background, properties, embedding, …), three times its JSON, as Python objects take more room than
    JSON does (a float 32 bytes, a small string or a dict's entry tens)."""
    return sum(300 + 3 * len(_encode(getattr(recorded.event, "content", None))) for recorded in events)


_encode = msgspec.json.Encoder().encode
_astuple = msgspec.structs.astuple
