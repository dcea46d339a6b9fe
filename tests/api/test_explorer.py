"""The explorer's page and its reads over real HTTP: whoami, the timeline, neighbourhood pages, a correlation."""

from __future__ import annotations

import re
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest

from mnemolog.api import routes_explorer

ROOT = Path(__file__).resolve().parents[2]


async def post(raw, path, body, headers=None):
    response = await raw.post(path, json=body, headers=headers or {})
    assert response.status in (200, 201), await response.text()
    return await response.json()


async def get(raw, path, status=200, headers=None, **params):
    response = await raw.get(path, params={k: v for k, v in params.items() if v is not None}, headers=headers or {})
    body = await response.json()
    assert response.status == status, body
    return body


async def add(raw, text, correlation=None):
    headers = {"X-Correlation-Id": correlation} if correlation else {}
    return await post(raw, "/v1/memories", {"memory": {"memory": text}}, headers)


# -- the page --------------------------------------------------------------------------------------


async def test_the_page_and_its_assets_load_without_a_key_under_a_strict_policy(start):
    api = await start(auth=True)
    for path, filename, media in routes_explorer.ASSETS:
        response = await api.raw.get(path)
        assert response.status == 200, path
        assert response.content_type == media
        policy = response.headers["Content-Security-Policy"]
        assert "default-src 'none'" in policy and "script-src 'self'" in policy and "connect-src 'self'" in policy
        assert "unsafe-inline" not in policy and "unsafe-eval" not in policy and "http" not in policy
        assert response.headers["X-Content-Type-Options"] == "nosniff"
        assert await response.read() == (routes_explorer.STATIC / filename).read_bytes()
    # The data calls need the key.
    assert (await api.raw.get("/v1/whoami")).status == 401
    assert (await api.raw.get("/v1/timeline")).status == 401


async def test_the_page_opens_from_a_link_with_a_query_string_or_a_trailing_slash(start):
    api = await start(auth=True)
    page = (routes_explorer.STATIC / "explorer.html").read_bytes()
    for path in ("/explorer?utm_source=mail", "/explorer?tenant=a&tenant=b", "/explorer/explorer.js?v=2"):
        response = await api.raw.get(path)
        assert response.status == 200, (path, await response.text())
    assert await (await api.raw.get("/explorer?from=chat")).read() == page
    moved = await api.raw.get("/explorer/?from=chat", allow_redirects=False)
    assert moved.status == 308 and moved.headers["Location"] == "/explorer?from=chat"
    assert await (await api.raw.get("/explorer/")).read() == page
    # The API's routes still refuse what they do not take.
    assert (await api.raw.get("/v1/timeline?limt=3")).status in (401, 422)
    assert (await get(api.raw, "/v1/timeline", status=422, headers={"Authorization": f"Bearer {api.key()}"}, limt=3))["error"]["field"] == "limt"


def test_the_page_renders_data_as_text_only_and_loads_nothing_from_elsewhere():
    scripts = {f: (routes_explorer.STATIC / f).read_text() for _, f, _ in routes_explorer.ASSETS if f.endswith(".js")}
    page = (routes_explorer.STATIC / "explorer.html").read_text()
    for name, script in scripts.items():
        for forbidden in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "localStorage"):
            assert forbidden not in script, (name, forbidden)
    assert "sessionStorage" in scripts["explorer.js"]
    # Every asset the page names, or its scripts import, is served, from this origin only; no inline script or style.
    imported = {"/explorer/" + m for script in scripts.values() for m in re.findall(r'^import .* from "\./([^"]+)";$', script, re.M)}
    assert imported and set(re.findall(r'(?:src|href)="([^"]+)"', page)) | imported == {p for p, f, _ in routes_explorer.ASSETS if not f.endswith(".html")}
    assert "<style" not in page and "style=" not in page and re.search(r"<script(?![^>]*src=)", page) is None


