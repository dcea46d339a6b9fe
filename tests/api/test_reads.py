"""Reads over real HTTP: time travel, history, graph, the log, audit, recall explanations (the live tail: test_live_tail)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from mnemolog.api.client import ApiError
from mnemolog.projections.filters import MAX_FILTER_TAGS


async def add(client, text: str, **fields) -> str:
    return (await client.add_memories({"memory": text, **fields})).memory_ids[0]


# -- memories: as_of and history -----------------------------------------------------------------


async def test_get_memory_as_of_a_position(client):
    first = await client.add_memories({"memory": "Rent is 900 euros"})
    [memory_id] = first.memory_ids
    second = await client.update_memory(memory_id, {"memory": "Rent is 950 euros"})
    assert (await client.get_memory(memory_id))["memory"] == "Rent is 950 euros"
    old = await client.get_memory(memory_id, as_of=first.positions[-1])
    assert old["memory"] == "Rent is 900 euros" and old["version"] == 1
    assert (await client.get_memory(memory_id, as_of=second.positions[-1]))["version"] == 2
    # Before the memory existed it is not found.
    with pytest.raises(ApiError) as err:
        await client.get_memory(memory_id, as_of=first.positions[0] - 1) if first.positions[0] > 1 else await client.get_memory(memory_id, as_of=0)
    assert err.value.status == 404


async def test_get_memory_as_of_an_iso_time(api, client):
    first = await client.add_memories({"memory": "The office is on floor 3"})
    [memory_id] = first.memory_ids
    await asyncio.sleep(0.02)
    second = await client.update_memory(memory_id, {"memory": "The office is on floor 5"})
    events = (await client.list_events(stream=f"memory-{memory_id}"))["events"]
    t1 = datetime.fromisoformat(events[0]["recorded_at"].replace("Z", "+00:00"))
    t2 = datetime.fromisoformat(events[1]["recorded_at"].replace("Z", "+00:00"))
    assert events[1]["position"] == second.positions[0]
    between = t1 + (t2 - t1) / 2
    for stamp in (between.isoformat(), between.strftime("%Y-%m-%dT%H:%M:%S.%fZ")):
        view = await client.get_memory(memory_id, as_of=stamp)
        assert view["memory"] == "The office is on floor 3", stamp
    assert (await client.get_memory(memory_id, as_of=t2.isoformat()))["memory"] == "The office is on floor 5"
    # A time to come: read now it would answer with the head, and differently once more is written by then.
    for later in ((datetime.now(timezone.utc) + timedelta(minutes=5)).isoformat(), "9999-12-31", "9999-12-31T23:30:00-01:00"):
        for path in (f"/v1/memories/{memory_id}", f"/v1/memories/{memory_id}/history", "/v1/working-memory"):
            answer = await api.raw.get(path, params={"as_of": later})
            error = (await answer.json())["error"]
            assert answer.status == 409 and error["field"] == "as_of" and "later than now" in error["message"], (path, later, error)
    with pytest.raises(ApiError) as err:
        await client.get_memory(memory_id, as_of=(t1 - timedelta(days=1)).isoformat())
    assert err.value.status == 404


# -- graph ------------------------------------------------------------------------------------


async def _star(client, leaves: int = 6) -> tuple[str, list[str]]:
    written = await client.add_memories(memories=[{"memory": f"star node {i}"} for i in range(leaves + 1)])
    center, *others = written.memory_ids
    for n, other in enumerate(others):
        await client.link(center, other, "RELATED", weight=0.5, edge_id=f"star:{n}:1")
    return center, others


async def test_neighbors_depth_direction_and_types(client):
    a, b, c = (await client.add_memories(memories=[{"memory": "chain a"}, {"memory": "chain b"}, {"memory": "chain c"}])).memory_ids
    await client.link(a, b, "FOLLOWS", weight=0.5, edge_id="t:ab:1")
    await client.link(b, c, "MENTIONS", weight=0.4, edge_id="t:bc:1")
    near = await client.neighbors(a, depth=1)
    assert near["node"] == a
    assert [r["node"] for r in near["reached"]] == [b]
    far = await client.neighbors(a, depth=2)
    reached = {r["node"]: r for r in far["reached"]}
    assert set(reached) == {b, c}
    assert reached[c]["depth"] == 2
    assert reached[c]["path"] == ["t:ab:1", "t:bc:1"]
    assert reached[c]["score"] == pytest.approx(0.2)
    assert [r["node"] for r in (await client.neighbors(a, depth=0))["reached"]] == []
    assert (await client.neighbors(b, direction="in"))["edges"][0]["edge_id"] == "t:ab:1"
    assert [e["edge_id"] for e in (await client.neighbors(b, direction="out"))["edges"]] == ["t:bc:1"]
    typed = await client.request("GET", "/v1/graph/neighbors", params={"node": b, "type": "MENTIONS"})
    assert [e["edge_id"] for e in typed["edges"]] == ["t:bc:1"]


async def test_neighbors_as_of_sees_the_graph_of_the_past(client):
    a = await add(client, "past a")
    b = await add(client, "past b")
    linked = await client.link(a, b, edge_id="t:past:1")
    await client.unlink("t:past:1")
    assert (await client.neighbors(a))["edges"] == []
    then = await client.neighbors(a, as_of=linked.positions[-1])
    assert [e["edge_id"] for e in then["edges"]] == ["t:past:1"]


async def test_subgraph_honours_node_and_edge_limits(client):
    center, others = await _star(client, leaves=6)
    full = await client.request("POST", "/v1/graph/subgraph", json={"seeds": [center], "depth": 1})
    assert {n["id"] for n in full["nodes"]} == {center, *others}
    assert len(full["edges"]) == 6
    assert full["truncated"] is False
    assert all(n["memory"] and n["memory"]["memory"].startswith("star node") for n in full["nodes"])

    few_nodes = await client.request("POST", "/v1/graph/subgraph", json={"seeds": [center], "depth": 1, "max_nodes": 3})
    assert len(few_nodes["nodes"]) <= 3
    assert few_nodes["truncated"] is True
    ids = {n["id"] for n in few_nodes["nodes"]}
    assert center in ids
    assert all(e["source"] in ids and e["target"] in ids for e in few_nodes["edges"])

    few_edges = await client.request("POST", "/v1/graph/subgraph", json={"seeds": [center], "depth": 1, "max_edges": 2})
    assert len(few_edges["edges"]) == 2
    assert few_edges["truncated"] is True


async def test_subgraph_of_an_exact_fit_is_not_truncated(client):
    center, others = await _star(client, leaves=3)
    body = await client.request("POST", "/v1/graph/subgraph", json={"seeds": [center], "depth": 2, "max_nodes": 4, "max_edges": 3})
    assert len(body["nodes"]) == 4 and len(body["edges"]) == 3
    assert body["truncated"] is False


async def test_a_subgraph_and_a_recall_of_more_edge_types_than_sqlite_takes_parameters_follow_those_named(client, api):
    """A type a bound parameter: past SQLite's limit (250,000 here) the walk was a 500."""
    center, others = await _star(client, leaves=2)
    await api.raw.put("/v1/entities/ada", json={"name": "Ada"})
    await api.raw.put("/v1/entities/bob", json={"name": "Bob"})
    await api.raw.post("/v1/entities/ada/relations", json={"target_id": "bob", "relation_type": "KNOWS"})
    many = [f"TYPE_{i}" for i in range(260_000)]
    body = await client.request("POST", "/v1/graph/subgraph", json={"seeds": [center], "edge_types": [*many, "RELATED"]})
    assert {n["id"] for n in body["nodes"]} == {center, *others} and len(body["edges"]) == 2
    body = await client.request("POST", "/v1/graph/subgraph", json={"seeds": [center], "edge_types": many})
    assert [n["id"] for n in body["nodes"]] == [center] and body["edges"] == []
    related = await api.raw.post("/v1/recall", json={"query": "Ada", "strategy": "graph-only", "graph_edge_types": [*many, "KNOWS"]})
    assert related.status == 200, await related.text()


