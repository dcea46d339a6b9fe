"""Opening a log while another process holds its write lock.

A process that opens a data directory whose log is at the newest schema
only reads its revision: it takes no write lock, so a read-only command
(``mnemolog get``, ``log``, ``verify``, ``export``) beside a long write of
another process (an import, a big batch) answers from its snapshot at once,
as any read of the log does, instead of waiting for that write and failing
with "database is locked" when it lasts longer than the lock wait.
"""

from __future__ import annotations

import sqlite3

from mnemolog.eventstore import EventStore
from mnemolog.eventstore.settings import Settings
from tests.serving import clean_env, run_cli

QUICK_LOCK_WAIT = Settings({"busy_timeout": "0.2"}, env={})


def _holding_the_write_lock(data) -> sqlite3.Connection:
    """Another process's writer, in the middle of its transaction."""
    conn = sqlite3.connect(str(data / "events.db"), isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    return conn


def test_a_log_at_the_newest_schema_opens_and_reads_while_another_writer_holds_its_lock(tmp_path):
    data = tmp_path / "data"
    assert run_cli(data, "add", "a note written before").returncode == 0
    writer = _holding_the_write_lock(data)
    try:
        with EventStore.open(data, settings=QUICK_LOCK_WAIT) as store:
            assert store.last_position() == 1
    finally:
        writer.rollback()
        writer.close()


def test_read_only_commands_answer_while_another_writer_holds_the_lock(tmp_path):
    data = tmp_path / "data"
    assert run_cli(data, "add", "a note written before").returncode == 0
    env = clean_env(busy_timeout="0.2")
    writer = _holding_the_write_lock(data)
    try:
        for command in (["verify"], ["log", "--limit", "5"], ["stats"]):
            done = run_cli(data, *command, env=env)
            assert done.returncode == 0, (command, done.stderr)
    finally:
        writer.rollback()
        writer.close()