def test_the_package_ships_every_static_file():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["mnemolog.api"]
    files = [p.relative_to(ROOT / "api").as_posix() for p in (ROOT / "api" / "static").iterdir()]
    assert files and all(any(fnmatch(f, pattern) for pattern in patterns) for f in files), (files, patterns)
    assert {f for _, f, _ in routes_explorer.ASSETS} == {Path(f).name for f in files}


# -- whoami -------------------------------------------------------------------------------------------


async def test_whoami_names_the_keys_tenant_and_scopes_never_its_secret(start):
    api = await start(auth=True)
    secret, record = api.keystore.create("acme", ["read"], name="auditor")
    me = await get(api.raw, "/v1/whoami", headers={"Authorization": f"Bearer {secret}"})
    assert me == {"auth": True, "tenant": "acme", "key_id": record.key_id, "name": "auditor", "scopes": ["read"]}
    admin, _ = api.keystore.create("acme", ["admin"])
    me = await get(api.raw, "/v1/whoami", headers={"Authorization": f"Bearer {admin}"})
    assert me["scopes"] == ["read", "write", "admin"] and secret not in str(me) and admin not in str(me)
    everyone, _ = api.keystore.create("*", ["read", "write"])
    me = await get(api.raw, "/v1/whoami", headers={"Authorization": f"Bearer {everyone}", "X-Mnemolog-Tenant": "beta"})
    assert me["tenant"] == "beta" and me["scopes"] == ["read", "write"]
    bad = await get(api.raw, "/v1/whoami", status=401, headers={"Authorization": "Bearer mlk_nope"})
    assert bad["error"]["field"] == "Authorization"


async def test_whoami_without_auth_has_every_scope(api):
    assert await get(api.raw, "/v1/whoami") == {"auth": False, "tenant": "default", "key_id": None, "name": None, "scopes": ["read", "write", "admin"]}


# -- the timeline ---------------------------------------------------------------------------------


async def test_the_timeline_marks_each_commit_of_the_tenant_with_its_time_and_correlation(api):
    first = await add(api.raw, "one", "c-1")
    await post(api.raw, "/v1/memories", {"memory": {"memory": "elsewhere"}}, {"X-Mnemolog-Tenant": "other"})
    batch = await post(api.raw, "/v1/memories", {"memories": [{"memory": "two"}, {"memory": "three"}]}, {"X-Correlation-Id": "c-2"})
    timeline = await get(api.raw, "/v1/timeline")
    assert timeline["commits"] == 2 and not timeline["sampled"] and timeline["head_position"] == batch["positions"][-1]
    assert [(m["first_position"], m["position"], m["correlation_id"]) for m in timeline["marks"]] == [
        (first["positions"][0], first["positions"][-1], "c-1"),
        (batch["positions"][0], batch["positions"][-1], "c-2"),
    ]
    times = [m["recorded_at"] for m in timeline["marks"]]
    assert times == sorted(times) and all(t.endswith("Z") for t in times)
    # Each mark's time maps back to its position (as_of by time and by position agree).
    events = await get(api.raw, "/v1/events", as_of=times[0])
    assert events["events"][-1]["position"] == first["positions"][-1]
    empty = await get(api.raw, "/v1/timeline", headers={"X-Mnemolog-Tenant": "nobody"})
    assert empty["commits"] == 0 and empty["marks"] == []


async def test_a_sampled_timeline_stays_within_its_limit_and_keeps_both_ends(api):
    positions = [(await add(api.raw, f"memory {i}"))["positions"][-1] for i in range(23)]
    for limit in range(2, 26):
        timeline = await get(api.raw, "/v1/timeline", limit=limit)
        marks = [m["position"] for m in timeline["marks"]]
        assert len(marks) <= limit and marks[0] == positions[0] and marks[-1] == positions[-1], (limit, marks)
        assert marks == sorted(set(marks)) and set(marks) <= set(positions)
        assert timeline["sampled"] == (limit < 23) and (limit < 23 or marks == positions)
    bad = await get(api.raw, "/v1/timeline", status=422, limit=1)
    assert bad["error"]["field"] == "limit"


