"""The writer's catch-up after its own appends, fed by the store's hand-over (``EventStore.take_own_appends``).

1. Random command sequences through ``MemoryService.run``, where most
   catch-ups take the events just appended instead of reading them back:
   every projection table, the vector index and the lexical postings equal
   a rebuild from the log, and every batch handed over equals the read-back.
2. Two services on one log, each with its own projections, appending in
   between each other's commands: the hand-over is refused where the other
   one's events come first, and both end equal to a rebuild.
3. Sealed events reach the projections as plaintext, never as tokens.
4. After a failed append nothing is handed over: the runner reads the log.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemolog.eventstore import NO_STREAM, ConcurrencyError, EventStore
from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore import dialects
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.sealing import TOKEN_MARK
from mnemolog.projections.fts.postings import PostingsIndex
from mnemolog.projections.runner import ProjectionRunner, connect
from mnemolog.projections.service import MemoryService
from mnemolog.projections.vectors.index import VectorIndex
from tests.eventstore.test_own_appends import same
from tests.projections.support import TENANTS, dump
from tests.projections.test_projection_properties import OPS, OPS_WITH_DROP, PROPERTY, SEED, SETTINGS, Scenario, side_runner

WORDS = ("note", "ana", "river", "bridge", "edit", "walked", "calm", "high", "plain", "words", "notes")


class HandOverSpy:
    """Counts what ``take_own_appends`` hands over and refuses, and checks each batch against the read-back."""

    def __init__(self, store: EventStore):
        self.store = store
        self.taken = self.refused = 0
        self._take = store.take_own_appends
        store.take_own_appends = self.take  # type: ignore[method-assign]

    def take(self, after: int, until: int, limit: int | None = None):
        held = self.store.own_appends.held()
        batch = self._take(after, until, limit)
        if batch is None:
            self.refused += held is not None
            return None
        self.taken += 1
        same(batch, self.store.read_all(after=after, until=until, limit=limit))
        return batch


def vector_contents(runner: ProjectionRunner, dim: int) -> list[bytes]:
    """Every vector an index built from the projection holds (keys are row ids, which depend on insert history)."""
    index = VectorIndex(runner.path.with_name("contents.usearch"), embedder_name="hashing", dim=dim, exhaustive=True)
    conn = connect(runner.path, reader=True)
    try:
        index.sync(conn)
        keys = [int(k) for k in index._index.keys]
        return sorted(np.asarray(index._index.get(k)).tobytes() for k in keys)
    finally:
        index.close()
        conn.close()


def postings_answers(runner: ProjectionRunner) -> dict:
    """The lexical postings' answer to each word in each tenant (every match, its score), row ids left out."""
    conn = connect(runner.path, reader=True)
    try:
        postings = PostingsIndex.for_connection(conn)
        postings.load(conn)
        out = {}
        for tenant in TENANTS:
            for word in WORDS:
                found = postings.search(conn, tenant, [word], limit=10_000) or []
                out[tenant, word] = sorted((memory_id, version, round(score, 9)) for memory_id, _, version, score in found)
        return out
    finally:
        conn.close()


def assert_equal_to_a_rebuild(svc: MemoryService, where: Path) -> None:
    svc.sync()
    rebuilt = side_runner(svc.store, where)
    try:
        rebuilt.rebuild()
        assert dump(rebuilt) == dump(svc.runner)
        assert vector_contents(rebuilt, svc.embedding_dim) == vector_contents(svc.runner, svc.embedding_dim)
        assert postings_answers(rebuilt) == postings_answers(svc.runner)
    finally:
        rebuilt.close()


# -- (1) incremental, fed by the hand-over == rebuilt --------------------------------------------


@PROPERTY
@given(ops=st.lists(OPS_WITH_DROP, min_size=1, max_size=25))
def test_projections_fed_by_the_hand_over_equal_a_rebuild(ops):
    with tempfile.TemporaryDirectory() as tmp:
        svc = MemoryService.open(tmp, settings=SETTINGS)
        try:
            assert svc.store.sealer.enabled  # the default: sealed events are handed over as plaintext
            spy = HandOverSpy(svc.store)
            scenario = Scenario(svc)
            for op in [*SEED, *ops]:
                scenario.apply(op)
            assert spy.taken >= len(SEED)
            assert_equal_to_a_rebuild(svc, Path(tmp) / "rebuilt")
        finally:
            svc.close()


# -- (2) two services on one log -------------------------------------------------------------------


