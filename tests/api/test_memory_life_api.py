"""A memory's life over real HTTP: a command naming a memory in a status that refuses it is a 409 naming
the field, the memory and its status, and writes nothing."""

from __future__ import annotations


async def post(api, path: str, body: dict) -> tuple[int, dict]:
    response = await api.raw.post(path, json=body)
    return response.status, await response.json()


async def test_a_deleted_memory_is_no_link_end_evolve_to_target_nor_superseding_memory(api):
    status, added = await post(api, "/v1/memories", {"memories": [{"memory": "alpha"}, {"memory": "beta"}, {"memory": "gamma"}]})
    a, b, g = added["memory_ids"]
    assert (await post(api, f"/v1/memories/{b}/delete", {}))[0] == 200
    head = api.service.store.last_position()
    cases = [
        ("/v1/edges", {"source": a, "target": b, "edge_type": "RELATED"}, "target"),
        ("/v1/edges", {"source": b, "target": a, "edge_type": "RELATED"}, "source"),
        (f"/v1/memories/{g}/delete", {"evolve_to": b}, "evolve_to"),
        (f"/v1/memories/{g}/supersede", {"superseded_by": b}, "superseded_by"),
    ]
    for path, body, field in cases:
        status, answer = await post(api, path, body)
        assert status == 409, (path, answer)
        assert answer["error"]["field"] == field and b in answer["error"]["message"] and "deleted" in answer["error"]["message"], answer
    assert api.service.store.last_position() == head
    # Restored, it is an end, a target and a superseding memory again.
    assert (await post(api, f"/v1/memories/{b}/restore", {}))[0] == 200
    assert (await post(api, "/v1/edges", {"source": a, "target": b, "edge_type": "RELATED"}))[0] == 201
    assert (await post(api, f"/v1/memories/{g}/delete", {"evolve_to": b}))[0] == 200


async def test_a_memory_superseding_itself_is_refused_naming_the_body_field(api):
    _, added = await post(api, "/v1/memories", {"memory": {"memory": "alpha"}})
    (a,) = added["memory_ids"]
    status, answer = await post(api, f"/v1/memories/{a}/supersede", {"superseded_by": a})
    assert (status, answer["error"]["field"]) == (422, "superseded_by")


async def edges_around(api, node: str, **query) -> list[tuple]:
    response = await api.raw.get("/v1/graph/neighbors", params={"node": node, **query})
    assert response.status == 200, await response.text()
    body = await response.json()
    return sorted((e["edge_id"], e["edge_type"], e["source"], e["target"], e["weight"], tuple(sorted(e["properties"].items()))) for e in body["edges"])


async def test_a_deleted_memory_leaves_the_graph_and_its_restore_brings_the_same_edges_back(api):
    _, added = await post(api, "/v1/memories", {"memories": [{"memory": "alpha"}, {"memory": "beta"}, {"memory": "gamma"}]})
    a, b, g = added["memory_ids"]
    assert (await post(api, "/v1/edges", {"source": a, "target": b, "edge_type": "RELATED", "weight": 0.4, "edge_id": "user:n:1", "properties": {"why": "x"}}))[0] == 201
    assert (await post(api, "/v1/edges", {"source": b, "target": g, "edge_type": "FOLLOWS", "edge_id": "user:n:2"}))[0] == 201
    before = await edges_around(api, b)
    linked_at = api.service.store.last_position()
    first = await api.raw.post(f"/v1/memories/{b}/delete", json={}, headers={"Idempotency-Key": "del-b"})
    retry = await api.raw.post(f"/v1/memories/{b}/delete", json={}, headers={"Idempotency-Key": "del-b"})
    first, retry = await first.json(), await retry.json()
    assert retry["replayed"] and {**retry, "replayed": False} == first  # the retry answers as the first did
    assert await edges_around(api, a) == [] and await edges_around(api, g) == []  # nothing points at the deleted memory
    assert await edges_around(api, a, as_of=str(linked_at)) == [e for e in before if a in e[2:4]]  # as of before, it did
    stats = await (await api.raw.get("/v1/graph/stats")).json()
    assert stats["edges_total"] == 0
    assert (await post(api, f"/v1/memories/{b}/restore", {}))[0] == 200
    assert await edges_around(api, b) == before  # the same ids, types, weights and properties
    # A revert of the delete brings them back as well.
    _, again = await post(api, f"/v1/memories/{b}/delete", {})
    assert await edges_around(api, b) == []
    assert (await post(api, "/v1/reverts", {"correlation_id": again["correlation_id"]}))[0] == 200
    assert await edges_around(api, b) == before
    # An edge whose other end was deleted meanwhile is not linked back to it.
    await post(api, f"/v1/memories/{b}/delete", {})
    await post(api, f"/v1/memories/{g}/delete", {})
    assert (await post(api, f"/v1/memories/{b}/restore", {}))[0] == 200
    assert await edges_around(api, b) == [e for e in before if e[0] == "user:n:1"]


