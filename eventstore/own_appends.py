"""A store's own latest appends, held so that its writer's catch-up need not read them back.

After an append commits, the store knows everything a read of those
positions would return: positions (numbered gap-free under the write lock),
event ids, streams and versions, types, schema versions, tenant, metadata,
the ``recorded_at`` stamp (made in Python, stored as that very string) and
the events as given, before sealing. :class:`OwnAppends` keeps the envelope
rows of the latest append (and of the appends right after it, while they
continue it position by position), and :meth:`OwnAppends.take` hands them
out as the :class:`RecordedEvent`s of the next batch of a catch-up.

They are built the way a read builds them, so that they are the same:
:func:`decode_rows` over the stored envelope, with each payload as stored,
except that a sealed event's payload is the JSON of its plaintext, encoded
when it is taken (what unsealing the stored token gives back, field by
field, through the same decoders). The read's opening pass acts only on a
personal field that starts with a reserved mark (see :mod:`.sealing`): a
plaintext that holds one (a memory whose text imitates a token, a stored
escape) could differ here from the read, so a batch whose payloads hold
what every mark starts with is never handed over, and without it the pass is run only for an event it acts on otherwise
(``SubjectForgotten`` drops its keys from the cache). Nor is anything that
fails to decode handed over (the read then reports what it reports).

Only a caller that wants the positions right after ``after`` and no further
than ``until`` gets them; anything else (another process appended in
between, a projection behind, a bound before the held rows) is refused and
the rows are dropped: the caller reads the log, as without a hand-over.
Correctness never depends on the rows being held: whoever takes them gets
exactly the committed events at those positions, and whoever finds nothing
reads the same events from the log. (One difference is a matter of timing,
as it is for a read: a subject's key forgotten by another process after
the append and before the catch-up reads as erased, where the hand-over
still holds the plaintext; a read made just before that forget would have
too. The forget's own event, later in the log, erases what was projected.)
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Callable, NamedTuple, Sequence

from . import sealing
from .events import encoder
from .recorded import RecordedEvent, decode_rows
from .sealing import MARK

#: At most this many events are held: a bigger append (an import) is read back as before.
HELD_MAX = 10_000


def _marked(payload: str) -> bool:
    """Whether a payload may hold a reserved mark (a token's, or the escape's): every mark starts with
    :data:`~.sealing.MARK`, so one search, conservative, decides."""
    return MARK in payload


def _text(payload: object) -> str:
    """A held payload as JSON text: stored text as it is, an event (sealing on: its plaintext) encoded now."""
    return payload if type(payload) is str else encoder.encode(payload).decode()


class _Chunk(NamedTuple):
    """One append as the recorder stored it, its rows built only when taken: ``values`` row after row
    (``width`` each, in the envelope's column order) and each event's plaintext payload (see :meth:`OwnAppends.hold`)."""

    values: Sequence
    width: int
    payloads: Sequence

    @property
    def first(self) -> int:
        return self.values[0]

    @property
    def last(self) -> int:
        return self.values[len(self.values) - self.width]

    def rows(self) -> list[tuple]:
        """(position, event_id, stream_id, version, type, schema, tenant, payload, metadata, recorded_at) a row,
        the payload as JSON text."""
        v, w = self.values, self.width
        return list(zip(v[0::w], v[1::w], v[2::w], v[3::w], v[4::w], v[5::w], v[6::w], map(_text, self.payloads), v[8::w], v[10::w]))


class _Rows(NamedTuple):
    """Rows already built: what a take with a limit left held."""

    built: list[tuple]

    @property
    def first(self) -> int:
        return self.built[0][0]

    @property
    def last(self) -> int:
        return self.built[-1][0]

    def rows(self) -> list[tuple]:
        return self.built


class OwnAppends:
    """The latest append(s) of a store, until taken, dropped or replaced (see the module docstring).

    Holding costs an append nothing but a reference: the rows are built
    when a catch-up takes them. Its own small lock guards what it holds; it
    is never held while another lock is taken, so a runner (under its lock)
    and an append (under the store's write lock) may meet here in either
    order.
    """

    def __init__(self, open_sealed: Callable[[list[RecordedEvent]], list[RecordedEvent]]):
        self._open_sealed = open_sealed
        self._lock = threading.Lock()
        self._chunks: list[_Chunk | _Rows] = []  # appends one after another, position by position
        self._count = 0  # events in them

    def hold(self, values: Sequence, width: int, payloads: Sequence) -> None:
        """Hold a committed append: ``values`` as the recorder stored them (``width`` per row, in the
        envelope's column order) and each event's plaintext payload: its JSON text, or the event itself,
        encoded only when taken.

        An append that continues the held ones (the next position) joins
        them; another replaces them.
        """
        chunk = _Chunk(values, width, payloads)
        count = len(payloads)
        with self._lock:
            chunks = self._chunks
            if chunks and chunks[-1].last + 1 == chunk.first and self._count + count <= HELD_MAX:
                chunks.append(chunk)
                self._count += count
            elif count <= HELD_MAX:
                self._chunks, self._count = [chunk], count
            else:
                self._chunks, self._count = [], 0

    def drop(self) -> None:
        with self._lock:
            self._chunks, self._count = [], 0

    def held(self) -> tuple[int, int] | None:
        """The first and last positions held, or None."""
        chunks = self._chunks
        return (chunks[0].first, chunks[-1].last) if chunks else None

    def take(self, after: int, until: int, limit: int | None = None) -> list[RecordedEvent] | None:
        """The events at ``after + 1`` onwards (at most ``limit``), if they are held and the held ones end at or
        before ``until``; else None, and nothing stays held. What is left after ``limit`` stays held."""
        with self._lock:
            chunks = self._chunks
            if not chunks:
                return None
            self._chunks, self._count = [], 0
            if chunks[0].first != after + 1 or chunks[-1].last > until:
                return None
            try:
                taken = [row for chunk in chunks for row in chunk.rows()]
            except Exception:  # the read gives its own answer
                return None
            if limit is not None and len(taken) > limit:
                taken, rest = taken[:limit], taken[limit:]
                self._chunks, self._count = [_Rows(rest)], len(rest)
        try:
            if any(_marked(row[7]) for row in taken):
                return None
            events = decode_rows(taken)
            # Without a token's mark in any payload, the read's opening pass changes no event; it is run only
            # for what it does besides (an event such as SubjectForgotten drops forgotten keys from the cache).
            passing = _PASSING
            if any(passing.get(type(r.event)) or _passes(type(r.event)) for r in events):
                events = self._open_sealed(events)
            return events
        except Exception:  # the read gives its own answer (its error, or an upcast): never a different one from here
            return None


_PASSING: dict[type, bool] = {}  # event class -> whether the opening pass acts on it other than through its personal fields


def _passes(cls: type) -> bool:
    passes = _PASSING[cls] = sealing.opens(cls) and not getattr(cls, "personal", ())
    return passes


#: At most this many runs of positions are kept by :class:`AppendedHere`: the oldest are then forgotten.
RUNS_MAX = 4096


class AppendedHere:
    """The positions a store object appended, as runs ``(first, last)``, until a reader takes those up to a
    position (:meth:`others`): a log follower that need not look at its own process's appends (it decided
    them on a log it had caught up with) looks at the runs between them only, which another process (or
    another store object) appended. The oldest runs beyond :data:`RUNS_MAX` are forgotten, and their
    positions then count as another's: that costs a follower a look, never a miss."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runs: deque[tuple[int, int]] = deque(maxlen=RUNS_MAX)

    def note(self, first: int, last: int) -> None:
        """An append committed at positions ``first..last`` (appends come in the order of their positions)."""
        with self._lock:
            runs = self._runs
            if runs and runs[-1][1] + 1 == first:
                runs[-1] = (runs[-1][0], last)
            else:
                runs.append((first, last))

    def others(self, after: int, until: int) -> list[tuple[int, int]]:
        """The runs of positions after ``after`` up to ``until`` this store object did not append, in order;
        its own runs up to ``until`` are forgotten."""
        with self._lock:
            found, at = [], after + 1
            for first, last in self._runs:
                if first > until:
                    break
                if first > at:
                    found.append((at, first - 1))
                at = max(at, last + 1)
            if at <= until:
                found.append((at, until))
            runs = self._runs
            while runs and runs[0][1] <= until:
                runs.popleft()
            if runs and runs[0][0] <= until:
                runs[0] = (until + 1, runs[0][1])
            return found
