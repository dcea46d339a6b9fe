"""A postings segment's terms and their ids, held as three arrays rather than a dict.

A segment maps each of its terms to the id that indexes its postings. As a
Python dict of strings that costs about 100 bytes a term, and a store's
vocabulary grows with it (every memory of ``mnemolog bench recall`` holds a
number of its own: a million terms at a million memories, about 100 MB in
every server process). :class:`Vocabulary` holds the same map as the terms'
UTF-8 bytes, sorted and joined into one buffer, their offsets, and each
sorted term's id: about 17 bytes a term, and nothing for the garbage
collector to walk. A lookup is a binary search over the sorted terms (some
twenty comparisons of short byte strings at a million terms, a few
microseconds; a query looks up a handful of terms).

The arrays are what the saved postings file holds, so loading a segment
builds no Python object per term either.
"""

from __future__ import annotations

from typing import Iterator, Mapping

import numpy as np

__all__ = ["Vocabulary"]


def _encode(term: str) -> bytes:
    # surrogatepass: any str has bytes, and UTF-8's byte order is the code points' order.
    return term.encode("utf-8", "surrogatepass")


class Vocabulary:
    """Terms to ids: ``blob[offsets[i]:offsets[i + 1]]`` is the ``i``-th term in byte order, ``ids[i]`` its id."""

    __slots__ = ("blob", "offsets", "ids")

    def __init__(self, blob: bytes, offsets: np.ndarray, ids: np.ndarray):
        if len(offsets) != len(ids) + 1 or (len(offsets) and int(offsets[-1]) != len(blob)):
            raise ValueError("a vocabulary's offsets must bound its terms in the blob")
        self.blob, self.offsets, self.ids = blob, offsets, ids

    @classmethod
    def of(cls, terms: Mapping[str, int]) -> "Vocabulary":
        """The vocabulary of a ``term -> id`` map."""
        encoded = sorted((_encode(term), t) for term, t in terms.items())
        lengths = np.fromiter((len(b) for b, _ in encoded), np.int64, len(encoded))
        offsets = np.zeros(len(encoded) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        ids = np.fromiter((t for _, t in encoded), np.int64, len(encoded))
        return cls(b"".join(b for b, _ in encoded), offsets, ids.astype(np.int32) if len(ids) and ids.max() < 2**31 else ids)

    def __len__(self) -> int:
        return len(self.ids)

    def _term(self, i: int) -> bytes:
        return self.blob[int(self.offsets[i]) : int(self.offsets[i + 1])]

    def get(self, term: str, default: int | None = None) -> int | None:
        key = _encode(term)
        lo, hi = 0, len(self.ids)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._term(mid) < key:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(self.ids) and self._term(lo) == key:
            return int(self.ids[lo])
        return default

    def __contains__(self, term: object) -> bool:
        return isinstance(term, str) and self.get(term) is not None

    def __iter__(self) -> Iterator[str]:
        """The terms, in byte order."""
        for i in range(len(self.ids)):
            yield self._term(i).decode("utf-8", "surrogatepass")

    def items(self) -> Iterator[tuple[str, int]]:
        for i, term in enumerate(self):
            yield term, int(self.ids[i])
