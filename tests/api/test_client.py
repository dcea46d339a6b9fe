"""The async client against a real ``mnemolog serve`` on loopback, with keys: every method, retries, streams, errors."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from mnemolog.api.client import (
    ApiError,
    AuthenticationError,
    ConflictError,
    ForbiddenError,
    InvalidInputError,
    MnemologClient,
    NotFoundError,
    PayloadTooLargeError,
    ServerError,
    VersionConflictError,
)
from mnemolog.api import schemas_responses as responses
from mnemolog.api.schemas import MemoryIn, UpdateMemoryRequest, WorkingMemoryResponse, WriteResponse
from mnemolog.api.schemas_knowledge import EntityIn
from tests.api.client_support import CuttingProxy, live_server

#: Read methods that answer about the log's metadata or the server, not about stored memories: no history to travel in.
NOT_HISTORICAL = {"health", "capabilities", "openapi", "digest", "verify", "organizer_status", "stream_events", "whoami", "timeline", "correlation_events"}


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    with live_server(tmp_path_factory.mktemp("client"), max_body_bytes="1000000") as server:
        yield server


class Recording:
    """The client, noting the name of every method called through it."""

    def __init__(self, client: MnemologClient):
        self.client = client
        self.called: set[str] = set()

    def __getattr__(self, name: str):
        method = getattr(self.client, name)
        self.called.add(name)
        return method


def user_edges(neighbors: responses.NeighborsResponse) -> set[str]:
    return {e.edge_id for e in neighbors.edges if e.edge_id.startswith("user:")}


def operations(document: responses.OpenApiDocument) -> set[str]:
    return {op["operationId"] for path in document.paths.values() for op in path.values()}


async def test_every_operation_of_the_served_document_has_a_method(live):
    async with MnemologClient(live.url, api_key=live.key) as client:
        document = await client.openapi()
    missing = sorted(name for name in operations(document) if not inspect.iscoroutinefunction(getattr(MnemologClient, name, None)) and not inspect.isasyncgenfunction(getattr(MnemologClient, name, None)))
    assert len(operations(document)) >= 40
    assert not missing, f"operations without a client method: {missing}"


def test_every_method_answers_the_response_struct_its_route_declares():
    """One declaration: the route's ``response`` encodes the server's answer, documents it, and is the client method's result."""
    import typing

    from mnemolog.api.app import ROUTES

    for r in (r for r in ROUTES if r.in_openapi):  # the explorer's page files are not operations
        returns = typing.get_type_hints(getattr(MnemologClient, r.handler.__name__))["return"]
        if r.media_type == "text/event-stream":
            assert returns == typing.AsyncIterator[responses.EventView], r.handler.__name__
        else:
            assert r.response is not None and returns is r.response, (r.handler.__name__, returns, r.response)


def test_every_read_method_of_stored_data_takes_as_of():
    from mnemolog.api.app import ROUTES

    reads = {r.handler.__name__ for r in ROUTES if r.scope == "read"} - NOT_HISTORICAL - {"relink"}
    without = sorted(name for name in reads if "as_of" not in inspect.signature(getattr(MnemologClient, name)).parameters)
    assert len(reads) >= 15 and not without, without


