"""SIGKILL the real commands in a loop: during projection catch-up and during an organizer pass.

Each round starts a real ``mnemolog`` subprocess on a shared data directory,
kills it with SIGKILL at a random moment (seeded) while it works, restarts,
and checks:

- the projections equal a fresh rebuild of a copy of the log in another
  directory, table by table (:func:`tests.projections.support.dump`), and
  the vector index opens;
- no organizer decision appears twice in the log: no memory is a source of
  two merges or superseded twice, every idempotency key covers one append
  (contiguous positions), and no two live topics share a membership;
- the hash chain verifies.

Projection catch-up is killed during ``mnemolog rebuild`` and during the
catch-up of a ``mnemolog serve`` start over deleted projections; the organizer
during ``mnemolog organize --once`` over many near-duplicates (one round is
killed during its topic clustering run), restarted by running the pass again.
"""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from mnemolog.eventstore import EventStore
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.assembly import default_projectors
from mnemolog.projections.runner import ProjectionRunner
from mnemolog.projections.service import MemoryService
from mnemolog.tools.organize_cmds import _ingest, synthetic
from tests.projections.support import dump, write_log
from tests.serving import ROOT, clean_env, run_cli

SEED = 20261201
ROUNDS = 4
SETTINGS = Settings({"synchronous": "NORMAL"}, env={})  # durability against power loss is not under test: a SIGKILL loses nothing committed
CHILD_ENV = clean_env(synchronous="NORMAL", auth="off")
READ_ONLY_SERVER_ENV = clean_env(synchronous="NORMAL", auth="off", organizer_enabled="off")  # a catch-up must not be mixed with decisions


def spawn(data_dir: Path, *args: str, log: Path, env: dict[str, str] = CHILD_ENV) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "mnemolog.tools.cli", "--data-dir", str(data_dir), *args], env=env, cwd=str(ROOT), stdout=out, stderr=subprocess.STDOUT
        )


def kill(child: subprocess.Popen) -> bool:
    """SIGKILL the child if it still runs; whether the kill interrupted it."""
    interrupted = child.poll() is None
    if interrupted:
        child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    return interrupted and child.returncode == -signal.SIGKILL


def scalar(path: Path, sql: str) -> int | None:
    """One value read the way another process would (None while the file or table does not exist)."""
    if not path.exists():
        return None
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        return conn.execute(sql).fetchone()[0]
    except sqlite3.OperationalError:
        return None
    finally:
        conn.close()


def lowest_checkpoint(data_dir: Path) -> int | None:
    return scalar(data_dir / "projections.db", "SELECT min(position) FROM checkpoints")


def head(data_dir: Path) -> int:
    return scalar(data_dir / "events.db", "SELECT coalesce(max(position), 0) FROM events") or 0


def fresh_rebuild(data_dir: Path, where: Path) -> dict:
    """The projections of a copy of the log (with its key store), replayed from position 0 in another directory."""
    where.mkdir(parents=True)
    for name in ("events.db", "keys.db"):  # the log, and the keys its sealed fields need
        if not (data_dir / name).exists():
            continue
        source = sqlite3.connect(str(data_dir / name))
        copy = sqlite3.connect(str(where / name))
        try:
            source.backup(copy)
        finally:
            source.close()
            copy.close()
    store = EventStore.open(where, settings=SETTINGS)
    runner = ProjectionRunner(store, where / "projections.db", default_projectors(SETTINGS, where))
    try:
        runner.catch_up()
        return dump(runner)
    finally:
        runner.close()
        store.close()


def restart(data_dir: Path) -> dict:
    """Open the data directory as a service start does (catch-up, vector index) and dump its projections."""
    with MemoryService.open(data_dir, settings=SETTINGS) as service:
        assert service.runner.position() == service.store.last_position()
        return dump(service.runner)


def assert_equal_projections(found: dict, expected: dict, context: str) -> None:
    assert found.keys() == expected.keys()
    for name in expected:
        for table, rows in expected[name].items():
            assert found[name][table] == rows, f"{context}: {name}.{table} differs from a fresh rebuild ({len(found[name][table])} rows vs {len(rows)})"


