"""Bad input never yields a 500: every error is JSON ``{"error": {"code", "message", "field"}}`` with a fitting 4xx."""

from __future__ import annotations

import json

import pytest

from mnemolog.api.client import ApiError
from mnemolog.api.app import ROUTES


def assert_error_body(body: dict, status: int) -> None:
    assert set(body) == {"error"}, body
    error = body["error"]
    assert {"code", "message", "field"} <= set(error), error
    assert isinstance(error["code"], str) and error["code"]
    assert isinstance(error["message"], str) and error["message"]
    assert error["field"] is None or isinstance(error["field"], str)
    if status != 500:
        assert error["code"] != "internal"


async def call(api, method: str, path: str, *, status: int, field: str | None | type = ..., code: str | None = None, **kw) -> dict:
    response = await api.raw.request(method, path, **kw)
    text = await response.text()
    assert response.status == status, (method, path, response.status, text)
    assert response.content_type == "application/json", text
    body = json.loads(text)
    assert_error_body(body, status)
    if field is not ...:
        assert body["error"]["field"] == field, body
    if code is not None:
        assert body["error"]["code"] == code, body
    return body


async def each(cases, check) -> None:
    """Run ``check(*case)`` for every case on one server; report every failing case at once."""
    failures = []
    for case in cases:
        try:
            await check(*case)
        except AssertionError as exc:
            failures.append(f"{case!r}: {exc}")
    assert not failures, "\n".join(failures)


# -- wrong types and values: 422 naming the field ------------------------------------------------------


WRONG_VALUES = (
        ("/v1/memories", {"memory": {"memory": 3}}, "memory.memory"),
        ("/v1/memories", {"memory": {"memory": "ok", "tags": "not-a-list"}}, "memory.tags"),
        ("/v1/memories", {"memories": [{"memory": "ok"}, {"memory": "ok", "tags": "x"}]}, "memories[1].tags"),
        ("/v1/memories", {"memories": [{"memory": "ok"}, {"memory": "ok", "confidence": 7}]}, "memories[1].confidence"),
        ("/v1/memories", {"memory": {"memory": "ok", "memory_type": "TopicMemory"}}, "memory.memory_type"),
        ("/v1/memories", {"memory": {"memory": ""}}, "memory.memory"),
        ("/v1/memories", {"memory": "just a string"}, "memory"),
        ("/v1/memories", {"memories": [{"memory": "ok"}, {"memory": "bad", "tags": ["two words"]}]}, "memories[1].tags"),
        ("/v1/memories/merge", {"memory_ids": ["only-one"]}, "memory_ids"),
        ("/v1/recall", {"query": "x", "limit": "ten"}, "limit"),
        ("/v1/recall", {"query": "x", "limit": 0}, "limit"),
        ("/v1/recall", {"query": "x", "limit": 101}, "limit"),
        ("/v1/recall", {"query": ""}, "query"),
        ("/v1/recall", {"query": "x", "graph_depth": 9}, "graph_depth"),
        ("/v1/recall", {"query": "x", "graph_direction": "up"}, "graph_direction"),
        ("/v1/recall", {"query": "x", "channels": ["telepathy"]}, "channels[0]"),
        ("/v1/recall", {"query": "x", "filters": {"tags": "a"}}, "filters.tags"),
        ("/v1/recall", {"query": "x", "filters": {"status": ["gone"]}}, "filters.status[0]"),
        ("/v1/recall", {"query": "x", "weights": {"lexical": -1}}, "weights.lexical"),
        ("/v1/recall", {"query": "x", "as_of": 1.5}, "as_of"),
        ("/v1/recall", {"query": "x", "as_of": "garbage"}, "as_of"),
        ("/v1/recall", {"query": "x", "as_of": -1}, "as_of"),
        ("/v1/recall", {"query": "x", "as_of": 10**30}, "as_of"),
        ("/v1/recall", {"query": "x", "as_of": "99999999999999999999999"}, "as_of"),
        ("/v1/recall", {"query": "x", "min_position": -1}, "min_position"),
        ("/v1/search", {"query": 5}, "query"),
        ("/v1/graph/subgraph", {"seeds": [1]}, "seeds[0]"),
        ("/v1/graph/subgraph", {"seeds": []}, "seeds"),
        ("/v1/graph/subgraph", {"seeds": ["a"], "max_nodes": 0}, "max_nodes"),
        ("/v1/graph/subgraph", {"seeds": ["a"], "as_of": 10**30}, "as_of"),
        ("/v1/edges", {"source": "a", "target": "b", "weight": "heavy"}, "weight"),
        ("/v1/edges", {"source": "a", "target": "b", "weight": 2}, "weight"),
        ("/v1/edges", {"source": "a", "target": "b", "edge_type": "lower"}, "edge_type"),
        ("/v1/edges", {"source": "a", "target": "a"}, "target"),
        ("/v1/edges", {"source": "a"}, "target"),
        ("/v1/edges/undo-namespace", {"prefix": "no-colon"}, "prefix"),
        ("/v1/reverts", {"correlation_id": ""}, "correlation_id"),
        ("/v1/recall", {"query": "x", "filters": {"created_from": "last tuesday"}}, "filters.created_from"),
        ("/v1/recall", {"query": "x", "filters": {"updated_to": "2026-13"}}, "filters.updated_to"),
)