async def test_every_method_against_a_live_server(live, tmp_path):
    async with MnemologClient(live.url, api_key=live.key) as raw:
        client = Recording(raw)
        health = await client.health()
        assert isinstance(health, responses.HealthResponse) and health.status == "ok" and health.head_position == 0
        capabilities = await client.capabilities()
        assert isinstance(capabilities, responses.CapabilitiesResponse) and capabilities.channels["graph"] is True and capabilities.organizer is False
        document = await client.openapi()
        assert isinstance(document, responses.OpenApiDocument) and document.openapi.startswith("3.")

        written = await client.add_memories(memories=[MemoryIn(memory="Ada keeps bees in Lisbon", key="bees"), {"memory": "Grace writes compilers"}])
        assert isinstance(written, WriteResponse) and len(written.memory_ids) == 2
        ada, grace = written.memory_ids
        before = written.positions[-1]
        one = await client.add_memories(MemoryIn(memory="Ada keeps bees in Porto now"))
        moved = await client.update_memory(ada, UpdateMemoryRequest(memory="Ada keeps bees in Porto"), expected_version=1)
        current = await client.get_memory(ada)
        assert isinstance(current, responses.MemoryView) and current.memory == "Ada keeps bees in Porto" and current.version == 2 and current.key == "bees"
        assert (await client.get_memory(ada, as_of=before)).memory == "Ada keeps bees in Lisbon"
        history = await client.memory_history(ada)
        assert isinstance(history, responses.MemoryHistoryResponse) and history.memory_id == ada
        assert [(v.version, v.event_type, v.memory) for v in history.versions] == [(1, "MemoryAdded", "Ada keeps bees in Lisbon"), (2, "MemoryUpdated", "Ada keeps bees in Porto")]
        assert len((await client.memory_history(ada, as_of=before)).versions) == 1
        assert (await client.archive_memory(grace, reason="old")).positions
        assert (await client.restore_memory(grace)).positions
        assert (await client.delete_memory(grace, reason="wrong")).positions
        await client.restore_memory(grace)
        await client.rollback_memory(ada, 1, reason="back")
        assert (await client.get_memory(ada)).memory == "Ada keeps bees in Lisbon"
        merged = await client.merge_memories([ada, one.memory_ids[0]], text="Ada keeps bees")
        newer = merged.memory_ids[0]
        scratch = await client.add_memories(MemoryIn(memory="an older guess"))
        await client.supersede_memory(scratch.memory_ids[0], newer)

        await client.add_memories(MemoryIn(memory="kettle on", memory_type="WorkingMemory"))
        listed = await client.working_memory()
        assert isinstance(listed, WorkingMemoryResponse) and listed.entries[-1].memory.memory == "kettle on"
        assert "kettle on" not in [e.memory.memory for e in (await client.working_memory(as_of=before)).entries]

        linked = await client.link(newer, grace, edge_id="user:test:1")
        assert linked.data["edge_ids"] == ["user:test:1"]  # where the document's links find it
        await client.link(newer, grace, "FOLLOWS", edge_id="user:test:2")
        near = await client.neighbors(newer)
        assert isinstance(near, responses.NeighborsResponse) and near.node == newer
        assert user_edges(near) == {"user:test:1", "user:test:2"} and grace in {r.node for r in near.reached}
        with pytest.raises(NotFoundError):  # not written yet then
            await client.neighbors(newer, as_of=before)
        assert (await client.unlink("user:test:2")).positions
        sub = await client.subgraph([newer], depth=1)
        assert isinstance(sub, responses.SubgraphResponse) and sub.truncated is False
        assert {newer, grace} <= {n.id for n in sub.nodes} and all(n.memory is not None and n.memory.id == n.id for n in sub.nodes)
        with pytest.raises(NotFoundError):  # not written yet then
            await client.subgraph([newer], depth=1, as_of=before)
        stats = await client.graph_stats()
        assert isinstance(stats, responses.GraphStatsResponse) and stats.edges_total >= 1 and stats.as_of is None
        assert (await client.graph_stats(as_of=before)).edges_total == 0
        undone = await client.undo_namespace("user:test")
        assert undone.positions and user_edges(await client.neighbors(newer)) == set()
        assert user_edges(await client.neighbors(newer, as_of=linked.positions[-1])) == {"user:test:1"}

        found = await client.recall("bees", min_position=undone.positions[-1], limit=5)
        assert isinstance(found, responses.RecallResult) and found.position >= undone.positions[-1]
        assert newer in [h.id for h in found.hits] and all(h.memory.id == h.id for h in found.hits)
        then = await client.recall("bees", as_of=before)
        assert newer not in [h.id for h in then.hits]
        raw = await client.search("bees")
        assert isinstance(raw, responses.SearchResponse) and raw.terms == ["bees"] and raw.states["lexical"].status == "ok"
        assert newer in [hit.id for hit in raw.channels["lexical"]]
        assert newer not in [hit.id for hits in (await client.search("bees", as_of=before)).channels.values() for hit in hits]

        page = await client.list_events(limit=1000)
        assert isinstance(page, responses.EventsPage) and page.events and page.next_after == page.events[-1].position
        assert page.events[0].type == "MemoryAdded" and page.events[0].payload["type"] == "MemoryAdded"
        assert [e.position for e in (await client.list_events(as_of=before)).events] == list(range(1, before + 1))
        stream = client.stream_events(after=before - 1)
        first = await asyncio.wait_for(stream.__anext__(), 30)
        await stream.aclose()
        assert isinstance(first, responses.EventView) and first.position == before
        tip = await client.digest()
        assert isinstance(tip, responses.DigestResponse) and tip.digest == f"{tip.position}:{tip.hash}"
        checked = await client.verify(against=tip.digest)
        assert isinstance(checked, responses.VerifyResult) and checked.ok is True and checked.last_position == tip.position
        status = await client.organizer_status(wait=0)
        assert isinstance(status, responses.OrganizerStatusResponse) and status.enabled is False

        put = await client.put_entity("ada", EntityIn(name="Ada Lovelace", aliases=["Ada"], tags=["math"]))
        assert put.data["created"] is True
        await client.put_entity("grace", {"name": "Grace Hopper"})
        await client.put_tags("ada", ["math", "poetry"])
        await client.set_relation("ada", "grace", "knows", weight=0.5)
        entity = await client.get_entity("ada")
        assert isinstance(entity, responses.EntityResponse) and entity.name == "Ada Lovelace" and entity.aliases == ["Ada"]
        assert [(r.target_id, r.relation_type, r.weight) for r in entity.relations] == [("grace", "KNOWS", 0.5)]
        with pytest.raises(NotFoundError):
            await client.get_entity("ada", as_of=before)
        entities = await client.find_entities("lovelace")
        assert isinstance(entities, responses.EntitiesResponse) and entities.count == 1 and entities.entities[0].id == "ada"
        assert (await client.find_entities("lovelace", as_of=before)).count == 0
        related = await client.related("ada")
        assert isinstance(related, responses.RelatedResponse) and related.total == 1
        assert [(r.id, r.name, r.depth) for r in related.related] == [("grace", "Grace Hopper", 1)]
        assert (await client.related("ada", as_of=put.positions[-1])).related == []
        tags = await client.find_tags("p")
        assert isinstance(tags, responses.TagsResponse) and [(t.tag, t.entities) for t in tags.tags] == [("poetry", 1)]
        assert (await client.find_tags("p", as_of=put.positions[-1])).tags == []
        cards = await client.relation_cards("Who does Ada know?")
        assert isinstance(cards, responses.RelationCardsResponse) and cards.matched is True
        assert cards.cards[0].entity.id == "ada" and [(r.direction, r.entity_id) for r in cards.cards[0].relations] == [("out", "grace")]
        assert (await client.relation_cards("Who does Ada know?", as_of=before)).matched is False

        notes = tmp_path / "notes.md"
        notes.write_text("# Notes\n\nAda Lovelace wrote the first program with Grace Hopper.\n")
        (tmp_path / "met.txt").write_text("Ada Lovelace met Grace Hopper.")
        with open(tmp_path / "met.txt", "rb") as opened:
            report = await client.import_documents([notes, ("plain.txt", b"Grace Hopper built compilers with Ada Lovelace."), opened], collection="kb")
        assert isinstance(report, responses.ImportReport) and report.documents == 3 and report.failed == 0, report
        assert {r.filename for r in report.results} == {"notes.md", "plain.txt", "met.txt"} and all(r.status == "imported" and r.memory_ids for r in report.results)
        planned = await client.relink()
        assert isinstance(planned, responses.RelinkReport) and planned.dry_run is True and planned.committed is False
        links = await client.document_links(collection="kb")
        assert isinstance(links, responses.DocumentLinksResponse) and links.documents == 3 and links.pairs
        assert {"ada", "grace"} <= {shared.entity_id for shared in links.pairs[0].shared}
        assert (await client.document_links(collection="kb", as_of=before)).documents == 0
        await client.remove_relation("ada", "grace", "knows")
        assert (await client.get_entity("ada")).relations == []
        await client.delete_entity("grace")
        with pytest.raises(NotFoundError):
            await client.get_entity("grace")

        await client.revert(moved.correlation_id, force=True)
        page = await client.correlation_events(moved.correlation_id)
        assert isinstance(page, responses.CorrelationPage) and page.reverted_by and page.events[0].metadata["correlation_id"] == moved.correlation_id
        me = await client.whoami()
        assert isinstance(me, responses.WhoAmIResponse) and "read" in me.scopes
        marks = await client.timeline(limit=2)
        assert isinstance(marks, responses.TimelineResponse) and marks.sampled is True and len(marks.marks) == 2
        hood = await client.neighborhood(ada, as_of=before)
        assert isinstance(hood, responses.NeighborhoodPage) and hood.nodes[0].id == ada and hood.nodes[0].kind == "memory"

    async with MnemologClient(live.url, api_key=live.scratch) as scratch_raw:
        scratch_client = Recording(scratch_raw)
        await scratch_client.add_memories(MemoryIn(memory="to be dropped"))
        await scratch_client.add_memories(MemoryIn(memory="forget me", subject="u-1"))
        assert (await scratch_client.forget_subject("u-1", reason="test")).data["memories_erased"] == 1
        dropped = await scratch_client.drop_tenant("scratch", reason="test")
        assert dropped.positions
        client.called |= scratch_client.called

    assert operations(document) <= client.called, sorted(operations(document) - client.called)


