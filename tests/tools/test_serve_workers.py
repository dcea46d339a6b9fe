"""``mnemolog serve`` with several worker processes on one port.

A real server on loopback: writes through one worker are read through the
others (each has its own caches and vector index over the shared data
directory), and stopping the supervisor stops every worker.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from mnemolog.api.client import MnemologClient
from tests.serving import children as _children, start


@pytest.fixture
def served(tmp_path):
    """Two workers on one port, both answering; killed with them at teardown if a test left them running."""
    # The organizer is off: it would merge the near-duplicate notes below.
    server = start(tmp_path / "data", tmp_path / "serve.log", workers=2, auth="off", synchronous="NORMAL", organizer_enabled="off")
    proc = server.proc
    try:
        yield proc, server.url, server.log_path
    finally:
        if proc.poll() is None:
            proc.kill()
            for child in _children(proc.pid):
                os.kill(child, signal.SIGKILL)
        proc.wait()


async def test_writes_through_one_worker_are_read_through_any(served):
    proc, url, log = served
    workers = _children(proc.pid)
    assert len(workers) == 2
    written = []
    # Separate connections: SO_REUSEPORT spreads them over both workers.
    for i in range(12):
        async with MnemologClient(url, timeout=10) as client:
            written.append(await client.add_memories({"memory": f"note {i}: the heron nests by the north pond"}))
    positions = [p for w in written for p in w.positions]
    assert positions == list(range(1, 13))  # one gap-free log, whichever process wrote
    for i in range(12):
        async with MnemologClient(url, timeout=10) as client:
            found = await client.recall("heron north pond", limit=20, min_position=positions[-1])
            assert {h.id for h in found.hits} == {m for w in written for m in w.memory_ids}
            history = await client.memory_history(written[i].memory_ids[0])
            assert len(history.versions) >= 1

    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0, log.read_text(errors="replace")[-2000:]
    for pid in workers:
        assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return False


async def test_ctrl_c_stops_every_worker_gracefully(served):
    proc, url, log = served
    workers = _children(proc.pid)
    proc.send_signal(signal.SIGINT)  # what Ctrl-C sends the supervisor; the workers have their own sessions
    assert proc.wait(timeout=30) == 0, log.read_text(errors="replace")[-2000:]
    assert not any(_alive(pid) for pid in workers)


async def test_sigterm_to_every_process_at_once_stops_the_server_gracefully(served):
    """What a service manager sends (systemd signals every process of the service): the supervisor passed it on to
    workers that had it already, and the second one cut their shutdown short, exit 1."""
    proc, url, log = served
    workers = _children(proc.pid)
    for pid in [proc.pid, *workers]:
        os.kill(pid, signal.SIGTERM)
    assert proc.wait(timeout=30) == 0, log.read_text(errors="replace")[-2000:]
    assert not any(_alive(pid) for pid in workers)


async def test_a_killed_supervisor_takes_its_workers_with_it(served):
    proc, url, _ = served
    workers = _children(proc.pid)
    proc.kill()
    proc.wait()
    for _ in range(300):
        if not any(_alive(pid) for pid in workers):
            return
        await asyncio.sleep(0.1)
    raise AssertionError("workers outlived their supervisor")


async def test_every_worker_reports_the_organizer_and_waits_for_it(tmp_path):
    """Worker 0 runs the organizer; the others said it was off (capabilities, status) and answered at once."""
    server = start(tmp_path / "data", tmp_path / "serve.log", workers=2, auth="off", synchronous="NORMAL")
    try:
        async with MnemologClient(server.url, timeout=30) as client:
            written = await client.add_memories(
                memories=[{"memory": f"the heron nests by the north pond, note {i}", "key": f"heron {i}"} for i in range(3)]
            )
        seen = set()
        for _ in range(600):  # separate connections: SO_REUSEPORT spreads them over both workers, once both listen
            async with MnemologClient(server.url, timeout=30) as client:
                assert (await client.capabilities()).organizer is True
                status = await client.organizer_status(min_position=written.positions[-1], wait="20s")
                assert status.enabled and status.caught_up and status.position >= written.positions[-1], status
                seen.add(status.runs_here)
            if len(seen) == 2:
                break
            await asyncio.sleep(0.05)
        assert seen == {True, False}  # both workers answered
    finally:
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=30) == 0, server.log_path.read_text(errors="replace")[-2000:]


def test_bench_recall_measures_every_worker(capsys):
    from mnemolog.tools import cli

    code = cli.main(["bench", "recall", "--small", "200", "--large", "300", "--queries", "10", "--duration", "1", "--workers", "2"])
    out = capsys.readouterr().out
    assert code == 0, out
    pairs = dict(item.split("=") for item in out.strip().splitlines()[-1].split())
    assert pairs["workers"] == "2" and float(pairs["recall_qps_16"]) > 0 and float(pairs["ingest_mps"]) > 0 and float(pairs["start_s"]) > 0
    # Three processes (the supervisor and two workers) hold more than one would.
    assert pairs["server_memories"] == "300" and float(pairs["server_rss_mb"]) >= float(pairs["server_pss_mb"]) > 60


@pytest.mark.parametrize(
    "workers, port, message",
    [("0", "8765", "MNEMOLOG_WORKERS: expected a whole number at least 1, got 0"), ("two", "8765", "MNEMOLOG_WORKERS"), ("2", "0", "need a fixed port")],
)
def test_bad_worker_settings_are_refused_with_one_line(tmp_path, monkeypatch, capsys, workers, port, message):
    from mnemolog.tools import cli

    monkeypatch.setenv("MNEMOLOG_WORKERS", workers)
    monkeypatch.setenv("MNEMOLOG_AUTH", "off")
    assert cli.main(["--data-dir", str(tmp_path), "serve", "--port", port]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_forget_racing_writes_through_two_workers_names_every_memory_its_keys_sealed(tmp_path):
    """Three clients add memories of one subject through two workers while ``mnemolog forget`` runs in a process of
    its own. A memory a worker appended after the forget's catch-up and before its key's retirement, not yet
    projected, was named by neither of its events: sealed with a destroyed key, it stayed readable where a worker
    had projected it. Every memory in the log before the forget that its keys sealed must be named; one sealed
    with the subject's new key was written after the forget began, and stays."""
    import threading

    from mnemolog.eventstore import EventStore
    from mnemolog.eventstore import catalogue as c  # the event types a read decodes
    from mnemolog.eventstore.sealed_keys import sealed_keys
    from mnemolog.eventstore.settings import Settings
    from tests.serving import http_json, run_cli, start

    data = tmp_path / "data"
    server = start(data, tmp_path / "serve.log", workers=2, auth="off", synchronous="NORMAL", organizer_enabled="off")
    stop, answers = threading.Event(), []

    def client(c: int) -> None:
        for i in range(10_000):
            if stop.is_set():
                return
            answers.append(http_json(server.url, "POST", "/v1/memories", {"memories": [{"memory": f"note {c}-{i} of Philomena", "subject": "u-9"}]})[0])

    clients = [threading.Thread(target=client, args=(c,)) for c in range(3)]
    try:
        for thread in clients:
            thread.start()
        while len(answers) < 300:
            time.sleep(0.05)
        forgot = run_cli(data, "forget", "--subject", "u-9", "--tenant", "default", "--yes", "--json")
        time.sleep(0.3)
    finally:
        stop.set()
        for thread in clients:
            thread.join()
        server.proc.terminate()
        server.proc.wait(timeout=30)
    assert forgot.returncode == 0, forgot.stderr
    assert set(answers) == {201}, sorted(set(answers))
    store = EventStore.open(data, settings=Settings({"data_dir": str(data)}, env={}))
    try:
        forgets = store.read_all(types=[c.SubjectForgotten.__name__])
        named = {m for f in forgets for m in f.event.memory_ids}
        destroyed = {k for f in forgets for k in f.event.key_ids}
        added = [r for r in store.read_stored(0, until=forgets[0].position - 1) if r.type == "MemoryAdded"]
        assert len(added) >= 300
        missed = [r.event.memory_id for r in added if r.event.memory_id not in named and {k for _, k in sealed_keys(r.event)} & destroyed]
        assert missed == []
    finally:
        store.close()


