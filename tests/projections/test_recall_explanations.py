"""Recall's explanations agree with what the channels returned: each hit's ranks are its ranks in
each channel's own list, and its fused score is recomputed from the weights, the channels' raw
scores, its priors and every contribution it inherited."""

from __future__ import annotations

import math
import random

import pytest

from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.recall import fusion
from mnemolog.projections.recall.searcher import RecallOptions
from mnemolog.projections.service import MemoryService

CTX = CommandContext(tenant="t")
WORDS = "lighthouse lamp keeper harbour ferry tide storm anchor rope gull island beacon".split()


@pytest.fixture
def svc(tmp_path):
    service = MemoryService.open(tmp_path / "data", settings=Settings({}, env={}))
    yield service
    service.close()


def _recomputed(svc, query: str, options: RecallOptions) -> None:
    result = svc.searcher.recall("t", query, options)
    lists, states, _, _ = svc.searcher.channel_results("t", query, options)
    norms = {"lexical": "max", "semantic": "minmax", "graph": "absolute"}
    normed = {name: fusion.normalize(hits, norms[name]) for name, hits in lists.items()}
    ranks = {name: {m: n for n, (m, _) in reversed(list(enumerate(hits, 1)))} for name, hits in lists.items()}
    assert result.hits
    for hit in result.hits:
        for name, found in hit.channels.items():
            assert found.rank == ranks[name][hit.id]  # the rank it has in that channel's own list
        base = sum(states[name].weight * normed[name][hit.id] for name in hit.channels)
        score = base * math.prod(hit.priors.values()) + sum(x.amount for x in hit.context)
        assert hit.score == pytest.approx(score, abs=1e-5), hit


def test_a_memory_that_inherits_from_many_neighbours_explains_each(svc):
    ids = svc.run(svc.memories.add, CTX, [MemoryContent(memory="the keeper Quillbert")] + [MemoryContent(memory=f"lighthouse lamp {i} glows") for i in range(5)]).memory_ids
    x = ids[0]
    svc.run(svc.edges.link_many, CTX, [c.EdgeRecord(edge_id=f"user:f:{n}", edge_type="FOLLOWS", source=o, target=x, weight=1.0) for n, o in enumerate(ids[1:])])
    svc.sync()
    [hit] = [h for h in svc.searcher.recall("t", "lighthouse lamp glows", RecallOptions(limit=10)).hits if h.id == x]
    assert sorted(x.source for x in hit.context) == sorted(ids[1:])  # all five, not the first three
    _recomputed(svc, "lighthouse lamp glows", RecallOptions(limit=10))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_hit_is_recomputed_from_its_explanation(svc, seed):
    rng = random.Random(seed)
    contents = [
        MemoryContent(memory=" ".join(rng.sample(WORDS, 5)), key=rng.choice([None, None, "lighthouse", "storm"]),  # keys the query names: graph hits
                      sources=(f"conv-{n % 3}:D1:{n}",), properties={"conv": f"c{n % 3}", "turn": n})
        for n in range(60)
    ]
    ids = svc.run(svc.memories.add, CTX, contents).memory_ids
    svc.run(svc.edges.link_many, CTX, [c.EdgeRecord(edge_id=f"user:f:{n}", edge_type="FOLLOWS", source=a, target=b, weight=1.0)
                                       for n, (a, b) in enumerate(zip(ids, ids[1:]))])
    svc.run(svc.edges.link_many, CTX, [c.EdgeRecord(edge_id=f"user:g:{n}", edge_type="FOLLOWS", source=a, target=ids[0], weight=1.0)
                                       for n, a in enumerate(ids[10:20])])
    svc.sync()
    for query in ("lighthouse keeper", "storm over the island", "anchor rope gull"):
        _recomputed(svc, query, RecallOptions(limit=25))
        _recomputed(svc, query, RecallOptions(limit=3))  # graph hits fused apart, read only when they can reach the answer
        _recomputed(svc, query, RecallOptions(limit=25, weights={"semantic": 0.5}))
    assert any("graph" in h.channels for h in svc.searcher.recall("t", "lighthouse keeper", RecallOptions(limit=25)).hits)


@pytest.mark.parametrize("weights", [{}, {"semantic": 0.5}], ids=["default", "semantic"])
def test_a_smaller_limit_is_a_prefix_of_a_larger_one_up_to_the_candidates(svc, weights):
    rng = random.Random(7)
    contents = [MemoryContent(memory=" ".join(rng.sample(WORDS, rng.randint(2, 6))), properties={"conv": f"c{n % 4}", "turn": n}) for n in range(300)]
    ids = svc.run(svc.memories.add, CTX, contents).memory_ids
    svc.run(svc.edges.link_many, CTX, [c.EdgeRecord(edge_id=f"user:f:{n}", edge_type="FOLLOWS", source=a, target=b, weight=1.0)
                                       for n, (a, b) in enumerate(zip(ids, ids[1:]))])
    svc.sync()
    deepest = int(svc.settings.recall_candidates)
    for query in ("lighthouse keeper", "storm island", "anchor rope gull tide"):
        answers = {limit: [(h.id, h.score) for h in svc.searcher.recall("t", query, RecallOptions(limit=limit, weights=weights)).hits]
                   for limit in (1, 5, 10, 25, deepest)}
        for limit, hits in answers.items():
            assert hits == answers[deepest][:limit], (query, limit)


def test_an_rrf_hit_is_recomputed_from_its_ranks(svc):
    rng = random.Random(3)
    svc.run(svc.memories.add, CTX, [MemoryContent(memory=" ".join(rng.sample(WORDS, 4)), key=rng.choice([None, "storm"])) for _ in range(80)])
    svc.sync()
    for options in (RecallOptions(limit=20, fusion="rrf"), RecallOptions(limit=20, fusion="rrf", rrf_k=5.0, weights={"semantic": 0.7})):
        result = svc.searcher.recall("t", "storm island ferry", options)
        k = options.rrf_k if options.rrf_k is not None else float(svc.settings.recall_rrf_k)
        assert result.hits
        for hit in result.hits:
            expected = sum(result.channels[name].weight / (k + found.rank) for name, found in hit.channels.items()) + hit.overlap_bonus
            assert hit.score == pytest.approx(expected, abs=1e-5)


@pytest.mark.parametrize("fusion_name", ["score", "rrf"])
def test_a_recall_of_one_channel_keeps_its_order_among_equal_scores(svc, fusion_name):
    """A word in most rows scores bm25's floor in each: recall ordered those ties by id, unlike the channel (the
    first memory's row is its newest, after two updates), so its hits' ranks went 3, 1, 2 and a limit chose others."""
    ctx = CommandContext(tenant="ties")
    ids = svc.run(svc.memories.add, ctx, [MemoryContent(memory=f"lemon w{i}") for i in range(3)] + [MemoryContent(memory="other words")]).memory_ids
    svc.run(svc.memories.update, ctx, ids[0], {"tags": ("x",)})
    svc.run(svc.memories.update, ctx, ids[0], {"tags": ()})
    channel = [memory_id for memory_id, _ in svc.searcher.lexical("ties", "lemon", 3, None, False, fusion_filters())]
    for limit in (1, 2, 3):
        hits = svc.searcher.recall("ties", "lemon", RecallOptions(limit=limit, channels=("lexical",), fusion=fusion_name)).hits
        assert [h.id for h in hits] == channel[:limit]
        assert [h.channels["lexical"].rank for h in hits] == list(range(1, limit + 1))


def fusion_filters():
    from mnemolog.projections.filters import SearchFilters

    return SearchFilters()
