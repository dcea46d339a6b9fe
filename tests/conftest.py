"""Suite-wide set-up: the project's bytecode, written once before any test.

The suite starts several hundred subprocesses (the CLI, servers, crash
victims). Where ``PYTHONDONTWRITEBYTECODE`` is set, as in many containers,
Python never caches the project's own modules (an editable install), and each
of those processes compiled every module again: most of a command's start.
``compileall`` writes the caches whatever that variable says; it runs in the
controlling process only, before xdist starts its workers.
"""

from __future__ import annotations

import compileall
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("mnemolog", "eventstore", "projections", "api", "tools", "tests")


def pytest_configure(config) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: the controller did it
        return
    for package in PACKAGES:
        compileall.compile_dir(ROOT / package, quiet=2)
