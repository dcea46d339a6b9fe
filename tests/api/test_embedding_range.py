"""Caller embeddings at the edges of float range: a query ranks by its direction whatever its scale; a memory's must fit the index's float32."""

from __future__ import annotations

import pytest

from tests.projections.support import choke_on


async def semantic(api, embedding: list[float]) -> list[str]:
    response = await api.raw.post("/v1/search", json={"query": "anything", "channels": ["semantic"], "embedding": embedding, "limit": 5})
    answer = await response.json()
    assert response.status == 200, answer
    return [hit["id"] for hit in answer["channels"]["semantic"]]


@pytest.mark.parametrize("scale", [1e300, 1e-300, 3.5e38])
async def test_a_query_embedding_ranks_by_its_direction_at_any_scale(api, scale):
    """Found by the hostile-client run: a query embedding of 1e300 (or 1e-300) found nothing, reported "ok"."""
    dim = api.service.embedding_dim
    for n in range(3):
        await api.raw.post("/v1/memories", json={"memory": {"memory": f"memory {n} about harbours and ferries"}})
    api.service.sync()
    direction = [1.0 if i % 3 == 0 else -0.5 for i in range(dim)]
    expected = await semantic(api, direction)
    assert expected, "the plain query finds the memories"
    assert await semantic(api, [v * scale for v in direction]) == expected


async def test_a_memory_embedding_beyond_float32_is_422_naming_it(api):
    dim = api.service.embedding_dim
    head = api.service.store.last_position()
    response = await api.raw.post("/v1/memories", json={"memory": {"memory": "x", "embedding": [1e39] * dim}})
    answer = await response.json()
    assert response.status == 422, answer
    assert answer["error"]["field"].startswith("memory.embedding"), answer
    assert api.service.store.last_position() == head
    fits = await api.raw.post("/v1/memories", json={"memory": {"memory": "x", "embedding": [3e38] * dim}})
    assert fits.status == 201, await fits.text()


