"""Every write endpoint over real HTTP: positions, If-Match, read-your-writes and Idempotency-Key."""

from __future__ import annotations

import pytest

from mnemolog.api.client import ApiError


async def add(client, text: str, **fields) -> str:
    written = await client.add_memories({"memory": text, **fields})
    assert written.memory_ids
    return written.memory_ids[0]


def assert_positions(written, *, at_least: int = 1) -> None:
    assert len(written.positions) >= at_least, written
    assert all(isinstance(p, int) and p > 0 for p in written.positions)
    assert written.positions == sorted(written.positions)
    assert written.positions == list(range(written.positions[0], written.positions[-1] + 1))  # one contiguous batch
    assert written.correlation_id
    assert written.replayed is False


async def head(client) -> int:
    return (await client.digest())["position"]


# -- add -------------------------------------------------------------------------------


async def test_add_single_returns_positions_and_the_memory_reads_back(client):
    written = await client.add_memories({"memory": "I moved to Lisbon in May", "key": "home city", "tags": ["Move"]})
    assert_positions(written)
    assert written.positions[-1] == await head(client)
    [memory_id] = written.memory_ids
    view = await client.get_memory(memory_id)
    assert view["memory"] == "I moved to Lisbon in May"
    assert view["key"] == "home city"
    assert view["version"] == 1
    assert view["status"] == "activated"


async def test_add_batch_is_one_atomic_write_with_one_position_per_memory(client):
    texts = ["Alice likes green tea", "Bob plays chess on Sundays", "Carol collects vinyl records"]
    written = await client.add_memories(memories=[{"memory": t, "memory_type": "LongTermMemory"} for t in texts])
    assert_positions(written, at_least=3)
    assert len(written.memory_ids) == 3
    assert len(set(written.memory_ids)) == 3
    for memory_id, text in zip(written.memory_ids, texts):
        assert (await client.get_memory(memory_id))["memory"] == text
    # The whole batch shares one correlation id in the log.
    page = await client.list_events(correlation_id=written.correlation_id)
    assert [e["position"] for e in page["events"]] == written.positions


async def test_an_invalid_item_rejects_the_whole_batch(client):
    before = await head(client)
    with pytest.raises(ApiError) as err:
        await client.add_memories(memories=[{"memory": "fine"}, {"memory": "bad tags", "tags": ["has space"]}])
    assert err.value.status == 422
    assert err.value.field and err.value.field.startswith("memories[1].tags")
    assert await head(client) == before


# -- read your writes ----------------------------------------------------------------------


async def test_recall_with_min_position_reads_the_clients_own_write(client):
    written = await client.add_memories({"memory": "The ferry to Cacilhas leaves every twenty minutes"})
    found = await client.recall("ferry Cacilhas", min_position=written.positions[-1])
    assert found["position"] >= written.positions[-1]
    assert [h["id"] for h in found["hits"]][:1] == written.memory_ids


async def test_min_position_beyond_the_head_is_refused(client):
    written = await client.add_memories({"memory": "something to have a head"})
    with pytest.raises(ApiError) as err:
        await client.recall("something", min_position=written.positions[-1] + 1000)
    assert err.value.status == 409 and err.value.code == "beyond_head" and err.value.field == "min_position"


async def test_read_your_writes_after_an_update(client):
    memory_id = await add(client, "My favourite colour is blue")
    updated = await client.update_memory(memory_id, {"memory": "My favourite colour is turquoise"})
    found = await client.recall("turquoise colour", min_position=updated.positions[-1])
    hit = next(h for h in found["hits"] if h["id"] == memory_id)
    assert hit["memory"]["memory"] == "My favourite colour is turquoise"
    assert hit["memory"]["version"] == 2


# -- update and If-Match -------------------------------------------------------------------


async def test_update_with_matching_if_match_makes_a_new_version(client):
    memory_id = await add(client, "The meeting is on Tuesday")
    written = await client.update_memory(memory_id, {"memory": "The meeting is on Wednesday", "reason": "moved"}, expected_version=1)
    assert_positions(written)
    assert written.data["version"] == 2
    assert written.data["changed"] == ["memory"]
    view = await client.get_memory(memory_id)
    assert view["version"] == 2 and view["memory"] == "The meeting is on Wednesday"


