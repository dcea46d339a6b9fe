"""FTS5's own tokenizer, run beside the postings index: the terms the index holds, for new rows and query words.

The postings (:mod:`.postings`) must hold exactly the terms FTS5 would, so
they are taken from FTS5 itself, through ``fts5vocab`` over a private
in-memory table, never from a tokenizer of our own.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence

from .. import text_caches
from .textsearch import CJK_GLOB, TOKENIZE_SQL

INDEXED_COLUMNS = ("text", "key", "tags", "background", "cjk")
#: A term as the index holds it: FTS5 cuts a token at 32,768 bytes, in a character's middle when it must, which is
#: no UTF-8 to decode; the first 8,000 characters of so long a word (of the text's and the query's alike) name it.
#: A token of nothing but marks the tokenizer removes (an accent standing alone) is an empty term, which FTS5 holds
#: and matches, and ``fts5vocab`` reports as NULL: the empty string here.
TERM_SQL = "coalesce(substr(term, 1, 8000), '')"
#: A token's bm25 column weight for a word phrase; the CJK bigrams of ``cjk`` count toward a row's length only,
#: its words (written against CJK text) weigh as the column does.
WEIGHT_SQL = (
    "CASE col WHEN 'text' THEN 1.0 WHEN 'key' THEN 2.0 WHEN 'tags' THEN 1.5 WHEN 'background' THEN 0.5"
    f" WHEN 'cjk' THEN (CASE WHEN term GLOB '{CJK_GLOB}' THEN 0.0 ELSE 1.0 END) ELSE 0.0 END"
)


class Tokenizer:
    """FTS5's tokenizer, run in a private in-memory database: the tokens FTS5 indexes.

    ``tokens(rows)`` yields ``(term, row_id, column)`` for every token of
    ``rows`` (``(row_id, text, key, tags, background, cjk)``); ``stems(word)``
    the tokens of one query word (cached).
    """

    def __init__(self) -> None:
        self.conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        cols = ", ".join(INDEXED_COLUMNS)
        self.conn.execute(f"CREATE VIRTUAL TABLE doc USING fts5({cols}, tokenize={TOKENIZE_SQL})")
        self.conn.execute("CREATE VIRTUAL TABLE doc_terms USING fts5vocab(doc, 'instance')")
        self.conn.execute(f"CREATE VIRTUAL TABLE word USING fts5(w, tokenize={TOKENIZE_SQL})")
        self.conn.execute("CREATE VIRTUAL TABLE word_terms USING fts5vocab(word, 'instance')")
        self.lock = threading.Lock()
        self.cache: dict[str, tuple[str, ...]] = {}
        text_caches.register(self)

    def drop_text(self) -> None:
        self.cache = {}

    def tokens(self, rows: Sequence[tuple]) -> list[tuple[str, int, str]]:
        with self.lock:
            self.conn.execute("BEGIN")
            try:
                self.conn.executemany(f"INSERT INTO doc (rowid, {', '.join(INDEXED_COLUMNS)}) VALUES (?,?,?,?,?,?)", rows)
                found = self.conn.execute(f"SELECT {TERM_SQL}, doc, {WEIGHT_SQL} FROM doc_terms").fetchall()  # by term, then row id
                self.conn.execute("DELETE FROM doc")
            finally:
                self.conn.execute("COMMIT")
            return found

    def stems(self, word: str) -> tuple[str, ...]:
        found = self.cache.get(word)
        if found is not None:
            return found
        with self.lock:
            self.conn.execute("INSERT INTO word (rowid, w) VALUES (1, ?)", (word,))
            terms = self.conn.execute(f"SELECT {TERM_SQL} FROM word_terms ORDER BY offset").fetchall()
            self.conn.execute("DELETE FROM word")
        found = tuple(t for (t,) in terms)
        if len(self.cache) > 100_000:
            self.cache.clear()
        self.cache[word] = found
        return found
