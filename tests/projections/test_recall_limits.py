"""A recall answer is the start of every longer one, whatever the limit.

The channels search a window of ``MNEMOLOG_RECALL_CANDIDATES`` candidates
each; a limit the window's fused answer cannot fill takes the next hits from
deeper windows, after it. So asking for more never reorders (or drops) what a
shorter answer returned: a memory the window saw in one channel only does not
jump above the others because a deeper search found it in a second channel.
"""

from __future__ import annotations

import random

import pytest

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.recall.searcher import RecallOptions
from mnemolog.projections.service import MemoryService

CTX = CommandContext(tenant="t", actor="test")
NAMES = ["Kofi", "Lena", "Hana", "Ivan"]
VERBS = ["planned", "cooked", "visited", "cancelled", "painted", "joined"]
OBJECTS = ["a vegan lasagna", "a trip to Lisbon", "the garden shed", "a chess tournament", "the roof leak", "a jazz concert", "the tax return"]
LIMITS = (1, 5, 10, 25, 50, 51, 60, 80, 100)


@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    """People as entities (the linker links each memory to the one it names), 600 memories about them."""
    service = MemoryService.open(tmp_path_factory.mktemp("limits") / "data", settings=Settings({}, env={}))
    rng = random.Random(11)
    for n, name in enumerate(NAMES):
        service.run(service.entities.upsert, CTX, f"p{n}", name=name, entity_type="person")
    service.run(service.entities.set_relation, CTX, "p0", "p1", "KNOWS", weight=0.7)
    texts = [f"{rng.choice(NAMES)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} (note {i})" for i in range(600)]
    service.run(service.memories.add, CTX, [MemoryContent(memory=t) for t in texts])
    service.sync()
    yield service
    service.close()


QUERIES = ["Kofi vegan trip", "What did Lena say about the jazz concert?", "Hana roof leak", "Lisbon chess", "Ivan"]


@pytest.mark.parametrize(
    "options",
    [{}, {"fusion": "rrf"}, {"strategy": "graph-only"}, {"strategy": "knowledge-only"}, {"weights": {"semantic": 0.5}}, {"channels": ("lexical",)}],
    ids=["score", "rrf", "graph-only", "knowledge-only", "semantic", "lexical"],
)
def test_a_shorter_answer_is_the_start_of_every_longer_one(svc, options):
    for query in QUERIES:
        answers = {limit: [(h.id, h.kind) for h in svc.searcher.recall("t", query, RecallOptions(limit=limit, **options)).hits] for limit in LIMITS}
        longest = answers[LIMITS[-1]]
        for limit, hits in answers.items():
            assert hits == longest[:limit], (query, limit)
        assert len(set(longest)) == len(longest)


def test_a_limit_beyond_the_window_still_fills_from_deeper_candidates(svc):
    window = int(svc.settings.recall_candidates)
    lexical = svc.searcher.recall("t", "Kofi vegan trip", RecallOptions(limit=100, channels=("lexical",)))
    assert len(lexical.hits) == 100 > window  # more than one window's candidates: the next come from a deeper search
    assert lexical.channels["lexical"].count >= 100


def test_a_deeper_window_embeds_the_query_and_finds_its_entities_once(svc, monkeypatch):
    calls = {"embed": 0, "named": 0}
    embed, named = svc.searcher.embed_query, svc.searcher.named_entities

    def counted(name, real):
        def call(*args):
            calls[name] += 1
            return real(*args)
        return call

    monkeypatch.setattr(svc.searcher, "embed_query", counted("embed", embed))
    monkeypatch.setattr(svc.searcher, "named_entities", counted("named", named))
    result = svc.searcher.recall("t", "Kofi vegan trip", RecallOptions(limit=100, weights={"semantic": 0.5}))
    assert len(result.hits) == 100 and result.channels["lexical"].count > int(svc.settings.recall_candidates)  # a deeper window ran
    assert calls == {"embed": 1, "named": 1}


def _approximate_below(svc, monkeypatch, walked: int) -> None:
    """The vector channel over its index, and the index as an approximate search is: one that walks at most
    ``walked`` entries misses some true neighbours (here, every third), which a wider walk finds."""
    from functools import partial

    from mnemolog.projections import assembly

    monkeypatch.setattr(assembly, "vector_search", partial(assembly.vector_search, exact_threshold=100))  # the index, not a scan
    index = svc.vector_index
    exact = index.search

    def search(vector, count):
        keys = exact(vector, count)
        return keys if count > walked else keys[[i for i in range(len(keys)) if i % 3 != 1]]

    monkeypatch.setattr(index, "exhaustive", True)
    monkeypatch.setattr(index, "search", search)


