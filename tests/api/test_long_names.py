"""Long tenant names and idempotency keys fit every backend's columns: a 4xx beyond the bounds, never a 500 (PostgreSQL enforces lengths, SQLite does not)."""

from __future__ import annotations

import pytest

from tests.pg import fresh_database_url

from .test_errors import assert_error_body

LONGEST_KEY = "k" * 200


@pytest.fixture(params=["sqlite", "postgres"])
async def backend(request, start):
    if request.param == "sqlite":
        return await start()
    return await start(log_url=fresh_database_url(), organizer_enabled=False)


async def test_the_longest_idempotency_key_of_a_long_tenant_writes_once(backend):
    """Found by the hostile-client run: the key is stored as ``tenant/command/key``, past the log's 255 characters: a 500 on PostgreSQL."""
    tenant = "t" * 200
    headers = {"X-Mnemolog-Tenant": tenant, "Idempotency-Key": LONGEST_KEY}
    for path, method, body, status in [
        ("/v1/memories", "POST", {"memory": {"memory": "a memory under a long tenant"}}, 201),
        ("/v1/entities/person:ada", "PUT", {"name": "Ada"}, 201),
    ]:
        first = await backend.raw.request(method, path, json=body, headers=headers)
        assert first.status == status, await first.text()
        again = await backend.raw.request(method, path, json=body, headers=headers)
        assert again.status == status, await again.text()
        first_answer, again_answer = await first.json(), await again.json()
        assert again_answer["replayed"] is True and again_answer["positions"] == first_answer["positions"]
    events = backend.service.store.read_all(0, 100, tenant=tenant)
    assert len(events) == len({e.event_id for e in events}) and events, "written twice"


async def test_a_tenant_name_longer_than_the_log_takes_is_400_naming_the_header(backend):
    head = backend.service.store.last_position()
    response = await backend.raw.post("/v1/memories", json={"memory": {"memory": "x"}}, headers={"X-Mnemolog-Tenant": "t" * 201})
    answer = await response.json()
    assert response.status == 400, answer
    assert_error_body(answer, 400)
    assert answer["error"]["field"] == "X-Mnemolog-Tenant"
    assert backend.service.store.last_position() == head


async def test_the_longest_entity_id_under_the_longest_tenant_is_written_and_read(backend):
    """Its stream, ``entity-<tenant>/<id>``, is 308 characters: SQLite stored it, PostgreSQL's 255-character column answered a 500."""
    headers, entity_id = {"X-Mnemolog-Tenant": "t" * 200}, "e" * 100
    written = await backend.raw.put(f"/v1/entities/{entity_id}", json={"name": "Ada"}, headers=headers)
    assert written.status == 201, await written.text()
    read = await backend.raw.get(f"/v1/entities/{entity_id}", headers=headers)
    assert read.status == 200 and (await read.json())["name"] == "Ada"


async def test_the_longest_document_id_under_the_longest_tenant_is_imported(backend):
    """``document-<tenant>/<doc id>``: 465 characters through the API."""
    headers, doc_id = {"X-Mnemolog-Tenant": "t" * 200}, "kb/" + "d" * 252
    body = {"documents": [{"filename": "guide.md", "doc_id": doc_id, "content": "# Guide\n\nAda met Grace at the harbour."}]}
    response = await backend.raw.post("/v1/import/documents", json=body, headers=headers)
    answer = await response.json()
    assert response.status in (200, 201), answer
    assert answer["documents"] == 1 and answer["failed"] == 0, answer
    assert [(r["doc_id"], r["status"]) for r in answer["results"]] == [(doc_id, "imported")]


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("GET", "/v1/events?correlation_id=c%00", None),
        ("GET", "/v1/events?stream=s%00", None),
        ("GET", "/v1/events?type=MemoryAdded%00", None),
        ("POST", "/v1/reverts", {"correlation_id": "c\u0000"}),
    ],
)
async def test_a_nul_in_a_name_finds_nothing_on_every_backend(backend, method, path, body):
    """PostgreSQL cannot be asked about text holding NUL: the log answers that nothing holds it, never a 500."""
    await backend.raw.post("/v1/memories", json={"memory": {"memory": "a memory"}})
    response = await backend.raw.request(method, path, json=body)
    answer = await response.json()
    if method == "GET":
        assert response.status == 200 and answer["events"] == [], answer
    else:
        assert response.status == 404 and answer["error"]["code"] == "not_found", answer