async def test_graph_stats_counts_by_status_and_edge_type(client):
    center, others = await _star(client, leaves=3)
    await client.archive_memory(others[0])
    stats = await client.request("GET", "/v1/graph/stats")
    assert stats["memories"] == {"activated": 3, "archived": 1}
    assert stats["memories_total"] == 4
    assert stats["edges"] == {"RELATED": 3}
    assert stats["edges_total"] == 3


async def test_graph_stats_as_of_a_position_is_what_the_head_said_then(start):
    api = await start(working_memory_capacity=3)
    client = api.client()
    seen: list[tuple[int, dict]] = []

    async def snapshot() -> None:
        stats = await client.request("GET", "/v1/graph/stats")
        assert stats["as_of"] is None
        position = (await client.request("GET", "/health"))["head_position"]
        seen.append((position, stats))

    await snapshot()
    center, others = await _star(client, leaves=3)
    await snapshot()
    await client.add_memories(memories=[{"memory": f"scratch {n}", "memory_type": "WorkingMemory"} for n in range(4)])  # evicts
    await snapshot()
    await client.archive_memory(others[0])
    await client.unlink("star:1:1")
    await snapshot()
    assert len({counts_key(stats) for _, stats in seen}) == len(seen), "every step changed the counts"
    assert seen[-1][1]["working_memory"] == 3 and seen[-1][1]["edges"] == {"RELATED": 2}

    for position, stats in seen:
        then = await client.request("GET", "/v1/graph/stats", params={"as_of": str(position)})
        assert {**then, "as_of": None} == stats, position
        assert then["as_of"] == position

    events = (await client.list_events(limit=1))["events"]
    moment = events[0]["recorded_at"].replace("Z", "+00:00")
    by_time = await client.request("GET", "/v1/graph/stats", params={"as_of": moment})
    assert by_time["memories_total"] == 4  # the star's memories share their first event's time

    with pytest.raises(ApiError) as err:
        await client.request("GET", "/v1/graph/stats", params={"as_of": "yesterday"})
    assert (err.value.status, err.value.field) == (422, "as_of")