def assert_no_decision_twice(data_dir: Path) -> Counter:
    """The organizer's decisions in the log, counted; each memory merged away or superseded at most once."""
    merged: Counter = Counter()
    superseded: Counter = Counter()
    appends: dict[str, list[int]] = defaultdict(list)
    kinds: Counter = Counter()
    with EventStore.open(data_dir, settings=SETTINGS) as store:
        for page in store.iter_all(batch_size=5000):
            for recorded in page:
                if recorded.type == "MemoriesMerged":
                    merged.update(recorded.event.source_ids)
                elif recorded.type == "MemorySuperseded":
                    superseded[recorded.event.memory_id] += 1
                if recorded.metadata.idempotency_key:
                    appends[recorded.metadata.idempotency_key].append(recorded.position)
                if recorded.metadata.actor == "organizer":
                    kinds[recorded.type] += 1
        result = store.verify()
        assert result.ok, result
    assert not [m for m, n in merged.items() if n > 1], "a memory was merged away twice"
    assert not [m for m, n in superseded.items() if n > 1], "a memory was superseded twice"
    for key, positions in appends.items():
        assert positions == list(range(positions[0], positions[0] + len(positions))), f"idempotency key {key} covers more than one append"
    return kinds


def assert_topics_unique(data_dir: Path) -> None:
    conn = sqlite3.connect(str(data_dir / "projections.db"))
    try:
        rows = conn.execute(
            "SELECT json_extract(content, '$.properties.fingerprint') FROM graph_memories"
            " WHERE memory_type = 'TopicMemory' AND status = 'activated' AND valid_to IS NULL"
        ).fetchall()
    finally:
        conn.close()
    fingerprints = Counter(r[0] for r in rows)
    assert not [f for f, n in fingerprints.items() if n > 1], "two live topics have the same members"


# -- projection catch-up ----------------------------------------------------------------------------


def write_projection_log(data_dir: Path, rng: random.Random) -> int:
    """Entities and relations through the commands, then thousands of memory and edge events straight to the log."""
    with MemoryService.open(data_dir, settings=SETTINGS) as service:
        ctx = CommandContext(tenant="t1", actor="test")
        for i in range(30):
            service.run(service.entities.upsert, ctx, f"e{i}", name=f"Entity {i}", aliases=[f"alias {i}"], tags=[f"tag{i % 4}"])
        for i in range(40):
            service.run(service.entities.set_relation, ctx, f"e{i % 30}", f"e{(i * 7 + 1) % 30}", "knows", weight=0.5)
        service.run(service.memories.add, ctx, [MemoryContent(memory=f"Entity {i} met alias {i + 1}") for i in range(20)])
    with EventStore.open(data_dir, settings=SETTINGS) as store:
        write_log(store, rng, target=5000)
        return store.last_position()


def remove_projections(data_dir: Path) -> None:
    for path in data_dir.glob("projections.db*"):
        path.unlink()
    for path in data_dir.glob("vectors.usearch*"):
        path.unlink()


@pytest.mark.slow
def test_projections_killed_during_catch_up_equal_a_fresh_rebuild(tmp_path):
    rng = random.Random(SEED)
    data_dir = tmp_path / "data"
    last = write_projection_log(data_dir, rng)
    began = time.monotonic()
    expected = fresh_rebuild(data_dir, tmp_path / "reference")
    replay_seconds = time.monotonic() - began
    assert expected["entities"] and any(expected["graph"].values()) and any(expected["vectors"].values())
    interrupted = 0
    for round_ in range(ROUNDS):
        kind = "rebuild" if round_ % 2 == 0 else "serve"
        if kind == "serve":
            remove_projections(data_dir)
            child = spawn(data_dir, "serve", "--port", "0", log=tmp_path / "children.log", env=READ_ONLY_SERVER_ENV)
        else:
            child = spawn(data_dir, "rebuild", log=tmp_path / "children.log")
        # Once the child is replaying (its lowest checkpoint is behind the head), kill it a random moment later.
        deadline = time.monotonic() + 60
        while child.poll() is None and time.monotonic() < deadline:
            checkpoint = lowest_checkpoint(data_dir)
            if checkpoint is not None and checkpoint < last:
                break
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 1.5 * replay_seconds))
        killed = kill(child)
        behind = (lowest_checkpoint(data_dir) or 0) < last
        interrupted += killed and behind
        print(f"catch-up round {round_} ({kind}): killed={killed}, lowest checkpoint {lowest_checkpoint(data_dir)} of {last}")
        assert killed or child.returncode == 0, f"{kind} failed; see {tmp_path / 'children.log'}"
        assert_equal_projections(restart(data_dir), expected, f"round {round_} ({kind}, killed={killed}, behind={behind})")
        with EventStore.open(data_dir, settings=SETTINGS) as store:
            assert store.last_position() == last, "a rebuild appended to the log"
    assert interrupted >= 1, "no kill landed during a catch-up"


