"""Folded states of long streams, held per process and continued from the log.

A command validates against the state folded from its stream (a memory's, see
:mod:`.aggregate`; an entity's, see :mod:`.commands.entities`). Read and
folded whole for every write, a memory updated thousands of times, or an
entity that thousands of relations start from, would cost each write the
whole of its history. A :class:`StreamFolds` holds the state folded from each
long stream with the stream version it was folded through; a load reads only
the events after that version and folds them into a copy.

What the log's events read as can change without a new event in the stream
itself: a forget erases a subject, a drop ends a tenant. A held state serves
only while

- the caller's ``basis`` is the same (what else its fold depends on: the
  position of the tenant's last drop, or of the last forget naming the
  memory, which the tenant's own stream holds),
- no key this process opened has been forgotten since (another process's
  forget destroys its keys after appending its event: see
  ``KeyStore.forgotten``), and
- the stream's event at the held version is still the one folded (a log
  replaced under a running process);

otherwise the stream is folded again from its start. Nothing is kept on disk,
and a forget drops everything held (:meth:`drop_text`, see
``projections.text_caches``).
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Any, Callable, Hashable, Sequence, TypeVar

from .recorded import RecordedEvent

S = TypeVar("S")

#: Streams shorter than this are read whole: one indexed read of a few rows costs less than holding them.
MIN_EVENTS = 64
#: What a process holds at most, in the units its callers weigh states in (about bytes).
MAX_WEIGHT = 64_000_000


class _Held:
    __slots__ = ("state", "first", "version", "event_id", "token", "weight")

    def __init__(self, state: Any, first: RecordedEvent, last: RecordedEvent, token: tuple, weight: int):
        self.state, self.first, self.token, self.weight = state, first, token, weight
        self.version, self.event_id = last.stream_version, last.event_id


class StreamFolds:
    """The folded states of long streams (see the module docstring); thread-safe."""

    def __init__(self, store: Any, *, min_events: int = MIN_EVENTS, max_weight: int = MAX_WEIGHT):
        self.store = store
        self.min_events = min_events
        self.max_weight = max_weight
        self._lock = threading.Lock()
        self._held: OrderedDict[tuple[str, str], _Held] = OrderedDict()
        self._weight = 0
        self._drops = 0  # how many times drop_text ran: a fold that began before one holds nothing

    def fold(
        self,
        tenant: str,
        stream_id: str,
        step: Callable[[S | None, Sequence[RecordedEvent]], S | None],
        copy: Callable[[S], S],
        weigh: Callable[[Sequence[RecordedEvent]], int],
        basis: Hashable = None,
    ) -> tuple[S | None, RecordedEvent | None]:
        """The state ``step`` folds from the stream's events as ``tenant`` reads them, and the stream's first
        event (``None, None`` for an empty stream).

        ``step(state, events)`` folds ``events`` into ``state`` (``None``: from nothing) and returns it; it may
        change ``state`` in place, which is always a ``copy`` of what is held. ``weigh(events)`` says what
        holding them costs."""
        token = self._token(basis)  # before the read: a change after it shows at the next load
        drops = self._drops
        key = (tenant, stream_id)
        with self._lock:
            held = self._held.get(key)
            if held is not None:
                self._held.move_to_end(key)
        if held is not None and held.token == token:
            events = self.store.read_stream(stream_id, from_version=held.version)
            if events and events[0].event_id == held.event_id:
                if len(events) == 1:
                    return copy(held.state), held.first
                state = step(copy(held.state), events[1:])
                self._hold(key, _Held(copy(state), held.first, events[-1], token, held.weight + weigh(events[1:])), drops)
                return state, held.first
        events = self.store.read_stream(stream_id)
        if not events:
            self._forget(key)
            return None, None
        state = step(None, events)
        if state is not None and len(events) >= self.min_events:
            self._hold(key, _Held(copy(state), events[0], events[-1], token, weigh(events)), drops)
        else:
            self._forget(key)
        return state, events[0]

    def _token(self, basis: Hashable) -> tuple:
        keys = self.store.sealer.keys
        keys.refresh()  # takes in the keys another process forgot
        return keys.forgotten, basis

    def _hold(self, key: tuple[str, str], held: _Held, drops: int) -> None:
        with self._lock:
            old = self._held.pop(key, None)
            if old is not None:
                self._weight -= old.weight
            if held.weight > self.max_weight or drops != self._drops:  # too big, or read before a forget's drop
                return
            self._held[key] = held
            self._weight += held.weight
            while self._weight > self.max_weight:
                _, evicted = self._held.popitem(last=False)
                self._weight -= evicted.weight

    def _forget(self, key: tuple[str, str]) -> None:
        with self._lock:
            old = self._held.pop(key, None)
            if old is not None:
                self._weight -= old.weight

    def drop_text(self) -> None:
        """Hold nothing (the states held may hold a forgotten subject's text)."""
        with self._lock:
            self._held.clear()
            self._weight = 0
            self._drops += 1

    def __len__(self) -> int:
        return len(self._held)


_lock = threading.Lock()
_by_store: "weakref.WeakKeyDictionary[Any, StreamFolds]" = weakref.WeakKeyDictionary()


def folds_of(store: Any) -> StreamFolds:
    """The store's :class:`StreamFolds`, made on first use."""
    found = _by_store.get(store)
    if found is None:
        with _lock:
            found = _by_store.get(store)
            if found is None:
                found = _by_store[store] = StreamFolds(store)
    return found
