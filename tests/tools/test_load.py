"""Load: 16 clients writing and recalling against ``mnemolog serve`` with two workers.

A real server (``MNEMOLOG_WORKERS=2``, auth on with a key from ``mnemolog keys
create``, the organizer running, default durability) on a free loopback
port; 16 asyncio clients (aiohttp, one connection pool each) for
``LOAD_SECONDS``:

- write: ``POST /v1/memories``, one memory or a batch of up to 5, each with
  its own ``Idempotency-Key``;
- retry: an earlier write sent again with its key, which must answer
  ``replayed`` with the first answer's positions and write nothing;
- recall: ``POST /v1/recall`` for a word of the client's last write, half
  the time with ``min_position`` (read your writes).

Then the server stops, ``mnemolog verify`` must pass, every acknowledged
write must be in the log (at the positions it was told, with its memory ids
and texts, exactly once), and no response may have been a 5xx or a
connection failure.

The issue's figure is 60 seconds; the suite runs 20 to keep to its time
budget. Run the 60-second version with::

    MNEMOLOG_TEST_LOAD_SECONDS=60 .venv/bin/python -m pytest -q -p no:cacheprovider -s tests/tools/test_load.py
"""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field

import aiohttp
import pytest

from mnemolog.eventstore import EventStore
from mnemolog.eventstore import catalogue  # noqa: F401  (registers the event types the log is decoded into)
from tests.serving import create_key, run_cli, serve

LOAD_SECONDS = float(os.environ.get("MNEMOLOG_TEST_LOAD_SECONDS", "20"))
CLIENTS = 16
WORDS = (
    "amber basalt cedar delta ember fjord garnet harbor indigo juniper kelp lagoon marble nectar orchid pebble quartz "
    "raven saffron tundra umber violet willow xenon yarrow zephyr anchor beacon canyon dune estuary falcon glacier heron "
    "island jasmine kestrel lantern meadow nimbus oasis prairie quill reef summit thicket upland vale wharf"
).split()


@dataclass
class Write:
    key: str
    texts: list[str]
    positions: list[int]
    memory_ids: list[str]


@dataclass
class Tally:
    statuses: Counter = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)
    latencies: dict[str, list[float]] = field(default_factory=lambda: {"write": [], "recall": [], "retry": []})
    recalls_found: int = 0
    recalls_with_min_position: int = 0


def text_for(rng: random.Random, client: int, n: int) -> str:
    return " ".join(rng.sample(WORDS, 7)) + f" zq{client}x{n}"


async def client_loop(url: str, key: str, client: int, deadline: float, tally: Tally) -> None:
    rng = random.Random(client)
    mine: list[Write] = []
    n = 0
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(url, headers={"Authorization": f"Bearer {key}"}, timeout=timeout) as session:
        while time.monotonic() < deadline:
            roll = rng.random()
            began = time.perf_counter()
            try:
                if roll < 0.4 or not mine:
                    texts = []
                    for _ in range(rng.choice([1, 1, 1, 2, 5])):
                        n += 1
                        texts.append(text_for(rng, client, n))
                    idem = f"load-{client}-{uuid.uuid4().hex}"
                    body = {"memory": {"memory": texts[0]}} if len(texts) == 1 else {"memories": [{"memory": t} for t in texts]}
                    async with session.post("/v1/memories", json=body, headers={"Idempotency-Key": idem}) as response:
                        tally.statuses[response.status] += 1
                        answer = await response.json(content_type=None)
                        if response.status != 201:
                            tally.failures.append(f"write {response.status}: {answer}")
                            continue
                    write = Write(idem, texts, answer["positions"], answer["memory_ids"])
                    mine.append(write)
                    tally.writes.append(write)
                    tally.latencies["write"].append(time.perf_counter() - began)
                elif roll < 0.5:
                    earlier = rng.choice(mine)
                    body = {"memory": {"memory": earlier.texts[0]}} if len(earlier.texts) == 1 else {"memories": [{"memory": t} for t in earlier.texts]}
                    async with session.post("/v1/memories", json=body, headers={"Idempotency-Key": earlier.key}) as response:
                        tally.statuses[response.status] += 1
                        answer = await response.json(content_type=None)
                    if response.status != 201 or not answer["replayed"] or answer["positions"] != earlier.positions or answer["memory_ids"] != earlier.memory_ids:
                        tally.failures.append(f"retry of {earlier.key} answered {response.status}: {answer}")
                    tally.latencies["retry"].append(time.perf_counter() - began)
                else:
                    last = mine[-1]
                    word = last.texts[-1].rsplit(" ", 1)[1]
                    body = {"query": word, "limit": 5}
                    if rng.random() < 0.5:
                        body["min_position"] = last.positions[-1]
                        tally.recalls_with_min_position += 1
                    async with session.post("/v1/recall", json=body) as response:
                        tally.statuses[response.status] += 1
                        answer = await response.json(content_type=None)
                    if response.status != 200:
                        tally.failures.append(f"recall {response.status}: {answer}")
                        continue
                    tally.recalls_found += last.memory_ids[-1] in {hit["id"] for hit in answer["hits"]}
                    tally.latencies["recall"].append(time.perf_counter() - began)
            except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                tally.failures.append(f"client {client}: {type(exc).__name__}: {exc}")


