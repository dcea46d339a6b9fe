"""The OpenAPI 3 document, generated from the route table and its msgspec Structs.

The schemas are the Structs' own (the constraints msgspec validates with),
plus what a Struct declares for its whole body in a ``json_schema_extra``
ClassVar (one of two fields, at least one change), plus what depends on the
server's settings (:class:`ServerFacts`: the embedding's dimensions, the
default fusion), so that every request the document calls valid is one this
server takes.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from mnemolog.eventstore.bounds import MAX_TENANT_CHARS

from .routing import CORRELATION_ID_MAX_LENGTH, IDEMPOTENCY_KEY_LENGTH, IF_MATCH_RE, MAX_POSITION, RequestBody, repeatable, takes_if_match
from .schemas import FUSION_ONLY, AsOfQuery, ErrorEnvelope

_PARAM = re.compile(r"{(\w+)}")
_RANGE = re.compile(r"^(\d+)\.\.(\d+)$")
_CHOICES = re.compile(r"^\w+(\|\w+)+$")


class ServerFacts(msgspec.Struct, frozen=True):
    """What the document says that depends on the server's settings."""

    embedding_dim: int | None = None  # an ``embedding`` sent with a request has exactly this many numbers
    fusion: str = "score"  # how recall fuses when a request leaves ``fusion`` out



_SERVER_ERRORS = (
    "503 busy (with Retry-After) or 507 insufficient_storage (a full disk): nothing was written, send it again;"
    " or either with written: true, its correlation_id, first_position and last_position: the log took the write"
    " but the projections could not follow it yet, so do not send it again. A 500 is a bug."
)

_TENANT = "the tenant to act for: a key for every tenant (*) must name it, a key for one tenant acts for its own; without auth, default \"default\""
_CORRELATION = "the correlation this write joins (a revert undoes a correlation's writes together); default: one of its own"
_LAST_EVENT_ID = "the position of the last event received: the tail resumes after it (instead of after)"
#: A position as ``Last-Event-ID`` carries it (the server also takes spaces around it).
LAST_EVENT_ID_RE = r"^[0-9]{1,18}$"


def openapi_document(routes, version: str, facts: ServerFacts = ServerFacts()) -> dict[str, Any]:
    routes = [r for r in routes if r.in_openapi]
    types = {ErrorEnvelope}
    for r in routes:
        if r.request is not None:
            types.add(r.request)
        if r.body is not None:
            types.update(r.body.json)
        if r.response is not None:
            types.add(r.response)
    ordered = sorted(types, key=lambda t: t.__name__)
    _, components = msgspec.json.schema_components(ordered, ref_template="#/components/schemas/{name}")
    _add_struct_extras(ordered, components)
    _add_server_facts(components, facts)
    paths: dict[str, dict[str, Any]] = {}
    error_ref = {"$ref": "#/components/schemas/ErrorEnvelope"}
    for r in routes:
        operation: dict[str, Any] = {
            "summary": r.summary,
            "operationId": r.handler.__name__,
            "responses": {
                **{str(status): _success(status, r.response, r.media_type) for status in r.statuses},
                "4XX": {"description": "a client error, naming the field", "content": {"application/json": {"schema": error_ref}}},
                "5XX": {"description": _SERVER_ERRORS, "content": {"application/json": {"schema": error_ref}}},
            },
        }
        typed = dict(r.path_types)
        parameters = [
            {"name": name, "in": "path", "required": True, "schema": msgspec.json.schema(typed[name]) if name in typed else {"type": "string"}}
            for name in _PARAM.findall(r.path)
        ]
        for name, desc, *typed in r.query:
            kind, required = typed or (None, False)
            schema = query_schema(desc, kind)
            if repeatable(desc):  # the handler reads every value: name=a&name=b
                schema = {"type": "array", "items": schema}
            parameters.append({"name": name, "in": "query", "required": required, "description": desc, "schema": schema})
        if r.scope is not None:
            parameters.append({"name": "X-Mnemolog-Tenant", "in": "header", "required": False, "schema": {"type": "string", "maxLength": MAX_TENANT_CHARS, "not": {"const": "*"}}, "description": _TENANT})
        if r.method in ("POST", "PATCH", "PUT", "DELETE") and r.writes:  # a read ignores the headers
            low, high = IDEMPOTENCY_KEY_LENGTH
            parameters.append({"name": "Idempotency-Key", "in": "header", "required": False, "schema": {"type": "string", "minLength": low, "maxLength": high}})
            parameters.append(
                {"name": "X-Correlation-Id", "in": "header", "required": False, "schema": {"type": "string", "maxLength": CORRELATION_ID_MAX_LENGTH}, "description": _CORRELATION}
            )
        if r.media_type == "text/event-stream":
            parameters.append({"name": "Last-Event-ID", "in": "header", "required": False, "schema": {"type": "string", "pattern": LAST_EVENT_ID_RE}, "description": _LAST_EVENT_ID})
        if takes_if_match(r.method, r.path):  # the memory commands check a version
            parameters.append({"name": "If-Match", "in": "header", "required": False, "schema": {"type": "string", "pattern": IF_MATCH_RE.pattern}, "description": "expected version"})
        if parameters:
            operation["parameters"] = parameters
        if r.body is not None:
            operation["requestBody"] = _body(r.body)
        elif r.request is not None:
            # A body the query string can replace (remove_relation) is optional too.
            operation["requestBody"] = {"required": _required(r.request) and not r.query, "content": {"application/json": {"schema": _ref(r.request)}}}
        if r.scope is not None:
            operation["security"] = [{"apiKey": []}]
            operation["x-scope"] = r.scope
        paths.setdefault(r.path, {})[r.method.lower()] = operation
    _add_links(routes, paths)
    return {
        "openapi": "3.1.0",
        "info": {"title": "mnemolog", "version": version, "description": "An event-sourced memory store for AI agents."},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"apiKey": {"type": "http", "scheme": "bearer"}},
        },
    }