async def test_wrong_types_and_values_are_422_naming_the_field(api):
    async def check(path, body, field):
        await call(api, "POST", path, json=body, status=422, field=field, code="invalid")

    await each(WRONG_VALUES, check)
    # Well formed, but past the log's head: the store's state falls short, a 409 naming the field.
    await call(api, "POST", "/v1/recall", json={"query": "x", "min_position": 10**12}, status=409, field="min_position", code="beyond_head")
    for query in ("min_position=99999999", "min_position=99999999&wait=1s"):  # answered 200 with caught_up false
        await call(api, "GET", f"/v1/organizer/status?{query}", status=409, field="min_position", code="beyond_head")


async def test_a_multipart_body_without_a_boundary_is_400_naming_the_content_type(api):
    """Found by ``schemathesis run``: it was a 500."""
    response = await api.raw.post("/v1/import/documents", data=b'{"documents": []}', headers={"Content-Type": "multipart/form-data"})
    assert response.status == 400, await response.text()
    body = await response.json()
    assert body["error"]["field"] == "Content-Type" and body["error"]["code"] == "malformed_multipart"


async def test_a_file_name_no_file_system_takes_is_imported_under_a_safe_name(api):
    """Found by the schemathesis run: a NUL in a document's file name was a 500."""
    body = {"documents": [{"filename": "notes\u0000.md", "content": "# Notes\n\nAda met Grace."}, {"filename": "plain.txt", "content": "text"}]}
    response = await api.raw.post("/v1/import/documents", data=json.dumps(body), headers={"Content-Type": "application/json"})
    assert response.status == 200, await response.text()
    assert [r["status"] for r in (await response.json())["results"]] == ["imported", "imported"]


async def test_a_whole_number_written_with_a_fraction_fills_an_integer_field(api):
    """JSON has one kind of number and JSON Schema counts 5.0 as an integer: so does the server; 5.5 stays refused."""
    found = await api.raw.post("/v1/recall", json={"query": "anything", "limit": 5.0, "graph_depth": 1.0})
    assert found.status == 200, await found.text()
    await call(api, "POST", "/v1/recall", json={"query": "anything", "limit": 5.5}, status=422, field="limit")
    await call(api, "POST", "/v1/recall", json={"query": "anything", "limit": "5"}, status=422, field="limit")


async def test_patch_and_status_routes_name_the_field(api, memory_id):
    await call(api, "PATCH", f"/v1/memories/{memory_id}", json={"memory": 3}, status=422, field="memory")
    await call(api, "PATCH", f"/v1/memories/{memory_id}", json={"tags": ["a b"]}, status=422, field="tags")
    await call(api, "PATCH", f"/v1/memories/{memory_id}", json={}, status=422, field="changes")
    await call(api, "POST", f"/v1/memories/{memory_id}/rollback", json={"to_version": 0}, status=422, field="to_version")
    await call(api, "POST", f"/v1/memories/{memory_id}/rollback", json={"to_version": 5}, status=404, code="not_found")  # a version it never had
    await call(api, "POST", f"/v1/memories/{memory_id}/archive", json={"reason": 1}, status=422, field="reason")
    await call(api, "POST", f"/v1/memories/{memory_id}/delete", json={"evolve_to": memory_id}, status=422, field="evolve_to")
    await call(api, "POST", f"/v1/memories/{memory_id}/supersede", json={"superseded_by": memory_id}, status=422)