async def test_a_killed_worker_is_started_again_while_the_other_serves(served):
    """A worker killed (out of memory, an operator's kill -9) stopped the whole server."""
    proc, url, log = served
    workers = sorted(_children(proc.pid))
    os.kill(workers[-1], signal.SIGKILL)
    for _ in range(300):
        now = _children(proc.pid)
        if len(now) == 2 and workers[-1] not in now:
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError(log.read_text(errors="replace")[-2000:])
    assert proc.poll() is None
    assert f"exited with code {-signal.SIGKILL}: starting it again" in log.read_text(errors="replace")
    for i in range(8):  # both workers answer again (separate connections: SO_REUSEPORT spreads them)
        async with MnemologClient(url, timeout=30) as client:
            assert (await client.add_memories({"memory": f"after the restart {i}"})).memory_ids
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0, log.read_text(errors="replace")[-2000:]


def test_a_worker_that_keeps_exiting_stops_the_server_naming_it(monkeypatch, capsys):
    from mnemolog.tools import supervisor

    class Exits:
        """A worker that has exited already (code 3) by the supervisor's first look."""

        pid, returncode = 0, 3

        def poll(self):
            return 3

        wait = poll

    started = []
    monkeypatch.setattr(supervisor, "start", lambda command: started.append(command[-1]) or Exits())
    monkeypatch.setattr(supervisor, "listening", lambda *args: True)
    monkeypatch.setattr(supervisor, "RESTART_PAUSE", 0.01)
    monkeypatch.setattr(signal, "signal", lambda *args: None)  # the test runner's own handlers stay
    assert supervisor.supervise("data", "127.0.0.1", 9, 2) == 1
    assert started.count("0") == supervisor.RESTART_LIMIT and started.count("1") >= 1
    err = capsys.readouterr().err
    assert "worker 0 exited with code 3: starting it again in 0.01 s" in err and "worker 0 exited with code 3: starting it again in 0.02 s" in err
    assert f"worker 0 exited with code 3 {supervisor.RESTART_LIMIT} times within 60 s: stopping the server" in err