def counts_key(stats: dict) -> str:
    return repr(sorted(stats.items()))


HEAD_ONLY_READS = [
    ("GET", "/v1/digest"),
    ("GET", "/v1/capabilities"),
    ("GET", "/v1/organizer/status"),
    ("POST", "/v1/recall"),  # recall takes as_of in its body, not in the query
]


async def test_reads_that_cannot_honour_as_of_refuse_it(api, client):
    memory_id = await add(client, "read at the head")
    for method, path in HEAD_ONLY_READS:
        response = await api.raw.request(method, path.replace("{id}", memory_id), params={"as_of": "1"}, json={"query": "head"})
        assert response.status == 422, (method, path, response.status)
        assert (await response.json())["error"]["field"] == "as_of", (method, path)
    response = await api.raw.get("/v1/events/stream", params={"as_of": "1"})
    assert response.status == 422 and (await response.json())["error"]["field"] == "as_of"
    # Reads that honour it still take it.
    for path in (f"/v1/memories/{memory_id}", "/v1/graph/stats", f"/v1/graph/neighbors?node={memory_id}"):
        response = await api.raw.get(path, params={"as_of": "1"})
        assert response.status == 200, (path, await response.text())


async def test_every_read_route_either_declares_as_of_or_refuses_it(api, client):
    """The route table is the contract: a route that lists ``as_of`` is honouring it; any other refuses it."""
    from mnemolog.api.app import ROUTES

    memory_id = await add(client, "the contract")
    for r in ROUTES:
        if r.scope != "read" or r.method != "GET" or r.path == "/v1/events/stream":
            continue
        declared = any(name == "as_of" for name, *_ in r.query)
        path = r.path.replace("{id}", memory_id)
        response = await api.raw.get(path, params={"as_of": "1", "node": memory_id})
        if declared:
            assert response.status != 422 or (await response.json())["error"]["field"] != "as_of", r.path
        else:
            assert response.status == 422, (r.path, response.status)
            assert (await response.json())["error"]["field"] == "as_of", r.path


