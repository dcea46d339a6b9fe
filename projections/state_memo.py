"""Values read from a projection, held in memory while the projection stays as it is.

A projection's checkpoint (generation and position) moves in the same
transaction as every change to its tables, and a rebuild gives it a new
generation, so what was read from those tables at the head holds exactly as
long as the checkpoint does: one primary-key read tells. Recall reads the same
adjacency (an entity's relations and mentions, a turn's neighbours) for
question after question; a process keeps those answers per checkpoint and
reads them again after any change. Reads as of a position never come here.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Callable, Hashable, Iterable, Mapping

from . import text_caches

#: Held weight at most (each value weighs what its holder says: an edge list its length, a row its size in
#: 128-byte units), past which a memo starts afresh: some tens of megabytes a process at most.
MAX_WEIGHT = 100_000


class Held(dict):
    """The values held for one state of a projection; ``weight`` sums what :meth:`put` charged."""

    __slots__ = ("weight",)

    def __init__(self) -> None:
        super().__init__()
        self.weight = 0

    def put(self, key: Hashable, value: Any, weight: int = 1) -> Any:
        self[key] = value
        self.weight += weight
        return value

    def fill(
        self, kind: Hashable, ids: Iterable[Hashable], read: Callable[[list], Mapping[Hashable, Any]],
        *, missing: Any = None, weigh: Callable[[Any], int] = lambda value: 1,
    ) -> None:
        """Hold ``(kind, id)`` for each of ``ids`` not held yet: ``read(unheld)`` answers them at once, an id it
        leaves out is held as ``missing`` (so it is not read again either)."""
        unheld = [i for i in dict.fromkeys(ids) if (kind, i) not in self]
        if unheld:
            found = read(unheld)
            for i in unheld:
                value = found.get(i, missing)
                self.put((kind, i), value, weigh(value))


class StateMemo:
    """Values computed from the tables of the projection ``projection``, held per state of its checkpoint.

    Safe across threads: each state gets its own :class:`Held`, and a thread
    still working from an older state fills only that one.
    """

    def __init__(self, projection: str, max_weight: int = MAX_WEIGHT):
        self.projection = projection
        self.max_weight = max_weight
        self._state: tuple | None = None
        self._held = Held()
        text_caches.register(self)

    def drop_text(self) -> None:
        """Hold nothing until the next read (the rows held may hold a forgotten subject's text)."""
        self._state, self._held = None, Held()

    def held(self, conn: sqlite3.Connection) -> Held | None:
        """The values held for the projection's current state (fresh when it moved), or None where it has no checkpoint."""
        try:
            state = conn.execute("SELECT generation, position FROM checkpoints WHERE name = ?", (self.projection,)).fetchone()
        except sqlite3.OperationalError:  # no checkpoints table: a bare projection database
            return None
        if state is None:
            return None
        held = self._held
        if state != self._state or held.weight > self.max_weight:
            held = Held()
            self._state, self._held = state, held
        return held
