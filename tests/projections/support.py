"""Helpers shared by the projector tests: a writer of real catalogue events."""

from __future__ import annotations

from mnemolog.eventstore import ANY, NO_STREAM, EventStore, StreamAppend
from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.model import MemoryContent

STAMP = "2024-01-01T00:00:00Z"


class Log:
    """Real catalogue events appended to a real store; positions returned."""

    def __init__(self, store: EventStore):
        self.store = store

    def add(self, memory_id: str, text: str, *, tenant: str = "t", created_at: str = STAMP, **content) -> int:
        event = c.MemoryAdded(memory_id=memory_id, content=MemoryContent(memory=text, **content), created_at=created_at)
        return self._append(memory_id, event, tenant, NO_STREAM)

    def update(self, memory_id: str, text: str, *, tenant: str = "t", updated_at: str = STAMP, **content) -> int:
        event = c.MemoryUpdated(
            memory_id=memory_id, content=MemoryContent(memory=text, **content), changed=("memory",), updated_at=updated_at
        )
        return self._append(memory_id, event, tenant)

    def archive(self, memory_id: str, *, tenant: str = "t") -> int:
        return self._append(memory_id, c.MemoryArchived(memory_id=memory_id, updated_at=STAMP), tenant)

    def drop(self, tenant: str) -> int:
        event = c.TenantDropped(backup="none", events_backed_up=0)
        return self.store.append_batch([StreamAppend(c.tenant_stream(tenant), [event])], tenant=tenant).last_position

    def _append(self, memory_id, event, tenant, expected=ANY) -> int:
        write = StreamAppend(c.memory_stream(memory_id), [event], expected)
        return self.store.append_batch([write], tenant=tenant).last_position
