"""``Pacer``: background work that steps aside while others write.

The organizer shares one process (one GIL, one writer) with the requests
that write memories. A pass judges thousands of pairs in Python; run flat out
beside a steady stream of writes it would take most of the interpreter's
time from them. A background merge in a search engine is throttled the same
way: work in short slices, and after a slice in which other writes arrived,
rest long enough that the work keeps to ``share`` of the time. With the log
otherwise quiet nothing rests and a pass runs at full speed.

The pass calls :meth:`Pacer.due` often (between pairs, between chunks of
decisions); it is cheap until a slice has passed. ``others_wrote()`` answers
whether anyone else appended since it was last asked (the organizer compares
the log's head with the position after its own last write).
"""

from __future__ import annotations

import asyncio
import time
from typing import Callable

MAX_REST_S = 1.0  # one rest at most: a slice slowed down by others must not stall the pass


class Pacer:
    def __init__(self, share: float, others_wrote: Callable[[], bool], slice_s: float = 0.02, clock: Callable[[], float] = time.perf_counter):
        if not 0 < share <= 1:
            raise ValueError(f"share must be in (0, 1], got {share}")
        self.share = share
        self.slice_s = slice_s
        self._others_wrote = others_wrote
        self._clock = clock
        self._since = clock()
        self.rested = 0.0  # seconds rested in all, for reports

    def restart(self) -> None:
        """A new slice starts now (at the start of a pass: the idle time before it was no work)."""
        self._since = self._clock()

    def due(self) -> float:
        """Seconds to rest now: 0 within a slice or when nobody else wrote during it."""
        now = self._clock()
        worked = now - self._since
        if worked < self.slice_s:
            return 0.0
        self._since = now
        if self.share >= 1 or not self._others_wrote():
            return 0.0
        rest = min(MAX_REST_S, worked * (1 - self.share) / self.share)
        self.rested += rest
        return rest

    def step(self) -> None:
        """Rest here if due (from a worker thread: the sleep releases the interpreter)."""
        if rest := self.due():
            time.sleep(rest)
            self._since = self._clock()

    async def astep(self) -> None:
        """Rest here if due (on the event loop)."""
        if rest := self.due():
            await asyncio.sleep(rest)
            self._since = self._clock()
