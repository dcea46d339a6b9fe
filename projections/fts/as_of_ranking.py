"""bm25 as of a past position for the queries FTS5 answers (phrases, CJK).

FTS5's bm25 takes its statistics from its whole index as it is now: how many
rows it holds, their average length, and how many rows match each phrase.
As of a past position they must be the statistics of then (the rows indexed
by that position), or a search as of it would not rank as a search at that
position did. FTS5 cannot be told other statistics, so a search as of a
position whose index has grown since is scored here, from FTS5's own answers:

1. the rows of the tenant valid then that match the OR of the phrases, with
   the filters (one statement);
2. per phrase, the rows matching it alone, each with its bm25 as that phrase's
   only (``bm25 = -idf * f (K1 + 1) / (f + K1 (1 - B + B D / avgdl))``, FTS5's
   statistics now), and how many rows match it now and by then. Knowing
   ``idf`` (from the count now), a row's length ``D`` (from the postings, see
   :meth:`~.postings_scoring.PostingsScoring.lengths_of`) and ``avgdl``,
   the phrase's weighted frequency ``f`` in the row follows; the column
   weights are multiples of one half, so it is rounded to the nearest one;
3. each row's bm25 with the statistics of then, summed in phrase order as
   FTS5 sums (:func:`~.postings_scoring.bm25_parts`), ties to the lower row id.

The scores equal those of FTS5 over an index holding only the rows indexed by
then (a property test compares them). Raw FTS5 queries (``raw_fts``) keep
FTS5's statistics of now: their operators (NEAR, NOT, column sets) are FTS5's
to weigh.
"""

from __future__ import annotations

import sqlite3
from typing import Sequence

import numpy as np

from ..filters import SearchFilters, filter_sql
from ..memory_rows import head_clause
from .postings import PostingsIndex, one_snapshot
from .postings_scoring import B, K1, bm25_idf, bm25_parts

__all__ = ["rank_as_of"]


def rank_as_of(
    conn: sqlite3.Connection, tenant: str, phrases: Sequence[str], bm25_sql: str, limit: int, as_of: int, filters: SearchFilters | None
) -> list[tuple[str, int, int, float]] | None:
    """The top ``limit`` rows of the OR of ``phrases`` as of ``as_of``, as ``(memory_id, row_id, version, bm25)``
    (negative, lower is better), best first, ranked with bm25's statistics of then (module docstring).

    ``bm25_sql`` is the projection's bm25 call (its column weights). None when
    no row was indexed after ``as_of``: FTS5's own ranking is then the one of then.
    """
    index = PostingsIndex.for_connection(conn)
    with one_snapshot(conn):
        figures = index.figures_as_of(conn, as_of)
        if figures is None:
            return None
        rows, total, rows_then, total_then, last_then = figures
        valid, valid_params = head_clause(as_of, "d")
        where, where_params = filter_sql(filters, "d")
        match = "(" + " OR ".join(f"({p})" for p in phrases) + ")"
        found = conn.execute(
            "SELECT d.row_id, d.memory_id, d.version FROM fts_index CROSS JOIN fts_docs AS d ON d.row_id = fts_index.rowid"
            f" WHERE fts_index MATCH ? AND fts_index.rowid <= ? AND d.tenant = ? AND {valid} AND {where} ORDER BY d.row_id",
            (match, last_then, tenant, *valid_params, *where_params),
        ).fetchall()
        if not found:
            return []
        lengths = index.lengths_of([r[0] for r in found])
        if lengths is None:  # the index was reloaded meanwhile (a rebuild): FTS5 ranks
            return None
        avgdl, avgdl_then = total / rows, total_then / rows_then
        at = {row_id: i for i, (row_id, _, _) in enumerate(found)}
        scores = np.zeros(len(found), np.float64)
        for phrase in phrases:
            matched = conn.execute(
                f"SELECT rowid, {bm25_sql} FROM fts_index WHERE fts_index MATCH ? AND rowid <= ?", (phrase, last_then)
            ).fetchall()
            held = [(at[row_id], -score) for row_id, score in matched if row_id in at]
            if not held:
                continue
            # The rows matching the phrase now: those of then and those indexed after (usually few: a seek past then).
            later = conn.execute("SELECT count(*) FROM fts_index WHERE fts_index MATCH ? AND rowid > ?", (phrase, last_then)).fetchone()[0]
            which = np.fromiter((i for i, _ in held), np.int64, len(held))
            parts = np.fromiter((s for _, s in held), np.float64, len(held)) / bm25_idf(rows, len(matched) + later)
            # parts = f (K1 + 1) / (f + K) with K = K1 (1 - B + B D / avgdl): f = parts K / (K1 + 1 - parts).
            k = K1 * (1.0 - B + B * lengths[which] / avgdl)
            freqs = np.round(2.0 * parts * k / (K1 + 1.0 - parts)) / 2.0
            idf_then = bm25_idf(rows_then, len(matched))  # the rows indexed by then that match the phrase
            scores[which] += bm25_parts(freqs, lengths[which], idf_then, avgdl_then, np.empty(len(held)), np.empty(len(held)))
    order = sorted((i for i in range(len(found)) if scores[i] > 0.0), key=lambda i: (-scores[i], found[i][0]))[:limit]
    return [(found[i][1], found[i][0], found[i][2], -float(scores[i])) for i in order]
