"""The backups a tenant drop writes under ``<data_dir>/backups``: their names, their lock, their rotation.

Each is a whole tenant's export, named ``<YYYYmmddTHHMMSS.NNNNNNNNN>-<label>.jsonl``
(the time it was written, then the tenant's :func:`backup_label`), so that
names sort by time and each tenant's are told from every other's. A drop
writes ``<name>.partial``, syncs and renames it into place, then appends the
tombstone naming it; :func:`writing_backup` removes what drops killed
between those steps left behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import time
from pathlib import Path, PurePosixPath
from typing import Callable, Iterable, Iterator

#: What comes before the tenant's label in a backup's file name: ``YYYYmmddTHHMMSS.NNNNNNNNN-`` (the time it was written).
BACKUP_STAMP_CHARS = 26


def backup_label(tenant: str) -> str:
    """The tenant as it appears in a backup's file name: letters, digits and ``-_.`` kept, the rest ``_``,
    at most 64 characters; a name that had to change also carries the start of its SHA-256, so that
    two tenants never share a label and any tenant (however long, whatever its characters) can be dropped.
    So does a name that ends as such a label does (``a_b-c14cddc033f6``, the label of ``a/b``): kept as it
    was, it was that other tenant's label, and its drop removed the other's backup as one of its own."""
    safe = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "-_.") else "_" for ch in tenant)[:64]
    if safe != tenant or _DIGESTED.search(tenant):
        safe += "-" + hashlib.sha256(tenant.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return safe


_DIGESTED = re.compile(r"-[0-9a-f]{12}\Z")  # how a label that carries a digest ends


def new_backup_path(backups: Path, tenant: str) -> Path:
    """Where a drop of ``tenant`` writes its backup now (the folder made if need be)."""
    backups.mkdir(parents=True, exist_ok=True)
    now = time.time_ns()  # names sort by time, so that rotation removes the oldest
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now // 1_000_000_000))
    return backups / f"{stamp}.{now % 1_000_000_000:09d}-{backup_label(tenant)}.jsonl"


def backups_of(backups: Path, tenant: str) -> list[Path]:
    """The tenant's backups, oldest first (another tenant's never count, whatever its name)."""
    label = backup_label(tenant)
    return sorted(p for p in backups.glob("*.jsonl") if p.name[BACKUP_STAMP_CHARS : -len(".jsonl")] == label)


def unnamed_backups(backups: Path, tenant: str, named: Iterable[str]) -> list[Path]:
    """The tenant's backups that none of ``named`` (its tombstones' backups) names.

    Each was left by a drop killed after its backup was in place, before its
    tombstone: a copy of a tenant that was not dropped then. A tombstone
    written before backups were named relative to the data directory names
    its own by an absolute path: a backup is known by its file name.
    """
    names = {PurePosixPath(b).name for b in named}
    return [p for p in backups_of(backups, tenant) if p.name not in names]


@contextlib.contextmanager
def writing_backup(backups: Path, left_behind: Callable[[], Iterable[Path]]) -> Iterator[None]:
    """Hold the backups folder's lock (shared) while a drop writes its backup and appends the tombstone naming it.

    First, when no drop of any process is between those two (none holds the
    lock), remove what drops killed midway left: the partial backups
    (``*.partial``, never renamed into place nor rotated away), and the
    whole ones ``left_behind()`` lists (no tombstone names them). A drop in
    progress elsewhere holds the lock, so its backup, not named yet, is never
    taken for one left behind.
    """
    lock = os.open(backups, os.O_RDONLY)  # the folder itself is locked: no lock file among the backups
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pass  # another drop is writing its backup or its tombstone: what it wrote is not stale
        else:
            for stale in [*backups.glob("*.partial"), *left_behind()]:
                stale.unlink(missing_ok=True)
        fcntl.flock(lock, fcntl.LOCK_SH)
        yield
    finally:
        os.close(lock)


def rotate_backups(backups: Path, *, keep: int, written: Path, tenant: str) -> None:
    """Remove the tenant's oldest backups beyond ``keep`` (at least 1); ``written``, the newest, always stays.

    Only the tenant's backups count and go: another tenant's drops, however
    many, never remove this tenant's backups.
    """
    older = [p for p in backups_of(backups, tenant) if p.name != written.name]
    for old in older[: max(0, len(older) - (max(1, keep) - 1))]:
        old.unlink(missing_ok=True)