async def test_errors_through_the_client_carry_the_field(client):
    with pytest.raises(ApiError) as err:
        await client.add_memories(memories=[{"memory": "fine"}, {"memory": "fine", "tags": 5}])
    assert (err.value.status, err.value.code, err.value.field) == (422, "invalid", "memories[1].tags")


# -- unknown fields, bad JSON, content types, sizes ---------------------------------------------------------


async def test_unknown_fields_are_422_naming_them(api, memory_id):
    await call(api, "POST", "/v1/memories", json={"memory": {"memory": "x"}, "extra": 1}, status=422, field="extra")
    await call(api, "POST", "/v1/memories", json={"memory": {"memory": "x", "colour": "red"}}, status=422, field="memory.colour")
    await call(api, "POST", "/v1/recall", json={"query": "x", "filters": {"tenant": "other"}}, status=422, field="filters.tenant")
    await call(api, "PATCH", f"/v1/memories/{memory_id}", json={"memory_type": "UserMemory"}, status=422, field="memory_type")
    await call(api, "POST", "/v1/edges", json={"source": "a", "target": "b", "tenant": "x"}, status=422, field="tenant")


async def test_malformed_json_is_400(api):
    async def check(body):
        await call(api, "POST", "/v1/memories", data=body, headers={"Content-Type": "application/json"}, status=400, code="malformed_json")

    bodies = [b"{bad", b'{"memory": ', b"\xff\xfe", b'{"memory": {"memory": "x"}} trailing', b"nul\x00l", b'{"memory": {"memory": "x", "confidence": NaN}}']
    await each([(b,) for b in bodies], check)


async def test_malformed_json_names_the_body(api, memory_id):
    # Found by the schemathesis run (tests/api/test_fuzz.py): these named no field.
    for method, path in (("POST", "/v1/memories"), ("PATCH", f"/v1/memories/{memory_id}"), ("POST", "/v1/graph/subgraph"), ("PUT", "/v1/entities/e1")):
        await call(api, method, path, data=b"\x00", headers={"Content-Type": "application/json"}, status=400, code="malformed_json", field="body")


async def test_not_an_object_is_422(api):
    for body in (b"[]", b'"text"', b"null", b"3"):
        await call(api, "POST", "/v1/recall", data=body, headers={"Content-Type": "application/json"}, status=422, field="body")


async def test_an_unknown_field_without_a_name_is_422_naming_the_body(api, memory_id):
    await call(api, "POST", f"/v1/memories/{memory_id}/archive", json={"reason": "r", "": {}}, status=422, field="body")
    await call(api, "POST", "/v1/recall", json={"query": "x", "": 1}, status=422, field="body")


async def test_deeply_nested_json_is_a_client_error(api):
    nested = b'{"memory": {"memory": "x", "properties": ' + b'{"a":' * 3000 + b"1" + b"}" * 3000 + b"}}"
    await call(api, "POST", "/v1/memories", data=nested, headers={"Content-Type": "application/json"}, status=400, field="body")


async def test_wrong_content_type_is_415(api):
    async def check(content_type):
        await call(
            api, "POST", "/v1/memories", data=b'{"memory": {"memory": "x"}}', headers={"Content-Type": content_type}, status=415, code="unsupported_media_type",
            field="Content-Type",
        )

    types = ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/xml"]
    await each([(t,) for t in types], check)


async def test_json_with_a_charset_is_accepted(api):
    response = await api.raw.post("/v1/memories", data=b'{"memory": {"memory": "x"}}', headers={"Content-Type": "application/json; charset=utf-8"})
    assert response.status == 201


async def test_a_body_over_the_limit_is_413_json(start):
    small = await start(max_body_bytes=1024)
    client = small.client()
    await client.add_memories({"memory": "fits"})
    await call(small, "POST", "/v1/memories", json={"memory": {"memory": "x" * 2000}}, status=413, code="payload_too_large", field="body")
    await call(small, "POST", "/v1/recall", json={"query": "y" * 2000}, status=413, field="body")
    assert (await client.digest())["position"] == 1


