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
