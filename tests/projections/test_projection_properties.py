"""Properties of the projections over random command sequences.

1. Projections kept up to date command by command equal projections rebuilt
   from the log (and caught up in small batches).
2. Every read ``as_of=P`` (memories, edges, working memory, documents,
   entities and relations) equals the head read of projections that
   replayed only the events up to ``P``.
3. Reverting a command's correlation (rollback, namespace undo, a document
   import, an entity change, a topic run, a revert, anything) restores
   exactly the visible state from before the command: memories, edges,
   working memory, documents, entities and their relations.

The commands cover memories (whose texts mention entities) and edges,
document imports (with mention edges), entities and relations, relink runs
and topic clustering runs.

Plus a crash test: catch-up processes killed at random moments never lose
or repeat an event (the checkpoint moves in the batch's transaction).

Every check covers all projectors in ``svc.runner.projectors`` generically:
each projector's tables are found by creating them in a scratch database.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mnemolog.eventstore import EventStore
from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.aggregate import load
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import Conflict, MemoryContent, NotFound, ValidationError
from mnemolog.eventstore.settings import Settings
from mnemolog.eventstore.commands import CommandResult
from mnemolog.projections.entities import projector as ents
from mnemolog.projections.graph import reads as graph_reads
from mnemolog.projections.ingest.documents import ParsedDocument, document_import
from mnemolog.projections.policies.dedup import Vectors
from mnemolog.projections.policies.topics import TopicBuilder
from mnemolog.projections.assembly import default_projectors
from mnemolog.projections.runner import ProjectionRunner, connect
from mnemolog.projections.service import MemoryService
from tests.projections.support import TENANTS, dump, write_log

# Durability is not under test; topics form from a handful of memories.
SETTINGS = Settings(
    {
        "working_memory_capacity": 4,
        "synchronous": "NORMAL",
        "organizer_min_group_size": 3,
        "organizer_min_cluster_size": 1,
        "organizer_max_cluster_size": 3,
    },
    env={},
)
REFUSED = (ValidationError, NotFound, Conflict)
PROPERTY = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
ROOT = Path(__file__).resolve().parents[2]

def side_runner(store: EventStore, where: Path) -> ProjectionRunner:
    """Fresh projectors of the same kinds over the same log, in another projections.db."""
    where.mkdir(parents=True, exist_ok=True)
    return ProjectionRunner(store, where / "projections.db", default_projectors(SETTINGS, where))


# -- random command sequences ------------------------------------------------------------------

KINDS = (
    "add", "add", "update", "archive", "delete", "restore", "rollback", "merge", "supersede",
    "link", "link", "link", "fan", "unlink", "undo", "undo", "revert", "revert",
    "import", "import", "entity", "entity", "relate", "tags", "unrelate", "forget", "topics", "relink",
)  # fmt: skip
OPS = st.tuples(st.sampled_from(KINDS), st.integers(0, 1), st.integers(0, 40), st.integers(0, 40), st.integers(0, 3))
# A tenant drop deletes the tenant's past from the projections, and a forget (of the subject some adds give their
# memories, or of the tenant's own key) erases it, so ``as_of`` reads and reverts exclude them.
OPS_WITH_DROP = st.one_of(
    OPS,
    st.tuples(st.just("drop"), st.integers(0, 1), st.just(0), st.just(0), st.just(0)),
    st.tuples(st.just("erase"), st.integers(0, 1), st.just(0), st.just(0), st.integers(0, 1)),
)
SUBJECT = "u-1"  # the subject of the memories an add with flag 3 writes (and an update with flag 2 gives)
PREFIXES = ("user:", "mention:", "mention:r1:", "auto:")
ENTITIES = (("e0", "Ana", ("Ana L",)), ("e1", "Old Bridge", ("the bridge",)), ("e2", "River", ("the river",)))
DOC_IDS = ("d0.md", "d1.md")
DOC_TEXTS = (
    "# Notes\n\nAna walked to the bridge.\n\nThe river was calm.\n",
    "# Notes\n\nAna walked to the bridge.\n\nThe river was high.\n\n## More\n\nThe river again, and Ana L.\n",
    "Plain words about the river.\n",
    "Ana and the Old Bridge.\n",
)
RELATION_TYPES = ("knows", "near")
# What memory texts mention: the entities' names and aliases, so that adds, updates and relinks link memories to them.
MENTIONED = ("", " with Ana", " by the river", " at the Old Bridge with Ana L", " near the bridge")


def parsed(doc_id: str, text: str) -> ParsedDocument:
    return ParsedDocument(doc_id, doc_id, [text], "markdown", hashlib.sha256(text.encode()).hexdigest())


def _run_to_end(coroutine):
    """``coroutine`` run to its end, on a thread of its own when this one runs a loop already (another service's
    topics pass, run inside this one's append by the interleaving test)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


class Scenario:
    """Runs abstract operations (indices into what exists) as real commands."""

    def __init__(self, svc: MemoryService):
        self.svc = svc
        self.memories: dict[str, list[str]] = {t: [] for t in TENANTS}
        self.edges: dict[str, list[str]] = {t: [] for t in TENANTS}
        self.correlations: dict[str, list[str]] = {t: [] for t in TENANTS}
        self.counter = 0

    @staticmethod
    def pick(items: list[str], i: int) -> str:
        return items[i % len(items)] if items else "missing"

    def apply(self, op):
        """Run one operation; None when the product refused it (as it may)."""
        kind, t, a, b, flag = op
        tenant, other = TENANTS[t], TENANTS[1 - t]
        self.counter += 1
        n = self.counter
        if flag == 3 and kind in ("update", "archive", "link") and self.memories[other]:
            self._cross_tenant(kind, tenant, self.pick(self.memories[other], a))
            return None
        try:
            result = self._run(kind, tenant, a, b, flag, n)
        except REFUSED:
            return None
        if result.first_position is not None:
            self.correlations[tenant].append(result.correlation_id)
        return result

    def _cross_tenant(self, kind: str, tenant: str, foreign: str) -> None:
        mine = self.pick(self.memories[tenant], 0)
        svc, ctx = self.svc, CommandContext(tenant=tenant)
        head = svc.store.last_position()
        with pytest.raises(NotFound):
            if kind == "update":
                svc.run(svc.memories.update, ctx, foreign, {"memory": "not yours"})
            elif kind == "archive":
                svc.run(svc.memories.archive, ctx, foreign)
            else:
                svc.run(svc.edges.link, ctx, mine, foreign, "RELATED")
        with pytest.raises(NotFound):
            svc.get(tenant, foreign)
        assert svc.store.last_position() == head

    def _run(self, kind, tenant, a, b, flag, n):
        svc, ctx = self.svc, CommandContext(tenant=tenant)
        mems = self.memories[tenant]
        m, m2 = self.pick(mems, a), self.pick(mems, a + 1 + b % max(1, len(mems) - 1))  # m2 != m when it can be
        if kind == "add":
            memory_type = "WorkingMemory" if b % 3 == 0 else "LongTermMemory"
            subject = SUBJECT if flag == 3 else None
            items = [
                MemoryContent(memory=f"note {n}.{i}{MENTIONED[(a + i) % 5]}", memory_type=memory_type, tags=(f"t{flag}",), subject=subject)
                for i in range(1 + a % 3)
            ]
            result = svc.run(svc.memories.add, ctx, items)
            mems.extend(result.memory_ids)
            return result
        if kind == "update":
            changes = {"memory": f"edit {n}{MENTIONED[b % 5]}"} if flag % 2 == 0 else {"tags": [f"u{n}"], "key": f"k{flag}"}
            if flag == 2:  # given the subject: its mentions stay recorded under the tenant's key
                changes = {"subject": SUBJECT}
            return svc.run(svc.memories.update, ctx, m, changes)
        if kind in ("archive", "delete", "restore"):
            if kind == "delete":
                return svc.run(svc.memories.soft_delete, ctx, m, evolve_to=m2 if flag == 1 else None)
            return svc.run(getattr(svc.memories, kind), ctx, m)
        if kind == "rollback":
            state = load(svc.store, tenant, m)
            target = state.at(1 + b % state.version)
            result = svc.run(svc.memories.rollback, ctx, m, target.version)
            after = load(svc.store, tenant, m)
            assert (after.content, after.status) == (target.content, target.status)
            view = svc.get(tenant, m)
            assert (view.memory, view.status, view.tags, view.key) == (target.content.memory, target.status, target.content.tags, target.content.key)
            return result
        if kind == "merge":
            result = svc.run(svc.memories.merge, ctx, [m, m2])
            mems.append(result.data["merged_id"])
            assert_one_edge_per_key(svc, tenant, result.data["merged_id"])
            return result
        if kind == "fan":  # both memories linked to a third, both ways, with weights that differ: a merge of the two folds them
            third = self.pick(mems, a + 2 + b % max(1, len(mems) - 2))
            edges = [
                c.EdgeRecord(edge_id=f"user:f{flag % 2}:{n}:{i}", edge_type="RELATED", source=s, target=t, weight=(0.25, 0.5, 1.0)[(a + i) % 3])
                for i, (s, t) in enumerate([(m, third), (m2, third), (third, m), (third, m2)])
            ]
            result = svc.run(svc.edges.link_many, ctx, edges)
            self.edges[tenant].extend(e.edge_id for e in edges)
            return result
        if kind == "supersede":
            return svc.run(svc.memories.supersede, ctx, m, m2)
        if kind == "link":
            edge_id = f"{('user', 'mention', 'auto')[flag % 3]}:r{flag % 2}:{n}"
            result = svc.run(svc.edges.link, ctx, m, m2, "RELATED", weight=(0.0, 0.25, 1.0)[a % 3], edge_id=edge_id)
            self.edges[tenant].append(edge_id)
            return result
        if kind == "unlink":
            return svc.run(svc.edges.unlink, ctx, self.pick(self.edges[tenant], a))
        if kind == "undo":
            return svc.run(svc.edges.undo_namespace, ctx, PREFIXES[flag])
        if kind == "revert":
            return svc.run(svc.reverts.revert, ctx, self.pick(self.correlations[tenant], a), force=b % 2 == 1)
        if kind == "import":
            doc = document_import(parsed(DOC_IDS[a % 2], DOC_TEXTS[flag]))
            result = svc.run(svc.documents.import_document, ctx, doc)
            mems.extend(result.memory_ids)
            return result
        if kind in ("entity", "relate", "tags", "unrelate", "forget"):
            entity_id, name, aliases = ENTITIES[a % 3]
            other = ENTITIES[b % 3][0]
            if kind == "entity":
                return svc.run(svc.entities.upsert, ctx, entity_id, name=name, aliases=aliases[: flag % 2], tags=[f"g{flag}"])
            if kind == "relate":
                return svc.run(svc.entities.set_relation, ctx, entity_id, other, RELATION_TYPES[flag % 2], weight=(0.25, 0.5, 1.0)[b % 3])
            if kind == "tags":
                return svc.run(svc.entities.set_tags, ctx, entity_id, [f"t{flag}", f"t{b % 4}"])
            if kind == "unrelate":
                return svc.run(svc.entities.remove_relation, ctx, entity_id, other, RELATION_TYPES[flag % 2])
            return svc.run(svc.entities.remove, ctx, entity_id)
        if kind == "relink":
            report = svc.linking.relink(ctx, commit=True)
            return CommandResult(first_position=report["positions"][0] if report["positions"] else None,
                                 last_position=report["positions"][-1] if report["positions"] else None, correlation_id=report["correlation_id"])
        if kind == "topics":
            builder = TopicBuilder(svc, SETTINGS, Vectors(svc, "hashing"))
            report = _run_to_end(builder.arun(tenant, inline=True))
            written = svc.store.read_all(tenant=tenant, correlation_id=report["correlation_id"])
            if not written:
                return CommandResult(correlation_id=report["correlation_id"])
            mems.extend(r.event.memory_id for r in written if isinstance(r.event, c.MemoryAdded))
            return CommandResult(first_position=written[0].position, last_position=written[-1].position, correlation_id=report["correlation_id"])
        if kind == "erase":
            return svc.forget(ctx, (SUBJECT, "@tenant")[flag], reason="asked")
        if kind == "drop":
            result = svc.drop_tenant(ctx)
            for known in (self.memories, self.edges, self.correlations):
                known[tenant].clear()
            return result
        raise AssertionError(kind)

    # -- what a reader sees ------------------------------------------------------------

    def all_ids(self) -> list[str]:
        return [m for t in TENANTS for m in self.memories[t]]

    def visible(self) -> dict:
        """Per tenant: every memory's content and status, the live edges, and the other reads (``knowledge``)."""
        out = {}
        for tenant in TENANTS:
            memories = {}
            for memory_id in self.memories[tenant]:
                view = self.svc.get(tenant, memory_id)
                shown = msgspec.structs.asdict(view)
                for moving in ("version", "valid_from", "valid_to", "updated_at"):
                    shown.pop(moving)
                memories[memory_id] = shown
            nodes = [*self.memories[tenant], *(e[0] for e in ENTITIES), *(f"document:{d}" for d in DOC_IDS)]
            edges = sorted(msgspec.json.encode(e) for e in self.svc.facts.live_edges_of(tenant, nodes))
            out[tenant] = (memories, edges, knowledge(self.svc.read_conn(), tenant, None))
        return out


def assert_one_edge_per_key(svc: MemoryService, tenant: str, memory_id: str) -> None:
    """The memory a merge just made has one live edge per (source, target, type), none to itself."""
    keys = [(e.source, e.target, e.edge_type) for e in svc.facts.live_edges_of(tenant, [memory_id])]
    assert len(keys) == len(set(keys)) and all(s != t for s, t, _ in keys), keys


def knowledge(conn: sqlite3.Connection, tenant: str, as_of: int | None) -> dict:
    """Working memory, documents, entities and relations as a reader sees them (validity positions left out)."""

    def shown(view, *moving: str) -> dict | None:
        if view is None:
            return None
        out = msgspec.structs.asdict(view)
        for name in ("valid_from", "valid_to", *moving):
            out.pop(name)
        return out

    return {
        "working": [shown(e) for e in graph_reads.working_memory(conn, tenant, as_of=as_of)],
        "documents": {d: shown(ents.get_document(conn, tenant, d, as_of=as_of)) for d in DOC_IDS},
        "entities": {e: shown(ents.get_entity(conn, tenant, e, as_of=as_of)) for e, _, _ in ENTITIES},
        "relations": {e: ents.relations_of(conn, tenant, e, as_of=as_of) for e, _, _ in ENTITIES},
        "tags": ents.find_tags(conn, tenant, as_of=as_of),
    }


# Every run starts with a few memories in each tenant, so that most operations have something to act on.
SEED = [("add", 0, 2, 1, 0), ("add", 1, 1, 0, 1), ("add", 0, 1, 0, 2)]


@pytest.fixture(params=["sqlite", "postgres"])
def log_url(request):
    """The log's backend: a callable giving an empty log's URL for each example ("" is SQLite in the data dir)."""
    if request.param == "sqlite":
        return lambda: ""
    from tests.pg import fresh_database_url, unavailable

    reason = unavailable()
    if reason:
        pytest.skip(reason)
    return fresh_database_url


# Entities first, then memories that mention them, updated, archived, relinked and merged: every mention path once.
# (The seed leaves five memories in the first tenant; the add makes the sixth, index 5.)
MENTIONING = [
    ("entity", 0, 0, 0, 1), ("entity", 0, 1, 0, 0), ("add", 0, 3, 0, 0), ("update", 0, 5, 1, 0), ("entity", 0, 2, 0, 0),
    ("relink", 0, 0, 0, 0), ("archive", 0, 5, 0, 0), ("restore", 0, 5, 0, 0), ("merge", 0, 5, 0, 0),
]  # fmt: skip


# Two memories linked to a third both ways (``fan``), merged (their edges fold), the merge reverted and redone; then an
# unlink, a merge and the unlink reverted (the edge follows the merge, folded into a live one), that revert reverted; a
# memory deleted, its neighbour merged again, the memory restored (its edges follow that merge).
FOLDING = [
    ("fan", 0, 0, 0, 0), ("merge", 0, 0, 0, 0), ("revert", 0, 3, 0, 0), ("revert", 0, 4, 0, 0),
    ("fan", 0, 2, 0, 0), ("unlink", 0, 4, 0, 0), ("merge", 0, 2, 0, 0), ("revert", 0, 7, 0, 0), ("revert", 0, 9, 0, 0),
    ("delete", 0, 4, 0, 0), ("merge", 0, 6, 5, 0), ("restore", 0, 4, 0, 0),
]  # fmt: skip


# Entities, then memories of the subject and of the tenant that mention them (one of the subject's mentions unlinked
# by an update, one of the tenant's memories given the subject), the subject forgotten, then the tenant's own key; more
# mentions, and the subject forgotten again.
# (The seed leaves five memories in the first tenant: the adds make 5 of the subject, 6 and 7 of it, 8 and 9 of the tenant,
# and 8 is given the subject.)
FORGETTING = [
    ("entity", 0, 0, 0, 1), ("entity", 0, 1, 0, 1), ("add", 0, 3, 0, 3), ("add", 0, 1, 0, 3), ("add", 0, 4, 0, 0),
    ("update", 0, 5, 1, 0), ("update", 0, 8, 0, 2), ("erase", 0, 0, 0, 0), ("erase", 0, 0, 0, 1), ("add", 0, 3, 0, 3),
    ("import", 0, 1, 0, 3), ("erase", 0, 0, 0, 0),
]  # fmt: skip


def test_the_folding_example_folds_and_follows_merges(tmp_path):
    scenario = scenario_run(FOLDING, str(tmp_path))
    svc = scenario.svc
    kinds = [(r.type, r.metadata.correlation_id) for r in svc.store.read_all(types=["EdgesRepointed", "CorrelationReverted", "MemoryRestored"])]
    folded = [r.event for r in svc.store.read_all(types=["EdgesRepointed"]) if any(e.merged_from for e in r.event.current)]
    reverts = {cid for t, cid in kinds if t == "CorrelationReverted"}
    assert len(folded) >= 3 and any(r.metadata.correlation_id in reverts for r in svc.store.read_all(types=["EdgesRepointed"]))
    restored = svc.store.read_all(types=["NamespaceRestored"])[-1].event.edges
    last_merge = scenario.memories[TENANTS[0]][-1]
    assert restored and all(last_merge in (e.source, e.target) for e in restored)  # the restored memory's edges follow the merge
    svc.close()


def test_the_mentioning_example_links_memories_to_entities(tmp_path):
    scenario = scenario_run(MENTIONING, str(tmp_path))
    svc = scenario.svc
    linked = [r.event.edge for r in svc.store.read_all(types=["EdgeLinked"]) if r.event.edge.edge_type == "MENTIONS"]
    assert {e.target for e in linked} == {"e0", "e1", "e2"}
    unlinked = [r.event.reason for r in svc.store.read_all(types=["EdgeUnlinked"]) if r.event.edge.edge_type == "MENTIONS"]
    assert any("no longer mentions" in why for why in unlinked) and any("archived" in why for why in unlinked)
    assert any("merged into" in why for why in unlinked)
    merged = scenario.memories[TENANTS[0]][-1]
    assert {e.target for e in svc.linking.live_mentions(TENANTS[0]) if e.source == merged} == {"e2"}  # "by the river"
    svc.close()


def scenario_run(ops, tmp: str, log_url: str = "", *, sealed: bool = True) -> Scenario:
    """``ops`` run on a new service (its events written unsealed unless ``sealed``)."""
    settings = SETTINGS.with_overrides(log_url=log_url) if log_url else SETTINGS
    svc = MemoryService.open(tmp, settings=settings if sealed else settings.with_overrides(encryption="off"))
    scenario = Scenario(svc)
    for op in [*SEED, *ops]:
        scenario.apply(op)
    return scenario


# -- (1) incremental == rebuilt ----------------------------------------------------------------


@PROPERTY
@given(ops=st.lists(OPS_WITH_DROP, min_size=1, max_size=30), batch=st.integers(1, 7), sealed=st.booleans())
@example(ops=MENTIONING, batch=2, sealed=True)
@example(ops=FOLDING, batch=3, sealed=True)
@example(ops=FORGETTING, batch=2, sealed=False)
@example(ops=FORGETTING, batch=3, sealed=True)
def test_incremental_projections_equal_a_rebuild(ops, batch, sealed, log_url):
    with tempfile.TemporaryDirectory() as tmp:
        scenario = scenario_run(ops, tmp, log_url(), sealed=sealed)
        svc = scenario.svc
        incremental = dump(svc.runner)
        rebuilt = side_runner(svc.store, Path(tmp) / "rebuilt")
        rebuilt.rebuild()
        assert dump(rebuilt) == incremental
        stepped = side_runner(svc.store, Path(tmp) / "stepped")
        stepped.catch_up(batch_size=batch)
        assert dump(stepped) == incremental
        svc.runner.rebuild()  # in place, as ``mnemolog rebuild`` does
        assert dump(svc.runner) == incremental
        for runner in (rebuilt, stepped):
            runner.close()
        svc.close()


# -- (2) as_of == replay up to P ---------------------------------------------------------------


def _memory_read(view) -> dict | None:
    if view is None:
        return None
    return msgspec.structs.asdict(view)


def _edge_reads(views) -> list[tuple]:
    return [(e.edge_id, e.edge_type, e.source, e.target, e.weight, repr(e.properties), e.valid_from) for e in views]


@PROPERTY
@given(ops=st.lists(OPS, min_size=1, max_size=25))
@example(ops=MENTIONING)
@example(ops=FOLDING)
def test_reads_as_of_a_position_equal_a_replay_up_to_it(ops, log_url):
    with tempfile.TemporaryDirectory() as tmp:
        scenario = scenario_run(ops, tmp, log_url())
        svc = scenario.svc
        replay = side_runner(svc.store, Path(tmp) / "replay")
        conn = connect(replay.path)
        ids = scenario.all_ids()
        for position in range(0, svc.store.last_position() + 1):
            replay.catch_up(until=position)
            assert replay.position() == position
            for tenant in TENANTS:
                for memory_id in ids:
                    try:
                        past = svc.get(tenant, memory_id, as_of=position)
                    except NotFound:
                        past = None
                    assert _memory_read(past) == _memory_read(graph_reads.get_memory(conn, tenant, memory_id)), (position, memory_id)
                    assert _edge_reads(svc.edges_of(tenant, memory_id, as_of=position)) == _edge_reads(
                        graph_reads.edges_of(conn, tenant, memory_id)
                    ), (position, memory_id)
                assert knowledge(svc.read_conn(), tenant, position) == knowledge(conn, tenant, None), (position, tenant)
        conn.close()
        replay.close()
        svc.close()


# -- (3) a revert restores the visible state ------------------------------------------------------


@PROPERTY
@given(prefix=st.lists(OPS, min_size=2, max_size=20), last=OPS)
# A forced revert that found nothing to compensate (archive, restore, revert of the archive) holds
# only its marker; reverting it is a no-op, not an error.
@example(prefix=[("archive", 0, 0, 0, 0), ("restore", 0, 0, 0, 0)], last=("revert", 0, 2, 1, 0))
@example(prefix=MENTIONING[:3], last=("add", 0, 3, 0, 0))
@example(prefix=MENTIONING[:3], last=("update", 0, 5, 1, 0))
@example(prefix=MENTIONING, last=("relink", 0, 0, 0, 0))
@example(prefix=FOLDING[:1], last=FOLDING[1])  # a merge that folds edges
@example(prefix=FOLDING[:7], last=FOLDING[7])  # a revert whose edge follows a merge, folded into a live one
@example(prefix=FOLDING[:-1], last=FOLDING[-1])  # a restore whose edges follow a merge
@example(prefix=MENTIONING[:3], last=("entity", 0, 0, 0, 0))
# An edge linked after a merge between two of its sources (archived): the revert of its revert links it back as it was.
@example(prefix=[("add", 0, 0, 0, 0)] * 9 + [("merge", 0, 0, 0, 0)], last=("link", 0, 0, 0, 0))
# A merge of a merged memory (it moves the first merge's MERGED_TO edges): its revert gives each source its own back.
@example(prefix=[("merge", 0, 3, 0, 0)], last=("merge", 0, 5, 0, 0))
# A chunk archived by hand, then the document imported again: its revert's revert leaves the chunk archived, as it was.
@example(prefix=[("import", 1, 0, 0, 0), ("archive", 1, 2, 0, 0)], last=("import", 1, 0, 0, 0))
def test_reverting_a_command_restores_the_visible_state(prefix, last, log_url):
    with tempfile.TemporaryDirectory() as tmp:
        scenario = scenario_run(prefix, tmp, log_url())
        svc = scenario.svc
        before = scenario.visible()
        existed = {t: set(scenario.memories[t]) for t in TENANTS}
        result = scenario.apply(last)
        if result is None or result.first_position is None:
            assert scenario.visible() == before  # refused or no-op: nothing visible changed
            svc.close()
            return
        tenant = TENANTS[last[1]]
        after = scenario.visible()
        undo = svc.run(svc.reverts.revert, CommandContext(tenant=tenant), result.correlation_id)
        assert undo.data["conflicts"] == [] and not undo.data["forced"]
        reverted = scenario.visible()
        for t in TENANTS:
            memories, edges, rest = reverted[t]
            assert edges == before[t][1]
            assert rest == before[t][2]
            assert {m: v for m, v in memories.items() if m in existed[t]} == before[t][0]
            assert all(v["status"] == "deleted" for m, v in memories.items() if m not in existed[t])
        if undo.first_position is None:  # the command was a revert that had nothing to compensate
            assert undo.data["nothing_to_revert"] and after == before
        elif undo.last_position > undo.first_position:  # compensations after the marker
            # Reverting the revert brings the command's effect back.
            svc.run(svc.reverts.revert, CommandContext(tenant=tenant), undo.correlation_id)
            assert scenario.visible() == after
        else:
            assert after == before  # nothing to compensate: the command changed nothing visible
            head = svc.store.last_position()
            redo = svc.run(svc.reverts.revert, CommandContext(tenant=tenant), undo.correlation_id)
            assert redo.data["nothing_to_revert"] and redo.first_position is None and svc.store.last_position() == head
        svc.close()


# -- crash: exactly-once checkpoints --------------------------------------------------------------

CHILD = """
import sys
from mnemolog.projections.service import MemoryService
svc = MemoryService.open(sys.argv[1], catch_up=False)
print("ready", flush=True)
svc.runner.catch_up(batch_size=int(sys.argv[2]))
print("done", flush=True)
"""


def _spawn(data_dir: Path, batch: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(data_dir), str(batch)], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _consistent_with_replay(store: EventStore, data_dir: Path, scratch: Path) -> None:
    """Each projection holds exactly the events up to its checkpoint: a replay to there matches it."""
    runner = ProjectionRunner(store, data_dir / "projections.db", default_projectors(SETTINGS, data_dir))
    try:
        found = dump(runner)
        for projector in runner.projectors:
            position = (runner.checkpoint(projector.name) or (0,))[0]
            fresh = [p for p in default_projectors(SETTINGS, scratch) if p.name == projector.name]
            replay = ProjectionRunner(store, scratch / f"replay-{projector.name}-{position}.db", fresh)
            replay.catch_up(until=position)
            assert dump(replay)[projector.name] == found[projector.name], (projector.name, position)
            replay.close()
    finally:
        runner.close()


def _lowest_checkpoint(path: Path) -> int:
    """The lowest projection checkpoint, read the way another process would (0 before any)."""
    if not path.exists():
        return 0
    conn = sqlite3.connect(str(path), timeout=5)
    try:
        row = conn.execute("SELECT min(position) FROM checkpoints").fetchone()
    except sqlite3.OperationalError:  # the child has not created the table yet
        return 0
    finally:
        conn.close()
    return row[0] or 0


@pytest.mark.slow
def test_catch_up_killed_at_random_moments_loses_and_repeats_nothing(tmp_path):
    rng = random.Random(20260101)
    data_dir = tmp_path / "data"
    db = data_dir / "projections.db"
    store = EventStore.open(data_dir)
    write_log(store, rng, target=2000)
    head = store.last_position()
    # Kill each process once the checkpoint passes a random position (so that kills land
    # mid-catch-up however loaded the machine is), a random moment later; the last one finishes.
    targets = [*sorted(rng.sample(range(20, head - 20), 5)), head + 1]
    kills = 0
    for n, target in enumerate(targets):
        child = _spawn(data_dir, batch=rng.choice([3, 5, 8]))
        while child.poll() is None and _lowest_checkpoint(db) < target:
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.02))
        if child.poll() is None and target != head + 1:
            child.send_signal(signal.SIGKILL)
        child.wait(timeout=120)
        err = child.stderr.read()
        child.stdout.close()
        child.stderr.close()
        if target == head + 1:
            assert child.returncode == 0, err
        else:
            assert child.returncode in (0, -signal.SIGKILL), err
            kills += child.returncode == -signal.SIGKILL
        if n in (1, 3):
            _consistent_with_replay(store, data_dir, tmp_path / f"scratch-{n}")
    assert kills >= 3, "the kills should land mid-catch-up"
    svc = MemoryService.open(data_dir, settings=SETTINGS)  # reopen and catch up: nothing is left
    assert svc.sync() == 0 and svc.runner.position() == head
    survived = dump(svc.runner)
    svc.runner.rebuild()
    assert dump(svc.runner) == survived
    assert survived["graph"]["graph_memories"]  # the comparison saw real rows
    svc.close()
    store.close()