async def test_a_memory_embedding_of_another_length_than_the_servers_is_422_naming_it(api):
    """It was taken (201), as the OpenAPI document said it would not be, and the memory never got a vector:
    no semantic search ever found it (a 768-number embedding sent to a 256-number server)."""
    dim = api.service.embedding_dim
    first = await api.raw.post("/v1/memories", json={"memory": {"memory": "fits", "embedding": [0.5] * dim}})
    assert first.status == 201, await first.text()
    memory_id = (await first.json())["memory_ids"][0]
    head = api.service.store.last_position()
    cases = [
        ("POST", "/v1/memories", {"memories": [{"memory": "ok", "embedding": [0.5] * dim}, {"memory": "short", "embedding": [0.5] * (dim // 2)}]}, "memories[1].embedding"),
        ("POST", "/v1/memories", {"memory": {"memory": "long", "embedding": [0.5] * (dim + 1)}}, "memory.embedding"),
        ("PATCH", f"/v1/memories/{memory_id}", {"embedding": [0.5] * 3}, "embedding"),
    ]
    for method, path, body, field in cases:
        response = await api.raw.request(method, path, json=body)
        answer = await response.json()
        assert response.status == 422 and answer["error"]["field"] == field and f"{dim} dimensions" in answer["error"]["message"], answer
    assert api.service.store.last_position() == head


@pytest.mark.parametrize("scale", [3e38, 1e-40, 1e-300])
async def test_a_memory_embedding_of_huge_or_tiny_numbers_is_found_by_its_direction(api, scale):
    """A memory's embedding of 3e38s was taken (201) and never found (its score NaN, the norm overflowing float32);
    one of 1e-40s scored 0, and one of 1e-300s got no vector at all ("all zeros")."""
    dim = api.service.embedding_dim
    direction = [1.0 if i % 3 == 0 else -0.5 for i in range(dim)]
    created = await api.raw.post("/v1/memories", json={"memory": {"memory": "x", "embedding": [v * scale for v in direction]}})
    assert created.status == 201, await created.text()
    memory_id = (await created.json())["memory_ids"][0]
    other = await api.raw.post("/v1/memories", json={"memory": {"memory": "y", "embedding": [0.5] * dim}})
    assert other.status == 201
    api.service.sync()
    response = await api.raw.post("/v1/search", json={"query": "anything", "channels": ["semantic"], "embedding": direction, "limit": 5})
    answer = await response.json()
    assert response.status == 200, answer
    hits = answer["channels"]["semantic"]
    assert hits[0]["id"] == memory_id and hits[0]["score"] == pytest.approx(1.0, abs=1e-6), hits


async def test_the_semantic_channel_names_the_vectors_it_searched_and_the_querys(api):
    """A recall's explanation said the semantic channel was "ok" and nothing of what it compared: which embedder's
    vectors (after a switch of embedder, which dimensions), nor whether the query was the request's embedding."""
    dim = api.service.embedding_dim
    name = api.service.embedder.name
    assert (await api.raw.post("/v1/memories", json={"memory": {"memory": "ferries leave the harbour at dawn"}})).status == 201
    api.service.sync()
    for path, key in (("/v1/recall", "channels"), ("/v1/search", "states")):
        asked = await api.raw.post(path, json={"query": "harbour ferries", "channels": ["semantic"], "embedding": [0.5] * dim})
        embedded = await api.raw.post(path, json={"query": "harbour ferries", "channels": ["semantic"]})
        lexical = await api.raw.post(path, json={"query": "harbour ferries", "channels": ["lexical"]})
        states = [(await r.json())[key] for r in (asked, embedded, lexical)]
        assert [(s["semantic"]["status"], s["semantic"]["embedder"], s["semantic"]["query_vector"]) for s in states] == [
            ("ok", name, "request"), ("ok", name, "embedder"), ("off", name, None)]
        assert all(s["lexical"]["embedder"] is None and s["graph"]["query_vector"] is None for s in states)


async def test_a_text_the_embedder_raises_on_is_written_and_recalled_without_a_5xx(start, monkeypatch):
    """With an embedder that raised on one text, its write answered 500 (though in the log) and so did every write
    and read after it (the projection's catch-up failed each time); a query it raised on answered 500 too."""
    choke_on(monkeypatch, "poison")
    api = await start()
    for text in ("Poison ivy grows by the garden gate", "The gate was painted green"):
        created = await api.raw.post("/v1/memories", json={"memory": {"memory": text}})
        assert created.status == 201, await created.text()
    for query, found in (("poison ivy by the gate", "Poison ivy grows by the garden gate"), ("green gate", "The gate was painted green")):
        response = await api.raw.post("/v1/recall", json={"query": query, "channels": ["lexical", "semantic"]})
        answer = await response.json()
        assert response.status == 200, answer
        assert answer["hits"][0]["memory"]["memory"] == found
    semantic = answer["channels"]["semantic"]  # the last query: embedded, and its channel ran
    assert semantic["status"] == "ok"
    response = await api.raw.post("/v1/search", json={"query": "poison", "channels": ["semantic"]})
    answer = await response.json()
    assert response.status == 200 and answer["states"]["semantic"]["status"] == "unavailable"
    assert answer["states"]["semantic"]["reason"] == "the embedder failed on the query: RuntimeError: the model choked"


async def test_a_query_embedding_asks_for_the_semantic_channel(api):
    """Under an embedder whose semantic weight is 0 (hashing), a recall sending its own query embedding had it
    ignored: the channel stayed off ("weight 0 for this embedder"), as if the vector had not been sent."""
    dim = api.service.embedding_dim
    direction = [1.0 if i % 3 == 0 else -0.5 for i in range(dim)]
    created = await api.raw.post("/v1/memories", json={"memory": {"memory": "an opaque blob", "embedding": direction}})
    memory_id = (await created.json())["memory_ids"][0]
    api.service.sync()
    response = await api.raw.post("/v1/recall", json={"query": "zebra crossings", "embedding": direction})
    answer = await response.json()
    assert response.status == 200, answer
    state = answer["channels"]["semantic"]
    assert (state["status"], state["weight"], state["query_vector"]) == ("ok", 1.0, "request") and "requested" in state["reason"]
    assert answer["hits"][0]["id"] == memory_id and answer["hits"][0]["channels"]["semantic"]["rank"] == 1


@pytest.mark.parametrize("path", ["/v1/recall", "/v1/search"])
@pytest.mark.parametrize("rest", [{"channels": ["lexical"]}, {"strategy": "graph-only"}, {"weights": {"semantic": 0}}])
async def test_a_query_embedding_for_a_request_without_the_semantic_channel_is_422_naming_it(api, path, rest):
    """A query embedding sent with a request that leaves the semantic channel out was ignored without a word
    (200, ranked without it); it is refused as a weight for a channel left out is."""
    from types import SimpleNamespace

    from tests.api.schemathesis_hooks import breaks_a_rule_across_fields

    body = {"query": "zebra crossings", "embedding": [0.5] * api.service.embedding_dim, **rest}
    response = await api.raw.post(path, json=body)
    answer = await response.json()
    assert response.status == 422 and answer["error"]["field"] == "embedding", answer
    assert "would be ignored" in answer["error"]["message"]
    assert breaks_a_rule_across_fields(SimpleNamespace(path=path, method="POST", body=body, query={}, path_parameters={}))


@pytest.mark.parametrize("path", ["/v1/recall", "/v1/search"])
@pytest.mark.parametrize("value", [0.0, -0.0])
async def test_a_query_embedding_of_zeros_is_422_naming_it(api, path, value):
    """A query embedding of zeros has no direction to rank by: the semantic channel answered "ok" with nothing
    found, as a memory's embedding of zeros is refused."""
    dim = api.service.embedding_dim
    await api.raw.post("/v1/memories", json={"memory": {"memory": "harbours and ferries"}})
    response = await api.raw.post(path, json={"query": "harbours", "channels": ["semantic"], "embedding": [value] * dim})
    answer = await response.json()
    assert response.status == 422, answer
    assert answer["error"]["field"] == "embedding"
