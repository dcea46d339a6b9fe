"""Two ``mnemolog serve`` processes following one PostgreSQL log, one killed with SIGKILL while clients write through both.

Each server keeps its own data directory (projections, vector index) and
takes writes into the shared log. Clients write through both (half of them
under idempotency keys); server A is killed at a random moment (seeded),
while its clients' appends are under way, and the clients go on through B.
Then:

- the log's chain verifies, every answered write is in it once at the
  positions its answer gave, and a keyed write cut off by the kill, retried
  on B, lands once; a keyed write retried on the other server answers as
  the first did;
- A restarted resumes from its checkpoint; once both servers have reached
  the head (a recall with ``min_position``), each server's
  projections, read as it left them, equal a fresh rebuild of the log in
  another directory: every event projected exactly once on each.
"""

from __future__ import annotations

import json
import random
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path

from mnemolog.eventstore import EventStore
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.assembly import default_projectors
from mnemolog.projections.runner import ProjectionRunner
from tests.pg import fresh_database_url
from tests.projections.support import dump
from tests.serving import clean_env, http_json, run_cli, start
from tests.tools.test_crash_loops import assert_equal_projections
from tests.tools.test_crash_serve import Clients, assert_answered_writes_present_once, post

SEED = 20261203


def caught_up(url: str, position: int, timeout: float = 60) -> None:
    """Wait until the server's projections hold ``position``: a recall with ``min_position`` answers once they do."""
    deadline = time.monotonic() + timeout
    body = json.dumps({"query": "ferry", "limit": 1, "min_position": position}).encode()
    request = urllib.request.Request(url + "/v1/recall", data=body, headers={"Content-Type": "application/json"}, method="POST")
    while True:
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                assert response.status == 200
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def projections_as_left(data_dir: Path, settings: Settings, store: EventStore) -> tuple[int, dict]:
    """A server's checkpoint and projections as it left them: read, never caught up."""
    runner = ProjectionRunner(store, data_dir / "projections.db", default_projectors(settings, data_dir))
    try:
        return runner.position(), dump(runner)
    finally:
        runner.close()


def test_two_servers_on_one_postgresql_log_project_every_event_once_through_a_kill(tmp_path):
    rng = random.Random(SEED)
    url = fresh_database_url()
    settings = {"log_url": url, "synchronous": "NORMAL", "auth": "off", "organizer_enabled": "off"}
    one, two = tmp_path / "one", tmp_path / "two"
    log = tmp_path / "servers.log"
    a, b = start(one, log, **settings), start(two, log, **settings)
    try:
        with Clients(a.url, 0, rng.randrange(2**32)) as on_a, Clients(b.url, 1, rng.randrange(2**32)) as on_b:
            time.sleep(rng.uniform(0.5, 2.0))
            a.proc.send_signal(signal.SIGKILL)  # its clients' appends in flight
            a.proc.wait(timeout=60)
            time.sleep(0.5)  # B goes on alone
        answered = on_a.answered + on_b.answered
        print(f"answered on A {len(on_a.answered)}, on B {len(on_b.answered)}; keyed writes cut off on A {len(on_a.lost)}")
        assert len(on_a.answered) > 5 and len(on_b.answered) > 5, "too few writes to mean anything"
        for key, body in on_a.lost:  # cut off by the kill: retried on the other server, they land once
            answered.append((key, body, post(b.url, body, key)))
        for key, body, answer in [w for w in on_a.answered if w[0]][:10]:  # a retry on the other server answers as the first did
            again = post(b.url, body, key)
            assert again["replayed"] and (again["positions"], again["memory_ids"]) == (answer["positions"], answer["memory_ids"])
        a = start(one, log, **settings)  # resumes from its checkpoint
        with EventStore.open(url, migrate_schema=False) as store:
            head = store.last_position()
        for server in (a, b):
            caught_up(server.url, head)
    finally:
        for server in (a, b):
            if server.proc.poll() is None:
                server.proc.send_signal(signal.SIGTERM)
                server.proc.wait(timeout=60)
    verified = run_cli(tmp_path, "verify", env=clean_env(log_url=url))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert_answered_writes_present_once(url, answered)
    reference_settings = Settings({"log_url": url, "synchronous": "NORMAL"}, env={})
    with EventStore.open(url, migrate_schema=False) as store:
        assert store.last_position() == head
        reference = tmp_path / "reference"
        reference.mkdir()
        runner = ProjectionRunner(store, reference / "projections.db", default_projectors(reference_settings, reference))
        try:
            runner.catch_up()
            expected = dump(runner)
        finally:
            runner.close()
        for name, data_dir in (("A (killed, restarted)", one), ("B", two)):
            position, found = projections_as_left(data_dir, reference_settings, store)
            assert position == head, f"{name} stopped at {position} of {head}"
            assert_equal_projections(found, expected, name)


call = http_json  # method, path and body to a server's base URL