# -- neighbourhoods ---------------------------------------------------------------------------------


async def star(raw, leaves: int):
    """A hub memory linked to ``leaves`` memories; (hub, leaf ids in link order, the position before the last link)."""
    hub = (await add(raw, "the hub"))["memory_ids"][0]
    ids, before_last = [], 0
    for i in range(leaves):
        leaf = (await add(raw, f"leaf number {i}"))["memory_ids"][0]
        done = await post(raw, "/v1/edges", {"source": hub, "target": leaf, "edge_type": "RELATED"})
        before_last = done["positions"][0] - 1
        ids.append(leaf)
    return hub, ids, before_last


async def test_a_memory_neighbourhood_comes_in_pages_that_cover_it_once(api):
    hub, leaves, _ = await star(api.raw, 7)
    seen, offset, pages = [], 0, 0
    while offset is not None:
        page = await get(api.raw, "/v1/graph/neighborhood", node=hub, limit=3, offset=offset)
        assert page["nodes"][0] == {**page["nodes"][0], "id": hub, "depth": 0, "kind": "memory", "label": "the hub"}
        rest = page["nodes"][1:]
        assert len(rest) <= 3 and all(n["kind"] == "memory" and n["label"].startswith("leaf number") for n in rest)
        assert {(e["source"], e["target"]) for e in page["edges"]} == {(hub, n["id"]) for n in rest}
        seen += [n["id"] for n in rest]
        offset, pages = page["next_offset"], pages + 1
    assert sorted(seen) == sorted(leaves) and len(seen) == len(set(seen)) and pages == 3
    assert page["total"] == 7 and not page["more"]


async def test_a_deep_neighbourhood_in_pages_is_the_whole_walk_once_in_order(api):
    """Two levels, nodes of the second reached in another order than their ids sort in: every page is a slice of one walk."""
    hub = (await add(api.raw, "the hub"))["memory_ids"][0]
    kids = (await post(api.raw, "/v1/memories", {"memories": [{"memory": f"kid {i}"} for i in range(6)]}))["memory_ids"]
    grandkids = (await post(api.raw, "/v1/memories", {"memories": [{"memory": f"grandkid {i}"} for i in range(12)]}))["memory_ids"]
    for i, kid in enumerate(kids):
        await post(api.raw, "/v1/edges", {"source": hub, "target": kid, "edge_type": "RELATED"})
        for j in (0, 1):
            await post(api.raw, "/v1/edges", {"source": kid, "target": grandkids[(5 * i + 7 * j) % 12], "edge_type": "RELATED", "weight": 0.5 + 0.1 * j})
    whole = await get(api.raw, "/v1/graph/neighborhood", node=hub, depth=2, limit=500)
    walk = [n["id"] for n in whole["nodes"][1:]]
    linked = {grandkids[(5 * i + 7 * j) % 12] for i in range(6) for j in (0, 1)}  # 7 of them, most reached twice
    assert len(walk) == len(set(walk)) == whole["total"] == 13 and set(walk) == set(kids) | linked
    assert [n["depth"] for n in whole["nodes"][1:]] == sorted(n["depth"] for n in whole["nodes"][1:])  # breadth first
    for size in (1, 4, 5, 7):
        seen, offset = [], 0
        while offset is not None:
            page = await get(api.raw, "/v1/graph/neighborhood", node=hub, depth=2, limit=size, offset=offset)
            seen += [n["id"] for n in page["nodes"][1:]]
            offset = page["next_offset"]
        assert seen == walk, size


