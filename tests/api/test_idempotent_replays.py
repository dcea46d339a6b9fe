"""A retry with the same Idempotency-Key answers as the first request did (status and report), and writes nothing."""

from __future__ import annotations

import asyncio

import pytest


async def send_twice(api, method: str, path: str, body: dict, key: str) -> tuple[tuple[int, dict], tuple[int, dict]]:
    answers = []
    for _ in range(2):
        response = await api.raw.request(method, path, json=body, headers={"Idempotency-Key": key})
        answers.append((response.status, await response.json()))
    return answers[0], answers[1]


def without_replay_flag(answer: dict) -> dict:
    return {k: v for k, v in answer.items() if k != "replayed"}


@pytest.mark.parametrize("recreate", [False, True], ids=["new", "after a removal"])
async def test_a_retried_entity_upsert_and_relation_answer_as_the_first(api, recreate):
    """Found by the hostile-client run: a replayed PUT /v1/entities/{id} answered 200 without ``created`` where the first answered 201."""
    await api.raw.put("/v1/entities/place:lisbon", json={"name": "Lisbon"})
    if recreate:
        await api.raw.put("/v1/entities/person:ada", json={"name": "Ada"})
        await api.raw.delete("/v1/entities/person:ada", json={"reason": "again"})
    cases = [
        ("PUT", "/v1/entities/person:ada", {"name": "Ada Lovelace"}),
        ("POST", "/v1/entities/person:ada/relations", {"target_id": "place:lisbon", "relation_type": "visited", "weight": 0.5}),
        ("POST", "/v1/entities/person:ada/relations", {"target_id": "place:lisbon", "relation_type": "visited", "weight": 0.75}),  # an overwrite
        ("PUT", "/v1/entities/person:ada", {"name": "Ada King"}),  # a change, not a creation
    ]
    for n, (method, path, body) in enumerate(cases):
        head = api.service.store.last_position()
        (status, first), (again_status, again) = await send_twice(api, method, path, body, f"key-{n}")
        assert status in (200, 201) and first["replayed"] is False, first
        assert (again_status, without_replay_flag(again)) == (status, without_replay_flag(first)), (path, body)
        assert again["replayed"] is True
        assert api.service.store.last_position() == head + len(first["positions"]), "the retry wrote"


async def test_32_concurrent_retries_of_an_upsert_write_once_and_answer_alike(api):
    body = {"name": "Grace Hopper", "tags": ["navy"]}
    head = api.service.store.last_position()

    async def one():
        response = await api.raw.put("/v1/entities/person:grace", json=body, headers={"Idempotency-Key": "grace"})
        return response.status, await response.json()

    answers = await asyncio.gather(*(one() for _ in range(32)))
    assert {status for status, _ in answers} == {201}
    assert len({tuple(a["positions"]) for _, a in answers}) == 1
    assert sum(1 for _, a in answers if not a["replayed"]) == 1
    assert {a["data"]["created"] for _, a in answers} == {True}
    assert api.service.store.last_position() == head + 1


async def test_every_retried_entity_and_forget_command_answers_as_the_first(api):
    """Found by the same run: replays of set-tags, remove-relation, remove-entity and forget answered without the first report."""
    await api.raw.put("/v1/entities/place:paris", json={"name": "Paris"})
    await api.raw.put("/v1/entities/person:x", json={"name": "Xavier", "tags": ["a"]})
    await api.raw.post("/v1/memories", json={"memory": {"memory": "Xavier's private note", "subject": "u-9"}})
    cases = [
        ("PUT", "/v1/entities/person:x/tags", {"tags": ["b", "c"]}),
        ("POST", "/v1/entities/person:x/relations", {"target_id": "place:paris", "relation_type": "lives"}),
        ("DELETE", "/v1/entities/person:x/relations", {"target_id": "place:paris", "relation_type": "lives"}),
        ("POST", "/v1/entities/place:paris/relations", {"target_id": "person:x", "relation_type": "hosts"}),
        ("DELETE", "/v1/entities/person:x", {"reason": "gone"}),
        ("POST", "/v1/subjects/u-9/forget", {"reason": "request 3"}),
    ]
    for n, (method, path, body) in enumerate(cases):
        head = api.service.store.last_position()
        (status, first), (again_status, again) = await send_twice(api, method, path, body, f"k{n}")
        assert status in (200, 201) and first["data"], first
        assert (again_status, without_replay_flag(again)) == (status, without_replay_flag(first)), (path, body)
        assert api.service.store.last_position() == head + len(first["positions"]), "the retry wrote"


async def test_a_retried_document_import_answers_as_the_first(api):
    """Found by the same run: the retry reported no mentions and a new correlation id."""
    await api.raw.put("/v1/entities/place:paris", json={"name": "Paris"})
    await api.raw.put("/v1/entities/place:lisbon", json={"name": "Lisbon"})
    body = {"documents": [{"filename": "guide.md", "content": "# Guide\n\nParis is far from Lisbon."}, {"filename": "notes.txt", "content": "Lisbon in May."}]}
    (status, first), (again_status, again) = await send_twice(api, "POST", "/v1/import/documents", body, "import-1")
    assert status == 200 and first["documents"] == 2 and first["results"][0]["mentions"] > 0, first
    assert (again_status, again) == (status, first)