# -- the log ----------------------------------------------------------------------------------


async def test_events_paginate_by_position(client):
    await client.add_memories(memories=[{"memory": f"paged {i}"} for i in range(7)])
    seen, after, pages = [], 0, 0
    while True:
        page = await client.list_events(after=after, limit=3)
        if not page["events"]:
            assert page["next_after"] == after
            break
        assert len(page["events"]) <= 3
        seen += [e["position"] for e in page["events"]]
        after = page["next_after"]
        assert after == seen[-1]
        pages += 1
    assert seen == list(range(1, 8))
    assert pages == 3
    event = (await client.list_events(limit=1))["events"][0]
    assert set(event) >= {"position", "event_id", "stream_id", "stream_version", "type", "tenant", "payload", "metadata", "recorded_at"}
    assert event["type"] == "MemoryAdded" and event["tenant"] == "default"


async def test_events_filters(client):
    a = await add(client, "filter me")
    b = await add(client, "and me")
    await client.link(a, b, edge_id="t:f:1", correlation_id="corr-f")
    await client.archive_memory(a)
    only_added = await client.request("GET", "/v1/events", params=[("type", "MemoryAdded")])
    assert [e["type"] for e in only_added["events"]] == ["MemoryAdded", "MemoryAdded"]
    two_types = await client.request("GET", "/v1/events", params=[("type", "EdgeLinked"), ("type", "MemoryArchived")])
    assert [e["type"] for e in two_types["events"]] == ["EdgeLinked", "MemoryArchived"]
    stream = await client.list_events(stream=f"memory-{a}")
    assert [e["type"] for e in stream["events"]] == ["MemoryAdded", "MemoryArchived"]
    correlated = await client.list_events(correlation_id="corr-f")
    assert [e["type"] for e in correlated["events"]] == ["EdgeLinked"]
    assert (await client.list_events(types=["NoSuchType"]))["events"] == []


# -- auditing --------------------------------------------------------------------------------


async def test_digest_and_verify_against_it(client):
    await client.add_memories(memories=[{"memory": f"audit {i}"} for i in range(4)])
    digest = await client.digest()
    assert digest["position"] == 4
    assert len(digest["hash"]) == 64
    assert digest["digest"] == f"{digest['position']}:{digest['hash']}"
    result = await client.verify()
    assert result["ok"] is True and result["checked"] == 4 and result["tip_hash"] == digest["hash"]
    assert (await client.verify(against=digest["digest"]))["ok"] is True
    await client.add_memories({"memory": "later"})
    assert (await client.verify(against=digest["digest"]))["ok"] is True  # an old digest still holds
    forged = f"{digest['position']}:{'0' * 64}"
    bad = await client.verify(against=forged)
    assert bad["ok"] is False
    ranged = await client.request("GET", "/v1/verify", params={"from": "2", "to": "3"})
    assert ranged["ok"] is True and ranged["first_position"] == 2 and ranged["last_position"] == 3
    # A range past the head is not verified (the log may have lost its tail), as the CLI says.
    short = await client.request("GET", "/v1/verify", params={"to": "99"})
    assert short["ok"] is False and short["broken_at"] == 6 and short["reason"] == "the log ends at position 5, before position 99 that was asked for"
    assert short["checked"] == 5
    with pytest.raises(ApiError) as err:
        await client.verify(against="not-a-digest")
    assert err.value.status == 422 and err.value.field == "against"


