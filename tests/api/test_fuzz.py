"""Fuzz the API from its own OpenAPI document with schemathesis, against a real ``mnemolog serve``.

The server runs as a subprocess on a free loopback port with auth on and a
key made by ``mnemolog keys create``. For every operation of
``GET /openapi.json`` schemathesis generates valid (positive) and invalid
(negative) requests: path, query, headers and body. Operations with path
parameters are fuzzed twice, once with generated ids and once with ids that
exist (seeded first), so that the handlers behind the 404 are reached too.

Every response must pass every schemathesis check but one (see ``CHECKS``):

- no 5xx (``not_a_server_error``);
- an undeclared method is a 405 with ``Allow`` (``unsupported_method``,
  ``allow_header_conformance``); a request without its key is refused
  (``ignored_auth``, ``missing_required_header``); schema-invalid requests are
  refused (``negative_data_rejection``); documented headers conform;
- a documented status and content type, and a body that matches the
  documented schema (``status_code_conformance``, ``content_type_conformance``,
  ``response_schema_conformance``);
- every 4xx is JSON ``{"error": {"code", "message", "field"}}``, and a 400,
  413, 415 or 422 names the field (``body`` when the body as a whole is wrong).

- a request the document calls valid is accepted (``positive_data_acceptance``):
  2xx, or 404/409 where the store's state decides (an unknown id, a position
  the log has not reached, a stale version).

A few rules tie two values of one request together, which JSON Schema cannot
state (an edge from a node to itself, ``to`` before ``from``, a body or a
query string): :func:`tests.api.schemathesis_hooks.breaks_a_rule_across_fields`
names them, and a case breaking one is not held against the document (the
server's 422 names the field all the same). The same module is the hook that
``schemathesis run`` loads from ``schemathesis.toml``.

Then a stateful run follows the document's links (an id from the call that
makes it to the calls that take it) with the same checks.

Examples are bounded (``EXAMPLES`` per operation and mode, derandomized) so
the run fits CI; the number of requests tried is printed (``-s`` shows it).
The live tail ``GET /v1/events/stream`` never ends by design and is left out.
"""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.core.parameters import ParameterLocation
from hypothesis.stateful import run_state_machine_as_test
from schemathesis.checks import (
    allow_header_conformance,
    content_type_conformance,
    ignored_auth,
    missing_required_header,
    negative_data_rejection,
    not_a_server_error,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from tests.api.schemathesis_hooks import arrives_valid, breaks_a_rule_across_fields
from tests.serving import create_key, serve

EXAMPLES = 12
SKIPPED = {"/v1/events/stream"}  # an endless server-sent event stream
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
    negative_data_rejection,
    missing_required_header,
    unsupported_method,
    ignored_auth,
    allow_header_conformance,
    positive_data_acceptance,
]
# Every check schemathesis has but max_response_time: a timing, never asserted here.
NAMED_FIELD_STATUSES = (400, 413, 415, 422)


def error_shape_problem(response) -> str | None:
    """Why a 4xx response is not our JSON error naming the field, or None."""
    content_type = (response.headers.get("content-type") or [""])[0]  # schemathesis: lowercase names, lists of values
    if not content_type.startswith("application/json"):
        return f"not JSON: {content_type!r}"
    try:
        body = response.json()
        error = body["error"]
        if set(body) != {"error"} or not {"code", "message", "field"} <= set(error):
            return f"not an error envelope: {body!r}"
        if not (isinstance(error["code"], str) and error["code"] and isinstance(error["message"], str) and error["message"]):
            return f"code and message must be strings: {error!r}"
        if error["field"] is not None and not isinstance(error["field"], str):
            return f"field must be a string or null: {error!r}"
    except (ValueError, KeyError, TypeError) as exc:
        return f"not an error envelope ({exc!r}): {response.text[:200]!r}"
    if response.status_code in NAMED_FIELD_STATUSES and not error["field"]:
        return f"a {response.status_code} must name the field: {error!r}"
    return None


def named_field(response) -> str:
    """``, field X`` for an error answer naming a field, so that distinct refusals are reported apart."""
    try:
        return f", field {response.json()['error']['field']}"
    except (ValueError, KeyError, TypeError):
        return ""