async def test_a_restored_memory_is_no_longer_superseded_by_nor_merged_into_another_in_the_graph(api):
    _, added = await post(api, "/v1/memories", {"memories": [{"memory": "Zoe is 30"}, {"memory": "Zoe is 31"}, {"memory": "tea"}, {"memory": "green tea"}]})
    old, new, t1, t2 = added["memory_ids"]
    assert (await post(api, f"/v1/memories/{old}/supersede", {"superseded_by": new}))[0] == 200
    assert [e[1] for e in await edges_around(api, old)] == ["SUPERSEDED_BY"]
    first = await api.raw.post(f"/v1/memories/{old}/restore", json={}, headers={"Idempotency-Key": "restore-old"})
    retry = await api.raw.post(f"/v1/memories/{old}/restore", json={}, headers={"Idempotency-Key": "restore-old"})
    restored, retry = await first.json(), await retry.json()
    assert retry["replayed"] and {**retry, "replayed": False} == restored  # the retry answers as the first did
    assert await edges_around(api, old) == []  # activated again: superseded by nothing
    _, merged = await post(api, "/v1/memories/merge", {"memory_ids": [t1, t2]})
    status, refused = await post(api, f"/v1/memories/{t1}/rollback", {"to_version": 1})
    assert status == 409 and merged["correlation_id"] in refused["error"]["message"]  # revert the merge instead: it takes it back whole
    assert [e[1] for e in await edges_around(api, t1)] == ["MERGED_TO"]
    assert (await post(api, f"/v1/memories/{t1}/restore", {}))[0] == 200
    assert await edges_around(api, t1) == []
    assert [(e[1], e[2]) for e in await edges_around(api, merged["data"]["merged_id"])] == [("MERGED_TO", t2)]
    # Reverting the restore makes it superseded again, edge included.
    assert (await post(api, "/v1/reverts", {"correlation_id": restored["correlation_id"]}))[0] == 200
    assert [e[1] for e in await edges_around(api, old)] == ["SUPERSEDED_BY"]


async def test_a_superseded_memory_deleted_then_restored_comes_back_without_its_superseded_by_edge(api):
    _, added = await post(api, "/v1/memories", {"memories": [{"memory": "Zoe is 30"}, {"memory": "Zoe is 31"}, {"memory": "Zoe"}]})
    old, new, other = added["memory_ids"]
    await post(api, "/v1/edges", {"source": old, "target": other, "edge_type": "RELATED", "edge_id": "user:z:1"})
    await post(api, f"/v1/memories/{old}/supersede", {"superseded_by": new})
    await post(api, f"/v1/memories/{old}/delete", {})
    assert await edges_around(api, old) == []
    assert (await post(api, f"/v1/memories/{old}/restore", {}))[0] == 200
    assert [e[0] for e in await edges_around(api, old)] == ["user:z:1"]


