"""The OpenAPI 3 document, generated from the route table and its msgspec Structs."""

from __future__ import annotations

import re
from typing import Any

import msgspec

from .routing import MAX_POSITION, RequestBody
from .schemas import ErrorEnvelope

_PARAM = re.compile(r"{(\w+)}")
_RANGE = re.compile(r"^(\d+)\.\.(\d+)$")
_CHOICES = re.compile(r"^\w+(\|\w+)+$")


def openapi_document(routes, version: str) -> dict[str, Any]:
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
    paths: dict[str, dict[str, Any]] = {}
    error_ref = {"$ref": "#/components/schemas/ErrorEnvelope"}
    for r in routes:
        operation: dict[str, Any] = {
            "summary": r.summary,
            "operationId": r.handler.__name__,
            "responses": {
                **{str(status): _success(status, r.response, r.media_type) for status in r.statuses},
                "4XX": {"description": "a client error, naming the field", "content": {"application/json": {"schema": error_ref}}},
            },
        }
        parameters = [{"name": name, "in": "path", "required": True, "schema": {"type": "string"}} for name in _PARAM.findall(r.path)]
        parameters += [{"name": name, "in": "query", "required": False, "description": desc, "schema": query_schema(desc)} for name, desc in r.query]
        if r.method in ("POST", "PATCH", "PUT", "DELETE") and r.scope == "write" or r.scope == "admin":
            parameters.append({"name": "Idempotency-Key", "in": "header", "required": False, "schema": {"type": "string"}})
        if r.method in ("PATCH", "POST") and "{id}" in r.path:
            parameters.append({"name": "If-Match", "in": "header", "required": False, "schema": {"type": "string"}, "description": "expected version"})
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


def query_schema(description: str) -> dict[str, Any]:
    """A query parameter's JSON schema, read from the description every route declares with it.

    ``"1..500"`` is an integer in that range, ``"out|in|both"`` one of those
    words, ``"position"`` a log position; anything else a string.
    """
    if found := _RANGE.match(description):
        return {"type": "integer", "minimum": int(found.group(1)), "maximum": int(found.group(2))}
    if _CHOICES.match(description):
        return {"type": "string", "enum": description.split("|")}
    if description == "position":
        return {"type": "integer", "minimum": 0, "maximum": MAX_POSITION}
    return {"type": "string"}


_DESCRIPTIONS = {200: "success", 201: "created"}


def _success(status: int, kind, media_type: str) -> dict[str, Any]:
    if media_type != "application/json":  # a stream: text, described in the summary
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
        properties.update({name: {"type": "string", "description": desc} for name, desc in body.form})
        content["multipart/form-data"] = {"schema": {"type": "object", "properties": properties, "required": list(body.files)}}
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
