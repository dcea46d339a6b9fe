"""A database file of the data directory that is no database, unreadable or a directory: one line naming it, exit 2.

SQLite says "file is not a database" or "unable to open database file",
naming neither the file (a data directory holds four) nor why; the CLI
printed that as it was. On a copy of a real data directory, through the
CLI's ``main`` in this process, but for an unreadable file as root: root
reads any file, so that command runs as a subprocess without the
capabilities that let it (``setpriv``), so that permissions apply.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.in_process import run_main
from tests.serving import ROOT, clean_env

#: Each file, and the commands that open it.
COMMANDS = {
    "events.db": [["verify"], ["log"], ["rebuild"]],
    "keys.db": [["verify"], ["log"], ["rebuild"]],
    "projections.db": [["rebuild"]],  # one that is no database is set aside and rebuilt (test_damaged_projections)
    "auth.db": [["keys", "list"]],
}
PROBLEMS = {"not-a-database": "is not a readable database", "directory": "is a directory, not a database file", "unreadable": "permission denied"}
CASES = [(name, problem) for name in COMMANDS for problem in PROBLEMS if (name, problem) != ("projections.db", "not-a-database")]
NO_OVERRIDE = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--inh-caps", "-dac_override,-dac_read_search"]


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    data = tmp_path_factory.mktemp("made") / "data"
    for argv in (["add", "a first memory"], ["rebuild"], ["keys", "create", "--tenant", "default"]):
        done = run_main(["--data-dir", str(data), *argv])
        assert done.returncode == 0, done.stderr
    return data


def _damage(path: Path, problem: str) -> None:
    if problem == "not-a-database":
        path.write_bytes(b"\x5a" * 8192)
    elif problem == "directory":
        path.unlink()
        path.mkdir()
    else:
        path.chmod(0)


def _run(data: Path, argv: list[str], problem: str) -> subprocess.CompletedProcess:
    if problem != "unreadable" or os.geteuid() != 0:
        return run_main(["--data-dir", str(data), *argv], text=True)
    return subprocess.run(
        [*NO_OVERRIDE, sys.executable, "-m", "mnemolog.tools.cli", "--data-dir", str(data), *argv],
        env=clean_env(), cwd=str(ROOT), capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize(("name", "problem"), CASES)
def test_a_bad_database_file_is_named_in_one_line(made, tmp_path, name, problem):
    if problem == "unreadable" and os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("root reads any file, and setpriv is not here to drop that")
    data = tmp_path / "data"
    shutil.copytree(made, data)
    _damage(data / name, problem)
    for argv in COMMANDS[name]:
        done = _run(data, argv, problem)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and done.stdout == "", (argv, done.returncode, done.stderr)
        assert done.stderr.startswith(f"mnemolog: error: {data / name}") and PROBLEMS[problem] in done.stderr, (argv, done.stderr)
