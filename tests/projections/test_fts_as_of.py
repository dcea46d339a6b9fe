"""A lexical search as of a position ranks with bm25's statistics of then, for the queries FTS5 answers too.

Phrases (``e-mail``), CJK bigrams and single characters are answered by FTS5,
whose bm25 counts every row its index holds now; as of a position they are
scored from FTS5's answers with the statistics of the rows indexed by then
(:mod:`mnemolog.projections.fts.as_of_ranking`). The reference is FTS5's
exact statement over an index holding only those rows.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemolog.projections.filters import SearchFilters
from mnemolog.projections.fts import as_of_ranking
from mnemolog.projections.fts.projector import FtsProjector, fts_search
from mnemolog.projections.runner import ProjectionRunner
from tests.projections.support import Log, exact_as_of, fts_log

WORDS = ["e-mail", "mail", "coffee", "咖啡", "咖啡店", "我们", "今天", "喝", "東京", "tea", "e", "红茶"]
QUERIES = ["e-mail", "咖啡", "咖", "我们今天喝咖啡", "东京 e-mail", "coffee 咖啡", "e-mail 红茶 tea"]

_op = st.one_of(
    st.tuples(st.just("add"), st.integers(0, 9), st.lists(st.sampled_from(WORDS), min_size=1, max_size=8), st.sampled_from(["t", "u"]),
              st.sampled_from([None, "e-mail", "咖啡"])),
    st.tuples(st.just("update"), st.integers(0, 9), st.lists(st.sampled_from(WORDS), min_size=1, max_size=8)),
    st.tuples(st.just("archive"), st.integers(0, 9)),
)  # fmt: skip


@pytest.fixture
def runner(store, tmp_path):
    runner = ProjectionRunner(store, tmp_path / "projections.db", [FtsProjector()])
    yield runner
    runner.close()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    ops=st.lists(_op, min_size=2, max_size=30),
    checks=st.lists(
        st.tuples(st.sampled_from(QUERIES), st.integers(1, 8), st.sampled_from([None, SearchFilters(status=None)]), st.floats(0.0, 1.0)),
        min_size=1,
        max_size=5,
    ),
)
def test_phrases_and_cjk_as_of_a_position_score_as_fts5_over_the_rows_indexed_by_then(tmp_path_factory, ops, checks):
    with fts_log(tmp_path_factory.mktemp("as-of")) as (runner, log):
        positions = _write(log, [("add", 0, ["咖啡", "e-mail"], "t", None), *ops])
        runner.catch_up()
        for query, limit, filters, when in checks:
            as_of = positions[min(int(when * len(positions)), len(positions) - 1)]
            terms = query.split() if "-" in query else None  # a query analysis's terms: "e-mail" stays one phrase
            for tenant in ("t", "u"):
                found = fts_search(runner.conn, tenant, query, limit=limit, as_of=as_of, filters=filters, terms=terms)
                expected = exact_as_of(runner.conn, tenant, query, limit, as_of, filters, terms)
                assert [(h.memory_id, h.row_id, h.version) for h in found] == [(h.memory_id, h.row_id, h.version) for h in expected]
                assert [h.score for h in found] == pytest.approx([h.score for h in expected], rel=1e-12, abs=0.0)


def _write(log: Log, ops) -> list[int]:
    """Write the generated operations that apply (an update or archive of a memory not added yet does not); their positions."""
    tenants: dict[str, str] = {}
    positions = []
    for op in ops:
        name = f"m{op[1]}"
        if op[0] == "add" and name not in tenants:
            tenants[name] = op[3]
            positions.append(log.add(name, " ".join(op[2]), tenant=op[3], key=op[4]))
        elif op[0] == "update" and name in tenants:
            positions.append(log.update(name, " ".join(op[2]), tenant=tenants[name]))
        elif op[0] == "archive" and name in tenants:
            positions.append(log.archive(name, tenant=tenants[name]))
    return positions


def test_a_cjk_search_as_of_a_position_scores_as_the_search_at_that_position_did(log, runner):
    log.add("x", "今天 红茶")
    log.add("y", "咖啡咖啡咖啡")
    for i in range(3):
        log.add(f"c{i}", f"咖啡 红茶 {i}")
    for i in range(8):
        at = log.add(f"f{i}", f"红茶 {i}", tenant="u")
    runner.catch_up()
    then = fts_search(runner.conn, "t", "今天 咖啡", limit=10)
    assert [h.memory_id for h in then][:2] == ["x", "y"]  # 今天 is the rarer
    for i in range(40):  # 今天 grows common elsewhere: with today's statistics 咖啡 weighs more
        log.add(f"u{i}", f"今天 {i}", tenant="u")
    runner.catch_up()
    assert [h.memory_id for h in fts_search(runner.conn, "t", "今天 咖啡", limit=10)][0] == "y"
    again = fts_search(runner.conn, "t", "今天 咖啡", limit=10, as_of=at)
    assert [(h.memory_id, h.row_id, h.rank) for h in again] == [(h.memory_id, h.row_id, h.rank) for h in then]
    # FTS5's plan of then summed the phrases' parts in the order of its own statements: the last bit may differ.
    assert [h.score for h in again] == pytest.approx([h.score for h in then], rel=1e-12, abs=0.0)


def test_a_search_as_of_a_position_no_row_was_indexed_after_is_ranked_by_fts5(log, runner, monkeypatch):
    """FTS5's statistics are then those of the position: FTS5 ranks, as at the head."""
    log.add("a", "我们喝咖啡")
    at = log.add("b", "咖啡，咖啡")
    runner.catch_up()
    calls = []
    scored = as_of_ranking.bm25_parts
    monkeypatch.setattr(as_of_ranking, "bm25_parts", lambda *args: calls.append(1) or scored(*args))
    assert [h.memory_id for h in fts_search(runner.conn, "t", "咖啡", limit=5, as_of=at)] == ["b", "a"]
    assert calls == []
    log.add("c", "红茶")
    runner.catch_up()
    assert [h.memory_id for h in fts_search(runner.conn, "t", "咖啡", limit=5, as_of=at)] == ["b", "a"]
    assert calls
