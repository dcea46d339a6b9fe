"""Scoring of the in-memory postings: FTS5's bm25, every matching row or pruned to those that can reach the top.

:class:`PostingsScoring` is the half of
:class:`~mnemolog.projections.fts.postings.PostingsIndex` that ranks: it reads
the index's per-row columns (``cols``), its segments and total length, and
keeps scratch buffers, term figures and bitmaps between searches; the index
itself holds, loads, follows and saves the postings.

Pruning (MaxScore)
------------------
A query's words can match a tenth of all rows (a name, an everyday
object): scoring every match grew with the store (7 ms a query at a
million rows). When tenant, validity and status are the only filters (all
checked in memory), :meth:`PostingsScoring._score_pruned` finds a threshold
first, the ``limit``-th best exact score among rows holding all the terms
(or all but one; bitmaps of the frequent terms intersect them in
microseconds), and then scores only rows that can reach it: a term's impact
is bounded by its highest frequency and the row's length, so a row must
hold a set of terms whose bounds reach the threshold, and be short enough
for that. The rows left out score below the threshold, strictly: the answer
is the one scoring every row gives, to the bit (a property test checks it
against the unpruned scoring). A filter checked in SQL scores every row, as
before. Measured with ``mnemolog bench recall``'s memories and 200
questions (limit 50, CPU time per search, p50, on 2 shared cores under
other load): 100,000 rows 0.77 ms against 0.79 scoring every row, 210,000
0.91 against 1.39, a million 1.67 against 6.68 (p95 2.60 against 9.46).
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

__all__ = ["B", "K1", "PostingsScoring", "bm25_idf", "bm25_parts"]

#: bm25's parameters, FTS5's.
K1, B = 1.2, 0.75


class _Term:
    """One query term's postings over every segment (row indexes ascending), its idf, and figures about them.

    The figures (highest frequency, shortest row, the rows whose frequency
    is not the most common one) are computed once per size of the index: ``known``
    holds them between searches (the index only grows until it is reset).
    """

    __slots__ = ("term", "rows", "freqs", "lengths", "idf", "avgdl", "known")

    def __init__(self, term: str, rows: np.ndarray, freqs: np.ndarray, lengths: np.ndarray, idf: float, avgdl: float, known: dict):
        self.term, self.rows, self.freqs, self.lengths, self.idf, self.avgdl, self.known = term, rows, freqs, lengths, idf, avgdl, known

    def _figure(self, name: str, compute):
        found = self.known.get(name)
        if found is None:
            found = self.known[name] = compute()
        return found

    @property
    def highest(self) -> float:
        return self._figure("highest", lambda: float(self.freqs.max()))

    @property
    def shortest(self) -> float:
        return self._figure("shortest", lambda: float(self.lengths.min()))

    def odd(self) -> tuple[float, np.ndarray, np.ndarray]:
        """The term's most common frequency, and the rows (ascending) where its frequency differs, with theirs: the fewest such rows."""

        def compute():
            freqs = self.freqs.astype(np.float32)  # exact; float16 sorts and compares several times slower
            values, counts = np.unique(freqs, return_counts=True)
            common = values[counts.argmax()]
            differ = freqs != common
            return (float(common), self.rows[differ], self.freqs[differ])

        return self._figure("odd", compute)


def bm25_idf(rows: int, hits: int) -> float:
    """FTS5's idf of a phrase that ``hits`` of ``rows`` rows match (at least 1e-6)."""
    idf = math.log((rows - hits + 0.5) / (hits + 0.5))
    return idf if idf > 0.0 else 1e-6


def bm25_parts(freqs: np.ndarray, lengths: np.ndarray, idf: float, avgdl: float, tf: np.ndarray, norm: np.ndarray) -> np.ndarray:
    """Each posting's bm25 part, ``idf * ((f * (K1 + 1)) / (f + K1 * (1 - B + B * length / avgdl)))``, in FTS5's
    order of operations (so that it equals FTS5's to the bit), in ``tf`` and ``norm`` (float64 buffers of the
    postings' size): the result is ``tf``."""
    np.copyto(norm, lengths)
    np.multiply(norm, B, out=norm)
    np.divide(norm, avgdl, out=norm)
    np.add(norm, 1.0 - B, out=norm)
    np.multiply(norm, K1, out=norm)
    np.copyto(tf, freqs)  # as float64 before any arithmetic
    np.add(norm, tf, out=norm)
    np.multiply(tf, K1 + 1.0, out=tf)
    np.divide(tf, norm, out=tf)
    np.multiply(tf, idf, out=tf)
    return tf


