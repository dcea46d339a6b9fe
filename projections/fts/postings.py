"""An in-memory postings index over the FTS projection, ranked exactly like FTS5's bm25.

FTS5 scores every row that matches an OR of a query's words and has no top-k
pruning: at 100,000 memories a recall query spent most of its time in the
tiered FTS5 statements of :func:`~mnemolog.projections.fts.projector.fts_search`.
This index answers the same question (the top ``limit`` rows of the OR of a
query's word phrases over the word columns, ranked by
``bm25(fts_index, 1, 2, 1.5, 0.5, 1)``) from postings held in memory, with
numpy, in well under a millisecond at that size.

What it holds
-------------
One entry per row of ``fts_docs`` (every state of every memory of every
tenant): its row id, tenant, memory id, version, validity positions, status
and token count; and per stemmed term the rows that hold it in a word column
(``text``, ``key``, ``tags``, ``background``, and ``cjk`` for the words
written against CJK text, not its bigrams) with the term's column-weighted
frequency in that row. Tokens are FTS5's own: rows are tokenised by an FTS5
table with the projection's tokenizer
(:data:`~.textsearch.TOKENIZER`) in a private in-memory database, and so are the query's
words, so that the index and the query stem alike and the scores equal
FTS5's (same idf, same average row length, same column weights).

Every server process holds its own copy, so it is held in numpy arrays, not
Python objects: a segment's terms as one sorted buffer
(:mod:`~mnemolog.projections.fts.postings_vocabulary`), frequencies and row
lengths as float16 where that is exact. At 200,000 memories of ``mnemolog
bench recall`` (a term of its own in each) a process that loaded the saved
file held 28 MB for it, against 58 MB with a dict of terms and float32.

How it stays a projection
-------------------------
It is derived from ``fts_docs``, which the FTS projector builds from the log.
Before each search it compares the FTS
projection's generation (a new one marks a rebuild), its deletion counter
(a tenant drop) and its highest row id with what it last read. A new
generation or a drop reloads it whole; a higher row id adds the rows past
the last one read and closes the rows those new versions replaced (the FTS
projector closes a memory's row only when it opens the memory's next one, at
the same position). All of it is read in one read transaction with the
search, so a search sees the projection exactly as ``fts_docs`` holds it
when the search starts: read-your-writes holds wherever it holds for
``fts_docs``. Each process keeps its own copy.

Saved beside its checkpoint
---------------------------
Building the index from ``fts_docs`` reads every token back from FTS5 (about
25 s at a million memories), and each server process builds its own. So, as
``vectors.usearch`` is, it is saved in the data directory (``fts.postings``,
beside ``projections.db``): disposable, never a source of truth, written
atomically (a temporary file, then ``os.replace``) by :meth:`PostingsIndex.save`
once loaded at a server's start and at a clean stop. The file records what
it covers: the FTS projection's generation, its deletion counter, its
checkpoint position and the last row id (with that row's ``valid_from``) it
holds. A process loading it checks all of them against ``projections.db``
in the read transaction of its first sync, and then adds the rows past that
row id exactly as it follows new writes (each row once: rows up to it come
from the file, rows after it from ``fts_docs``). A missing, unreadable
(zip CRCs catch a torn write) or stale file (another generation: a
rebuild; another counter: a drop; a checkpoint or row the database no
longer has: an older ``projections.db``) is ignored and the index is built
from ``fts_docs`` as before.

Scoring, and its pruning to the rows that can reach the top, live in
:mod:`mnemolog.projections.fts.postings_scoring`.

Tenant, ``as_of`` and filters
-----------------------------
Memory ids stay in ``fts_docs`` (they would be most of the index's size):
the rows chosen are named by one lookup by row id.

Rows are scored, then kept when their tenant matches and they were valid at
the head (``valid_to`` unset) or at ``as_of`` (validity intervals), and when
their status passes. A search ``as_of`` a position scores with bm25's
statistics of then (see ``PostingsScoring._statistics``). Any other filter is
checked in SQL on ``fts_docs``, best-scored rows first, until ``limit`` rows
passed: since every matching row was scored, a filter never drops a row an
exact filtered search returns.
"""

from __future__ import annotations

import ctypes
import fcntl
import gc
import json
import logging
import os
import sqlite3
import threading
import zipfile
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Sequence

import msgspec
import numpy as np