async def test_update_with_a_stale_if_match_is_409_with_the_current_version(client):
    memory_id = await add(client, "Version one")
    await client.update_memory(memory_id, {"memory": "Version two"})
    before = await head(client)
    with pytest.raises(ApiError) as err:
        await client.update_memory(memory_id, {"memory": "Version three?"}, expected_version=1)
    assert err.value.status == 409
    assert (err.value.body["error"]["field"], err.value.body["error"]["current_version"]) == ("If-Match", 2)
    assert await head(client) == before
    assert (await client.get_memory(memory_id))["memory"] == "Version two"


async def test_if_match_accepts_an_etag_from_get(api, client):
    memory_id = await add(client, "Etag round trip")
    response = await api.raw.get(f"/v1/memories/{memory_id}")
    etag = response.headers["ETag"]
    assert etag == '"1"'
    response = await api.raw.patch(f"/v1/memories/{memory_id}", json={"tags": ["etag"]}, headers={"If-Match": etag})
    assert response.status == 200, await response.text()
    response = await api.raw.patch(f"/v1/memories/{memory_id}", json={"tags": ["again"]}, headers={"If-Match": etag})
    assert response.status == 409
    assert (await response.json())["error"]["current_version"] == 2


async def test_if_match_on_archive_and_rollback(client):
    memory_id = await add(client, "Guarded")
    await client.update_memory(memory_id, {"memory": "Guarded twice"})
    with pytest.raises(ApiError) as err:
        await client.archive_memory(memory_id, expected_version=1)
    assert err.value.status == 409 and err.value.body["error"]["current_version"] == 2
    assert err.value.body["error"]["field"] == "If-Match"
    with pytest.raises(ApiError) as err:
        await client.rollback_memory(memory_id, 1, expected_version=1)
    assert err.value.status == 409 and err.value.body["error"]["current_version"] == 2
    assert_positions(await client.archive_memory(memory_id, expected_version=2))
    with pytest.raises(ApiError) as err:  # at the version named: the state refuses it, not the version
        await client.archive_memory(memory_id, expected_version=3)
    assert (err.value.status, err.value.body["error"]["field"]) == (409, None)


async def test_concurrent_updates_with_one_if_match_let_exactly_one_win(api, client):
    import asyncio

    memory_id = await add(client, "Contended")
    others = [api.client() for _ in range(4)]
    results = await asyncio.gather(
        *(c.update_memory(memory_id, {"memory": f"Contended by writer {n}"}, expected_version=1) for n, c in enumerate(others)), return_exceptions=True
    )
    won = [r for r in results if not isinstance(r, BaseException)]
    lost = [r for r in results if isinstance(r, BaseException)]
    assert len(won) == 1, results
    assert all(isinstance(e, ApiError) and e.status == 409 and e.body["error"]["current_version"] == 2 for e in lost), lost
    assert (await client.get_memory(memory_id))["version"] == 2


async def test_if_match_on_supersede(client):
    older = await add(client, "Older fact")
    newer = await add(client, "Newer fact")
    await client.update_memory(older, {"memory": "Older fact, edited"})
    with pytest.raises(ApiError) as err:
        await client.supersede_memory(older, newer, expected_version=1)
    assert err.value.status == 409 and err.value.body["error"]["current_version"] == 2


async def test_update_without_changes_writes_nothing(client):
    memory_id = await add(client, "Unchanged", tags=["same"])
    before = await head(client)
    written = await client.update_memory(memory_id, {"tags": ["same"]})
    assert written.positions == []
    assert written.data["changed"] == []
    assert await head(client) == before


# -- merge, status changes, rollback, supersede --------------------------------------------------------


