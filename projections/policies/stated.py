"""When a memory's text was stated, read from the log: of a contradictory pair, the newer supersedes the older."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from mnemolog.eventstore import catalogue as c

if TYPE_CHECKING:
    from .dedup import Item


class StatedTimes:
    """When a memory's current text was stated, read from the log: which of a contradictory pair is newer.

    A memory's ``updated_at`` is when it last changed, but a merge's product
    was changed at the merge, not stated then: its text holds what its
    sources said, as old as the newest of them. So a merge of two old "Editor:
    Vim" never looks newer than a later "Editor: Emacs". A memory added or
    updated was stated at that time; a rollback to a version, when that
    version was; a change of status (archived, restored) states nothing.
    Times of a version never change (the log is append-only), so they are kept.
    """

    def __init__(self, store, limit: int = 100_000):
        self.store, self.limit = store, limit
        self._times: dict[tuple[str, int], str] = {}  # (memory id, version) -> when its text was stated
        self._lock = threading.Lock()

    def __call__(self, item: Item) -> str:
        with self._lock:
            if len(self._times) > self.limit:
                self._times.clear()
            return self._stated(item.id, item.version) or item.updated_at

    def _stated(self, memory_id: str, version: int | None = None, before: int | None = None) -> str:
        """When ``memory_id`` at ``version`` (or at its last version before position ``before``) was stated."""
        if version is not None and (found := self._times.get((memory_id, version))) is not None:
            return found
        times: list[str] = []  # by version - 1
        for r in self.store.read_stream(c.memory_stream(memory_id), 1, version):
            if before is not None and r.position >= before:
                break
            e, when = r.event, times[-1] if times else ""
            if (known := self._times.get((memory_id, r.stream_version))) is not None:
                when = known
            elif isinstance(e, c.MemoryAdded):
                when = e.created_at
            elif isinstance(e, c.MemoriesMerged):  # what its sources said, each at its last version before the merge
                when = max((self._stated(s, before=r.position) for s in e.source_ids), default="") or e.created_at
            elif isinstance(e, c.MemoryUpdated):
                when = e.updated_at
            elif isinstance(e, c.MemoryRolledBack) and 1 <= e.to_version <= len(times):
                when = times[e.to_version - 1]
            times.append(when)
            self._times[(memory_id, r.stream_version)] = when
        return times[-1] if times else ""
