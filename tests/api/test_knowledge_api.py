"""The knowledge-graph endpoints through aiohttp: entities, relations, tags, import, relink, links, cards."""

from __future__ import annotations

import base64
import io

import aiohttp
import pytest

from mnemolog.api.app import create_app
from mnemolog.eventstore.settings import Settings


@pytest.fixture
async def http(aiohttp_client, tmp_path):
    return await aiohttp_client(create_app(Settings({"data_dir": str(tmp_path), "auth": False})))


async def call(http, method: str, path: str, status: int = 200, **kw):
    response = await http.request(method, path, **kw)
    body = await response.json()
    assert response.status == status, body
    return body


def pdf_bytes(pages: list[str]) -> bytes:
    from pypdf import PdfWriter
    from pypdf.generic import ContentStream, DictionaryObject, NameObject

    writer = PdfWriter()
    for text in pages:
        page = writer.add_blank_page(612, 792)
        font = DictionaryObject({NameObject("/Type"): NameObject("/Font"), NameObject("/Subtype"): NameObject("/Type1"), NameObject("/BaseFont"): NameObject("/Helvetica")})
        page[NameObject("/Resources")] = DictionaryObject({NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})
        stream = ContentStream(None, writer)
        stream.set_data(f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode())
        page.replace_contents(stream)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


async def test_entity_crud_relations_and_tags(http):
    created = await call(
        http, "PUT", "/v1/entities/person:ada", 201,
        json={"name": "Ada Lovelace", "entity_type": "person", "aliases": ["Ada"], "tags": [f"t{i}" for i in range(10)], "properties": {"born": "1815"}},
    )
    assert created["data"]["tags_kept"] == 8 and created["data"]["tags_dropped"] == 2 and created["positions"]
    same = await call(http, "PUT", "/v1/entities/person:ada", 200, json={"name": "Ada Lovelace", "entity_type": "person", "aliases": ["Ada"], "tags": [f"t{i}" for i in range(8)], "properties": {"born": "1815"}})
    assert same["positions"] == [] and same["data"]["changed"] is False
    await call(http, "PUT", "/v1/entities/thing:engine", 201, json={"name": "Analytical Engine"})
    await call(http, "PUT", "/v1/entities/person:babbage", 201, json={"name": "Charles Babbage", "tags": ["inventor"]})

    rel = await call(http, "POST", "/v1/entities/person:ada/relations", 201, json={"target_id": "thing:engine", "relation_type": "wrote_about", "weight": 0.5})
    assert rel["data"]["edge_id"] == "rel:person:ada:WROTE_ABOUT:thing:engine"
    before = rel["positions"][-1]
    await call(http, "POST", "/v1/entities/person:ada/relations", 200, json={"target_id": "thing:engine", "relation_type": "wrote_about", "weight": 0.9})
    await call(http, "POST", "/v1/entities/thing:engine/relations", 201, json={"target_id": "person:babbage", "relation_type": "built_by", "weight": 0.5})

    bad = await call(http, "POST", "/v1/entities/person:ada/relations", 422, json={"target_id": "thing:engine", "relation_type": "x", "weight": 1.5})
    assert bad["error"]["field"] == "weight"
    missing = await call(http, "POST", "/v1/entities/person:ada/relations", 404, json={"target_id": "thing:nothing", "relation_type": "x"})
    assert missing["error"]["code"] == "not_found"

    entity = await call(http, "GET", "/v1/entities/person:ada")
    assert entity["name"] == "Ada Lovelace" and entity["properties"] == {"born": "1815"}
    assert entity["relations"] == [{"source_id": "person:ada", "target_id": "thing:engine", "relation_type": "WROTE_ABOUT", "weight": 0.9}]
    await call(http, "GET", "/v1/entities/person:nobody", 404)

    related = await call(http, "GET", "/v1/entities/person:ada/related?depth=2&direction=out")
    assert [(r["id"], r["name"], r["score"]) for r in related["related"]] == [("thing:engine", "Analytical Engine", 0.9), ("person:babbage", "Charles Babbage", 0.45)]
    only = await call(http, "GET", "/v1/entities/person:ada/related?depth=2&type=wrote_about")
    assert [r["id"] for r in only["related"]] == ["thing:engine"]
    past = await call(http, "GET", f"/v1/entities/person:ada/related?depth=1&as_of={before}")
    assert past["related"][0]["score"] == 0.5
    assert (await call(http, "GET", "/v1/entities/person:ada/related?depth=0"))["related"] == []
    await call(http, "GET", "/v1/entities/ghost/related?depth=0", 404)
    await call(http, "GET", "/v1/entities/person:ada/related?direction=up", 422)

    found = await call(http, "GET", "/v1/entities?q=lovelace")
    assert [e["id"] for e in found["entities"]] == ["person:ada"]
    tagged = await call(http, "GET", "/v1/entities?tag=inventor")
    assert [e["id"] for e in tagged["entities"]] == ["person:babbage"]
    tags = await call(http, "GET", "/v1/tags?prefix=in")
    assert tags["tags"] == [{"tag": "inventor", "entities": 1}]
    await call(http, "PUT", "/v1/entities/person:babbage/tags", 200, json={"tags": ["Engineer"]})
    assert (await call(http, "GET", "/v1/tags?prefix=in"))["tags"] == []

    await call(http, "DELETE", "/v1/entities/person:ada/relations", 200, json={"target_id": "thing:engine", "relation_type": "WROTE_ABOUT"})
    await call(http, "DELETE", "/v1/entities/person:ada/relations?target_id=thing:engine&relation_type=wrote_about", 404)
    removed = await call(http, "DELETE", "/v1/entities/thing:engine", 200)
    assert removed["data"]["removed_relations"] == 1
    await call(http, "GET", "/v1/entities/thing:engine", 404)
    assert (await call(http, "GET", f"/v1/entities/thing:engine?as_of={before}"))["name"] == "Analytical Engine"