async def test_merge_returns_positions_and_archives_the_sources(client):
    a = await add(client, "Dana lives in Porto")
    b = await add(client, "Dana moved to Porto in 2021")
    written = await client.merge_memories([a, b], text="Dana has lived in Porto since 2021")
    assert_positions(written, at_least=3)
    [merged] = written.memory_ids
    assert (await client.get_memory(merged))["memory"] == "Dana has lived in Porto since 2021"
    for source in (a, b):
        assert (await client.get_memory(source))["status"] == "archived"
    found = await client.recall("Dana Porto", min_position=written.positions[-1])
    assert merged in [h["id"] for h in found["hits"]]
    assert not {a, b} & {h["id"] for h in found["hits"]}


async def test_archive_delete_restore_cycle(client):
    memory_id = await add(client, "The spare key is under the blue pot")
    archived = await client.archive_memory(memory_id, reason="stale")
    assert_positions(archived)
    assert (await client.get_memory(memory_id))["status"] == "archived"
    restored = await client.restore_memory(memory_id)
    assert_positions(restored)
    assert restored.positions[0] > archived.positions[-1]
    deleted = await client.delete_memory(memory_id, reason="wrong")
    assert_positions(deleted)
    assert (await client.get_memory(memory_id))["status"] == "deleted"
    # A deleted memory is not recalled by default.
    found = await client.recall("spare key blue pot", min_position=deleted.positions[-1])
    assert memory_id not in [h["id"] for h in found["hits"]]
    # Restoring twice is a conflict, not a new event.
    await client.restore_memory(memory_id)
    with pytest.raises(ApiError) as err:
        await client.restore_memory(memory_id)
    assert err.value.status == 409


async def test_updating_an_archived_memory_is_409_until_restored(client):
    memory_id = await add(client, "The spare key is under the blue pot")
    await client.archive_memory(memory_id, reason="stale")
    with pytest.raises(ApiError) as err:
        await client.update_memory(memory_id, {"memory": "The spare key is under the red pot"})
    assert err.value.status == 409 and err.value.code == "conflict"
    assert "archived" in err.value.message and err.value.body["error"]["current_version"] == 2
    assert (await client.get_memory(memory_id))["memory"] == "The spare key is under the blue pot"
    await client.restore_memory(memory_id)
    updated = await client.update_memory(memory_id, {"memory": "The spare key is under the red pot"})
    assert updated.data["version"] == 4


async def test_delete_with_evolve_to(client):
    old = await add(client, "Eve works at Initech")
    new = await add(client, "Eve works at Globex")
    written = await client.delete_memory(old, reason="changed jobs", evolve_to=new)
    assert_positions(written)
    assert (await client.get_memory(old))["status"] == "deleted"
    page = await client.list_events(stream=f"memory-{old}")
    assert page["events"][-1]["payload"]["evolve_to"] == new
    with pytest.raises(ApiError) as err:
        await client.delete_memory(new, evolve_to="no-such-memory")
    assert err.value.status == 404


async def test_rollback_returns_positions_and_restores_the_old_text(client):
    memory_id = await add(client, "First draft")
    await client.update_memory(memory_id, {"memory": "Second draft"})
    written = await client.rollback_memory(memory_id, 1)
    assert_positions(written)
    assert written.data["version"] == 3
    view = await client.get_memory(memory_id)
    assert view["memory"] == "First draft" and view["version"] == 3
    with pytest.raises(ApiError) as err:
        await client.rollback_memory(memory_id, 9)
    assert err.value.status == 404 and "version 9" in err.value.message  # a version the memory never had: missing, not malformed
    with pytest.raises(ApiError) as err:
        await client.rollback_memory(memory_id, 0)
    assert err.value.status == 422 and err.value.field == "to_version"


