"""Schemathesis hooks for this API: the rules that tie two values of one request together, which JSON Schema cannot state.

``schemathesis.toml`` (at the repository root) loads this module, so that
``schemathesis run --checks all http://127.0.0.1:8765/openapi.json -H
"Authorization: Bearer $KEY"`` run from there skips the generated requests
that break one of these rules (the server refuses each with a 422 naming the
field, as it should); ``tests/api/test_fuzz.py`` uses the same function.
"""

from __future__ import annotations

import json
from urllib.parse import unquote

import jsonschema
import schemathesis
from schemathesis.core import NOT_SET

from mnemolog.eventstore.recorder import parse_moment
from mnemolog.projections.ingest.documents import default_doc_id


def breaks_a_rule_across_fields(case) -> str | None:
    """The rule a generated request breaks that ties two of its values together, which no JSON Schema states, or None."""
    body = case.body if isinstance(case.body, dict) else {}
    query = case.query or {}
    path = {name: unquote(value) for name, value in (case.path_parameters or {}).items()}  # they come percent-encoded
    if case.path == "/v1/edges" and body.get("source") == body.get("target"):
        return "an edge from a node to itself"
    if case.path.endswith("/supersede") and body.get("superseded_by") == path.get("id"):
        return "a memory superseding itself"
    if case.path == "/v1/memories/merge" and isinstance(body.get("expected_versions"), dict):
        named = body.get("memory_ids") if isinstance(body.get("memory_ids"), list) else []
        if any(memory_id not in named for memory_id in body["expected_versions"]):
            return "an expected version of a memory the merge does not name"
    if case.path == "/v1/entities/{id}/relations":
        if body.get("target_id") == path.get("id") or query.get("target_id") == path.get("id"):
            return "a relation from an entity to itself"
        if case.method == "DELETE" and "target_id" not in query and "target_id" not in body:
            return "a relation named neither by the body nor by target_id and relation_type in the query"
        if case.method == "DELETE" and "target_id" in query and "relation_type" not in query:
            return "target_id in the query without relation_type"
        in_query = [name for name in ("target_id", "relation_type", "reason") if name in query]
        if case.method == "DELETE" and in_query and case.body is not None and case.body is not NOT_SET:
            return "the relation in the query string and a body too"
        if case.method == "DELETE" and in_query and "target_id" not in query:
            return "relation_type or reason in the query without target_id"
    if case.path == "/v1/verify":
        start, end = str(query.get("from", 1)), str(query.get("to", ""))
        if start.isdigit() and end.isdigit() and int(end) < int(start):
            return "to before from"
    if case.path in ("/v1/recall", "/v1/search") and body.get("raw_fts"):
        return "a raw FTS5 query, whose grammar is FTS5's"
    if case.path in ("/v1/recall", "/v1/search"):  # both check the strategy, channels and weights alike
        channels = [c for c in body.get("channels") if isinstance(c, str)] if isinstance(body.get("channels"), list) else []  # a negative case's items may be anything
        weights = body.get("weights") if isinstance(body.get("weights"), dict) else {}
        graph_only = body.get("strategy") == "graph-only"
        if graph_only and (any(c != "graph" for c in channels) or weights.get("graph") == 0):
            return "strategy graph-only with another channel, or with the graph channel weighted 0"
        running = {"graph"} if graph_only else set(channels or ("lexical", "semantic", "graph"))
        if any(isinstance(w, (int, float)) and w and name not in running for name, w in weights.items()):
            return "a weight above 0 for a channel the request leaves out"
        if body.get("embedding") is not None and ("semantic" not in running or weights.get("semantic") == 0):
            return "a query embedding for a request that leaves the semantic channel out"
        # The server's embedder (hashing) weighs the semantic channel 0: it runs only when asked for by name or by an embedding.
        semantic_runs = "semantic" in running and (weights.get("semantic") or (weights.get("semantic") is None and (channels or body.get("embedding") is not None)))
        if 0 in weights.values() and not semantic_runs and all(weights.get(name) == 0 for name in running - {"semantic"}):
            return "weights of 0 that leave the request no channel to run"
        filters = body.get("filters") if isinstance(body.get("filters"), dict) else {}
        if any(_ends_first(filters.get(f"{kind}_from"), filters.get(f"{kind}_to")) for kind in ("created", "updated")):
            return "a time range of the filters ending where it starts or before"
    if case.path == "/v1/import/documents" and isinstance(body.get("documents"), list):
        documents = [d for d in body["documents"] if isinstance(d, dict) and isinstance(d.get("filename"), str) and isinstance(d.get("doc_id"), (str, type(None)))]
        ids = [d.get("doc_id") or default_doc_id(d["filename"]) for d in documents]
        if len(set(ids)) < len(ids):
            return "two documents whose ids (given, or made from their file names) are the same"
    if case.path == "/v1/import/documents" and case.media_type == "multipart/form-data" and isinstance(case.body, dict):
        files = case.body.get("file") if isinstance(case.body.get("file"), list) else []
        if case.body.get("doc_id") is not None and len(files) != 1:
            return "doc_id with more than one file"
        if len(files) > 1:
            return "several files under one file name"
    return None