async def test_a_relation_to_remove_is_named_in_the_query_or_in_the_body_never_half_in_each(http):
    """Each mix removed what one half named and dropped the other half silently (or the body, with a target_id in the query)."""
    await call(http, "PUT", "/v1/entities/person:ada", 201, json={"name": "Ada"})
    for target in ("city:lisbon", "city:paris"):
        await call(http, "PUT", f"/v1/entities/{target}", 201, json={"name": target})
        await call(http, "POST", "/v1/entities/person:ada/relations", 201, json={"target_id": target, "relation_type": "visited"})
    path = "/v1/entities/person:ada/relations"
    both = await call(http, "DELETE", f"{path}?target_id=city:lisbon&relation_type=visited", 422, json={"target_id": "city:paris", "relation_type": "visited"})
    assert both["error"]["field"] == "body"
    half = await call(http, "DELETE", f"{path}?relation_type=visited", 422, json={"target_id": "city:paris"})
    assert half["error"]["field"] == "body"
    alone = await call(http, "DELETE", f"{path}?relation_type=visited", 422)
    assert alone["error"]["field"] == "target_id"
    untyped = await call(http, "DELETE", f"{path}?target_id=city:paris&reason=moved", 422)
    assert untyped["error"]["field"] == "relation_type"
    related = await call(http, "GET", "/v1/entities/person:ada/related")
    assert sorted(r["id"] for r in related["related"]) == ["city:lisbon", "city:paris"]  # nothing removed
    await call(http, "DELETE", f"{path}?target_id=city:lisbon&relation_type=visited&reason=moved", 200)
    await call(http, "DELETE", path, 200, json={"target_id": "city:paris", "relation_type": "visited"})
    assert (await call(http, "GET", "/v1/entities/person:ada/related"))["related"] == []


