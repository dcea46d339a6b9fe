"""The event-store contract, run against PostgreSQL (a private test cluster)."""

from __future__ import annotations

from mnemolog.eventstore import EventStore
from tests.eventstore.contract import EventStoreContract
from tests.pg import fresh_database_url


class TestPostgresContract(EventStoreContract):
    def make_store(self, tmp_path) -> EventStore:
        return EventStore.open(fresh_database_url())