async def test_a_neighbourhood_paged_while_writes_go_on_covers_the_walk_it_started_once(api):
    """Each page says the position it read: read at it, the next pages continue that walk, whatever was linked since."""
    hub = (await add(api.raw, "the hub"))["memory_ids"][0]
    outs = (await post(api.raw, "/v1/memories", {"memories": [{"memory": f"out {i}"} for i in range(2)]}))["memory_ids"]
    ins = (await post(api.raw, "/v1/memories", {"memories": [{"memory": f"in {i}"} for i in range(2)]}))["memory_ids"]
    for leaf in outs:
        await post(api.raw, "/v1/edges", {"source": hub, "target": leaf, "edge_type": "RELATED"})
    for leaf in ins:
        await post(api.raw, "/v1/edges", {"source": leaf, "target": hub, "edge_type": "RELATED"})
    first = await get(api.raw, "/v1/graph/neighborhood", node=hub, limit=3)
    assert first["as_of"] is None and first["position"] == (await get(api.raw, "/v1/capabilities"))["head_position"]
    late = (await add(api.raw, "linked while paging"))["memory_ids"][0]
    await post(api.raw, "/v1/edges", {"source": hub, "target": late, "edge_type": "RELATED"})  # walked before the in-edges
    second = await get(api.raw, "/v1/graph/neighborhood", node=hub, limit=3, offset=first["next_offset"], as_of=first["position"])
    assert second["position"] == first["position"] == second["as_of"]
    walked = [n["id"] for n in first["nodes"][1:] + second["nodes"][1:]]
    assert sorted(walked) == sorted(outs + ins) and len(set(walked)) == 4 and second["total"] == 4
    now = await get(api.raw, "/v1/graph/neighborhood", node=hub, limit=10)
    assert now["total"] == 5 and now["position"] > first["position"]


async def test_a_neighbourhood_as_of_a_position_is_the_graph_of_then(api):
    hub, leaves, before_last = await star(api.raw, 3)
    then = await get(api.raw, "/v1/graph/neighborhood", node=hub, as_of=before_last, limit=10)
    assert {n["id"] for n in then["nodes"][1:]} == set(leaves[:2]) and then["as_of"] == before_last
    # Types filter, direction.
    assert len((await get(api.raw, "/v1/graph/neighborhood", node=hub, type="FOLLOWS"))["nodes"]) == 1
    assert len((await get(api.raw, "/v1/graph/neighborhood", node=hub, direction="in"))["nodes"]) == 1


async def test_a_neighbourhood_of_one_edge_type_draws_only_edges_of_that_type(api):
    a, b = (await post(api.raw, "/v1/memories", {"memories": [{"memory": "first"}, {"memory": "second"}]}))["memory_ids"]
    await post(api.raw, "/v1/edges", {"source": a, "target": b, "edge_type": "FOLLOWS", "edge_id": "t:f:1"})
    await post(api.raw, "/v1/edges", {"source": a, "target": b, "edge_type": "RELATED", "edge_id": "t:r:1"})
    page = await get(api.raw, "/v1/graph/neighborhood", node=a, type="FOLLOWS")
    assert [n["id"] for n in page["nodes"]] == [a, b]
    assert [e["id"] for e in page["edges"]] == ["t:f:1"]


async def test_a_page_with_more_edges_than_it_draws_says_so_and_keeps_the_walks_edges(api, monkeypatch):
    """Many edges between a few nodes: the page draws eight a node, the edges its walk took first, and says it cut."""
    from mnemolog.api import explorer_reads

    monkeypatch.setattr(explorer_reads, "EDGES_PER_NODE", 1)
    a, b, c = (await post(api.raw, "/v1/memories", {"memories": [{"memory": "hub"}, {"memory": "near"}, {"memory": "far"}]}))["memory_ids"]
    for n in range(3):  # linked before the walk's own edges: without a choice they would be the ones drawn
        await post(api.raw, "/v1/edges", {"source": b, "target": a, "edge_type": "RELATED", "edge_id": f"t:extra:{n}"})
    await post(api.raw, "/v1/edges", {"source": a, "target": b, "edge_type": "FOLLOWS", "edge_id": "t:walk:1"})
    await post(api.raw, "/v1/edges", {"source": b, "target": c, "edge_type": "FOLLOWS", "edge_id": "t:walk:2"})
    page = await get(api.raw, "/v1/graph/neighborhood", node=a, depth=2, limit=2)
    assert [n["id"] for n in page["nodes"]] == [a, b, c] and page["edges_truncated"] is True
    assert len(page["edges"]) == 2 and {e["id"] for e in page["edges"]} <= {"t:extra:0", "t:walk:1", "t:walk:2"}
    assert "t:walk:2" in {e["id"] for e in page["edges"]}  # c is drawn joined to the walk
    whole = await get(api.raw, "/v1/graph/neighborhood", node=a, depth=2, limit=5)
    assert whole["edges_truncated"] is False and len(whole["edges"]) == 5


