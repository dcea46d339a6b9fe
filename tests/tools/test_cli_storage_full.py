"""The CLI on a full disk: one line, never a traceback; a write the log took says it was written.

``PRAGMA max_page_count`` at the database's size makes SQLite answer
"database or disk is full" as a full disk does, without filling one.
"""

from __future__ import annotations

import sqlite3

from mnemolog.eventstore import dialects
from mnemolog.projections import runner
from mnemolog.tools.cli import main

TEXT = "a memory long enough to need a page of its own " * 40


def _full_at_open(path: str) -> str:
    pages = sqlite3.connect(path).execute("PRAGMA page_count").fetchone()[0]
    return f"PRAGMA max_page_count={pages}"


def test_a_full_log_is_one_line_and_nothing_written(tmp_path, monkeypatch, capsys):
    data = tmp_path / "data"
    assert main(["--data-dir", str(data), "add", "a first memory"]) == 0
    full = _full_at_open(str(data / "events.db"))
    pragmas = dialects.sqlite_pragmas
    monkeypatch.setattr(dialects, "sqlite_pragmas", lambda *a, **k: [*pragmas(*a, **k), full])
    capsys.readouterr()
    assert main(["--data-dir", str(data), "add", TEXT * 10]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mnemolog: error: the disk holding the data directory is full") and err.count("\n") == 1, err
    monkeypatch.undo()
    assert main(["--data-dir", str(data), "stats", "--json"]) == 0
    assert '"events":1,' in capsys.readouterr().out


def test_a_write_the_projections_cannot_follow_says_it_was_written_in_one_line(tmp_path, monkeypatch, capsys):
    data = tmp_path / "data"
    assert main(["--data-dir", str(data), "add", "a first memory"]) == 0
    full = _full_at_open(str(data / "projections.db"))
    connect = runner.connect

    def full_projections(path, **kw):
        conn = connect(path, **kw)
        if not kw.get("readonly") and not kw.get("reader"):
            conn.execute(full)
        return conn

    monkeypatch.setattr(runner, "connect", full_projections)
    capsys.readouterr()
    assert main(["--data-dir", str(data), "add", TEXT * 10]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mnemolog: error: the write was committed (correlation ") and "do not run it again" in err, err
    assert err.count("\n") == 1, err
    monkeypatch.undo()
    assert main(["--data-dir", str(data), "stats", "--json"]) == 0
    assert '"events":2,' in capsys.readouterr().out