class PostingsScoring:
    """bm25 over the postings (see the module docstring); mixed into ``PostingsIndex``, whose lock the caller holds."""

    def _scratch(self, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Three float64 buffers of ``size`` for :meth:`_score` (kept between searches; the lock is held)."""
        if self._buffers.shape[1] < size:
            self._buffers = np.empty((3, max(size, int(self._buffers.shape[1] * 1.5))), np.float64)
        return self._buffers[0, :size], self._buffers[1, :size], self._buffers[2, :size]

    def _postings_of(self, terms: Sequence[str], as_of: int | None = None) -> list[_Term]:
        """The postings of each of ``terms`` that some row holds (held ``as_of`` that position), in phrase order,
        with the term's idf and the average row length (see :meth:`_statistics`)."""
        n = self.cols.n
        out: list[_Term] = []
        if n == 0:
            return out
        counted, total, hits_of = self._statistics(as_of)
        if counted == 0:
            return out
        avgdl = total / counted
        for term in terms:
            parts = [p for p in (seg.postings(term) for seg in self.segments) if p is not None]
            if not parts:
                continue
            # Segments hold consecutive runs of rows, oldest first: the joined postings ascend.
            rows, freqs, lengths = (np.concatenate(column) for column in zip(*parts)) if len(parts) > 1 else parts[0]
            hits = hits_of(rows)
            if not hits:
                continue
            known = self._known.pop(term, None)
            if known is None or known[0] != n:
                known = (n, {})
            self._known[term] = known  # the most recently used last
            out.append(_Term(term, rows, freqs, lengths, bm25_idf(counted, hits), avgdl, known[1]))
        while len(self._known) > KNOWN_TERMS:
            self._known.pop(next(iter(self._known)))
        return out

    def _statistics(self, as_of: int | None) -> tuple[int, float, Callable[[np.ndarray], int]]:
        """bm25's row count and total row length, and a function of a term's rows to how many of them count.

        FTS5's statistics count every row its index holds: every tenant's and
        every version's. At the head that is every row; ``as_of`` a position,
        the rows indexed by then, so that a search as of a position ranks with
        the statistics a search at that position had, to the bit (only a
        forget or a tenant drop since, which took rows out, sets them apart).
        The FTS projector applies the log in order and its row ids only grow,
        so the rows indexed by a position (valid from it or before) are the
        first ones: a binary search finds where they end.
        """
        cols = self.cols
        n = cols.n
        cut = n if as_of is None else int(np.searchsorted(cols.valid_from[:n], as_of, side="right"))
        if cut == n:
            return n, self.total_length, len
        return cut, self._length_of_first(cut), lambda rows: int(np.searchsorted(rows, cut))

    def _length_of_first(self, count: int) -> float:
        """The total length of the first ``count`` rows: the running sums of whole blocks of rows (kept as rows
        are added: a row's length never changes), then the rows past the last whole block. Lengths are whole
        numbers, exact in float64 in any order of addition, so this equals the total the index had at that size."""
        cols = self.cols
        sums = self._block_sums  # sums[k]: the total length of the first k blocks
        whole = cols.n // LENGTH_BLOCK
        if len(sums) <= whole:
            more = cols.length[(len(sums) - 1) * LENGTH_BLOCK : whole * LENGTH_BLOCK].reshape(-1, LENGTH_BLOCK).sum(axis=1)
            self._block_sums = sums = np.concatenate([sums, sums[-1] + np.cumsum(more)])
        block = count // LENGTH_BLOCK
        return float(sums[block] + cols.length[block * LENGTH_BLOCK : count].sum())

    def _impacts(self, freqs: np.ndarray, lengths: np.ndarray, term: _Term) -> np.ndarray:
        """Each posting's bm25 part for ``term`` (see :func:`bm25_parts`), computed in scratch buffers (fresh
        temporaries of this size cost more in page faults than in arithmetic); valid until the next call."""
        tf, norm, _ = self._scratch(len(freqs))
        return bm25_parts(freqs, lengths, term.idf, term.avgdl, tf, norm)

    def figures_as_of(self, conn, as_of: int) -> tuple[int, float, int, float, int] | None:
        """What bm25 as of ``as_of`` needs beside FTS5's answers, read in the caller's read transaction.

        ``(rows, length, rows then, length then, last row then)``: the rows
        FTS5's index holds in this snapshot and their total length (its
        statistics now), the rows indexed by ``as_of`` and theirs (see
        :meth:`_statistics`), and the last of those. None when no row was
        indexed after ``as_of``: FTS5's statistics are those of then.
        """
        with self.lock:
            self._sync(conn)
            cols = self.cols
            ids = cols.row_id[: cols.n]
            last = conn.execute("SELECT coalesce(max(row_id), 0) FROM fts_docs").fetchone()[0]
            held = int(np.searchsorted(ids, last, side="right"))  # this snapshot's rows: another thread may have read on
            counted, total_then, _ = self._statistics(as_of)
            if counted >= held:
                return None
            total = self.total_length if held == cols.n else self._length_of_first(held)
            return held, total, counted, total_then, int(ids[counted - 1]) if counted else 0

    def lengths_of(self, row_ids: Sequence[int]) -> np.ndarray | None:
        """The length of each of ``row_ids`` (ascending; a row's length never changes), or None if one is not held."""
        with self.lock:
            ids = self.cols.row_id[: self.cols.n]
            at = np.searchsorted(ids, np.asarray(row_ids, np.int64))
            if len(at) and (int(at.max()) >= len(ids) or not np.array_equal(ids[at], row_ids)):
                return None
            return self.cols.length[at].copy()

    def _score(self, postings: Sequence[_Term], chosen=None) -> tuple[np.ndarray, np.ndarray] | None:
        """Every row holding some of the terms (row indexes) and its bm25 (positive), any tenant or state.

        ``chosen(term)``, when given, says which of a term's postings take
        part (a boolean mask): the rows left out are not scored at all.
        """
        n = self.cols.n
        if n == 0 or not postings:
            return None
        if len(self._sums) < n:
            self._sums = np.zeros(max(n, int(len(self._sums) * 1.5)), np.float64)
        sums = self._sums  # zero between searches; each row's sum is added in phrase order, as FTS5 adds
        touched: list[np.ndarray] = []
        try:
            for term in postings:
                rows, freqs, lengths = term.rows, term.freqs, term.lengths
                if chosen is not None:
                    mask = chosen(term)
                    rows, freqs, lengths = rows[mask], freqs[mask], lengths[mask]
                    if not len(rows):
                        continue
                tf = self._impacts(freqs, lengths, term)
                held = self._buffers[2, : len(rows)]
                np.take(sums, rows, out=held)
                touched.append(rows[held == 0.0])  # a row's first phrase (every phrase adds more than 0)
                np.add(held, tf, out=held)
                sums[rows] = held  # rows are distinct within a term
            if not touched:
                return None
            rows = touched[0].astype(np.int64) if len(touched) == 1 else np.concatenate(touched).astype(np.int64)
            return rows, sums[rows]
        finally:
            for part in touched:
                sums[part] = 0.0

    def _exact(self, postings: Sequence[_Term], rows: np.ndarray) -> np.ndarray:
        """The bm25 of each of ``rows`` (ascending row indexes), summed in phrase order as :meth:`_score` sums.

        A row's length is read from the per-row lengths (the postings hold
        the same value, as float16 or float32); which rows hold a term, from its bitmap
        (a rare term's rows are looked up instead); its frequency in them is
        the term's most common one but for the few rows that differ.
        """
        scores = np.zeros(len(rows), np.float64)
        lengths = self.cols.length[rows].astype(np.float32)
        for term in postings:
            held = self._held(term, rows)
            if not held.any():
                continue
            at = rows[held]
            common, others, their = term.odd()
            freqs = np.full(len(at), common, np.float32)
            if len(others):
                where = np.searchsorted(at, others)
                np.minimum(where, len(at) - 1, out=where)
                hit = at[where] == others
                freqs[where[hit]] = their[hit]
            scores[held] += self._impacts(freqs, lengths[held], term)
        return scores

    def _held(self, term: _Term, rows: np.ndarray) -> np.ndarray:
        """Which of ``rows`` (ascending) hold ``term``: a mask."""
        bitmap = self._bitmap(term) if len(term.rows) > len(rows) // 4 else None
        if bitmap is not None:
            return ((bitmap[rows >> 3] >> (rows & 7).astype(np.uint8)) & 1).astype(bool)
        held = np.zeros(len(rows), bool)
        if len(term.rows) <= len(rows):
            where = np.searchsorted(rows, term.rows)
            np.minimum(where, len(rows) - 1, out=where)
            held[where[rows[where] == term.rows]] = True
        else:
            where = np.searchsorted(term.rows, rows)
            np.minimum(where, len(term.rows) - 1, out=where)
            held = term.rows[where] == rows
        return held

    def _intersection(self, terms: Sequence[_Term]) -> np.ndarray:
        """The rows (ascending) holding every one of ``terms``."""
        terms = sorted(terms, key=lambda t: len(t.rows))
        maps = [self._bitmap(t) for t in terms] if len(terms) > 1 else [None]
        if any(m is None for m in maps):
            return self._holding(terms[0].rows, terms[1:])
        words = maps[0].view(np.uint64).copy()
        for m in maps[1:]:
            np.bitwise_and(words, m.view(np.uint64), out=words)
        at = np.flatnonzero(words)
        words = words[at]
        found = []
        while len(words):  # one round per bit a word holds: few, since intersections are sparse
            lowest = words & (~words + np.uint64(1))
            found.append(at * 64 + np.log2(lowest).astype(np.int64))  # a power of two is exact in float64
            words ^= lowest
            more = words != 0
            at, words = at[more], words[more]
        return _union(found).astype(np.int32)

    def _score_pruned(self, postings: Sequence[_Term], keep, limit: int) -> tuple[np.ndarray, np.ndarray] | None:
        """What :meth:`_score` returns, less rows that cannot be among the best ``limit`` rows that ``keep``.

        MaxScore with a threshold found first. A term's impact on a row is
        bounded by its highest frequency and the row's length (impacts fall
        as rows grow), so each term has an upper bound. Rows holding all the
        terms, or all but one, are scored exactly first (bitmaps of the
        frequent terms find them; else the shortest rows of the term bounded
        highest are), and the ``limit``-th best of those that pass (``keep``,
        a mask of rows) is a threshold ``theta`` that every row of the answer
        reaches. The set of terms a row of the answer holds has bounds that
        sum to ``theta`` at least, and the row is short enough for the rarest
        of them to reach what ``theta`` asks of it beside the others' bounds
        (see :func:`_reaching`); only such rows are scored, exactly as
        :meth:`_score` scores them. Without ``limit`` passing rows among the
        first there is no threshold: None (score every row).
        """
        count = len(postings)
        if count > MAX_PRUNED_TERMS:
            return None
        bounds = np.array([self._impacts(np.array([t.highest]), np.array([t.shortest]), t)[0] for t in postings])
        bounds *= 1.0 + 1e-9  # float rounding: a bound never falls below an impact it stands for
        holding: dict[tuple[int, ...], np.ndarray] = {}  # rows holding each set of terms, as found

        def rows_holding(subset: tuple[int, ...], need: float = 0.0) -> np.ndarray:
            if need <= 0.0 and subset in holding:
                return holding[subset]
            terms = sorted((postings[i] for i in subset), key=lambda t: len(t.rows))
            reachable = self._reachable(terms[0], need)
            rows = self._intersection(terms) if reachable is terms[0].rows else self._holding(reachable, terms[1:])
            if need <= 0.0:
                holding[subset] = rows
            return rows

        theta = self._threshold(postings, bounds, keep, limit, rows_holding)
        if theta is None:
            return None
        # With few terms, each set of terms that can reach theta stands for the rows holding exactly it: those rows'
        # other impacts are bounded by the set's other terms. With more, the smallest such sets stand for every row
        # holding them, whose other impacts are bounded by all other terms.
        every = count <= EVERY_SET_TERMS
        total = float(bounds.sum())
        parts = []
        for subset in _reaching(bounds, theta, every):
            rarest = min(subset, key=lambda i: len(postings[i].rows))
            others = float(bounds[list(subset)].sum()) if every else total
            parts.append(rows_holding(subset, theta - (others - bounds[rarest])))
        rows = _union(parts)
        if not len(rows):
            return None
        rows = rows.astype(np.int64)
        return rows, self._exact(postings, rows)

    def _reachable(self, term: _Term, need: float) -> np.ndarray:
        """``term``'s rows whose impact can reach ``need`` at the term's highest frequency: the short enough ones."""
        if need <= 0.0:
            return term.rows
        f, avgdl = term.highest, term.avgdl
        # need = idf * f * (K1 + 1) / (f + K1 * (1 - B + B * length / avgdl)), solved for length; a margin for rounding.
        longest = ((term.idf * f * (K1 + 1.0) / need - f) / K1 - (1.0 - B)) * avgdl / B
        return term.rows[term.lengths <= np.float64(longest * (1.0 + 1e-6) + 1e-6)]  # compared as float64, whatever the lengths' dtype

    def _holding(self, rows: np.ndarray, others: Sequence[_Term]) -> np.ndarray:
        """Those of ``rows`` (ascending) that every term of ``others`` holds."""
        for term in sorted(others, key=lambda t: len(t.rows)):
            if not len(rows):
                break
            rows = rows[self._held(term, rows)]
        return rows

    def _bitmap(self, term: _Term) -> np.ndarray | None:
        """A frequent term's rows as a bitmap (bit ``i % 8`` of byte ``i // 8``), kept while the index grows; None for a rarer term."""
        n = self.cols.n
        if len(term.rows) * FREQUENT < n:
            return None
        size = (n + 63) // 64 * 8  # whole 64-bit words
        held = self._bitmaps.pop(term.term, None)
        if held is None or held[0] > n or len(held[1]) > size:
            covered, bitmap = 0, np.zeros(size, np.uint8)
        else:
            covered, bitmap = held
            if len(bitmap) < size:
                bitmap = np.concatenate([bitmap, np.zeros(size - len(bitmap), np.uint8)])
        if covered < n:
            # Rows past the bitmap's last byte boundary are (re)set from the postings: rows only ever grow at the end.
            first = covered // 8 * 8
            fresh = term.rows[np.searchsorted(term.rows, first) :] - first
            flags = np.zeros(size * 8 - first, bool)
            flags[fresh] = True
            bitmap[first // 8 :] = np.packbits(flags, bitorder="little")
        self._bitmaps[term.term] = (n, bitmap)
        while len(self._bitmaps) * size > BITMAP_BYTES and len(self._bitmaps) > 1:
            self._bitmaps.pop(next(iter(self._bitmaps)))
        return bitmap

    def _threshold(self, postings: Sequence[_Term], bounds: np.ndarray, keep, limit: int, rows_holding) -> float | None:
        """The ``limit``-th best exact score among some rows that pass, or None: see :meth:`_score_pruned`."""
        count = len(postings)
        every = tuple(range(count))
        seeds = _passing_first(rows_holding(every), keep, limit)
        if len(seeds) < limit and count >= 3:
            found = [seeds] + [rows_holding(every[:skip] + every[skip + 1 :]) for skip in range(count)]
            seeds = _passing_first(_union(found), keep, limit)
        if len(seeds) < limit:
            top = postings[int(np.argmax(bounds))]
            seeds = _passing_first(top.rows[top.lengths == top.shortest], keep, limit)
            if len(seeds) < limit:
                return None
        scores = self._exact(postings, seeds.astype(np.int64))
        return float(np.partition(scores, len(scores) - limit)[len(scores) - limit])


#: Rows a block of :meth:`PostingsScoring._length_of_first`'s running sums holds.
LENGTH_BLOCK = 4096
#: Rows scored exactly to set the pruning threshold (any of them would do: more only sets it higher).
SEEDS = 1024
#: A term held by at least one row in this many is kept as a bitmap, for intersections.
FREQUENT = 64
#: Bytes of bitmaps kept (the least recently used goes first): at a million rows a bitmap takes 125 kB, so 128 of them.
BITMAP_BYTES = 16 << 20
#: Terms whose figures (see ``_Term``) are kept.
KNOWN_TERMS = 1024
#: Queries of more terms than this are scored without pruning (the sets of terms to try grow as 2 ** terms).
MAX_PRUNED_TERMS = 8
#: Up to this many terms, every set of terms that can reach the threshold is tried (up to 31 sets), not only the smallest.
EVERY_SET_TERMS = 5


def _union(parts: Sequence[np.ndarray]) -> np.ndarray:
    """The distinct rows of ``parts``, ascending."""
    if len(parts) <= 1:
        return np.sort(parts[0]) if parts else np.zeros(0, np.int64)
    rows = np.sort(np.concatenate(parts))
    return rows[np.concatenate(([True], rows[1:] != rows[:-1]))] if len(rows) else rows


def _passing_first(rows: np.ndarray, keep, limit: int) -> np.ndarray:
    """Up to :data:`SEEDS` of ``rows`` that ``keep``, the first ones (fewer than ``limit`` only when no more pass)."""
    first = rows[:SEEDS]
    first = first[keep(first)]
    if len(first) >= limit or len(rows) <= SEEDS:
        return first
    return rows[keep(rows)][:SEEDS]


def _reaching(bounds: np.ndarray, theta: float, every: bool) -> list[tuple[int, ...]]:
    """The sets of terms whose bounds sum to ``theta`` at least; unless ``every``, only the smallest (each falls short without any of its terms)."""
    bounds = [float(b) for b in bounds]
    count, out = len(bounds), []
    for mask in range(1, 1 << count):
        subset = tuple(i for i in range(count) if mask >> i & 1)
        reach = sum(bounds[i] for i in subset)
        if reach >= theta and (every or all(reach - bounds[i] < theta for i in subset)):
            out.append(subset)
    return out