async def test_an_entity_neighbourhood_walks_relations_with_names(api):
    for eid, name in (("ada", "Ada"), ("bob", "Bob"), ("cy", "Cy")):
        await api.raw.put(f"/v1/entities/{eid}", json={"name": name, "entity_type": "person"})
    await post(api.raw, "/v1/entities/ada/relations", {"target_id": "bob", "relation_type": "KNOWS"})
    await post(api.raw, "/v1/entities/bob/relations", {"target_id": "cy", "relation_type": "WORKS_WITH", "weight": 0.5})
    page = await get(api.raw, "/v1/graph/neighborhood", node="ada", kind="entity", depth=2, direction="out")
    assert [(n["id"], n["label"], n["depth"]) for n in page["nodes"]] == [("ada", "Ada", 0), ("bob", "Bob", 1), ("cy", "Cy", 2)]
    assert {(e["source"], e["type"], e["target"]) for e in page["edges"]} == {("ada", "KNOWS", "bob"), ("bob", "WORKS_WITH", "cy")}
    assert page["total"] == 2
    first = await get(api.raw, "/v1/graph/neighborhood", node="ada", kind="entity", depth=2, direction="out", limit=1)
    assert [n["id"] for n in first["nodes"]] == ["ada", "bob"] and first["more"] and first["next_offset"] == 1
    second = await get(api.raw, "/v1/graph/neighborhood", node="ada", kind="entity", depth=2, direction="out", limit=1, offset=1)
    assert [n["id"] for n in second["nodes"]] == ["ada", "cy"] and second["edges"] == [] and not second["more"]


async def test_an_entity_neighbourhood_pages_through_all_of_it_breadth_first(api, monkeypatch):
    """However many entities it reaches (past the walk's cap for /related too), the pages cover them all once, depth by depth."""
    from mnemolog.projections.entities import projector

    monkeypatch.setattr(projector, "RELATED_MAX_NODES", 4)
    names = ["hub", "weak", *(f"near{i}" for i in range(5)), "far"]
    for name in names:
        await api.raw.put(f"/v1/entities/{name}", json={"name": name.title(), "entity_type": "thing"})
    await post(api.raw, "/v1/entities/hub/relations", {"target_id": "weak", "relation_type": "KNOWS", "weight": 0.2})
    for i in range(5):
        await post(api.raw, "/v1/entities/hub/relations", {"target_id": f"near{i}", "relation_type": "KNOWS"})
    await post(api.raw, "/v1/entities/near0/relations", {"target_id": "far", "relation_type": "KNOWS"})  # depth 2, stronger than weak
    seen, depths, offset = [], [], 0
    while offset is not None:
        page = await get(api.raw, "/v1/graph/neighborhood", node="hub", kind="entity", depth=2, direction="out", limit=3, offset=offset)
        seen += [n["id"] for n in page["nodes"][1:]]
        depths += [n["depth"] for n in page["nodes"][1:]]
        offset = page["next_offset"]
    assert sorted(seen) == sorted(names[1:]) and len(seen) == len(set(seen)) and page["total"] == 7
    assert depths == sorted(depths) and seen[-1] == "far"