async def test_a_write_retried_after_a_dropped_connection_is_written_once(live):
    async with CuttingProxy(live.url) as proxy, MnemologClient(proxy.url, api_key=live.key) as client:
        async with client.correlation() as cid:
            written = await client.add_memories(MemoryIn(memory="written once, answered twice"))
        assert proxy.cut.is_set() and proxy.connections == 2
        assert written.replayed is True
    async with MnemologClient(live.url, api_key=live.key) as direct:
        events = (await direct.list_events(correlation_id=cid, limit=1000)).events
        assert [e.type for e in events] == ["MemoryAdded"] and written.memory_ids


async def test_without_retries_the_dropped_connection_is_raised(live):
    import aiohttp

    async with CuttingProxy(live.url) as proxy, MnemologClient(proxy.url, api_key=live.key, max_retries=0) as client:
        with pytest.raises(aiohttp.ClientConnectionError):
            await client.add_memories(MemoryIn(memory="lost answer"))


async def test_correlation_groups_calls_that_revert_undoes_together(live):
    async with MnemologClient(live.url, api_key=live.key) as client:
        async with client.correlation() as cid:
            a = await client.add_memories(MemoryIn(memory="grouped one"))
            b = await client.add_memories(MemoryIn(memory="grouped two"))
            await client.link(a.memory_ids[0], b.memory_ids[0], edge_id=f"user:{cid}:1")
        outside = await client.add_memories(MemoryIn(memory="not in the group"))
        assert a.correlation_id == b.correlation_id == cid != outside.correlation_id
        await client.revert(cid)
        for memory_id in (*a.memory_ids, *b.memory_ids):
            assert (await client.get_memory(memory_id)).status == "deleted"
        assert (await client.get_memory(outside.memory_ids[0])).status == "activated"
        assert (await client.neighbors(a.memory_ids[0])).edges == []


