"""POST /v1/recall over memories and entities, through a real server and the client."""

from __future__ import annotations

import pytest

from mnemolog.api.client import ApiError


async def _world(client):
    """The issue's example: Alice WORKS_AT Acme (0.9) and one memory that mentions both (edges as the linker writes them)."""
    await client.put_entity("alice", {"name": "Alice", "entity_type": "person"})
    await client.put_entity("acme", {"name": "Acme Corp", "entity_type": "organization", "aliases": ["Acme"]})
    await client.set_relation("alice", "acme", "WORKS_AT", weight=0.9)
    written = await client.add_memories({"memory": "Alice joined Acme Corp as an engineer in 2021"})
    [memory] = written.memory_ids
    await client.link(memory, "alice", "MENTIONS", edge_id="mention:api:1")
    last = await client.link(memory, "acme", "MENTIONS", edge_id="mention:api:2")
    return memory, last.positions[-1]


async def test_recall_returns_typed_hits_with_the_entity_path(client):
    memory, position = await _world(client)
    result = await client.recall("Where does Alice work?", min_position=position)
    assert result["strategy"] == "hybrid" and result["strategy_reason"] is None
    hits = {h["id"]: h for h in result["hits"]}
    assert hits[memory]["kind"] == "memory" and hits[memory]["memory"]["id"] == memory
    acme = hits["acme"]
    assert acme["kind"] == "entity" and acme["memory"] is None
    assert acme["entity"] == {"id": "acme", "name": "Acme Corp", "entity_type": "organization", "aliases": ["Acme"], "description": ""}
    assert acme["path"] == [{"source_id": "alice", "target_id": "acme", "relation_type": "WORKS_AT", "weight": 0.9}]
    assert acme["path_score"] == 0.9 and acme["channels"]["graph"]["rank"] >= 1
    edges = {(r["a"], r["b"], r["detail"]["edge_type"]) for r in result["relationships"]}
    assert {("alice", "acme", "WORKS_AT"), (memory, "acme", "MENTIONS")} <= edges


async def test_graph_channel_alone_answers_the_issue_question(client):
    memory, position = await _world(client)
    result = await client.recall("Where does Alice work?", channels=["graph"], min_position=position)
    assert {h["id"] for h in result["hits"]} == {memory, "acme", "alice"}


async def test_strategies_over_http(client):
    memory, position = await _world(client)
    knowledge = await client.recall("Where does Alice work?", strategy="knowledge-only", min_position=position)
    assert knowledge["strategy"] == "knowledge-only" and [h["kind"] for h in knowledge["hits"]] == ["memory"]
    graph = await client.recall("Where does Alice work?", strategy="graph-only", min_position=position)
    assert graph["strategy"] == "graph-only" and graph["channels"]["lexical"]["status"] == "off"
    assert "acme" in {h["id"] for h in graph["hits"]}


async def test_graph_only_degrades_on_a_tenant_without_entities(api):
    client = api.client(tenant="empty")
    written = await client.add_memories({"memory": "Alice likes tea"})
    result = await client.recall("what does Alice like?", strategy="graph-only", min_position=written.positions[-1])
    assert result["strategy"] == "knowledge-only" and result["degraded"] is True
    assert "graph-only needs entities" in result["strategy_reason"]
    assert [h["id"] for h in result["hits"]] == written.memory_ids


@pytest.mark.parametrize(
    "body, field",
    [
        ({"strategy": "graph-only", "channels": ["lexical"]}, "channels"),
        ({"strategy": "graph-only", "weights": {"graph": 0}}, "weights"),
        ({"strategy": "entities"}, "strategy"),
        # A weight for a channel the request leaves out would be ignored: it is refused instead.
        ({"strategy": "graph-only", "weights": {"lexical": 0.7}}, "weights"),
        ({"channels": ["lexical"], "weights": {"graph": 0.5}}, "weights"),
        ({"channels": ["graph", "lexical"], "weights": {"semantic": 0.3, "lexical": 1.0}}, "weights"),
    ],
)
async def test_contradicting_options_are_a_422_naming_the_field(client, body, field):
    for read in (client.recall, client.search):
        with pytest.raises(ApiError) as caught:
            await read("Where does Alice work?", **body)
        assert caught.value.status == 422 and caught.value.field == field
        if field == "weights" and "strategy" not in body:
            assert "channels" in str(caught.value)


async def test_a_weight_of_zero_for_a_channel_left_out_agrees_with_the_request(client):
    """Switching off a channel the request leaves out says the same thing twice: no contradiction."""
    result = await client.recall("Where does Alice work?", channels=["lexical"], weights={"graph": 0, "semantic": 0})
    assert result["strategy"] == "lexical-only"
    assert (await client.recall("Where does Alice work?", channels=["lexical", "graph"], weights={"graph": 0.5}))["channels"]["graph"]["weight"] == 0.5


async def test_recall_as_of_a_position_before_the_relation(client):
    await client.put_entity("alice", {"name": "Alice", "entity_type": "person"})
    before = await client.put_entity("acme", {"name": "Acme Corp", "entity_type": "organization"})
    after = await client.set_relation("alice", "acme", "WORKS_AT", weight=0.9)
    then = await client.recall("Where does Alice work?", strategy="graph-only", as_of=before.positions[-1], min_position=after.positions[-1])
    assert [h["id"] for h in then["hits"]] == ["alice"] and then["as_of"] == before.positions[-1]
    now = await client.recall("Where does Alice work?", strategy="graph-only", min_position=after.positions[-1])
    assert {h["id"] for h in now["hits"]} == {"alice", "acme"}


async def test_openapi_documents_the_typed_recall_answer(client):
    document = await client.request("GET", "/openapi.json")
    answer = document["paths"]["/v1/recall"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert answer == {"$ref": "#/components/schemas/RecallResult"}
    hit = document["components"]["schemas"]["RecallHit"]["properties"]
    assert {"kind", "entity", "path", "path_score", "memory"} <= set(hit)
    request = document["components"]["schemas"]["RecallRequest"]["properties"]["strategy"]
    assert "graph-only" in str(request)


async def test_search_lists_entities_in_the_graph_channel_with_their_path(client):
    memory, position = await _world(client)
    result = await client.search("Where does Alice work?", channels=["graph"], min_position=position)
    rows = {r["id"]: r for r in result["channels"]["graph"]}
    assert rows["acme"]["kind"] == "entity" and rows["acme"]["path"][0]["relation_type"] == "WORKS_AT"
    assert rows[memory]["path"][0].startswith("mention:")