async def test_rollback_of_a_merged_or_superseded_memory_to_an_active_version_names_the_revert_to_use(api, client):
    """Rolled back to an active version, a merged-away source would be live beside the memory it was merged
    into (its MERGED_TO edge still there, its other edges on the merged one): refused naming the merge's
    correlation, which a revert takes back whole; nothing is written. A superseded memory alike."""
    x, y = await add(client, "Ana lives in Porto"), await add(client, "Ana lives in Porto, Portugal")
    merged = await client.merge_memories([x, y], correlation_id="merge-1")
    head = (await client.request("GET", "/v1/digest"))["position"]
    with pytest.raises(ApiError) as err:
        await client.rollback_memory(x, 1)
    assert err.value.status == 409 and x in err.value.message and merged.data["merged_id"] in err.value.message
    assert "merge-1" in err.value.message and "revert" in err.value.message
    assert (await client.request("GET", "/v1/digest"))["position"] == head
    assert (await client.get_memory(x))["status"] == "archived"
    await client.revert("merge-1")
    assert (await client.get_memory(x))["status"] == "activated"
    await client.update_memory(x, {"memory": "Ana lives in Lisbon"})
    assert (await client.rollback_memory(x, 1)).positions  # no longer merged: rolled back as any memory
    older, newer = await add(client, "Bo's phone ends in 12"), await add(client, "Bo's phone ends in 34")
    await client.supersede_memory(older, newer, correlation_id="conflict-1")
    with pytest.raises(ApiError) as err:
        await client.rollback_memory(older, 1)
    assert err.value.status == 409 and newer in err.value.message and "conflict-1" in err.value.message


async def test_supersede_archives_the_older_memory_with_an_edge(client):
    older = await add(client, "Frank's phone number ends in 12")
    newer = await add(client, "Frank's phone number ends in 34")
    written = await client.supersede_memory(older, newer)
    assert_positions(written, at_least=2)
    assert (await client.get_memory(older))["status"] == "archived"
    near = await client.neighbors(older, direction="out")
    assert [(e["edge_type"], e["target"]) for e in near["edges"]] == [("SUPERSEDED_BY", newer)]


# -- edges ---------------------------------------------------------------------------------------


async def test_link_and_unlink_return_positions(client):
    a = await add(client, "Grace mentors Heidi")
    b = await add(client, "Heidi joined the team in March")
    linked = await client.link(a, b, "RELATED", weight=0.5, edge_id="test:mentoring:1")
    assert_positions(linked)
    assert linked.data["edge_ids"] == ["test:mentoring:1"]
    near = await client.neighbors(a)
    assert [(e["edge_id"], e["weight"]) for e in near["edges"]] == [("test:mentoring:1", 0.5)]
    unlinked = await client.unlink("test:mentoring:1")
    assert_positions(unlinked)
    assert unlinked.positions[0] > linked.positions[-1]
    assert (await client.neighbors(a))["edges"] == []
    with pytest.raises(ApiError) as err:
        await client.unlink("test:mentoring:1")
    assert err.value.status == 404


async def test_unlink_keeps_the_reason_its_body_gives_and_refuses_a_body_it_cannot_take(api, client):
    """The reason was dropped silently (the route read no body), and so was any other field."""
    a = await add(client, "Mallory audits the vault")
    b = await add(client, "The vault opens at dawn")
    await client.link(a, b, edge_id="test:audit:1")
    await client.link(a, b, edge_id="test:audit:2")
    before = await head(client)
    for body, field in (({"reason": "stale", "why": "x"}, "why"), ([], "body"), ({"reason": 7}, "reason")):
        refused = await api.raw.delete("/v1/edges/test:audit:1", json=body)
        assert refused.status == 422, await refused.text()
        assert (await refused.json())["error"]["field"] == field
    assert await head(client) == before  # nothing written
    unlinked = await client.unlink("test:audit:1", reason="the audit moved to another memory")
    [event] = (await client.list_events(after=unlinked.positions[0] - 1, limit=1))["events"]
    assert event["type"] == "EdgeUnlinked" and event["payload"]["reason"] == "the audit moved to another memory"
    plain = await api.raw.delete("/v1/edges/test:audit:2")  # no body at all, as before
    assert plain.status == 200, await plain.text()