async def test_the_event_stream_resumes_after_a_dropped_connection_without_loss_or_repeats(live):
    async with MnemologClient(live.url, api_key=live.key) as client:
        start = (await client.digest()).position
        written = await client.add_memories(memories=[MemoryIn(memory=f"streamed {i}") for i in range(6)])
        expected = [p for p in range(start + 1, written.positions[-1] + 1)]
    # Cut the first connection in the middle of the third event: the headers, two events and a half arrive.
    async with CuttingProxy(live.url, cut_after=1500) as proxy, MnemologClient(proxy.url, api_key=live.key) as client:
        seen = []
        stream = client.stream_events(after=start)
        while len(seen) < len(expected):
            seen.append((await asyncio.wait_for(stream.__anext__(), 30)).position)
        await stream.aclose()
        assert proxy.cut.is_set() and proxy.connections == 2
    assert seen == expected


async def test_errors_are_raised_by_kind_with_the_servers_json(live):
    async with MnemologClient(live.url, api_key=live.key) as client:
        with pytest.raises(NotFoundError) as missing:
            await client.get_memory("01a00000-0000-7000-8000-000000000000")
        assert missing.value.status == 404 and missing.value.body["error"]["code"] == "not_found"
        memory_id = (await client.add_memories(MemoryIn(memory="versioned"))).memory_ids[0]
        await client.update_memory(memory_id, {"memory": "versioned twice"})
        with pytest.raises(VersionConflictError) as stale:
            await client.update_memory(memory_id, {"memory": "a stale write"}, expected_version=1)
        assert stale.value.current_version == 2
        with pytest.raises(InvalidInputError) as invalid:
            await client.update_memory(memory_id, {"memory": ""})
        assert invalid.value.status == 422 and invalid.value.field == "memory"
        with pytest.raises(PayloadTooLargeError):
            await client.import_documents(("big.txt", b"word " * 300_000))
    async with MnemologClient(live.url, api_key=live.reader) as reader:
        with pytest.raises(ForbiddenError) as forbidden:
            await reader.add_memories(MemoryIn(memory="no write scope"))
        assert forbidden.value.code == "forbidden"
    async with MnemologClient(live.url, api_key="mlk_not_a_key") as stranger:
        with pytest.raises(AuthenticationError):
            await stranger.health() if False else await stranger.capabilities()
    assert issubclass(NotFoundError, ApiError) and issubclass(VersionConflictError, ApiError)