def seed(session, url: str, headers: dict[str, str]) -> dict[str, str]:
    """Memories, entities, a relation and an edge to aim the path parameters at."""

    def send(method: str, path: str, body: dict) -> dict:
        response = session.request(method, url + path, json=body, headers=headers, timeout=30)
        assert response.status_code in (200, 201), response.text
        return response.json()

    added = send(
        "POST",
        "/v1/memories",
        {"memories": [{"memory": "Ada keeps bees in Lisbon", "key": "bees"}, {"memory": "Ada keeps bees in Porto", "key": "bees"}, {"memory": "Grace writes compilers"}]},
    )
    ids = added["memory_ids"]
    send("PUT", "/v1/entities/ada", {"name": "Ada", "aliases": ["Ada L"], "tags": ["beekeeper"]})
    send("PUT", "/v1/entities/grace", {"name": "Grace"})
    send("POST", "/v1/entities/ada/relations", {"target_id": "grace", "relation_type": "knows", "weight": 0.5})
    send("POST", "/v1/edges", {"source": ids[0], "target": ids[2], "edge_id": "user:seed:1"})
    return {"memory": ids[0], "entity": "ada", "edge_id": "user:seed:1"}


def existing(operation, seeded: dict[str, str]) -> dict[str, str] | None:
    names = {p.name for p in operation.path_parameters}
    if not names:
        return None
    return {name: seeded["edge_id"] if name == "edge_id" else seeded["entity" if "/entities/" in operation.path else "memory"] for name in names}


@contextmanager
def keyed_server(tmp_path):
    """A real ``mnemolog serve`` with auth on and the organizer off, and the headers of a key made for it."""
    data_dir = tmp_path / "data"
    headers = {"Authorization": f"Bearer {create_key(data_dir)}"}
    with serve(data_dir, tmp_path / "serve.log", auth="on", organizer_enabled="off", synchronous="NORMAL") as server:
        yield server, headers


def sent_headers(case, headers: dict[str, str]) -> dict[str, str]:
    """The key's headers, or none when the case's invalid part is its own ``Authorization``.

    Schemathesis makes a case negative by breaking the bearer header, the one
    header the document declares; sending the key over it would turn that
    case back into a valid request. Such a case keeps its broken header, and
    the server must refuse it (401, as JSON).
    """
    meta = getattr(case, "meta", None)
    component = meta.components.get(ParameterLocation.HEADER) if meta is not None else None
    return {} if component is not None and not component.mode.is_positive else headers


def response_problems(case, response, headers, *, check_schema: bool = True) -> list[str]:
    """What is wrong with ``response``: a 4xx not shaped as our JSON error, and (``check_schema``) every failed check."""
    problems = []
    if 400 <= response.status_code < 500 and (problem := error_shape_problem(response)):
        problems.append(problem)
    if check_schema:
        try:
            case.validate_response(response, checks=CHECKS, headers=headers)
        except BaseException as exc:  # schemathesis raises an exception group of its failures
            problems += [f"{str(e).splitlines()[0]} ({response.status_code}{named_field(response)})" for e in getattr(exc, "exceptions", [exc])]
    return problems


@pytest.mark.slow
def test_fuzzing_the_openapi_document_finds_no_server_error_and_only_json_errors(tmp_path):
    with keyed_server(tmp_path) as (server, headers):
        schema = schemathesis.openapi.from_url(server.url + "/openapi.json", timeout=30)
        session = requests.Session()  # no key of its own: each case is sent with the headers sent_headers() picks
        seeded = seed(session, server.url, headers)
        failures: dict[tuple[str, str], list[str]] = defaultdict(list)
        tried = 0
        operations = 0
        began = time.monotonic()
        for result in schema.get_all_operations():
            operation = result.ok()
            if operation.path in SKIPPED:
                continue
            operations += 1
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                real = existing(operation, seeded)
                for path_parameters in [None] + ([real] if real else []):

                    @given(case=operation.as_strategy(generation_mode=mode, path_parameters=path_parameters))
                    @settings(
                        max_examples=EXAMPLES,
                        deadline=None,
                        database=None,
                        derandomize=True,
                        phases=[Phase.explicit, Phase.generate],
                        suppress_health_check=list(HealthCheck),
                    )
                    def attempt(case) -> None:
                        nonlocal tried
                        tried += 1
                        if breaks_a_rule_across_fields(case) or arrives_valid(case):  # (a "negative" case may come out valid: its mode is not trusted)
                            return
                        sent = sent_headers(case, headers)
                        response = case.call(base_url=server.url, session=session, headers=sent, timeout=60)
                        for problem in response_problems(case, response, sent):
                            failures[(operation.label, problem)].append(f"{response.status_code} {response.text[:300]}\n    {case.as_curl_command(headers=sent)[:600]}")

                    try:
                        attempt()
                    except Unsatisfiable:  # nothing to make invalid (no parameters, no body)
                        pass
        seconds = time.monotonic() - began
        log = server.log_tail(5000)
    print(f"schemathesis: {tried} requests over {operations} operations in {seconds:.1f} s")
    assert operations >= 30 and tried >= operations * EXAMPLES
    report = [f"{label}: {problem} ({len(seen)}x), e.g. {seen[0]}" for (label, problem), seen in sorted(failures.items())]
    assert not report, "\n".join(report) + f"\nserver log:\n{log}"