async def test_if_match_on_a_write_that_checks_no_version_is_refused_not_ignored(api, client):
    """``expected_version`` (If-Match) on a write without versions let it through whatever had changed."""
    from mnemolog.api.client import InvalidInputError

    a = await add(client, "Niaj keeps the keys")
    b = await add(client, "The keys are in the drawer")
    before = await head(client)
    with pytest.raises(InvalidInputError) as err:
        await client.link(a, b, edge_id="test:keys:1", expected_version=1)
    assert err.value.status == 400 and err.value.field == "If-Match" and "/v1/edges" in err.value.message
    with pytest.raises(InvalidInputError):
        await client.request("PUT", "/v1/entities/person:niaj", json={"name": "Niaj"}, headers={"If-Match": "1"})
    with pytest.raises(InvalidInputError):
        await client.merge_memories([a, b], expected_version=1)
    assert await head(client) == before  # nothing written
    # The memory commands check it, as before.
    assert (await client.update_memory(a, {"memory": "Niaj keeps both keys"}, expected_version=1)).positions
    assert (await client.archive_memory(a, expected_version=2)).positions


async def test_link_without_edge_id_gets_a_user_namespaced_one(client):
    a = await add(client, "Ivan")
    b = await add(client, "Judy")
    linked = await client.link(a, b)
    [edge_id] = linked.data["edge_ids"]
    assert edge_id.startswith("user:")


async def test_links_of_one_correlation_without_edge_ids_each_get_their_own(api, client):
    """Without an Idempotency-Key, a link's default id is numbered in its correlation: a group of links under one X-Correlation-Id all land."""
    a, b, c = [await add(client, f"grouped {n}") for n in "abc"]
    written = []
    for source, target in ((a, b), (a, c), (b, c)):
        response = await api.raw.post("/v1/edges", json={"source": source, "target": target}, headers={"X-Correlation-Id": "batch-7"})
        assert response.status == 201, await response.text()
        written += (await response.json())["data"]["edge_ids"]
    assert written == ["user:batch-7:1", "user:batch-7:2", "user:batch-7:3"]
    for correlation in ("a batch with spaces", "tab\there"):  # not an id's run as it stands: its digest stands in
        response = await api.raw.post("/v1/edges", json={"source": a, "target": b}, headers={"X-Correlation-Id": correlation})
        assert response.status == 201, await response.text()
        [edge_id] = (await response.json())["data"]["edge_ids"]
        assert edge_id.startswith("user:") and edge_id.endswith(":1") and " " not in edge_id
    reverted = await client.revert("batch-7")
    assert reverted.data["reverted"] == 3
    assert {e["edge_id"] for e in (await client.neighbors(c))["edges"]} == set()


async def test_undo_namespace_removes_every_edge_under_the_prefix(client):
    a, b, c = [await add(client, f"node {n}") for n in "abc"]
    await client.link(a, b, edge_id="import:run-1:1")
    await client.link(b, c, edge_id="import:run-1:2")
    await client.link(a, c, edge_id="user:keep:1")
    await client.link(c, a, edge_id="import:run-10:1")  # another run, whose name starts with run-1's
    written = await client.undo_namespace("import:run-1:")
    assert_positions(written)
    assert written.data["removed"] == 2
    stats = await client.request("GET", "/v1/graph/stats")
    assert stats["edges_total"] == 2
    assert [e["edge_id"] for e in (await client.neighbors(a))["edges"]] == ["user:keep:1", "import:run-10:1"]
    assert (await client.undo_namespace("import:run-1")).data["removed"] == 0  # the same run without its last colon
    # Nothing left under the prefix: no event.
    again = await client.undo_namespace("import:run-1:")
    assert again.positions == [] and again.data["removed"] == 0


async def test_revert_undoes_everything_a_correlation_did(client):
    keep = await add(client, "Kept memory")
    batch = await client.add_memories(memories=[{"memory": "Imported one"}, {"memory": "Imported two"}], correlation_id="import-42")
    assert batch.correlation_id == "import-42"
    await client.link(batch.memory_ids[0], keep, edge_id="import:42:1", correlation_id="import-42")
    written = await client.revert("import-42")
    assert_positions(written)
    assert written.data["reverted"] >= 3
    for memory_id in batch.memory_ids:
        assert (await client.get_memory(memory_id))["status"] == "deleted"
    assert (await client.get_memory(keep))["status"] == "activated"
    assert (await client.neighbors(keep))["edges"] == []
    # Reverting twice is a no-op.
    again = await client.revert("import-42")
    assert again.positions == [] and again.data["already_reverted"] is True
    with pytest.raises(ApiError) as err:
        await client.revert("never-happened")
    assert err.value.status == 404
    # Its revert reverted, its changes are back; reverted again, they go again.
    await client.revert(written.correlation_id)
    assert [(await client.get_memory(m))["status"] for m in batch.memory_ids] == ["activated", "activated"]
    third = await client.revert("import-42")
    assert_positions(third)
    assert third.data["through"] != written.correlation_id and third.data["conflicts"] == []
    assert [(await client.get_memory(m))["status"] for m in batch.memory_ids] == ["deleted", "deleted"]
    assert (await client.neighbors(keep))["edges"] == []


