"""Time travel over real HTTP: a memory's history (its versions, what each changed, a page at a time) and
``as_of`` times at the ends of the calendar, in any offset and in RFC 3339's spellings."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from mnemolog.api.client import ApiError


async def test_as_of_a_time_at_the_ends_of_the_calendar(api, client):
    """A time before year 1000, or one before year 1 only in UTC, is before every event: read as of it, the
    memory was not written yet (a time to come is refused: see test_reads' ISO-time test)."""
    [memory_id] = (await client.add_memories({"memory": "The lease ends in May"})).memory_ids
    for before in ("0999-01-01", "0001-01-01T00:00:00Z", "0001-01-01T00:30:00+01:00"):
        for path in (f"/v1/memories/{memory_id}", f"/v1/memories/{memory_id}/history"):
            answer = await api.raw.get(path, params={"as_of": before})
            assert answer.status == 404 and (await answer.json())["error"]["code"] == "not_found", (path, before, await answer.text())
    # RFC 3339 takes a lowercase t and z too.
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dt%H:%M:%S.%fz")
    assert (await client.get_memory(memory_id, as_of=now))["memory"] == "The lease ends in May"
    answer = await api.raw.get(f"/v1/memories/{memory_id}", params={"as_of": "2001-01-01t00:00:00.5z"})
    assert answer.status == 404, await answer.text()


async def test_history_lists_every_version(client):
    first = await client.add_memories({"memory": "v1 text", "tags": ["a"]}, correlation_id="hist-1")
    [memory_id] = first.memory_ids
    await client.update_memory(memory_id, {"memory": "v2 text", "reason": "typo"})
    await client.archive_memory(memory_id, reason="old")
    await client.rollback_memory(memory_id, 1)
    body = await client.memory_history(memory_id)
    assert body["memory_id"] == memory_id
    versions = body["versions"]
    assert [v["version"] for v in versions] == [1, 2, 3, 4]
    assert [v["event_type"] for v in versions] == ["MemoryAdded", "MemoryUpdated", "MemoryArchived", "MemoryRolledBack"]
    assert [v["memory"] for v in versions] == ["v1 text", "v2 text", "v2 text", "v1 text"]
    assert [v["status"] for v in versions] == ["activated", "activated", "archived", "activated"]
    assert versions[0]["correlation_id"] == "hist-1"
    assert versions[1]["reason"] == "typo"
    assert versions[0]["position"] == first.positions[0]
    assert all(v["position"] < w["position"] for v, w in zip(versions, versions[1:]))
    # Each version's time is its event's, spelled as the log and every other answer spell it (UTC, "Z"; it read "+00:00").
    stamps = {e["position"]: e["recorded_at"] for e in (await client.list_events(after=versions[0]["position"] - 1))["events"]}
    assert [v["recorded_at"] for v in versions] == [stamps[v["position"]] for v in versions]
    assert all(v["recorded_at"].endswith("Z") for v in versions)
    with pytest.raises(ApiError) as err:
        await client.memory_history("no-such-memory")
    assert err.value.status == 404


async def test_history_shows_what_each_version_changed_metadata_too(client):
    """A change of metadata only (confidence, properties, sources, background, document fields) shows its
    values and names the fields, even under a reason of the caller's; a status change names the status."""
    [memory_id] = (await client.add_memories({"memory": "Dr. Šimić moved to 東京", "confidence": 0.5, "sources": ["chat"]})).memory_ids
    await client.update_memory(memory_id, {"confidence": 0.9, "properties": {"checked": True}, "reason": "verified by phone"})
    await client.update_memory(memory_id, {"background": "long " * 5000, "lang": "hr", "sources": ["chat", "call"]})
    await client.archive_memory(memory_id)
    await client.rollback_memory(memory_id, 1)
    versions = (await client.memory_history(memory_id))["versions"]
    assert [v["changed"] for v in versions] == [
        [], ["confidence", "properties"], ["sources", "background", "lang"], ["status"], ["sources", "background", "confidence", "lang", "properties", "status"],
    ]
    assert versions[1]["reason"] == "verified by phone" and versions[1]["memory"] == versions[0]["memory"]
    assert [v["confidence"] for v in versions] == [0.5, 0.9, 0.9, 0.9, 0.5]
    assert [v["properties"] for v in versions] == [{}, {"checked": True}, {"checked": True}, {"checked": True}, {}]
    assert versions[2]["background"] == "long " * 5000 and versions[2]["metadata"] == {"lang": "hr"} and versions[2]["sources"] == ["chat", "call"]
    assert versions[4]["background"] is None and versions[4]["metadata"] == {} and versions[4]["memory_type"] == "LongTermMemory"
    assert not any(v["has_embedding"] for v in versions)


async def test_history_pages_by_version(api, client):
    """A memory changed thousands of times (each version with up to 100,000 characters) is read a page at a
    time: after a version, at most limit versions, and where the next page starts."""
    [memory_id] = (await client.add_memories({"memory": "count 0"})).memory_ids
    for n in range(1, 7):
        await client.update_memory(memory_id, {"memory": f"count {n}"})
    whole = await client.memory_history(memory_id)
    assert [v["version"] for v in whole["versions"]] == [1, 2, 3, 4, 5, 6, 7] and whole["more"] is False and whole["next_after"] == 7
    seen, after = [], 0
    while True:
        page = await client.memory_history(memory_id, after=after, limit=3)
        seen += [v["version"] for v in page["versions"]]
        after = page["next_after"]
        if not page["more"]:
            break
    assert seen == [1, 2, 3, 4, 5, 6, 7]
    then = await client.memory_history(memory_id, as_of=whole["versions"][3]["position"], after=2, limit=5)
    assert [v["version"] for v in then["versions"]] == [3, 4] and then["more"] is False
    assert (await client.memory_history(memory_id, after=7))["versions"] == []
    for params, field in (({"limit": "0"}, "limit"), ({"limit": "1001"}, "limit"), ({"after": "-1"}, "after"), ({"after": "x"}, "after")):
        answer = await api.raw.get(f"/v1/memories/{memory_id}/history", params=params)
        assert answer.status == 422 and (await answer.json())["error"]["field"] == field, params