def _add_struct_extras(types, components: dict[str, Any]) -> None:
    """Each Struct's ``json_schema_extra`` (a ClassVar): what JSON Schema says of a body as a whole."""
    seen: set[type] = set()

    def walk(info: Any) -> None:
        if isinstance(info, msgspec.inspect.StructType):
            if info.cls in seen:
                return
            seen.add(info.cls)
            extra = getattr(info.cls, "json_schema_extra", None)
            if extra and info.cls.__name__ in components:
                components[info.cls.__name__].update(extra)
            one_of = getattr(info.cls, "json_schema_one_of", None)
            if one_of and info.cls.__name__ in components:
                components[info.cls.__name__] = _one_field_of(components[info.cls.__name__], one_of)
            for field in info.fields:
                walk(field.type)
        else:
            for child in ("item_type", "key_type", "value_type", "types", "item_types"):
                found = getattr(info, child, None)
                for each in found if isinstance(found, tuple) else ([found] if found is not None else []):
                    walk(each)

    for info in msgspec.inspect.multi_type_info(types):
        walk(info)


def _one_field_of(schema: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """An object schema as objects of exactly one of ``names`` each, so that a generator builds each form whole.

    ``anyOf`` rather than ``oneOf``: each form forbids the others' fields, so they never overlap.
    """
    kept = {k: v for k, v in schema.items() if k in ("title", "description")}
    forms = [
        {"type": "object", "properties": {name: schema["properties"][name]}, "required": [name], "additionalProperties": False}
        for name in names
    ]
    return {**kept, "anyOf": forms}


def _add_server_facts(components: dict[str, Any], facts: ServerFacts) -> None:
    """The embedding's length and which fusion-only parameters a request without ``fusion`` may set."""
    if facts.embedding_dim:
        for schema in components.values():
            embedding = schema.get("properties", {}).get("embedding")
            for option in (embedding or {}).get("anyOf", [embedding] if embedding else []):
                if option.get("type") == "array":
                    option.update(minItems=facts.embedding_dim, maxItems=facts.embedding_dim)
    recall = components.get("RecallRequest")
    if recall is None:
        return
    rules = []
    for name, needs in FUSION_ONLY.items():
        given = {"required": [name], "properties": {name: {"not": {"type": "null"}}}}
        if needs == facts.fusion:  # the default: refused only when another fusion is asked for
            other = next(mode for mode in ("score", "rrf") if mode != needs)
            then = {"not": {"required": ["fusion"], "properties": {"fusion": {"const": other}}}}
        else:
            then = {"required": ["fusion"], "properties": {"fusion": {"const": needs}}}
        rules.append({"if": given, "then": then})
    recall["allOf"] = rules
    recall["description"] = (recall.get("description", "") + f" Without fusion, this server fuses by {facts.fusion}.").strip()


def query_schema(description: str, kind: Any = None) -> dict[str, Any]:
    """A query parameter's JSON schema: its declared type's, else read from the description every route declares with it.

    ``"1..500"`` is an integer in that range, ``"out|in|both"`` one of those
    words, ``"position"`` a log position, ``"position or …"`` an ``as_of``
    (a position or a time); anything else a string.
    """
    if kind is not None:
        return msgspec.json.schema(kind)
    if description.startswith("position or"):
        return msgspec.json.schema(AsOfQuery)
    if found := _RANGE.match(description):
        return {"type": "integer", "minimum": int(found.group(1)), "maximum": int(found.group(2))}
    if _CHOICES.match(description):
        return {"type": "string", "enum": description.split("|")}
    if description == "position":
        return {"type": "integer", "minimum": 0, "maximum": MAX_POSITION}
    return {"type": "string"}


_DESCRIPTIONS = {200: "success", 201: "created"}


def _success(status: int, kind, media_type: str) -> dict[str, Any]:
    if media_type == "text/event-stream":  # OpenAPI 3.1: the schema describes each event, whose data is ``kind`` as JSON
        data = {"type": "string", "contentMediaType": "application/json", **({"contentSchema": _ref(kind)} if kind is not None else {})}
        event = {"type": "object", "properties": {"id": {"type": "string", "pattern": "^[0-9]+$"}, "event": {"type": "string"}, "data": data}, "required": ["id", "event", "data"]}
        return {"description": _DESCRIPTIONS.get(status, "success"), "content": {media_type: {"schema": event}}}
    if media_type != "application/json":
        return {"description": _DESCRIPTIONS.get(status, "success"), "content": {media_type: {"schema": {"type": "string"}}}}
    return {"description": _DESCRIPTIONS.get(status, "success"), "content": {"application/json": {"schema": _ref(kind) or {"type": "object"}}}}


def _required(kind) -> bool:
    """Whether a body of this Struct must be sent: an empty body decodes as ``{}``, so only a required field makes it so.

    A Struct whose fields are all optional but that needs one of them says so with ``body_required: ClassVar[bool] = True``.
    """
    return getattr(kind, "body_required", False) or any(f.required for f in msgspec.structs.fields(kind))


def _body(body: RequestBody) -> dict[str, Any]:
    """A request body that comes as JSON (one of several Structs) or as a multipart form."""
    content: dict[str, Any] = {}
    if body.json:
        refs = [_ref(kind) for kind in body.json]
        content["application/json"] = {"schema": refs[0] if len(refs) == 1 else {"oneOf": refs}}
    if body.form or body.files:
        properties: dict[str, Any] = {
            name: {"type": "array", "items": {"type": "string", "format": "binary"}, "description": "files to upload (any part with a filename)"}
            for name in body.files
        }
        for name, desc, *typed in body.form:
            properties[name] = {**(msgspec.json.schema(typed[0]) if typed else {"type": "string"}), "description": desc}
        for name in body.files:
            properties[name]["minItems"] = 1
        content["multipart/form-data"] = {"schema": {"type": "object", "properties": properties, "required": list(body.files), "additionalProperties": False}}
    return {"required": True, "content": content}


def _ref(kind) -> dict[str, Any] | None:
    if kind is None:
        return None
    return {"$ref": f"#/components/schemas/{kind.__name__}"}


#: Where an id made by one operation is found, and the path under which the operations using it live.
_CREATES = {
    "add_memories": ("$response.body#/memory_ids/0", "/v1/memories/{id}"),
    "merge_memories": ("$response.body#/memory_ids/0", "/v1/memories/{id}"),
    "put_entity": ("$request.path.id", "/v1/entities/{id}"),
    "link": ("$response.body#/data/edge_ids/0", "/v1/edges/{edge_id}"),
}


def _add_links(routes, paths: dict[str, dict[str, Any]]) -> None:
    """OpenAPI links from the operation that makes an id to those that take it, so that a stateful client or fuzzer can follow it."""
    for r in routes:
        made = _CREATES.get(r.handler.__name__)
        if made is None:
            continue
        expression, prefix = made
        parameter = _PARAM.findall(prefix)[0]
        links = {
            f"{other.handler.__name__}": {"operationId": other.handler.__name__, "parameters": {parameter: expression}}
            for other in routes
            if (other.path == prefix or other.path.startswith(prefix + "/")) and other is not r
        }
        for status in r.statuses:
            paths[r.path][r.method.lower()]["responses"][str(status)]["links"] = links
