"""The event-store contract, run against SQLite files."""

from __future__ import annotations

from mnemolog.eventstore import EventStore
from tests.eventstore.contract import EventStoreContract


class TestSQLiteContract(EventStoreContract):
    def make_store(self, tmp_path) -> EventStore:
        return EventStore.open(tmp_path / "log")


class TestSQLiteURLContract(EventStoreContract):
    """The same log opened by URL, with the faster NORMAL durability."""

    def make_store(self, tmp_path) -> EventStore:
        return EventStore.open(f"sqlite:///{tmp_path / 'by-url' / 'events.db'}", synchronous="NORMAL")
