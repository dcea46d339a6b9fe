"""The HNSW index over ``vec_docs``: a per-process accelerator, saved beside its checkpoint.

The index (usearch, cosine, int8 storage by default) holds one entry per
distinct vector state, keyed by the ``vec_docs`` row id that introduced the
vector (``vector_of``); status changes share their vector and never touch it.
It is disposable: ``projections.db`` holds the vectors, and anything odd
about the files means a rebuild from ``vec_docs``.

Files in the data directory:

- ``vectors.usearch``: the index;
- ``vectors.usearch.json``: its checkpoint: the last ``vec_docs`` row id
  synced, the runner's generation of the ``vectors`` projection (it changes
  on every rebuild of the projection), the embedder name, the dimension, the
  entry count, the tenant-drop counter seen and the SHA-256 of the index file;
  while a save is under way, also (as ``saving``) the checkpoint of the new
  file being put in place.

:meth:`VectorIndex.open` loads both and checks them against each other and
against ``projections.db``; a missing, stale (other generation, embedder or
dimension) or unreadable index is rebuilt. usearch trusts the file it loads:
a graph with flipped bits (a bad sector, a copy taken while it was written)
loads without an error, and a search then dies in native code, taking the
process with it, and every restart. So the file is handed to usearch only
when its bytes match a digest its checkpoint records (with the state recorded
beside that digest); one that matches none is damaged, set aside as
``vectors.usearch.damaged`` (the last one kept, for a look; a forget's scrub
removes it) with one warning, and rebuilt from ``vec_docs`` (the check of an
index of 100,000 vectors of 384 dimensions, a 66 MB file, took 55 to 70 ms on
2 cores shared with other load, beside the 0.13 s usearch took to load it).
:meth:`VectorIndex.sync` adds the rows past the checkpoint in batches (call
it after each commit of the ``vectors`` projection:
:meth:`VectorIndex.after_commit_hook`), and removes the entries of dropped
tenants. :meth:`VectorIndex.save` writes the files atomically and durably
(each a temporary file, synced, then renamed, then the directory synced), in
three renames: the checkpoint of the file in place with the new file's as
``saving``, then the new index, then its checkpoint alone. A crash or power
loss at any point leaves an index file that one of the recorded states
describes, which the next open loads without a warning (nor a rebuild, unless
that state is stale): an older file with its own older row id, so that the
sync adds what it lacks, never twice.

Defaults, from measurements at 100,000 hashing-embedder vectors of 256
dimensions: int8 storage (as accurate as f16 there once the neighbours are
rescored with the float32 vectors from ``vec_docs``, and faster to build),
connectivity 32 and search expansion 256 (recall@10 of the rescored top 0.99;
connectivity 16 gave 0.97). The loaded index took 118 MB; building it took
27 s on 2 cores and loading it 0.1 s. A process that had loaded it and run
vector and lexical searches over 100,000 memories used 249 MB RSS.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import json
import logging
import os
import shutil
import sqlite3
import threading
import weakref
from pathlib import Path
from typing import Callable

import numpy as np
from usearch.index import Index

from mnemolog.eventstore.files import file_sha256, replace_durably

from ..damaged import move_aside
from .projector import ForeignVectors

__all__ = ["INDEX_FILE", "VectorIndex", "current_generation"]

log = logging.getLogger(__name__)

INDEX_FILE = "vectors.usearch"
FORMAT = 2  # 2: the checkpoint holds the file's sha256
SYNC_BATCH = 10_000


def _close_at_exit(ref: "weakref.ref[VectorIndex]") -> None:
    index = ref()
    if index is not None:
        index.close()


def current_generation(conn: sqlite3.Connection, name: str = "vectors") -> str | None:
    """The runner's generation id of a projection (None without a checkpoint)."""
    try:
        row = conn.execute("SELECT generation FROM checkpoints WHERE name = ?", (name,)).fetchone()
    except sqlite3.OperationalError:
        return None
    return row[0] if row else None


def _erasures(conn: sqlite3.Connection) -> int:
    """The ``vectors`` projection's erasure counter (a forget moves it; 0 before its tables exist)."""
    try:
        row = conn.execute("SELECT value FROM vec_stats WHERE name = 'erasures'").fetchone()
    except sqlite3.OperationalError:
        return 0
    return row[0] if row else 0


def _states(meta: dict) -> list[dict]:
    """What a checkpoint describes: its own index file, and the one of the save it names as under way (``saving``)."""
    saving = meta.get("saving")
    return [meta, saving] if isinstance(saving, dict) else [meta]


