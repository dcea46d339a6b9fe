"""What ``verify`` compares the log with: digests kept elsewhere and stored exports.

A digest ``POSITION:HASH`` proves the whole log up to its position, because
each hash covers the one before it; but after an edit and a full re-hash it
can only say *that* the log differs at or before its position, not *where*.
Several digests narrow it down to the span between the last one that agrees
and the first one that does not. A stored export holds every row, so the
first row that differs from it is the first edited row itself.

Each kept fact is an :class:`Anchor`; :class:`ReferenceCheck` is fed the
log's rows in position order and remembers the first and the last anchor
that disagree.
"""

from __future__ import annotations

import heapq
from typing import Iterable, Iterator, NamedTuple, Sequence

import msgspec

from .chain import GENESIS_HASH, StoredRow

# The stored columns of a row that an export carries (the correlation_id
# column is a copy of the metadata's, checked by the chain walk).
_COMPARED = ("event_id", "stream_id", "stream_version", "type", "schema_version", "tenant", "payload", "metadata", "recorded_at")


class Anchor(NamedTuple):
    """A position whose hash is known from outside the log, and its whole row when an export holds it."""

    position: int
    hash: str
    row: StoredRow | None = None


class Disagreement(msgspec.Struct, frozen=True):
    position: int
    reason: str


def anchors_of(digests: Iterable = (), export: Iterable[StoredRow] | None = None) -> Iterator[Anchor]:
    """Digests (anything with ``position`` and ``hash``, any order) and an
    export's rows (position order) as one stream of anchors by position."""
    kept = sorted(Anchor(d.position, d.hash) for d in digests)
    if export is None:
        return iter(kept)
    return heapq.merge(kept, (Anchor(row.position, row.hash, row) for row in export), key=lambda a: a.position)


class ReferenceCheck:
    """Compares the log's rows, fed in position order, with anchors in position order."""

    def __init__(self, anchors: Iterable[Anchor]):
        self._anchors = iter(anchors)
        self._next: Anchor | None = None
        self._last_position = 0
        self.unchanged_through = 0  # the last position an anchor proves unchanged, before any disagreement
        self.first: Disagreement | None = None  # the first anchor that disagrees
        self.last: Disagreement | None = None  # the last anchor that disagrees
        self.exact = False  # whether ``first`` is the first differing row itself
        self._advance()

    def _advance(self) -> None:
        while True:
            anchor = next(self._anchors, None)
            if anchor is None:
                self._next = None
                return
            if anchor.position < self._last_position:
                raise ValueError(f"the reference goes back from position {self._last_position} to {anchor.position}")
            self._last_position = anchor.position
            if anchor.position > 0:
                self._next = anchor
                return
            # A digest of the empty log: the genesis hash, which every log starts from.
            if anchor.hash != GENESIS_HASH:
                self._disagree(anchor, "the hash differs from the genesis hash of an empty log")

    def feed(self, rows: Sequence[StoredRow]) -> None:
        for row in rows:
            while self._next is not None and self._next.position < row.position:
                self._disagree(self._next, "the log has no event at this position")
                self._advance()
            while self._next is not None and self._next.position == row.position:
                self._compare(self._next, row)
                self._advance()

    def finish(self, last_position: int) -> None:
        """Anchors beyond the log's last row: the log ends before them."""
        while self._next is not None:
            self._disagree(self._next, f"the log ends at position {last_position}")
            self._advance()

    def _compare(self, anchor: Anchor, row: StoredRow) -> None:
        if anchor.row is not None:
            changed = [name for name in _COMPARED if getattr(row, name) != getattr(anchor.row, name)]
            if changed:
                verb = "differs" if len(changed) == 1 else "differ"
                self._disagree(anchor, f"{', '.join(changed)} {verb} from the export", exact=True)
                return
            if row.prev_hash != anchor.row.prev_hash or row.hash != anchor.hash:
                self._disagree(anchor, "the stored hash differs from the export's")
                return
        elif row.hash != anchor.hash:
            self._disagree(anchor, "the hash differs from the kept digest")
            return
        if self.first is None:
            self.unchanged_through = anchor.position

    def _disagree(self, anchor: Anchor, reason: str, *, exact: bool = False) -> None:
        found = Disagreement(anchor.position, reason)
        if self.first is None:
            # An edit lies after the last agreeing anchor and at or before
            # this one; they pin it when they are adjacent positions.
            self.first = found
            self.exact = exact or anchor.position <= self.unchanged_through + 1
        self.last = found

    def describe(self) -> str | None:
        """The first difference in words, or None when every anchor agrees."""
        if self.first is None:
            return None
        if self.exact:
            return f"position {self.first.position} differs: {self.first.reason}"
        return (
            f"the log differs somewhere in positions {self.unchanged_through + 1}..{self.first.position} "
            f"(the reference agrees up to position {self.unchanged_through}; at {self.first.position}: {self.first.reason})"
        )