from .. import text_caches
from ..filters import DEFAULT_FILTERS, SearchFilters, filter_sql
from .postings_scoring import PostingsScoring
from .postings_segments import Columns, Segment, narrow
from .postings_tokens import INDEXED_COLUMNS, TERM_SQL, WEIGHT_SQL, Tokenizer
from .postings_vocabulary import Vocabulary

__all__ = ["POSTINGS_FILE", "PostingsIndex"]

log = logging.getLogger(__name__)

#: The saved index, in the directory of ``projections.db``.
POSTINGS_FILE = "fts.postings"
#: The saved file's layout; a file of another format is ignored (rebuilt).
FILE_FORMAT = 6  # 3: the words of the cjk column are postings; 4: and their NFKC forms; 5: marks inside words; 6: long words
#: No row is valid past this position (stands for an unset ``valid_to``).
_OPEN = np.iinfo(np.int64).max
_ids_encoder = msgspec.json.Encoder()


def release_freed_memory() -> bool:
    """Hand the heap's free pages back to the operating system (glibc's ``malloc_trim``); whether it could.

    Building the index from ``fts_docs`` passes every token through Python
    objects, chunk by chunk: once they are freed, glibc keeps the pages for
    later allocations, and a server process that built the index held about
    40 MB more at 200,000 memories than one that loaded the saved file.
    """
    try:
        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):  # not glibc
        return False


@contextmanager
def _no_gc():
    """Millions of small tuples are built and dropped at once: the cyclic collector would walk them over and over."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextmanager
def _file_lock(path: Path, *, wait: bool):
    """The saved file's lock across the processes of a data directory: one writer or remover at a time.

    Yields whether it is held: without ``wait``, False when another process holds it.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a+b") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True