async def test_health_and_capabilities(api, client):
    await client.add_memories({"memory": "make a head"})
    health = await client.health()
    assert health["status"] == "ok"
    assert health["head_position"] == 1
    assert health["version"] and health["commit"]
    assert all(lag == 0 for lag in health["projection_lags"].values())
    assert health["vector_index_lag"] >= 0  # the index follows once writes pause: 0 soon after, never negative
    caps = await client.capabilities()
    assert caps["version"] == health["version"]
    assert caps["head_position"] == 1
    assert "graph" in caps["projection_lags"]
    assert caps["embedder"] == "hashing"
    assert isinstance(caps["channels"], dict)
    assert caps["channels"].get("graph") is True
    assert caps["channels"]["lexical"] is True
    assert set(caps["channels"]) == {"lexical", "semantic", "graph"}


async def test_verify_names_missing_guards_and_narrows_a_difference_between_digests(api, client):
    import sqlite3

    await client.add_memories(memories=[{"memory": f"guarded {i}"} for i in range(4)])
    early = await client.digest()
    await client.add_memories({"memory": "later"})
    late = await client.digest()
    both = await client.request("GET", "/v1/verify", params=[("against", early["digest"]), ("against", late["digest"])])
    assert both["ok"] is True and both["guards"] == []
    forged = f"{late['position']}:{'0' * 64}"
    narrowed = await client.request("GET", "/v1/verify", params=[("against", forged), ("against", early["digest"])])
    assert narrowed["ok"] is False
    assert (narrowed["broken_at"], narrowed["differs_at"], narrowed["unchanged_through"]) == (late["position"], late["position"], early["position"])

    conn = sqlite3.connect(api.data_dir / "events.db")
    conn.execute("DROP TRIGGER idempotency_keys_no_delete")
    conn.close()
    result = await client.verify()
    assert result["ok"] is False and result["broken_at"] is None
    assert result["guards"] == [{"table": "idempotency_keys", "trigger": "idempotency_keys_no_delete", "problem": "missing"}]


# -- recall explanations ---------------------------------------------------------------------


async def _people(client):
    written = await client.add_memories(memories=
        [
            {"memory": "Melanie painted a sunrise over the lake", "key": "painting"},
            {"memory": "Caroline went to a support group meeting", "key": "caroline"},
            {"memory": "The lake house has a green door"},
            {"memory": "Completely unrelated note about taxes"},
        ]
    )
    painting, caroline, lake_house, taxes = written.memory_ids
    linked = await client.link(painting, lake_house, "RELATED", weight=0.9, edge_id="t:lake:1")
    return painting, caroline, lake_house, taxes, linked.positions[-1]


async def test_recall_explains_channels_ranks_and_scores(client):
    painting, caroline, lake_house, taxes, position = await _people(client)
    result = await client.recall("painting of the lake", min_position=position)
    assert result["query"] == "painting of the lake"
    assert result["strategy"] == "hybrid"
    assert result["position"] >= position
    hits = {h["id"]: h for h in result["hits"]}
    assert painting in hits and lake_house in hits and taxes not in hits
    scores = [h["score"] for h in result["hits"]]
    assert scores == sorted(scores, reverse=True)
    for hit in result["hits"]:
        assert hit["score"] > 0
        assert hit["memory"]["id"] == hit["id"]
        for name, channel in hit["channels"].items():
            assert name in ("lexical", "semantic", "graph")
            assert channel["rank"] >= 1 and isinstance(channel["score"], float)
    assert "lexical" in hits[painting]["channels"]
    # The memory keyed "painting" seeds the graph channel; its neighbour is reached through the edge.
    assert hits[painting]["channels"]["graph"]["rank"] == 1
    assert hits[painting]["graph_path"] == []
    graph_hit = hits[lake_house]["channels"].get("graph")
    assert graph_hit is not None and graph_hit["rank"] >= 1
    assert hits[lake_house]["graph_path"] == ["t:lake:1"]
    states = result["channels"]
    assert states["lexical"]["status"] == "ok" and states["lexical"]["count"] >= 2
    assert states["graph"]["status"] == "ok" and states["graph"]["count"] >= 1
    assert states["semantic"]["status"] in ("ok", "off", "unavailable")
    assert result["degraded"] == any(s["status"] == "unavailable" for s in states.values())
    assert "painting" in result["terms"] and "lake" in result["terms"]