async def test_uploaded_files_over_the_limit_are_413_naming_the_body_or_the_files(start):
    import aiohttp

    small = await start(max_body_bytes=1024)
    one = aiohttp.FormData()
    one.add_field("file", b"word " * 400, filename="big.txt", content_type="text/plain")
    await call(small, "POST", "/v1/import/documents", data=one, status=413, code="payload_too_large", field="body")
    several = aiohttp.FormData()  # each file fits, together they do not
    for n in range(3):
        several.add_field("file", b"word " * 120, filename=f"part{n}.txt", content_type="text/plain")
    await call(small, "POST", "/v1/import/documents", data=several, status=413, code="payload_too_large", field="file")


# -- unknown things, routes and methods ---------------------------------------------------------------


async def test_unknown_memory_is_404_json_everywhere(api, memory_id):
    ghost = "01a00000-0000-7000-8000-000000000000"
    await call(api, "GET", f"/v1/memories/{ghost}", status=404, code="not_found")
    await call(api, "GET", f"/v1/memories/{ghost}/history", status=404, code="not_found")
    await call(api, "PATCH", f"/v1/memories/{ghost}", json={"memory": "x"}, status=404)
    for action, body in (("archive", {}), ("delete", {}), ("restore", {}), ("rollback", {"to_version": 1}), ("supersede", {"superseded_by": memory_id})):
        await call(api, "POST", f"/v1/memories/{ghost}/{action}", json=body, status=404)
    await call(api, "POST", "/v1/memories/merge", json={"memory_ids": [memory_id, ghost]}, status=404)
    await call(api, "POST", "/v1/edges", json={"source": memory_id, "target": ghost}, status=404)
    await call(api, "DELETE", "/v1/edges/user:ghost:1", status=404)
    await call(api, "POST", "/v1/reverts", json={"correlation_id": "ghost"}, status=404)


async def test_unknown_route_is_404_json(api):
    for path in ("/nope", "/v1/nope", "/v1/memories/a/b/c", "/v2/recall"):
        await call(api, "GET", path, status=404, code="not_found")


async def test_wrong_method_is_405_json(api):
    await call(api, "DELETE", "/v1/memories", status=405, code="method_not_allowed")
    await call(api, "GET", "/v1/recall", status=405, code="method_not_allowed")
    await call(api, "PUT", "/v1/events", status=405)
    await call(api, "POST", "/health", status=405)


async def test_the_client_raises_api_error_for_a_non_json_error(client):
    with pytest.raises(ApiError) as err:
        await client.get_memory("x" * 9000)  # the HTTP parser refuses the request line, in plain text
    assert 400 <= err.value.status < 500


# -- query parameters and headers ------------------------------------------------------------------------


BAD_QUERIES = (
        ("/v1/events?limit=abc", "limit"),
        ("/v1/events?limit=0", "limit"),
        ("/v1/events?limit=1001", "limit"),
        ("/v1/events?after=-1", "after"),
        ("/v1/events?after=1.5", "after"),
        ("/v1/events?after=99999999999999999999999", "after"),
        ("/v1/graph/neighbors?node=x&depth=99", "depth"),
        ("/v1/graph/neighbors?node=x&depth=abc", "depth"),
        ("/v1/graph/neighbors?node=x&direction=x", "direction"),
        ("/v1/graph/neighbors?node=x&as_of=garbage", "as_of"),
        ("/v1/graph/neighbors?node=x&as_of=99999999999999999999999", "as_of"),
        ("/v1/graph/neighbors", "node"),
        ("/v1/memories/{id}?as_of=garbage", "as_of"),
        ("/v1/memories/{id}?as_of=2024-13-45", "as_of"),
        ("/v1/memories/{id}?as_of=-3", "as_of"),
        ("/v1/memories/{id}?as_of=%C2%B2", "as_of"),
        ("/v1/memories/{id}?as_of=99999999999999999999999", "as_of"),
        ("/v1/verify?against=1:xyz", "against"),
        ("/v1/verify?against=9223372036854775808:" + "0" * 64, "against"),  # past any position: it was a 500
        ("/v1/verify?against=%C2%B2:" + "0" * 64, "against"),
        ("/v1/verify?from=0", "from"),
        ("/v1/verify?from=99999999999999999999999", "from"),
        ("/v1/verify?to=99999999999999999999999", "to"),
        ("/v1/verify?from=5&to=2", "to"),
        ("/v1/events?after=", "after"),
        ("/v1/organizer/status?wait=", "wait"),
        ("/v1/organizer/status?wait=%205s", "wait"),
        ("/v1/organizer/status?wait=30.5s", "wait"),
        ("/v1/events/stream?after=99999999999999999999999", "after"),
        ("/v1/events/stream?after=x", "after"),
)


