"""Ctrl-C (SIGINT) to a running ``mnemolog``: exit 130 with one line on stderr, never a traceback, nothing half-written.

Each command is a real subprocess, interrupted at a moment the test knows it
has reached: blocked reading its input from a pipe once it has taken more of
it than a pipe holds, or (at start) as it imports a given module.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.serving import clean_env, ctrl_c_as_at_a_terminal

MNEMOLOG = Path(sys.executable).with_name("mnemolog")
PIPE_BUFFER = 1 << 16  # Linux's default pipe capacity


def run(data: Path, *argv: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(MNEMOLOG), "--data-dir", str(data), *argv], capture_output=True, input=stdin, env=clean_env(), timeout=300, preexec_fn=ctrl_c_as_at_a_terminal)


def interrupt_while_reading(data: Path, argv: list[str], body: bytes) -> subprocess.CompletedProcess:
    """Run the command with ``body`` on a pipe, and SIGINT it once it has read all but a pipe's worth of it and
    waits for the rest (the pipe stays open)."""
    assert len(body) > 4 * PIPE_BUFFER
    child = subprocess.Popen(
        [str(MNEMOLOG), "--data-dir", str(data), *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=clean_env(),
        preexec_fn=ctrl_c_as_at_a_terminal,
    )
    assert child.stdin is not None
    child.stdin.write(body)  # returns once the command has taken all but what the pipe holds
    child.stdin.flush()
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=120)
    return subprocess.CompletedProcess(child.args, child.returncode, out, err)


def assert_interrupted(done: subprocess.CompletedProcess, *words: str) -> None:
    err = done.stderr.decode()
    assert done.returncode == 130 and err.startswith("mnemolog: error: ") and err.count("\n") == 1, (done.returncode, err)
    assert "Traceback" not in err and all(w in err for w in words), err


def head(data: Path) -> int:
    conn = sqlite3.connect(data / "events.db")
    try:
        return conn.execute("SELECT coalesce(max(position), 0) FROM events").fetchone()[0]
    finally:
        conn.close()


def test_ctrl_c_while_a_batch_is_read_is_one_line_and_writes_nothing(tmp_path):
    """A batch add waiting for the rest of its lines: exit 130 and nothing written (it exited 130 saying nothing)."""
    data = tmp_path / "data"
    assert run(data, "add", "a first memory").returncode == 0
    body = b"".join(json.dumps({"memory": f"batch line {i} " + "x" * 80}).encode() + b"\n" for i in range(4000))
    assert_interrupted(interrupt_while_reading(data, ["add", "-"], body), "interrupted")
    assert head(data) == 1


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[Path, Path]:
    """An export of a few thousand memories, and its key file."""
    folder = tmp_path_factory.mktemp("source")
    body = b"".join(json.dumps({"memory": f"exported memory {i}"}).encode() + b"\n" for i in range(3000))
    assert run(folder / "data", "add", stdin=body).returncode == 0
    export, keys = folder / "export.jsonl", folder / "keys.jsonl"
    assert run(folder / "data", "export", "--output", str(export), "--with-keys", str(keys)).returncode == 0
    return export, keys


def test_ctrl_c_while_an_import_is_checked_leaves_a_new_data_dir_as_it_found_it(tmp_path, exported):
    """Interrupted while it checks the file (before any event is written), an import into a new data directory
    left an empty log behind, which later commands took for a real one; and it said nothing."""
    export, keys = exported
    target = tmp_path / "new" / "data"
    done = interrupt_while_reading(target, ["import", "-", "--keys", str(keys)], export.read_bytes())
    assert_interrupted(done, "import interrupted", "no event written")
    assert not (tmp_path / "new").exists()


def test_ctrl_c_while_an_import_is_checked_leaves_an_existing_log_as_it_was(tmp_path, exported):
    export, keys = exported
    data = tmp_path / "data"
    assert run(data, "add", "already here").returncode == 0
    done = interrupt_while_reading(data, ["import", "-", "--keys", str(keys)], export.read_bytes())
    assert_interrupted(done, "import interrupted", "no event written")
    assert head(data) == 1 and run(data, "verify").returncode == 0


def test_ctrl_c_as_the_command_starts_is_one_line(tmp_path):
    """Interrupted while it still imports its modules (the first second of every command), it printed a
    traceback dozens of lines long."""
    code = (
        "import os, signal, sys\n"
        "class InterruptOn:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'sqlalchemy.engine':\n"
        "            os.kill(os.getpid(), signal.SIGINT)\n"
        "        return None\n"
        "sys.meta_path.insert(0, InterruptOn())\n"
        "from mnemolog.tools.cli import main\n"
        "sys.exit(main())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "--data-dir", str(tmp_path / "data"), "stats"],
        capture_output=True,
        env=clean_env(),
        timeout=120,
        preexec_fn=ctrl_c_as_at_a_terminal,
    )
    assert_interrupted(done, "interrupted")
    assert not (tmp_path / "data").exists()