@pytest.mark.parametrize(
    "params, field",
    [({}, "node"), ({"node": "x", "kind": "person"}, "kind"), ({"node": "x", "depth": 9}, "depth"), ({"node": "x", "direction": "up"}, "direction"),
     ({"node": "x", "limit": 0}, "limit"), ({"node": "x", "offset": -1}, "offset"), ({"node": "x", "as_of": "yesterday"}, "as_of")],
)
async def test_a_bad_neighbourhood_request_names_its_field(api, params, field):
    body = await get(api.raw, "/v1/graph/neighborhood", status=422, **params)
    assert body["error"]["field"] == field


@pytest.mark.parametrize("written", ["1_0", "\u0661\u0660", "+3", "3.0", "0x3"])
async def test_a_page_number_written_other_than_in_digits_is_refused_naming_it(api, written):
    """As ``as_of`` is: ``int()`` would read '1_0' as 10 and Arabic-Indic digits as theirs, and a typo would page somewhere else."""
    hub, _, _ = await star(api.raw, 2)
    for path, params, field in (
        ("/v1/graph/neighborhood", {"node": hub, "offset": written}, "offset"),
        ("/v1/graph/neighborhood", {"node": hub, "limit": written}, "limit"),
        ("/v1/correlation", {"correlation_id": "x", "after": written}, "after"),
        ("/v1/memories/%s/history" % hub, {"after": written}, "after"),
        ("/v1/timeline", {"limit": written}, "limit"),
    ):
        body = await get(api.raw, path, status=422, **params)
        assert body["error"]["field"] == field, (path, body)


async def test_an_unknown_node_is_not_found(api):
    assert (await get(api.raw, "/v1/graph/neighborhood", status=404, node="nope"))["error"]["code"] == "not_found"
    assert (await get(api.raw, "/v1/graph/neighborhood", status=404, node="nope", kind="entity"))["error"]["code"] == "not_found"


# -- one correlation -----------------------------------------------------------------------------------


async def test_a_correlation_lists_its_events_in_pages_and_the_revert_of_it(api):
    batch = await post(api.raw, "/v1/memories", {"memories": [{"memory": f"imported {i}"} for i in range(5)]}, {"X-Correlation-Id": "import-1"})
    await add(api.raw, "unrelated", "other")
    seen = await get(api.raw, "/v1/correlation", correlation_id="import-1", limit=2)
    assert [e["position"] for e in seen["events"]] == batch["positions"][:2] and seen["more"] and seen["next_after"] == batch["positions"][1]
    rest = await get(api.raw, "/v1/correlation", correlation_id="import-1", after=seen["next_after"], limit=10)
    assert [e["position"] for e in rest["events"]] == batch["positions"][2:] and not rest["more"]
    assert all(e["metadata"]["correlation_id"] == "import-1" and e["type"] == "MemoryAdded" for e in seen["events"] + rest["events"])
    assert seen["reverted_by"] == [] and seen["reverts"] is None
    revert = await post(api.raw, "/v1/reverts", {"correlation_id": "import-1"}, {"X-Correlation-Id": "undo-1"})
    after = await get(api.raw, "/v1/correlation", correlation_id="import-1")
    [mark] = after["reverted_by"]
    assert mark["correlation_id"] == "undo-1" and mark["reverted"] == 5 and mark["position"] in revert["positions"]
    assert (await get(api.raw, "/v1/correlation", correlation_id="undo-1"))["reverts"] == "import-1"
    # Another tenant sees none of it.
    hidden = await get(api.raw, "/v1/correlation", correlation_id="import-1", status=404, headers={"X-Mnemolog-Tenant": "other"})
    assert hidden["error"]["code"] == "not_found"
    assert (await get(api.raw, "/v1/correlation", status=422))["error"]["field"] == "correlation_id"