async def test_reverting_the_add_of_a_memory_others_linked_to_since_names_their_edges(api, client):
    """The revert deletes the memory: an edge another request linked to it since would hang on a deleted node
    (and lead the neighbourhood to it). A conflict naming the edge; forced, the edge goes too."""
    keep = await add(client, "Kept memory")
    [made] = (await client.add_memories({"memory": "Imported by mistake"}, correlation_id="import-9")).memory_ids
    await client.link(keep, made, edge_id="user:later:1", correlation_id="later-1")
    head = (await client.request("GET", "/v1/digest"))["position"]
    preview = await client.revert("import-9", dry_run=True)
    assert any("user:later:1" in c and made in c for c in preview.data["conflicts"])
    with pytest.raises(ApiError) as err:
        await client.revert("import-9")
    assert err.value.status == 409 and err.value.field == "force" and "user:later:1" in err.value.message
    assert (await client.request("GET", "/v1/digest"))["position"] == head  # nothing written
    assert (await client.get_memory(made))["status"] == "activated"
    forced = await client.revert("import-9", force=True)
    assert forced.data["forced"] and (await client.get_memory(made))["status"] == "deleted"
    assert (await client.neighbors(keep))["edges"] == [] and (await client.neighbors(keep))["reached"] == []


async def test_reverting_a_session_names_what_another_request_changed_between_its_writes(api, client):
    memory_id = await add(client, "The meeting is on Monday")
    await client.update_memory(memory_id, {"memory": "The meeting is on Tuesday"}, correlation_id="session-5")
    await client.update_memory(memory_id, {"tags": ["work"]}, correlation_id="someone-else")
    await client.update_memory(memory_id, {"memory": "The meeting is on Tuesday at 10"}, correlation_id="session-5")
    with pytest.raises(ApiError) as err:
        await client.revert("session-5")
    assert err.value.status == 409 and err.value.field == "force" and "in between by another correlation (version 3)" in err.value.message
    assert (await client.get_memory(memory_id))["tags"] == ["work"]  # nothing written


async def test_x_correlation_id_is_recorded_on_every_event(client):
    written = await client.add_memories({"memory": "Correlated"}, correlation_id="req-7")
    page = await client.list_events(correlation_id="req-7")
    assert [e["position"] for e in page["events"]] == written.positions
    assert all(e["metadata"]["correlation_id"] == "req-7" for e in page["events"])


# -- Idempotency-Key -------------------------------------------------------------------------------


async def _replays(api, client, call, *, key: str):
    """Call twice under one Idempotency-Key: same answer, and the log does not grow."""
    first = await call(idempotency_key=key)
    assert first.replayed is False
    count = await api.event_count(client)
    tip = await head(client)
    second = await call(idempotency_key=key)
    assert second.replayed is True
    assert second.positions == first.positions
    assert await api.event_count(client) == count
    assert await head(client) == tip
    return first, second


async def test_idempotent_add_replays_positions_and_ids(api, client):
    first, second = await _replays(api, client, lambda **kw: client.add_memories({"memory": "Only once"}, **kw), key="add-1")
    assert second.memory_ids == first.memory_ids


async def test_idempotent_batch_add(api, client):
    body = [{"memory": "batch one"}, {"memory": "batch two"}]
    first, second = await _replays(api, client, lambda **kw: client.add_memories(memories=body, **kw), key="batch-1")
    assert sorted(second.memory_ids) == sorted(first.memory_ids)


