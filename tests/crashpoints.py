"""Run a real ``mnemolog`` command that SIGKILLs itself, or waits, at a named point of the code.

``run_killed_at(data_dir, "mnemolog.eventstore.keystore:KeyStore.forget", "forget", ...)``
runs the CLI in a subprocess whose named function is replaced by one that
sends the process SIGKILL (the ``skip`` first calls go through). A random
moment rarely lands in a window a few statements wide; this puts the kill
exactly there, with everything before it committed as a real run leaves it.
``paused_at`` is the same with a pause instead of the kill: the command waits
there while the test does something else, then goes on.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator

from tests.serving import ROOT, clean_env

CHILD = r"""
import importlib, os, runpy, signal, sys

module, _, attr = sys.argv[1].partition(":")
skip = int(sys.argv[2])
owner_name, _, name = attr.rpartition(".")
owner = importlib.import_module(module)
for part in filter(None, owner_name.split(".")):
    owner = getattr(owner, part)
original = getattr(owner, name)
calls = [0]


def die(*args, **kwargs):
    calls[0] += 1
    if calls[0] > skip:
        if os.environ.get("CRASHPOINT_PAUSE"):  # say so, then wait for the test's line
            print("paused", flush=True)
            sys.stdin.readline()
        else:
            os.kill(os.getpid(), signal.SIGKILL)
    return original(*args, **kwargs)


setattr(owner, name, die)
sys.argv = ["mnemolog", *sys.argv[3:]]
runpy.run_module("mnemolog.tools.cli", run_name="__main__", alter_sys=True)
"""


def run_killed_at(data_dir: Path, point: str, *args: str, skip: int = 0, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``mnemolog --data-dir DATA_DIR ARGS`` until it calls ``point`` (``module:Owner.function``) the ``skip + 1``-th time; assert it died there."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, point, str(skip), "--data-dir", str(data_dir), *args],
        env=env or clean_env(synchronous="NORMAL"),
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == -signal.SIGKILL, f"{point} was not reached (exit {done.returncode}): {done.stderr[-2000:]}"
    return done


@contextlib.contextmanager
def paused_at(data_dir: Path, point: str, *args: str, env: dict[str, str]) -> Iterator[subprocess.Popen]:
    """Run ``mnemolog --data-dir DATA_DIR ARGS`` until it calls ``point``; yield while it waits there, then let it go on
    and wait for its end (its output is the process's ``stdout``/``stderr``, read by the caller)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, point, "0", "--data-dir", str(data_dir), *args],
        env={**env, "CRASHPOINT_PAUSE": "1"},
        cwd=str(ROOT),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line == "paused\n", f"{point} was not reached: {line!r} {proc.stderr.read()[-2000:] if proc.poll() is not None else ''}"
        yield proc
        proc.stdin.write("\n")
        proc.stdin.close()
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
