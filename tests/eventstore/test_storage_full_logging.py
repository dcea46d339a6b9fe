"""A background loop's failure on a full disk is one warning line, not a traceback at every retry."""

from __future__ import annotations

import errno
import logging

from mnemolog.eventstore.errors import log_failure

log = logging.getLogger("mnemolog.test")


def _logged(caplog, error: Exception) -> logging.LogRecord:
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="mnemolog.test"):
        try:
            raise error
        except Exception:
            log_failure(log, "catch-up failed (attempt %d)", 3)
    [record] = caplog.records
    return record


def test_a_full_disk_is_one_warning_line_and_anything_else_keeps_its_traceback(caplog):
    full = _logged(caplog, OSError(errno.ENOSPC, "No space left on device"))
    assert full.levelno == logging.WARNING and full.exc_info is None
    assert full.getMessage() == "catch-up failed (attempt 3): [Errno 28] No space left on device"
    bug = _logged(caplog, KeyError("x"))
    assert bug.levelno == logging.ERROR and bug.exc_info is not None and bug.getMessage() == "catch-up failed (attempt 3)"


def test_a_database_that_stays_busy_is_one_warning_line(caplog):
    """Another process holding the projections (a rebuild, a long import) made every round of the server's catch-up
    log a full traceback until it let go: waiting on a lock is no bug."""
    import sqlite3

    busy = _logged(caplog, sqlite3.OperationalError("database is locked"))
    assert busy.levelno == logging.WARNING and busy.exc_info is None
    assert busy.getMessage() == "catch-up failed (attempt 3): database is locked"
    other = _logged(caplog, sqlite3.OperationalError("no such table: graph_nodes"))
    assert other.levelno == logging.ERROR and other.exc_info is not None
