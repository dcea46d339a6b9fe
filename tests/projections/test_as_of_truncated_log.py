"""Reads ``as_of=P`` equal the head reads of a data directory whose log holds only positions 1..P.

Random command sequences (add with subjects, update, merge, supersede, archive,
delete with or without evolve_to, restore, rollback, link, undo-namespace,
revert, relink and forgetting a subject) run on one
service. A second data directory then receives the log one event at a time,
as stored (the same envelope, payload and metadata, so the same chain), and
catches up after each: at every position P its head reads (get, history,
graph neighbourhood, working memory, graph stats, recall's lexical channel
with its BM25 scores) must equal the first service's reads as of P (history,
which answers at the head only, filtered to the versions up to P; the
lexical channel before a forget, which took rows out of the index since,
only in which memories match). Both share one key store, as a copy of a data directory
restored with its keys does: a forgotten subject reads as erased in both.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import msgspec
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mnemolog.eventstore import ANY
from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import Conflict, MemoryContent, NotFound, ValidationError
from mnemolog.eventstore.aggregate import load
from mnemolog.eventstore.recorder import PendingEvent, PendingWrite
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.graph import reads as graph_reads
from mnemolog.projections.recall.searcher import RecallOptions
from mnemolog.projections.service import MemoryService

TENANT = "t"
SUBJECTS = (None, "u-1", "u-2")
WORDS = ("river", "bridge", "lisbon", "tram", "cat")
QUERIES = ("river", "bridge tram", "lisbon cat")
KINDS = (
    "add", "add", "add", "update", "update", "merge", "supersede", "archive", "delete", "restore", "rollback", "link", "fan", "unlink", "undo",
    "revert", "relink", "forget",
)  # fmt: skip
OPS = st.tuples(st.sampled_from(KINDS), st.integers(0, 30), st.integers(0, 30), st.integers(0, 2))
REFUSED = (ValidationError, NotFound, Conflict)


def settings_for(keys: Path) -> Settings:
    return Settings({"synchronous": "NORMAL", "working_memory_capacity": 3, "key_store": str(keys)}, env={})


class Run:
    def __init__(self, svc: MemoryService):
        self.svc = svc
        self.memories: list[str] = []
        self.correlations: list[str] = []
        self.n = 0

    def pick(self, i: int) -> str:
        return self.memories[i % len(self.memories)] if self.memories else "missing"

    def apply(self, kind: str, a: int, b: int, flag: int) -> None:
        svc, ctx = self.svc, CommandContext(tenant=TENANT)
        self.n += 1
        m, m2 = self.pick(a), self.pick(a + 1 + b)
        try:
            if kind == "add":
                text = f"note {self.n} about the {WORDS[a % 5]} and the {WORDS[b % 5]}"
                result = svc.run(svc.memories.add, ctx, [MemoryContent(memory=text, subject=SUBJECTS[flag], tags=(WORDS[b % 5],))])
                self.memories.extend(result.memory_ids)
            elif kind == "update":
                result = svc.run(svc.memories.update, ctx, m, {"memory": f"edit {self.n}: the {WORDS[b % 5]}"})
            elif kind == "merge":
                result = svc.run(svc.memories.merge, ctx, [m, m2])
                self.memories.append(result.data["merged_id"])
            elif kind == "archive":
                result = svc.run(svc.memories.archive, ctx, m)
            elif kind == "supersede":
                result = svc.run(svc.memories.supersede, ctx, m, m2)
            elif kind == "delete":
                result = svc.run(svc.memories.soft_delete, ctx, m, evolve_to=m2 if flag == 1 else None)
            elif kind == "restore":
                result = svc.run(svc.memories.restore, ctx, m)
            elif kind == "rollback":
                state = load(svc.store, TENANT, m)
                result = svc.run(svc.memories.rollback, ctx, m, 1 + b % state.version)
            elif kind == "link":
                result = svc.run(svc.edges.link, ctx, m, m2, "RELATED", weight=0.5, edge_id=f"user:r:{self.n}")
            elif kind == "fan":  # both linked to a third, both ways, weights differing: merging the two folds their edges
                third = self.pick(a + 2 + b)
                pairs = [(m, third), (m2, third), (third, m), (third, m2)]
                edges = [c.EdgeRecord(edge_id=f"user:r:{self.n}:{i}", edge_type="RELATED", source=s, target=t, weight=0.3 + 0.2 * i) for i, (s, t) in enumerate(pairs)]
                result = svc.run(svc.edges.link_many, ctx, edges)
            elif kind == "unlink":
                result = svc.run(svc.edges.unlink, ctx, f"user:r:{a}:{flag}")
            elif kind == "undo":
                result = svc.run(svc.edges.undo_namespace, ctx, ("user:", "mention:", f"user:r:{a}")[flag])
            elif kind == "revert":
                if not self.correlations:
                    return
                result = svc.run(svc.reverts.revert, ctx, self.correlations[a % len(self.correlations)], force=flag == 1)
            elif kind == "relink":
                svc.linking.relink(ctx, commit=True)
                return
            else:
                result = svc.forget(ctx, SUBJECTS[1 + flag % 2], reason="asked")
        except REFUSED:
            return
        if result.first_position is not None and kind != "forget":
            self.correlations.append(result.correlation_id)


def copy_event(row, target) -> None:
    """Append one stored row to ``target`` as it is: same envelope, payload and metadata."""
    pending = PendingEvent(row.event_id, row.type, row.schema_version, row.tenant, row.payload, row.metadata, row.correlation_id, row.recorded_at)
    target.append_records([PendingWrite(row.stream_id, ANY, [pending])])


def memory_read(svc: MemoryService, memory_id: str, as_of: int | None) -> dict | None:
    try:
        view = svc.get(TENANT, memory_id, as_of=as_of)
    except NotFound:
        return None
    return msgspec.structs.asdict(view)


def history_read(svc: MemoryService, memory_id: str, upto: int) -> list[dict]:
    try:
        versions = svc.history(TENANT, memory_id, as_of=upto)
    except NotFound:
        return []
    return [v for v in versions if v["position"] <= upto]


def neighbourhood(svc: MemoryService, memory_id: str, as_of: int | None) -> list:
    return sorted((r.node, r.depth, r.score) for r in svc.neighbors(TENANT, memory_id, depth=2, as_of=as_of))


def working(svc: MemoryService, as_of: int | None) -> list:
    return [(e.binding, e.memory_id, e.entered_at, e.valid_to, e.memory and (e.memory.version, e.memory.valid_to)) for e in svc.graph.working_memory(TENANT, as_of=as_of, memories=True)]


def stats(svc: MemoryService, as_of: int | None) -> dict:
    shown = svc.graph.stats(TENANT, as_of=as_of)
    shown.pop("as_of", None)
    return shown


def lexical(svc: MemoryService, query: str, as_of: int | None) -> list[tuple[str, float]]:
    """The lexical channel's matches, best first, with their BM25 scores."""
    results, states, _, _ = svc.searcher.channel_results(TENANT, query, RecallOptions(limit=100, as_of=as_of, channels=("lexical",)))
    assert states["lexical"].status == "ok"
    return results["lexical"]


