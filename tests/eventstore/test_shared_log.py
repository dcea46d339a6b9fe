"""Several processes on one log, on every backend: a SQLite file and a PostgreSQL database.

Real subprocesses, each with its own :class:`EventStore`, so that only the
database's own locks keep them apart. They open a fresh log at the same
moment (each one migrating it), then race appends with expected versions and
idempotency keys: the log must stay gap-free with one event per position,
its chain must verify, and every retry of a key (from the process that wrote
it or another) must answer the positions of the write that won.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest

from mnemolog.eventstore import DomainEvent, EventStore, migrate
from tests.pg import fresh_database_url

WRITERS = 4


class SharedNoted(DomainEvent, frozen=True):
    text: str


@pytest.fixture(params=["sqlite", "postgres"])
def log_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'log' / 'events.db'}"
    return fresh_database_url()


def start_together(script: str, url: str, tmp_path, *args: str) -> list[subprocess.Popen]:
    """``WRITERS`` processes running ``script``; each waits for a go file, so that they start at the same moment."""
    go = tmp_path / "go"
    argv = [sys.executable, "-c", textwrap.dedent(script), url, str(go), *args]
    processes = [subprocess.Popen([*argv, str(n)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for n in range(WRITERS)]
    time.sleep(1.0)  # every interpreter has started and waits
    go.touch()
    return processes


def finish(processes: list[subprocess.Popen]) -> list[str]:
    outputs = [p.communicate(timeout=300) for p in processes]
    for p, (_, err) in zip(processes, outputs):
        assert p.returncode == 0, err[-3000:]
    return [out for out, _ in outputs]


WAIT_FOR_GO = """
import os, sys, time
url, go = sys.argv[1], sys.argv[2]
while not os.path.exists(go):
    time.sleep(0.005)
"""

OPEN = WAIT_FOR_GO + """
from mnemolog.eventstore import EventStore
with EventStore.open(url) as store:
    print(store.last_position())
"""


def test_a_migration_is_one_transaction_from_the_first_step_to_the_last(log_url, tmp_path):
    """Another process opening the log waits for the whole upgrade, not just a step.

    Alembic commits after each step of a transaction it began itself, and it
    counts SQLite's DDL as non-transactional: a process waiting for the write
    lock got in between two steps, ran the rest, and the first then failed
    ("expected to match one row when updating '0002' to '0003'").
    """
    from sqlalchemy import event

    from mnemolog.eventstore.dialects import create_migration_engine

    (tmp_path / "log").mkdir()
    engine = create_migration_engine(log_url)
    commits = []
    event.listen(engine, "commit", lambda conn: commits.append(conn))
    try:
        assert migrate.upgrade(engine) is True
        assert len(commits) == 1 and migrate.current_revision(engine) == migrate.head_revision()
    finally:
        engine.dispose()


def test_processes_opening_a_fresh_log_at_once_all_open_it(log_url, tmp_path):
    """Each open migrates a fresh log; on PostgreSQL two at once both created the tables (UniqueViolation)."""
    for attempt in range(3):
        url = log_url if attempt == 0 else (fresh_database_url() if log_url.startswith("postgresql") else f"sqlite:///{tmp_path / str(attempt) / 'events.db'}")
        (tmp_path / "go").unlink(missing_ok=True)
        assert [out.strip() for out in finish(start_together(OPEN, url, tmp_path))] == ["0"] * WRITERS
        with EventStore.open(url, migrate_schema=False) as store:
            engine = store.recorder.reader
            assert migrate.current_revision(engine) == migrate.head_revision()
            assert store.check_guards() == [] and store.verify().ok


WRITER = WAIT_FOR_GO + """
import json
from mnemolog.eventstore import ConcurrencyError, DomainEvent, EventStore, StreamAppend

class SharedNoted(DomainEvent, frozen=True):
    text: str