async def test_recall_lists_the_edge_between_two_hits(client):
    painting, caroline, lake_house, taxes, position = await _people(client)
    result = await client.recall("painting lake", min_position=position)
    edges = [r for r in result["relationships"] if r["kind"] == "edge"]
    assert edges == [
        {"kind": "edge", "a": painting, "b": lake_house, "detail": {"edge_id": "t:lake:1", "edge_type": "RELATED", "weight": 0.9}}
    ]


async def test_recall_lists_shared_sources_and_same_document(client):
    written = await client.add_memories(memories=
        [
            {"memory": "Quarterly revenue grew 12 percent", "sources": ["report.pdf"], "doc_id": "q3"},
            {"memory": "Quarterly costs fell 3 percent", "sources": ["report.pdf"], "doc_id": "q3"},
        ]
    )
    result = await client.recall("quarterly revenue costs", min_position=written.positions[-1])
    kinds = {(r["kind"], frozenset((r["a"], r["b"]))) for r in result["relationships"]}
    pair = frozenset(written.memory_ids)
    assert ("shared_source", pair) in kinds
    assert ("same_document", pair) in kinds


async def test_recall_strategies_and_switched_off_channels(client):
    painting, caroline, lake_house, taxes, position = await _people(client)
    lexical = await client.recall("painting lake", channels=["lexical"], min_position=position)
    assert lexical["strategy"] == "lexical-only"
    assert lexical["channels"]["graph"] == {"status": "off", "count": 0, "weight": 0.8, "reason": "not requested", "embedder": None, "query_vector": None}
    assert lexical["channels"]["semantic"]["status"] == "off"
    assert all(set(h["channels"]) == {"lexical"} for h in lexical["hits"])

    graph = await client.recall("Melanie painting", channels=["graph"], min_position=position)
    assert graph["strategy"] == "graph-only"
    assert graph["channels"]["lexical"]["status"] == "off"
    assert {h["id"] for h in graph["hits"]} == {painting, lake_house}

    # A weight of 0 switches a channel off too.
    weighted = await client.recall("painting lake", weights={"graph": 0}, min_position=position)
    assert weighted["channels"]["graph"]["status"] == "off"
    assert weighted["strategy"] == "lexical-only"

    semantic = await client.recall("painting lake", channels=["semantic"], min_position=position)
    if semantic["channels"]["semantic"]["status"] == "ok":
        assert semantic["strategy"] == "semantic-only"
    else:
        assert semantic["channels"]["semantic"]["status"] == "unavailable"
        assert semantic["degraded"] is True
        assert semantic["hits"] == []


async def test_recall_filters_and_limit(client):
    written = await client.add_memories(memories=
        [{"memory": f"Garden note {i} about tomatoes", "tags": ["garden"] if i % 2 else ["kitchen"]} for i in range(6)]
    )
    result = await client.recall("tomatoes", limit=2, min_position=written.positions[-1])
    assert len(result["hits"]) == 2
    tagged = await client.recall("tomatoes", filters={"tags": ["Garden"]}, min_position=written.positions[-1])
    assert {h["id"] for h in tagged["hits"]} == set(written.memory_ids[1::2])
    await client.archive_memory(written.memory_ids[0])
    archived = await client.recall("tomatoes", filters={"status": ["archived"]})
    assert [h["id"] for h in archived["hits"]] == [written.memory_ids[0]]


async def test_recall_filtered_by_as_many_tags_as_allowed_finds_those_carrying_any_of_them(client):
    """Each tag was one more OR in the filter's SQL: past about 1,000 SQLite refused the expression as too deep, a 500."""
    written = await client.add_memories(memories=[{"memory": "tomatoes in the garden", "tags": ["garden"]}, {"memory": "tomatoes in the kitchen", "tags": ["kitchen"]}])
    many = [f"tag{i}" for i in range(MAX_FILTER_TAGS - 1)] + ["Garden"]
    for read in (client.recall, client.search):
        found = await read("tomatoes", filters={"tags": many}, min_position=written.positions[-1], as_of=written.positions[-1])
        ranked = found["hits"] if "hits" in found else found["channels"]["lexical"]
        assert [h["id"] for h in ranked] == [written.memory_ids[0]]