async def test_bad_query_parameters_are_422_with_the_field(api, memory_id):
    async def check(path, field):
        await call(api, "GET", path.replace("{id}", memory_id), status=422, field=field, code="invalid")

    await each(BAD_QUERIES, check)
    # Well formed, but beyond what the log holds yet: the state falls short, not the request (as a schema-valid request, never a 4xx of its form).
    await call(api, "GET", "/v1/verify?from=50", status=409, field="from", code="beyond_head")


async def test_unknown_query_parameters_are_422_naming_the_parameter(api, memory_id):
    """A misspelt parameter is refused like an unknown body field, never silently ignored."""
    await api.client().request("PUT", "/v1/entities/person:ada", json={"name": "Ada"})
    body = await call(api, "GET", "/v1/entities?keyword=ada", status=422, field="keyword", code="invalid")
    assert "'q'" not in body["error"]["message"] and "q, tag" in body["error"]["message"]

    async def check(path, field):
        await call(api, "GET", path.replace("{id}", memory_id), status=422, field=field, code="invalid")

    await each(
        [
            ("/v1/memories/{id}?asof=3", "asof"),
            ("/v1/events?limit=5&typ=MemoryAdded", "typ"),
            ("/v1/graph/neighbors?node={id}&depht=2", "depht"),
            ("/v1/tags?prefix=a&Prefix=b", "Prefix"),
            ("/health?verbose=1", "verbose"),
        ],
        check,
    )
    await call(api, "POST", "/v1/recall?limit=3", json={"query": "x"}, status=422, field="limit", code="invalid")
    # as_of in the query of a route that takes it in its body says where it goes; elsewhere, that the route has no past
    moved = await call(api, "POST", "/v1/recall?as_of=1", json={"query": "x"}, status=422, field="as_of")
    assert "send as_of in the body" in moved["error"]["message"], moved
    head = await call(api, "GET", "/v1/capabilities?as_of=1", status=422, field="as_of")
    assert "answers at the head only" in head["error"]["message"], head
    # Declared parameters still work, repeated ones included, and every route's declared list is accepted.
    found = await api.client().request("GET", "/v1/entities", params={"q": "ada"})
    assert [e["id"] for e in found["entities"]] == ["person:ada"]
    assert (await api.raw.get(f"/v1/graph/neighbors?node={memory_id}&type=RELATED&type=FOLLOWS")).status == 200
    removed = await api.raw.delete("/v1/entities/person:ada/relations?target_id=person:bob&relation_type=knows")
    assert removed.status in (200, 404, 409), await removed.text()


async def test_bad_if_match_is_400(api, memory_id):
    async def check(value):
        await call(api, "PATCH", f"/v1/memories/{memory_id}", json={"memory": "y"}, headers={"If-Match": value}, status=400, field="If-Match")

    await each([(v,) for v in ["abc", "", "1.5", "-1", "\u00b2", '"x"', "W/"]], check)
    assert (await api.client().get_memory(memory_id))["version"] == 1


async def test_bad_last_event_id_is_400(api):
    async def check(value):
        await call(api, "GET", "/v1/events/stream", headers={"Last-Event-ID": value}, status=400, field="Last-Event-ID")

    await each([(v,) for v in ["abc", "-1", "\u00b2", "99999999999999999999999"]], check)


async def test_bad_write_headers_are_400(api):
    await call(api, "POST", "/v1/memories", json={"memory": {"memory": "x"}}, headers={"Idempotency-Key": "k" * 201}, status=400, field="Idempotency-Key")
    await call(api, "POST", "/v1/memories", json={"memory": {"memory": "x"}}, headers={"X-Correlation-Id": "c" * 201}, status=400, field="X-Correlation-Id")