me = int(sys.argv[-1])
rounds = int(sys.argv[3])
with EventStore.open(url, migrate_schema=False) as store:
    for i in range(rounds):
        # A key every writer sends with the same content: one of them writes it, the others are answered its positions.
        shared = [StreamAppend(f"keyed-{i}", [SharedNoted(text=f"keyed {i}")] * (1 + i % 3), "no-stream")]
        result = store.append_batch(shared, tenant="t", idempotency_key=f"shared-{i}")
        print(json.dumps(["shared", i, result.first_position, result.last_position, result.replayed]))
        # A stream every writer extends from the version it last read: one winner per version.
        version = store.stream_version("contested")
        try:
            result = store.append("contested", [SharedNoted(text=f"{me}-{i}")], expected_version=version)
            print(json.dumps(["contested", version, result.first_position, result.last_position, me]))
        except ConcurrencyError as exc:
            assert exc.actual > version, (exc.actual, version)
        # A writer's own keyed batch, retried at once as after a lost answer.
        own = [StreamAppend(f"own-{me}", [SharedNoted(text=f"{me}-{i}-{j}") for j in range(1 + i % 4)]), StreamAppend("any", [SharedNoted(text="x")])]
        first = store.append_batch(own, tenant=f"t{me}", idempotency_key=f"own-{me}-{i}")
        again = store.append_batch(own, tenant=f"t{me}", idempotency_key=f"own-{me}-{i}")
        assert again.replayed and not first.replayed and again.positions == first.positions, (first, again)
        print(json.dumps(["own", me, first.first_position, first.last_position, i]))
"""


def test_writer_processes_racing_on_one_log_keep_it_whole(log_url, tmp_path):
    rounds = 12
    EventStore.open(log_url).close()
    outputs = finish(start_together(WRITER, log_url, tmp_path, str(rounds)))
    lines = [json.loads(line) for out in outputs for line in out.splitlines()]
    with EventStore.open(log_url, migrate_schema=False) as store:
        recorded = store.read_all()
        result = store.verify()
        assert result.ok and result.checked == len(recorded)
    assert [r.position for r in recorded] == list(range(1, len(recorded) + 1))  # no gap, no position twice
    by_position = {r.position: r for r in recorded}
    taken: dict[int, str] = {}

    def claim(first: int, last: int, what: str) -> None:
        for position in range(first, last + 1):
            assert taken.setdefault(position, what) == what, f"position {position} answered to {taken[position]} and {what}"

    for i in range(rounds):
        answers = [(first, last, replayed) for kind, n, first, last, replayed in lines if kind == "shared" and n == i]
        assert len(answers) == WRITERS and len({(f, l) for f, l, _ in answers}) == 1, answers  # every retry answers as the first
        assert sum(not replayed for _, _, replayed in answers) == 1  # and exactly one of them wrote
        first, last, _ = answers[0]
        assert [by_position[p].stream_id for p in range(first, last + 1)] == [f"keyed-{i}"] * (1 + i % 3)
        claim(first, last, f"shared-{i}")
    wins = sorted((version, first, me) for kind, version, first, last, me in lines if kind == "contested")
    contested = [r for r in recorded if r.stream_id == "contested"]
    assert [version for version, _, _ in wins] == list(range(len(contested)))  # one winner per version read
    assert [(r.stream_version, r.position, r.event.text.split("-")[0]) for r in contested] == [(v + 1, p, str(me)) for v, p, me in wins]
    for version, first, _ in wins:
        claim(first, first, f"contested-{version}")
    for _, me, first, last, i in (line for line in lines if line[0] == "own"):
        assert [by_position[p].stream_id for p in range(first, last + 1)] == [f"own-{me}"] * (1 + i % 4) + ["any"]
        assert {by_position[p].metadata.idempotency_key for p in range(first, last + 1)} == {f"own-{me}-{i}"}
        claim(first, last, f"own-{me}-{i}")
    assert sorted(taken) == [r.position for r in recorded]  # every event was answered to exactly one writer
    for stream_id in {r.stream_id for r in recorded}:
        versions = [r.stream_version for r in recorded if r.stream_id == stream_id]
        assert versions == list(range(1, len(versions) + 1))


def test_a_lease_on_a_sqlite_log_frees_itself_when_its_holder_is_killed(tmp_path):
    """A server and ``mnemolog organize`` may share a SQLite log (its lease was always held, by both; one holder at
    a time is in the contract suite): a holder killed leaves the lease free."""
    EventStore.open(tmp_path / "log").close()  # the log made before its holder opens it
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom mnemolog.eventstore import EventStore\n"
         "lease = EventStore.open(sys.argv[1]).lease('organizer')\nprint(lease.held(), flush=True)\ntime.sleep(600)", str(tmp_path / "log")],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    store = EventStore.open(tmp_path / "log")
    try:
        assert holder.stdout.readline().strip() == "True"
        mine = store.lease("organizer")
        assert not mine.held()
        holder.kill()  # SIGKILL: the system frees the lock with the process
        holder.wait()
        assert mine.held()
        mine.release()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        store.close()