@pytest.mark.parametrize("path", ["/v1/recall", "/v1/search"])
async def test_a_tag_filter_longer_than_allowed_is_refused_naming_it(api, path):
    """Each row is matched against every tag: 300,000 tags held a recall for 47 s over 500 memories, and the
    server's other requests behind it."""
    answer = await api.raw.post(path, json={"query": "tomatoes", "filters": {"tags": [f"t{i}" for i in range(MAX_FILTER_TAGS + 1)]}})
    assert answer.status == 422, await answer.text()
    assert (await answer.json())["error"]["field"] == "filters.tags"


async def test_recall_as_of(client):
    first = await client.add_memories({"memory": "The wifi password is hunter2"})
    [memory_id] = first.memory_ids
    updated = await client.update_memory(memory_id, {"memory": "The wifi password is correcthorse"})
    now = await client.recall("wifi password", min_position=updated.positions[-1])
    assert now["hits"][0]["memory"]["memory"].endswith("correcthorse")
    then = await client.recall("wifi password", as_of=first.positions[-1])
    assert then["as_of"] == first.positions[-1]
    assert then["hits"][0]["memory"]["memory"].endswith("hunter2")
    # The raw channels say the position they were read as of, as recall does: a time names the last position written by then.
    searched = await client.search("hunter2", as_of=first.positions[-1])
    assert searched["as_of"] == first.positions[-1] and [h["id"] for h in searched["channels"]["lexical"]] == [memory_id]
    assert (await client.search("hunter2"))["as_of"] is None


async def test_recall_does_not_write(api, client):
    await _people(client)
    tip = (await client.digest())["position"]
    for query in ("painting lake", "caroline", "anything at all"):
        await client.recall(query)
        await client.search(query)
    assert (await client.digest())["position"] == tip


async def test_search_returns_each_channels_own_ranking(client):
    painting, caroline, lake_house, taxes, position = await _people(client)
    result = await client.search("melanie painting lake", min_position=position)
    assert result["query"] == "melanie painting lake"
    assert set(result["channels"]) <= {"lexical", "semantic", "graph"}
    lexical = result["channels"]["lexical"]
    assert [h["rank"] for h in lexical] == list(range(1, len(lexical) + 1))
    assert painting in [h["id"] for h in lexical]
    graph = result["channels"]["graph"]
    by_id = {h["id"]: h for h in graph}
    assert painting in by_id and lake_house in by_id
    assert by_id[lake_house]["path"] == ["t:lake:1"]
    assert result["states"]["lexical"]["status"] == "ok"
    assert result["states"]["lexical"]["count"] == len(lexical)
    assert result["position"] >= position
    assert "painting" in result["terms"]
    only = await client.search("melanie painting", channels=["graph"], limit=1)
    assert list(only["channels"]) == ["graph"] and len(only["channels"]["graph"]) == 1