async def test_import_json_with_a_corrupt_file_then_relink_and_undo(http):
    await call(http, "PUT", "/v1/entities/person:babbage", 201, json={"name": "Charles Babbage", "aliases": ["Babbage"]})
    body = {
        "collection": "history",
        "documents": [
            {"filename": "a.md", "content": "# A\n\nCharles Babbage built an engine.\n"},
            {"filename": "b.pdf", "content": base64.b64encode(pdf_bytes(["Babbage and the engine, page one.", "Page two."])).decode(), "encoding": "base64", "lang": "en"},
            {"filename": "c.pdf", "content": base64.b64encode(b"%PDF-1.4 broken").decode(), "encoding": "base64"},
            {"filename": "d.md", "content": "not base64!", "encoding": "base64"},
        ],
    }
    report = await call(http, "POST", "/v1/import/documents", json=body)
    assert (report["documents"], report["chunks"], report["skipped"], report["failed"]) == (2, 3, 0, 2)
    by_name = {r["filename"]: r for r in report["results"]}
    assert by_name["c.pdf"]["reason"] == "corrupt" and by_name["a.md"]["mentions"] == by_name["b.pdf"]["mentions"] == 2
    again = await call(http, "POST", "/v1/import/documents", json={"filename": "a.md", "content": "# A\n\nCharles Babbage built an engine.\n"})
    assert (again["documents"], again["skipped"]) == (0, 1)
    await call(http, "POST", "/v1/import/documents", 422, json={"documents": [{"filename": "x.md", "content": "x", "doc_id": "../x"}]})

    await call(http, "PUT", "/v1/entities/thing:engine", 201, json={"name": "Engine"})
    dry = await call(http, "POST", "/v1/graph/relink", json={})
    assert dry["dry_run"] and dry["add"] == 4 and dry["remove"] == 0  # chunk and document edges of a.md and b.pdf
    assert dry["cross_document_pairs"] == [{"documents": ["a.md", "b.pdf"], "new_shared_entities": ["thing:engine"], "new_pair": False}]
    committed = await call(http, "POST", "/v1/graph/relink", json={"commit": True})
    assert committed["committed"] and committed["add"] == 4
    links = await call(http, "POST", "/v1/graph/document-links", json={})
    assert links["pairs"][0]["documents"] == ["a.md", "b.pdf"] and {s["entity_id"] for s in links["pairs"][0]["shared"]} == {"person:babbage", "thing:engine"}
    undo = await call(http, "POST", "/v1/edges/undo-namespace", json={"prefix": committed["prefix"]})
    assert undo["data"]["removed"] == 4
    assert (await call(http, "POST", "/v1/graph/relink", json={}))["add"] == 4


async def test_multipart_import(http):
    form = aiohttp.FormData()
    form.add_field("collection", "kb")
    form.add_field("file", b"First note about valves.\n", filename="one.txt", content_type="text/plain")
    form.add_field("file", b"\xff\xfe not utf-8", filename="two.txt", content_type="text/plain")
    form.add_field("file", b"ignored", filename="three.docx", content_type="application/octet-stream")
    report = await call(http, "POST", "/v1/import/documents", data=form)
    assert (report["documents"], report["failed"]) == (1, 2)
    assert sorted(r["reason"] for r in report["results"] if r["status"] == "failed") == ["decode", "unsupported"]
    [ok] = [r for r in report["results"] if r["status"] == "imported"]
    assert ok["doc_id"] == "one.txt" and len(ok["memory_ids"]) == 1
    memory = await call(http, "GET", f"/v1/memories/{ok['memory_ids'][0]}")
    assert memory["memory_type"] == "RawFileMemory" and memory["metadata"]["collection"] == "kb"


async def test_relation_cards(http):
    await call(http, "PUT", "/v1/entities/person:ada", 201, json={"name": "Ada Lovelace", "aliases": ["Ada"]})
    await call(http, "PUT", "/v1/entities/thing:engine", 201, json={"name": "Analytical Engine"})
    await call(http, "POST", "/v1/entities/person:ada/relations", 201, json={"target_id": "thing:engine", "relation_type": "wrote_about"})
    none = await call(http, "POST", "/v1/relations", json={"question": "Is it going to rain?"})
    assert none["matched"] is False and none["cards"] == []
    cards = await call(http, "POST", "/v1/relations", json={"question": "What did Ada write about?"})
    assert cards["matched"] and cards["cards"][0]["relations"][0]["name"] == "Analytical Engine"
    await call(http, "POST", "/v1/relations", 422, json={"question": ""})


async def test_tenants_do_not_see_each_other(http):
    await call(http, "PUT", "/v1/entities/e1", 201, json={"name": "Secret"}, headers={"X-Mnemolog-Tenant": "one"})
    await call(http, "GET", "/v1/entities/e1", 404, headers={"X-Mnemolog-Tenant": "two"})
    assert (await call(http, "GET", "/v1/entities?q=secret", headers={"X-Mnemolog-Tenant": "two"}))["entities"] == []