async def test_a_state_conflict_is_a_conflict_and_only_a_missed_expected_version_a_version_conflict(live):
    async with MnemologClient(live.url, api_key=live.key) as client:
        async with client.correlation() as cid:
            memory_id = (await client.add_memories(MemoryIn(memory="planted"))).memory_ids[0]
        await client.update_memory(memory_id, {"memory": "planted and grown"})
        with pytest.raises(ConflictError) as blocked:  # a later change blocks the revert: no version was expected
            await client.revert(cid)
        assert type(blocked.value) is ConflictError and blocked.value.status == 409 and blocked.value.code == "conflict"
        head = (await client.digest()).position
        with pytest.raises(ConflictError) as beyond:
            await client.get_memory(memory_id, as_of=head + 1000)
        assert type(beyond.value) is ConflictError and "as_of" in beyond.value.message
        await client.archive_memory(memory_id)
        with pytest.raises(ConflictError) as again:  # archived already, at the version the caller expected
            await client.archive_memory(memory_id, expected_version=3)
        assert type(again.value) is ConflictError
        with pytest.raises(VersionConflictError) as stale:
            await client.archive_memory(memory_id, expected_version=2)
        assert stale.value.current_version == 3


async def test_a_raw_request_that_writes_is_retried_with_one_idempotency_key(live):
    async with CuttingProxy(live.url) as proxy, MnemologClient(proxy.url, api_key=live.key) as client:
        answer = await client.request("POST", "/v1/memories", json={"memory": {"memory": "a raw write, answered twice"}}, headers={"X-Correlation-Id": "raw-retry"})
        assert proxy.cut.is_set() and proxy.connections == 2 and answer["replayed"] is True
    async with MnemologClient(live.url, api_key=live.key) as direct:
        assert [e.type for e in (await direct.list_events(correlation_id="raw-retry")).events] == ["MemoryAdded"]


async def test_the_timeout_holds_on_a_session_the_caller_gives(live):
    import aiohttp

    held: list[asyncio.StreamWriter] = []

    async def silent(reader, writer):  # takes the request and never answers
        held.append(writer)
        await reader.read(65536)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        async with aiohttp.ClientSession() as session:  # no timeout of its own
            client = MnemologClient(url, api_key=live.key, session=session, timeout=0.3, max_retries=0)
            call = asyncio.create_task(client.digest())
            done, _ = await asyncio.wait({call}, timeout=60)
            if not done:
                call.cancel()
                pytest.fail("the client's timeout did not apply to the caller's session")
            with pytest.raises(asyncio.TimeoutError):
                call.result()
    finally:
        for writer in held:
            writer.close()
        server.close()


#: Query parameters whose client keyword differs from the name on the wire (a Python keyword, or a plural for a repeatable one).
QUERY_KEYWORDS = {"type": ("types", "entity_type"), "from": ("start",), "to": ("end",)}


def test_every_query_parameter_and_body_field_of_the_document_is_a_keyword_of_its_method():
    """The client and the OpenAPI document agree: what an operation takes, its method takes (under its own name)."""
    from mnemolog.api.app import ROUTES
    from mnemolog.api.openapi import openapi_document

    document = openapi_document(ROUTES, "test")
    schemas = document["components"]["schemas"]
    mismatches = []
    for path, operations_ in document["paths"].items():
        for method, operation in operations_.items():
            fn = getattr(MnemologClient, operation["operationId"])
            accepted = set(inspect.signature(fn).parameters)
            hints = inspect.get_annotations(fn, eval_str=True)
            for options in ("options",):  # **options: a TypedDict names the rest
                if options in hints and hasattr(hints[options], "__args__"):
                    accepted |= set(hints[options].__args__[0].__annotations__)
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "query" and parameter["name"] not in accepted and not accepted & set(QUERY_KEYWORDS.get(parameter["name"], ())):
                    mismatches.append(f"{method.upper()} {path}: query {parameter['name']}")
            body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
            ref = body.get("$ref", "").rsplit("/", 1)[-1]
            fields = set(schemas[ref].get("properties", {})) if ref else set()
            if fields and not accepted & {"changes", "entity", "memory"}:  # a whole request Struct passed as one argument
                mismatches += [f"{method.upper()} {path}: body {f}" for f in sorted(fields - accepted)]
    assert not mismatches, mismatches


