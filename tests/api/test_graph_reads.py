"""Graph reads over real HTTP: neighbours and subgraphs, their filters, limits, scores and unknown nodes."""

from __future__ import annotations

import pytest

from mnemolog.api.client import ApiError
from tests.api.test_reads import _star, add


async def test_a_subgraph_of_some_edge_types_holds_only_edges_of_those_types(client):
    a, b, c = (await client.add_memories(memories=[{"memory": "typed a"}, {"memory": "typed b"}, {"memory": "typed c"}])).memory_ids
    await client.link(a, b, "FOLLOWS", edge_id="t:follows:1")
    await client.link(a, b, "RELATED", edge_id="t:related:1")
    await client.link(b, a, "RELATED", edge_id="t:related:2")
    await client.link(b, c, "FOLLOWS", edge_id="t:follows:2")
    body = await client.request("POST", "/v1/graph/subgraph", json={"seeds": [a], "depth": 2, "edge_types": ["FOLLOWS"]})
    assert [r["node"] for r in body["reached"]] == [b, c]
    assert [e["edge_id"] for e in body["edges"]] == ["t:follows:1", "t:follows:2"]
    body = await client.request("POST", "/v1/graph/subgraph", json={"seeds": [a], "depth": 1, "edge_types": ["RELATED"], "direction": "out"})
    assert [e["edge_id"] for e in body["edges"]] == ["t:related:1", "t:related:2"]  # both join the nodes the walk reached
    # Edges of other types do not count against max_edges either.
    body = await client.request("POST", "/v1/graph/subgraph", json={"seeds": [a], "depth": 2, "edge_types": ["FOLLOWS"], "max_edges": 2})
    assert len(body["edges"]) == 2 and body["truncated"] is False


async def test_neighbors_of_a_node_that_does_not_exist_is_not_found(client):
    """An id with a typo (or one not yet written as of the position asked) is a 404, not a node with no edges."""
    with pytest.raises(ApiError) as err:
        await client.neighbors("no-such-node", depth=2)
    assert err.value.status == 404 and err.value.code == "not_found"
    before = (await client.add_memories({"memory": "written first"})).positions[-1]
    lonely = await add(client, "a memory with no edges")
    assert await client.neighbors(lonely) == {"node": lonely, "edges": [], "reached": [], "truncated": False, "edges_truncated": False}
    with pytest.raises(ApiError) as err:
        await client.neighbors(lonely, as_of=before)  # not written yet then
    assert err.value.status == 404
    await client.put_entity("person:lonely", {"name": "Lonely"})
    assert await client.neighbors("person:lonely") == {"node": "person:lonely", "edges": [], "reached": [], "truncated": False, "edges_truncated": False}
    await client.import_documents([("notes.md", b"# Notes\n\nNothing to link.\n")])
    assert (await client.neighbors("document:notes.md"))["node"] == "document:notes.md"


async def test_neighbors_past_their_limit_say_they_were_cut(client, monkeypatch):
    from mnemolog.api import operations

    monkeypatch.setattr(operations, "NEIGHBORS_MAX_NODES", 3)
    center, others = await _star(client, leaves=3)
    fits = await client.neighbors(center)
    assert len(fits["reached"]) == 3 and fits["truncated"] is False
    extra = await add(client, "one leaf too many")
    await client.link(center, extra, "RELATED", weight=0.5, edge_id="star:extra:1")
    cut = await client.neighbors(center)
    assert len(cut["reached"]) == 3 and cut["truncated"] is True
    assert len(cut["edges"]) == 4 and cut["edges_truncated"] is False  # the node's own edges are all listed, up to their own limit