def assert_acknowledged_writes_are_in_the_log(data_dir, writes: list[Write]) -> int:
    """Every acknowledged write at its positions, with its ids and texts; no memory added twice. The events read."""
    added: dict[str, list] = {}
    with EventStore.open(data_dir) as store:
        by_position = {}
        for page in store.iter_all(batch_size=10_000):
            for recorded in page:
                by_position[recorded.position] = recorded
                if recorded.type == "MemoryAdded":
                    added.setdefault(recorded.event.memory_id, []).append(recorded.position)
    for write in writes:
        found = [by_position.get(p) for p in write.positions]
        assert all(found), f"write {write.key}: positions {write.positions} are not all in the log"
        memories = {r.event.memory_id: r.event.content.memory for r in found if r.type == "MemoryAdded"}
        assert list(memories) == write.memory_ids, f"write {write.key}: the log holds {list(memories)} at its positions"
        assert list(memories.values()) == write.texts, f"write {write.key}: texts differ"
        keys = {r.metadata.idempotency_key for r in found}  # stored scoped by tenant and command: "default/add/<key>"
        assert len(keys) == 1 and keys.pop().endswith("/" + write.key), f"write {write.key}: other idempotency keys at its positions"
    twice = [m for m, positions in added.items() if len(positions) > 1]
    assert not twice, f"memories added more than once: {twice[:5]}"
    return len(by_position)


def percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[q - 1] * 1000 if len(values) >= 2 else float("nan")


@pytest.mark.slow
def test_sixteen_clients_against_two_workers_lose_no_acknowledged_write(tmp_path):
    data_dir = tmp_path / "data"
    key = create_key(data_dir, scopes="read,write")
    tally = Tally()
    with serve(data_dir, tmp_path / "serve.log", workers=2, auth="on") as server:
        deadline = time.monotonic() + LOAD_SECONDS

        async def run_all() -> None:
            await asyncio.gather(*(client_loop(server.url, key, c, deadline, tally) for c in range(CLIENTS)))

        began = time.monotonic()
        asyncio.run(run_all())
        seconds = time.monotonic() - began
        server_log = server.log_tail()
    requests = sum(tally.statuses.values())
    memories = sum(len(w.memory_ids) for w in tally.writes)
    recalls = len(tally.latencies["recall"])
    print(
        f"\nload: {CLIENTS} clients, {seconds:.1f} s: {requests} requests ({requests / seconds:.0f}/s), statuses {dict(tally.statuses)};"
        f" {len(tally.writes)} writes acknowledged ({memories} memories), {len(tally.latencies['retry'])} retries replayed,"
        f" {recalls} recalls ({tally.recalls_found} found the client's last write);"
        f" p50/p95 ms: write {percentile(tally.latencies['write'], 50):.1f}/{percentile(tally.latencies['write'], 95):.1f},"
        f" recall {percentile(tally.latencies['recall'], 50):.1f}/{percentile(tally.latencies['recall'], 95):.1f}"
    )
    assert not [s for s in tally.statuses if s >= 500], f"{dict(tally.statuses)}\n{server_log}"
    assert not tally.failures, "\n".join(tally.failures[:20]) + f"\n{server_log}"
    assert len(tally.writes) >= CLIENTS and recalls >= CLIENTS, "the clients barely ran"
    verified = run_cli(data_dir, "verify")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    events = assert_acknowledged_writes_are_in_the_log(data_dir, tally.writes)
    print(f"load: mnemolog verify passed over {events} events; every acknowledged write is in the log")