async def test_idempotent_update_archive_link_and_revert(api, client):
    a = await add(client, "Idem A")
    b = await add(client, "Idem B")
    await _replays(api, client, lambda **kw: client.update_memory(a, {"memory": "Idem A2"}, **kw), key="upd-1")
    await _replays(api, client, lambda **kw: client.link(a, b, **kw), key="link-1")
    await _replays(api, client, lambda **kw: client.archive_memory(b, **kw), key="arch-1")
    await _replays(api, client, lambda **kw: client.restore_memory(b, **kw), key="rest-1")
    await _replays(api, client, lambda **kw: client.rollback_memory(a, 1, **kw), key="roll-1")
    c = await add(client, "Idem C")
    await _replays(api, client, lambda **kw: client.merge_memories([b, c], **kw), key="merge-1")
    written = await client.add_memories({"memory": "to revert"}, correlation_id="rev-src")
    await _replays(api, client, lambda **kw: client.revert("rev-src", **kw), key="revert-1")
    assert (await client.get_memory(written.memory_ids[0]))["status"] == "deleted"


async def test_idempotent_delete_supersede_unlink_and_undo(api, client):
    a = await add(client, "Idem D")
    b = await add(client, "Idem E")
    c = await add(client, "Idem F")
    await client.link(a, b, edge_id="idem:ns:1")
    await client.link(b, c, edge_id="idem:other:1")
    await _replays(api, client, lambda **kw: client.unlink("idem:ns:1", **kw), key="unlink-1")
    await _replays(api, client, lambda **kw: client.undo_namespace("idem:other:", **kw), key="undo-1")
    await _replays(api, client, lambda **kw: client.supersede_memory(a, b, **kw), key="sup-1")
    await _replays(api, client, lambda **kw: client.delete_memory(c, reason="x", **kw), key="del-1")


async def test_same_idempotency_key_with_another_body_is_409(api, client):
    await client.add_memories({"memory": "first body"}, idempotency_key="dup-1")
    count = await api.event_count(client)
    with pytest.raises(ApiError) as err:
        await client.add_memories({"memory": "second body"}, idempotency_key="dup-1")
    assert err.value.status == 409
    assert err.value.code == "idempotency_conflict"
    assert err.value.field == "Idempotency-Key"
    assert await api.event_count(client) == count


async def test_idempotency_keys_are_scoped_per_tenant(api):
    one = api.client(tenant="t-one")
    two = api.client(tenant="t-two")
    a = await one.add_memories({"memory": "same key, tenant one"}, idempotency_key="shared")
    b = await two.add_memories({"memory": "same key, tenant two"}, idempotency_key="shared")
    assert not b.replayed
    assert a.memory_ids != b.memory_ids


async def test_an_overlong_idempotency_key_is_400(client):
    with pytest.raises(ApiError) as err:
        await client.add_memories({"memory": "x"}, idempotency_key="k" * 201)
    assert err.value.status == 400 and err.value.field == "Idempotency-Key"


# -- the request Structs and the model --------------------------------------------------------------


def test_request_fields_are_content_fields_and_convert_whole():
    import msgspec

    from mnemolog.api.operations import memory_content as _content
    from mnemolog.api.schemas import MemoryIn, UpdateMemoryRequest
    from mnemolog.eventstore.commands.memories import UPDATABLE_FIELDS
    from mnemolog.eventstore.model import CONTENT_FIELDS, MemoryContent

    assert set(MemoryIn.__struct_fields__) == set(CONTENT_FIELDS)
    assert set(UpdateMemoryRequest.__struct_fields__) - {"reason"} == set(UPDATABLE_FIELDS)
    item = msgspec.json.decode(
        b'{"memory": "m", "memory_type": "UserMemory", "key": "k", "tags": ["a", "b"], "sources": ["s"], "background": "b",'
        b' "confidence": 0.5, "collection": "c", "doc_type": "t", "doc_id": "d", "doc_version": "1", "lang": "en",'
        b' "source_url": "https://example.org", "model": "m1", "embedding": [0.25, 0.5], "properties": {"x": 1}, "subject": "u-1"}',
        type=MemoryIn,
    )
    content = _content(item)
    assert type(content) is MemoryContent and content.erased is False  # set on read after a forget, never by a request
    assert {k: v for k, v in msgspec.structs.asdict(content).items() if k != "erased"} == {
        name: tuple(value) if isinstance(value, list) else value for name, value in msgspec.structs.asdict(item).items()
    }
    assert all(getattr(content, name) is not None for name in CONTENT_FIELDS)  # every field carried over