async def test_every_retried_memory_command_answers_as_the_first(api):
    _, added = await post(api, "/v1/memories", {"memories": [{"memory": f"note {i}"} for i in range(6)]})
    m = added["memory_ids"]
    cases = [
        ("POST", f"/v1/memories/{m[0]}/supersede", {"superseded_by": m[1]}),
        ("POST", f"/v1/memories/{m[2]}/archive", {"reason": "old"}),
        ("POST", f"/v1/memories/{m[2]}/restore", {}),
        ("POST", f"/v1/memories/{m[2]}/rollback", {"to_version": 2}),
        ("PATCH", f"/v1/memories/{m[3]}", {"memory": "note three"}),
        ("POST", "/v1/memories/merge", {"memory_ids": [m[4], m[5]]}),
        ("POST", f"/v1/memories/{m[3]}/delete", {}),
    ]
    for n, (method, path, body) in enumerate(cases):
        first = await api.raw.request(method, path, json=body, headers={"Idempotency-Key": f"again-{n}"})
        retry = await api.raw.request(method, path, json=body, headers={"Idempotency-Key": f"again-{n}"})
        answer, again = await first.json(), await retry.json()
        assert first.status in (200, 201) and retry.status == first.status, (path, answer)
        assert again["replayed"] and {**again, "replayed": False} == answer, (path, answer, again)


async def test_a_merge_checks_the_versions_it_expects(api):
    _, added = await post(api, "/v1/memories", {"memories": [{"memory": "tea"}, {"memory": "green tea"}]})
    a, b = added["memory_ids"]
    await api.raw.patch(f"/v1/memories/{b}", json={"memory": "green tea, hot"})  # b at version 2 now
    head = api.service.store.last_position()
    status, answer = await post(api, "/v1/memories/merge", {"memory_ids": [a, b], "expected_versions": {a: 1, b: 1}})
    assert status == 409 and answer["error"]["current_version"] == 2 and b in answer["error"]["message"], answer
    assert answer["error"]["field"] == f"expected_versions.{b}", answer
    status, answer = await post(api, "/v1/memories/merge", {"memory_ids": [a, b], "expected_versions": {"other": 1}})
    assert (status, answer["error"]["field"]) == (422, "expected_versions"), answer
    status, answer = await post(api, "/v1/memories/merge", {"memory_ids": [a, b], "expected_versions": {a: 0}})
    assert status == 422 and answer["error"]["field"].startswith("expected_versions"), answer
    assert api.service.store.last_position() == head
    client = api.typed_client()
    merged = await client.merge_memories([a, b], expected_versions={a: 1, b: 2})
    assert merged.data["sources"] == [a, b]


async def test_a_merge_or_supersede_edge_changes_only_with_its_correlation(api):
    """An unlink or undo of a ``merged:`` or ``superseded:`` edge left an archived memory with no trace of what
    replaced it (the revert, which takes the merge back whole, is the way); a link could forge one."""
    _, added = await post(api, "/v1/memories", {"memories": [{"memory": "tea"}, {"memory": "green tea"}, {"memory": "Zoe is 30"}, {"memory": "Zoe is 31"}]})
    t1, t2, old, new = added["memory_ids"]
    _, merged = await post(api, "/v1/memories/merge", {"memory_ids": [t1, t2]})
    assert (await post(api, f"/v1/memories/{old}/supersede", {"superseded_by": new}))[0] == 200
    edges = [e["edge_id"] for e in (await (await api.raw.get("/v1/graph/neighbors", params={"node": merged["data"]["merged_id"], "direction": "both"})).json())["edges"]]
    merge_edge = next(e for e in edges if e.startswith("merged:"))
    head = api.service.store.last_position()
    refused = [
        (await api.raw.delete(f"/v1/edges/{merge_edge}"), "edge_id"),
        (await api.raw.post("/v1/edges/undo-namespace", json={"prefix": "merged:"}), "prefix"),
        (await api.raw.post("/v1/edges/undo-namespace", json={"prefix": "superseded:"}), "prefix"),
        (await api.raw.post("/v1/edges", json={"source": t1, "target": new, "edge_type": "MERGED_TO", "edge_id": "merged:x:y:1"}), "edge_id"),
    ]
    for response, field in refused:
        answer = await response.json()
        assert response.status == 422 and answer["error"]["field"] == field and "revert" in answer["error"]["message"], answer
    assert api.service.store.last_position() == head
    assert (await post(api, "/v1/reverts", {"correlation_id": merged["correlation_id"]}))[0] == 200  # the way to take it back
