"""Recall's and search's time filters (``created_from``/``_to``, ``updated_from``/``_to``) take any ISO-8601 time the
schema allows and compare it as a time: a memory created within a second or a minute that a bound names is on the
side of the bound its moment is, whatever the bound's precision or its ``Z``."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest


def _moment(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _bounds(created: datetime) -> list[tuple[dict[str, str], bool]]:
    """Bounds around ``created`` in each form the schema takes, and whether a memory created then passes each."""
    second = created.replace(microsecond=0)
    minute = second.replace(second=0)
    after = second + timedelta(seconds=1)
    return [
        ({"created_from": f"{second:%Y-%m-%dT%H:%M:%S}Z"}, True),
        ({"created_from": f"{minute:%Y-%m-%dT%H:%M}Z"}, True),
        ({"created_from": f"{after:%Y-%m-%dT%H:%M:%S}Z"}, False),
        ({"created_to": f"{second:%Y-%m-%dT%H:%M:%S}Z"}, False),
        ({"created_to": f"{minute:%Y-%m-%dT%H:%M}Z"}, False),
        ({"created_to": f"{after:%Y-%m-%dT%H:%M:%S}Z"}, True),
        ({"updated_from": f"{second:%Y-%m-%dT%H:%M:%S.%f}Z"}, True),
        ({"updated_to": f"{minute + timedelta(minutes=1):%Y-%m-%dT%H:%M}"}, True),
    ]


async def test_a_time_bound_with_its_z_or_without_seconds_is_compared_as_a_time(client):
    """``created_from: "…T16:23:26Z"`` left out every memory created at 16:23:26.06, and ``created_to`` of the same
    second kept them: the bound was compared as text with the stored ``…T16:23:26.060724Z``, where "Z" sorts after
    the ".", and a bound of minutes ("…T16:23Z") after every second of that minute."""
    written = await client.add_memories(memories=[{"memory": "the lighthouse keeper logs the tide"}, {"memory": "the tide turns at noon"}])
    created = _moment((await client.get_memory(written.memory_ids[0]))["created_at"])
    for bound, passes in _bounds(created):
        for read in (client.recall, client.search):
            found = await read("tide", filters=bound, limit=10, min_position=written.positions[-1])
            ranked = found["hits"] if "hits" in found else found["channels"]["lexical"]
            assert sorted(h["id"] for h in ranked) == (sorted(written.memory_ids) if passes else []), (bound, read.__name__)


@pytest.mark.parametrize("path", ["/v1/recall", "/v1/search"])
@pytest.mark.parametrize("field,value", [("created_from", "2026-02-30"), ("created_to", "2026-01-01T25:00"), ("updated_from", "2026-01-01T10:61:00Z")])
async def test_a_time_bound_that_names_no_time_is_422_naming_it(api, path, field, value):
    """The schema's pattern let a 30 February or a 25th hour through, and the filter compared it as text."""
    answer = await api.raw.post(path, json={"query": "tide", "filters": {field: value}})
    assert answer.status == 422, await answer.text()
    assert (await answer.json())["error"]["field"] == f"filters.{field}"


@pytest.mark.parametrize("path", ["/v1/recall", "/v1/search"])
@pytest.mark.parametrize("prefix", ["created", "updated"])
@pytest.mark.parametrize("begins,ends", [("2026-05-02", "2026-05-01T23:59:59Z"), ("2026-05-01T10:00Z", "2026-05-01T10:00:00.000000Z")])
async def test_a_time_range_that_ends_before_it_starts_is_422_naming_its_end(api, path, prefix, begins, ends):
    """Bounds given the wrong way round (or a range ending where it starts: ``_to`` is exclusive) held no memory,
    and the answer said nothing of why: no hits, as if none matched."""
    filters = {f"{prefix}_from": begins, f"{prefix}_to": ends}
    answer = await api.raw.post(path, json={"query": "tide", "filters": filters})
    assert answer.status == 422, await answer.text()
    assert (await answer.json())["error"]["field"] == f"filters.{prefix}_to"
