"""The log's errors. Every one names what was wrong, so callers can show it as is."""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import sys
from typing import Iterator


class EventStoreError(Exception):
    """Base class of the log's errors."""


class ConcurrencyError(EventStoreError):
    """A stream's version was not the one the append expected."""

    def __init__(self, stream_id: str, expected: object, actual: int):
        self.stream_id = stream_id
        self.expected = expected
        self.actual = actual
        super().__init__(f"stream {stream_id!r} is at version {actual}, expected {expected}")


class IdempotencyConflict(EventStoreError):
    """An idempotency key was reused for different content (``forgotten``: for a request sealed with a data key
    a forget destroyed since, which no request can be compared with any more)."""

    def __init__(self, key: str, *, forgotten: bool = False):
        self.key = key
        if forgotten:
            super().__init__(
                f"idempotency key {key!r} was already used, for a request whose subject has been forgotten since:"
                " it can no longer be compared with this one; send it with a new idempotency key"
            )
        else:
            super().__init__(f"idempotency key {key!r} was already used for a different request")


class AppendOnlyViolation(EventStoreError):
    """Something tried to change or remove a stored event."""


class UnknownEventType(EventStoreError):
    """A stored event's type is not in the catalogue."""


class UpcastError(EventStoreError):
    """A stored event of an old schema version could not be brought up to date."""


class ImportRefused(EventStoreError):
    """An exported file does not hold together and was not imported."""


class KeyMissing(EventStoreError):
    """A sealed event names a data key that the key store never held (neither live nor forgotten)."""


class SealBroken(EventStoreError):
    """A sealed field does not authenticate: its ciphertext was altered or moved from another event."""


_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_PG_DISK_FULL = "53100"  # PostgreSQL's disk_full


def sqlite_error_is(exc: BaseException, codes: tuple[int, ...], *words: str) -> bool:
    """Whether ``exc`` (raw, or wrapped by SQLAlchemy as ``.orig``) is an SQLite error of one of the primary result
    ``codes`` (an extended code keeps its primary one in the low byte); one without a code, by a word of its message."""
    exc = getattr(exc, "orig", None) or exc
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in codes
    text = str(exc)
    return any(word in text for word in words)


_LOCK_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def is_lock_contention(exc: BaseException) -> bool:
    """True when ``exc`` is SQLite's "database is locked" / "busy", raw or wrapped by SQLAlchemy (``.orig``)."""
    return sqlite_error_is(exc, _LOCK_CODES, "locked", "busy")  # BUSY_SNAPSHOT, BUSY_RECOVERY, ... too


def is_storage_full(exc: BaseException) -> bool:
    """True when ``exc`` says the disk (or quota) holding the data is full: SQLite's "database or disk is full",
    raw or wrapped by SQLAlchemy, an ``OSError`` of ``ENOSPC`` or ``EDQUOT``, or PostgreSQL's ``disk_full``."""
    if sqlite_error_is(exc, (sqlite3.SQLITE_FULL,), "disk is full"):
        return True
    exc = getattr(exc, "orig", None) or exc
    if isinstance(exc, OSError):
        return exc.errno in _FULL_ERRNOS
    return getattr(exc, "sqlstate", None) == _PG_DISK_FULL


#: PostgreSQL's connection exceptions (class 08) and the server going away (admin or crash shutdown, starting up).
_PG_GONE = ("08", "57P01", "57P02", "57P03")


def is_database_unreachable(exc: BaseException) -> bool:
    """True when ``exc`` says the log's database server (PostgreSQL) could not be reached or went away: a connection
    SQLAlchemy found broken, or psycopg's ``OperationalError`` with no answer from the server or one of class 08."""
    if getattr(exc, "connection_invalidated", False):
        return True
    orig = getattr(exc, "orig", None) or exc
    psycopg = sys.modules.get("psycopg")  # not loaded: no error of it
    if psycopg is None or not isinstance(orig, psycopg.OperationalError):
        return False
    sqlstate = getattr(orig, "sqlstate", None)
    return sqlstate is None or sqlstate.startswith(_PG_GONE)


def name_database(exc: BaseException, path: str | os.PathLike) -> None:
    """Record on an SQLite error (raw, or wrapped by SQLAlchemy as ``.orig``) the database file it is about, for a
    message that names it (see :func:`database_file`); an error that names one already keeps it."""
    exc = getattr(exc, "orig", None) or exc
    if isinstance(exc, sqlite3.Error) and getattr(exc, "database_file", None) is None:
        exc.database_file = os.fspath(path)


@contextlib.contextmanager
def naming_database(path: str | os.PathLike) -> Iterator[None]:
    """Name ``path`` on any SQLite error raised inside (opening a database: it is not one, a directory, unreadable)."""
    try:
        yield
    except sqlite3.Error as exc:
        name_database(exc, path)
        raise


def database_file(exc: BaseException) -> str | None:
    """The database file an SQLite error is about, when the code that opened it named it (:func:`name_database`)."""
    return getattr(getattr(exc, "orig", None) or exc, "database_file", None)


class OutsideChange(RuntimeError):
    """Something outside the process changed a file it holds open (deleted it, put another in its place): no bug."""


def log_failure(logger, message: str, *args) -> None:
    """Log the exception being handled under ``message``: with its traceback, unless it is a full disk, a database
    that stayed busy past its lock wait (another process holding it) or an :class:`OutsideChange`, which are no bugs
    and would fill the log (every retry of a background loop) with the same one: then one warning line."""
    exc = sys.exc_info()[1]
    if exc is not None and (is_storage_full(exc) or is_lock_contention(exc) or isinstance(exc, OutsideChange)):
        logger.warning(message + ": %s", *args, exc)
    else:
        logger.exception(message, *args)
