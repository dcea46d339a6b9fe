"""SIGKILL a ``mnemolog serve`` while 8 clients write through it and its organizer decides.

Each round starts a real server (its background organizer on), lets 8
client threads add memories over HTTP (half with an ``Idempotency-Key``,
some texts near-duplicates of earlier ones, so that the organizer merges;
every other round the clients stop first and a ``mnemolog rebuild`` starts, so
that the kill lands while the organizer works through their writes and the
rebuild replays; the rebuild is killed too),
kills the server with SIGKILL at a random moment (seeded), and checks:

- ``mnemolog verify`` passes;
- every write whose answer a client received is in the log exactly once, at
  the positions the answer gave;
- after a restart, retrying a keyed write answers the first result (the
  same positions), and a keyed write whose answer was lost in the kill is,
  once retried, in the log exactly once;
- no organizer decision is in the log twice (as in
  :mod:`tests.tools.test_crash_loops`);
- the projections equal a fresh rebuild of a copy of the log, and the vector
  index holds exactly the vectors of ``vec_docs``.

``CRASH_ROUNDS`` (environment) runs more rounds than the suite's few.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from mnemolog.eventstore import EventStore
from mnemolog.projections.service import MemoryService
from tests.serving import clean_env, run_cli, start
from tests.tools.test_crash_loops import SETTINGS, assert_equal_projections, assert_no_decision_twice, fresh_rebuild, kill, restart, spawn

SEED = 20261202
ROUNDS = int(os.environ.get("CRASH_ROUNDS", "2"))
CLIENTS = 8
SERVER_SETTINGS = {"synchronous": "NORMAL", "auth": "off", "organizer_poll_s": "0.1"}
SERVER_ENV = clean_env(workers="1", **SERVER_SETTINGS)
TOPICS = ["the harbour ferry leaves at nine", "grandmother's lemon cake recipe", "the quarterly budget review", "a hiking trail above the lake"]


def post(url: str, body: dict, key: str | None, timeout: float = 30) -> dict:
    headers = {"Content-Type": "application/json"} | ({"Idempotency-Key": key} if key else {})
    request = urllib.request.Request(url + "/v1/memories", data=json.dumps(body).encode(), headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        assert response.status in (200, 201), response.status
        return json.loads(response.read())


def start_server(data_dir: Path, log: Path) -> tuple[subprocess.Popen, str]:
    server = start(data_dir, log, **SERVER_SETTINGS)
    return server.proc, server.url


class Clients:
    """8 writer threads; ``answered`` holds (key, body, answer) of every write a client got an answer for,
    ``lost`` (key, body) of the keyed writes cut off by the kill."""

    def __init__(self, url: str, round_: int, seed: int):
        self.url, self.round = url, round_
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.answered: list[tuple[str | None, dict, dict]] = []
        self.lost: list[tuple[str, dict]] = []
        self.threads = [threading.Thread(target=self._write, args=(n, self.rng.randrange(2**32)), daemon=True) for n in range(CLIENTS)]

    def _write(self, n: int, seed: int) -> None:
        rng = random.Random(seed)
        i = 0
        while not self.stop.is_set():
            i += 1
            topic = rng.choice(TOPICS)
            text = f"{topic} (note {rng.randint(0, 3)})" if rng.random() < 0.3 else f"client {n} round {self.round} write {i} about {topic}"
            body = {"memories": [{"memory": f"{text} part {k}"} for k in range(rng.randint(1, 3))]}
            key = f"r{self.round}-c{n}-w{i}" if n % 2 == 0 else None
            try:
                answer = post(self.url, body, key)
            except (OSError, urllib.error.HTTPError):
                if key is not None:
                    with self.lock:
                        self.lost.append((key, body))
                return  # the server is gone
            with self.lock:
                self.answered.append((key, body, answer))

    def __enter__(self) -> "Clients":
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=60)


def assert_answered_writes_present_once(data_dir: Path, answered: list[tuple[str | None, dict, dict]]) -> None:
    added: Counter = Counter()
    at: dict[int, str] = {}
    with EventStore.open(data_dir, settings=SETTINGS) as store:
        for page in store.iter_all(batch_size=5000):
            for recorded in page:
                if recorded.type == "MemoryAdded":
                    added[recorded.event.memory_id] += 1
                    at[recorded.position] = recorded.event.memory_id
    assert not [m for m, n in added.items() if n > 1], "a memory was added twice"
    for key, body, answer in answered:
        assert len(answer["memory_ids"]) == len(body["memories"])
        for memory_id in answer["memory_ids"]:
            assert added[memory_id] == 1, f"the answered write {key or answer['correlation_id']} is missing {memory_id}"
        assert [at.get(p) for p in answer["positions"] if p in at] == answer["memory_ids"], "the answer's positions hold other events"


def assert_vector_index_is_vec_docs(data_dir: Path) -> None:
    """The vector index a restart opens holds exactly the vectors ``vec_docs`` holds (what a rebuild of it would hold)."""
    with MemoryService.open(data_dir, settings=SETTINGS) as svc:
        conn = svc.read_conn()
        rows = dict(conn.execute("SELECT row_id, vector FROM vec_docs WHERE vector_of = row_id").fetchall())
        index = svc.vector_index._index
        keys = sorted(int(k) for k in index.keys)
        assert keys == sorted(rows), f"the index holds {len(keys)} vectors, vec_docs {len(rows)}"
        for key in keys[:: max(1, len(keys) // 50)]:
            stored = np.frombuffer(rows[key], dtype=np.float32)
            held = np.asarray(index.get(key), dtype=np.float32)  # int8 storage: the same direction, quantized
            cosine = float(held @ stored) / (float(np.linalg.norm(held) * np.linalg.norm(stored)) or 1.0)
            assert cosine > 0.98, f"vector {key} differs from vec_docs (cosine {cosine:.3f})"


@pytest.mark.slow
def test_a_server_killed_under_writers_loses_no_answered_write_and_repeats_none(tmp_path):
    rng = random.Random(SEED)
    data_dir = tmp_path / "data"
    log = tmp_path / "server.log"
    answered: list = []
    for round_ in range(ROUNDS):
        proc, url = start_server(data_dir, log)
        rebuild = None
        with Clients(url, round_, rng.randrange(2**32)) as clients:
            time.sleep(rng.uniform(0.2, 2.5))
            if round_ % 2:  # the clients stop and the organizer works through what they wrote, while a rebuild runs: kill them at that
                clients.stop.set()
                rebuild = spawn(data_dir, "rebuild", log=log, env=SERVER_ENV)
                time.sleep(rng.uniform(0.2, 2.0))
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=60)
        if rebuild is not None:
            kill(rebuild)
        answered += clients.answered
        print(f"round {round_}: {len(clients.answered)} writes answered, {len(clients.lost)} keyed writes cut off")
        verified = run_cli(data_dir, "verify", env=clean_env())
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert_answered_writes_present_once(data_dir, answered)
        # Restart: retried keyed writes answer as the first time; cut-off ones land once.
        proc, url = start_server(data_dir, log)
        try:
            keyed = [(k, b, a) for k, b, a in clients.answered if k]
            for key, body, answer in rng.sample(keyed, min(10, len(keyed))):
                again = post(url, body, key)
                assert again["replayed"] and again["positions"] == answer["positions"] and again["memory_ids"] == answer["memory_ids"]
            for key, body in clients.lost:
                answered.append((key, body, post(url, body, key)))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
        assert_answered_writes_present_once(data_dir, answered)
        decided = assert_no_decision_twice(data_dir)
        print(f"round {round_}: organizer decisions so far {dict(decided)}")
        assert_equal_projections(restart(data_dir), fresh_rebuild(data_dir, tmp_path / f"reference-{round_}"), f"round {round_}")
        assert_vector_index_is_vec_docs(data_dir)
    assert len(answered) > 20 * ROUNDS, "too few writes to mean anything"


def test_a_kill_between_saving_the_vector_index_and_its_checkpoint_is_repaired_at_restart(tmp_path):
    from mnemolog.eventstore.commands import CommandContext
    from mnemolog.eventstore.model import MemoryContent
    from tests.crashpoints import run_killed_at

    data_dir = tmp_path / "data"
    ctx = CommandContext(tenant="t", actor="test")
    with MemoryService.open(data_dir, settings=SETTINGS) as svc:
        svc.run(svc.memories.add, ctx, [MemoryContent(memory=f"an early note {i}") for i in range(100)])
        svc.scrub()  # the index and its checkpoint saved
        svc.run(svc.memories.add, ctx, [MemoryContent(memory=f"a later note {i}") for i in range(60)])
    stale = json.loads((data_dir / "vectors.usearch.json").read_text())
    (data_dir / "vectors.usearch").unlink()  # the next start rebuilds and saves the index: killed once the index is in place
    run_killed_at(data_dir, "os:replace", "projections", skip=2, env=clean_env(synchronous="NORMAL", organizer_enabled="off"))
    left = json.loads((data_dir / "vectors.usearch.json").read_text())
    assert "saving" in left and {k: v for k, v in left.items() if k != "saving"} == stale, "the kill did not land before the last checkpoint"
    assert_vector_index_is_vec_docs(data_dir)
    assert not (data_dir / "vectors.usearch.damaged").exists()
    assert_equal_projections(restart(data_dir), fresh_rebuild(data_dir, tmp_path / "reference"), "after the kill")