async def test_a_one_value_header_sent_twice_is_400_naming_it_and_nothing_is_written(api, memory_id):
    from multidict import CIMultiDict

    async def check(method, path, name, values, **kw):
        headers = CIMultiDict((name, v) for v in values)
        body = await call(api, method, path, headers=headers, status=400, code="bad_request", field=name, **kw)
        assert "twice" in body["error"]["message"] or "times" in body["error"]["message"]

    write = {"json": {"memory": {"memory": "written only once"}}}
    await each(
        [
            ("POST", "/v1/memories", "X-Mnemolog-Tenant", ["a", "b"], write),
            ("POST", "/v1/memories", "Idempotency-Key", ["key-one", "key-two"], write),
            ("POST", "/v1/memories", "X-Correlation-Id", ["c1", "c1"], write),
            ("PATCH", f"/v1/memories/{memory_id}", "If-Match", ["1", "2"], {"json": {"memory": "changed"}}),
            ("GET", "/v1/events/stream", "Last-Event-ID", ["1", "2"], {}),
        ],
        lambda method, path, name, values, kw: check(method, path, name, values, **kw),
    )
    found = await api.client().recall("written only once", channels=["lexical"])
    assert not found["hits"], found
    assert (await api.client().get_memory(memory_id))["version"] == 1


async def test_a_form_field_name_of_bytes_no_utf8_is_422_quoting_it_escaped(api):
    body, headers = _multipart(b'Content-Disposition: form-data; name="coll\xffection"')
    error = await call(api, "POST", "/v1/import/documents", data=body, headers=headers, status=422, code="invalid")
    assert error["error"]["field"] == "coll\\udcffection" and "coll\\udcffection" in error["error"]["message"]


async def test_a_raw_fts_query_that_does_not_parse_is_422(api, client):
    await client.add_memories({"memory": "full text content"})

    async def check(query):
        for path in ("/v1/recall", "/v1/search"):
            await call(api, "POST", path, json={"query": query, "raw_fts": True}, status=422, field="query")
        # The same text without raw_fts is escaped and simply searched.
        assert isinstance((await client.recall(query))["hits"], list)

    await each([(q,) for q in ['"unbalanced', "AND OR", "NEAR(", "a:b*", "x NOT"]], check)
    raw = await client.recall("full AND content", raw_fts=True)
    assert [h["memory"]["memory"] for h in raw["hits"]] == ["full text content"]


async def test_a_number_of_thousands_of_digits_is_too_large_not_a_500(api, memory_id):
    """``int()`` refuses more than 4,300 digits: such a parameter was a 500 on every route reading a number."""
    huge = "9" * 5000
    for path, field in (
        (f"/v1/events?after={huge}", "after"),
        (f"/v1/events?after=-{huge}", "after"),
        (f"/v1/memories/{memory_id}/history?limit={huge}", "limit"),
        (f"/v1/memories/{memory_id}?as_of={huge}", "as_of"),
        (f"/v1/timeline?limit={huge}", "limit"),
    ):
        await call(api, "GET", path, status=422, field=field)
    await call(api, "POST", "/v1/recall", json={"query": "x", "as_of": huge}, status=422, field="as_of")
    await call(api, "GET", "/v1/events/stream", headers={"Last-Event-ID": huge}, status=400, field="Last-Event-ID")
    one = "0" * 5000 + "1"  # leading zeros: still the number 1
    assert (await api.raw.get(f"/v1/memories/{memory_id}", params={"as_of": one})).status == 200
    await call(api, "GET", f"/v1/memories/{memory_id}", params={"as_of": "0" * 1000 + "9" * 4400}, status=422, field="as_of")
    page = await api.raw.get("/v1/events", params={"after": one})
    assert page.status == 200 and [e["position"] for e in (await page.json())["events"]] == [], await page.text()


