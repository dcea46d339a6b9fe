"""Catch-ups on one data directory never fail for lock contention.

Two services on one data directory stand for two server processes: each
appends and catches up while the other does, and a third thread reads
checkpoints (what ``/health``'s lags and the organizer's head ask) on the
service whose runner writes. SQLite waits for the write lock only when a
transaction starts from no read snapshot, so a read left on the runner's own
connection made its ``BEGIN IMMEDIATE`` fail at once with "database is
locked" (the 500s of a mixed load on two workers).
"""

from __future__ import annotations

import sqlite3
import threading

import pytest

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.projections.runner import ProjectionRunner
from mnemolog.projections.service import MemoryService
from tests.projections.support import dump

WRITES = 120  # each; the race showed in about one write in three


@pytest.fixture
def pair(tmp_path):
    first = MemoryService.open(tmp_path / "data")
    second = MemoryService.open(tmp_path / "data")
    yield first, second
    first.close()
    second.close()


def test_catch_up_waits_its_turn_while_other_threads_read_checkpoints(pair):
    first, second = pair
    errors: list[BaseException] = []
    stop = threading.Event()

    def guarded(step):
        def loop():
            while not stop.is_set():
                try:
                    step()
                except BaseException as exc:  # noqa: BLE001 - every failure is the finding
                    errors.append(exc)
                    stop.set()

        return loop

    def writes(svc: MemoryService, tag: str):
        def run():
            for i in range(WRITES):
                if stop.is_set():
                    return
                try:
                    svc.run(svc.memories.add, CommandContext(tenant="t"), [MemoryContent(memory=f"{tag} note {i}")])
                except BaseException as exc:  # noqa: BLE001
                    errors.append(exc)
                    stop.set()

        return run

    readers = [
        threading.Thread(target=guarded(lambda: (first.runner.lag(), first.runner.position(), first.runner.status()))),
        threading.Thread(target=guarded(lambda: second.writer.call(second.sync))),  # the other process's follower
    ]
    writers = [threading.Thread(target=writes(first, "a")), threading.Thread(target=writes(second, "b"))]
    for thread in readers + writers:
        thread.start()
    for thread in writers:
        thread.join(timeout=600)
    stop.set()
    for thread in readers:
        thread.join(timeout=60)
    assert not errors, [repr(e) for e in errors[:3]]
    head = first.store.last_position()
    assert first.sync() == 0 and second.sync() == 0  # the other caught up for both: nothing was skipped or applied twice
    assert first.runner.position() == second.runner.position() == head
    count = first.read_conn().execute("SELECT count(*) FROM graph_memories WHERE tenant = 't'").fetchone()[0]
    assert count == 2 * WRITES


def test_checkpoint_reads_never_use_the_writers_connection(pair):
    """A reader on another thread is served while the runner's write transaction is open, from the committed state."""
    first, _ = pair
    first.run(first.memories.add, CommandContext(tenant="t"), [MemoryContent(memory="one")])
    committed = first.runner.position()
    runner: ProjectionRunner = first.runner
    with first.writer.lock, runner._lock, runner._transaction() as conn:
        conn.execute("UPDATE checkpoints SET position = position + 5")
        seen = {}

        def read():
            seen.update(position=runner.position(), lag=runner.lag(), checkpoint=runner.checkpoint("graph"))

        reader = threading.Thread(target=read)
        reader.start()
        reader.join(30)
        conn.execute("UPDATE checkpoints SET position = position - 5")
    assert seen["position"] == committed and set(seen["lag"].values()) == {0}
    assert seen["checkpoint"][0] == committed


def test_another_process_holding_the_write_lock_is_waited_for(pair, tmp_path):
    """A catch-up behind another connection's write transaction waits (busy timeout), then applies."""
    first, second = pair
    other = sqlite3.connect(tmp_path / "data" / "projections.db", isolation_level=None, timeout=30)
    other.execute("BEGIN IMMEDIATE")
    result = {}

    def write():
        result["r"] = second.run(second.memories.add, CommandContext(tenant="t"), [MemoryContent(memory="late")])

    writer = threading.Thread(target=write)
    writer.start()
    writer.join(0.5)
    assert writer.is_alive() and "r" not in result  # waiting for the lock, neither failed nor done
    other.execute("ROLLBACK")
    other.close()
    writer.join(60)
    assert "r" in result and first.sync() == 0


def test_a_rebuild_while_another_process_catches_up_applies_no_event_twice(pair, tmp_path):
    """``mnemolog rebuild`` beside a server: the server's runner sees the reset checkpoints and catches up
    between the reset and the replay's first batch; the replay must take over from there, not apply
    the same events again over the rows that runner wrote."""
    first, second = pair
    first.run(
        first.memories.add,
        CommandContext(tenant="t"),
        [MemoryContent(memory=f"note {i} about pears", key=f"k{i}") for i in range(30)],
    )
    second.sync()
    expected = dump(second.runner)
    reset = first.runner.reset

    def reset_then_the_server_catches_up(name: str) -> None:
        reset(name)
        second.runner.catch_up()  # the other process, between this reset and the replay

    first.runner.reset = reset_then_the_server_catches_up
    timings = first.runner.rebuild()
    assert set(timings) == set(first.runner.by_name)
    assert dump(first.runner) == dump(second.runner) == expected
    assert first.runner.position() == first.store.last_position()


def test_a_runner_starting_while_another_process_writes_does_not_take_its_projections_for_ahead_of_the_log(pair, tmp_path):
    """A server process starting beside another that appends and projects: a write landing between the start's
    look at the log's head and at the checkpoints is not a projection ahead of the log (a cut tail), which
    would drop and replay every projection of the data directory for nothing."""
    first, _ = pair
    first.run(first.memories.add, CommandContext(tenant="t"), [MemoryContent(memory="one")])

    class Starting:
        """The log as the starting process sees it: the other process writes right after its look at the head."""

        def __getattr__(self, name):
            return getattr(first.store, name)

        def last_position(self):
            head = first.store.last_position()
            first.run(first.memories.add, CommandContext(tenant="t"), [MemoryContent(memory="written meanwhile")])
            return head

    runner = ProjectionRunner(Starting(), tmp_path / "data" / "projections.db", first.runner.projectors)
    try:
        assert runner.rebuilt_on_start == []
    finally:
        runner.close()
