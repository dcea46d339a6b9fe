"""The full-text projection (SQLite FTS5) and the lexical search over it.

Tables (in ``projections.db``):

- ``fts_docs``: the content table, one row per state of a memory (status
  changes included) with validity positions, the filter columns and the
  indexed text columns;
- ``fts_index``: an *external-content* FTS5 table over ``fts_docs``
  (``content='fts_docs', content_rowid='row_id'``), columns
  ``text, key, tags, background, cjk``, tokenised with
  :data:`~mnemolog.projections.fts.textsearch.TOKENIZER` (combining marks inside words). ``cjk`` holds the character
  bigrams of the CJK parts (:func:`mnemolog.projections.fts.textsearch.cjk_segment`), so a
  two-character Chinese word is found inside an unbroken sentence, and the
  words written against CJK characters (:func:`mnemolog.projections.fts.textsearch.glued_words`:
  ``unicode61`` keeps "我喜欢Python编程" as one token), so that "Python" finds it, and
  the symbols (emoji: :func:`mnemolog.projections.fts.textsearch.symbol_words`) as words,
  all of it in NFKC (:func:`mnemolog.projections.fts.textsearch.folded`:
  "ＡＢＣ" as "abc", half-width kana as kana), as the queries are.

Rows are never updated in their indexed columns: closing a row only sets
``valid_to``, which the index does not hold. A dropped tenant's rows are
first removed from the index with FTS5 ``'delete'`` commands carrying the
old values, then deleted from ``fts_docs``, so the index stays consistent.

Search plan, chosen by measurement
----------------------------------
A query of words (no CJK, no raw syntax, every word one token) is answered
by :class:`~mnemolog.projections.fts.postings.PostingsIndex`: postings held
in memory, ranked exactly as the statement of :func:`fts_search_sql` ranks
(same bm25, same ties), at about a millisecond at 100,000 memories. What
follows is the FTS5 plan, which answers every other query.

Setting: 100,000 memories of one tenant (synthetic sentences of 8-16 words
drawn from a Zipf vocabulary of 20,000 words, with function words mixed in),
400 natural-language queries ("what did I say about the A and B and C when we
were at it", the content words taken from a stored memory), limit 50, CPU
time per query (``time.thread_time``; the 2 shared cores were busy, so wall
times were noisier), p50 / p90 / p99 in ms:

=============================================================  =====  =====  =====
plan                                                            p50    p90    p99
=============================================================  =====  =====  =====
every word OR-ed, one joined statement ``ORDER BY bm25``        144    158    173
content terms only (stopwords dropped), one joined statement     51     91    105
content terms, the index's best 200 first, then row lookups      35     67     82
  (``exact=True``; same answers as the line above)
tiered (the default, below)                                      5.9   12.6   74
=============================================================  =====  =====  =====

Against ``exact=True`` (another 400 queries) the tiered plan returned the
identical list for 97% of them, recall@10 1.000 and recall@50 0.998; at
limit 100: 7.0 ms p50, recall@100 0.997. The slow tail is queries whose rare
words match fewer than ``limit`` rows: the full OR answers those.

Why: FTS5 computes bm25 for every matching row (about 1 µs a row in the
index, 2 µs joined to ``fts_docs``) and has no early termination, and a
query's common words match a third of the rows. So:

1. stopwords are dropped (:func:`~mnemolog.projections.fts.textsearch.content_terms`);
2. a statement first takes the index's best ``max(4 * limit, 200)``
   matches, then keeps those that pass tenant, validity and filters (row
   lookups by id); if fewer than ``limit`` pass, the joined statement of
   :func:`fts_search_sql` (filters in the WHERE, then the LIMIT) decides, so
   a filter never drops a match. A tenant with under a fifth of the rows
   goes to the joined statement directly;
3. tiers (:func:`_tiered`): the rare phrases (summed document frequency up
   to :data:`TIER_BUDGET`) are scored with their full bm25 (``S AND C`` plus
   ``S``), and a bound on what the common phrases alone can score either
   proves the answer exact or makes the rare set grow; past
   :data:`TIER_CAP` the rows holding only common phrases are left out
   (once ``limit`` rows were found: a query whose rare phrases match fewer
   rows is answered by the full OR).

bm25 column weights: text 1, key 2, tags 1.5, background 0.5, cjk 1.
Keeping the tenant inside the index (as a phrase AND-ed in) was not taken:
FTS5 computes an idf for every phrase by walking its whole doclist on every
query (measured: 1.5 ms for a phrase in 69,000 rows), so a single-tenant
store would pay about 2 ms a query for it.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from typing import Sequence

import msgspec

from mnemolog.eventstore import RecordedEvent
from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.model import MemoryContent

from ..filters import SearchFilters, filter_sql, tag_field
from ..runner import execute_script
from ..memory_rows import Previous, close_rows, dropped_tenants, erased_rows, head_clause, transitions
from .as_of_ranking import rank_as_of
from .postings import PostingsIndex, database_key
from .textsearch import (
    MAX_TERMS,
    TOKENIZE_SQL,
    build_match,
    cjk_query_terms,
    STOPWORDS,
    WORD_RE,
    cjk_segment,
    content_terms,
    escape_fts_term,
    folded,
    has_cjk,
    indexed_words,
    symbol_words,
)

__all__ = ["FtsHit", "FtsProjector", "fts_search", "fts_search_sql"]

_tags_encoder = msgspec.json.Encoder()
_tags_decoder = msgspec.json.Decoder(tuple[str, ...])
_ids_encoder = msgspec.json.Encoder()

#: bm25 weights of the indexed columns: text, key, tags, background, cjk.
COLUMN_WEIGHTS = (1.0, 2.0, 1.5, 0.5, 1.0)
#: The word part of a query matches these columns (``cjk`` for the words written against CJK text); CJK bigrams match ``cjk``.
WORD_COLUMNS = ("text", "key", "tags", "background", "cjk")

DOC_COLUMNS = (
    "tenant, memory_id, version, valid_from, valid_to, status, memory_type, tags, tags_json, collection,"
    " doc_type, doc_id, model, created_at, updated_at, text, key, background, cjk"
)
INDEXED = "text, key, tags, background, cjk"


class FtsHit(msgspec.Struct, frozen=True):
    memory_id: str
    row_id: int
    version: int
    score: float  # -bm25: positive, higher is better
    rank: int  # 1-based


class FtsProjector:
    name = "fts"
    # 2: the words written against CJK text indexed in ``cjk``; 3: and NFKC forms; 4: Thai, Lao, Khmer and Myanmar segmented;
    # 5: invisible characters dropped; 6: combining marks inside words, the vowel points of abjads and the Arabic script's
    # letter variants folded, the joiners dropped; 7: symbols (emoji) indexed as words in ``cjk``
    schema_version = 7

    def create(self, conn: sqlite3.Connection) -> None:
        execute_script(
            conn,
            f"""
            CREATE TABLE IF NOT EXISTS fts_docs (
                row_id INTEGER PRIMARY KEY AUTOINCREMENT,
                tenant TEXT NOT NULL, memory_id TEXT NOT NULL, version INTEGER NOT NULL,
                valid_from INTEGER NOT NULL, valid_to INTEGER,
                status TEXT NOT NULL, memory_type TEXT NOT NULL,
                tags TEXT NOT NULL, tags_json TEXT NOT NULL,
                collection TEXT, doc_type TEXT, doc_id TEXT, model TEXT,
                created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
                text TEXT NOT NULL, key TEXT, background TEXT, cjk TEXT NOT NULL
            );
            CREATE INDEX IF NOT EXISTS ix_fts_docs_memory ON fts_docs (tenant, memory_id, valid_to);
            CREATE TABLE IF NOT EXISTS fts_stats (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
            CREATE VIRTUAL TABLE IF NOT EXISTS fts_index USING fts5(
                {INDEXED},
                content='fts_docs', content_rowid='row_id',
                tokenize={TOKENIZE_SQL}
            );
            """
        )
        conn.execute("INSERT OR IGNORE INTO fts_stats (name, value) VALUES ('deletions', 0)")

    def drop(self, conn: sqlite3.Connection) -> None:
        execute_script(conn, "DROP TABLE IF EXISTS fts_index; DROP TABLE IF EXISTS fts_docs; DROP TABLE IF EXISTS fts_stats;")

    def size(self, conn: sqlite3.Connection) -> int:
        return conn.execute("SELECT count(*) FROM fts_docs").fetchone()[0]

    # -- applying ------------------------------------------------------------------

    def apply(self, events: Sequence[RecordedEvent], conn: sqlite3.Connection) -> None:
        inserts: list[tuple] = []

        def flush() -> None:
            if not inserts:
                return
            last = conn.execute("SELECT coalesce(max(row_id), 0) FROM fts_docs").fetchone()[0]
            conn.executemany(
                f"INSERT INTO fts_docs ({DOC_COLUMNS}) VALUES (?,?,?,?,NULL,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", inserts
            )
            conn.execute(
                f"INSERT INTO fts_index (rowid, {INDEXED}) SELECT row_id, {INDEXED} FROM fts_docs WHERE row_id > ?",
                (last,),
            )
            inserts.clear()

        def previous(tenant: str, memory_id: str) -> Previous | None:
            flush()
            row = conn.execute(
                "SELECT text, memory_type, key, tags_json, background, collection, doc_type, doc_id, model,"
                " created_at, status FROM fts_docs WHERE tenant = ? AND memory_id = ? AND valid_to IS NULL",
                (tenant, memory_id),
            ).fetchone()
            if row is None:
                return None
            content = MemoryContent(
                memory=row[0], memory_type=row[1], key=row[2], tags=_tags_decoder.decode(row[3]), background=row[4],
                collection=row[5], doc_type=row[6], doc_id=row[7], model=row[8],
            )  # fmt: skip
            return Previous(content, row[9], None, row[10])

        pending: list[RecordedEvent] = []
        for recorded in events:
            if isinstance(recorded.event, c.MemoryEvent.__args__):
                pending.append(recorded)
                continue
            if isinstance(recorded.event, c.TenantDropped):
                self._rows(pending, conn, inserts, previous, flush)
                pending = []
                flush()
                for _, tenant in dropped_tenants([recorded]):
                    self._drop_tenant(conn, tenant)
            elif isinstance(recorded.event, c.SubjectForgotten):
                self._rows(pending, conn, inserts, previous, flush)
                pending = []
                flush()
                self._erase(conn, recorded.tenant, erased_rows(conn, recorded))
        self._rows(pending, conn, inserts, previous, flush)
        flush()

    @staticmethod
    def _rows(events, conn, inserts, previous, flush) -> None:
        if not events:
            return
        for row in transitions(events, previous):
            if row.version > 1:
                flush()
                close_rows(conn, "fts_docs", row.tenant, row.memory_id, row.position)
            content = row.content
            if content.erased:
                continue  # a forgotten subject's text: nothing to index
            words = " ".join(t for t in (content.memory, content.key, content.background) if t)
            plain = folded(words)
            cjk = " ".join(part for part in (cjk_segment(plain), " ".join(indexed_words(words, plain))) if part)
            inserts.append(
                (
                    row.tenant, row.memory_id, row.version, row.position, row.status, content.memory_type,
                    tag_field(content.tags), _tags_encoder.encode(content.tags).decode(), content.collection,
                    content.doc_type, content.doc_id, content.model, row.created_at, row.updated_at,
                    content.memory, content.key, content.background, cjk,
                )
            )  # fmt: skip

    @staticmethod
    def purge(conn: sqlite3.Connection) -> None:
        """Called by the runner after an erasure: deleted rows' tokens leave the index's segments."""
        purge_deleted(conn)

    @staticmethod
    def _drop_tenant(conn: sqlite3.Connection, tenant: str) -> None:
        FtsProjector._delete_rows(conn, "tenant = ?", (tenant,))

    @staticmethod
    def _erase(conn: sqlite3.Connection, tenant: str, erased: str) -> None:
        """A forgotten subject's memories leave the index, the rows of the versions written before the position
        the table ``erased`` gives each (the runner then merges its segments, see :meth:`purge`)."""
        FtsProjector._delete_rows(
            conn,
            f"row_id IN (SELECT d.row_id FROM {erased} AS b CROSS JOIN fts_docs AS d ON d.tenant = ?"
            " AND d.memory_id = b.memory_id WHERE +d.valid_from < b.position)",
            (tenant,),
        )

    @staticmethod
    def _delete_rows(conn: sqlite3.Connection, where: str, params: tuple) -> None:
        """Remove rows from the index (FTS5 'delete' commands with the old values), then from ``fts_docs``."""
        conn.execute(
            f"INSERT INTO fts_index (fts_index, rowid, {INDEXED})"
            f" SELECT 'delete', row_id, {INDEXED} FROM fts_docs WHERE {where}",
            params,
        )
        conn.execute(f"DELETE FROM fts_docs WHERE {where}", params)
        # One per event that removes rows, however many it found: a replay, which never indexed the text a
        # forget erased, counts the same as the live run (a rebuild gives the same projection).
        conn.execute("UPDATE fts_stats SET value = value + 1 WHERE name = 'deletions'")


def purge_deleted(conn: sqlite3.Connection) -> None:
    """Merge the index's segments, so that deleted rows' tokens leave the file (FTS5 keeps them until a merge)."""
    conn.execute("INSERT INTO fts_index (fts_index) VALUES ('optimize')")


# -- searching ---------------------------------------------------------------------

K1 = 1.2  # FTS5's bm25 constant k1
_BM25 = "bm25(fts_index, " + ", ".join(str(w) for w in COLUMN_WEIGHTS) + ")"
_WORD_SPEC = "{" + " ".join(WORD_COLUMNS) + "}"
#: Summed document frequency of the rare phrases scored in the first tier.
TIER_BUDGET = 5000
#: Past this summed frequency, rows holding only common phrases are not scored.
TIER_CAP = 5000
#: Index-wide best matches tried before the joined statement, per hit wanted.
CANDIDATES_PER_HIT = 4
MIN_CANDIDATES = 200
#: Below this share of the index's rows, a tenant is searched with the joined statement directly.
SMALL_TENANT_SHARE = 0.2


def query_phrases(query: str, terms: Sequence[str] | None = None) -> list[str]:
    """One column-filtered, escaped FTS5 phrase per content term of ``query``.

    Words (stopwords dropped, see :func:`~mnemolog.projections.fts.textsearch.content_terms`,
    or ``terms`` when given; a term written against CJK text gives its words)
    and the query's symbols as words (which no term holds, see
    :func:`~mnemolog.projections.fts.textsearch.symbol_words`) match the word
    columns; CJK bigrams of the query match ``cjk`` (single characters as
    prefixes, see :func:`~mnemolog.projections.fts.textsearch.cjk_match_expression`).
    """
    query = folded(query)
    chosen = content_terms(query) if terms is None else [folded(t).lower() for t in terms]
    words = [w for t in chosen for w in ([t] if not has_cjk(t) else [g for g in WORD_RE.findall(t) if g not in STOPWORDS])]
    words += symbol_words(query)
    phrases = [f"{_WORD_SPEC} : {escape_fts_term(w)}" for w in words if w.strip()]
    phrases += [f"cjk : {escape_fts_term(t)}" + (" *" if len(t) == 1 else "") for t in cjk_query_terms(query)]
    return list(dict.fromkeys(phrases))[:MAX_TERMS]


def match_expression(query: str, *, raw: bool = False) -> str | None:
    """The MATCH string searched for ``query`` (None: nothing searchable)."""
    if raw:
        return build_match(query, raw=True)
    phrases = query_phrases(query)
    return _or(phrases) if phrases else None


def _or(phrases: Sequence[str]) -> str:
    return "(" + " OR ".join(f"({p})" for p in phrases) + ")"


def fts_search_sql(
    tenant: str,
    query: str,
    *,
    limit: int = 50,
    as_of: int | None = None,
    raw: bool = False,
    filters: SearchFilters | None = None,
) -> tuple[str, tuple]:
    """The single SQL statement of a lexical search (the exact plan), with its parameters.

    Columns: ``memory_id, row_id, version, score`` where ``score`` is bm25
    with :data:`COLUMN_WEIGHTS` (lower is better), best first. Tenant,
    validity and ``filters`` sit in the WHERE of the statement that holds the
    LIMIT, so they never drop a match after the top ``limit`` were chosen.
    :func:`fts_search` runs cheaper statements that give the same answer.
    """
    match = match_expression(query, raw=raw)
    if match is None:
        return "SELECT NULL, NULL, NULL, NULL WHERE 0", ()
    return _statement(tenant, match, limit, as_of, filters)


def _statement(tenant, match, limit, as_of, filters) -> tuple[str, tuple]:
    if not tenant:
        raise ValueError("tenant must not be empty")
    valid, valid_params = head_clause(as_of, "d")
    where, where_params = filter_sql(filters, "d")
    sql = (
        f"SELECT d.memory_id, d.row_id, d.version, {_BM25} AS score"
        " FROM fts_index CROSS JOIN fts_docs AS d ON d.row_id = fts_index.rowid"
        f" WHERE fts_index MATCH ? AND d.tenant = ? AND {valid} AND {where}"
        " ORDER BY score, d.row_id LIMIT ?"
    )
    return sql, (match, tenant, *valid_params, *where_params, limit)


def fts_search(
    conn: sqlite3.Connection,
    tenant: str,
    query: str,
    *,
    limit: int = 50,
    as_of: int | None = None,
    raw: bool = False,
    filters: SearchFilters | None = None,
    exact: bool = False,
    terms: Sequence[str] | None = None,
) -> list[FtsHit]:
    """Lexical search of ``tenant``'s memories at the head (or ``as_of``), best first.

    Any text is a safe query: its content terms are quoted and OR-ed. Only
    ``raw=True`` passes FTS5 syntax through (FTS5 may then reject it with
    ``sqlite3.OperationalError``). The ranking is bm25 over the OR of the
    query's content terms (or the words ``terms``, e.g. from a query
    analysis; CJK bigrams still come from ``query``). A query of words is
    answered from the in-memory postings (the same ranking as the exact
    statement); ``exact=True`` runs the exact FTS5 statement instead, and
    skips the tiered plan (module docstring), which may leave out rows
    holding only very common terms. ``as_of`` a position, bm25's statistics
    are those of then (:mod:`.as_of_ranking`), but for ``raw`` and ``exact``.
    """
    if not tenant:
        raise ValueError("tenant must not be empty")
    if limit <= 0:
        return []
    stats = _DfStats.for_connection(conn)
    if raw:
        match = build_match(query, raw=True)
        rows = _run(conn, stats, tenant, match, limit, as_of, filters) if match else []
    else:
        query, terms = folded(query), None if terms is None else [folded(t) for t in terms]  # as the cjk column is
        phrases = query_phrases(query, terms)
        if not phrases:
            return []
        if not exact and not cjk_query_terms(query):
            chosen = content_terms(query) if terms is None else [t.lower() for t in terms]
            words = [w for w in dict.fromkeys(chosen + symbol_words(query)) if w.strip() and not has_cjk(w)][:MAX_TERMS]
            rows = PostingsIndex.for_connection(conn).search(conn, tenant, words, limit=limit, as_of=as_of, filters=filters)
            if rows is not None:
                return [FtsHit(m, r, v, -score, i) for i, (m, r, v, score) in enumerate(rows, 1)]
        if as_of is not None and not exact:
            rows = rank_as_of(conn, tenant, phrases, _BM25, limit, as_of, filters)  # bm25's statistics of then
            if rows is not None:
                return [FtsHit(m, r, v, -score, i) for i, (m, r, v, score) in enumerate(rows, 1)]
        if exact or len(phrases) == 1:
            rows = _run(conn, stats, tenant, _or(phrases), limit, as_of, filters)
        else:
            rows = _tiered(conn, stats, tenant, phrases, limit, as_of, filters)
    return [FtsHit(m, r, v, -score, i) for i, (m, r, v, score) in enumerate(rows, 1)]


def _run(conn, stats, tenant, match, limit, as_of, filters) -> list[tuple]:
    """Top ``limit`` rows for ``match``: the index's best matches first, else the joined statement.

    Scoring in the index alone costs about half of scoring joined rows. If at
    least ``limit`` of the index's best ``K`` matches pass tenant, validity
    and filters, they are the answer (every other match scores no better than
    those ``K``); otherwise the joined statement decides. A tenant holding a
    small share of the index goes to the joined statement directly.
    """
    if stats.tenant_share(conn, tenant) >= SMALL_TENANT_SHARE:
        bound = max(CANDIDATES_PER_HIT * limit, MIN_CANDIDATES)
        best = conn.execute(
            f"SELECT rowid, {_BM25} AS score FROM fts_index WHERE fts_index MATCH ? ORDER BY score, rowid LIMIT ?",
            (match, bound),
        ).fetchall()
        if not best:
            return []
        valid, valid_params = head_clause(as_of, "d")
        where, where_params = filter_sql(filters, "d")
        scores = dict(best)
        kept = conn.execute(
            "SELECT d.memory_id, d.row_id, d.version FROM json_each(?) AS j CROSS JOIN fts_docs AS d"
            f" ON d.row_id = j.value WHERE d.tenant = ? AND {valid} AND {where}",
            (_ids_encoder.encode(list(scores)).decode(), tenant, *valid_params, *where_params),
        ).fetchall()
        if len(kept) >= limit or len(best) < bound:
            rows = sorted(((m, r, v, scores[r]) for m, r, v in kept), key=lambda row: (row[3], row[1]))
            return rows[:limit]
    sql, params = _statement(tenant, match, limit, as_of, filters)
    return conn.execute(sql, params).fetchall()


def _tiered(conn, stats, tenant, phrases, limit, as_of, filters) -> list[tuple]:
    """Top ``limit`` of the OR of ``phrases`` without scoring every match.

    Phrases are split into rare ones ``S`` (matched by few rows) and common
    ones ``C``. Rows matching some of ``S`` are ranked exactly with two cheap
    statements: ``S AND C`` (full scores: bm25 sums per phrase, and each
    phrase appears once) and ``S`` alone (full scores for rows without a
    ``C`` term; lower scores for the others, which the first statement has).
    A row matching only ``C`` terms scores at most ``sum((k1 + 1) * idf(c))``;
    if the ``limit``-th score found is above that, the answer is exact.
    Otherwise ``S`` grows and the step repeats, up to the full OR, unless
    ``S`` would exceed :data:`TIER_CAP` matches while ``limit`` rows are
    already found: then those rows are the answer.
    """
    n_rows = stats.n_upper
    terms = sorted(((stats.df(conn, p), p) for p in phrases), key=lambda t: t[0])
    cut, total = 0, 0
    while cut < len(terms) and (cut == 0 or total + terms[cut][0] <= TIER_BUDGET):
        total += terms[cut][0]
        cut += 1
    while True:
        rare = _or([p for _, p in terms[:cut]])
        common = terms[cut:]
        if not common:
            return _run(conn, stats, tenant, rare, limit, as_of, filters)
        found = {row[1]: row for row in _run(conn, stats, tenant, rare, limit, as_of, filters)}
        both = f"{rare} AND {_or([p for _, p in common])}"
        found.update((row[1], row) for row in _run(conn, stats, tenant, both, limit, as_of, filters))
        ranked = sorted(found.values(), key=lambda r: (r[3], r[1]))[:limit]
        threshold = -ranked[-1][3] if len(ranked) == limit else 0.0
        bounds = [_upper_bound(n_rows, df) for df, _ in common]
        rest = sum(bounds)
        if threshold > rest:
            return ranked  # proven: no row of common terms only can enter
        # Move the rarest common phrases to S until the bound of the rest
        # fits under the threshold reached so far (it only rises as S grows).
        grown = cut
        for bound in bounds:
            if rest < threshold:
                break
            rest -= bound
            grown += 1
        if len(ranked) == limit and sum(df for df, _ in terms[:grown]) > TIER_CAP:
            return ranked  # best effort: rows holding only common terms are left out
        cut = grown


def _upper_bound(n_rows: int, df: int) -> float:
    """The most one phrase can add to a row's bm25 (FTS5's idf, floored as FTS5 does)."""
    idf = math.log((n_rows - df + 0.5) / (df + 0.5)) if n_rows > 0 else 0.0
    return (K1 + 1.0) * max(idf, 1e-6)


class _DfStats:
    """Per-database cache of phrase and tenant row counts (for planning and bounds).

    A bound stays valid while a cached frequency is at most the true one.
    Rows are only added between tenant drops, so the cache is cleared when
    ``fts_stats.deletions`` changes or the table shrank (a rebuild); an entry
    is refreshed once the table grew by a tenth. ``n_upper`` (the highest row
    id) is at least the row count FTS5 divides by.
    """

    _caches: dict[str, "_DfStats"] = {}
    _lock = threading.Lock()
    MAX_ENTRIES = 100_000

    def __init__(self) -> None:
        self.entries: dict[str, tuple[int, int]] = {}
        self.deletions = -1
        self.n_upper = 0

    @classmethod
    def for_connection(cls, conn: sqlite3.Connection) -> "_DfStats":
        key = database_key(conn)[1]
        with cls._lock:
            stats = cls._caches.setdefault(key, cls())
        n_upper = conn.execute("SELECT coalesce(max(row_id), 0) FROM fts_docs").fetchone()[0]
        found = conn.execute("SELECT value FROM fts_stats WHERE name = 'deletions'").fetchone()
        deletions = found[0] if found else 0
        if deletions != stats.deletions or n_upper < stats.n_upper or len(stats.entries) > cls.MAX_ENTRIES:
            stats.entries = {}
            stats.deletions = deletions
        stats.n_upper = n_upper
        return stats

    def _cached(self, key: str, count) -> int:
        found = self.entries.get(key)
        if found is not None and found[1] * 1.1 >= self.n_upper:
            return found[0]
        value = count()
        self.entries[key] = (value, self.n_upper)
        return value

    def df(self, conn: sqlite3.Connection, phrase: str) -> int:
        return self._cached(
            phrase, lambda: conn.execute("SELECT count(*) FROM fts_index WHERE fts_index MATCH ?", (phrase,)).fetchone()[0]
        )

    def tenant_share(self, conn: sqlite3.Connection, tenant: str) -> float:
        if self.n_upper == 0:
            return 1.0
        rows = self._cached(
            "\x00tenant:" + tenant,
            lambda: conn.execute("SELECT count(*) FROM fts_docs WHERE tenant = ?", (tenant,)).fetchone()[0],
        )
        return rows / self.n_upper