async def test_every_route_survives_hostile_as_of_values(api, memory_id):
    """``as_of`` travels to SQLite on many routes: impossible positions and look-alike digits are 4xx everywhere."""
    failures = []
    for r in ROUTES:
        if r.path == "/v1/events/stream":
            continue
        path = r.path.replace("{id}", memory_id).replace("{edge_id}", "user:x:1")
        for value in ("\u00b2", "\u0661", "9" * 25, "9" * 5000, "-1", "garbage", "2024-99-99"):
            if r.method == "GET":
                response = await api.raw.get(path, params={"as_of": value, "node": memory_id})
            else:
                response = await api.raw.request(r.method, path, json={"as_of": value, "query": "x", "seeds": [memory_id]})
            if response.status >= 500:
                failures.append(f"{r.method} {r.path} as_of={value!r}: {response.status}")
    assert not failures, "\n".join(failures)


# -- found by the schemathesis run (tests/api/test_fuzz.py) ----------------------------------------------


async def test_a_query_parameter_without_a_name_is_422_naming_the_query(api):
    await call(api, "GET", "/v1/events?=x", status=422, code="invalid", field="query")
    await call(api, "GET", "/v1/graph/stats?=1", status=422, code="invalid", field="query")


def _multipart(part_headers: bytes, content: bytes = b"value") -> tuple[bytes, dict]:
    body = b"--b0undary\r\n" + part_headers + b"\r\n\r\n" + content + b"\r\n--b0undary--\r\n"
    return body, {"Content-Type": "multipart/form-data; boundary=b0undary"}


async def test_a_multipart_part_header_that_does_not_parse_is_400_naming_the_body(api):
    body, headers = _multipart(b'Content-Disposition: form-data; name="a\x10b"')
    await call(api, "POST", "/v1/import/documents", data=body, headers=headers, status=400, code="bad_request", field="body")


async def test_a_form_field_without_a_name_is_422_naming_the_form(api):
    body, headers = _multipart(b'Content-Disposition: form-data; name=""')
    await call(api, "POST", "/v1/import/documents", data=body, headers=headers, status=422, code="invalid", field="form")


# -- a database still busy after its lock wait: 503 with Retry-After, never a 500 -----------------------


def _locked_write(path, *, through_sqlalchemy: bool) -> None:
    """A real "database is locked": a write that gives up at once while another connection holds the write lock."""
    import sqlite3

    import sqlalchemy

    if through_sqlalchemy:
        engine = sqlalchemy.create_engine(f"sqlite:///{path}", connect_args={"timeout": 0}, poolclass=sqlalchemy.pool.NullPool)
        with engine.begin() as conn:
            conn.execute(sqlalchemy.text("INSERT INTO t VALUES (1)"))
    else:
        conn = sqlite3.connect(path, isolation_level=None, timeout=0)
        try:
            conn.execute("BEGIN IMMEDIATE")
        finally:
            conn.close()


@pytest.mark.parametrize("through_sqlalchemy", [False, True], ids=["sqlite3", "sqlalchemy"])
async def test_lock_contention_past_the_busy_timeout_is_a_503_with_retry_after(aiohttp_client, tmp_path, through_sqlalchemy):
    import sqlite3

    from aiohttp import web

    from mnemolog.api.errors import error_middleware

    path = tmp_path / "busy.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA journal_mode=WAL")
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")

    async def write(_request):
        _locked_write(path, through_sqlalchemy=through_sqlalchemy)
        return web.json_response({})

    app = web.Application(middlewares=[error_middleware])
    app.router.add_post("/write", write)
    client = await aiohttp_client(app)
    response = await client.post("/write")
    body = json.loads(await response.text())
    holder.execute("ROLLBACK")
    holder.close()
    assert response.status == 503, body
    assert response.headers["Retry-After"] == "1"
    assert_error_body(body, 503)
    assert body["error"]["code"] == "busy"


async def test_a_new_memory_refused_by_the_command_is_named_by_its_path_in_the_body(api):
    """The schema's errors said ``memory.tags`` (nine tags), the command's ``tags`` (a tag with a space): a client
    that maps errors onto the fields it sent found no field ``tags`` in ``{"memory": {...}}``."""
    dim = api.service.embedding_dim
    cases = [
        ({"memory": {"memory": "x", "tags": ["a b"]}}, "memory.tags"),
        ({"memory": {"memory": "x", "tags": [f"t{i}" for i in range(9)]}}, "memory.tags"),
        ({"memory": {"memory": "x", "embedding": [0.5] * (dim + 1)}}, "memory.embedding"),
        ({"memories": [{"memory": "x", "tags": ["a b"]}]}, "memories[0].tags"),
        ({"memories": [{"memory": "x"}, {"memory": "y", "tags": ["a b"]}]}, "memories[1].tags"),
    ]
    for body, field in cases:
        await call(api, "POST", "/v1/memories", json=body, status=422, field=field, code="invalid")


