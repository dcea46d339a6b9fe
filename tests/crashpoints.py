"""Run a real ``mnemolog`` command that SIGKILLs itself at a named point of the code.

``run_killed_at(data_dir, "mnemolog.eventstore.keystore:KeyStore.forget", "forget", ...)``
runs the CLI in a subprocess whose named function is replaced by one that
sends the process SIGKILL (the ``skip`` first calls go through). A random
moment rarely lands in a window a few statements wide; this puts the kill
exactly there, with everything before it committed as a real run leaves it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

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
