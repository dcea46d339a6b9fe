"""The supervisor of ``mnemolog serve`` with several workers.

Run as ``python -m mnemolog.tools.supervisor DATA_DIR HOST PORT WORKERS`` by the
serve command once it has checked its settings and printed its banner. It
imports only the standard library: it holds no data, so it should weigh
nothing beside the workers it watches.

Each worker is ``mnemolog serve --worker N``, binding with SO_REUSEPORT so
that the kernel spreads connections over them. Worker 0 starts first and
readies the data directory (migrations, projection catch-up, the vector
index) and runs the organizer; the others start once it listens. SIGINT or
SIGTERM stops them all, each worker asked once; a worker that exits is
started again (see :data:`RESTART_PAUSE`), unless it keeps exiting; a
supervisor that is killed takes its workers with it (Linux).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time


#: A worker that exits while the server runs (killed, out of memory, a crash) is started again, after a pause
#: that doubles from RESTART_PAUSE to RESTART_PAUSE_MAX seconds while it keeps exiting (each time within
#: RESTART_WINDOW seconds of its start; one that ran longer starts the count again); the others serve meanwhile.
#: One that exits RESTART_LIMIT times within RESTART_WINDOW seconds will not stay up: the server stops, code 1.
RESTART_PAUSE = 0.5
RESTART_PAUSE_MAX = 30.0
RESTART_LIMIT = 5
RESTART_WINDOW = 60.0


def supervise(data_dir: str, host: str, port: int, workers: int) -> int:
    base = [sys.executable, "-m", "mnemolog.tools.cli", "--data-dir", data_dir, "serve", "--host", host, "--port", str(port)]
    processes: list[subprocess.Popen] = []
    signalled: set[int] = set()
    stopping = False

    def stop(*_) -> None:
        # Each worker is asked once: a second SIGTERM would cut its graceful
        # shutdown (closing the service, saving the index) short.
        nonlocal stopping
        stopping = True
        for process in processes:
            if process.poll() is None and process.pid not in signalled:
                signalled.add(process.pid)
                process.terminate()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)
    processes.append(start(base + ["--worker", "0"]))
    if not listening(host, port, processes[0]):
        stop()
    for index in range(1, workers):
        if not stopping:
            processes.append(start(base + ["--worker", str(index)]))
    exits: list[list[float]] = [[] for _ in processes]  # each worker's exits within the last RESTART_WINDOW seconds
    streak = [0] * len(processes)  # each worker's exits in a row, each soon after its start
    started = [time.monotonic()] * len(processes)
    due: dict[int, float] = {}  # the workers waiting to start again, and when
    gave_up: int | None = None  # the worker that kept exiting
    while not stopping:
        time.sleep(0.2)
        now = time.monotonic()
        for index, process in enumerate(processes):
            if stopping or index in due or process.poll() is None:
                continue
            exits[index] = [t for t in exits[index] if now - t < RESTART_WINDOW] + [now]
            if len(exits[index]) >= RESTART_LIMIT:
                say(f"worker {index} exited with code {process.returncode} {RESTART_LIMIT} times within {RESTART_WINDOW:g} s: stopping the server")
                gave_up = index
                stop()
                break
            streak[index] = streak[index] + 1 if now - started[index] < RESTART_WINDOW else 1
            pause = min(RESTART_PAUSE * 2 ** (streak[index] - 1), RESTART_PAUSE_MAX)
            say(f"worker {index} exited with code {process.returncode}: starting it again in {pause:g} s")
            due[index] = now + pause
        for index, when in list(due.items()):
            if not stopping and when <= now:
                del due[index]
                processes[index], started[index] = start(base + ["--worker", str(index)]), now
    stop()
    codes = [p.wait() for p in processes]
    failed = [(index, code) for index, code in enumerate(codes) if index not in due and index != gave_up and code not in (0, -signal.SIGTERM, -signal.SIGINT)]
    for index, code in failed:
        say(f"worker {index} exited with code {code}")
    return 1 if failed or gave_up is not None else 0


def say(message: str) -> None:
    print(f"mnemolog: {message}", file=sys.stderr, flush=True)


def start(command: list[str]) -> subprocess.Popen:
    """A worker in a session of its own: Ctrl-C reaches only the supervisor,
    which then asks each worker once. On Linux a worker also gets SIGTERM
    if the supervisor dies, so none is left serving alone."""
    return subprocess.Popen(command, start_new_session=True, preexec_fn=_term_with_parent)


def _term_with_parent() -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the worker outlives a killed supervisor
        pass


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