def test_the_pause_before_a_restart_doubles_to_its_ceiling_for_a_worker_that_keeps_exiting_soon_after_its_start(monkeypatch, capsys):
    """Counted from the exits within the window (at most four before the limit), the pause never passed 4 s."""
    from mnemolog.tools import supervisor

    clock = [0.0]
    runs = []

    class ExitsAfterAWhile:
        """A worker that exits 16 s (of the supervisor's clock) after its start, then is looked at again."""

        pid, returncode = 0, 3

        def __init__(self):
            self.ends = clock[0] + 16

        def poll(self):
            return 3 if clock[0] >= self.ends else None

        wait = poll

        def terminate(self):
            self.ends = clock[0]

    def started(command):
        runs.append(command[-1])
        if len(runs) > 12:
            supervisor_stop()
        return ExitsAfterAWhile()

    handlers = {}
    monkeypatch.setattr(signal, "signal", lambda sig, handler: handlers.setdefault(sig, handler))
    supervisor_stop = lambda: handlers[signal.SIGTERM]()  # noqa: E731
    monkeypatch.setattr(supervisor, "start", started)
    monkeypatch.setattr(supervisor, "listening", lambda *args: True)
    monkeypatch.setattr(supervisor.time, "sleep", lambda seconds: clock.__setitem__(0, clock[0] + seconds))
    monkeypatch.setattr(supervisor.time, "monotonic", lambda: clock[0])
    supervisor.supervise("data", "127.0.0.1", 9, 1)
    pauses = [float(line.split(" in ")[1].split(" s")[0]) for line in capsys.readouterr().err.splitlines() if "starting it again" in line]
    assert pauses[:8] == [0.5, 1, 2, 4, 8, 16, 30, 30]


async def test_a_worker_started_again_after_projections_db_was_deleted_serves(served):
    """The deleted file's -wal and -shm, worker 0's still, were taken by SQLite for the new file's: the worker
    started again failed at each start ("disk I/O error") until the supervisor stopped the whole server."""
    proc, url, log = served
    async with MnemologClient(url, timeout=30) as client:
        for i in range(5):
            await client.add_memories({"memory": f"a note before the deletion {i}"})
    data = Path(log).parent / "data"
    os.remove(data / "projections.db")
    workers = sorted(_children(proc.pid))
    os.kill(workers[-1], signal.SIGKILL)
    for _ in range(100):  # the new worker 1, up and listening
        now = _children(proc.pid)
        if len(now) == 2 and workers[-1] not in now and "starting it again" in log.read_text(errors="replace"):
            break
        await asyncio.sleep(0.1)
    await asyncio.sleep(6)  # long enough for four failed starts
    text = log.read_text(errors="replace")
    assert proc.poll() is None and "disk I/O error" not in text and text.count("starting it again") == 1, text[-2000:]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0, log.read_text(errors="replace")[-2000:]


_SLOW_START = """
import asyncio, time
from aiohttp import web
from mnemolog.tools.serve_cmds import run_steadily

async def follower():
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:  # a background task that takes a moment to stop (a thread to join, a file to save)
        print("stopping", flush=True)
        await asyncio.sleep(1)
        print("stopped", flush=True)
        raise

async def warming(app):
    asyncio.get_running_loop().create_task(follower())
    print("starting", flush=True)
    time.sleep(2)  # opening the data directory, the loop busy: signals wait in its queue
    await asyncio.sleep(30)
    yield

app = web.Application()
app.cleanup_ctx.append(warming)
run_steadily(app, host="127.0.0.1", port=0, print=None, access_log=None)
"""


def test_a_worker_stopped_while_it_starts_takes_the_second_sigterm_in_its_stride(tmp_path):
    """A stop came while worker 0 was still opening its data directory: the service manager's SIGTERM and the
    supervisor's waited in the loop's queue together, aiohttp raised its stop for each, and the second escaped
    the shutdown: exit 1. A third, while the worker's tasks stop, is ignored too."""
    import subprocess
    import sys

    from tests.serving import clean_env

    proc = subprocess.Popen([sys.executable, "-c", _SLOW_START], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env())
    try:
        assert proc.stdout.readline() == "starting\n"
        proc.send_signal(signal.SIGTERM)  # the service manager's and the supervisor's, both while the loop is busy
        time.sleep(0.3)  # two deliveries (sent at once, the kernel makes them one)
        proc.send_signal(signal.SIGTERM)
        assert proc.stdout.readline() == "stopping\n"
        proc.send_signal(signal.SIGTERM)  # and one more while the worker's tasks stop
        assert proc.stdout.readline() == "stopped\n"
        assert proc.wait(timeout=30) == 0, proc.stderr.read()[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
