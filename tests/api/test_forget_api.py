"""``POST /v1/subjects/{subject}/forget`` over real HTTP: admin only, clear 4xx errors, erased reads afterwards."""

from __future__ import annotations

import pytest

from mnemolog.api.client import ApiError


@pytest.fixture
async def secured(start):
    return await start(auth=True)


async def test_forget_needs_admin_and_erases_the_subjects_memories(secured):
    writer = secured.client(api_key=secured.key("acme", "read", "write"))
    mine = await writer.add_memories({"memory": "Marguerite's allergy to hazelnuts", "subject": "u-7", "tags": ["health"]})
    other = await writer.add_memories({"memory": "the office opens at nine"})
    with pytest.raises(ApiError) as err:
        await writer.forget_subject("u-7", reason="request 12")
    assert err.value.status == 403
    assert (await writer.get_memory(mine.memory_ids[0]))["memory"] == "Marguerite's allergy to hazelnuts"

    admin = secured.client(api_key=secured.key("acme", "read", "admin"))
    done = await admin.forget_subject("u-7", reason="request 12")
    assert done.data == {"subject": "u-7", "keys_destroyed": 1, "memories_erased": 1, "plaintext_positions": []}
    view = await admin.get_memory(mine.memory_ids[0])
    assert view["erased"] is True and view["subject"] == "u-7" and "hazelnut" not in view["memory"] and view["tags"] == []
    assert view["status"] == "activated" and view["id"] == mine.memory_ids[0]
    assert (await admin.get_memory(other.memory_ids[0]))["erased"] is False
    history = await admin.memory_history(mine.memory_ids[0])
    assert history["forgotten"][0]["reason"] == "request 12" and history["forgotten"][0]["subject"] == "u-7"
    forgot = history["forgotten"][0]
    [event] = [e for e in (await admin.list_events(after=forgot["position"] - 1, limit=1))["events"]]
    assert forgot["recorded_at"] == event["recorded_at"] and forgot["recorded_at"].endswith("Z")  # the log's own spelling
    again = await admin.forget_subject("u-7")  # nothing left to forget: the answer names the forget, in the same spelling
    assert [(f["position"], f["recorded_at"]) for f in again.data["already_forgotten"]] == [(forgot["position"], forgot["recorded_at"])]
    assert (await admin.verify())["ok"] is True


async def test_forgetting_the_tenants_own_key_erases_its_entities_and_memories_but_not_named_subjects(secured):
    admin = secured.client(api_key=secured.key("acme", "read", "write", "admin"))
    plain = await admin.add_memories({"memory": "Wilhelmina signed the lease"})
    named = await admin.add_memories({"memory": "the office opens at nine", "subject": "u-7"})
    await admin.put_entity("person:w", {"name": "Wilhelmina Oyelaran", "aliases": ["Willa"]})
    done = await admin.forget_subject("@tenant", reason="tenant closed")
    assert done.data == {"subject": "@tenant", "keys_destroyed": 1, "memories_erased": 1, "plaintext_positions": []}
    assert (await admin.get_memory(plain.memory_ids[0]))["erased"] is True
    assert (await admin.get_memory(named.memory_ids[0]))["memory"] == "the office opens at nine"
    entity = await admin.get_entity("person:w")
    assert entity["erased"] is True and entity["name"] == "[erased: subject forgotten]" and entity["aliases"] == [] and entity["id"] == "person:w"
    assert (await admin.verify())["ok"] is True


async def test_forget_refuses_bad_and_unknown_subjects_with_json_errors(api):
    bad = await api.raw.post("/v1/subjects/@other/forget", json={"reason": "x"})
    assert bad.status == 422 and (await bad.json())["error"]["field"] == "subject"
    unknown = await api.raw.post("/v1/subjects/nobody/forget", json={})
    assert unknown.status == 404 and (await unknown.json())["error"]["code"] == "not_found"
    extra = await api.raw.post("/v1/subjects/nobody/forget", json={"why": "x"})
    assert extra.status == 422


