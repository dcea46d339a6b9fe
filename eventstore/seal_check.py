"""``verify``'s check that every event opens: each sealed field authenticates under this key store.

The hash chain covers the stored bytes, so it cannot tell a sealed token
moved to another event (and the chain recomputed), nor a key store that is
not the log's (``keys.db`` replaced): both read as errors only when a read
reaches the event. This walks the log as a reader does and names the first
event that does not open. A key that was forgotten is no failure: its
fields read as erased, as everywhere. Nor is a key missing from a key store
that holds no key at all: a copy of the log taken without its keys (an
auditor's) can open nothing, and its chain is all there is to check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from .recorded import PAGE_ROWS
from .errors import KeyMissing, SealBroken, UnknownEventType, UpcastError

if TYPE_CHECKING:
    from .store import EventStore

UNREADABLE = (KeyMissing, SealBroken)
# Not this check's concern (a payload of another schema, a type this process does not know): passed over.
UNDECODED = (UnknownEventType, UpcastError, msgspec.DecodeError, msgspec.ValidationError)


def first_unopened(store: EventStore, from_: int = 1, to: int | None = None) -> tuple[int, str] | None:
    """The position and reason of the first event in ``from_..to`` whose sealed fields do not open, or None.

    ``from_..to`` must be gap-free (``verify`` has walked it): a page that fails
    is read again one event at a time, stepping over events that do not decode.
    """
    if not store.sealer.keys.holds_keys():
        return None
    after = max(0, from_ - 1)
    while True:
        try:
            for batch in store.iter_all(after, until=to):
                after = batch[-1].position
            return None
        except UNREADABLE + UNDECODED:
            pass
        for _ in range(PAGE_ROWS):  # the failing page, one event at a time from the last good one
            try:
                batch = store.read_all(after=after, limit=1, until=to)
            except UNREADABLE as exc:
                return after + 1, f"the event does not open: {exc}"
            except UNDECODED:
                after += 1
                continue
            if not batch:
                return None
            after = batch[0].position
