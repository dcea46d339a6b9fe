"""A 422 names the field at fault by its dotted path, a dict's key included; a body that is not JSON is a 400 first.

msgspec tells a dict's value at fault as ``$.properties[...]`` and a key at
fault as ``at `key` in `$.properties```, and stops at the first error it
meets, an unknown field before a syntax error. The server names the key
itself (``properties.a``, as the 409 names ``expected_versions.<id>``; a key
holding a dot or a bracket as ``properties["a.b"]``) and checks a body that
breaks its type as JSON before it answers 422.
"""

from __future__ import annotations

import json

from .test_errors import call, each

#: An integer that no JSON decoder of the server holds: msgspec refuses it as out of range, wherever it is.
HUGE = "9" * 5000


class Body(bytes):
    """A request body, shown in a failure with ``HUGE`` cut short."""

    def __repr__(self) -> str:
        return super().__repr__().replace(HUGE, "9...9")


def body(text: str) -> Body:
    return Body(text.encode())


def memory_with(properties: str) -> Body:
    """A body adding one memory whose ``properties`` are the JSON text given (so that it may hold ``HUGE``)."""
    return body(f'{{"memory": {{"memory": "x", "properties": {properties}}}}}')


JSON = {"Content-Type": "application/json"}


async def test_a_key_a_dict_does_not_take_is_422_naming_the_dict(api):
    await call(api, "PUT", "/v1/entities/org:e", json={"name": "E", "properties": {"": "x"}}, status=422, field="properties", code="invalid")
    await call(api, "PUT", "/v1/entities/org:e", json={"name": "E", "properties": {"ok": "x", "k" * 101: "x"}}, status=422, field="properties")
    assert (await api.raw.get("/v1/entities/org:e")).status == 404  # nothing written


async def test_a_value_a_dict_does_not_take_is_422_naming_its_key(api):
    async def check(method, path, sent, field):
        data = sent if isinstance(sent, bytes) else json.dumps(sent).encode()
        await call(api, method, path, data=data, headers=JSON, status=422, field=field, code="invalid")

    await each(
        [
            ("POST", "/v1/memories", memory_with(f'{{"a": {HUGE}}}'), "memory.properties.a"),
            ("POST", "/v1/memories", memory_with(f'{{"a": 1, "b": "two", "c": {HUGE}, "d": 4}}'), "memory.properties.c"),
            ("POST", "/v1/memories", memory_with(f'{{"a": 1, "b": {HUGE}, "c": {HUGE}}}'), "memory.properties.b"),  # the first at fault
            ("POST", "/v1/memories", memory_with(f'{{"z": 1, "y": {{"q": [1, {{"r": 2, "s": {HUGE}}}]}}}}'), "memory.properties.y.q[1].s"),
            (
                "POST",
                "/v1/memories",
                body(f'{{"memories": [{{"memory": "x"}}, {{"memory": "y", "properties": {{"a": 1, "b": {HUGE}}}}}]}}'),
                "memories[1].properties.b",
            ),
            ("PUT", "/v1/entities/x", {"name": "X", "properties": {"a": 5}}, "properties.a"),
            ("PUT", "/v1/entities/x", {"name": "X", "properties": {"a": "ok", "b": "ok", "c": 5, "d": "ok"}}, "properties.c"),
            ("PUT", "/v1/entities/x", {"name": "X", "properties": {"a": "ok", "b": "x" * 2001}}, "properties.b"),
        ],
        check,
    )
    assert api.service.store.last_position() == 0


async def test_the_key_at_fault_is_found_among_many(api):
    many = {f"k{i}": i for i in range(3000)}
    text = json.dumps(many).replace('"k1234": 1234', f'"k1234": {HUGE}')
    await call(api, "POST", "/v1/memories", data=memory_with(text), headers=JSON, status=422, field="memory.properties.k1234")
    late = json.dumps(many)[:-1] + f', "last": {HUGE}}}'
    await call(api, "POST", "/v1/memories", data=memory_with(late), headers=JSON, status=422, field="memory.properties.last")