async def test_a_hubs_own_edges_past_their_limit_say_they_were_cut(client, monkeypatch):
    """A node every memory mentions has as many edges: the answer lists the first of them and says so."""
    from mnemolog.api import operations

    monkeypatch.setattr(operations, "NEIGHBORS_MAX_EDGES", 3)
    center, others = await _star(client, leaves=3)
    fits = await client.neighbors(center)
    assert len(fits["edges"]) == 3 and fits["edges_truncated"] is False
    extra = await add(client, "one leaf too many")
    await client.link(extra, center, "RELATED", weight=0.5, edge_id="star:extra:1")
    cut = await client.neighbors(center)
    assert [e["edge_id"] for e in cut["edges"]] == [e["edge_id"] for e in fits["edges"]] and cut["edges_truncated"] is True
    assert len(cut["reached"]) == 4 and cut["truncated"] is False  # the walk has its own limit
    incoming = await client.neighbors(center, direction="in")
    assert [e["edge_id"] for e in incoming["edges"]] == ["star:extra:1"] and incoming["edges_truncated"] is False


async def test_edge_type_filters_read_types_as_relation_filters_do(client):
    """``type=related`` finds RELATED edges (as /v1/entities/{id}/related reads ``type=works at``), and an empty type filters nothing."""
    a, b, c = (await client.add_memories(memories=[{"memory": "typed a"}, {"memory": "typed b"}, {"memory": "typed c"}])).memory_ids
    await client.link(a, b, "RELATED", edge_id="t:r:1")
    await client.link(a, c, "PART_OF", edge_id="t:p:1")
    for given in (["related"], [" Related "], ["related", ""]):
        found = await client.request("GET", "/v1/graph/neighbors", params=[("node", a), *(("type", t) for t in given)])
        assert [e["edge_id"] for e in found["edges"]] == ["t:r:1"], given
    assert [e["edge_id"] for e in (await client.neighbors(a, types=["part-of"]))["edges"]] == ["t:p:1"]
    assert len((await client.request("GET", "/v1/graph/neighbors", params={"node": a, "type": ""}))["edges"]) == 2
    sub = await client.request("POST", "/v1/graph/subgraph", json={"seeds": [a], "depth": 1, "edge_types": ["part of"]})
    assert [e["edge_id"] for e in sub["edges"]] == ["t:p:1"]


async def test_neighbors_score_a_node_by_its_strongest_shortest_path(client):
    """A weak edge linked first no longer decides a node's score and path, nor does a strong parent with a weak last step."""
    a, b, c, d = (await client.add_memories(memories=[{"memory": f"scored {n}"} for n in "abcd"])).memory_ids
    await client.link(a, b, "RELATED", weight=0.1, edge_id="t:weak:1")
    await client.link(a, b, "FOLLOWS", weight=0.9, edge_id="t:strong:1")
    await client.link(a, c, "RELATED", weight=0.95, edge_id="t:ac:1")
    await client.link(c, d, "RELATED", weight=0.1, edge_id="t:cd:1")
    await client.link(b, d, "RELATED", weight=1.0, edge_id="t:bd:1")
    reached = {r["node"]: r for r in (await client.neighbors(a, depth=2, direction="out"))["reached"]}
    assert (reached[b]["score"], reached[b]["path"]) == (pytest.approx(0.9), ["t:strong:1"])
    assert (reached[d]["score"], reached[d]["path"]) == (pytest.approx(0.9), ["t:strong:1", "t:bd:1"])


async def test_a_subgraph_around_a_seed_that_does_not_exist_is_not_found(client):
    """A seed with a typo, another tenant's, or not yet written as of the position asked: a 404 naming it, not a node that is nothing."""
    before = (await client.add_memories({"memory": "written first"})).positions[-1]
    real = await add(client, "a real seed")
    for seeds, as_of in (([real, "no-such-node"], None), (["no-such-node"], None), ([real], before)):
        with pytest.raises(ApiError) as err:
            await client.request("POST", "/v1/graph/subgraph", json={"seeds": seeds, "as_of": as_of})
        assert err.value.status == 404 and err.value.code == "not_found"
        assert (seeds[-1] if as_of is None else real) in err.value.message
    body = await client.request("POST", "/v1/graph/subgraph", json={"seeds": [real]})
    assert body["nodes"][0]["id"] == real and body["nodes"][0]["memory"]["memory"] == "a real seed"