def _ends_first(begins, ends) -> bool:
    """Whether the time ``ends`` is no later than ``begins`` (both given, both times)."""
    try:
        return parse_moment(ends) <= parse_moment(begins)
    except (TypeError, ValueError, AttributeError):
        return False


def mislabelled(case) -> str | None:
    """Why a case labelled valid is not, by the document's own schema, or None.

    Schemathesis 4.32's coverage phase offers a bare number as a valid body
    for a schema that is a choice (``anyOf``) of object forms, such as
    ``AddMemoriesRequest``'s one-of-memory-or-memories.
    """
    meta = getattr(case, "meta", None)
    positive = meta is not None and meta.generation.mode.is_positive
    if positive and case.path == "/v1/memories" and case.method == "POST" and not isinstance(case.body, dict):
        return "a body that is not an object, labelled valid"
    return None


def _as_form_text(value: object) -> str:
    """A form field's value as it travels: text (schemathesis spells a non-string in JSON: ``true``, ``null``)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (bool, dict, list)) or value is None:
        return json.dumps(value)
    return str(value)


def arrives_valid(case) -> str | None:
    """Why a case labelled invalid is valid as sent, or None.

    A multipart form carries every field as text, so a value made invalid
    only by its type (``true`` where the document asks for a string)
    arrives as valid text: the request the server gets breaks no rule.
    """
    meta = getattr(case, "meta", None)
    if meta is None or meta.generation.mode.is_positive or case.media_type != "multipart/form-data" or not isinstance(case.body, dict):
        return None
    body = case.operation.get_body_for_media_type(case.media_type)
    schema = (getattr(body, "definition", None) or {}).get("schema")
    if not isinstance(schema, dict) or "properties" not in schema:
        return None
    files = {name for name, field in schema["properties"].items() if field.get("type") == "array" and field.get("items", {}).get("format") == "binary"}
    sent = {}
    for name, value in case.body.items():
        if name in files:
            sent[name] = ["<file>" for _ in (value if isinstance(value, list) else [value])]  # each item is a part
        elif not isinstance(value, list):
            sent[name] = _as_form_text(value)
        elif len(value) == 1:  # a list is sent as one part per item: none is no field, one is a plain field
            sent[name] = _as_form_text(value[0])
        elif value:
            sent[name] = [_as_form_text(v) for v in value]  # a field given twice (refused)
    return "a form whose fields arrive as valid text" if jsonschema.Draft202012Validator(schema).is_valid(sent) else None


@schemathesis.hook
def filter_case(context, case) -> bool:
    return breaks_a_rule_across_fields(case) is None and mislabelled(case) is None and arrives_valid(case) is None