async def test_a_correlation_whose_revert_was_reverted_reads_as_in_effect_again(api):
    """Reverted, the revert reverted, reverted again (through that last revert): each page says whether its changes stand now."""
    memory = (await add(api.raw, "kept", "import-1"))["memory_ids"][0]
    first = await get(api.raw, "/v1/correlation", correlation_id="import-1")
    assert first["reverted"] is False and first["revert_chain"] == []
    await post(api.raw, "/v1/reverts", {"correlation_id": "import-1"}, {"X-Correlation-Id": "undo-1"})
    undone = await get(api.raw, "/v1/correlation", correlation_id="import-1")
    assert undone["reverted"] is True and undone["revert_chain"] == ["undo-1"]
    await post(api.raw, "/v1/reverts", {"correlation_id": "undo-1"}, {"X-Correlation-Id": "redo-1"})
    assert (await get(api.raw, f"/v1/memories/{memory}"))["status"] == "activated"
    again = await get(api.raw, "/v1/correlation", correlation_id="import-1")
    assert [r["correlation_id"] for r in again["reverted_by"]] == ["undo-1"]
    assert again["reverted"] is False and again["revert_chain"] == ["undo-1", "redo-1"]  # in effect: a revert would undo it
    revert_page = await get(api.raw, "/v1/correlation", correlation_id="undo-1")
    assert revert_page["reverted"] is True and revert_page["revert_chain"] == ["redo-1"] and revert_page["reverts"] == "import-1"
    through = await post(api.raw, "/v1/reverts", {"correlation_id": "import-1"}, {"X-Correlation-Id": "undo-2"})
    assert through["data"]["through"] == "redo-1" and (await get(api.raw, f"/v1/memories/{memory}"))["status"] == "deleted"
    last = await get(api.raw, "/v1/correlation", correlation_id="import-1")
    assert last["reverted"] is True and last["revert_chain"] == ["undo-1", "redo-1", "undo-2"]
    repeated = await post(api.raw, "/v1/reverts", {"correlation_id": "import-1"}, {"X-Correlation-Id": "undo-3"})
    assert repeated["data"]["already_reverted"] is True and repeated["positions"] == []
    assert (await get(api.raw, "/v1/correlation", correlation_id="import-1"))["revert_chain"] == ["undo-1", "redo-1", "undo-2"]


async def test_an_unknown_correlation_is_not_found_whatever_the_cursor(api):
    """As a history or a neighbourhood: the page after any position of a correlation that wrote nothing is a 404, never an empty last page."""
    written = await add(api.raw, "one", "import-1")
    position = written["positions"][-1]
    for after in (0, 1, position, position + 5):
        missing = await get(api.raw, "/v1/correlation", status=404, correlation_id="import-2", after=after)
        assert missing["error"]["code"] == "not_found"
    last = await get(api.raw, "/v1/correlation", correlation_id="import-1", after=position)
    assert last["events"] == [] and not last["more"] and last["next_after"] == position


async def test_every_page_of_a_revert_names_what_it_reverted(api):
    """``reverts`` describes the correlation, not the page: a later page, or a first page before its marker, names it too."""
    await post(api.raw, "/v1/memories", {"memories": [{"memory": f"imported {i}"} for i in range(3)]}, {"X-Correlation-Id": "import-1"})
    await add(api.raw, "written first", "session-1")  # the same correlation id then reverts the import
    await post(api.raw, "/v1/reverts", {"correlation_id": "import-1"}, {"X-Correlation-Id": "session-1"})
    after, pages = 0, []
    while True:
        page = await get(api.raw, "/v1/correlation", correlation_id="session-1", after=after, limit=1)
        pages.append(page)
        if not page["more"]:
            break
        after = page["next_after"]
    assert [p["events"][0]["type"] for p in pages[:2]] == ["MemoryAdded", "CorrelationReverted"] and len(pages) > 2
    assert [p["reverts"] for p in pages] == ["import-1"] * len(pages)
