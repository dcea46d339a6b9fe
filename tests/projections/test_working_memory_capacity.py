"""Working memory goes back within its capacity after concurrent adds left it over, evicted once, with the reason.

An add decides its evictions from the log as its process last caught up: two
processes adding to one tenant at once can each see room. The working-memory
policy follows the log and evicts the oldest entries beyond the capacity; two
processes that notice the same excess evict it once (the second eviction's
expected version of the working stream fails, and its look again finds the
capacity kept).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mnemolog.eventstore import EventStore, exchange
from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.aggregate import load
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.commands.working import EVICTED
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings
from mnemolog.eventstore.store import NO_STREAM, StreamAppend
from mnemolog.projections.graph import reads as graph_reads
from mnemolog.projections.policies.working import ACTOR, OVER_CAPACITY
from mnemolog.projections.service import MemoryService

ROOT = Path(__file__).resolve().parents[2]
T = "t1"
CAPACITY = 3


@pytest.fixture
def settings() -> Settings:
    return Settings({"working_memory_capacity": CAPACITY}, env={})


def add(svc, text: str, **kw) -> str:
    return svc.run(svc.memories.add, CommandContext(tenant=T), [MemoryContent(memory=text, **kw)]).memory_ids[0]


def fifo(svc) -> list[str]:
    return [e.memory_id for e in graph_reads.working_memory(svc.read_conn(), T)]


def evictions(store: EventStore) -> list:
    return store.read_all(tenant=T, types=["WorkingMemoryEvicted"])


def add_unevicted(data: Path, texts: list[str]) -> list[str]:
    """What an add decided on a log without the entries already there appends: its entries, no eviction
    (written by another store on the data directory, as another process would)."""
    ids = [f"raced-{n}" for n in range(len(texts))]
    with EventStore.open(data) as other:
        for memory_id, text in zip(ids, texts):
            added = c.MemoryAdded(memory_id=memory_id, content=MemoryContent(memory=text), created_at="2026-01-01T00:00:00Z", working_binding=f"b-{memory_id}")
            other.append_batch([StreamAppend(c.memory_stream(memory_id), [added], NO_STREAM)], tenant=T)
    return ids


def test_a_log_over_capacity_is_evicted_down_to_it_once_with_its_reason(tmp_path, settings):
    data = tmp_path / "data"
    with MemoryService.open(data, settings=settings) as svc:
        item = add(svc, "scratch note", memory_type="WorkingMemory")  # lives only in working memory
        kept = [item, add(svc, "second note"), add(svc, "third note")]
        assert fifo(svc) == kept and evictions(svc.store) == []
        raced = add_unevicted(data, ["raced one", "raced two"])
        svc.sync()
        assert fifo(svc) == [kept[2], *raced]
        (evicted,) = evictions(svc.store)
        assert evicted.event.memory_ids == tuple(kept[:2]) and evicted.event.reason == OVER_CAPACITY
        assert evicted.event.capacity == CAPACITY and evicted.metadata.actor == ACTOR
        last_added = svc.store.read_all(tenant=T, types=["MemoryAdded"])[-1]
        assert evicted.metadata.causation_id == last_added.event_id  # the add after which the log showed it over
        state = load(svc.store, T, item)
        assert state.status == "archived" and state.versions[-1].reason == EVICTED  # as an add evicts it
        svc.sync()
        # An add of its own decided on the whole log evicts as it always did: with no reason, never by the policy.
        newest = add(svc, "fourth note")
        assert fifo(svc) == [*raced, newest]
        assert [r.event.reason for r in evictions(svc.store)] == [OVER_CAPACITY, ""]
    with MemoryService.open(data, settings=settings) as again:  # another process, later: nothing left to evict
        again.sync()
        assert fifo(again) == [*raced, newest] and len(evictions(again.store)) == 2


def test_two_processes_noticing_the_same_excess_evict_it_once(tmp_path, settings, monkeypatch):
    data = tmp_path / "data"
    first = MemoryService.open(data, settings=settings)
    second = MemoryService.open(data, settings=settings)
    try:
        kept = [add(first, f"note {n}") for n in range(CAPACITY)]
        raced = add_unevicted(data, ["raced one"])
        append_batch = second.store.append_batch
        races = []

        def after_the_first(*args, **kwargs):
            # The first process evicts the same excess after the second decided its eviction, before it appends it.
            if not races:
                races.append(first.sync())
            return append_batch(*args, **kwargs)

        monkeypatch.setattr(second.store, "append_batch", after_the_first)
        second.sync()
        assert races and second.working_policy.pending == {}
        (evicted,) = evictions(second.store)  # the second one's append expected the working stream unchanged
        assert evicted.event.memory_ids == (kept[0],) and evicted.event.reason == OVER_CAPACITY
        assert fifo(first) == fifo(second) == [*kept[1:], *raced]
    finally:
        first.close()
        second.close()


def test_an_import_beside_it_is_left_as_its_source_wrote_it(tmp_path, settings):
    """A copy arrives a group of events at a time, an add's eviction maybe after it: recorded elsewhere, before, it is
    no concurrent add, and an eviction written into it would break the rest of the import (its expected versions)."""
    source = tmp_path / "source"
    with MemoryService.open(source, settings=settings) as svc:
        kept = [add(svc, f"note {n}") for n in range(CAPACITY)]
    raced = add_unevicted(source, ["raced one"])  # the source left over its capacity
    export = io.BytesIO()
    with EventStore.open(source) as store:
        exchange.export(store, export)
        keys = store.sealer.keys.export_rows()
    target = tmp_path / "target"
    with MemoryService.open(target, settings=settings) as svc:
        export.seek(0)
        with EventStore.open(target) as importer:  # another process imports
            exchange.import_(importer, export, keys=keys)
        svc.sync()
        assert fifo(svc) == [*kept, *raced] and evictions(svc.store) == []


ADDER = """
import json, sys, time
from pathlib import Path
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.graph import reads as graph_reads
from mnemolog.projections.service import MemoryService