async def test_a_connection_reset_while_the_client_is_still_there_is_a_500_not_its_hang_up(aiohttp_client, caplog):
    """A reset from a server a handler called (an embedder, a judge) is a failure of this one, not the client leaving."""
    from aiohttp import web

    from mnemolog.api.errors import error_middleware

    async def calls_out(request):
        raise ConnectionResetError("the model server reset the connection")

    app = web.Application(middlewares=[error_middleware])
    app.router.add_get("/x", calls_out)
    client = await aiohttp_client(app)
    response = await client.get("/x")
    assert response.status == 500 and (await response.json())["error"]["code"] == "internal"
    assert any(r.levelname == "ERROR" and r.exc_info for r in caplog.records)


async def test_graph_parameters_where_the_graph_channel_does_not_run_are_422_naming_them(api):
    """``graph_edge_types``, ``graph_depth`` and ``graph_direction`` of a recall whose graph channel is off were ignored
    without a word; and a type that is no type matched nothing, as a filter on every endpoint that takes one."""
    for body, field in (
        ({"channels": ["lexical"], "graph_edge_types": ["WORKS_AT"]}, "graph_edge_types"),
        ({"channels": ["lexical"], "graph_depth": 3}, "graph_depth"),
        ({"channels": ["semantic"], "graph_direction": "in"}, "graph_direction"),
        ({"weights": {"graph": 0}, "graph_depth": 3}, "graph_depth"),
        ({"graph_edge_types": ["not valid!"]}, "graph_edge_types[0]"),
    ):
        await call(api, "POST", "/v1/recall", json={"query": "vault", **body}, status=422, field=field)
    for body in ({"graph_edge_types": ["works at"], "graph_depth": 2}, {"channels": ["lexical"], "graph_direction": "both"}):  # the graph runs; a default says nothing
        response = await api.raw.post("/v1/recall", json={"query": "vault", **body})
        assert response.status == 200, await response.text()
    written = await api.raw.post("/v1/memories", json={"memory": {"memory": "a node"}})
    node = (await written.json())["memory_ids"][0]
    await call(api, "GET", f"/v1/graph/neighbors?node={node}&type=%26", status=422, field="type")
    response = await api.raw.get(f"/v1/graph/neighbors?node={node}&type=part-of&type=")  # read as PART_OF; the empty one filters nothing
    assert response.status == 200, await response.text()


def test_a_name_the_log_refuses_is_a_422_naming_it_wherever_it_comes_from():
    """A name no request check caught (the log's own check of its stream ids, keys and tenants) was a 500."""
    from mnemolog.api.errors import as_api_error
    from mnemolog.eventstore.bounds import check_name

    with pytest.raises(ValueError) as refused:
        check_name("idempotency_key", "k\x00ey")
    error = as_api_error(refused.value)
    assert (error.status, error.code, error.field) == (422, "invalid", "idempotency_key")


def test_a_log_database_that_cannot_be_reached_is_a_503_saying_so(tmp_path):
    """PostgreSQL down was a bare 500 "internal error" on every request until it came back."""
    pytest.importorskip("psycopg")
    import sqlalchemy

    from mnemolog.api.errors import as_api_error

    engine = sqlalchemy.create_engine(f"postgresql+psycopg://nobody@/log?host={tmp_path}&connect_timeout=2")  # no server listens there
    try:
        with pytest.raises(sqlalchemy.exc.OperationalError) as refused:
            engine.connect()
    finally:
        engine.dispose()
    error = as_api_error(refused.value)
    assert (error.status, error.code, error.headers["Retry-After"]) == (503, "unavailable", "1")
    assert "could not be reached" in error.message
    assert as_api_error(sqlalchemy.exc.OperationalError("SELECT 1", {}, ValueError("other"))) is None  # not every OperationalError

