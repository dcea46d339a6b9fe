"""A recall answer explains each score from what it sends: a client recomputes every hit's fused
score from the JSON alone (each channel's contribution, the prior factors, what it inherited, the
overlap bonus), and each contribution follows from the channel's weight and the hit's rank or score."""

from __future__ import annotations

import math

import pytest

LINES = [
    ("Ann", "I moved to Lisbon in May and the harbour is lovely"),
    ("Ben", "How do you like Lisbon so far?"),
    ("Ann", "I love it, the ferry to the harbour runs at dawn"),
    ("Ben", "When did you adopt the cat?"),
    ("Ann", "I adopted a cat called Miso last June"),
    ("Ben", "The harbour lighthouse keeper feeds Miso"),
    ("Ann", "Acme opened an office by the harbour"),
    ("Ben", "Alice works at Acme now"),
]


async def _conversation(client) -> int:
    await client.put_entity("acme", {"name": "Acme Corp", "entity_type": "organization", "aliases": ["Acme"]})
    await client.put_entity("alice", {"name": "Alice", "entity_type": "person"})
    await client.set_relation("alice", "acme", "WORKS_AT", weight=0.9)
    written = await client.add_memories(memories=[
        {"memory": f"{who}: {text}", "key": "harbour" if n == 2 else None, "properties": {"speaker": who, "time": "2 June 2024"}}
        for n, (who, text) in enumerate(LINES)
    ])
    ids = written.memory_ids
    position = written.positions[-1]
    for n, (a, b) in enumerate(zip(ids, ids[1:])):
        position = (await client.link(a, b, "FOLLOWS", edge_id=f"user:turns:{n}")).positions[-1]
    return position


def _recomputed(result: dict, k: float = 60.0) -> int:
    for hit in result["hits"]:
        channels = hit["channels"]
        for name, found in channels.items():
            weight = result["channels"][name]["weight"]
            if result["fusion"] == "rrf":
                assert found["contribution"] == pytest.approx(weight / (k + found["rank"]), abs=1e-6)
            else:
                assert 0 <= found["contribution"] <= weight + 1e-6
        base = sum(found["contribution"] for found in channels.values())
        expected = base * math.prod(hit["priors"].values()) + sum(c["amount"] for c in hit["context"]) + hit["overlap_bonus"]
        assert hit["score"] == pytest.approx(expected, abs=1e-5), hit
    return len(result["hits"])


@pytest.mark.parametrize(
    "options",
    [{}, {"fusion": "rrf"}, {"weights": {"semantic": 0.6}}, {"channels": ["semantic", "lexical"]}, {"strategy": "graph-only"}, {"limit": 3}],
    ids=["score", "rrf", "semantic", "requested", "graph-only", "short"],
)
async def test_every_score_is_recomputed_from_the_answer_alone(client, options):
    position = await _conversation(client)
    found = 0
    for query in ("When did Ann adopt the cat?", "Where does Alice work?", "harbour ferry Lisbon", "Ann harbour"):
        found += _recomputed(await client.recall(query, min_position=position, **options))
    assert found


@pytest.mark.parametrize("path", ["/v1/recall", "/v1/search"])
@pytest.mark.parametrize("query", ["   ", "\t\n", "\u3000"])
async def test_a_blank_query_is_a_422_naming_it(api, path, query):
    """An empty query is refused by its length; one of spaces alone would search nothing and answer an empty list."""
    response = await api.raw.post(path, json={"query": query})
    body = await response.json()
    assert response.status == 422 and body["error"]["field"] == "query", body