async def test_a_subject_on_a_new_memory_is_validated(api):
    response = await api.raw.post("/v1/memories", json={"memory": {"memory": "x", "subject": "@nope"}})
    assert response.status == 422 and (await response.json())["error"]["field"] is not None


async def test_after_a_forget_and_a_tenant_drop_a_rebuild_gives_the_same_projections(secured):
    """Found by the hostile-client run: after a forget over HTTP, ``mnemolog rebuild`` changed ``fts_stats``.

    The live run counted the index rows the forget removed; a replay, which
    cannot open the forgotten text, never indexed them and counted none.
    """
    from tests.projections.support import dump

    admin = secured.client(api_key=secured.key("acme", "read", "write", "admin"))
    for n in range(5):
        await admin.add_memories({"memory": f"Marguerite's note number {n} about hazelnuts", "subject": "u-7"})
    await admin.add_memories({"memory": "the office opens at nine"})
    await admin.forget_subject("u-7", reason="request 12")
    other = secured.client(api_key=secured.key("gone", "read", "write", "admin"))
    await other.add_memories({"memory": "a tenant about to leave"})
    await other.drop_tenant(confirm="gone", reason="closed")
    svc = secured.service
    svc.sync()
    head = svc.store.last_position()
    live = dump(svc.runner)
    svc.runner.rebuild()  # in place, as ``mnemolog rebuild`` does
    assert svc.store.last_position() == head, "a rebuild appended to the log"
    rebuilt = dump(svc.runner)
    assert {p: [t for t in live[p] if live[p][t] != rebuilt[p][t]] for p in live} == {p: [] for p in live}


@pytest.mark.parametrize("subject", ["u-7\n", "u-7\r\n", "\nu-7"])
async def test_a_subject_with_a_line_break_is_refused_where_it_is_written_and_forgotten(api, subject):
    """``"u-7\\n"`` (a subject id read from a file with its line's end) passed as a subject: it got a key of its own,
    so ``forget u-7`` left its memories readable, and a forget naming it had to spell the line break."""
    from urllib.parse import quote

    response = await api.raw.post("/v1/memories", json={"memory": {"memory": "Marguerite's allergy", "subject": subject}})
    body = await response.json()
    assert response.status == 422 and body["error"]["field"].endswith("subject"), body
    forget = await api.raw.post(f"/v1/subjects/{quote(subject, safe='')}/forget", json={"reason": "x"})
    assert forget.status == 422 and (await forget.json())["error"]["field"] == "subject"


async def test_a_second_forget_answers_with_the_first_and_writes_nothing(secured):
    """A forget repeated (a privacy request processed twice) was "subject not found", as for a subject never seen:
    it answers that the subject is forgotten already, naming when, by whom and why, and appends nothing."""
    admin = secured.client(api_key=secured.key("acme", "read", "write", "admin"))
    mine = await admin.add_memories({"memory": "Marguerite's allergy to hazelnuts", "subject": "u-7"})
    first = await admin.forget_subject("u-7", reason="request 12")
    head = secured.service.store.last_position()
    again = await admin.forget_subject("u-7", reason="request 12, again")
    assert again.positions == [] and again.data["keys_destroyed"] == 0 and again.data["memories_erased"] == 0
    [earlier] = again.data["already_forgotten"]
    assert earlier["position"] == first.positions[0] and earlier["reason"] == "request 12" and earlier["recorded_at"]
    history = await admin.memory_history(mine.memory_ids[0])
    assert [f["reason"] for f in history["forgotten"]] == ["request 12"]
    assert secured.service.store.last_position() == head
    # A new memory of the subject gets a new key, which the next forget destroys.
    await admin.add_memories({"memory": "Marguerite moved", "subject": "u-7"})
    third = await admin.forget_subject("u-7", reason="request 13")
    assert third.data["keys_destroyed"] == 1 and third.data["memories_erased"] == 2 and "already_forgotten" not in third.data
    with pytest.raises(ApiError) as unknown:
        await admin.forget_subject("u-8")
    assert unknown.value.status == 404