STATEFUL_SCENARIOS = 10
STATEFUL_STEPS = 8


@pytest.mark.slow
def test_stateful_runs_over_the_documents_links_find_nothing(tmp_path):
    """Schemathesis' state machine follows the links: ids made by one call are used by the next, with every check."""
    with keyed_server(tmp_path) as (server, headers):
        schema = schemathesis.openapi.from_url(server.url + "/openapi.json", timeout=30).exclude(path=list(SKIPPED))
        document = requests.get(server.url + "/openapi.json", timeout=30).json()
        links = sum(len(answer.get("links", {})) for item in document["paths"].values() for op in item.values() for answer in op["responses"].values())
        session = requests.Session()
        failures: dict[str, list[str]] = defaultdict(list)
        steps = 0

        class Stateful(schema.as_state_machine()):
            def get_call_kwargs(self, case):
                return {"base_url": server.url, "session": session, "headers": sent_headers(case, headers), "timeout": 60}

            def validate_response(self, response, case, additional_checks=None, **kwargs):
                nonlocal steps
                steps += 1
                for problem in response_problems(case, response, sent_headers(case, headers), check_schema=not (breaks_a_rule_across_fields(case) or arrives_valid(case))):
                    failures[f"{case.method} {case.path}: {problem}"].append(f"{response.status_code} {response.text[:300]}")

        run_state_machine_as_test(
            Stateful,
            settings=settings(
                max_examples=STATEFUL_SCENARIOS,
                stateful_step_count=STATEFUL_STEPS,
                deadline=None,
                database=None,
                derandomize=True,
                suppress_health_check=list(HealthCheck),
            ),
        )
        log = server.log_tail(5000)
    print(f"schemathesis stateful: {steps} calls over {links} links")
    assert links >= 20 and steps >= STATEFUL_SCENARIOS
    report = [f"{label} ({len(seen)}x), e.g. {seen[0]}" for label, seen in sorted(failures.items())]
    assert not report, "\n".join(report) + f"\nserver log:\n{log}"


def _negative_form(body: dict):
    """A stand-in for a schemathesis case labelled invalid, whose body is the import's multipart form."""
    from types import SimpleNamespace

    from mnemolog.api.app import ROUTES
    from mnemolog.api.openapi import openapi_document

    form = openapi_document(ROUTES, "test")["paths"]["/v1/import/documents"]["post"]["requestBody"]["content"]["multipart/form-data"]
    operation = SimpleNamespace(get_body_for_media_type=lambda media_type: SimpleNamespace(definition=form))
    meta = SimpleNamespace(generation=SimpleNamespace(mode=GenerationMode.NEGATIVE))
    return SimpleNamespace(meta=meta, media_type="multipart/form-data", body=body, operation=operation)


@pytest.mark.parametrize(
    "body, valid",
    [
        ({"file": [b"x"], "lang": True}, True),  # sent as the text "true"
        ({"file": [b"x"], "collection": [None]}, True),  # one part: the text "null"
        ({"file": [b"x"], "model": []}, True),  # no part at all
        ({"file": [b"x"], "doc_id": ["a", "b"]}, False),  # a field given twice
        ({"file": [], "lang": "en"}, False),  # no file
        ({"file": [b"x"], "doc_id": "../up"}, False),  # not an id
        ({"file": [b"x"], "colour": "red"}, False),  # not a field
    ],
)
def test_a_form_labelled_invalid_is_judged_as_it_is_sent(body, valid):
    assert bool(arrives_valid(_negative_form(body))) is valid


@pytest.mark.parametrize("path", ["/v1/recall", "/v1/search"])
@pytest.mark.parametrize(
    "body",
    [
        {"query": "x", "strategy": "graph-only", "channels": ["lexical", "semantic"]},
        {"query": "x", "strategy": "graph-only", "weights": {"graph": 0}},
        {"query": "x", "strategy": "graph-only", "weights": {"lexical": 0.5}},
        {"query": "x", "channels": ["lexical"], "weights": {"graph": 0.5}},
    ],
)
async def test_the_hooks_skip_what_the_server_refuses_across_fields(api, path, body):
    """Found by ``schemathesis run``: /v1/search refuses graph-only with another channel as /v1/recall does, and the hook skipped it for recall only."""
    from types import SimpleNamespace

    response = await api.raw.post(path, json=body)
    assert response.status == 422, await response.text()
    case = SimpleNamespace(path=path, method="POST", body=body, query={}, path_parameters={})
    assert breaks_a_rule_across_fields(case)