async def test_a_busy_answer_is_sent_again_after_its_retry_after_with_the_same_idempotency_key(aiohttp_server):
    """The server answers 503 ``busy`` with ``Retry-After`` when its database stayed locked: nothing was written, send it again."""
    from aiohttp import web

    seen: list[str | None] = []

    async def memories(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Idempotency-Key"))
        if len(seen) == 1:
            return web.json_response({"error": {"code": "busy", "message": "busy", "field": None}}, status=503, headers={"Retry-After": "0"})
        return web.json_response({"positions": [7], "correlation_id": "c", "replayed": False, "memory_ids": ["m"], "data": {}}, status=201)

    async def digest(request: web.Request) -> web.Response:
        seen.append("digest")
        return web.json_response({"error": {"code": "busy", "message": "still busy", "field": None}}, status=503, headers={"Retry-After": "0"})

    app = web.Application()
    app.router.add_post("/v1/memories", memories)
    app.router.add_get("/v1/digest", digest)
    server = await aiohttp_server(app)
    async with MnemologClient(str(server.make_url("")), max_retries=2) as client:
        written = await client.add_memories(MemoryIn(memory="sent twice, written once"))
        assert written.positions == [7] and len(seen) == 2 and seen[0] == seen[1] is not None
        seen.clear()
        with pytest.raises(ServerError) as busy:
            await client.digest()
        assert busy.value.status == 503 and busy.value.code == "busy" and seen == ["digest"] * 3


@pytest.mark.parametrize("wait", [0.1 + 0.2, 1 / 3, 2, 30.0])
async def test_organizer_status_takes_any_number_of_seconds_up_to_the_servers_limit(api, wait):
    """``wait`` in seconds, as its docstring says: a float's long repr is not refused as a malformed duration."""
    status = await api.typed_client().organizer_status(wait=wait)
    assert isinstance(status, responses.OrganizerStatusResponse)


async def test_an_update_struct_clears_an_optional_field_set_to_none(api):
    """``UpdateMemoryRequest(key=None)`` sends ``"key": null``, which clears the key, as the request's docstring says; a field not given stays."""
    client = api.typed_client()
    memory_id = (await client.add_memories(MemoryIn(memory="Ada keeps bees", key="bees", confidence=0.5, collection="notes"))).memory_ids[0]
    await client.update_memory(memory_id, UpdateMemoryRequest(key=None))
    await client.update_memory(memory_id, UpdateMemoryRequest(memory="Ada keeps wasps", confidence=None))
    kept = await client.get_memory(memory_id)
    assert (kept.memory, kept.key, kept.confidence, kept.metadata.get("collection")) == ("Ada keeps wasps", None, None, "notes")


async def test_a_write_that_failed_past_its_retries_carries_its_idempotency_key_to_send_it_again(live):
    """The answer was lost after the write was done: sent again later with the error's key, it is replayed, not written twice."""
    import aiohttp

    async with CuttingProxy(live.url) as proxy, MnemologClient(proxy.url, api_key=live.key, max_retries=0) as client:
        with pytest.raises(aiohttp.ClientConnectionError) as lost:
            await client.add_memories(MemoryIn(memory="answered to nobody"), correlation_id="lost-answer")
    key = lost.value.idempotency_key
    assert key
    async with MnemologClient(live.url, api_key=live.key) as client:
        again = await client.add_memories(MemoryIn(memory="answered to nobody"), idempotency_key=key, correlation_id="lost-answer")
        assert again.replayed is True
        with pytest.raises(NotFoundError) as missing:
            await client.archive_memory("01a00000-0000-7000-8000-000000000000", idempotency_key="mine")
        assert missing.value.idempotency_key == "mine"
        assert [e.type for e in (await client.list_events(correlation_id="lost-answer")).events] == ["MemoryAdded"]