def same_lexical(whole: list[tuple[str, float]], cut: list[tuple[str, float]], erased_since: bool) -> bool:
    """BM25's statistics count every row indexed by then: as of P they are the cut log's, to the bit, unless a
    forget since took rows out of the index (then only which memories match is the same)."""
    if erased_since:
        return sorted(m for m, _ in whole) == sorted(m for m, _ in cut)
    return whole == cut


# Every kind once, in an order where each finds something to act on (the seed adds three memories).
EVERY_KIND = [
    ("add", 3, 4, 0), ("update", 0, 0, 0), ("merge", 2, 0, 0), ("link", 1, 0, 0), ("rollback", 0, 0, 0), ("revert", 6, 0, 0),
    ("forget", 0, 0, 1), ("relink", 0, 0, 0), ("archive", 0, 0, 0), ("restore", 0, 0, 0), ("delete", 3, 0, 0),
    ("supersede", 0, 3, 0), ("link", 2, 0, 0), ("undo", 0, 0, 0), ("revert", 9, 0, 0), ("delete", 4, 0, 1), ("add", 0, 1, 0),
]  # fmt: skip


# Two memories linked to a third (``fan``) merged (their edges fold), the merge reverted and redone; an edge unlinked,
# its end merged, the unlink reverted (the edge follows the merge, folded into a live one); a memory deleted, its
# neighbour merged, the memory restored (its edges follow the merge). The seed adds three memories.
FOLDING = [
    ("add", 0, 0, 0), ("add", 0, 0, 0), ("add", 0, 0, 0), ("fan", 2, 0, 0), ("merge", 2, 0, 0), ("revert", 7, 0, 0), ("revert", 8, 0, 0),
    ("fan", 4, 0, 0), ("unlink", 11, 0, 0), ("merge", 4, 0, 0), ("revert", 11, 0, 0), ("revert", 13, 0, 0),
    ("delete", 6, 0, 0), ("add", 0, 0, 0), ("merge", 7, 0, 0), ("restore", 6, 0, 0),
]  # fmt: skip


