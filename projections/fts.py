"""The full-text projection (SQLite FTS5) and the lexical search over it.

Tables (in ``projections.db``):

- ``fts_docs``: the content table, one row per state of a memory (status
  changes included) with validity positions, the filter columns and the
  indexed text columns;
- ``fts_index``: an *external-content* FTS5 table over ``fts_docs``
  (``content='fts_docs', content_rowid='row_id'``), columns
  ``text, key, tags, background, cjk``, tokenised with
  ``porter unicode61 remove_diacritics 2``. ``cjk`` holds the character
  bigrams of the CJK parts (:func:`projections.textsearch.cjk_segment`), so a
  two-character Chinese word is found inside an unbroken sentence.

Rows are never updated in their indexed columns: closing a row only sets
``valid_to``, which the index does not hold. A dropped tenant's rows are
first removed from the index with FTS5 ``'delete'`` commands carrying the
old values, then deleted from ``fts_docs``, so the index stays consistent.

Search plan, chosen by measurement
----------------------------------
100,000 memories of one tenant (synthetic sentences of 8-16 words over a
Zipf vocabulary of 20,000 words plus function words), natural-language
queries of 3-5 content words with question and function words, limit 50,
2 shared cores, p50 over 300 queries (see :data:`PLAN_NOTES`):

==========================================================  ========
plan                                                        p50
==========================================================  ========
naive: every word OR-ed, join + ``ORDER BY bm25`` LIMIT 50   PLACEHOLDER
==========================================================  ========

The chosen plan: PLACEHOLDER
"""

from __future__ import annotations

import sqlite3
from typing import Sequence

import msgspec

from eventstore import RecordedEvent
from eventstore import catalogue as c
from eventstore.model import MemoryContent

from .filters import SearchFilters, filter_sql, tag_field
from .memory_rows import Previous, close_rows, dropped_tenants, head_clause, transitions
from .textsearch import build_match, cjk_segment

__all__ = ["FtsHit", "FtsProjector", "fts_search", "fts_search_sql"]

_tags_encoder = msgspec.json.Encoder()
_tags_decoder = msgspec.json.Decoder(tuple[str, ...])

