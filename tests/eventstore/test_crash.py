"""Kill a writer process with SIGKILL mid-stream; the log must stay whole.

A child process appends batches (1-50 events over 1-4 streams, one
``append_batch`` each) with ``synchronous=FULL`` and reports every batch only
after ``append_batch`` has returned. The parent kills it at a random moment,
restarts it on the same file, and after every round checks that each reported
batch is there in full, that no batch is there in part, that positions are
gap-free and that the hash chain verifies.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

from mnemolog.eventstore import DomainEvent, EventStore
from tests.eventstore.support import assert_gap_free, positions
from tests.pg import fresh_database_url

REPO = Path(__file__).resolve().parents[2]
ROUNDS = 5

WRITER = r'''
import random
import sys

from mnemolog.eventstore import DomainEvent, EventStore, StreamAppend


class CrashBatchNoted(DomainEvent, frozen=True):
    batch: str
    count: int
    index: int


data_dir, round_, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = random.Random(seed)
store = EventStore.open(data_dir, synchronous="FULL")
print("READY", flush=True)
n = 0
while True:
    batch_id = f"r{round_}-b{n}"
    count = rng.randint(1, 50)
    streams = rng.randint(1, min(4, count))
    cuts = sorted(rng.sample(range(1, count), streams - 1))
    writes, index = [], 0
    for size in [b - a for a, b in zip([0, *cuts], [*cuts, count])]:
        events = [CrashBatchNoted(batch=batch_id, count=count, index=index + i) for i in range(size)]
        index += size
        writes.append(StreamAppend(f"stream-{rng.randint(0, 5)}", events))
    result = store.append_batch(writes)
    print(f"COMMITTED {batch_id} {result.first_position} {result.last_position}", flush=True)
    n += 1
'''

COMMITTED = re.compile(r"^COMMITTED (\S+) (\d+) (\d+)$")


class CrashBatchNoted(DomainEvent, frozen=True):
    """The parent's copy of the writer's event type, to decode what it wrote."""

    batch: str
    count: int
    index: int


def run_and_kill(script: Path, data_dir: Path, round_: int, seed: int, rng: random.Random, log: Path):
    """Start a writer, let it commit for a random while, SIGKILL it; return its report lines."""
    lines: list[str] = []
    ready = threading.Event()
    with open(log, "a") as stderr:
        child = subprocess.Popen(
            [sys.executable, str(script), str(data_dir), str(round_), str(seed)],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )

        def pump() -> None:
            for line in child.stdout:
                if line.endswith("\n"):  # a line cut by the kill is not a report
                    lines.append(line.rstrip("\n"))
                if line.startswith("READY"):
                    ready.set()

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            assert ready.wait(timeout=30), f"writer did not start; see {log}"
            time.sleep(rng.uniform(0.05, 0.6))
            child.send_signal(signal.SIGKILL)
        finally:
            if child.poll() is None:
                child.kill()
            child.wait(timeout=30)
            reader.join(timeout=30)
    assert child.returncode == -signal.SIGKILL, f"writer exited with {child.returncode}; see {log}"
    return lines


def settled(url: str, timeout: float = 30.0) -> None:
    """Wait until no other session is left on the PostgreSQL database at ``url``: the server goes on with a killed
    client's work (a COMMIT it already received) until it notices the client gone, and the log read meanwhile can
    grow by that batch between two reads of one check."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(url)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                others = conn.execute(sqlalchemy.text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )).scalar()
            if not others:
                return
            time.sleep(0.05)
        raise AssertionError(f"a killed writer's session still runs on {url} after {timeout} s")
    finally:
        engine.dispose()


def check_log(data_dir: Path | str, reported: dict[str, tuple[int, int]]) -> int:
    if isinstance(data_dir, str):
        settled(data_dir)
    with EventStore.open(data_dir) as store:
        found = positions(data_dir / "events.db") if isinstance(data_dir, Path) else [r.position for r in store.recorder.select_rows()]
        assert_gap_free(found)
        by_batch: dict[str, list] = defaultdict(list)
        for chunk in store.iter_all(batch_size=5000):
            for recorded in chunk:
                assert isinstance(recorded.event, CrashBatchNoted)
                by_batch[recorded.event.batch].append(recorded)
        for batch_id, recorded in by_batch.items():
            declared = {r.event.count for r in recorded}
            assert len(declared) == 1, f"batch {batch_id} disagrees on its size"
            assert sorted(r.event.index for r in recorded) == list(range(declared.pop())), f"batch {batch_id} is partial"
            span = [r.position for r in recorded]
            assert span == list(range(span[0], span[0] + len(span))), f"batch {batch_id} is not contiguous"
        for batch_id, (first, last) in reported.items():
            assert batch_id in by_batch, f"reported batch {batch_id} is missing"
            assert [r.position for r in by_batch[batch_id]] == list(range(first, last + 1))
        for stream in {r.stream_id for rs in by_batch.values() for r in rs}:
            versions = [r.stream_version for r in store.read_stream(stream)]
            assert versions == list(range(1, len(versions) + 1))
        result = store.verify()
        assert result.ok, result
        assert result.checked == len(found)
        return len(found)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_sigkilled_writers_never_leave_a_partial_batch(tmp_path, backend):
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    print(f"crash test seed: {seed}")  # shown by pytest on failure
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    data_dir = tmp_path / "data" if backend == "sqlite" else fresh_database_url()  # a PostgreSQL log: the server rolls back a killed append
    EventStore.open(data_dir).close()  # migrate once, before any writer runs

    reported: dict[str, tuple[int, int]] = {}
    total = 0
    for round_ in range(ROUNDS):
        lines = run_and_kill(script, data_dir, round_, rng.randrange(2**32), rng, tmp_path / "writer.log")
        for line in lines:
            match = COMMITTED.match(line)
            if match:
                reported[match.group(1)] = (int(match.group(2)), int(match.group(3)))
        grown = check_log(data_dir, reported)
        assert grown >= total, f"seed {seed}: the log shrank"
        total = grown
    assert len(reported) > ROUNDS, f"seed {seed}: too few batches committed to mean anything"