@pytest.mark.parametrize(
    "second",
    [
        [{"filename": "b.md", "content": "# B\n\nBees make honey."}, {"filename": "a.md", "content": "# A\n\nAnts, changed."}],
        [{"filename": "a.md", "content": "# A\n\nAnts carry leaves."}, {"filename": "b.md", "content": "# B\n\nBees make honey."}],
        [{"filename": "c.md", "content": "# C\n\nCicadas sing."}],
    ],
    ids=["changed document after a new one", "the same document and one more", "other documents"],
)
async def test_an_import_key_reused_for_another_request_is_refused_before_anything_is_written(api, second):
    """The key of an import of several documents covers the whole request: a reuse with other documents was
    a 409 after the new documents before it were written, or (with none in common) a silent new import."""
    first = {"documents": [{"filename": "a.md", "content": "# A\n\nAnts carry leaves."}]}
    response = await api.raw.post("/v1/import/documents", json=first, headers={"Idempotency-Key": "import-k"})
    assert response.status == 200, await response.text()
    head = api.service.store.last_position()
    response = await api.raw.post("/v1/import/documents", json={"documents": second}, headers={"Idempotency-Key": "import-k"})
    answer = await response.json()
    assert response.status == 409 and answer["error"]["code"] == "idempotency_conflict" and answer["error"]["field"] == "Idempotency-Key", answer
    assert api.service.store.last_position() == head, "the refused request wrote"
    again = await api.raw.post("/v1/import/documents", json={"documents": second}, headers={"Idempotency-Key": "import-k2"})
    assert again.status == 200 and (await again.json())["failed"] == 0


async def test_a_retried_import_whose_first_attempt_was_cut_short_writes_the_rest_once(api):
    """A connection dropped while the documents were being written: the retry replays those written and imports the others."""
    body = {"documents": [{"filename": "a.md", "content": "# A\n\nAnts."}, {"filename": "b.md", "content": "# B\n\nBees."}, {"filename": "c.md", "content": "# C\n\nCicadas."}]}
    documents = api.service.documents
    real, calls = documents.import_document, []

    def cut_after_first(ctx, doc, **kwargs):
        if calls:
            raise ConnectionResetError("the client went away")
        calls.append(doc.doc_id)
        return real(ctx, doc, **kwargs)

    documents.import_document = cut_after_first
    try:
        cut = await api.raw.post("/v1/import/documents", json=body, headers={"Idempotency-Key": "cut"})
        assert cut.status == 500
    finally:
        documents.import_document = real
    written = api.service.store.last_position()
    response = await api.raw.post("/v1/import/documents", json=body, headers={"Idempotency-Key": "cut"})
    report = await response.json()
    assert response.status == 200 and report["documents"] == 3, report
    assert [r["version"] for r in report["results"]] == [1, 1, 1]
    assert report["results"][0]["positions"][-1] <= written < report["results"][1]["positions"][0]
    (status, again), _ = await send_twice(api, "POST", "/v1/import/documents", body, "cut")
    assert status == 200 and [r["positions"] for r in again["results"]] == [r["positions"] for r in report["results"]]


async def test_a_memory_command_key_reused_with_another_body_or_if_match_is_refused_and_writes_nothing(api):
    """Each memory command's key covers all of its request: the evolve_to of a delete, the reason of a
    rollback, the If-Match of any; a reuse with another one is a 409 naming the key, never the first answer."""
    added = await api.raw.post("/v1/memories", json={"memories": [{"memory": "alpha"}, {"memory": "beta"}, {"memory": "gamma"}]})
    a, b, g = (await added.json())["memory_ids"]
    await api.raw.post(f"/v1/memories/{b}/archive", json={})
    await api.raw.post(f"/v1/memories/{b}/restore", json={})  # b at version 3
    cases = [
        ("POST", f"/v1/memories/{a}/delete", {"evolve_to": b}, {}, {"evolve_to": g}, {}),
        ("POST", f"/v1/memories/{b}/rollback", {"to_version": 2, "reason": "mistake"}, {}, {"to_version": 2, "reason": "other"}, {}),
        ("PATCH", f"/v1/memories/{g}", {"memory": "gamma two"}, {"If-Match": "1"}, {"memory": "gamma two"}, {"If-Match": "7"}),
    ]
    for n, (method, path, body, headers, other, other_headers) in enumerate(cases):
        first = await api.raw.request(method, path, json=body, headers={"Idempotency-Key": f"reuse-{n}", **headers})
        assert first.status == 200, await first.text()
        head = api.service.store.last_position()
        again = await api.raw.request(method, path, json=other, headers={"Idempotency-Key": f"reuse-{n}", **other_headers})
        answer = await again.json()
        assert (again.status, answer["error"]["code"], answer["error"]["field"]) == (409, "idempotency_conflict", "Idempotency-Key"), (path, answer)
        assert api.service.store.last_position() == head
        same = await api.raw.request(method, path, json=body, headers={"Idempotency-Key": f"reuse-{n}", **headers})
        assert same.status == 200 and (await same.json())["replayed"] is True