# -- the organizer ------------------------------------------------------------------------------------


def topic_edges(data_dir: Path, after: int) -> int:
    """PARENT edges a clustering run has linked after position ``after``."""
    sql = f"SELECT count(*) FROM events WHERE position > {int(after)} AND type = 'EdgeLinked' AND json_extract(payload, '$.edge.edge_id') LIKE 'parent:%'"
    return scalar(data_dir / "events.db", sql) or 0


def add_near_duplicates(data_dir: Path, round_: int) -> None:
    """New memories with their own duplicates and contradictions, plus paraphrases of earlier ones."""
    items, _ = synthetic(150, seed=100 + round_)
    earlier, _ = synthetic(600, seed=7)
    rng = random.Random(round_)
    items += [MemoryContent(memory=f"Remember: {m.memory}", properties=dict(m.properties)) for m in rng.sample(earlier, 20)]
    with MemoryService.open(data_dir, settings=SETTINGS) as service:
        _ingest(service, "default", items, batch=100)


@pytest.mark.slow
def test_organizer_killed_mid_pass_applies_no_decision_twice(tmp_path):
    rng = random.Random(SEED)
    data_dir = tmp_path / "data"
    log = tmp_path / "children.log"
    corpus, _ = synthetic(600, seed=7)
    with MemoryService.open(data_dir, settings=SETTINGS) as service:
        _ingest(service, "default", corpus)
    interrupted = 0
    for round_ in range(ROUNDS - 1):
        if round_:
            add_near_duplicates(data_dir, round_)
        clustering = round_ == 1
        topics = [] if clustering else ["--no-topics"]
        start = head(data_dir)
        wanted = rng.randint(1, 40)  # kill after this many new events (dedup) or topic edges (clustering), a random moment later
        child = spawn(data_dir, "organize", "--once", *topics, log=log)
        deadline = time.monotonic() + 60
        while child.poll() is None and time.monotonic() < deadline:
            if (topic_edges(data_dir, start) if clustering else head(data_dir) - start) >= (1 if clustering else wanted):
                break
            time.sleep(0.002)
        time.sleep(rng.uniform(0.0, 0.3 if clustering else 0.05))
        killed = kill(child)
        interrupted += killed
        assert killed or child.returncode == 0, f"organize failed; see {log}"
        print(f"organizer round {round_}: killed={killed} after {head(data_dir) - start} new events ({topic_edges(data_dir, start)} topic edges)")
        assert_no_decision_twice(data_dir)
        # Restart: the same pass again, to its end; it re-reads what the killed one had not checkpointed.
        again = run_cli(data_dir, "organize", "--once", *topics, env=CHILD_ENV)
        assert again.returncode == 0, again.stderr
        kinds = assert_no_decision_twice(data_dir)
        assert_topics_unique(data_dir)
        assert_equal_projections(restart(data_dir), fresh_rebuild(data_dir, tmp_path / f"reference-{round_}"), f"round {round_} (killed={killed})")
    assert interrupted >= 1, "no kill landed during an organizer pass"
    assert kinds["MemoriesMerged"] >= 20 and kinds["MemorySuperseded"] >= 5, kinds  # the passes decided plenty