async def test_forgetting_a_subject_whose_memories_were_written_unsealed_erases_them_and_says_the_log_keeps_them(start):
    """With encryption off, a subject's memories have no key: the forget was refused (409), so every read and
    recall kept showing their text. It erases them from every read and projection, as it does a sealed
    subject's, and says plainly what no forget can erase: the events the log keeps in plaintext."""
    api = await start(encryption="off")
    client = api.client()
    added = await client.add_memories({"memory": "Marguerite's allergy to hazelnuts", "subject": "u-7"})
    other = await client.add_memories({"memory": "the office opens at nine"})
    done = await client.forget_subject("u-7", reason="request 12")
    assert done.data == {"subject": "u-7", "keys_destroyed": 0, "memories_erased": 1, "plaintext_positions": [added.positions[0]]}
    view = await client.get_memory(added.memory_ids[0])
    assert view["erased"] is True and "hazelnut" not in repr(view) and "hazelnut" not in repr(await client.memory_history(added.memory_ids[0]))
    assert added.memory_ids[0] not in {h["id"] for h in (await client.recall("Marguerite hazelnuts allergy"))["hits"]}
    head = api.service.store.last_position()
    again = await client.forget_subject("u-7", reason="request 12")
    assert again.data["already_forgotten"] and again.data["plaintext_positions"] == [added.positions[0]]
    assert api.service.store.last_position() == head
    # The tenant holds no key either: its own key's forget (refused with a 409 before) erases its unsealed memories too.
    tenant = await client.forget_subject("@tenant", reason="closed")
    assert tenant.data == {"subject": "@tenant", "keys_destroyed": 0, "memories_erased": 1, "plaintext_positions": [other.positions[0]]}
    page = await (await api.raw.get("/v1/events", params={"limit": "100"})).text()
    assert "office opens" not in page and "hazelnut" not in page
    assert (await client.verify())["plaintext_kept"] == [added.positions[0], other.positions[0]]


async def test_the_events_of_a_memory_given_to_a_forgotten_subject_read_erased_wherever_the_log_is_shown(api):
    """A memory written without a subject (the tenant's key sealed it), then given one: after the subject's
    forget every projection erased it, but the log's own reads (the events page, their live stream, the
    explorer's correlation page) still showed its first version's text."""
    client = api.client()
    added = await client.add_memories({"memory": "Marguerite's allergy to hazelnuts", "tags": ["health"]})
    memory = added.memory_ids[0]
    await client.update_memory(memory, {"subject": "u-7"})
    other = await client.add_memories({"memory": "the office opens at nine"})
    await client.forget_subject("u-7", reason="request 12")

    page = await (await api.raw.get("/v1/events", params={"limit": "100"})).text()
    assert "hazelnut" not in page and "the office opens at nine" in page
    correlation = await (await api.raw.get("/v1/correlation", params={"correlation_id": added.correlation_id})).text()
    assert "hazelnut" not in correlation and "[erased: subject forgotten]" in correlation
    streamed = []
    async for event in client.stream_events(after=0, idle_timeout=5):
        streamed.append(event)
        if event["position"] == other.positions[-1]:
            break
    assert streamed and "hazelnut" not in repr(streamed)
    history = await client.memory_history(memory)
    assert "hazelnut" not in repr(history)


async def test_verify_names_the_events_a_forget_left_in_plaintext(start, settings_for):
    """GET /v1/verify answered ok and nothing else, while the log kept the text of memories a forget erased, in
    events written unsealed: ``plaintext_kept`` names them (the chain still verifies)."""
    from mnemolog.eventstore.commands import CommandContext
    from mnemolog.eventstore.model import MemoryContent
    from mnemolog.projections.service import MemoryService

    settings = settings_for(encryption="off")
    with MemoryService.open(settings.data_dir, settings=settings) as svc:  # written before sealing was on
        [plain] = svc.run(svc.memories.add, CommandContext(tenant="default"), [MemoryContent(memory="Marguerite's hazelnuts", subject="u-7")]).memory_ids
    api = await start()
    client = api.client()
    await client.add_memories({"memory": "Marguerite's new address", "subject": "u-7"})
    assert (await client.verify())["plaintext_kept"] == []
    done = await client.forget_subject("u-7", reason="request 12")
    [position] = done.data["plaintext_positions"]
    report = await client.verify()
    assert report["ok"] is True and report["plaintext_kept"] == [position]
    assert (await client.verify(start=position + 1))["plaintext_kept"] == []
    view = await client.get_memory(plain)
    assert view["erased"] is True and "hazelnut" not in repr(view) and "hazelnut" not in repr(await client.memory_history(plain))