def _stale(state: dict, expected: tuple[tuple[str, object], ...]) -> str | None:
    """Why an index of checkpoint ``state`` does not belong to ``projections.db`` and this index's options, or None."""
    for key, value in expected:
        if state.get(key) != value:
            return f"stale: {key} is {state.get(key)!r}, expected {value!r}"
    return None


class VectorIndex:
    """usearch HNSW over ``vec_docs`` vectors; thread-safe."""

    def __init__(
        self,
        path: Path | str,
        *,
        embedder_name: str,
        dim: int,
        dtype: str = "i8",
        connectivity: int = 32,
        expansion_add: int = 128,
        expansion_search: int = 256,
        exhaustive: bool = False,
    ):
        self.path = Path(path)
        #: Brute force inside the index instead of the graph walk (tests, tiny indexes).
        self.exhaustive = exhaustive
        self.embedder_name = embedder_name
        self.dim = int(dim)
        self.options = {
            "dtype": dtype,
            "connectivity": connectivity,
            "expansion_add": expansion_add,
            "expansion_search": expansion_search,
        }
        self.generation: str | None = None
        self.synced_row_id = 0
        self.deletions = 0
        self.erasures = 0  # vec_stats.erasures seen: a forget makes the index start over, see _sync
        self.rebuilt_because: str | None = None
        self._lock = threading.RLock()
        self._closed = False
        self._index = self._new_index()
        # usearch adds vectors on its own native threads: an interpreter that
        # exits in the middle of an add aborts. Wait for the batch at exit.
        atexit.register(_close_at_exit, weakref.ref(self))

    def _new_index(self) -> Index:
        o = self.options
        return Index(
            ndim=self.dim,
            metric="cos",
            dtype=o["dtype"],
            connectivity=o["connectivity"],
            expansion_add=o["expansion_add"],
            expansion_search=o["expansion_search"],
        )

    @property
    def sidecar(self) -> Path:
        return self.path.with_name(self.path.name + ".json")

    # -- opening -------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path | str, conn: sqlite3.Connection, *, embedder_name: str, dim: int, **options) -> "VectorIndex":
        """Load the saved index if it matches ``projections.db``, else rebuild it; then sync.

        ``path`` is the index file or the data directory (``vectors.usearch`` inside).
        """
        path = Path(path)
        if path.is_dir():
            path = path / INDEX_FILE
        index = cls(path, embedder_name=embedder_name, dim=dim, **options)
        with index._lock:
            with index._files_locked():
                reason = index._load(conn)
            if reason is not None:
                index.rebuilt_because = reason
                log.info("rebuilding the vector index %s: %s", path, reason)
                index._reset(current_generation(conn))
            added = index._sync(conn)
            if reason is not None or added:
                index.save(conn)
        return index

    def _load(self, conn: sqlite3.Connection) -> str | None:
        """Load the files; the reason they cannot be used, or None."""
        if not self.path.exists() or not self.sidecar.exists():
            return "no saved index"
        try:
            meta = json.loads(self.sidecar.read_text())
            if not isinstance(meta, dict):
                raise ValueError("not an object")
        except (OSError, ValueError) as exc:
            return f"unreadable checkpoint ({exc})"
        generation = current_generation(conn)
        expected = (
            ("erasures", _erasures(conn)),  # a forget since it was saved: it may hold the erased vectors
            ("format", FORMAT),
            ("embedder", self.embedder_name),
            ("dim", self.dim),
            ("dtype", self.options["dtype"]),
            ("connectivity", self.options["connectivity"]),
            ("generation", generation),
        )
        states = _states(meta)
        if all(_stale(state, expected) for state in states):  # no need to read the file
            return _stale(meta, expected)
        try:
            digest = file_sha256(self.path)
        except OSError as exc:
            return f"unreadable index ({exc})"
        state = next((state for state in states if state.get("sha256") == digest), None)
        if state is None and meta.get("sha256") is None:  # a save began where no checkpoint was: nothing described this file
            return "index file not described by its checkpoint"
        if state is None:
            return self._damaged()
        if (stale := _stale(state, expected)) is not None:
            return stale
        try:
            loaded = Index.restore(str(self.path))
        except (RuntimeError, OSError, ValueError) as exc:  # usearch raises plain RuntimeErrors on damaged files
            return f"unreadable index ({exc})"
        if loaded is None or loaded.ndim != self.dim or len(loaded) != state.get("count"):
            return "index file does not match its checkpoint"
        loaded.expansion_search = self.options["expansion_search"]
        loaded.expansion_add = self.options["expansion_add"]
        self._index = loaded
        self.generation = generation
        self.synced_row_id = int(state.get("synced_row_id", 0))
        self.deletions = int(state.get("deletions", 0))
        self.erasures = int(state.get("erasures", 0))
        return None

    def _damaged(self) -> str:
        """Set the index file aside (the caller holds the files' lock), warn once, and say why it is rebuilt."""
        move_aside(self.path)
        log.warning(
            "%s matches no digest its checkpoint recorded (damaged): set aside as %s.damaged;"
            " the vector index is rebuilt from projections.db", self.path, self.path.name,
        )  # fmt: skip
        return "index file does not match its checkpoint's digest"

    def _reset(self, generation: str | None) -> None:
        self._index = self._new_index()
        self.generation = generation
        self.synced_row_id = 0
        self.deletions = 0
        self.erasures = 0

    # -- syncing -------------------------------------------------------------------

    def is_current(self, conn: sqlite3.Connection) -> bool:
        """True while the index belongs to the projection generation in ``conn``."""
        return self.generation == current_generation(conn)

    def sync(self, conn: sqlite3.Connection) -> int:
        """Add the rows past the checkpoint (rebuild after a projection rebuild); entries added.

        usearch adds them on one thread. On several, entries added at once are
        linked without seeing each other, and near-alike ones (as the hashing
        embedder gives texts sharing their words) were left where no search
        reaches them: a few in 3,000 missed a search for their own vector, a
        semantic search for a memory's exact text among them, after a first
        build on two cores. Added on one thread, the index found every one, and
        is the same index whenever it is built from the same rows.
        """
        with self._lock:
            return self._sync(conn)

    def lag(self, conn: sqlite3.Connection) -> tuple[int, int]:
        """``(top, behind)``: the last ``vec_docs`` row id, and how many row ids past the checkpoint it is.

        One cheap query (the table's largest rowid), for a follower deciding
        whether a sync is due. An index of another generation is behind by
        all of ``top`` (at least 1, so that it is reset even when empty).
        """
        try:
            top = conn.execute("SELECT coalesce(max(row_id), 0) FROM vec_docs").fetchone()[0]
        except sqlite3.OperationalError:
            return 0, 0  # the projection's tables do not exist (yet)
        if not self.is_current(conn) or _erasures(conn) != self.erasures:
            return top, max(top, 1)  # another generation, or a forget: the index starts over
        return top, max(0, top - self.synced_row_id)

    def close(self) -> None:
        """Stop syncing and saving; returns once an add in progress has finished."""
        self._closed = True
        with self._lock:
            pass

    def _sync(self, conn: sqlite3.Connection) -> int:
        if self._closed:
            return 0
        generation = current_generation(conn)
        if generation != self.generation:
            self._reset(generation)
        try:
            top = conn.execute("SELECT coalesce(max(row_id), 0) FROM vec_docs").fetchone()[0]
            deletions = conn.execute("SELECT value FROM vec_stats WHERE name = 'deletions'").fetchone()
        except sqlite3.OperationalError:
            return 0  # the projection's tables do not exist (yet)
        deletions = deletions[0] if deletions else 0
        erasures = _erasures(conn)
        if erasures != self.erasures:
            # usearch's remove leaves the vector bytes in the saved file: after a forget the
            # index starts over from vec_docs, so the next save writes none of the erased ones.
            self._reset(generation)
            self.erasures = erasures
        if deletions != self.deletions:
            self._remove_dropped(conn)
            self.deletions = deletions
        added = 0
        while self.synced_row_id < top and not self._closed:
            rows = conn.execute(
                "SELECT row_id, vector FROM vec_docs WHERE row_id > ? AND row_id <= ? AND vector_of = row_id"
                " ORDER BY row_id LIMIT ?",
                (self.synced_row_id, top, SYNC_BATCH),
            ).fetchall()
            if not rows:
                self.synced_row_id = top
                break
            keys = np.fromiter((r[0] for r in rows), dtype=np.uint64, count=len(rows))
            if len(rows[0][1]) != 4 * self.dim:
                raise ForeignVectors(
                    f"vec_docs holds {len(rows[0][1]) // 4}-dimension vectors; this index is for {self.dim}"
                    f" ({self.embedder_name}): open it with the projection's embedder"
                )
            matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), self.dim)
            fresh = ~np.asarray(self._index.contains(keys), dtype=bool)
            if fresh.any():
                self._index.add(keys[fresh], matrix[fresh], threads=1)
                added += int(fresh.sum())
            self.synced_row_id = int(rows[-1][0]) if len(rows) == SYNC_BATCH else top
        return added

    def _remove_dropped(self, conn: sqlite3.Connection) -> None:
        if not len(self._index):
            return
        keys = np.asarray(self._index.keys, dtype=np.uint64)
        live: set[int] = set()
        for start in range(0, len(keys), 50_000):
            chunk = keys[start : start + 50_000]
            live.update(
                r[0]
                for r in conn.execute(
                    "SELECT d.row_id FROM json_each(?) AS j CROSS JOIN vec_docs AS d ON d.row_id = j.value",
                    (json.dumps([int(k) for k in chunk]),),
                )
            )
        gone = np.array([k for k in keys.tolist() if k not in live], dtype=np.uint64)
        if len(gone):
            self._index.remove(gone)

    def after_commit_hook(self, connect: Callable[[], sqlite3.Connection]) -> Callable[[str, int], None]:
        """A runner ``after_commit`` hook that syncs after the ``vectors`` projection commits."""

        def hook(name: str, position: int) -> None:
            if name == "vectors":
                self.sync(connect())

        return hook

    # -- searching and saving ----------------------------------------------------------

    def __len__(self) -> int:
        return len(self._index)

    def search(self, vector: np.ndarray, count: int) -> np.ndarray:
        """Keys (``vector_of`` row ids) of about the ``count`` nearest entries, nearest first."""
        with self._lock:
            if not len(self._index):
                return np.empty(0, dtype=np.uint64)
            found = self._index.search(
                np.asarray(vector, dtype=np.float32), min(count, len(self._index)), exact=self.exhaustive
            )
            return np.asarray(found.keys, dtype=np.uint64)

    @contextlib.contextmanager
    def _files_locked(self):
        """Hold the data directory's lock on the index files.

        Several server processes may share a data directory: the index file
        and its checkpoint must be written, and read, as one pair.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_name(self.path.name + ".lock"), "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def save(self, conn: sqlite3.Connection | None = None) -> bool:
        """Write the index and its checkpoint, each atomically, under the files' lock; whether it wrote.

        The checkpoint names the new file (``saving``) before the file is put in place, beside the one in place,
        and then alone: a kill at any point leaves a file that the checkpoint on disk describes.

        With ``conn`` (read outside any transaction), not when ``projections.db`` has moved past what the
        index holds in a way that syncing cannot add: another generation (a rebuild), or a forget whose
        erased vectors it still holds. Another process may have committed either, and scrubbed the file,
        since this index was synced: the file is left as it is (the next open rebuilds from ``vec_docs``).
        """
        with self._lock, self._files_locked():
            if self._closed:
                return False
            if conn is not None and (current_generation(conn), _erasures(conn)) != (self.generation, self.erasures):
                log.info("not saving the vector index %s: projections.db was rebuilt or had a forget since it was synced", self.path)
                return False
            tmp = self.path.with_name(self.path.name + ".tmp")
            try:
                self._index.save(str(tmp))
            except RuntimeError as exc:  # usearch says only that the stream failed: say where, and whether the disk is full
                tmp.unlink(missing_ok=True)
                full = shutil.disk_usage(tmp.parent).free < self._index.serialized_length
                code = errno.ENOSPC if full else errno.EIO
                raise OSError(code, f"could not write the vector index ({os.strerror(code) if full else exc})", str(tmp)) from exc
            saving = self._checkpoint(file_sha256(tmp))
            self._write_checkpoint({**self._in_place(), "saving": saving})  # the file in place, and the one about to be
            replace_durably(tmp, self.path)  # on the disk before the checkpoint that describes it alone
            self._write_checkpoint(saving)
            return True

    def _checkpoint(self, digest: str) -> dict:
        """The checkpoint of this index saved as a file of SHA-256 ``digest``."""
        return {
            "format": FORMAT,
            "embedder": self.embedder_name,
            "dim": self.dim,
            "dtype": self.options["dtype"],
            "connectivity": self.options["connectivity"],
            "generation": self.generation,
            "synced_row_id": self.synced_row_id,
            "deletions": self.deletions,
            "erasures": self.erasures,
            "count": len(self._index),
            "sha256": digest,
        }

    def _in_place(self) -> dict:
        """The checkpoint of the index file in place (the caller holds the files' lock): the one on disk, or, when
        it names a save under way that was cut short after putting its file in place, that save's ({} without one).
        """
        try:
            meta = json.loads(self.sidecar.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(meta, dict):
            return {}
        saving = meta.pop("saving", None)
        if isinstance(saving, dict) and self.path.exists() and file_sha256(self.path) == saving.get("sha256"):
            return saving
        return meta

    def _write_checkpoint(self, meta: dict) -> None:
        tmp = self.sidecar.with_name(self.sidecar.name + ".tmp")
        tmp.write_text(json.dumps(meta, indent=1))
        replace_durably(tmp, self.sidecar)

    def memory_bytes(self) -> int:
        return int(self._index.memory_usage)