def test_serve_on_a_postgresql_log_writes_recalls_and_forgets_across_servers_sharing_a_key_store(tmp_path):
    """As the README sets it up: one log URL, a data directory each, one ``MNEMOLOG_KEY_STORE`` they share (so they seal)."""
    import psycopg

    from mnemolog.eventstore.dialects import psycopg_conninfo

    url, keys = fresh_database_url(), tmp_path / "shared" / "keys.db"
    keys.parent.mkdir()
    settings = {"log_url": url, "key_store": str(keys), "synchronous": "NORMAL", "auth": "off", "organizer_enabled": "off"}
    log = tmp_path / "servers.log"
    a, b = start(tmp_path / "a", log, **settings), start(tmp_path / "b", log, **settings)
    try:
        status, written = call(a.url, "POST", "/v1/memories", {"memory": {"memory": "Ada's ferry to Cacilhas leaves at nine", "subject": "u-42"}})
        assert status == 201, written
        memory_id, at = written["memory_ids"][0], written["positions"][-1]
        status, found = call(b.url, "POST", "/v1/recall", {"query": "ferry Cacilhas", "min_position": at})
        assert status == 200 and [h["memory"]["memory"] for h in found["hits"]] == ["Ada's ferry to Cacilhas leaves at nine"]
        with psycopg.connect(psycopg_conninfo(url)) as conn:  # sealed in the shared log: no server stores the text in it
            (payload,) = conn.execute("SELECT payload FROM events WHERE position = %s", (at,)).fetchone()
        assert "Cacilhas" not in payload and "mnemologSealed" in payload
        status, forgot = call(b.url, "POST", "/v1/subjects/u-42/forget", {"reason": "request 7"})
        assert status == 200 and forgot["data"]["keys_destroyed"] == 1, forgot
        for server in (a, b):  # the other server cannot open it either: the key is gone from the store they share
            status, found = call(server.url, "POST", "/v1/recall", {"query": "ferry Cacilhas", "min_position": forgot["positions"][-1]})
            assert status == 200 and found["hits"] == [], found
            for path in (f"/v1/memories/{memory_id}", f"/v1/memories/{memory_id}?as_of={at}"):
                status, memory = call(server.url, "GET", path)
                assert status == 200 and memory["erased"] and "Cacilhas" not in memory["memory"], memory
            status, events = call(server.url, "GET", "/v1/events?limit=1")
            assert events["events"][0]["payload"]["content"]["erased"] is True
    finally:
        for server in (a, b):
            server.proc.send_signal(signal.SIGTERM)
            server.proc.wait(timeout=60)
    verified = run_cli(tmp_path / "a", "verify", env=clean_env(log_url=url, key_store=str(keys)))
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_the_organizer_lease_moves_to_the_other_server_when_its_holder_is_killed(tmp_path):
    """One organizer at a time across servers (a session advisory lock); the holder killed mid-pass, the other takes over
    from the progress recorded in the log, and no decision is made twice."""
    from mnemolog.tools.organize_cmds import synthetic
    from tests.tools.test_crash_loops import assert_no_decision_twice

    rng = random.Random(SEED + 1)
    url = fresh_database_url()
    settings = {"log_url": url, "synchronous": "NORMAL", "auth": "off", "organizer_poll_s": "0.1"}
    log = tmp_path / "servers.log"
    a = start(tmp_path / "a", log, **settings)
    b = start(tmp_path / "b", log, **settings)  # stands by: A took the lease first
    try:
        memories, _ = synthetic(300, seed=5)
        for start_at in range(0, len(memories), 50):
            body = {"memories": [{"memory": m.memory, **({"key": m.key} if m.key else {})} for m in memories[start_at : start_at + 50]]}
            assert call(a.url, "POST", "/v1/memories", body)[0] == 201
        time.sleep(rng.uniform(0.05, 0.5))  # A's organizer at work
        a.proc.send_signal(signal.SIGKILL)
        a.proc.wait(timeout=60)
        with EventStore.open(url, migrate_schema=False) as store:
            last_added = max(r.position for r in store.read_all(types=["MemoryAdded"]))
            by_a = max((r.event.position for r in store.read_all(types=["OrganizerPassRecorded"])), default=0)
            assert by_a < last_added, "A had organized everything before the kill: nothing left to take over"
            deadline = time.monotonic() + 120
            while True:  # B covers the log up to the last memory by itself
                covered = [r.event.position for r in store.read_all(types=["OrganizerPassRecorded"])]
                if covered and max(covered) >= last_added:
                    break
                assert time.monotonic() < deadline, f"the organizer stopped at {max(covered, default=0)} of {last_added}: {log.read_text()[-2000:]}"
                time.sleep(0.2)
        kinds = assert_no_decision_twice(url)
        assert kinds["MemoriesMerged"] > 0, kinds
    finally:
        for server in (a, b):
            if server.proc.poll() is None:
                server.proc.send_signal(signal.SIGTERM)
                server.proc.wait(timeout=60)