data, meeting, me, other, capacity = sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])


def wait_for(name):
    deadline = time.monotonic() + 120
    while not (meeting / name).exists():
        if time.monotonic() > deadline:
            sys.exit(f"{name} never came")
        time.sleep(0.005)


svc = MemoryService.open(data, settings=Settings({"working_memory_capacity": capacity}, env={}))


def add_beside_the_other():
    # Both processes have caught up before either appends: each add is decided on a log without the other's.
    (meeting / f"looked-{me}").touch()
    wait_for(f"looked-{other}")
    texts = [f"{me} note {n}" for n in range(2)]
    return svc.memories.add(CommandContext(tenant="t1"), [MemoryContent(memory=t) for t in texts])


added = svc.run(add_beside_the_other)
(meeting / f"added-{me}").touch()
wait_for(f"added-{other}")
svc.sync()
print(json.dumps({"added": list(added.memory_ids), "evicted": added.data["evicted"],
                  "working": [e.memory_id for e in graph_reads.working_memory(svc.read_conn(), "t1")]}))
svc.close()
"""


def test_two_processes_adding_at_once_past_the_capacity_leave_working_memory_at_it(tmp_path, settings):
    data = tmp_path / "data"
    with MemoryService.open(data, settings=settings) as svc:
        before = add(svc, "a note from before")
    meeting = tmp_path / "meeting"
    meeting.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    children = [
        subprocess.Popen(
            [sys.executable, "-c", ADDER, str(data), str(meeting), me, other, str(CAPACITY)],
            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for me, other in (("a", "b"), ("b", "a"))
    ]
    outputs = [child.communicate(timeout=300) for child in children]
    for child, (_, err) in zip(children, outputs):
        assert child.returncode == 0, err[-3000:]
    seen = [json.loads(out) for out, _ in outputs]
    assert [s["evicted"] for s in seen] == [0, 0]  # each saw room: 1 + 2 entries
    with EventStore.open(data) as store:
        entered = [r.event.memory_id for r in store.read_all(tenant=T, types=["MemoryAdded"])]
        assert entered[0] == before and sorted(entered[1:]) == sorted(seen[0]["added"] + seen[1]["added"])
        assert [s["working"] for s in seen] == [entered[-CAPACITY:]] * 2  # the newest, in both processes
        found = evictions(store)
        evicted = [m for r in found for m in r.event.memory_ids]
        assert sorted(evicted) == sorted(entered[:-CAPACITY]) and len(set(evicted)) == len(evicted)  # each once
        assert all(r.event.reason == OVER_CAPACITY and r.metadata.actor == ACTOR for r in found)