# About 15 s with 12 examples; MNEMOLOG_TEST_AS_OF_EXAMPLES runs more.
@settings(max_examples=int(os.environ.get("MNEMOLOG_TEST_AS_OF_EXAMPLES", "12")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(OPS, min_size=3, max_size=14))
@example(ops=EVERY_KIND)
@example(ops=FOLDING)
def test_reads_as_of_equal_the_reads_of_a_log_cut_at_that_position(ops):
    with tempfile.TemporaryDirectory() as tmp:
        keys = Path(tmp) / "keys.db"
        with MemoryService.open(Path(tmp) / "whole", settings=settings_for(keys)) as svc:
            run = Run(svc)
            for op in [("add", 0, 1, 1), ("add", 1, 2, 2), ("add", 2, 3, 0), *ops]:
                run.apply(*op)
            rows = [row for batch in svc.store.iter_rows(0) for row in batch]
            last_forget = max((r.position for r in svc.store.read_all(types=["SubjectForgotten"])), default=0)
            with MemoryService.open(Path(tmp) / "cut", settings=settings_for(keys)) as cut:
                for row in rows:
                    copy_event(row, cut.store)
                    cut.sync()
                    at = row.position
                    assert cut.store.last_position() == at
                    for memory_id in run.memories:
                        assert memory_read(svc, memory_id, at) == memory_read(cut, memory_id, None), (at, memory_id)
                        assert history_read(svc, memory_id, at) == history_read(cut, memory_id, at), (at, memory_id)
                        assert neighbourhood(svc, memory_id, at) == neighbourhood(cut, memory_id, None), (at, memory_id)
                    for query in QUERIES:
                        assert same_lexical(lexical(svc, query, at), lexical(cut, query, None), at < last_forget), (at, query)
                    assert working(svc, at) == working(cut, None), at
                    assert stats(svc, at) == stats(cut, None), at
                assert cut.store.digest() == svc.store.digest()  # the same chain, event for event
            if ops == EVERY_KIND:  # the example reached what it is there for
                kinds = {r.type for r in svc.store.read_all()}
                assert {"MemoriesMerged", "CorrelationReverted", "SubjectForgotten", "MemoryRolledBack", "EdgeLinked", "MemorySuperseded", "NamespaceUndone"} <= kinds, kinds
                assert any(lexical(svc, q, None) for q in QUERIES)
            if ops == FOLDING:  # edges folded by merges and by a revert that followed one
                folds = [r for r in svc.store.read_all(types=["EdgesRepointed"]) if any(e.merged_from for e in r.event.current)]
                assert len(folds) >= 3 and svc.store.read_all(types=["MemoryRestored"])


def test_a_position_not_yet_written_is_refused_not_read_as_the_head(tmp_path):
    """Read now, ``as_of`` beyond the head would answer with the head, and differently once the position is written."""
    with MemoryService.open(tmp_path / "data", settings=settings_for(tmp_path / "keys.db")) as svc:
        ctx = CommandContext(tenant=TENANT)
        memory_id = svc.run(svc.memories.add, ctx, [MemoryContent(memory="first words")]).memory_ids[0]
        head = svc.store.last_position()
        try:
            svc.get(TENANT, memory_id, as_of=head + 1)
        except Conflict as exc:
            assert str(exc).startswith("as_of: position") and "has not been written" in str(exc)
        else:
            raise AssertionError("as_of beyond the head was read")
        before = memory_read(svc, memory_id, head)
        svc.run(svc.memories.update, CommandContext(tenant=TENANT), memory_id, {"memory": "second words"})
        assert memory_read(svc, memory_id, head) == before and before["memory"] == "first words"
        assert memory_read(svc, memory_id, head + 1)["memory"] == "second words"


def test_a_position_written_by_another_process_is_read_as_of_it_at_once(tmp_path):
    """Projections that have not followed another writer yet catch up to ``as_of`` first, rather than answer from before it."""
    keys, log = tmp_path / "keys.db", f"sqlite:///{tmp_path / 'writer' / 'events.db'}"
    with MemoryService.open(tmp_path / "writer", settings=settings_for(keys)) as writer:
        # A replica: its own projections, following the writer's log (as servers on one PostgreSQL log do).
        reader = MemoryService.open(tmp_path / "replica", settings=settings_for(keys).with_overrides(log_url=log))
        memory_id = writer.run(writer.memories.add, CommandContext(tenant=TENANT), [MemoryContent(memory="written elsewhere")]).memory_ids[0]
        at = writer.store.last_position()
        assert reader.position() < at  # the reader has not followed it yet
        assert reader.get(TENANT, memory_id, as_of=at).memory == "written elsewhere"
        assert memory_read(reader, memory_id, at) == memory_read(writer, memory_id, at)
        reader.close()


def test_a_read_as_of_a_position_shows_nothing_of_what_ended_after_it(tmp_path):
    """A version, an edge, a working-memory entry or an entity that held at P and ended later reads as open as of P,
    as in a log cut at P: when it ended is not known at P. History, which lists every version, keeps when each ended."""
    with MemoryService.open(tmp_path / "data", settings=settings_for(tmp_path / "keys.db")) as svc:
        ctx = CommandContext(tenant=TENANT)
        svc.run(svc.entities.upsert, ctx, "place:river", name="River Tagus")
        a, b = svc.run(svc.memories.add, ctx, [MemoryContent(memory="the river at dawn"), MemoryContent(memory="the bridge")]).memory_ids
        svc.run(svc.edges.link, ctx, a, b, "RELATED", edge_id="user:r:1")
        at = svc.store.last_position()
        svc.run(svc.memories.update, ctx, a, {"memory": "the river at dusk"})
        svc.run(svc.edges.unlink, ctx, "user:r:1")
        svc.run(svc.memories.archive, ctx, a)  # its entry leaves working memory
        svc.run(svc.entities.upsert, ctx, "place:river", name="Tagus")
        assert svc.get(TENANT, a, as_of=at).valid_to is None
        assert [m.valid_to for m in svc.graph.memories(TENANT, [a, b], as_of=at).values()] == [None, None]
        assert [e.valid_to for e in svc.edges_of(TENANT, a, as_of=at)] == [None]
        assert [e.valid_to for e in svc.graph.working_memory(TENANT, as_of=at, memories=True)] == [None, None]
        assert [e.memory.valid_to for e in svc.graph.working_memory(TENANT, as_of=at, memories=True)] == [None, None]
        assert svc.knowledge.get(TENANT, "place:river", as_of=at).valid_to is None
        hits = svc.searcher.recall(TENANT, "river", RecallOptions(limit=5, as_of=at, channels=("lexical",)), position=at).hits
        assert [h.memory.valid_to for h in hits if h.kind == "memory"] == [None]
        first, second = graph_reads.memory_versions(svc.read_conn(), TENANT, a)[:2]
        assert first.valid_to == second.valid_from > at  # the versions of a memory keep when each ended