@pytest.mark.parametrize("encryption", ["off", "on"])
async def test_a_memory_whose_text_starts_like_a_sealed_token_reads_back_and_later_writes_work(start, encryption):
    from mnemolog.eventstore.sealing import PLAIN_MARK, PREFIX, TOKEN_MARK

    client = (await start(encryption=encryption)).client()
    texts = [f"{TOKEN_MARK}AAAAhello there", f"{PREFIX}key:AAAA", f"{PLAIN_MARK}plain"]
    written = await client.add_memories(memories=[{"memory": t} for t in texts])
    for memory_id, text in zip(written.memory_ids, texts):
        assert (await client.get_memory(memory_id))["memory"] == text
    page = await client.list_events(correlation_id=written.correlation_id)
    assert [e["payload"]["content"]["memory"] for e in page["events"] if e["type"] == "MemoryAdded"] == texts
    assert (await client.get_memory(await add(client, "the next memory")))["memory"] == "the next memory"


async def test_a_background_longer_than_a_memory_is_422_naming_it(api, client):
    """A 10 MB ``background`` (indexed as the text is) was taken whole: the write took seconds and the
    tenant's next recall twelve, where the text itself stops at 100,000 characters."""
    long = "w " * 50_001  # 100,002 characters
    memory_id = (await client.add_memories(memories=[{"memory": "short"}])).memory_ids[0]
    before = await head(client)
    cases = [
        ("POST", "/v1/memories", {"memories": [{"memory": "fine"}, {"memory": "long", "background": long}]}, "memories[1].background"),
        ("POST", "/v1/memories", {"memory": {"memory": "long", "background": long}}, "memory.background"),
        ("PATCH", f"/v1/memories/{memory_id}", {"background": long}, "background"),
    ]
    for method, path, body, field in cases:
        response = await api.raw.request(method, path, json=body)
        answer = await response.json()
        assert response.status == 422 and answer["error"]["field"] == field, (path, answer)
    assert await head(client) == before
    written = await client.add_memories(memories=[{"memory": "at the limit", "background": long[:100_000]}])
    assert written.positions


async def test_a_reason_longer_than_2000_characters_is_422_naming_it(api, client):
    """Reasons are recorded in the log unsealed, where a forget cannot reach them; only the forget's own was
    bounded, and a 5 MB archive reason was kept for good."""
    memory_id = (await client.add_memories(memories=[{"memory": "short"}])).memory_ids[0]
    await api.raw.put("/v1/entities/person:ada", json={"name": "Ada"})
    long = "r" * 2001
    before = await head(client)
    cases = [
        ("PATCH", f"/v1/memories/{memory_id}", {"key": "k", "reason": long}),
        ("POST", f"/v1/memories/{memory_id}/archive", {"reason": long}),
        ("POST", f"/v1/memories/{memory_id}/delete", {"reason": long}),
        ("POST", f"/v1/memories/{memory_id}/rollback", {"to_version": 1, "reason": long}),
        ("POST", "/v1/edges/undo-namespace", {"prefix": "user:", "reason": long}),
        ("DELETE", "/v1/entities/person:ada", {"reason": long}),
        ("POST", "/v1/admin/drop-tenant", {"confirm": "default", "reason": long}),
    ]
    for method, path, body in cases:
        response = await api.raw.request(method, path, json=body)
        answer = await response.json()
        assert response.status == 422 and answer["error"]["field"] == "reason", (path, answer)
    assert await head(client) == before
    assert (await api.raw.post(f"/v1/memories/{memory_id}/archive", json={"reason": "r" * 2000})).status == 200