async def test_idempotent_retries_answer_as_the_first_request(http):
    await call(http, "PUT", "/v1/entities/org:acme", 201, json={"name": "Acme"})
    headers = {"Idempotency-Key": "import-1"}
    body = {"documents": [{"filename": "x.md", "content": "Acme makes anvils.\n"}, {"filename": "y.md", "content": "Acme also makes rockets.\n"}]}
    first = await call(http, "POST", "/v1/import/documents", json=body, headers=headers)
    second = await call(http, "POST", "/v1/import/documents", json=body, headers=headers)
    assert first["documents"] == second["documents"] == 2
    assert [r["positions"] for r in first["results"]] == [r["positions"] for r in second["results"]]
    assert [r["version"] for r in second["results"]] == [1, 1]
    await call(http, "PUT", "/v1/entities/thing:anvil", 201, json={"name": "anvils"})
    once = await call(http, "POST", "/v1/graph/relink", json={"commit": True}, headers={"Idempotency-Key": "relink-1"})
    twice = await call(http, "POST", "/v1/graph/relink", json={"commit": True}, headers={"Idempotency-Key": "relink-1"})
    assert once["committed"] and twice["committed"] and twice["replayed"]
    assert (twice["run_id"], twice["positions"]) == (once["run_id"], once["positions"])


async def test_documents_with_the_same_file_name_stay_apart(http):
    a, b = "Project A uses PostgreSQL for storage.\n", "Project B uses Redis as a cache.\n"
    form = aiohttp.FormData()
    form.add_field("file", a.encode(), filename="a/README.md", content_type="text/markdown")
    form.add_field("file", b.encode(), filename="b/README.md", content_type="text/markdown")
    report = await call(http, "POST", "/v1/import/documents", data=form)
    assert sorted((r["doc_id"], r["version"]) for r in report["results"]) == [("a/README.md", 1), ("b/README.md", 1)]
    head = (await call(http, "GET", "/v1/digest"))["position"]
    again = aiohttp.FormData()
    again.add_field("file", a.encode(), filename="a/README.md", content_type="text/markdown")
    again.add_field("file", b.encode(), filename="b/README.md", content_type="text/markdown")
    assert (await call(http, "POST", "/v1/import/documents", data=again))["skipped"] == 2
    # An explicit id, and in JSON; unchanged content under it writes nothing either.
    one = aiohttp.FormData()
    one.add_field("doc_id", "guide")
    one.add_field("file", a.encode(), filename="README.md", content_type="text/markdown")
    assert (await call(http, "POST", "/v1/import/documents", data=one))["results"][0]["doc_id"] == "guide"
    body = {"documents": [{"filename": "README.md", "content": b, "doc_id": "docs/guide.md"}, {"filename": "other/README.md", "content": a}]}
    done = await call(http, "POST", "/v1/import/documents", json=body)
    assert [r["doc_id"] for r in done["results"]] == ["docs/guide.md", "other/README.md"]
    head = (await call(http, "GET", "/v1/digest"))["position"]
    assert (await call(http, "POST", "/v1/import/documents", json=body))["skipped"] == 2
    assert (await call(http, "GET", "/v1/digest"))["position"] == head
    recall = await call(http, "POST", "/v1/recall", json={"query": "which database does project A use for storage", "filters": {"doc_ids": ["a/README.md"]}})
    assert recall["hits"] and "PostgreSQL" in recall["hits"][0]["memory"]["memory"]


async def test_two_documents_of_one_request_with_one_id_are_refused(http):
    head = (await call(http, "GET", "/v1/digest"))["position"]
    form = aiohttp.FormData()
    form.add_field("file", b"one\n", filename="x/README.md", content_type="text/markdown")
    form.add_field("file", b"two\n", filename="y/README.md", content_type="text/markdown")
    form.add_field("doc_id", "same")
    error = await call(http, "POST", "/v1/import/documents", 422, data=form)
    assert error["error"]["field"] == "doc_id"
    body = {"documents": [{"filename": "README.md", "content": "one"}, {"filename": "README.md", "content": "two"}]}
    error = await call(http, "POST", "/v1/import/documents", 422, json=body)
    assert error["error"]["field"] == "documents[1].doc_id" and "README.md" in error["error"]["message"]
    assert (await call(http, "GET", "/v1/digest"))["position"] == head


