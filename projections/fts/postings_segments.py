"""The lexical index's storage: segments of postings and the per-row columns they point into (see :mod:`.postings`)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .postings_vocabulary import Vocabulary

__all__ = ["Columns", "Segment", "narrow"]


def narrow(values: np.ndarray) -> np.ndarray:
    """``values`` as float16 where that holds each of them exactly, else as float32.

    Frequencies (column-weighted counts: multiples of 0.5) and row lengths
    (token counts) are small numbers: float16 holds them exactly up to 1,024
    and 2,048, at half the memory of float32. Scoring turns them into float64
    before any arithmetic, so a score is the same to the bit either way.
    """
    if values.dtype == np.float16 or not len(values):
        return values.astype(np.float16)
    with np.errstate(over="ignore"):  # past float16's range: inf, not equal, float32
        half = values.astype(np.float16)
    return half if np.array_equal(half, values) else values.astype(np.float32)


class Segment:
    """Postings of a run of rows: per term, row indexes (ascending), weighted frequencies and row lengths.

    A row's length is kept in each of its postings (it never changes), so
    that scoring reads it in sequence rather than gathering it row by row.
    Frequencies and lengths are float16 where that is exact (:func:`narrow`).
    """

    __slots__ = ("terms", "starts", "rows", "freqs", "lengths")

    def __init__(self, terms: Vocabulary | dict[str, int], starts: np.ndarray, rows: np.ndarray, freqs: np.ndarray, lengths: np.ndarray):
        self.terms = terms if isinstance(terms, Vocabulary) else Vocabulary.of(terms)
        self.starts, self.rows, self.freqs, self.lengths = starts, rows, freqs, lengths

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        t = self.terms.get(term)
        if t is None:
            return None
        lo, hi = self.starts[t], self.starts[t + 1]
        return self.rows[lo:hi], self.freqs[lo:hi], self.lengths[lo:hi]

    @staticmethod
    def merge(segments: Sequence["Segment"]) -> "Segment":
        vocabulary: dict[str, int] = {}
        ids = []
        for seg in segments:  # each term decoded once: its merged id, and the segment's remap to it
            remap = np.empty(len(seg.terms), dtype=np.int64)
            for term, t in seg.terms.items():
                remap[t] = vocabulary.setdefault(term, len(vocabulary))
            ids.append(np.repeat(remap, np.diff(seg.starts)))
        term_ids = np.concatenate(ids)
        rows = np.concatenate([seg.rows for seg in segments])
        order = np.lexsort((rows, term_ids))
        starts = np.searchsorted(term_ids[order], np.arange(len(vocabulary) + 1), side="left").astype(np.int64)
        freqs = narrow(np.concatenate([seg.freqs for seg in segments])[order])
        lengths = narrow(np.concatenate([seg.lengths for seg in segments])[order])
        return Segment(vocabulary, starts, rows[order], freqs, lengths)


class Columns:
    """Growable per-row arrays."""

    def __init__(self) -> None:
        self.n = 0
        self.row_id = np.zeros(0, np.int64)
        self.tenant = np.zeros(0, np.int32)
        self.version = np.zeros(0, np.int64)
        self.valid_from = np.zeros(0, np.int64)
        self.valid_to = np.zeros(0, np.int64)
        self.status = np.zeros(0, np.int16)
        self.length = np.zeros(0, np.float64)

    _ARRAYS = ("row_id", "tenant", "version", "valid_from", "valid_to", "status", "length")

    def reserve(self, extra: int) -> None:
        need = self.n + extra
        if need <= len(self.row_id):
            return
        size = max(need, int(len(self.row_id) * 1.5) + 1024)
        for name in self._ARRAYS:
            old = getattr(self, name)
            new = np.zeros(size, old.dtype)
            new[: self.n] = old[: self.n]
            setattr(self, name, new)