class Intruder:
    """Runs ``step`` once, inside the next append of ``store``, just before it: another writer's commit
    lands between a command's catch-up and its own append."""

    def __init__(self, store: EventStore):
        self.step = None
        self._append = store.append_batch
        store.append_batch = self.append_batch  # type: ignore[method-assign]

    def append_batch(self, *args, **kwargs):
        step, self.step = self.step, None
        if step is not None:
            step()
        return self._append(*args, **kwargs)


def _two_services(tmp: Path) -> tuple[MemoryService, MemoryService]:
    settings = SETTINGS.with_overrides(log_url=dialects.sqlite_url(tmp / "log" / "events.db"))
    return MemoryService.open(tmp / "a", settings=settings), MemoryService.open(tmp / "b", settings=settings)


def _interleave(tmp: Path, steps) -> tuple[HandOverSpy, HandOverSpy]:
    first, second = _two_services(tmp)
    try:
        services = (first, second)
        scenarios = [Scenario(svc) for svc in services]
        spies = [HandOverSpy(svc.store) for svc in services]
        intruders = [Intruder(svc.store) for svc in services]
        for op in SEED:
            scenarios[0].apply(op)
        for who, intrude, op, other_op in steps:
            if intrude:
                intruders[who].step = lambda: scenarios[1 - who].apply(other_op)
            try:
                scenarios[who].apply(op)
            except ConcurrencyError:  # the other's commit changed a stream this command had read: refused, nothing appended
                assert services[who].store.own_appends.held() is None
            intruders[who].step = None
        for svc, where in zip(services, ("rebuilt-a", "rebuilt-b")):
            assert_equal_to_a_rebuild(svc, tmp / where)
        assert dump(first.runner) == dump(second.runner)
        return spies[0], spies[1]
    finally:
        first.close()
        second.close()


ADD = ("add", 0, 1, 1, 0)


def test_another_writers_commit_in_between_makes_the_catch_up_read_the_log(tmp_path):
    steps = [(0, True, ADD, ADD), (1, True, ("add", 1, 2, 0, 1), ADD), (0, False, ADD, None), (1, False, ("link", 0, 0, 1, 0), None)]
    first, second = _interleave(tmp_path, steps)
    assert first.refused >= 1 and second.refused >= 1  # each appended after the other's commit it had not projected
    assert first.taken >= 1 and second.taken >= 1  # and took its own appends where nothing came between


@PROPERTY
@given(steps=st.lists(st.tuples(st.integers(0, 1), st.booleans(), OPS, OPS), min_size=1, max_size=12))
def test_two_services_interleaving_appends_both_equal_a_rebuild(steps):
    with tempfile.TemporaryDirectory() as tmp:
        _interleave(Path(tmp), steps)


# -- (3) plaintext, never tokens -----------------------------------------------------------------


def test_projections_see_the_plaintext_of_sealed_events(tmp_path):
    with MemoryService.open(tmp_path, settings=SETTINGS) as svc:
        spy = HandOverSpy(svc.store)
        ctx = CommandContext(tenant="t1")
        result = svc.run(svc.memories.add, ctx, [MemoryContent(memory="Zebrafinch sings at dawn", tags=("birds",), subject="u-1")])
        assert spy.taken == 1
        payload = svc.store.iter_rows().__next__()[-1].payload
        assert TOKEN_MARK in payload and "Zebrafinch" not in payload
        [memory_id] = result.memory_ids
        view = svc.get("t1", memory_id)
        assert (view.memory, view.tags) == ("Zebrafinch sings at dawn", ("birds",))
        tables = dump(svc.runner)
        assert "Zebrafinch" in repr(tables) and TOKEN_MARK not in repr(tables)


# -- (4) a failed append ----------------------------------------------------------------------------


def test_after_a_failed_append_the_catch_up_reads_the_log(tmp_path):
    with MemoryService.open(tmp_path, settings=SETTINGS) as svc:
        spy = HandOverSpy(svc.store)
        store = svc.store
        event = c.MemoryArchived(memory_id="m-1", updated_at="2026-01-01T00:00:00Z")

        def appends_then_fails():
            store.append("memory-m-1", [event], tenant="t1", expected_version=NO_STREAM)  # held ...
            store.append("memory-m-1", [event], tenant="t1", expected_version=NO_STREAM)  # ... and dropped by this failure

        with pytest.raises(ConcurrencyError):
            svc.run(appends_then_fails)
        assert store.own_appends.held() is None
        assert spy.taken == 0  # the run's catch-up after the failure read position 1 from the log
        assert svc.position() == store.last_position() == 1
        assert_equal_to_a_rebuild(svc, tmp_path / "rebuilt")