async def test_verify_names_only_the_callers_tenants_events_a_forget_left_in_plaintext(start):
    """Another tenant's admin key was told the positions of the events this tenant's forget left in plaintext:
    that it forgot someone, when, and that it had written their data unsealed."""
    api = await start(auth=True, encryption="off")
    acme = api.client(api_key=api.key("acme", "read", "write", "admin"))
    globex = api.client(api_key=api.key("globex", "read", "write", "admin"))
    await acme.add_memories({"memory": "Marguerite's hazelnuts", "subject": "u-7"})
    await globex.add_memories({"memory": "globex's own note", "subject": "u-9"})
    [kept] = (await acme.forget_subject("u-7", reason="request 12")).data["plaintext_positions"]
    assert (await acme.verify())["plaintext_kept"] == [kept]
    theirs = await globex.verify()
    assert theirs["ok"] is True and theirs["plaintext_kept"] == []
    [own] = (await globex.forget_subject("u-9")).data["plaintext_positions"]
    assert (await globex.verify())["plaintext_kept"] == [own] and (await acme.verify())["plaintext_kept"] == [kept]


async def test_the_events_show_no_alias_of_a_forgotten_subjects_unsealed_mentions(start, settings_for):
    """The memories of a subject written unsealed read erased in ``GET /v1/events`` once it is forgotten, but the
    ``MENTIONS`` edges of those memories still showed the alias the linker matched (and its evidence): they read
    erased too, in the pages, the live stream and the correlation page."""
    from tests.projections.test_forget_plaintext import MENTIONED, OTHER_MENTIONED, _seed_mentions, _shown_mentions

    settings = settings_for(encryption="off")
    ids = _seed_mentions(settings.data_dir)
    api = await start()
    client = api.client(tenant="t")
    done = await client.forget_subject("u-7", reason="request 12")
    assert done.data["keys_destroyed"] == 0 and done.data["memories_erased"] == 2

    events = (await client.list_events(limit=1000))["events"]
    assert MENTIONED.split()[1].lower() not in _shown_mentions(events) and OTHER_MENTIONED.lower() in _shown_mentions(events)
    [linked] = [e for e in events if e["type"] == "EdgeLinked" and e["payload"]["edge"]["source"] == ids["named"]]
    assert linked["payload"]["edge"]["erased"] is True
    page = await (await api.raw.get("/v1/events", params={"limit": "1000"}, headers={"X-Mnemolog-Tenant": "t"})).json()
    assert MENTIONED.split()[1].lower() not in _shown_mentions(page["events"])
    correlation = await client.correlation_events(linked["metadata"]["correlation_id"])
    assert MENTIONED.split()[1].lower() not in _shown_mentions(correlation["events"]) and correlation["events"]
    streamed = []
    async for event in client.stream_events(after=0, idle_timeout=5):
        streamed.append(event)
        if event["position"] == events[-1]["position"]:
            break
    assert len(streamed) == len(events) and MENTIONED.split()[1].lower() not in _shown_mentions(streamed)