class PostingsIndex(PostingsScoring):
    """The in-memory postings of one ``projections.db`` (module docstring); one per process and database."""

    _indexes: dict[str, "PostingsIndex"] = {}
    _registry_lock = threading.Lock()
    #: Small segments are merged once there are more than this many.
    MAX_SEGMENTS = 8

    def __init__(self, path: Path | None = None) -> None:
        #: The saved index (None: never saved, e.g. an in-memory database).
        self.path = path
        self.lock = threading.Lock()
        self.tokenizer = Tokenizer()
        self._reset()
        self.saved: tuple | None = None  # (state, last row id) of the file on disk, as this process last wrote or read it
        self.restored = False  # whether the rows came from the saved file (else from fts_docs)
        self.used = False  # whether this process has brought it up to date once: a follower keeps it so (see lag)
        text_caches.register(self)

    def drop_text(self) -> None:
        """Let go of every term (a forget: the erased memories' words are among them): at once when no search
        holds the index, else by the next search, which reloads it (as the forget's new deletion count makes it
        do anyway). Never waits for a search."""
        if self.lock.acquire(blocking=False):
            try:
                self._reset()
            finally:
                self.lock.release()
        else:
            self.state = None

    def _reset(self) -> None:
        self.state: tuple | None = None  # (generation, deletions)
        self.position = 0  # the FTS checkpoint position the index reflects
        self.cols = Columns()
        self.segments: list[Segment] = []
        self.tenants: dict[str, int] = {}
        self.statuses: dict[str, int] = {}
        self.total_length = 0.0
        self._block_sums = np.zeros(1, np.float64)  # running sums of the rows' lengths by block (see PostingsScoring._length_of_first)
        self._sums = np.zeros(0, np.float64)
        self._bitmaps: dict[str, tuple[int, np.ndarray]] = {}  # frequent terms' rows, least recently used first
        self._known: dict[str, tuple[int, dict]] = {}  # figures about terms' postings (see _Term), by index size
        self._buffers = np.empty((3, 0), np.float64)

    @classmethod
    def save_loaded(cls, conn: sqlite3.Connection) -> bool:
        """Save the index of ``conn``'s database if this process loaded one (see :meth:`save`); whether it wrote."""
        path = database_key(conn)[0]
        with cls._registry_lock:
            index = cls._indexes.get(path) if path else None
        if index is None:
            return False
        with index.lock:
            return index._save(conn)

    # -- keeping up with fts_docs ----------------------------------------------------

    @staticmethod
    def _database_state(conn: sqlite3.Connection) -> tuple[tuple, tuple | None]:
        """``((generation, deletions), checkpoint row)`` of the FTS projection as ``conn`` reads it: a new state means a reload."""
        try:
            checkpoint = conn.execute("SELECT generation, position FROM checkpoints WHERE name = 'fts'").fetchone()
        except sqlite3.OperationalError:  # a bare FTS database (no runner): nothing marks a rebuild but the counter
            checkpoint = None
        found = conn.execute("SELECT value FROM fts_stats WHERE name = 'deletions'").fetchone()
        return (checkpoint[0] if checkpoint else None, found[0] if found else 0), checkpoint

    @classmethod
    def discard_file(cls, conn: sqlite3.Connection) -> None:
        """Remove the saved file of ``conn``'s database (an erasure made it stale, and it still holds the erased rows' terms).

        A process that loaded the index writes it afresh at its next save.
        """
        path = database_key(conn)[0]
        if not path:
            return
        with cls._registry_lock:
            index = cls._indexes.get(path)
        file = Path(path).with_name(POSTINGS_FILE)
        # The locks in save's order: this process's index, then the file's (a save under way anywhere finishes first).
        with index.lock if index is not None else nullcontext(), _file_lock(file, wait=True):
            if index is not None:
                index.saved = None
            file.unlink(missing_ok=True)
            file.with_name(file.name + ".tmp").unlink(missing_ok=True)

    @classmethod
    def for_connection(cls, conn: sqlite3.Connection) -> "PostingsIndex":
        """The index of ``conn``'s database in this process, made on first use."""
        path, key = database_key(conn)
        with cls._registry_lock:
            index = cls._indexes.get(key)
            if index is None:
                index = cls._indexes[key] = cls(Path(path).with_name(POSTINGS_FILE) if path else None)
            return index

    @classmethod
    def made_for(cls, conn: sqlite3.Connection) -> "PostingsIndex | None":
        """The index of ``conn``'s database if this process has made one (None: it never searched it)."""
        with cls._registry_lock:
            return cls._indexes.get(database_key(conn)[1])

    def _sync(self, conn: sqlite3.Connection) -> None:
        """Bring the index to ``fts_docs`` as the current read transaction sees it (lock held).

        All or nothing: a failure part way leaves the index empty and unread, to be built afresh by the next
        search, never holding rows without their postings (nor saved so).
        """
        try:
            self._catch_up(conn)
        except BaseException:
            self._reset()
            raise
        self.used = True

    def lag(self, conn: sqlite3.Connection) -> tuple[int, int]:
        """``(top, behind)``: the last ``fts_docs`` row id, and how many row ids past the index's last it is
        (all of ``top``, at least 1, when the index must start over: a rebuild, a forget); ``(0, 0)`` in a
        process that never searched, which need not hold the index at all. A few cheap queries, for
        a follower that catches the index up off the search path (see ``assembly.IndexFollower``)."""
        if not self.used:
            return 0, 0
        try:
            top = conn.execute("SELECT coalesce(max(row_id), 0) FROM fts_docs").fetchone()[0]
            state, _ = self._database_state(conn)
        except sqlite3.OperationalError:
            return 0, 0  # the projection's tables do not exist (yet)
        with self.lock:
            if state != self.state:
                return top, max(top, 1)
            return top, max(0, top - self._last_row_id())

    def _catch_up(self, conn: sqlite3.Connection) -> None:
        state, checkpoint = self._database_state(conn)
        if self.state is None and state != self.state and self.path is not None:
            self._restore(conn, state, checkpoint[1] if checkpoint else 0)
        self.position = checkpoint[1] if checkpoint else 0
        last = int(self.cols.row_id[self.cols.n - 1]) if self.cols.n else 0
        if state != self.state:
            self.restored = False
            self._reset()
            self.state = state
            # The whole projection: the rows, and their tokens as the FTS5 index holds them (same snapshot),
            # read in chunks so that no more than a chunk is ever held as Python objects.
            with _no_gc():
                rows = conn.execute(_META_SQL + " ORDER BY row_id")
                for chunk in iter(lambda: rows.fetchmany(_CHUNK), []):
                    self._add_rows(chunk)
                conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.fts_index_instances USING fts5vocab(main, fts_index, 'instance')")
                tokens = conn.execute(f"SELECT {TERM_SQL}, doc, {WEIGHT_SQL} FROM temp.fts_index_instances")
                self._add_postings(0, iter(lambda: tokens.fetchmany(_CHUNK), []))
            release_freed_memory()
        elif conn.execute("SELECT coalesce(max(row_id), 0) FROM fts_docs").fetchone()[0] != last:
            fresh = conn.execute(_ROWS_SQL + " WHERE row_id > ? ORDER BY row_id", (last,)).fetchall()
            self._close(conn, [(r[1], r[2], r[4]) for r in fresh if r[3] > 1])
            first = self.cols.n
            with _no_gc():
                self._add_rows(fresh)
                self._add_postings(first, [self.tokenizer.tokens([(r[0], r[7], r[8], r[9], r[10], r[11]) for r in fresh])])

    def _close(self, conn: sqlite3.Connection, opened: list[tuple[str, str, int]]) -> None:
        """Close the rows that the new versions ``(tenant, memory_id, valid_from)`` replaced."""
        if not opened:
            return
        closed = conn.execute(
            "SELECT d.row_id, d.valid_to FROM json_each(?) AS j CROSS JOIN fts_docs AS d"
            " ON d.tenant = j.value ->> 0 AND d.memory_id = j.value ->> 1 AND d.valid_to = j.value ->> 2",
            (_ids_encoder.encode(opened).decode(),),
        ).fetchall()
        cols = self.cols
        ids = cols.row_id[: cols.n]
        for row_id, valid_to in closed:
            i = int(np.searchsorted(ids, row_id))
            if i < cols.n and ids[i] == row_id:
                cols.valid_to[i] = valid_to

    def _add_rows(self, rows: list[tuple]) -> None:
        """Append ``rows`` (in row id order) to the per-row arrays."""
        if not rows:
            return
        cols = self.cols
        first = cols.n
        end = first + len(rows)
        cols.reserve(len(rows))
        tenants, statuses = self.tenants, self.statuses
        cols.row_id[first:end] = [r[0] for r in rows]
        cols.tenant[first:end] = [tenants.setdefault(r[1], len(tenants)) for r in rows]
        cols.version[first:end] = [r[3] for r in rows]
        cols.valid_from[first:end] = [r[4] for r in rows]
        cols.valid_to[first:end] = [_OPEN if r[5] is None else r[5] for r in rows]
        cols.status[first:end] = [statuses.setdefault(r[6], len(statuses)) for r in rows]
        cols.n = end

    def _add_postings(self, first: int, chunks) -> None:
        """One segment from the tokens of the rows from index ``first`` on.

        ``chunks`` yields lists of FTS5 instances ``(term, row_id, column
        weight)``, ordered by term, then row id (fts5vocab's order). Each
        chunk is turned into postings at once (a term cut by a chunk's end is
        carried to the next), so that no more than a chunk is ever held as
        Python objects; the parts hold disjoint, ordered runs of terms and
        are joined into one segment.
        """
        cols = self.cols
        count = cols.n - first
        if count <= 0:
            return
        lengths = np.zeros(count, np.float64)
        parts = []
        carry: list = []
        for chunk in chunks:
            if carry:
                chunk = carry + chunk
            if not chunk:
                continue
            last, cut = chunk[-1][0], len(chunk)
            while cut and chunk[cut - 1][0] == last:
                cut -= 1
            carry = chunk[cut:]
            if cut:
                parts.append(self._postings(first, chunk[:cut], lengths))
        if carry:
            parts.append(self._postings(first, carry, lengths))
        cols.length[first : cols.n] = lengths
        self.total_length += float(lengths.sum())
        if not parts:
            return
        vocabulary: dict[str, int] = {}
        starts, offset = [], 0
        for terms, bounds, rows, _ in parts:
            base = len(vocabulary)
            vocabulary.update((term, base + t) for term, t in terms.items())
            starts.append(bounds[:-1] + offset)
            offset += len(rows)
        starts.append(np.array([offset], np.int64))
        rows = np.concatenate([part[2] for part in parts])
        freqs = np.concatenate([part[3] for part in parts])
        segment = Segment(vocabulary, np.concatenate(starts), rows, narrow(freqs), narrow(cols.length[rows]))
        self.segments.append(segment)
        if len(self.segments) > self.MAX_SEGMENTS:
            # Merge the smaller half with each other (the large first segment stays until it is outgrown).
            keep = self.segments[:1] if len(self.segments[0].rows) > sum(len(s.rows) for s in self.segments[1:]) else []
            self.segments = keep + [Segment.merge(self.segments[len(keep) :])]

    def _postings(self, first: int, tokens: list[tuple], lengths: np.ndarray):
        """``(vocabulary, bounds, rows, freqs)`` of whole terms' tokens; each token counts toward its row's length."""
        cols = self.cols
        terms, docs, weights = zip(*tokens)
        vocabulary: dict[str, int] = {}
        term_ids = np.fromiter((vocabulary.setdefault(t, len(vocabulary)) for t in terms), np.int32, len(terms))
        at = np.searchsorted(cols.row_id[first : cols.n], np.array(docs, np.int64))
        lengths += np.bincount(at, minlength=len(lengths))
        new_pair = np.empty(len(term_ids), bool)
        new_pair[0] = True
        new_pair[1:] = (term_ids[1:] != term_ids[:-1]) | (at[1:] != at[:-1])
        starts = np.flatnonzero(new_pair)
        freqs = np.add.reduceat(np.array(weights, np.float64), starts)  # the weights of one (term, row) are contiguous
        word = freqs > 0  # a (term, row) seen only as a CJK bigram is no match of a word phrase
        pair_terms, pair_rows, freqs = term_ids[starts][word], at[starts][word] + first, freqs[word]
        bounds = np.searchsorted(pair_terms, np.arange(len(vocabulary) + 1), side="left").astype(np.int64)
        return vocabulary, bounds, pair_rows.astype(np.int32), freqs.astype(np.float32)

    def load(self, conn: sqlite3.Connection, *, save: bool = False) -> int:
        """Bring the index up to ``fts_docs`` now (a server does it at start); the rows it holds.

        With ``save``, write the file too when it holds less than the index
        now does (module docstring).
        """
        with self.lock:
            with one_snapshot(conn):
                self._sync(conn)
            if save:
                self._save(conn)
            return self.cols.n

    # -- the saved file -------------------------------------------------------------------

    def _last_row_id(self) -> int:
        return int(self.cols.row_id[self.cols.n - 1]) if self.cols.n else 0

    def save(self, conn: sqlite3.Connection) -> bool:
        """Write the file if the index was loaded and holds more than the file does; whether it wrote.

        Not when ``conn``'s database (read outside any transaction) has had an erasure or a drop, or a
        rebuild, that the index has not read yet (another process's, say): it would write the removed
        rows' terms back. That look is taken under the file's lock, after which a forget's removal of
        the file (:meth:`discard_file`, which takes the lock) can only come after this write.
        """
        with self.lock:
            return self._save(conn)

    def _save(self, conn: sqlite3.Connection) -> bool:
        if self.path is None or self.state is None or (self.state, self._last_row_id()) == self.saved:
            return False
        cols, n = self.cols, self.cols.n
        meta = {
            "format": FILE_FORMAT,
            "generation": self.state[0],
            "deletions": self.state[1],
            "position": self.position,
            "last_row_id": self._last_row_id(),
            "last_valid_from": int(cols.valid_from[n - 1]) if n else 0,
            "rows": n,
            "total_length": self.total_length,
            "tenants": sorted(self.tenants, key=self.tenants.__getitem__),
            "statuses": sorted(self.statuses, key=self.statuses.__getitem__),
            "segments": len(self.segments),
        }
        arrays = {"meta": np.frombuffer(json.dumps(meta).encode(), np.uint8)}
        arrays.update((f"col_{name}", getattr(cols, name)[:n]) for name in Columns._ARRAYS)
        for k, seg in enumerate(self.segments):
            arrays[f"seg{k}_blob"] = np.frombuffer(seg.terms.blob, np.uint8)
            arrays[f"seg{k}_offsets"], arrays[f"seg{k}_ids"] = seg.terms.offsets, seg.terms.ids
            for name in ("starts", "rows", "freqs", "lengths"):
                arrays[f"seg{k}_{name}"] = getattr(seg, name)
        with _file_lock(self.path, wait=False) as held:
            if not held:  # another process of this data directory is writing it
                return False
            if self._database_state(conn)[0] != self.state:  # see save: read under the lock, never from an older snapshot
                return False
            tmp = self.path.with_name(self.path.name + ".tmp")  # one writer at a time (the lock): a torn one is overwritten
            try:
                with open(tmp, "wb") as out:
                    np.savez(out, **arrays)
                os.replace(tmp, self.path)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
        self.saved = (self.state, meta["last_row_id"])
        return True

    def _restore(self, conn: sqlite3.Connection, state: tuple, position: int) -> None:
        """Take the saved file's rows and postings if it matches ``projections.db`` (lock held, in the sync's snapshot)."""
        if not self.path.exists():
            return
        try:
            with np.load(self.path, allow_pickle=False) as saved:
                meta = json.loads(saved["meta"].tobytes())
                reason = self._stale(conn, meta, state, position)
                if reason is not None:
                    log.info("not loading %s: %s", self.path, reason)
                    return
                cols = Columns()
                for name in Columns._ARRAYS:
                    setattr(cols, name, saved[f"col_{name}"])
                cols.n = int(meta["rows"])
                segments = []
                for k in range(int(meta["segments"])):
                    terms = Vocabulary(saved[f"seg{k}_blob"].tobytes(), saved[f"seg{k}_offsets"], saved[f"seg{k}_ids"])
                    arrays = [saved[f"seg{k}_{name}"] for name in ("starts", "rows", "freqs", "lengths")]
                    segments.append(Segment(terms, *arrays))
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            log.info("not loading %s: unreadable (%s)", self.path, exc)
            return
        if any(len(getattr(cols, name)) != cols.n for name in Columns._ARRAYS):
            return
        self.cols, self.segments = cols, segments
        self.tenants = {t: i for i, t in enumerate(meta["tenants"])}
        self.statuses = {s: i for i, s in enumerate(meta["statuses"])}
        self.total_length = float(meta["total_length"])
        self._block_sums = np.zeros(1, np.float64)
        self.state, self.position = state, int(meta["position"])
        self.saved = (state, int(meta["last_row_id"]))
        self.restored = True

    @staticmethod
    def _stale(conn: sqlite3.Connection, meta: dict, state: tuple, position: int) -> str | None:
        """Why the saved file does not describe ``projections.db`` as this snapshot holds it, or None."""
        if meta.get("format") != FILE_FORMAT:
            return f"format {meta.get('format')!r}, expected {FILE_FORMAT}"
        if (meta.get("generation"), meta.get("deletions")) != tuple(state):
            return "another generation of the projection, or a tenant dropped since"
        if int(meta.get("position", 0)) > position:
            return f"it covers position {meta.get('position')}, the projection only {position}"
        last = int(meta.get("last_row_id", 0))
        if last:
            row = conn.execute("SELECT valid_from FROM fts_docs WHERE row_id = ?", (last,)).fetchone()
            if row is None or row[0] != meta.get("last_valid_from"):
                return f"row {last} differs"
        return None

    # -- searching ----------------------------------------------------------------------

    def search(
        self,
        conn: sqlite3.Connection,
        tenant: str,
        words: Sequence[str],
        *,
        limit: int,
        as_of: int | None = None,
        filters: SearchFilters | None = None,
    ) -> list[tuple[str, int, int, float]] | None:
        """The top ``limit`` rows of the OR of ``words`` as ``(memory_id, row_id, version, bm25)``, best first.

        ``bm25`` is FTS5's (negative; lower is better) and ties go to the
        lower row id, as in the exact FTS5 statement. ``words`` are the
        query's phrases over the word columns, one phrase each (a repeated
        word is one phrase). None when a word is not one token (a phrase:
        FTS5 answers it).
        """
        words = list(dict.fromkeys(w for w in words if w and not w.isspace()))
        stems = [self.tokenizer.stems(w.replace("\x00", " ")) for w in words]
        if any(len(s) > 1 for s in stems):
            return None
        terms = [s[0] for s in stems if s]
        filters = filters or DEFAULT_FILTERS
        with one_snapshot(conn), self.lock:
            self._sync(conn)
            keep = self._passing(tenant, as_of, filters)
            if keep is None:
                return []
            postings = self._postings_of(terms, as_of)
            scored = None
            if len(postings) > 1 and msgspec.structs.replace(filters, status=None) == SearchFilters(status=None):
                # Every filter is checked here (no SQL one): the best rows that pass bound what the others must reach.
                scored = self._score_pruned(postings, keep, limit)
            if scored is None:
                scored = self._score(postings)
            if scored is None:
                return []
            rows, scores = scored
            return self._ranked(conn, rows, scores, keep, limit, filters)

    def _passing(self, tenant: str, as_of: int | None, filters: SearchFilters):
        """A function of row indexes to a mask: the rows of ``tenant`` valid at the head or ``as_of`` whose status passes (None: no row can)."""
        cols = self.cols
        tenant_id = self.tenants.get(tenant)
        if tenant_id is None:
            return None
        statuses = None
        if filters.status:
            statuses = np.zeros(len(self.statuses) + 1, bool)
            statuses[[self.statuses[s] for s in filters.status if s in self.statuses]] = True

        def keep(at: np.ndarray) -> np.ndarray:
            mask = cols.tenant[at] == tenant_id
            if as_of is None:
                mask &= cols.valid_to[at] == _OPEN
            else:
                mask &= (cols.valid_from[at] <= as_of) & (cols.valid_to[at] > as_of)
            if statuses is not None:
                mask &= statuses[cols.status[at]]
            return mask

        return keep

    def _ranked(self, conn, rows, scores, keep, limit, filters) -> list[tuple[str, int, int, float]]:
        """The best ``limit`` of the scored rows that ``keep`` passes (tenant, validity, status) and ``filters``' others pass, best first.

        Ties go to the lower row id (row indexes ascend with row ids). The
        best rows are checked first; only when too few of them pass are the
        others checked, all of them, in score order, so nothing that passes
        is ever skipped.
        """
        cols = self.cols
        if len(rows) == 0:
            return []
        rest = msgspec.structs.replace(filters, status=None)
        where, params = filter_sql(rest, "d") if rest != SearchFilters(status=None) else (None, ())

        def passing(chosen: np.ndarray) -> np.ndarray:
            return chosen[keep(rows[chosen])]

        def best_first(chosen: np.ndarray) -> np.ndarray:
            return chosen[np.lexsort((rows[chosen], -scores[chosen]))]

        out: list[tuple[int, float]] = []  # (row index, score)

        def take(chosen: np.ndarray) -> bool:
            for start in range(0, len(chosen), 500):
                part = chosen[start : start + 500]
                if where is not None:
                    ids = cols.row_id[rows[part]].tolist()
                    found = conn.execute(
                        f"SELECT d.row_id FROM fts_docs AS d WHERE d.row_id IN ({','.join('?' * len(ids))}) AND {where}",
                        (*ids, *params),
                    )
                    passed = {r for (r,) in found}
                    part = [i for i, r in zip(part.tolist(), ids) if r in passed]
                for i in part if isinstance(part, list) else part.tolist():
                    out.append((int(rows[i]), -float(scores[i])))
                    if len(out) == limit:
                        return True
            return False

        want = max(2 * limit, 64)
        if want < len(rows):
            top = np.argpartition(-scores, want - 1)[:want]
            # Every row tied with the cut takes part, so that ties break by row id as FTS5's ORDER BY does.
            top = np.flatnonzero(scores >= scores[top].min())
        else:
            top = np.arange(len(rows))
        if not take(best_first(passing(top))) and len(top) < len(rows):
            others = np.ones(len(rows), bool)
            others[top] = False
            take(best_first(passing(np.flatnonzero(others))))
        # Memory ids are not held in memory (they would be most of its size): the chosen rows' are read.
        ids = [int(cols.row_id[row]) for row, _ in out]
        names = dict(conn.execute(f"SELECT row_id, memory_id FROM fts_docs WHERE row_id IN ({','.join('?' * len(ids))})", ids).fetchall()) if ids else {}
        return [(names[row_id], row_id, int(cols.version[row]), score) for row_id, (row, score) in zip(ids, out)]


#: Rows read at a time when the index loads.
_CHUNK = 20_000
_META_SQL = "SELECT row_id, tenant, NULL, version, valid_from, valid_to, status FROM fts_docs"
_ROWS_SQL = f"SELECT row_id, tenant, memory_id, version, valid_from, valid_to, status, {', '.join(INDEXED_COLUMNS)} FROM fts_docs"


def database_key(conn: sqlite3.Connection) -> tuple[str, str]:
    """``(path, key)``: the file of ``conn``'s main database ("" in memory), and what a process's caches of it
    are kept under (the path, or the connection for a database in memory)."""
    path = next((row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main"), "")
    return path, path or f"memory:{id(conn)}"


@contextmanager
def one_snapshot(conn: sqlite3.Connection):
    """Read the index and ``fts_docs`` in one read transaction (the caller's, if it holds one)."""
    began = conn.in_transaction
    if not began:
        conn.execute("BEGIN")
    try:
        yield
    finally:
        if not began:
            conn.execute("COMMIT")