async def test_a_channel_requested_by_name_contributes_and_shows_its_ranks(client):
    """The hashing embedder's semantic weight is 0: asked for by name, the channel still ranks, and says why."""
    painting, caroline, lake_house, taxes, position = await _people(client)
    semantic = await client.recall("painting lake", channels=["semantic"], min_position=position)
    state = semantic["channels"]["semantic"]
    assert state["status"] == "ok" and state["weight"] > 0 and "requested" in state["reason"]
    assert semantic["strategy"] == "semantic-only"
    assert len(semantic["hits"]) == min(state["count"], 10) > 0
    assert all(set(h["channels"]) == {"semantic"} for h in semantic["hits"])
    assert [h["channels"]["semantic"]["rank"] for h in semantic["hits"]] == sorted(h["channels"]["semantic"]["rank"] for h in semantic["hits"])

    both = await client.recall("painting lake", channels=["semantic", "lexical"], min_position=position)
    assert both["strategy"] == "hybrid"
    ranked = {h["id"]: h["channels"] for h in both["hits"]}
    first = semantic["hits"][0]["id"]
    assert ranked[first]["semantic"]["rank"] == 1
    for hit in both["hits"]:
        assert "semantic" in hit["channels"] or hit["id"] not in {h["id"] for h in semantic["hits"]}

    # Not requested by name, the channel that cannot contribute says so.
    default = await client.recall("painting lake", min_position=position)
    assert default["channels"]["semantic"] == {"status": "off", "count": 0, "weight": 0.0, "reason": "weight 0 for this embedder",
                                               "embedder": "hashing-v1-256", "query_vector": None}
    assert all("semantic" not in h["channels"] for h in default["hits"])

    # A weight of 0 set in the request switches even a requested channel off, and says so.
    zero = await client.recall("painting lake", channels=["semantic", "lexical"], weights={"semantic": 0}, min_position=position)
    assert zero["channels"]["semantic"] == {"status": "off", "count": 0, "weight": 0.0, "reason": "weight 0 in the request",
                                            "embedder": "hashing-v1-256", "query_vector": None}
    assert zero["strategy"] == "lexical-only"


# -- fusion per request ------------------------------------------------------------------------


async def test_fusion_is_chosen_per_request_and_rrf_k_takes_effect_under_rrf(client):
    painting, caroline, lake_house, taxes, position = await _people(client)
    by_score = await client.recall("painting lake", min_position=position)
    assert by_score["fusion"] == "score"
    near = await client.recall("painting lake", fusion="rrf", rrf_k=1, min_position=position)
    far = await client.recall("painting lake", fusion="rrf", rrf_k=1000, min_position=position)
    assert near["fusion"] == far["fusion"] == "rrf"
    assert [h["id"] for h in near["hits"]][:1] == [painting]
    # 1/(k + rank): a small k separates the ranks far more than a large one.
    assert near["hits"][0]["score"] > 100 * far["hits"][0]["score"]
    explicit = await client.recall("painting lake", fusion="score", propagation=False, min_position=position)
    assert explicit["fusion"] == "score"


@pytest.mark.parametrize(
    "path, body, field",
    [
        ("/v1/recall", {"rrf_k": 10}, "rrf_k"),  # the default fusion is score
        ("/v1/recall", {"fusion": "score", "rrf_k": 10}, "rrf_k"),
        ("/v1/recall", {"fusion": "rrf", "propagation": True}, "propagation"),
        ("/v1/recall", {"fusion": "bayes"}, "fusion"),
        ("/v1/search", {"rrf_k": 10, "fusion": "rrf"}, "rrf_k"),
        ("/v1/search", {"propagation": False}, "propagation"),
        # Weights of 0 that leave no channel to run (the hashing embedder's semantic weight is 0): nothing could be found.
        ("/v1/recall", {"channels": ["lexical"], "weights": {"lexical": 0}}, "weights"),
        ("/v1/search", {"weights": {"lexical": 0, "graph": 0}}, "weights"),
    ],
)
async def test_parameters_that_do_not_apply_are_refused(api, path, body, field):
    response = await api.raw.post(path, json={"query": "painting lake", **body})
    assert response.status == 422, await response.text()
    assert (await response.json())["error"]["field"] == field


async def test_the_server_default_fusion_decides_what_applies(start):
    api = await start(recall_fusion="rrf")
    client = api.client()
    result = await client.recall("anything", rrf_k=5)
    assert result["fusion"] == "rrf"
    with pytest.raises(ApiError) as err:
        await client.recall("anything", propagation=True)
    assert (err.value.status, err.value.field) == (422, "propagation")
    assert (await client.recall("anything", fusion="score", propagation=True))["fusion"] == "score"