async def test_a_forget_cannot_be_reverted_even_where_it_took_memories_out_of_working_memory(api):
    """The forget's own working-memory withdrawal is part of it: no revert (nor its dry run) puts erased text back there."""
    added = await api.raw.post("/v1/memories", json={"memories": [{"memory": "Odile's diagnosis", "subject": "u-9"}, {"memory": "the office opens at nine"}]})
    erased_id, kept_id = (await added.json())["memory_ids"]
    forgot = await api.raw.post("/v1/subjects/u-9/forget", json={"reason": "request 3"}, headers={"X-Correlation-Id": "forget-u-9"})
    assert forgot.status == 200
    working = await (await api.raw.get("/v1/working-memory")).json()
    assert [e["memory_id"] for e in working["entries"]] == [kept_id]
    for body in ({"correlation_id": "forget-u-9", "dry_run": True}, {"correlation_id": "forget-u-9"}, {"correlation_id": "forget-u-9", "force": True}):
        refused = await api.raw.post("/v1/reverts", json=body)
        assert refused.status == 422, await refused.text()
        assert (await refused.json())["error"]["field"] == "correlation_id"
    assert await (await api.raw.get("/v1/working-memory")).json() == working
    page = await (await api.raw.get("/v1/correlation", params={"correlation_id": "forget-u-9"})).json()
    assert page["reverted_by"] == [] and erased_id not in str(await (await api.raw.get("/v1/working-memory")).json())


async def test_a_subject_named_before_subject_ids_had_their_pattern_is_forgotten_over_http(api):
    """``POST /v1/subjects/user%207/forget`` was a 422 for a subject a memory names (one an earlier version
    accepted, or an import of its log brought): the memory could never be erased. A name no memory holds stays 422."""
    from mnemolog.eventstore import StreamAppend
    from mnemolog.eventstore import catalogue as c
    from mnemolog.eventstore.model import MemoryContent

    event = c.MemoryAdded(memory_id="m-legacy", content=MemoryContent(memory="Philippa Quernstone", subject="user 7"), created_at="2024-01-01T00:00:00Z")
    api.service.store.append_batch([StreamAppend(c.memory_stream("m-legacy"), [event])], tenant="default")
    done = await api.raw.post("/v1/subjects/user%207/forget", json={"reason": "request 4"})
    body = await done.json()
    assert done.status == 200 and body["data"]["subject"] == "user 7" and body["data"]["memories_erased"] == 1, body
    view = await (await api.raw.get("/v1/memories/m-legacy")).json()
    assert view["erased"] is True and "Quernstone" not in view["memory"]
    unknown = await api.raw.post("/v1/subjects/user%208/forget", json={"reason": "x"})
    assert unknown.status == 422 and (await unknown.json())["error"]["field"] == "subject"


async def test_an_erased_memory_neither_supersedes_nor_is_superseded_nor_merges_nor_is_evolved_into_and_the_refusal_names_the_field(api):
    """An operator's supersede took an erased memory as the replacement: the fact it archived read on as "[erased]"."""
    added = await api.raw.post("/v1/memories", json={"memories": [{"memory": "Odile lives in Lyon", "subject": "u-9"}, {"memory": "the office opens at nine"}]})
    erased_id, kept_id = (await added.json())["memory_ids"]
    assert (await api.raw.post("/v1/subjects/u-9/forget", json={})).status == 200
    for path, body, field in (
        (f"/v1/memories/{kept_id}/supersede", {"superseded_by": erased_id}, "superseded_by"),
        (f"/v1/memories/{erased_id}/supersede", {"superseded_by": kept_id}, None),
        ("/v1/memories/merge", {"memory_ids": [kept_id, erased_id]}, "memory_ids"),
        (f"/v1/memories/{kept_id}/delete", {"evolve_to": erased_id}, "evolve_to"),
    ):
        refused = await api.raw.post(path, json=body)
        assert refused.status == 409, await refused.text()
        error = (await refused.json())["error"]
        assert "was erased" in error["message"] and error["field"] == field
    for path, body, field in (
        (f"/v1/memories/{kept_id}/supersede", {"superseded_by": "no-such-memory"}, "superseded_by"),
        ("/v1/memories/merge", {"memory_ids": [kept_id, "no-such-memory"]}, "memory_ids"),
        (f"/v1/memories/{kept_id}/delete", {"evolve_to": "no-such-memory"}, "evolve_to"),
    ):
        missing = await api.raw.post(path, json=body)
        assert missing.status == 404 and (await missing.json())["error"]["field"] == field
    kept = await (await api.raw.get(f"/v1/memories/{kept_id}")).json()
    assert (kept["status"], kept["version"]) == ("activated", 1)