async def test_memories_added_over_http_link_the_entities_they_mention_and_history_shows_it(http):
    await call(http, "PUT", "/v1/entities/alice", 201, json={"name": "Alice", "entity_type": "person"})
    await call(http, "PUT", "/v1/entities/acme", 201, json={"name": "Acme Corp", "aliases": ["Acme"]})
    added = await call(http, "POST", "/v1/memories", 201, json={"memory": {"memory": "Alice joined Acme Corp as an engineer in 2021"}})
    [memory_id] = added["memory_ids"]
    assert added["data"]["mentions"] == 2
    history = await call(http, "GET", f"/v1/memories/{memory_id}/history")
    assert history["versions"][0]["mentions"] == ["alice", "acme"]
    assert [(x["entity_id"], x["alias"], x["unlinked_at"]) for x in history["mention_links"]] == [("alice", "alice", None), ("acme", "acme corp", None)]
    before = added["positions"][0]
    hood = await call(http, "GET", "/v1/graph/neighbors", params={"node": "acme"})
    assert memory_id in {r["node"] for r in hood["reached"]}
    then = await call(http, "GET", "/v1/graph/neighbors", params={"node": "acme", "as_of": str(before)})
    assert memory_id not in {r["node"] for r in then["reached"]}
    graph = await call(http, "POST", "/v1/recall", json={"query": "what else do we know about Acme?", "channels": ["graph"]})
    assert [h["id"] for h in graph["hits"] if h["kind"] == "memory"] == [memory_id]
    assert [h["id"] for h in graph["hits"] if h["kind"] == "entity"] == ["acme"]

    await call(http, "PUT", "/v1/entities/y2021", 201, json={"name": "2021 intake", "aliases": ["engineer"]})
    dry = await call(http, "POST", "/v1/graph/relink", json={})
    assert dry["memories"] == 1 and dry["by_kind"]["memories"] == {"add": 1, "remove": 0, "kept": 2}
    await call(http, "POST", "/v1/reverts", json={"correlation_id": added["correlation_id"]})
    history = await call(http, "GET", f"/v1/memories/{memory_id}/history")
    assert history["versions"][-1]["status"] == "deleted" and history["versions"][-1]["mentions"] == []
    assert all(x["unlinked_at"] is not None for x in history["mention_links"])


@pytest.mark.parametrize("field", ["doc_id", "lang", "collection"])
async def test_a_form_field_given_twice_is_refused_naming_it_and_nothing_is_written(http, field):
    head = (await call(http, "GET", "/v1/digest"))["position"]
    form = aiohttp.FormData()
    form.add_field("file", b"Notes about rivers.\n", filename="notes.md", content_type="text/markdown")
    form.add_field(field, "first")
    form.add_field(field, "second")
    error = await call(http, "POST", "/v1/import/documents", 422, data=form)
    assert error["error"]["field"] == field and "more than once" in error["error"]["message"]
    assert (await call(http, "GET", "/v1/digest"))["position"] == head


@pytest.mark.parametrize(
    "name, aliases, query",
    [
        ("Ａｃｍｅ Corp", [], "acme"),  # full-width letters found by their ASCII spelling
        ("Acme Corp", [], "ＡＣＭＥ"),  # and the other way round
        ("Beijing Office", ["ＢＥＩＪＩＮＧ ＨＱ"], "beijing hq"),
        ("Cafe\u0301 Central", [], "café"),  # decomposed in the name, composed in the query
        ("Café Central", [], "cafe\u0301"),
        ("ﬁnance team", [], "finance"),  # a ligature
        ("東京ｵﾌｨｽ", [], "オフィス"),  # half-width katakana
    ],
)
async def test_finding_entities_by_keyword_reads_text_as_the_linker_does(http, name, aliases, query):
    """A keyword finds the entity whatever Unicode form either is written in (NFKC, case folded), as relation cards and recall do."""
    await call(http, "PUT", "/v1/entities/target", 201, json={"name": name, "aliases": aliases})
    await call(http, "PUT", "/v1/entities/other", 201, json={"name": "Unrelated"})
    found = await call(http, "GET", "/v1/entities", params={"q": query})
    assert [e["id"] for e in found["entities"]] == ["target"]
    assert found["entities"][0]["name"] == name  # shown as written


