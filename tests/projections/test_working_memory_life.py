"""Working memory follows every change of a memory's status, as events on the tenant's working stream.

A memory that leaves the activated state (merged away, superseded, archived,
deleted, its subject forgotten) leaves working memory with a
``WorkingMemoryWithdrawn`` naming why (and the judge, for the organizer's
decisions); a merged memory takes the place of its newest source; a restored
memory (or one rolled back to an activated version) comes back at its old
place when the capacity holds it. Every step survives a rebuild of the
projections, and a revert of the organizer's pass puts the sources back.
"""

from __future__ import annotations

import pytest

from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.graph import reads as graph_reads
from mnemolog.projections.policies.organizer import Organizer
from mnemolog.projections.service import MemoryService
from tests.projections.support import dump_table

T = "t1"


def ctx(**kw) -> CommandContext:
    return CommandContext(tenant=T, **kw)


@pytest.fixture
def settings() -> Settings:
    return Settings({"organizer_cluster_interval_s": 0.0, "working_memory_capacity": 4}, env={})


@pytest.fixture
def svc(tmp_path, settings):
    service = MemoryService.open(tmp_path / "data", settings=settings)
    yield service
    service.close()


def add(svc, text: str, **kw) -> str:
    return svc.run(svc.memories.add, ctx(), [MemoryContent(memory=text, **kw)]).memory_ids[0]


def fifo(svc, as_of=None) -> list[str]:
    return [e.memory_id for e in graph_reads.working_memory(svc.read_conn(), T, as_of=as_of)]


def places(svc) -> dict[str, int]:
    return {e.memory_id: e.entered_at for e in graph_reads.working_memory(svc.read_conn(), T)}


def withdrawals(svc) -> list[c.WorkingMemoryWithdrawn]:
    return [r.event for r in svc.store.read_all(tenant=T, types=["WorkingMemoryWithdrawn"])]


def rebuilt_equal(svc) -> None:
    before = dump_table(svc.runner.conn, "graph_working")
    svc.runner.rebuild(["graph"])
    assert dump_table(svc.runner.conn, "graph_working") == before


def test_an_organizer_merge_replaces_its_sources_in_working_memory_and_its_revert_puts_them_back(svc, settings):
    a = add(svc, "Alice lives in Berlin.")
    other = add(svc, "Bob plays chess on Sundays")
    b = add(svc, "alice lives in  berlin")
    before = places(svc)
    report = Organizer(svc, settings).run_once()
    assert report["applied"] == 1
    (merged,) = [r.event.memory_id for r in svc.store.read_all(tenant=T, types=["MemoriesMerged"])]
    assert fifo(svc) == [other, merged]  # no archived source left beside the merged memory
    assert places(svc)[merged] == before[b]  # the place of its newest source
    (left,) = withdrawals(svc)
    assert set(left.memory_ids) == {a, b} and left.reason == f"merged into {merged}" and left.judge == "rule"
    rebuilt_equal(svc)
    svc.run(svc.reverts.revert, ctx(), report["correlation_id"])
    assert places(svc) == before
    rebuilt_equal(svc)


def test_archive_delete_supersede_and_forget_take_a_memory_out_and_restore_brings_it_back(svc):
    a = add(svc, "first note")
    b = add(svc, "second note")
    d = add(svc, "third note", subject="user-7")
    before = places(svc)
    svc.run(svc.memories.archive, ctx(), a, reason="stale")
    assert fifo(svc) == [b, d]
    assert withdrawals(svc)[-1].reason == "archived" and withdrawals(svc)[-1].memory_ids == (a,)
    svc.run(svc.memories.soft_delete, ctx(), b)
    assert fifo(svc) == [d] and withdrawals(svc)[-1].reason == "deleted"
    svc.run(svc.memories.restore, ctx(), a)
    svc.run(svc.memories.restore, ctx(), b)
    assert places(svc) == before  # back at their old places
    rebuilt_equal(svc)
    newer = add(svc, "fourth note")
    superseded = svc.run(svc.memories.supersede, ctx(), b, newer)
    assert fifo(svc) == [a, d, newer] and withdrawals(svc)[-1].reason == f"superseded by {newer}"
    svc.run(svc.reverts.revert, ctx(), superseded.correlation_id)  # activated again: back at its place
    assert fifo(svc) == [a, b, d, newer]
    svc.run(svc.memories.rollback, ctx(), b, 2)  # version 2 was deleted
    assert fifo(svc) == [a, d, newer]
    svc.forget(ctx(), "user-7")
    assert fifo(svc) == [a, newer] and withdrawals(svc)[-1].reason == "subject forgotten"
    rebuilt_equal(svc)


def test_a_restored_memory_comes_back_only_where_the_capacity_holds_it(svc):
    old = add(svc, "old note")
    svc.run(svc.memories.archive, ctx(), old)
    newer = [add(svc, f"note {i}") for i in range(4)]
    assert fifo(svc) == newer
    svc.run(svc.memories.restore, ctx(), old)  # four newer entries fill the capacity: it would have left first
    assert fifo(svc) == newer
    gone = newer[0]
    svc.run(svc.memories.archive, ctx(), newer[1])
    add(svc, "note 4")
    add(svc, "note 5")
    evicted = [r.event for r in svc.store.read_all(tenant=T, types=["WorkingMemoryEvicted"])]
    assert gone in evicted[-1].memory_ids
    svc.run(svc.memories.archive, ctx(), newer[2])
    svc.run(svc.memories.archive, ctx(), gone)
    svc.run(svc.memories.restore, ctx(), gone)  # evicted by the FIFO, not by its archive: it stays out
    assert gone not in fifo(svc)


def test_an_organizer_supersede_takes_the_older_out_naming_the_judge(svc, settings):
    older = add(svc, "Home city: Berlin", key="home city")
    newer = add(svc, "Home city: Munich", key="Home City")
    Organizer(svc, settings).run_once()
    assert fifo(svc) == [newer]
    (left,) = withdrawals(svc)
    assert left.memory_ids == (older,) and left.reason == f"superseded by {newer}" and left.judge == "rule"


def test_a_restored_entry_back_in_a_full_working_memory_evicts_the_oldest(svc):
    a, b, c_ = add(svc, "a note"), add(svc, "b note"), add(svc, "c note")
    svc.run(svc.memories.archive, ctx(), b)
    d, e = add(svc, "d note"), add(svc, "e note")
    assert fifo(svc) == [a, c_, d, e]  # full
    svc.run(svc.memories.restore, ctx(), b)
    assert fifo(svc) == [b, c_, d, e]  # b at its place, within the capacity: the oldest left
    evicted = [r.event for r in svc.store.read_all(tenant=T, types=["WorkingMemoryEvicted"])]
    assert evicted[-1].memory_ids == (a,) and evicted[-1].capacity == 4
    rebuilt_equal(svc)
