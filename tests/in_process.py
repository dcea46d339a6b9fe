"""The ``mnemolog`` command run in the test's own process, answered as a subprocess answers.

A command run as a subprocess pays for a Python start and the CLI's imports
(most of a second) before it does anything: the suite's CLI tests spent most
of their time there. :func:`run_main` calls the same ``main`` with the same
arguments, with the environment, stdin, stdout and stderr the subprocess
would have had: the runner's environment without its ``MNEMOLOG_*``
settings, the bytes given as stdin, and both output streams captured as
bytes (``sys.stdout.buffer`` included, where an export writes). The tests
whose subject is the process itself (a closed stream, bytes that are not
UTF-8 in ``argv``, a lock held by another process, a kill) still start one.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Mapping
from unittest import mock


def _stream(data: bytes = b"") -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="surrogateescape", write_through=True)


def _written(stream: io.TextIOWrapper) -> bytes:
    stream.flush()
    return stream.buffer.getvalue()  # type: ignore[attr-defined]


def run_main(argv: list[str], *, stdin: bytes | None = None, env: Mapping[str, str] | None = None, text: bool = False) -> subprocess.CompletedProcess:
    """``mnemolog *argv`` through ``main``: its exit code, stdout and stderr (bytes, or str with ``text``)."""
    from mnemolog.tools.cli import main

    environ = {k: v for k, v in os.environ.items() if not k.startswith("MNEMOLOG_")}
    environ.update(env or {})
    streams = {"stdin": _stream(stdin or b""), "stdout": _stream(), "stderr": _stream()}
    with mock.patch.dict(os.environ, environ, clear=True), mock.patch.multiple(sys, **streams):
        code = main([str(a) for a in argv])
    out, err = _written(streams["stdout"]), _written(streams["stderr"])
    if text:
        return subprocess.CompletedProcess(["mnemolog", *argv], code, out.decode(), err.decode())
    return subprocess.CompletedProcess(["mnemolog", *argv], code, out, err)
