"""mnemolog's write side: the append-only, hash-chained event log.

>>> from eventstore import EventStore
>>> store = EventStore.open("./data")
"""

from .chain import VerifyResult
from .errors import (
    AppendOnlyViolation,
    ConcurrencyError,
    EventStoreError,
    IdempotencyConflict,
    ImportRefused,
    UnknownEventType,
    UpcastError,
)
from .events import DomainEvent, Metadata, upcaster
from .store import ANY, NO_STREAM, AppendResult, Digest, EventStore, RecordedEvent, StreamAppend

__all__ = [
    "ANY",
    "NO_STREAM",
    "AppendOnlyViolation",
    "AppendResult",
    "ConcurrencyError",
    "Digest",
    "DomainEvent",
    "EventStore",
    "EventStoreError",
    "IdempotencyConflict",
    "ImportRefused",
    "Metadata",
    "RecordedEvent",
    "StreamAppend",
    "UnknownEventType",
    "UpcastError",
    "VerifyResult",
    "upcaster",
]