def test_each_channel_of_a_search_lists_the_start_of_every_longer_list(svc, monkeypatch):
    """``/v1/search`` lists each channel's own ranking: a limit is the start of any larger one, the vector channel's too."""
    from mnemolog.projections.recall import windows

    svc.scrub()  # the vector index holds every memory, so the channel searches it
    _approximate_below(svc, monkeypatch, walked=256)
    for query in QUERIES[:3]:
        options = {limit: RecallOptions(limit=limit, weights={"semantic": 0.5}) for limit in LIMITS}
        strategy = {limit: svc.searcher.resolve_strategy("t", o)[0] for limit, o in options.items()}
        answers = {limit: windows.channel_rankings(svc.searcher, "t", query, o, strategy[limit])[0] for limit, o in options.items()}
        longest = answers[LIMITS[-1]]
        assert len(longest["semantic"]) == LIMITS[-1]
        for limit, rankings in answers.items():
            for name, ranking in rankings.items():
                assert [node for node, _ in ranking[:limit]] == [node for node, _ in longest[name][:limit]], (query, name, limit)


@pytest.mark.parametrize("options", [{"strategy": "graph-only"}, {}, {"fusion": "rrf"}], ids=["graph-only", "score", "rrf"])
def test_every_entity_a_question_reaches_is_returned_when_the_limit_has_room(tmp_path, options):
    """Entities may take two in five of the graph channel's places (20 of a window of 50): a question reaching
    30 entities got 20 of them at any limit, since the channel, cut below its window, was taken as exhausted."""
    from mnemolog.projections.recall import windows

    service = MemoryService.open(tmp_path / "data", settings=Settings({}, env={}))
    try:
        service.run(service.entities.upsert, CTX, "hub", name="Zorgcorp", entity_type="organization")
        for n in range(30):
            service.run(service.entities.upsert, CTX, f"e{n}", name=f"Employee Number{n}", entity_type="person")
            service.run(service.entities.set_relation, CTX, f"e{n}", "hub", "WORKS_AT", weight=0.5 + n / 100)
        service.sync()
        reached = {"hub"} | {f"e{n}" for n in range(30)}
        recall = RecallOptions(limit=100, **options)
        answer = service.searcher.recall("t", "Who works at Zorgcorp?", recall)
        assert {h.id for h in answer.hits if h.kind == "entity"} == reached
        strategy = service.searcher.resolve_strategy("t", recall)[0]
        graph = windows.channel_rankings(service.searcher, "t", "Who works at Zorgcorp?", recall, strategy)[0]["graph"]
        assert {node for node, _ in graph} == reached
    finally:
        service.close()


@pytest.mark.parametrize("options", [{"strategy": "knowledge-only"}, {"strategy": "graph-only"}, {"fusion": "rrf"}], ids=["knowledge-only", "graph-only", "rrf"])
def test_every_memory_mentioning_a_named_entity_is_returned_when_the_limit_has_room(tmp_path, options):
    """An entity leads to its 50 newest mentions: a question naming one mentioned by 80 memories got 50 of them at
    any limit, a deeper window reading the same 50 again."""
    service = MemoryService.open(tmp_path / "data", settings=Settings({}, env={}))
    try:
        service.run(service.entities.upsert, CTX, "zc", name="Zorgcorp", entity_type="organization", aliases=["ZCorp"])
        service.run(service.memories.add, CTX, [MemoryContent(memory=f"ZCorp shipment note {n}") for n in range(80)])
        service.sync()
        answer = service.searcher.recall("t", "Tell me about Zorgcorp", RecallOptions(limit=100, **options))
        assert len({h.id for h in answer.hits if h.kind == "memory"}) == 80
    finally:
        service.close()


@pytest.mark.parametrize("options", [{}, {"fusion": "rrf"}, {"strategy": "graph-only"}, {"weights": {"semantic": 0.5}}], ids=["score", "rrf", "graph-only", "semantic"])
def test_a_hits_channel_ranks_are_its_places_in_the_channels_rankings_whichever_window_it_came_from(svc, options):
    """A hit taken from a deeper window gave its rank in that window's search: the graph's counted from 1 again,
    so that one answer held two hits of graph rank 1, and neither agreed with ``/v1/search``."""
    from mnemolog.projections.recall import windows

    for query in QUERIES:
        recall = RecallOptions(limit=100, **options)
        answer = svc.searcher.recall("t", query, recall)
        rankings = windows.channel_rankings(svc.searcher, "t", query, recall, svc.searcher.resolve_strategy("t", recall)[0])[0]
        places = {name: {node: n for n, (node, _) in enumerate(ranking, 1)} for name, ranking in rankings.items()}
        for name in places:
            ranks = [h.channels[name].rank for h in answer.hits if name in h.channels]
            assert len(ranks) == len(set(ranks)), (query, name)
            assert ranks == [places[name][h.id] for h in answer.hits if name in h.channels], (query, name)
