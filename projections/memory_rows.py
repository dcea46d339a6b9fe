"""Memory events as row transitions with validity intervals.

Every projection of memories keeps one row per state of a memory: the
position that made it true (``valid_from``) and the one that ended it
(``valid_to``, NULL while it holds). This module turns memory events into
those transitions once, so each projector only says how to store a row.

- The head reads ``valid_to IS NULL``.
- ``as_of=P`` reads ``valid_from <= P AND (valid_to IS NULL OR valid_to > P)``.
"""

from __future__ import annotations

import sqlite3
from typing import Iterator, NamedTuple, Sequence

import msgspec

from mnemolog.eventstore import RecordedEvent
from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.model import MemoryContent, Status

_content_encoder = msgspec.json.Encoder()
_content_decoder = msgspec.json.Decoder(MemoryContent)


class MemoryRow(NamedTuple):
    """The state of one memory from ``position`` on."""

    tenant: str
    memory_id: str
    version: int
    position: int
    status: str
    content: MemoryContent
    created_at: str
    updated_at: str
    working_binding: str | None
    content_changed: bool  # False for status-only changes (the text and its vectors stay)


def head_clause(as_of: int | None, alias: str = "") -> tuple[str, tuple]:
    """SQL for "valid at ``as_of``" (or at the head), with its parameters."""
    p = f"{alias}." if alias else ""
    if as_of is None:
        return f"{p}valid_to IS NULL", ()
    return f"{p}valid_from <= ? AND ({p}valid_to IS NULL OR {p}valid_to > ?)", (as_of, as_of)


def known_end(valid_to: int | None, as_of: int | None) -> int | None:
    """``valid_to`` as a read ``as_of`` a position knows it: an end after that position is not known then (open)."""
    return valid_to if as_of is None or valid_to is None or valid_to <= as_of else None


class Previous(NamedTuple):
    content: MemoryContent
    created_at: str
    working_binding: str | None
    status: str


def transitions(
    events: Sequence[RecordedEvent],
    previous: "callable[[str, str], Previous | None]",
) -> Iterator[MemoryRow]:
    """Yield the new row each memory event opens.

    ``previous(tenant, memory_id)`` returns the memory's current row data
    from the caller's own table (for events that change only the status).
    Rows opened earlier in the same batch are remembered here, so callers
    need not flush between events.
    """
    pending: dict[tuple[str, str], Previous] = {}
    for recorded in events:
        event = recorded.event
        if not isinstance(event, c.MemoryEvent.__args__):
            continue
        key = (recorded.tenant, event.memory_id)
        if isinstance(event, (c.MemoryAdded, c.MemoriesMerged)):
            binding = event.working_binding if isinstance(event, c.MemoryAdded) else None
            before = Previous(event.content, event.created_at, binding, Status.ACTIVATED.value)
            content, status, updated, changed = event.content, Status.ACTIVATED.value, event.created_at, True
        else:
            before = pending.get(key) or previous(*key)
            if before is None:
                continue  # a stream this projection never saw (e.g. a dropped tenant's)
            if isinstance(event, (c.MemoryUpdated, c.MemoryRolledBack)):
                content, changed = event.content, event.content != before.content
                status = event.status if isinstance(event, c.MemoryRolledBack) else before.status
            else:
                content, changed = before.content, False
                status = {
                    c.MemoryMergedInto: Status.ARCHIVED.value,
                    c.MemorySuperseded: Status.ARCHIVED.value,
                    c.MemoryArchived: Status.ARCHIVED.value,
                    c.MemorySoftDeleted: Status.DELETED.value,
                    c.MemoryRestored: Status.ACTIVATED.value,
                }[type(event)]
            updated = event.updated_at
            before = Previous(content, before.created_at, before.working_binding, status)
        pending[key] = before
        yield MemoryRow(
            recorded.tenant,
            event.memory_id,
            recorded.stream_version,
            recorded.position,
            status,
            content,
            before.created_at,
            updated,
            before.working_binding,
            changed,
        )


def encode_content(content: MemoryContent) -> str:
    return _content_encoder.encode(content).decode()


def decode_content(text: str | bytes) -> MemoryContent:
    return _content_decoder.decode(text)


def dropped_tenants(events: Sequence[RecordedEvent]) -> list[tuple[int, str]]:
    return [(r.position, r.tenant) for r in events if isinstance(r.event, c.TenantDropped)]


def close_rows(conn: sqlite3.Connection, table: str, tenant: str, memory_id: str, position: int) -> None:
    conn.execute(
        f"UPDATE {table} SET valid_to = ? WHERE tenant = ? AND memory_id = ? AND valid_to IS NULL",
        (position, tenant, memory_id),
    )


#: A forget's memories and the position before which each one's rows are erased (see :func:`erased_rows`).
ERASED = "temp.erased_before"


def erased_rows(conn: sqlite3.Connection, recorded: RecordedEvent) -> str:
    """Load a ``SubjectForgotten``'s memories into :data:`ERASED` (``memory_id`` -> ``position``: the rows of
    versions written before it are erased) and name that table, for joins by its key: a join against
    ``json_each`` of thousands of ids ran as a nested scan, and a forget of 2,000 memories took 8 s. (The joins
    write ``+valid_from``: an index on it would have the planner scan a tenant's rows for each memory.)"""
    conn.execute(f"CREATE TABLE IF NOT EXISTS {ERASED} (memory_id TEXT PRIMARY KEY, position INTEGER NOT NULL)")
    conn.execute(f"DELETE FROM {ERASED}")
    conn.executemany(f"INSERT OR REPLACE INTO {ERASED} (memory_id, position) VALUES (?, ?)", recorded.event.erased_before_each(recorded.position))
    return ERASED
