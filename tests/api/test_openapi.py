"""``/openapi.json``: every route of the running app is in it, and it holds together structurally."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from mnemolog.api import keys, routing
from mnemolog.api.app import ROUTES

_PARAM = re.compile(r"{(\w+)}")
_METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}


@pytest.fixture
async def document(api) -> dict:
    response = await api.raw.get("/openapi.json")
    assert response.status == 200
    assert response.content_type == "application/json"
    return await response.json()


def _refs(node, found: list[str]) -> list[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                found.append(value)
            else:
                _refs(value, found)
    elif isinstance(node, list):
        for item in node:
            _refs(item, found)
    return found


def _operations(document: dict):
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method in _METHODS:
                yield path, method, operation


async def test_every_registered_route_is_documented_with_its_method(api, document):
    registered = set()
    for route in api.app.router.routes():
        if route.method == "HEAD":  # aiohttp's automatic twin of a GET
            continue
        canonical = route.resource.canonical
        registered.add((route.method.lower(), canonical))
    assert registered, "the app registered no routes"
    documented = {(method, path) for path, method, _ in _operations(document)}
    pages = {(r.method.lower(), r.path) for r in api.app[keys.routes_key] if not r.in_openapi}
    assert pages and all(path == "/explorer" or path.startswith("/explorer/") for _, path in pages)  # only the explorer's files are left out
    missing = sorted(registered - documented - pages)
    assert not missing, f"routes missing from /openapi.json: {missing}"
    # And nothing is documented that the server does not answer.
    assert documented <= registered, sorted(documented - registered)


async def test_every_route_of_the_route_table_is_documented(api, document):
    for r in ROUTES:
        if not r.in_openapi:  # the explorer's files: a page, not API operations
            assert r.path not in document["paths"], r.path
            continue
        operation = document["paths"].get(r.path, {}).get(r.method.lower())
        assert operation is not None, (r.method, r.path)
        assert operation["summary"] == r.summary
        if r.scope is None:
            assert "security" not in operation, (r.method, r.path)
        else:
            assert operation["security"] == [{"apiKey": []}]
            assert operation["x-scope"] == r.scope


async def test_request_bodies_reference_components_that_exist(document):
    schemas = document["components"]["schemas"]
    with_body = 0
    for path, method, operation in _operations(document):
        body = operation.get("requestBody")
        if body is None:
            continue
        with_body += 1
        schema = body["content"]["application/json"]["schema"]
        for ref in [s["$ref"] for s in schema["oneOf"]] if "oneOf" in schema else [schema["$ref"]]:
            assert ref.startswith("#/components/schemas/"), ref
            assert ref.rsplit("/", 1)[1] in schemas, (method, path, ref)
    assert with_body >= 16  # every write and the POST reads
    for r in ROUTES:
        if r.request is not None:
            body = document["paths"][r.path][r.method.lower()]["requestBody"]
            assert body["content"]["application/json"]["schema"]["$ref"].endswith("/" + r.request.__name__)


async def test_document_import_has_its_json_and_multipart_bodies(document):
    body = document["paths"]["/v1/import/documents"]["post"]["requestBody"]
    assert body["required"] is True
    json_refs = {s["$ref"].rsplit("/", 1)[1] for s in body["content"]["application/json"]["schema"]["oneOf"]}
    assert json_refs == {"ImportDocumentsRequest", "DocumentIn"}
    schemas = document["components"]["schemas"]
    assert "documents" in schemas["ImportDocumentsRequest"]["properties"]
    assert {"filename", "content", "encoding"} <= set(schemas["DocumentIn"]["properties"])
    form = body["content"]["multipart/form-data"]["schema"]
    assert form["required"] == ["file"]
    assert form["properties"]["file"]["items"] == {"type": "string", "format": "binary"}
    assert {"collection", "doc_type", "lang", "source_url", "model"} <= set(form["properties"])


async def test_every_ref_anywhere_resolves(document):
    refs = _refs(document, [])
    assert refs
    for ref in refs:
        assert ref.startswith("#/"), ref
        node = document
        for part in ref[2:].split("/"):
            assert isinstance(node, dict) and part in node, f"dangling $ref {ref}"
            node = node[part]


async def test_document_structure(document):
    assert document["openapi"].startswith("3.")
    assert document["info"]["title"] and document["info"]["version"]
    assert document["components"]["securitySchemes"]["apiKey"]["type"] == "http"
    operation_ids = []
    for path, method, operation in _operations(document):
        assert path.startswith("/"), path
        assert isinstance(operation["summary"], str) and operation["summary"]
        operation_ids.append(operation["operationId"])
        responses = operation["responses"]
        assert responses and all(isinstance(r.get("description"), str) for r in responses.values())
        assert any(code.startswith("2") for code in responses)
        for errors in ("4XX", "5XX"):  # 5XX: busy, insufficient_storage, a write the projections could not follow yet
            assert responses[errors]["content"]["application/json"]["schema"]["$ref"] == "#/components/schemas/ErrorEnvelope"
        declared = {p["name"] for p in operation.get("parameters", []) if p["in"] == "path"}
        assert declared == set(_PARAM.findall(path)), (method, path)
        for parameter in operation.get("parameters", []):
            assert parameter["in"] in ("path", "query", "header", "cookie")
            assert isinstance(parameter["name"], str) and parameter["name"]
            assert "schema" in parameter
            if parameter["in"] == "path":
                assert parameter["required"] is True
        names = [(p["in"], p["name"]) for p in operation.get("parameters", [])]
        assert len(names) == len(set(names)), (method, path, names)
        for security in operation.get("security", []):
            assert set(security) <= set(document["components"]["securitySchemes"])
    assert len(operation_ids) == len(set(operation_ids)), "operationIds must be unique"


async def test_component_schemas_are_json_schema_ish(document):
    schemas = document["components"]["schemas"]
    assert {"ErrorEnvelope", "WriteResponse", "AddMemoriesRequest", "RecallRequest"} <= set(schemas)
    for name, schema in schemas.items():
        assert isinstance(schema, dict) and schema, name
        assert "type" in schema or "$ref" in schema or "anyOf" in schema or "enum" in schema, name
        if schema.get("type") == "object":
            properties = schema.get("properties", {})
            assert isinstance(properties, dict), name
            assert set(schema.get("required", [])) <= set(properties), name
            for prop, sub in properties.items():
                assert isinstance(sub, dict), (name, prop)
    add = schemas["AddMemoriesRequest"]
    assert [form["required"] for form in add["anyOf"]] == [["memory"], ["memories"]]  # exactly one of them
    recall = schemas["RecallRequest"]
    assert recall["required"] == ["query"]
    assert recall["properties"]["limit"]["maximum"] == 100
    assert recall.get("additionalProperties") is False  # unknown fields are refused
    error = schemas["ErrorEnvelope"]["properties"]["error"]
    assert error["$ref"] == "#/components/schemas/ErrorDetail"
    assert {"code", "message", "field"} <= set(schemas["ErrorDetail"]["properties"]) and schemas["ErrorDetail"]["required"] == ["code", "message"]


async def test_write_routes_document_idempotency_and_if_match(document):
    add = document["paths"]["/v1/memories"]["post"]
    assert "Idempotency-Key" in {p["name"] for p in add["parameters"]}
    update = document["paths"]["/v1/memories/{id}"]["patch"]
    names = {p["name"] for p in update["parameters"]}
    assert {"Idempotency-Key", "If-Match", "id"} <= names
    events = document["paths"]["/v1/events"]["get"]
    assert {"after", "limit", "type", "stream", "correlation_id"} <= {p["name"] for p in events["parameters"]}


async def test_document_import_and_relation_removal_are_described(document):
    """The body of a document import and the query of a relation removal are named in the document."""
    schemas = document["components"]["schemas"]
    body = document["paths"]["/v1/import/documents"]["post"]["requestBody"]["content"]
    refs = [one["$ref"] for one in body["application/json"]["schema"]["oneOf"]]
    assert refs == ["#/components/schemas/ImportDocumentsRequest", "#/components/schemas/DocumentIn"]
    assert "file" in body["multipart/form-data"]["schema"]["properties"]
    assert set(schemas["ImportDocumentsRequest"]["properties"]) == {"documents", "collection", "doc_type", "lang", "source_url", "model"}
    assert {"filename", "content", "encoding", "doc_id", "title"} <= set(schemas["DocumentIn"]["properties"])
    removal = document["paths"]["/v1/entities/{id}/relations"]["delete"]
    assert {"target_id", "relation_type", "reason"} <= {p["name"] for p in removal["parameters"]}


async def test_documented_success_statuses_are_the_ones_answered(api, document):
    # A 201 documented as 200 was found by the schemathesis run (tests/api/test_fuzz.py).
    def statuses(path, method):
        return {code for code in document["paths"][path][method]["responses"] if code.startswith("2")}

    assert statuses("/v1/memories", "post") == {"201"}
    assert statuses("/v1/memories/merge", "post") == {"201"}
    assert statuses("/v1/edges", "post") == {"201"}
    assert statuses("/v1/entities/{id}", "put") == {"200", "201"}
    assert statuses("/v1/entities/{id}/relations", "post") == {"200", "201"}
    assert statuses("/v1/recall", "post") == {"200"}
    added = await api.raw.post("/v1/memories", json={"memories": [{"memory": "one"}, {"memory": "two"}]})
    assert added.status == 201
    ids = (await added.json())["memory_ids"]
    assert (await api.raw.post("/v1/memories/merge", json={"memory_ids": ids})).status == 201
    assert (await api.raw.post("/v1/edges", json={"source": ids[0], "target": ids[1]})).status == 201
    assert (await api.raw.put("/v1/entities/e1", json={"name": "E"})).status == 201
    assert (await api.raw.put("/v1/entities/e1", json={"name": "E2"})).status == 200
    assert (await api.raw.put("/v1/entities/e2", json={"name": "F"})).status == 201
    assert (await api.raw.post("/v1/entities/e1/relations", json={"target_id": "e2", "relation_type": "knows"})).status == 201
    assert (await api.raw.post("/v1/entities/e1/relations", json={"target_id": "e2", "relation_type": "knows", "weight": 0.5})).status == 200


async def test_an_undeclared_method_is_405_with_allow_naming_the_declared_ones(api, document):
    for path, item in document["paths"].items():
        declared = {m.upper() for m in item}
        concrete = _PARAM.sub("x", path)
        # A method that no template matching this path declares (PATCH /v1/memories/merge is PATCH /v1/memories/{id}).
        overlapping = {m.upper() for other, o in document["paths"].items() if re.fullmatch(_PARAM.sub("[^/]+", other), concrete) for m in o}
        undeclared = next(m for m in ("PATCH", "PUT", "DELETE", "POST", "GET") if m not in overlapping)
        response = await api.raw.request(undeclared, concrete)
        assert response.status == 405, (undeclared, path)
        allowed = {m.strip() for m in response.headers.get("Allow", "").split(",") if m.strip()} - {"HEAD"}
        # Exactly the declared ones: /v1/memories/merge is not also /v1/memories/{id} (no GET or PATCH there).
        assert declared == allowed, (path, response.headers.get("Allow"))
        assert (await response.json())["error"]["code"] == "method_not_allowed"


async def test_the_event_stream_is_documented_as_server_sent_events(document):
    content = document["paths"]["/v1/events/stream"]["get"]["responses"]["200"]["content"]
    assert list(content) == ["text/event-stream"]
    event = content["text/event-stream"]["schema"]  # OpenAPI 3.1: the schema of each event
    assert set(event["required"]) == {"id", "event", "data"}
    assert event["properties"]["data"]["contentSchema"] == {"$ref": "#/components/schemas/EventView"}
    assert "EventView" in document["components"]["schemas"]


async def test_every_json_answer_is_a_documented_struct(document):
    """No answer is documented as a bare object: each names the response Struct the server encodes it with."""
    for path, item in document["paths"].items():
        for method, operation in item.items():
            for status, answer in operation["responses"].items():
                schema = answer.get("content", {}).get("application/json", {}).get("schema")
                if schema is not None:
                    assert "$ref" in schema, (method, path, status, schema)


async def test_a_body_is_required_only_when_the_handler_needs_one(api, document):
    """Bodies whose every field has a default decode from an empty body: the document says they are optional."""
    for path, item in document["paths"].items():
        for method, operation in item.items():
            body = operation.get("requestBody")
            if body is None or "application/json" not in body["content"] or "multipart/form-data" in body["content"]:
                continue
            if any(p["in"] == "query" for p in operation.get("parameters", [])):  # the query can stand in for the body
                assert body["required"] is False, (method, path)
                continue
            response = await api.raw.request(method.upper(), _PARAM.sub("x", path))
            refused_for_the_body = response.status in (400, 422) and (await response.json())["error"]["field"] not in (None, "x", "id", "node")
            assert body["required"] == refused_for_the_body, (method, path, response.status, await response.text())


async def test_links_lead_from_the_operation_making_an_id_to_those_using_it(document):
    by_id = {op["operationId"]: (path, op) for path, item in document["paths"].items() for op in item.values()}
    followed = set()
    for path, item in document["paths"].items():
        for operation in item.values():
            for response in operation["responses"].values():
                for link in response.get("links", {}).values():
                    target_path, target = by_id[link["operationId"]]
                    assert set(link["parameters"]) <= set(_PARAM.findall(target_path)), (operation["operationId"], link)
                    followed.add((operation["operationId"], link["operationId"]))
    assert {("add_memories", "get_memory"), ("add_memories", "update_memory"), ("put_entity", "get_entity"), ("put_entity", "set_relation"), ("link", "unlink")} <= followed


async def test_typed_query_parameters_are_refused_outside_their_schema(api, document):
    checked = 0
    for path, item in document["paths"].items():
        if path == "/v1/events/stream":
            continue
        for method, operation in item.items():
            for parameter in operation.get("parameters", []):
                schema = parameter["schema"]
                if parameter["in"] != "query" or "enum" not in schema and "maximum" not in schema:
                    continue
                bad = "not-one-of-them" if "enum" in schema else str(schema["maximum"] + 1)
                params = {parameter["name"]: bad, **({"node": "x"} if path == "/v1/graph/neighbors" and parameter["name"] != "node" else {})}
                response = await api.raw.request(method.upper(), _PARAM.sub("x", path), params=params)
                assert response.status == 422, (method, path, parameter["name"], response.status)
                assert (await response.json())["error"]["field"] == parameter["name"], (path, parameter["name"])
                checked += 1
    assert checked >= 10


@pytest.mark.parametrize("name", [" ", "\u000b", "\t\n", "\u001c", "\u3000"])
async def test_a_blank_entity_name_is_refused_by_the_document_as_by_the_server(api, document, name):
    """Found by ``schemathesis run``: the document took a name of whitespace only (``"\\u000b"``), which the server refuses."""
    import jsonschema

    name_schema = document["components"]["schemas"]["EntityIn"]["properties"]["name"]
    assert not jsonschema.Draft202012Validator(name_schema).is_valid(name)
    response = await api.raw.put("/v1/entities/person:blank", json={"name": name})
    assert response.status == 422 and (await response.json())["error"]["field"] == "name"


def _headers(operation: dict) -> dict[str, dict]:
    return {p["name"]: p for p in operation.get("parameters", []) if p["in"] == "header"}


async def test_every_header_a_route_reads_is_a_parameter_of_its_operation(api, document):
    """Each write takes X-Correlation-Id beside Idempotency-Key (a relink's commit too, its scope read), the live tail Last-Event-ID."""
    writes = {(r.path, r.method.lower()) for r in ROUTES if r.in_openapi and r.method != "GET" and r.scope in ("write", "admin")} | {("/v1/graph/relink", "post")}
    for path, method, operation in _operations(document):
        headers = _headers(operation)
        takes = {"Idempotency-Key", "X-Correlation-Id"} <= set(headers)
        assert takes == ((path, method) in writes), (method, path, sorted(headers))
    correlation = _headers(document["paths"]["/v1/memories"]["post"])["X-Correlation-Id"]["schema"]
    refused = await api.raw.post("/v1/memories", json={"memory": {"memory": "x"}}, headers={"X-Correlation-Id": "c" * (correlation["maxLength"] + 1)})
    assert refused.status == 400 and (await refused.json())["error"]["field"] == "X-Correlation-Id"
    relinked = await api.raw.post("/v1/graph/relink", json={"commit": True}, headers={"Idempotency-Key": "relink-1", "X-Correlation-Id": "relink-c"})
    again = await api.raw.post("/v1/graph/relink", json={"commit": True}, headers={"Idempotency-Key": "relink-1", "X-Correlation-Id": "relink-c"})
    assert relinked.status == again.status == 200
    last = _headers(document["paths"]["/v1/events/stream"]["get"])["Last-Event-ID"]["schema"]
    assert re.fullmatch(last["pattern"], "12") and not re.fullmatch(last["pattern"], "x")
    bad = await api.raw.get("/v1/events/stream", headers={"Last-Event-ID": "x"})
    assert bad.status == 400 and (await bad.json())["error"]["field"] == "Last-Event-ID"


def _validate(document: dict, schema: dict, instance) -> list[str]:
    """Why ``instance`` breaks ``schema`` (whose refs point into ``document``'s components), with a JSON Schema validator."""
    import jsonschema
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    registry = Registry().with_resource("urn:openapi", Resource.from_contents(document, default_specification=DRAFT202012))
    rooted = json.loads(json.dumps(schema).replace('"#/components/', '"urn:openapi#/components/'))
    return [f"{list(e.absolute_path)}: {e.message}" for e in jsonschema.Draft202012Validator(rooted, registry=registry).iter_errors(instance)]


async def test_the_live_tail_answers_as_documented(api, document):
    """The one operation the fuzzing leaves out (it never ends): its events, and its refusals, against the document's schemas."""
    operation = document["paths"]["/v1/events/stream"]["get"]
    await api.raw.post("/v1/memories", json={"memory": {"memory": "tailed"}})
    event_schema = operation["responses"]["200"]["content"]["text/event-stream"]["schema"]
    async with api.raw.get("/v1/events/stream", headers={"Last-Event-ID": "0"}) as tail:
        assert tail.status == 200 and tail.content_type == "text/event-stream"
        fields: dict[str, str] = {}
        while (line := (await asyncio.wait_for(tail.content.readline(), 30)).decode().rstrip("\n")) or not fields:
            if line and not line.startswith(":"):
                name, _, value = line.partition(": ")
                fields[name] = value
    assert not _validate(document, event_schema, fields), fields
    assert not _validate(document, event_schema["properties"]["data"]["contentSchema"], json.loads(fields["data"]))
    refusals = [({"after": "x"}, {}, 422, "after"), ({}, {"Last-Event-ID": "x"}, 400, "Last-Event-ID"), ({"later": "1"}, {}, 422, "later")]
    for params, headers, status, field in refusals:
        refused = await api.raw.get("/v1/events/stream", params=params, headers=headers)
        body = await refused.json()
        assert refused.status == status and body["error"]["field"] == field
        assert not _validate(document, operation["responses"]["4XX"]["content"]["application/json"]["schema"], body)


async def test_a_repeatable_query_parameter_is_documented_as_an_array(api, document):
    """``type=A&type=B``: a parameter the handler reads every value of is an array in the document, not one string."""
    repeatable = {(r.path, r.method.lower(), name) for r in ROUTES if r.in_openapi for name, description, *_ in r.query if routing.repeatable(description)}
    assert len(repeatable) >= 5
    for path, method, name in repeatable:
        parameter = next(p for p in document["paths"][path][method]["parameters"] if p["name"] == name)
        assert parameter["schema"]["type"] == "array" and parameter.get("explode", True) is True, (path, name, parameter)
    events = await api.raw.get("/v1/events", params=[("type", "MemoryAdded"), ("type", "MemoryUpdated")])
    assert events.status == 200


async def test_every_operation_needing_a_key_documents_the_tenant_header(api, document):
    """A key for every tenant (``*``) names the tenant it acts for in X-Mnemolog-Tenant: each operation behind a key takes it."""
    for path, method, operation in _operations(document):
        tenant = _headers(operation).get("X-Mnemolog-Tenant")
        assert (tenant is not None) == ("security" in operation), (method, path)
    schema = _headers(document["paths"]["/v1/digest"]["get"])["X-Mnemolog-Tenant"]["schema"]
    refused = await api.raw.get("/v1/digest", headers={"X-Mnemolog-Tenant": "t" * (schema["maxLength"] + 1)})
    assert refused.status == 400 and (await refused.json())["error"]["field"] == "X-Mnemolog-Tenant"
    named = await api.raw.get("/v1/digest", headers={"X-Mnemolog-Tenant": "t" * schema["maxLength"]})
    assert named.status == 200


async def test_every_field_an_error_answer_carries_is_documented(api, document):
    """A 409 carries the memory's ``current_version``; a 503 or 507 that was written ``written`` and its positions: the schema names them."""
    detail = set(document["components"]["schemas"]["ErrorDetail"]["properties"])
    assert {"current_version", "written", "correlation_id", "first_position", "last_position"} <= detail
    added = await (await api.raw.post("/v1/memories", json={"memory": {"memory": "versioned"}})).json()
    memory_id = added["memory_ids"][0]
    stale = await api.raw.patch(f"/v1/memories/{memory_id}", json={"memory": "changed"}, headers={"If-Match": "7"})
    body = await stale.json()
    assert stale.status == 409 and body["error"]["current_version"] == 1 and set(body["error"]) <= detail


async def test_what_the_document_takes_of_tenants_and_edge_ids_the_server_takes(api, document):
    """Found by ``schemathesis run``: the tenant ``*`` and edge ids under the derived edges' prefixes (``rel:``,
    ``merged:``, ``superseded:``) were valid by the document, and refused by the server."""
    import jsonschema

    tenant = _headers(document["paths"]["/v1/memories"]["post"])["X-Mnemolog-Tenant"]["schema"]
    assert not jsonschema.Draft202012Validator(tenant).is_valid("*") and jsonschema.Draft202012Validator(tenant).is_valid("acme")
    refused = await api.raw.post("/v1/memories", json={"memory": {"memory": "x"}}, headers={"X-Mnemolog-Tenant": "*"})
    assert refused.status == 400 and (await refused.json())["error"]["field"] == "X-Mnemolog-Tenant"
    link = document["components"]["schemas"]["LinkRequest"]
    unlink = next(p for p in document["paths"]["/v1/edges/{edge_id}"]["delete"]["parameters"] if p["name"] == "edge_id")["schema"]
    undo = document["components"]["schemas"]["UndoNamespaceRequest"]["properties"]["prefix"]
    for edge_id in ("rel:person:a:works_at:org:b", "merged:c1:m1:0", "superseded:c1:m2"):
        assert _validate(document, link, {"source": "a", "target": "b", "edge_id": edge_id})
        assert not jsonschema.Draft202012Validator(unlink).is_valid(edge_id) and not jsonschema.Draft202012Validator(undo).is_valid(edge_id)
        answer = await api.raw.post("/v1/edges", json={"source": "a", "target": "b", "edge_id": edge_id})
        assert answer.status == 422 and (await answer.json())["error"]["field"] == "edge_id", await answer.text()
        answer = await api.raw.delete(f"/v1/edges/{edge_id}")
        assert answer.status == 422, await answer.text()
    assert not _validate(document, link, {"source": "a", "target": "b", "edge_id": "user:notes:1"})
    assert jsonschema.Draft202012Validator(unlink).is_valid("user:notes:1") and jsonschema.Draft202012Validator(undo).is_valid("relations:")


async def test_a_relink_dry_run_refuses_the_write_headers_a_commit_refuses(api):
    """The document lists a write's headers on relink (its commit writes): a dry run took bad ones without a word."""
    for headers, field in (
        ({"X-Correlation-Id": "c" * 201}, "X-Correlation-Id"),
        ({"Idempotency-Key": ""}, "Idempotency-Key"),
        ({"If-Match": "3"}, "If-Match"),
    ):
        for body in ({"commit": False}, None):
            answer = await api.raw.post("/v1/graph/relink", json=body, headers=headers)
            assert answer.status == 400 and (await answer.json())["error"]["field"] == field, (headers, body, await answer.text())
    assert (await api.raw.post("/v1/graph/relink", json={}, headers={"X-Correlation-Id": "c1", "Idempotency-Key": "dry-run-1"})).status == 200
