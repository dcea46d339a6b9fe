"""A ``projections.db`` that SQLite finds damaged: set aside and made anew, so that every projection is rebuilt.

The projections are disposable: the log rebuilds them, identically. A file
SQLite cannot read ("database disk image is malformed", "file is not a
database": a disk's bad sector, a copy taken while it was written) would
otherwise fail every command, ``mnemolog rebuild`` included. When opening it
fails so, the runner moves it (and its ``-wal`` and ``-shm``) aside as
``projections.db.damaged`` (the last one kept, for a look), and starts on a
new file, which it then rebuilds from the log like a deleted one.

Several processes may open the data directory at once (a server's
workers): under a lock file, each looks again before it moves anything, so
a file another process has already made anew is left alone.

The vector index (``vectors.usearch``) is set aside the same way, by
:func:`move_aside` under the index's own lock, when its bytes do not match
the digest its checkpoint recorded (see :mod:`.vectors.index`).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import sqlite3
from pathlib import Path
from typing import Iterator

from mnemolog.eventstore.errors import sqlite_error_is

log = logging.getLogger(__name__)

_DAMAGED_CODES = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def is_damaged(exc: BaseException) -> bool:
    """True when ``exc`` is SQLite saying the file is no database, or a damaged one."""
    return sqlite_error_is(exc, _DAMAGED_CODES, "malformed", "not a database")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold the lock that every process of the data directory takes before it moves or removes ``path``'s copies."""
    with open(path.with_name(path.name + ".lock"), "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _readable(path: Path) -> bool:
    """Whether SQLite reads ``path`` (missing counts as readable: it is made anew)."""
    if not path.exists():
        return True
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    except sqlite3.DatabaseError:
        return False
    try:
        return conn.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    except sqlite3.DatabaseError:
        return False
    finally:
        conn.close()


def set_aside(path: Path, error: BaseException) -> bool:
    """Move the damaged ``path`` (with its ``-wal`` and ``-shm``) to ``<name>.damaged``, unless another process
    has made it anew meanwhile; True when it was moved."""
    with _locked(path):
        if _readable(path):
            return False
        move_aside(path, ("", "-wal", "-shm"))
    log.warning("%s was damaged (%s): set aside as %s.damaged; every projection is rebuilt from the log", path, error, path.name)
    return True


def move_aside(path: Path, suffixes: tuple[str, ...] = ("",)) -> None:
    """Move ``path`` (and each ``<name><suffix>`` there is) to ``<name>.damaged<suffix>``, over the last one set
    aside; the caller holds ``<name>.lock``, the lock every process takes before it moves or removes them."""
    for suffix in suffixes:
        found = path.with_name(path.name + suffix)
        if found.exists():
            os.replace(found, path.with_name(f"{path.name}.damaged{suffix}"))


def discard_orphans(path: Path) -> None:
    """Remove ``path``'s ``-wal`` and ``-shm`` when ``path`` itself is gone: deleted while another process had it
    open (a server's worker), they are still that file's. A new file made beside them was taken by SQLite for
    theirs ("disk I/O error"): a worker started again after the deletion failed at each start, until the server
    gave up on it. The process that has them open keeps them; they hold the deleted file's text."""
    if path.exists():
        return
    with _locked(path):
        if not path.exists():
            for suffix in ("-wal", "-shm"):
                path.with_name(path.name + suffix).unlink(missing_ok=True)


def discard_set_aside(path: Path) -> None:
    """Remove the copy of ``path`` set aside as damaged (with its ``-wal`` and ``-shm``): a forget's scrub, since
    whatever of it is still readable holds the projected text of every subject, the forgotten one's too."""
    with _locked(path):
        for suffix in ("", "-wal", "-shm"):
            path.with_name(f"{path.name}.damaged{suffix}").unlink(missing_ok=True)
