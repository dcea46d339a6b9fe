"""What the HTTP reads show of merged memories' edges: one edge per pair and type, in the neighbours, the explorer's
neighbourhood page and recall's relationships; a revert of the merge gives the edges back."""

from __future__ import annotations

from collections import Counter


async def _merged_pair(client):
    """Two memories each linked to a third with RELATED (0.4 and 0.7), then merged: the merged memory, the third, the merge."""
    a, b, shop = (await client.add_memories(memories=[
        {"memory": "Ana likes jasmine tea"}, {"memory": "Ana likes green jasmine tea"}, {"memory": "The jasmine tea shop on Rua Augusta"},
    ])).memory_ids  # fmt: skip
    await client.link(a, shop, "RELATED", weight=0.4, edge_id="user:tea:1")
    await client.link(b, shop, "RELATED", weight=0.7, edge_id="user:tea:2")
    merge = await client.merge_memories([a, b])
    return merge.data["merged_id"], shop, merge, (a, b)


def _pairs(edges, source="source", target="target", kind="edge_type") -> Counter:
    return Counter((e[source], e[target], e[kind]) for e in edges)


async def test_the_reads_show_one_edge_per_pair_and_type_after_a_merge(client):
    merged, shop, merge, _ = await _merged_pair(client)
    neighbors = await client.neighbors(merged, types=["RELATED"])
    assert _pairs(neighbors["edges"]) == Counter({(merged, shop, "RELATED"): 1})
    [edge] = neighbors["edges"]
    assert (edge["edge_id"], edge["weight"], edge["merged_from"]) == ("user:tea:2", 0.7, ["user:tea:1"])
    page = await client.neighborhood(merged, types=["RELATED"])
    assert _pairs(page["edges"], kind="type") == Counter({(merged, shop, "RELATED"): 1})
    result = await client.recall("jasmine tea shop", min_position=merge.positions[-1])
    found = [(r["a"], r["b"], r["detail"]["edge_type"]) for r in result["relationships"] if r["kind"] == "edge"]
    assert found.count((merged, shop, "RELATED")) == 1


async def test_a_revert_of_the_merge_gives_back_both_edges(client):
    merged, shop, merge, (a, b) = await _merged_pair(client)
    await client.revert(merge.correlation_id)
    edges = (await client.neighbors(shop, types=["RELATED"]))["edges"]
    assert sorted((e["edge_id"], e["source"], e["weight"], e["merged_from"]) for e in edges) == [
        ("user:tea:1", a, 0.4, []), ("user:tea:2", b, 0.7, []),
    ]  # fmt: skip
