"""Random request bodies and query strings (hypothesis) on every route never yield a 5xx: an error is JSON
naming what was wrong (the fixed cases: test_errors; schemathesis over the OpenAPI document: test_fuzz)."""

from __future__ import annotations

import json
import typing

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemolog.api.app import ROUTES

from .test_errors import assert_error_body


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
    st.sampled_from(["", "x", "activated", "RELATED", "user:a:1", "mem:", "LongTermMemory", "2024-01-01T00:00:00Z", "0", "99999999999999999999"]),
)
_json = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4), max_leaves=12)


def _struct_fields(kind) -> dict[str, typing.Any]:
    info = msgspec.inspect.type_info(kind)
    return {f.name: f.type for f in info.fields} if isinstance(info, msgspec.inspect.StructType) else {}


def _shaped(kind, depth: int = 0) -> st.SearchStrategy:
    """Objects with the request Struct's own field names (and nested Structs'), holding random JSON."""
    fields = _struct_fields(kind)
    if not fields or depth > 2:
        return _json
    values = {}
    for name, info in fields.items():
        nested = [t.cls for t in getattr(info, "types", (info,)) if isinstance(t, msgspec.inspect.StructType)]
        if isinstance(info, msgspec.inspect.StructType):
            nested.append(info.cls)
        items = [t.item_type.cls for t in getattr(info, "types", (info,)) if isinstance(t, msgspec.inspect.ListType) and isinstance(t.item_type, msgspec.inspect.StructType)]
        if nested:
            values[name] = _shaped(nested[0], depth + 1) | _json
        elif items:
            values[name] = st.lists(_shaped(items[0], depth + 1), max_size=3) | _json
        else:
            values[name] = _json
    return st.fixed_dictionaries({}, optional=values) | st.fixed_dictionaries({}, optional={**values, "unexpected": _json})


def _body_routes():
    from mnemolog.api.app import create_app  # noqa: F401 - importing the app registers every route module

    return sorted({(r.method, r.path, r.request) for r in ROUTES if r.method in ("POST", "PATCH", "PUT", "DELETE")}, key=lambda t: (t[1], t[0]))


@st.composite
def _requests(draw, memory_id_holder):
    method, path, kind = draw(st.sampled_from(memory_id_holder["routes"]))
    target = draw(st.sampled_from([memory_id_holder["id"], "ghost", "x" * 300, "%00", "..%2F"]))
    body = draw(_shaped(kind) if kind is not None else _json)
    headers = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "If-Match": st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=255, blacklist_categories=("Cc",)), max_size=8),
                "Idempotency-Key": st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=10),
                "X-Correlation-Id": st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126), max_size=10),
            },
        )
    )
    return method, path.replace("{id}", target).replace("{edge_id}", target), body, headers


_context: dict = {}


@settings(max_examples=250, deadline=None, database=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
async def test_fuzz_random_bodies_never_yield_a_5xx(api, memory_id, data):
    if _context.get("api") is not api:
        _context.update(api=api, id=memory_id, routes=_body_routes())
    method, path, body, headers = data.draw(_requests(_context))
    response = await api.raw.request(method, path, data=msgspec.json.encode(body), headers={"Content-Type": "application/json", **headers})
    text = await response.text()
    assert response.status < 500, (method, path, body, headers, response.status, text)
    if response.status >= 400:
        assert_error_body(json.loads(text), response.status)


_query_values = st.one_of(
    st.text(max_size=12),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from(["", "0", "1", "abc", "both", "in", "out", "2024-01-01T00:00:00Z", "\u00b2", "9" * 30, "1:" + "a" * 64]),
)


@settings(max_examples=150, deadline=None, database=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
async def test_fuzz_random_query_strings_never_yield_a_5xx(api, memory_id, data):
    routes = sorted({(r.path, r.query) for r in ROUTES if r.method == "GET" and r.path != "/v1/events/stream"})
    path, declared = data.draw(st.sampled_from(routes))
    names = [name for name, *_ in declared] + ["node", "as_of", "x"]
    params = data.draw(st.lists(st.tuples(st.sampled_from(names), _query_values), max_size=4))
    target = data.draw(st.sampled_from([memory_id, "ghost"]))
    response = await api.raw.get(path.replace("{id}", target), params=params)
    text = await response.text()
    assert response.status < 500, (path, params, response.status, text)
    if response.status >= 400:
        assert_error_body(json.loads(text), response.status)
