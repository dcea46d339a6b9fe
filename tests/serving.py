"""A real ``mnemolog serve`` subprocess on a free loopback port, for tests that need the whole server.

``serve(data_dir, log_path, **settings)`` starts it with a clean
``MNEMOLOG_*`` environment plus ``settings`` (``MNEMOLOG_`` added to each
name), waits until ``GET /health`` answers through every worker, and on exit
kills the supervisor and its workers. ``create_key`` runs ``mnemolog keys
create`` as an operator would. ``run_cli`` runs any other command the same way, and
``http_json`` sends one JSON request to a server.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def children(pid: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout.split()
    return [int(p) for p in found]


def clean_env(**settings: str) -> dict[str, str]:
    """The test runner's environment without its ``MNEMOLOG_*`` settings, plus ``settings``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMOLOG_")}
    env.update({f"MNEMOLOG_{name.upper()}": str(value) for name, value in settings.items()})
    env["PYTHONUNBUFFERED"] = "1"
    return env


def ctrl_c_as_at_a_terminal() -> None:
    """A child's ``preexec_fn``: SIGINT reaches it as a terminal's Ctrl-C does, whatever the test process's signal
    state. A runner started in the background by a shell without job control (``pytest &``, ``nohup``) ignores
    SIGINT, and a worker may block it; a child inherits both, and would carry on through the test's Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def run_cli(data_dir: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mnemolog.tools.cli", "--data-dir", str(data_dir), *args],
        env=env or clean_env(),
        cwd=str(ROOT),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def create_key(data_dir: Path, tenant: str = "default", scopes: str = "read,write,admin") -> str:
    """A new API key's secret, from ``mnemolog keys create --json``."""
    done = run_cli(data_dir, "keys", "create", "--tenant", tenant, "--scopes", scopes, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["key"]


class Server:
    def __init__(self, proc: subprocess.Popen, url: str, log_path: Path):
        self.proc = proc
        self.url = url
        self.log_path = log_path

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]


def http_json(base: str, method: str, path: str, body: dict | None = None, *, key: str | None = None, headers: dict[str, str] | None = None, timeout: float = 60) -> tuple[int, dict]:
    """The status and the JSON answer of ``method path`` on the server at ``base``, an error status included."""
    request = urllib.request.Request(base + path, data=json.dumps(body).encode() if body is not None else None, method=method)
    request.add_header("Content-Type", "application/json")
    if key is not None:
        request.add_header("Authorization", f"Bearer {key}")
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as answer:
        return answer.code, json.loads(answer.read())


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def start(data_dir: Path, log_path: Path, *, workers: int = 1, timeout: float = 120, **settings: str) -> Server:
    """``mnemolog serve`` on a free loopback port, once it answers ``/health`` (and has all its workers).

    One worker binds port 0 and the URL is read from the banner it prints, so no other server of the suite
    can be the one answering. Several workers need a fixed port: one that was free when chosen may be taken
    by another process of the suite before the server binds it; the server then stops at once saying it
    cannot listen, and starts again on another port.
    """
    if workers == 1:
        return _start(data_dir, log_path, 0, workers, timeout, settings)
    for _ in range(4):
        try:
            return _start(data_dir, log_path, free_port(), workers, timeout, settings)
        except PortTaken:
            continue
    raise AssertionError(f"the server found no free port: {log_path.read_text(errors='replace')[-3000:]}")


class PortTaken(Exception):
    pass


#: The line ``mnemolog serve`` prints once its socket is bound: ``mnemolog: serving DIR on http://HOST:PORT …``.
BANNER = re.compile(r"^mnemolog: serving .* on (http://\S+) ", re.MULTILINE)


def announced_url(log_path: Path, mark: int, proc: subprocess.Popen, deadline: float) -> str:
    """The URL in the serving banner that ``proc`` wrote to ``log_path`` after byte ``mark``, once it is there."""
    while True:
        found = BANNER.search(log_path.read_bytes()[mark:].decode(errors="replace"))
        if found:
            return found.group(1)
        if proc.poll() is not None or time.monotonic() >= deadline:
            if proc.poll() is None:
                proc.kill()
            raise AssertionError(f"the server printed no banner: {log_path.read_text(errors='replace')[-3000:]}")
        time.sleep(0.05)


def _start(data_dir: Path, log_path: Path, port: int, workers: int, timeout: float, settings: dict[str, str]) -> Server:
    mark = log_path.stat().st_size if log_path.exists() else 0
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mnemolog.tools.cli", "--data-dir", str(data_dir), "serve", "--port", str(port)],
            env=clean_env(workers=workers, **settings),
            cwd=str(ROOT),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + timeout
    if port == 0:
        server = Server(proc, announced_url(log_path, mark, proc, deadline), log_path)
    else:
        server = Server(proc, f"http://127.0.0.1:{port}", log_path)
    # Several workers: they exist only once the supervisor has bound the port itself, so the answer is theirs.
    while not ((workers == 1 or len(children(proc.pid)) == workers) and _healthy(server.url) and proc.poll() is None):
        if proc.poll() is not None or time.monotonic() >= deadline:
            if proc.poll() is None:
                proc.kill()
            if f"cannot listen on 127.0.0.1:{port}" in log_path.read_bytes()[mark:].decode(errors="replace"):
                raise PortTaken(port)
            raise AssertionError(f"the server did not start: {server.log_tail()}")
        time.sleep(0.1)
    return server


@contextlib.contextmanager
def serve(data_dir: Path, log_path: Path, *, workers: int = 1, timeout: float = 120, **settings: str) -> Iterator[Server]:
    server = start(data_dir, log_path, workers=workers, timeout=timeout, **settings)
    proc = server.proc
    try:
        yield server
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # the supervisor stops its workers
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                for pid in children(proc.pid):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                proc.kill()
        proc.wait()
