"""``dropped_at``: the position of a tenant's last drop, asked by every command and aggregate load.

It must cost the same however many events the tenant has: the drop is found
in the tenant's own stream through the stream index, not by walking the
tenant's events. The cost is counted in SQLite virtual-machine steps (a
progress handler on every read connection), never in time.
"""

from __future__ import annotations

import sqlite3

import pytest
from sqlalchemy import event

from mnemolog.eventstore import EventStore, StreamAppend
from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.aggregate import dropped_at, load
from mnemolog.eventstore.model import MemoryContent, NotFound

from ..projections.support import Log


@pytest.fixture
def store(tmp_path):
    s = EventStore.open(tmp_path)
    yield s
    s.close()


def _add_many(store: EventStore, tenant: str, n: int, prefix: str) -> None:
    writes = [
        StreamAppend(c.memory_stream(f"{prefix}{i}"), [c.MemoryAdded(memory_id=f"{prefix}{i}", content=MemoryContent(memory=f"fact {i}"), created_at="2024-01-01T00:00:00Z")])
        for i in range(n)
    ]
    for start in range(0, n, 50):  # many appends: many spans of the tenant
        store.append_batch(writes[start : start + 50], tenant=tenant)


class _Steps:
    """SQLite VM steps of the reads of ``store`` while counting."""

    def __init__(self, store: EventStore):
        self.steps = 0
        store.recorder.reader.dispose()  # every read connection from now on counts
        event.listen(store.recorder.reader, "connect", self._on_connect)

    def _on_connect(self, dbapi_conn: sqlite3.Connection, _record) -> None:
        dbapi_conn.set_progress_handler(self._tick, 1)

    def _tick(self) -> int:
        self.steps += 1
        return 0

    def of(self, fn) -> int:
        before = self.steps
        fn()
        return self.steps - before


def test_the_cost_of_dropped_at_does_not_grow_with_the_tenants_events(store):
    log = Log(store)
    _add_many(store, "t", 50, "a")
    drop = log.drop("t")
    _add_many(store, "t", 50, "b")
    steps = _Steps(store)
    small = steps.of(lambda: dropped_at(store, "t"))
    _add_many(store, "t", 2000, "c")
    _add_many(store, "other", 500, "d")
    large = steps.of(lambda: dropped_at(store, "t"))
    assert dropped_at(store, "t") == drop
    assert small > 0
    assert large <= small + 20, (small, large)


def test_the_last_drop_of_the_tenant_counts_and_other_tenants_drops_do_not(store):
    log = Log(store)
    assert dropped_at(store, "t") == 0
    first = log.drop("t")
    log.add("m1", "before the second drop")
    second = log.drop("t")
    log.drop("u")
    log.add("m2", "after it")
    assert dropped_at(store, "t") == second > first
    with pytest.raises(NotFound):
        load(store, "t", "m1")
    assert load(store, "t", "m2").content.memory == "after it"
    assert dropped_at(store, "nobody") == 0
