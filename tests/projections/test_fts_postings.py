"""The in-memory postings index answers exactly what the exact FTS5 statement answers."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemolog.eventstore import EventStore
from mnemolog.projections.filters import SearchFilters
from mnemolog.projections.fts import projector as fts_module
from mnemolog.projections.fts.postings import PostingsIndex
from mnemolog.projections.fts.projector import FtsProjector, fts_search
from mnemolog.projections.runner import ProjectionRunner
from tests.projections.support import Log

WORDS = "coffee tea milk sugar bread jam honey lemon running runs ran water juice café".split()

_op = st.one_of(
    st.tuples(st.just("add"), st.integers(0, 11), st.lists(st.sampled_from(WORDS), min_size=1, max_size=7), st.sampled_from(["t", "u"]),
              st.sampled_from([(), ("red",), ("blue", "red")]), st.sampled_from([None, "coffee", "jam"])),
    st.tuples(st.just("update"), st.integers(0, 11), st.lists(st.sampled_from(WORDS), min_size=1, max_size=7)),
    st.tuples(st.just("archive"), st.integers(0, 11)),
    st.tuples(st.just("catch_up")),
    st.tuples(st.just("drop"), st.sampled_from(["t", "u"])),
)  # fmt: skip

_filters = st.sampled_from(
    [
        None,
        SearchFilters(status=None),
        SearchFilters(status=("archived",)),
        SearchFilters(tags=("red",)),
        SearchFilters(status=None, tags=("blue",)),
        SearchFilters(memory_types=("UserMemory",)),
    ]
)


def _key(hits):
    return [(h.memory_id, h.row_id, h.version) for h in hits]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    ops=st.lists(_op, min_size=1, max_size=40),
    queries=st.lists(
        st.tuples(st.lists(st.sampled_from(WORDS + ["absent", "e-mail"]), min_size=1, max_size=4), st.integers(1, 12), _filters, st.booleans()),
        min_size=1,
        max_size=6,
    ),
)
def test_postings_equal_the_exact_statement_under_writes_filters_and_as_of(tmp_path_factory, ops, queries):
    path = tmp_path_factory.mktemp("postings")
    store = EventStore.open(path)
    runner = ProjectionRunner(store, path / "projections.db", [FtsProjector()])
    log = Log(store)
    live: dict[str, str] = {}  # memory id -> tenant, for memories not dropped
    used: set[str] = set()  # every stream written (a dropped memory's stream stays)
    positions = [0]
    try:
        def check():
            runner.catch_up()
            for words, limit, filters, past in queries:
                query = " ".join(words)
                as_of = positions[len(positions) // 2] if past else None
                for tenant in ("t", "u"):
                    fast = fts_search(runner.conn, tenant, query, limit=limit, as_of=as_of, filters=filters)
                    exact = fts_search(runner.conn, tenant, query, limit=limit, as_of=as_of, filters=filters, exact=True)
                    assert _key(fast) == _key(exact)
                    assert [h.score for h in fast] == pytest.approx([h.score for h in exact], rel=1e-9, abs=1e-12)

        for op in ops:
            kind = op[0]
            if kind == "add":
                _, n, words, tenant, tags, key = op
                mid = f"m{n}-{len(positions)}" if f"m{n}" in used else f"m{n}"
                used.add(mid)
                memory_type = "UserMemory" if n % 3 == 0 else "OuterMemory"
                positions.append(log.add(mid, " ".join(words), tenant=tenant, tags=tags, key=key, memory_type=memory_type))
                live[mid] = tenant
            elif kind == "update" and f"m{op[1]}" in live:
                positions.append(log.update(f"m{op[1]}", " ".join(op[2]), tenant=live[f"m{op[1]}"]))
            elif kind == "archive" and f"m{op[1]}" in live:
                positions.append(log.archive(f"m{op[1]}", tenant=live[f"m{op[1]}"]))
            elif kind == "drop" and op[1] in live.values():
                positions.append(log.drop(op[1]))
                live = {m: t for m, t in live.items() if t != op[1]}
            elif kind == "catch_up":
                check()  # the index then follows the next writes incrementally
        check()
    finally:
        runner.close()
        store.close()


@pytest.fixture
def runner(store, tmp_path):
    runner = ProjectionRunner(store, tmp_path / "projections.db", [FtsProjector()])
    yield runner
    runner.close()


def test_searches_come_from_the_postings_not_from_fts5(log, runner, monkeypatch):
    log.add("m1", "we adopted a dog named Rex")
    log.add("m2", "the animal shelter called about the dog")
    runner.catch_up()

    def refuse(*args, **kwargs):
        raise AssertionError("FTS5 was asked")

    monkeypatch.setattr(fts_module, "_tiered", refuse)
    monkeypatch.setattr(fts_module, "_run", refuse)
    hits = fts_search(runner.conn, "t", "when did they adopt the dog?")
    assert [h.memory_id for h in hits] == ["m1", "m2"]


def test_phrases_and_cjk_are_left_to_fts5(log, runner):
    log.add("m1", "send the e-mail today")
    log.add("m2", "mail the letter by email")
    log.add("zh", "我今天早上在公司喝了一杯咖啡")
    runner.catch_up()
    index = PostingsIndex.for_connection(runner.conn)
    assert index.search(runner.conn, "t", ["e-mail"], limit=5) is None  # two tokens: a phrase
    assert [h.memory_id for h in fts_search(runner.conn, "t", "e-mail", terms=["e-mail"])] == ["m1"]
    assert [h.memory_id for h in fts_search(runner.conn, "t", "咖啡")] == ["zh"]


def test_a_rebuild_reloads_the_index(log, runner):
    for i in range(20):
        log.add(f"m{i}", f"note {i} about coffee and tea number{i % 5}")
    runner.catch_up()
    before = fts_search(runner.conn, "t", "coffee number3")
    runner.rebuild(["fts"])
    log.update("m3", "only tea now")
    runner.catch_up()
    after = fts_search(runner.conn, "t", "coffee number3")
    assert after == fts_search(runner.conn, "t", "coffee number3", exact=True)
    assert [h.memory_id for h in after] != [h.memory_id for h in before]
    assert "m3" not in [h.memory_id for h in after]


def test_recall_reads_its_own_writes_through_the_loaded_index(svc):
    from mnemolog.eventstore.commands import CommandContext
    from mnemolog.eventstore.model import MemoryContent
    from mnemolog.projections.recall.searcher import RecallOptions

    ctx = CommandContext(tenant="t", actor="test")
    svc.run(svc.memories.add, ctx, [MemoryContent(memory=f"note {i} about the garden") for i in range(20)])
    svc.warm()  # the index holds the first twenty
    added = svc.run(svc.memories.add, ctx, [MemoryContent(memory="the saxophone lesson moved to Friday")])
    found = svc.searcher.recall("t", "when is the saxophone lesson?", RecallOptions(channels=("lexical",)))
    assert [h.id for h in found.hits] == list(added.memory_ids)
    archived = svc.run(svc.memories.archive, ctx, added.memory_ids[0])
    assert svc.searcher.recall("t", "saxophone lesson", RecallOptions(channels=("lexical",))).hits == []
    past = svc.searcher.recall("t", "saxophone lesson", RecallOptions(channels=("lexical",), as_of=archived.first_position - 1))
    assert [h.id for h in past.hits] == list(added.memory_ids)


def test_merged_segments_rank_as_fts5_does(log, runner, monkeypatch):
    monkeypatch.setattr(PostingsIndex, "MAX_SEGMENTS", 2)
    index = PostingsIndex.for_connection(runner.conn)
    words = "coffee tea milk sugar bread jam honey".split()
    for step in range(12):  # one segment per catch-up: merged along the way
        for i in range(5):
            log.add(f"m{step}-{i}", " ".join(words[(step + i + k) % 7] for k in range(1 + i % 4)))
        if step % 3 == 2:
            log.update(f"m{step}-0", "jam and honey only")
        runner.catch_up()
        for query in ("coffee honey", "jam", "tea sugar milk"):
            fast = fts_search(runner.conn, "t", query, limit=7)
            assert _key(fast) == _key(fts_search(runner.conn, "t", query, limit=7, exact=True))
        assert len(index.segments) <= 3
