"""The supervisor of ``memledger serve`` with several workers.

Run as ``python -m tools.supervisor DATA_DIR HOST PORT WORKERS`` by the
serve command once it has checked its settings and printed its banner. It
imports only the standard library: it holds no data, so it should weigh
nothing beside the workers it watches.

Each worker is ``memledger serve --worker N``, binding with SO_REUSEPORT so
that the kernel spreads connections over them. Worker 0 starts first and
readies the data directory (migrations, projection catch-up, the vector
index) and runs the organizer; the others start once it listens. SIGINT or
SIGTERM stops them all; a worker that exits stops the rest.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time


def supervise(data_dir: str, host: str, port: int, workers: int) -> int:
    base = [sys.executable, "-m", "tools.cli", "--data-dir", data_dir, "serve", "--host", host, "--port", str(port)]
    processes: list[subprocess.Popen] = []
    stopping = False

    def stop(*_) -> None:
        nonlocal stopping
        stopping = True
        for process in processes:
            if process.poll() is None:
                process.terminate()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)
    processes.append(subprocess.Popen(base + ["--worker", "0"]))
    if not listening(host, port, processes[0]):
        stop()
    for index in range(1, workers):
        if not stopping:
            processes.append(subprocess.Popen(base + ["--worker", str(index)]))
    while not stopping and all(p.poll() is None for p in processes):
        time.sleep(0.2)
    stop()
    codes = [p.wait() for p in processes]
    return 0 if all(code in (0, -signal.SIGTERM, -signal.SIGINT) for code in codes) else 1


def listening(host: str, port: int, process: subprocess.Popen, timeout: float = 600.0) -> bool:
    """Wait until ``process`` accepts connections on ``port``; False if it exited first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.1)
    return False


if __name__ == "__main__":
    data_dir, host, port, workers = sys.argv[1:5]
    sys.exit(supervise(data_dir, host, int(port), int(workers)))