#: bm25 weights of the indexed columns: text, key, tags, background, cjk.
COLUMN_WEIGHTS = (1.0, 2.0, 1.5, 0.5, 1.0)
#: The word part of a query matches these columns; CJK bigrams match ``cjk``.
WORD_COLUMNS = ("text", "key", "tags", "background")

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
    schema_version = 1

    def create(self, conn: sqlite3.Connection) -> None:
        conn.executescript(
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
            CREATE VIRTUAL TABLE IF NOT EXISTS fts_index USING fts5(
                {INDEXED},
                content='fts_docs', content_rowid='row_id',
                tokenize='porter unicode61 remove_diacritics 2'
            );
            """
        )
        weights = ", ".join(str(w) for w in COLUMN_WEIGHTS)
        conn.execute("INSERT INTO fts_index (fts_index, rank) VALUES ('rank', ?)", (f"bm25({weights})",))

    def drop(self, conn: sqlite3.Connection) -> None:
        conn.executescript("DROP TABLE IF EXISTS fts_index; DROP TABLE IF EXISTS fts_docs;")

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
                memory=row[0],
                memory_type=row[1],
                key=row[2],
                tags=_tags_decoder.decode(row[3]),
                background=row[4],
                collection=row[5],
                doc_type=row[6],
                doc_id=row[7],
                model=row[8],
            )
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
            inserts.append(
                (
                    row.tenant,
                    row.memory_id,
                    row.version,
                    row.position,
                    row.status,
                    content.memory_type,
                    tag_field(content.tags),
                    _tags_encoder.encode(content.tags).decode(),
                    content.collection,
                    content.doc_type,
                    content.doc_id,
                    content.model,
                    row.created_at,
                    row.updated_at,
                    content.memory,
                    content.key,
                    content.background,
                    cjk_segment(" ".join(t for t in (content.memory, content.key, content.background) if t)),
                )
            )

    @staticmethod
    def _drop_tenant(conn: sqlite3.Connection, tenant: str) -> None:
        conn.execute(
            f"INSERT INTO fts_index (fts_index, rowid, {INDEXED})"
            f" SELECT 'delete', row_id, {INDEXED} FROM fts_docs WHERE tenant = ?",
            (tenant,),
        )
        conn.execute("DELETE FROM fts_docs WHERE tenant = ?", (tenant,))


# -- searching ---------------------------------------------------------------------


def match_expression(query: str, *, raw: bool = False, mode: str = "or", drop_stopwords: bool = True) -> str | None:
    """The FTS5 MATCH string for a user query (None when nothing is searchable)."""
    return build_match(query, raw=raw, mode=mode, column=WORD_COLUMNS, cjk_column="cjk", drop_stopwords=drop_stopwords)


def fts_search_sql(
    tenant: str,
    match: str,
    *,
    limit: int = 50,
    as_of: int | None = None,
    filters: SearchFilters | None = None,
    candidates: int | None = None,
) -> tuple[str, tuple]:
    """The SQL of one lexical search for a ready MATCH expression.

    Columns: ``memory_id, row_id, version, rank`` (FTS5 rank: bm25 with
    :data:`COLUMN_WEIGHTS`, lower is better). Tenant, validity and
    ``filters`` sit in the same WHERE as the LIMIT. With ``candidates``, only
    the best ``candidates`` matches of the whole index are considered (see
    :func:`fts_search` for why that stays exact).
    """
    valid, valid_params = head_clause(as_of, "d")
    where, where_params = filter_sql(filters, "d")
    if candidates is None:
        source = "SELECT rowid AS rid, rank FROM fts_index WHERE fts_index MATCH ?"
        source_params: tuple = (match,)
    else:
        source = "SELECT rowid AS rid, rank FROM fts_index WHERE fts_index MATCH ? ORDER BY rank LIMIT ?"
        source_params = (match, candidates)
    sql = (
        f"SELECT d.memory_id, d.row_id, d.version, m.rank FROM ({source}) AS m"
        " JOIN fts_docs AS d ON d.row_id = m.rid"
        f" WHERE d.tenant = ? AND {valid} AND {where}"
        " ORDER BY m.rank, d.row_id LIMIT ?"
    )
    return sql, (*source_params, tenant, *valid_params, *where_params, limit)


def fts_search(
    conn: sqlite3.Connection,
    tenant: str,
    query: str,
    *,
    limit: int = 50,
    as_of: int | None = None,
    raw: bool = False,
    filters: SearchFilters | None = None,
    _plan: str = "bounded",
) -> list[FtsHit]:
    """Lexical search of ``tenant``'s memories at the head (or ``as_of``), best first."""
    if not tenant:
        raise ValueError("tenant must not be empty")
    if limit <= 0:
        return []
    match = match_expression(query, raw=raw, drop_stopwords=_plan != "naive")
    if match is None:
        return []
    if _plan in ("naive", "stop"):
        rows = _run(conn, fts_search_sql(tenant, match, limit=limit, as_of=as_of, filters=filters))
    else:
        bound = max(limit * 8, 400)
        rows = _run(conn, fts_search_sql(tenant, match, limit=limit, as_of=as_of, filters=filters, candidates=bound))
        if len(rows) < limit:
            rows = _run(conn, fts_search_sql(tenant, match, limit=limit, as_of=as_of, filters=filters))
    return [FtsHit(m, r, v, -rank, i) for i, (m, r, v, rank) in enumerate(rows, 1)]


def _run(conn: sqlite3.Connection, sql_params: tuple[str, tuple]) -> list[tuple]:
    sql, params = sql_params
    return conn.execute(sql, params).fetchall()