async def test_finding_entities_by_a_thousand_keywords_finds_those_holding_every_one(http):
    """Each keyword was one more AND in the SQL predicate: past about 1,000 SQLite refused the expression as too deep, a 500."""
    words = ["".join("abcdefghijklmnopqrstuvwxyz"[i // 26**p % 26] for p in (2, 1, 0)) for i in range(1100)]
    await call(http, "PUT", "/v1/entities/target", 201, json={"name": "Lisbon office", "description": "".join(words)})
    await call(http, "PUT", "/v1/entities/other", 201, json={"name": "Lisbon office", "description": "".join(words[:-1])})
    found = await call(http, "GET", "/v1/entities", params={"q": " ".join(words) + " LISBON"})
    assert [e["id"] for e in found["entities"]] == ["target"]
    few = await call(http, "GET", "/v1/entities", params={"q": f"{words[1]} lisbon {words[-2]}"})
    assert sorted(e["id"] for e in few["entities"]) == ["other", "target"]


async def test_a_relations_graph_edge_is_changed_only_through_the_relation(http):
    """``rel:`` edges mirror relations: unlinking, undoing or forging one through /v1/edges would leave the graph and the entity graph disagreeing."""
    for eid in ("ada", "bob"):
        await call(http, "PUT", f"/v1/entities/{eid}", 201, json={"name": eid.title()})
    await call(http, "POST", "/v1/entities/ada/relations", 201, json={"target_id": "bob", "relation_type": "knows", "weight": 0.5})
    head = (await call(http, "GET", "/v1/capabilities"))["head_position"]
    refused = [
        await call(http, "DELETE", "/v1/edges/rel:ada:KNOWS:bob", 422),
        await call(http, "POST", "/v1/edges/undo-namespace", 422, json={"prefix": "rel:"}),
        await call(http, "POST", "/v1/edges/undo-namespace", 422, json={"prefix": "rel:ada:"}),
        await call(http, "POST", "/v1/edges", 422, json={"source": "bob", "target": "ada", "edge_type": "KNOWS", "edge_id": "rel:bob:KNOWS:ada"}),
    ]
    assert [r["error"]["field"] for r in refused] == ["edge_id", "prefix", "prefix", "edge_id"]
    assert all("relation" in r["error"]["message"] for r in refused)
    assert (await call(http, "GET", "/v1/capabilities"))["head_position"] == head  # nothing written
    graph = await call(http, "GET", "/v1/graph/neighbors", params={"node": "ada"})
    assert [(e["edge_id"], e["weight"]) for e in graph["edges"]] == [("rel:ada:KNOWS:bob", 0.5)]
    related = await call(http, "GET", "/v1/entities/ada/related", params={"direction": "both"})
    assert [(r["id"], r["score"]) for r in related["related"]] == [("bob", 0.5)]
    # Through the relation, both change together.
    await call(http, "DELETE", "/v1/entities/ada/relations", json={"target_id": "bob", "relation_type": "knows"})
    assert (await call(http, "GET", "/v1/graph/neighbors", params={"node": "ada"}))["edges"] == []
    assert (await call(http, "GET", "/v1/entities/ada/related"))["related"] == []


async def test_a_walk_of_relations_cut_at_its_limit_says_so(http, monkeypatch):
    """Past the walk's limit, ``total`` cannot count every entity reached: the answer says it was cut (the explorer's pages, cut at each page, are not)."""
    from mnemolog.projections.entities import projector

    monkeypatch.setattr(projector, "RELATED_MAX_NODES", 3)
    await call(http, "PUT", "/v1/entities/hub", 201, json={"name": "Hub"})
    for n in range(3):
        await call(http, "PUT", f"/v1/entities/leaf{n}", 201, json={"name": f"Leaf {n}"})
        await call(http, "POST", "/v1/entities/hub/relations", 201, json={"target_id": f"leaf{n}", "relation_type": "has"})
    fits = await call(http, "GET", "/v1/entities/hub/related")
    assert (fits["total"], fits["truncated"]) == (3, False)
    page = await call(http, "GET", "/v1/graph/neighborhood", params={"node": "hub", "kind": "entity", "direction": "out"})
    assert page["total"] == 3 and not page["more"]
    await call(http, "PUT", "/v1/entities/leaf3", 201, json={"name": "Leaf 3"})
    await call(http, "POST", "/v1/entities/hub/relations", 201, json={"target_id": "leaf3", "relation_type": "has"})
    cut = await call(http, "GET", "/v1/entities/hub/related")
    assert (cut["total"], cut["truncated"], len(cut["related"])) == (3, True, 3)
    page = await call(http, "GET", "/v1/graph/neighborhood", params={"node": "hub", "kind": "entity", "direction": "out"})
    assert page["total"] == 4 and len(page["nodes"]) == 5 and not page["more"]


async def test_an_entity_cannot_take_a_memorys_id(http):
    """Memories and entities share the graph's node ids: an entity under a memory's id would make its removal unlink the memory's edges."""
    a, b = (await call(http, "POST", "/v1/memories", 201, json={"memories": [{"memory": "first"}, {"memory": "second"}]}))["memory_ids"]
    await call(http, "POST", "/v1/edges", 201, json={"source": a, "target": b, "edge_id": "user:keep:1"})
    head = (await call(http, "GET", "/v1/capabilities"))["head_position"]
    refused = await call(http, "PUT", f"/v1/entities/{a}", 409, json={"name": "A twin"})
    assert refused["error"]["code"] == "conflict" and refused["error"]["field"] == "entity_id" and "memory" in refused["error"]["message"]
    assert (await call(http, "GET", "/v1/capabilities"))["head_position"] == head
    await call(http, "GET", f"/v1/entities/{a}", 404)
    assert [e["edge_id"] for e in (await call(http, "GET", "/v1/graph/neighbors", params={"node": a}))["edges"]] == ["user:keep:1"]


async def test_entity_tags_are_one_tag_whatever_the_width_they_are_typed_in(http):
    """Full-width tags (a CJK keyboard's) are the tags typed in ASCII: stored, filtered and listed as one."""
    written = await call(http, "PUT", "/v1/entities/lang:rust", 201, json={"name": "Rust", "tags": ["Ｒｕｓｔ", "ＭＬ　Ops", "rust"]})
    assert written["data"]["tags_kept"] == 2
    assert (await call(http, "GET", "/v1/entities/lang:rust"))["tags"] == ["rust", "ml-ops"]
    for tag in ("rust", "ＲＵＳＴ", " Rust "):
        assert [e["id"] for e in (await call(http, "GET", "/v1/entities", params={"tag": tag}))["entities"]] == ["lang:rust"], tag
    assert (await call(http, "GET", "/v1/tags", params={"prefix": "ＭＬ"}))["tags"] == [{"tag": "ml-ops", "entities": 1}]


async def test_an_alias_that_is_the_name_or_another_alias_in_another_form_is_kept_once(http):
    """Aliases are told apart as the linker tells surfaces apart (NFKC, case folded): a full-width or decomposed copy adds nothing."""
    await call(http, "PUT", "/v1/entities/acme", 201, json={"name": "Acme Café", "aliases": ["ＡＣＭＥ　ＣＡＦＥ\u0301", "Acme", "ａｃｍｅ", "ACME"]})
    assert (await call(http, "GET", "/v1/entities/acme"))["aliases"] == ["Acme"]


async def test_a_file_name_that_climbs_out_of_its_folder_is_refused(http):
    """``../notes.md`` was the document ``notes.md`` (a new version of it, the old one archived), and
    ``a/../notes.md`` was ``a/notes.md``: a name with a ``..`` part is refused, naming the field, and nothing is written."""
    await call(http, "POST", "/v1/import/documents", json={"filename": "notes.md", "content": "the first notes\n"})
    head = (await call(http, "GET", "/v1/digest"))["position"]
    for name in ("../notes.md", "a/../notes.md", "..\\notes.md"):
        refused = await call(http, "POST", "/v1/import/documents", 422, json={"filename": name, "content": "other notes\n"})
        assert refused["error"]["field"] == "filename" and "'..'" in refused["error"]["message"], refused
        listed = await call(http, "POST", "/v1/import/documents", 422, json={"documents": [{"filename": "ok.md", "content": "x\n"}, {"filename": name, "content": "y\n"}]})
        assert listed["error"]["field"] == "documents[1].filename"
        form = aiohttp.FormData()
        form.add_field("file", b"other notes\n", filename=name, content_type="text/markdown")
        assert (await call(http, "POST", "/v1/import/documents", 422, data=form))["error"]["field"] == "file"
    assert (await call(http, "GET", "/v1/digest"))["position"] == head
    # Dots inside a part are part of a name.
    done = await call(http, "POST", "/v1/import/documents", json={"filename": "a/..notes.md", "content": "dots\n"})
    assert done["results"][0]["doc_id"] == "a/notes.md" and done["results"][0]["version"] == 1