async def test_an_expected_version_out_of_range_is_422_named_as_the_409_names_it(api):
    status_added = await api.raw.post("/v1/memories", json={"memories": [{"memory": "tea"}, {"memory": "green tea"}]})
    a, b = (await status_added.json())["memory_ids"]
    await api.raw.patch(f"/v1/memories/{b}", json={"memory": "green tea, hot"})  # b at version 2 now
    conflict = await call(api, "POST", "/v1/memories/merge", json={"memory_ids": [a, b], "expected_versions": {a: 1, b: 1}}, status=409)
    assert conflict["error"]["field"] == f"expected_versions.{b}"
    for versions in ({b: 0}, {a: 1, b: 0}, {a: 1, b: -3}, {a: 1.0, b: 0}):
        await call(api, "POST", "/v1/memories/merge", json={"memory_ids": [a, b], "expected_versions": versions}, status=422, field=f"expected_versions.{b}")


async def test_a_key_that_would_read_as_more_than_one_step_is_named_as_a_json_string(api):
    async def check(sent, field):
        await call(api, "POST", "/v1/memories", data=sent, headers=JSON, status=422, field=field, code="invalid")

    await each(
        [
            (memory_with(f'{{"a": 1, "a.b": {HUGE}}}'), 'memory.properties["a.b"]'),
            (memory_with(f'{{"a": 1, "x[0]": {HUGE}}}'), 'memory.properties["x[0]"]'),
            (memory_with(f'{{"a": 1, "say \\"hi\\"": {HUGE}}}'), 'memory.properties["say \\"hi\\""]'),
            (memory_with(f'{{"a": 1, "": {HUGE}}}'), 'memory.properties[""]'),
            (memory_with(f'{{"a": 1, "caf\u00e9 au lait": {HUGE}}}'), "memory.properties.caf\u00e9 au lait"),
            (b'{"memory": {"memory": "x", "a.b": 1}}', 'memory["a.b"]'),
        ],
        check,
    )
    await call(api, "PUT", "/v1/entities/x", json={"name": "X", "properties": {"ok": "y", "v1.2": 3}}, status=422, field='properties["v1.2"]')


async def test_a_body_that_is_not_json_is_400_though_it_breaks_the_type_first(api, client):
    memory_id = (await client.add_memories({"memory": "an existing memory"})).memory_ids[0]

    async def check(method, path, sent):
        await call(api, method, path, data=sent, headers=JSON, status=400, field="body", code="malformed_json")

    await each(
        [
            ("POST", "/v1/memories", b'{"a":'),
            ("POST", "/v1/memories", b'{"a": 1}}'),
            ("POST", "/v1/memories", b'{"memory": {"memory": "x"}, "extra": 1, "more": tru}'),
            ("POST", "/v1/memories", b'{"memory": {"memory": 3}, "x": [1,,2]}'),
            ("POST", "/v1/memories", b'{"memory": {"memory": "x", "tags": "t"}, "x": "\xff"}'),  # not UTF-8
            ("POST", "/v1/memories", memory_with(f'{{"a": {HUGE}, }}')),  # a number out of range, then a trailing comma
            ("POST", "/v1/memories/merge", b'{"memory_ids": ["a", "b"], "expected_versions": {"a": 0}'),
            ("PUT", "/v1/entities/org:e", b'{"name": "E", "properties": {"": "x"}, "aliases": [}'),
            ("PATCH", f"/v1/memories/{memory_id}", b'{"colour": "red", '),
            ("POST", "/v1/recall", b'{"query": "x", "limit": 0'),
        ],
        check,
    )
    # Valid JSON that breaks the type stays a 422 naming the field.
    await call(api, "POST", "/v1/memories", data=b'{"a": 1}', headers=JSON, status=422, field="a")
    await call(api, "POST", "/v1/memories", data=memory_with(f'{{"a": {HUGE}}}'), headers=JSON, status=422, field="memory.properties.a")


async def test_an_empty_channels_list_is_422_naming_channels(api):
    """``"channels": []`` would run no channel; it was read as "the default channels", the opposite of what it says."""
    for path in ("/v1/recall", "/v1/search"):
        await call(api, "POST", path, json={"query": "harbour", "channels": []}, status=422, field="channels", code="invalid")
