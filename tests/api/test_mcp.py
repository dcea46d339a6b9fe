"""The MCP server, driven by the MCP SDK's own client: a real ``mnemolog mcp`` subprocess over stdio, a real
``mnemolog mcp --http`` subprocess over streamable HTTP on a free loopback port, and the same server connected
in-process (:func:`front_client`) where a test is about the tools rather than the transport.

Data is written through the HTTP API (a real aiohttp server on the same data
directory, with auth), keys come from ``mnemolog keys create``, and every
read tool's answer is compared with the HTTP API's answer for the same data.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from contextlib import asynccontextmanager
from importlib.util import find_spec
from pathlib import Path

import pytest

from tests.in_process import run_main

HAVE_MCP = find_spec("mcp") is not None
needs_mcp = pytest.mark.skipif(not HAVE_MCP, reason="the mcp package (the mnemolog[mcp] extra) is not installed")

BIN = Path(sys.executable).parent
MNEMOLOG = str(BIN / "mnemolog")
CLIENT_NAME = "test-agent"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMOLOG_")}
    return {**env, **extra}


def mnemolog(data_dir: Path, *argv: str) -> str:
    """``mnemolog --data-dir DATA *argv`` (through its ``main``, in this process): its stdout; it must succeed."""
    done = run_main(["--data-dir", str(data_dir), *argv], text=True)
    assert done.returncode == 0, (argv, done.stderr)
    return done.stdout


def create_key(data_dir: Path, tenant: str, scopes: str) -> str:
    return json.loads(mnemolog(data_dir, "keys", "create", "--tenant", tenant, "--scopes", scopes, "--json"))["key"]


def _text(result) -> dict:
    assert len(result.content) == 1 and result.content[0].type == "text"
    return json.loads(result.content[0].text)


def ok(result) -> dict:
    assert not result.is_error, result.content[0].text
    return _text(result)


def refused(result) -> dict:
    assert result.is_error, result.content[0].text
    return _text(result)["error"]


@asynccontextmanager
async def stdio_client(data_dir: Path, key: str | None, *args: str, env: dict | None = None):
    import mcp_types as types
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.client.stdio import stdio_client as stdio_transport

    extra = {"MNEMOLOG_API_KEY": key} if key is not None else {}
    target = StdioServerParameters(
        command=MNEMOLOG, args=["--data-dir", str(data_dir), "mcp", *args], env=_env(**extra, **(env or {}))
    )
    # The server's stderr to this process's own: the transport's default is the sys.stderr of the moment mcp was first
    # imported, which a test capturing its output (capsys) may have replaced with a stream that has no file.
    transport = stdio_transport(target, errlog=sys.__stderr__)
    async with Client(transport, client_info=types.Implementation(name=CLIENT_NAME, version="1"), read_timeout_seconds=60) as client:
        yield client


@asynccontextmanager
async def front_client(data_dir: Path, key: str | None, *args: str):
    """The server ``mnemolog mcp *args`` (``--allow-writes``, ``--tenant T``) serves over stdio, acting as ``key``,
    connected in-process: the same front and tools, without a Python start and the SDK's imports in a subprocess."""
    import mcp_types as types
    from mcp import Client

    from mnemolog.api.mcp_server import McpFront, serving
    from mnemolog.eventstore.settings import Settings

    rest = [a for a in args if a != "--allow-writes"]
    assert rest == [] or (len(rest) == 2 and rest[0] == "--tenant"), args
    tenant = rest[1] if rest else None
    settings = Settings({"data_dir": str(data_dir)}, env={})
    front = McpFront.open(settings, api_key=key or "", tenant=tenant, allow_writes="--allow-writes" in args, inline_reads=True)
    try:
        async with serving(front) as server:
            async with Client(server, client_info=types.Implementation(name=CLIENT_NAME, version="1"), read_timeout_seconds=60) as client:
                yield client
    finally:
        front.close()


@pytest.fixture
def http_mcp():
    """Start ``mnemolog mcp --http`` subprocesses on a port each binds itself; each is stopped at teardown."""
    started: list[subprocess.Popen] = []

    def start(data_dir: Path, key: str | None, *args: str) -> str:
        extra = {"MNEMOLOG_API_KEY": key} if key is not None else {}
        proc = subprocess.Popen(
            [MNEMOLOG, "--data-dir", str(data_dir), "mcp", "--http", "--port", "0", *args],
            env=_env(**extra), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        started.append(proc)
        printed = []
        for line in proc.stderr:  # until "mnemolog: MCP over streamable HTTP at http://127.0.0.1:PORT/mcp (Ctrl-C stops)"
            printed.append(line)
            if found := re.search(r" at (http://\S+/mcp) ", line):
                return found.group(1)
        raise AssertionError(f"mnemolog mcp --http exited with {proc.wait()}: {''.join(printed)}")

    yield start
    for proc in started:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


@asynccontextmanager
async def http_client(url: str, key: str | None, **extra: str):
    import httpx2
    import mcp_types as types
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {**({"Authorization": f"Bearer {key}"} if key else {}), **extra}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, client_info=types.Implementation(name=CLIENT_NAME, version="1"), read_timeout_seconds=60) as client:
            yield client


READ_TOOLS = {"recall", "search", "get_memory", "history", "related", "relations", "entities", "log", "capabilities"}
WRITE_TOOLS = {"add_memory", "update_memory", "archive_memory", "link", "revert"}


async def seed(start):
    """A server with auth on a fresh data directory, with memories, an edge, entities and a relation in tenant default."""
    api = await start(auth=True)
    key = create_key(api.data_dir, "default", "read,write")
    http = api.client(api_key=key)
    lisbon = await http.add_memories({"memory": "I moved to Lisbon in May", "key": "home city", "tags": ["moves"]})
    cat = await http.add_memories({"memory": "I adopted a cat called Miso in June"})
    await http.update_memory(cat.memory_ids[0], {"memory": "I adopted a grey cat called Miso in June"})
    await http.link(lisbon.memory_ids[0], cat.memory_ids[0], "RELATED", weight=0.5)
    await http.request("PUT", "/v1/entities/person:ada", json={"name": "Ada Lovelace", "entity_type": "person", "aliases": ["Ada"]})
    await http.request("PUT", "/v1/entities/machine:engine", json={"name": "Analytical Engine", "entity_type": "machine"})
    await http.request("POST", "/v1/entities/person:ada/relations", json={"target_id": "machine:engine", "relation_type": "wrote_about", "weight": 0.9})
    return api, http, key, lisbon.memory_ids[0], cat.memory_ids[0]


# -- without the extra --------------------------------------------------------------------------------------------


def test_without_the_extra_the_verb_says_how_to_install_it(tmp_path):
    code = "import sys; sys.modules['mcp'] = None; from mnemolog.tools.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run(
        [sys.executable, "-c", code, "--data-dir", str(tmp_path), "mcp"], capture_output=True, text=True, env=_env(MNEMOLOG_API_KEY="x")
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mnemolog: error: ")
    assert "pip install -e '.[mcp]'" in lines[0] and "pip install 'mnemolog[mcp]'" in lines[0]
    assert not (tmp_path / "events.db").exists()  # refused before anything was made


def test_print_config_gives_the_client_snippet(tmp_path):
    done = subprocess.run([MNEMOLOG, "--data-dir", str(tmp_path), "mcp", "--print-config"], capture_output=True, text=True, env=_env(), check=True)
    entry = json.loads(done.stdout)["mcpServers"]["mnemolog"]
    assert entry["args"] == ["--data-dir", str(tmp_path.resolve()), "mcp"]
    assert Path(entry["command"]).name == "mnemolog" and "MNEMOLOG_API_KEY" in entry["env"]
    # The tenant goes into the entry; what a stdio entry cannot carry was dropped without a word, and is refused.
    done = subprocess.run([MNEMOLOG, "--data-dir", str(tmp_path), "mcp", "--tenant", "acme", "--allow-writes", "--print-config"], capture_output=True, text=True, env=_env(), check=True)
    assert json.loads(done.stdout)["mcpServers"]["mnemolog"]["args"][-4:] == ["mcp", "--tenant", "acme", "--allow-writes"]
    for extra in (["--http"], ["--port", "9999"], ["--api-key", "secret"]):
        done = subprocess.run([MNEMOLOG, "--data-dir", str(tmp_path), "mcp", *extra, "--print-config"], capture_output=True, text=True, env=_env())
        assert done.returncode == 2 and extra[0] in done.stderr and len(done.stderr.strip().splitlines()) == 1 and done.stdout == "", done.stderr


def test_stdio_without_a_key_is_refused_with_one_line(tmp_path):
    done = subprocess.run([MNEMOLOG, "--data-dir", str(tmp_path), "mcp"], capture_output=True, text=True, env=_env(), stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "MNEMOLOG_API_KEY" in done.stderr and len(done.stderr.strip().splitlines()) == 1


# -- stdio --------------------------------------------------------------------------------------------------------


@needs_mcp
async def test_stdio_read_tools_answer_what_the_http_api_answers(start):
    api, http, key, lisbon, cat = await seed(start)
    async with stdio_client(api.data_dir, key) as mcp:
        listed = {t.name: t for t in (await mcp.list_tools()).tools}
        assert set(listed) == READ_TOOLS  # no --allow-writes: no write tools, whatever the key
        assert listed["recall"].input_schema["type"] == "object" and "query" in listed["recall"].input_schema["required"]

        over_mcp = ok(await mcp.call_tool("recall", {"query": "which city did I move to?", "limit": 5}))
        over_http = await http.recall("which city did I move to?", limit=5)
        assert over_mcp == over_http
        assert over_mcp["hits"][0]["id"] == lisbon and over_mcp["hits"][0]["channels"]  # explanations kept

        filtered = {"query": "cat", "filters": {"tags": ["moves"]}, "channels": ["lexical"]}
        assert ok(await mcp.call_tool("recall", filtered)) == await http.recall("cat", filters={"tags": ["moves"]}, channels=["lexical"])
        assert ok(await mcp.call_tool("search", {"query": "cat Miso"})) == await http.search("cat Miso")

        assert ok(await mcp.call_tool("get_memory", {"id": cat})) == await http.get_memory(cat)
        assert ok(await mcp.call_tool("get_memory", {"id": cat, "as_of": 2}))["version"] == 1
        assert ok(await mcp.call_tool("get_memory", {"id": cat, "as_of": 2})) == await http.get_memory(cat, as_of=2)
        assert ok(await mcp.call_tool("history", {"id": cat})) == await http.memory_history(cat)
        assert ok(await mcp.call_tool("history", {"id": cat, "as_of": 2})) == await http.memory_history(cat, as_of=2)
        assert len(ok(await mcp.call_tool("history", {"id": cat, "as_of": 2}))["versions"]) == 1
        assert refused(await mcp.call_tool("history", {"id": cat, "as_of": "soon"}))["field"] == "as_of"

        related = ok(await mcp.call_tool("related", {"node": lisbon, "depth": 2, "direction": "out", "edge_types": ["RELATED"]}))
        assert related == await http.request("GET", "/v1/graph/neighbors", params={"node": lisbon, "depth": "2", "direction": "out", "type": "RELATED"})
        assert [r["node"] for r in related["reached"]] == [cat]

        entity_recall = ok(await mcp.call_tool("recall", {"query": "What did Ada write about?", "strategy": "graph-only"}))
        assert entity_recall == await http.recall("What did Ada write about?", strategy="graph-only")
        assert entity_recall["strategy"] == "graph-only"
        engine = next(h for h in entity_recall["hits"] if h["id"] == "machine:engine")
        assert engine["kind"] == "entity" and engine["entity"]["name"] == "Analytical Engine"
        assert engine["path"] == [{"source_id": "person:ada", "target_id": "machine:engine", "relation_type": "WROTE_ABOUT", "weight": 0.9}]

        cards = ok(await mcp.call_tool("relations", {"question": "What did Ada write about?"}))
        assert cards == await http.request("POST", "/v1/relations", json={"question": "What did Ada write about?"})
        one = ok(await mcp.call_tool("entities", {"id": "person:ada"}))
        assert one == await http.request("GET", "/v1/entities/person:ada")
        assert one["relations"]
        found = ok(await mcp.call_tool("entities", {"q": "ada", "entity_type": "person"}))
        assert found == await http.request("GET", "/v1/entities", params={"q": "ada", "type": "person"}) and found["count"] == 1

        page = ok(await mcp.call_tool("log", {"after": 1, "limit": 2}))
        assert page == await http.list_events(after=1, limit=2) and len(page["events"]) == 2
        correlation = page["events"][0]["metadata"]["correlation_id"]
        by_correlation = ok(await mcp.call_tool("log", {"correlation_id": correlation}))
        assert by_correlation == await http.list_events(correlation_id=correlation)

        caps = ok(await mcp.call_tool("capabilities", {}))
        assert {k: caps[k] for k in ("version", "head_position", "channels", "embedder")} == {
            k: v for k, v in (await http.capabilities()).items() if k in ("version", "head_position", "channels", "embedder")
        }
        assert caps["session"]["tenant"] == "default" and caps["session"]["writes"] is False
        assert caps["session"]["actor"] == f"mcp:{CLIENT_NAME}"


@needs_mcp
async def test_resources_and_the_citation_prompt(start):
    api, http, key, lisbon, cat = await seed(start)
    async with front_client(api.data_dir, key) as mcp:
        templates = {t.uri_template for t in (await mcp.list_resource_templates()).resource_templates}
        assert templates == {"mnemolog://memory/{id}", "mnemolog://memory/{id}/history"}
        memory = await mcp.read_resource(f"mnemolog://memory/{cat}")
        assert json.loads(memory.contents[0].text) == await http.get_memory(cat)
        history = await mcp.read_resource(f"mnemolog://memory/{cat}/history")
        assert json.loads(history.contents[0].text) == await http.memory_history(cat)

        from mcp.shared.exceptions import MCPError

        with pytest.raises(MCPError) as missing:
            await mcp.read_resource("mnemolog://memory/nope")
        assert missing.value.data["error"]["code"] == "not_found"

        prompts = (await mcp.list_prompts()).prompts
        assert [p.name for p in prompts] == ["cite_memory"]
        prompt = await mcp.get_prompt("cite_memory", {"question": "Where do I live?"})
        text = prompt.messages[0].content.text
        assert "Where do I live?" in text and "[memory:<id> v<version> @<position>]" in text and "as_of" in text
        assert "[entity:<id> @<position>]" in text


@needs_mcp
async def test_errors_are_tool_errors_naming_the_field_and_the_server_carries_on(start):
    api, http, key, lisbon, cat = await seed(start)
    async with front_client(api.data_dir, key) as mcp:
        assert refused(await mcp.call_tool("recall", {"query": "x", "limit": 0}))["field"] == "limit"
        assert refused(await mcp.call_tool("recall", {"query": "x", "limt": 3}))["field"] == "limt"
        assert refused(await mcp.call_tool("recall", {}))["field"] == "query"
        assert refused(await mcp.call_tool("recall", {"query": "x", "filters": {"status": ["gone"]}}))["field"] == "filters.status[0]"
        assert refused(await mcp.call_tool("get_memory", {"id": cat, "as_of": "yesterday-ish"}))["field"] == "as_of"
        assert refused(await mcp.call_tool("related", {"node": lisbon, "direction": "sideways"}))["field"] == "direction"
        # a type that is no type matched nothing, and answered as if the node had no edges
        assert refused(await mcp.call_tool("related", {"node": lisbon, "edge_types": ["RELATED", "%%"]}))["field"] == "edge_types[1]"
        assert ok(await mcp.call_tool("related", {"node": lisbon, "edge_types": [""]})) == ok(await mcp.call_tool("related", {"node": lisbon}))
        # int() refuses more than 4,300 digits: such a position was a 500
        assert refused(await mcp.call_tool("recall", {"query": "x", "as_of": "9" * 5000}))["field"] == "as_of"
        missing = refused(await mcp.call_tool("get_memory", {"id": "nope"}))
        assert missing["code"] == "not_found" and missing["status"] == 404
        assert refused(await mcp.call_tool("entities", {"id": "person:ada", "q": "ada"}))["field"] == "id"
        assert refused(await mcp.call_tool("no_such_tool", {}))["field"] == "name"
        # the server is still there and still right
        assert ok(await mcp.call_tool("get_memory", {"id": cat})) == await http.get_memory(cat)


@needs_mcp
async def test_the_log_reads_as_of_a_position_or_a_time_as_the_http_api_does(start):
    api, http, key, lisbon, cat = await seed(start)
    second = (await http.list_events(limit=2))["events"][1]
    async with front_client(api.data_dir, key) as mcp:
        for as_of in (2, second["recorded_at"]):
            page = ok(await mcp.call_tool("log", {"as_of": as_of}))
            assert [e["position"] for e in page["events"]] == [1, 2] and page == await http.list_events(as_of=as_of)
        assert refused(await mcp.call_tool("log", {"as_of": "yesterday-ish"}))["field"] == "as_of"
        assert refused(await mcp.call_tool("log", {"as_of": 10**6}))["field"] == "as_of"


@needs_mcp
async def test_an_empty_list_filters_the_log_by_nothing_as_it_does_every_other_tool(start):
    """types: [] (no type named) answered an empty page at next_after 0, as if the log held nothing; the HTTP API,
    the related tool's edge_types and recall's channels all take an empty list as no filter."""
    api, http, key, lisbon, cat = await seed(start)
    async with front_client(api.data_dir, key) as mcp:
        page = ok(await mcp.call_tool("log", {"types": [], "limit": 5}))
        assert page == await http.list_events(limit=5) and len(page["events"]) == 5
        assert ok(await mcp.call_tool("log", {"types": ["MemoryAdded"]})) == await http.list_events(types=["MemoryAdded"])


@needs_mcp
async def test_history_reads_a_page_of_the_size_asked_as_the_http_api_does(start):
    api, http, key, lisbon, cat = await seed(start)
    async with front_client(api.data_dir, key) as mcp:
        first = ok(await mcp.call_tool("history", {"id": cat, "limit": 1}))
        assert [v["version"] for v in first["versions"]] == [1] and first == await http.memory_history(cat, limit=1)
        rest = ok(await mcp.call_tool("history", {"id": cat, "after": first["next_after"], "limit": 1}))
        assert [v["version"] for v in rest["versions"]] == [2] and rest == await http.memory_history(cat, after=first["next_after"], limit=1)
        for limit in (0, 1001):
            assert refused(await mcp.call_tool("history", {"id": cat, "limit": limit}))["field"] == "limit"


@needs_mcp
async def test_a_bad_key_is_refused_at_the_first_call(start):
    from mcp.shared.exceptions import MCPError

    api, http, key, lisbon, cat = await seed(start)
    async with front_client(api.data_dir, "mlk_not_a_key") as mcp:
        with pytest.raises(MCPError) as listing:
            await mcp.list_tools()
        assert listing.value.data["error"] == {"code": "unauthorized", "message": "unknown or revoked API key", "field": "api_key", "status": 401}
        error = refused(await mcp.call_tool("get_memory", {"id": cat}))
        assert error["code"] == "unauthorized" and error["field"] == "api_key"
        error = refused(await mcp.call_tool("get_memory", {"id": cat}))  # still refused, still serving
        assert error["code"] == "unauthorized"


@needs_mcp
async def test_a_revoked_key_is_refused_from_the_next_call(start):
    api, http, key, lisbon, cat = await seed(start)
    async with front_client(api.data_dir, key) as mcp:
        ok(await mcp.call_tool("get_memory", {"id": cat}))
        key_id = key.split("_")[1]
        mnemolog(api.data_dir, "keys", "revoke", key_id)
        assert refused(await mcp.call_tool("get_memory", {"id": cat}))["code"] == "unauthorized"


@needs_mcp
async def test_writes_carry_the_actor_and_the_session_and_mnemolog_revert_undoes_the_session(start):
    api, http, key, lisbon, cat = await seed(start)
    async with stdio_client(api.data_dir, key, "--allow-writes") as mcp:
        assert {t.name for t in (await mcp.list_tools()).tools} == READ_TOOLS | WRITE_TOOLS
        added = ok(await mcp.call_tool("add_memory", {"memory": {"memory": "My sister lives in Porto", "tags": ["family"]}, "idempotency_key": "k1"}))
        again = ok(await mcp.call_tool("add_memory", {"memory": {"memory": "My sister lives in Porto", "tags": ["family"]}, "idempotency_key": "k1"}))
        assert again["replayed"] is True and again["memory_ids"] == added["memory_ids"]
        sister = added["memory_ids"][0]
        session = added["correlation_id"]
        assert session.startswith(f"mcp-{CLIENT_NAME}-")

        found = ok(await mcp.call_tool("recall", {"query": "where does my sister live", "min_position": added["positions"][-1]}))
        assert found["hits"][0]["id"] == sister

        conflict = refused(await mcp.call_tool("update_memory", {"id": cat, "memory": "I adopted two cats", "expected_version": 1}))
        assert conflict["code"] == "conflict" and conflict["current_version"] == 2
        updated = ok(await mcp.call_tool("update_memory", {"id": cat, "memory": "I adopted two cats", "expected_version": 2, "reason": "a second cat"}))
        assert updated["correlation_id"] == session
        ok(await mcp.call_tool("link", {"source": sister, "target": lisbon, "edge_type": "RELATED"}))
        ok(await mcp.call_tool("archive_memory", {"id": lisbon, "reason": "moved on"}))
        assert refused(await mcp.call_tool("add_memory", {"memory": {"memory": ""}}))["field"] == "memory.memory"

        versions = (await http.memory_history(cat))["versions"]
        assert versions[-1]["actor"] == f"mcp:{CLIENT_NAME}" and versions[-1]["correlation_id"] == session
        assert (await http.memory_history(cat))["versions"][-1]["memory"] == "I adopted two cats"

        head = (await http.digest())["position"]
        too_long = refused(await mcp.call_tool("revert", {"correlation_id": "c" * 201}))  # as POST /v1/reverts refuses it
        assert (too_long["status"], too_long["field"]) == (422, "correlation_id")
        preview = ok(await mcp.call_tool("revert", {"correlation_id": session}))
        assert preview["positions"] == [] and preview["data"]["dry_run"] is True and preview["data"]["would_revert"] >= 4
        assert set(preview["memory_ids"]) == {sister, cat, lisbon}
        assert (await http.digest())["position"] == head  # a dry run writes nothing

    mnemolog(api.data_dir, "revert", session)
    assert (await http.get_memory(sister))["status"] == "deleted"
    assert (await http.get_memory(cat))["memory"] == "I adopted a grey cat called Miso in June"
    assert (await http.get_memory(lisbon))["status"] == "activated"


@needs_mcp
async def test_a_write_refused_for_its_idempotency_key_or_expected_version_names_that_argument(start):
    """The HTTP API names the headers (Idempotency-Key, If-Match); a tool has arguments, and its error names the argument."""
    api, http, key, lisbon, cat = await seed(start)
    async with front_client(api.data_dir, key, "--allow-writes") as mcp:
        ok(await mcp.call_tool("add_memory", {"memory": {"memory": "My sister lives in Porto"}, "idempotency_key": "k1"}))
        reused = refused(await mcp.call_tool("add_memory", {"memory": {"memory": "My brother lives in Faro"}, "idempotency_key": "k1"}))
        assert (reused["code"], reused["field"]) == ("idempotency_conflict", "idempotency_key")
        nul = refused(await mcp.call_tool("add_memory", {"memory": {"memory": "x"}, "idempotency_key": "k\x00ey"}))  # was a 500
        assert (nul["status"], nul["field"]) == (422, "idempotency_key")
        nul = refused(await mcp.call_tool("archive_memory", {"id": "a\x00b"}))
        assert (nul["status"], nul["field"]) == (422, "id")
        stale = refused(await mcp.call_tool("update_memory", {"id": cat, "memory": "I adopted two cats", "expected_version": 1}))
        assert (stale["code"], stale["field"], stale["current_version"]) == ("conflict", "expected_version", 2)
        stale = refused(await mcp.call_tool("archive_memory", {"id": cat, "expected_version": 1}))
        assert (stale["code"], stale["field"], stale["current_version"]) == ("conflict", "expected_version", 2)
        ok(await mcp.call_tool("archive_memory", {"id": cat, "expected_version": 2}))
        again = refused(await mcp.call_tool("archive_memory", {"id": cat, "expected_version": 3}))  # at that version: the state conflicts
        assert (again["code"], again["field"], again["current_version"]) == ("conflict", None, 3)


@needs_mcp
async def test_a_memory_added_through_mcp_is_linked_to_the_entities_it_mentions(start):
    api, http, key, lisbon, cat = await seed(start)
    async with front_client(api.data_dir, key, "--allow-writes") as mcp:
        added = ok(await mcp.call_tool("add_memory", {"memory": {"memory": "Ada Lovelace wrote about the Analytical Engine"}}))
        assert added["data"]["mentions"] == 2
        history = ok(await mcp.call_tool("history", {"id": added["memory_ids"][0]}))
        assert [link["entity_id"] for link in history["mention_links"]] == ["person:ada", "machine:engine"]


@needs_mcp
async def test_a_read_only_key_cannot_write(start):
    api, http, key, lisbon, cat = await seed(start)
    reader = create_key(api.data_dir, "default", "read")
    head = (await http.digest())["position"]
    async with front_client(api.data_dir, reader, "--allow-writes") as mcp:
        assert {t.name for t in (await mcp.list_tools()).tools} == READ_TOOLS
        error = refused(await mcp.call_tool("add_memory", {"memory": {"memory": "sneaky"}}))
        assert error["code"] == "forbidden" and "write" in error["message"] and error["field"] == "api_key"  # the key lacks the scope
        assert refused(await mcp.call_tool("revert", {"correlation_id": "x", "dry_run": False}))["code"] == "forbidden"
        assert ok(await mcp.call_tool("capabilities", {}))["session"]["writes"] is False
    async with front_client(api.data_dir, key) as mcp:  # a writer key, but the server was not allowed to write
        error = refused(await mcp.call_tool("add_memory", {"memory": {"memory": "sneaky"}}))
        assert error["code"] == "forbidden" and "--allow-writes" in error["message"]
    assert (await http.digest())["position"] == head


@needs_mcp
async def test_a_server_started_for_another_tenant_than_its_keys_is_refused(start, http_mcp):
    """mnemolog mcp --tenant acme acting as a key of tenant default served default without a word, writes included,
    as the HTTP API once served a tenant header naming another tenant than the key's; it is a 403 naming tenant."""
    api, http, key, lisbon, cat = await seed(start)
    head = (await http.digest())["position"]
    async with stdio_client(api.data_dir, key, "--allow-writes", "--tenant", "acme") as mcp:
        for tool, arguments in (("capabilities", {}), ("add_memory", {"memory": {"memory": "meant for acme"}}), ("get_memory", {"id": cat})):
            error = refused(await mcp.call_tool(tool, arguments))
            assert (error["status"], error["code"], error["field"]) == (403, "forbidden", "tenant"), (tool, error)
            assert "'default'" in error["message"] and "'acme'" in error["message"]
    url = http_mcp(api.data_dir, key, "--allow-writes", "--tenant", "acme")
    async with http_client(url, None) as mcp:  # the server's own key, over HTTP
        assert refused(await mcp.call_tool("add_memory", {"memory": {"memory": "meant for acme"}}))["field"] == "tenant"
    async with http_client(url, key) as mcp:  # a request's own key acts for its tenant: the option is the default of a key for every tenant
        assert ok(await mcp.call_tool("get_memory", {"id": cat})) == await http.get_memory(cat)
    assert (await http.digest())["position"] == head
    async with stdio_client(api.data_dir, key, "--tenant", "default") as mcp:
        assert ok(await mcp.call_tool("get_memory", {"id": cat})) == await http.get_memory(cat)


@needs_mcp
async def test_a_write_only_key_lists_and_calls_the_write_tools(start):
    """An ingesting agent's key may write without reading: its client, which lists the tools first, was refused the listing."""
    from mcp.shared.exceptions import MCPError

    api, http, key, lisbon, cat = await seed(start)
    writer = create_key(api.data_dir, "default", "write")
    async with front_client(api.data_dir, writer, "--allow-writes") as mcp:
        assert {t.name for t in (await mcp.list_tools()).tools} == WRITE_TOOLS
        added = ok(await mcp.call_tool("add_memory", {"memory": {"memory": "a note from the ingester"}}))
        assert refused(await mcp.call_tool("get_memory", {"id": added["memory_ids"][0]}))["code"] == "forbidden"
    assert (await http.get_memory(added["memory_ids"][0]))["memory"] == "a note from the ingester"
    async with front_client(api.data_dir, writer) as mcp:  # no tool it may call: refused as before, for the read scope
        with pytest.raises(MCPError) as listing:
            await mcp.list_tools()
        assert listing.value.data["error"]["code"] == "forbidden" and "read" in listing.value.data["error"]["message"]


@needs_mcp
async def test_another_tenants_ids_are_invisible(start):
    from mcp.shared.exceptions import MCPError

    api, http, key, lisbon, cat = await seed(start)
    other = create_key(api.data_dir, "other", "read,write")
    async with front_client(api.data_dir, other, "--allow-writes") as mcp:
        assert refused(await mcp.call_tool("get_memory", {"id": cat}))["code"] == "not_found"
        assert refused(await mcp.call_tool("history", {"id": cat}))["code"] == "not_found"
        assert ok(await mcp.call_tool("recall", {"query": "which city did I move to?"}))["hits"] == []
        assert refused(await mcp.call_tool("related", {"node": lisbon}))["code"] == "not_found"
        assert ok(await mcp.call_tool("log", {}))["events"] == []
        assert refused(await mcp.call_tool("entities", {"id": "person:ada"}))["code"] == "not_found"
        assert refused(await mcp.call_tool("archive_memory", {"id": cat}))["code"] == "not_found"
        with pytest.raises(MCPError):
            await mcp.read_resource(f"mnemolog://memory/{cat}")
        assert ok(await mcp.call_tool("capabilities", {}))["session"]["tenant"] == "other"
    assert (await http.get_memory(cat))["status"] == "activated"


# -- streamable HTTP ----------------------------------------------------------------------------------------------


@needs_mcp
async def test_streamable_http_serves_the_same_answers_and_checks_each_requests_key(start, http_mcp):
    from mcp.shared.exceptions import MCPError

    api, http, key, lisbon, cat = await seed(start)
    other = create_key(api.data_dir, "other", "read")
    url = http_mcp(api.data_dir, None, "--allow-writes")
    async with http_client(url, key) as mcp:
        assert {t.name for t in (await mcp.list_tools()).tools} == READ_TOOLS | WRITE_TOOLS
        assert ok(await mcp.call_tool("recall", {"query": "which city did I move to?"})) == await http.recall("which city did I move to?")
        assert ok(await mcp.call_tool("get_memory", {"id": cat})) == await http.get_memory(cat)
        added = ok(await mcp.call_tool("add_memory", {"memory": {"memory": "The office moved to Porto"}}))
        assert (await http.memory_history(added["memory_ids"][0]))["versions"][0]["actor"] == f"mcp:{CLIENT_NAME}"
        again = ok(await mcp.call_tool("add_memory", {"memory": {"memory": "The office has a garden"}}))
        assert again["correlation_id"] == added["correlation_id"]
    # The transport has no sessions: another agent, with a key of its own, never shares the first one's correlation
    # (reverting one agent's work leaves the other's), and an agent may name its correlation as on the HTTP API.
    second = create_key(api.data_dir, "default", "read,write")
    async with http_client(url, second) as mcp:
        theirs = ok(await mcp.call_tool("add_memory", {"memory": {"memory": "The canteen moved to Braga"}}))
        assert theirs["correlation_id"].startswith(f"mcp-{CLIENT_NAME}-") and theirs["correlation_id"] != added["correlation_id"]
    async with http_client(url, second, **{"X-Correlation-Id": "agent-7-task-3"}) as mcp:
        named = ok(await mcp.call_tool("add_memory", {"memory": {"memory": "The library opens at nine"}}))
        assert named["correlation_id"] == "agent-7-task-3"
    async with http_client(url, second, **{"X-Correlation-Id": "x" * 201}) as mcp:
        assert refused(await mcp.call_tool("add_memory", {"memory": {"memory": "x"}}))["field"] == "X-Correlation-Id"
    async with http_client(url, key) as mcp:
        ok(await mcp.call_tool("revert", {"correlation_id": added["correlation_id"], "dry_run": False}))
    assert (await http.get_memory(theirs["memory_ids"][0]))["status"] == "activated"
    assert (await http.get_memory(added["memory_ids"][0]))["status"] == "deleted"
    async with http_client(url, other) as mcp:  # each request acts as its own key: another tenant, read only
        assert {t.name for t in (await mcp.list_tools()).tools} == READ_TOOLS
        assert refused(await mcp.call_tool("get_memory", {"id": cat}))["code"] == "not_found"
        assert refused(await mcp.call_tool("add_memory", {"memory": {"memory": "x"}}))["code"] == "forbidden"
    async with http_client(url, "mlk_wrong") as mcp:
        with pytest.raises(MCPError):
            await mcp.list_tools()
        assert refused(await mcp.call_tool("recall", {"query": "x"}))["field"] == "api_key"
    async with http_client(url, None) as mcp:  # no key anywhere: refused, naming where to give one
        error = refused(await mcp.call_tool("recall", {"query": "x"}))
        assert error["field"] == "api_key" and "MNEMOLOG_API_KEY" in error["message"]


#: Tool arguments that no JSON parser should let through, but Python's ``json`` does (the 2026 streamable-HTTP
#: transport parses with it): (tool, the arguments as JSON text, the field named). Each was an internal error.
LOOSE_ARGUMENTS = [
    ("recall", '{"query": "\\ud800 where"}', "query"),
    ("add_memory", '{"memory": {"memory": "half a pair \\udc00"}}', "memory.memory"),
    ("add_memory", '{"memory": {"memory": "a number", "properties": {"a": NaN}}}', "memory.properties.a"),
    ("add_memory", '{"memory": {"memory": "a number", "confidence": Infinity}}', "memory.confidence"),
    ("search", '{"query": "cat", "embedding": [-Infinity]}', "embedding[0]"),
    ("log", '{"after": 9223372036854775899}', "after"),  # past any position: was an overflow in SQLite
    ("get_memory", '{"id": "\\ud83d"}', "id"),
]


@needs_mcp
async def test_arguments_no_strict_json_parser_takes_are_refused_naming_the_field(start, http_mcp):
    import aiohttp

    api, http, key, lisbon, cat = await seed(start)
    url = http_mcp(api.data_dir, key, "--allow-writes")
    head = (await http.digest())["position"]
    meta = '{"io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}, "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}'
    async with aiohttp.ClientSession() as session:
        for i, (tool, arguments, field) in enumerate(LOOSE_ARGUMENTS):
            body = '{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": {"name": "%s", "arguments": %s, "_meta": %s}}' % (i, tool, arguments, meta)
            headers = {
                "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": tool,
                "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
            }
            async with session.post(url, data=body.encode(), headers=headers) as response:
                answer = json.loads(await response.text())
            assert answer["result"]["isError"], (tool, arguments, answer)
            error = json.loads(answer["result"]["content"][0]["text"])["error"]
            assert (error["status"], error["code"], error["field"]) == (422, "invalid", field), (tool, arguments, error)
    assert (await http.digest())["position"] == head  # nothing written


@needs_mcp
async def test_a_tenant_name_longer_than_any_tenant_is_refused_naming_where_it_came_from(start, http_mcp, tmp_path):
    """Over HTTP the header, like the HTTP API's, is a 400 naming it (a write under it was an internal error); the option stops the command."""
    api, http, key, lisbon, cat = await seed(start)
    every = create_key(api.data_dir, "*", "read,write")
    url = http_mcp(api.data_dir, None, "--allow-writes")
    head = (await http.digest())["position"]
    for name in ("t" * 201, "t" * 300):
        async with http_client(url, every, **{"X-Mnemolog-Tenant": name}) as mcp:
            for tool, arguments in (("add_memory", {"memory": {"memory": "under a long tenant"}}), ("recall", {"query": "long"})):
                error = refused(await mcp.call_tool(tool, arguments))
                assert (error["status"], error["field"]) == (400, "X-Mnemolog-Tenant"), (tool, error)
    async with http_client(url, every, **{"X-Mnemolog-Tenant": "t" * 200}) as mcp:  # the longest taken
        ok(await mcp.call_tool("add_memory", {"memory": {"memory": "under the longest tenant"}}))
    assert (await http.digest())["position"] == head + 1
    done = subprocess.run([MNEMOLOG, "--data-dir", str(api.data_dir), "mcp", "--tenant", "t" * 201], capture_output=True, text=True, env=_env(MNEMOLOG_API_KEY=every), stdin=subprocess.DEVNULL, timeout=60)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "--tenant" in done.stderr, done.stderr


@needs_mcp
async def test_a_tenant_header_naming_another_tenant_than_the_keys_is_refused(start, http_mcp):
    """A key bound to one tenant served a request naming another in the header as its own, writes included."""
    api, http, key, lisbon, cat = await seed(start)
    url = http_mcp(api.data_dir, None, "--allow-writes")
    head = (await http.digest())["position"]
    async with http_client(url, key, **{"X-Mnemolog-Tenant": "someone-else"}) as mcp:
        error = refused(await mcp.call_tool("add_memory", {"memory": {"memory": "meant for someone else"}}))
        assert (error["status"], error["code"]) == (403, "forbidden"), error
    assert (await http.digest())["position"] == head


@needs_mcp
async def test_streamable_http_with_the_servers_key(start, http_mcp):
    api, http, key, lisbon, cat = await seed(start)
    url = http_mcp(api.data_dir, key)
    async with http_client(url, None) as mcp:
        assert {t.name for t in (await mcp.list_tools()).tools} == READ_TOOLS
        assert ok(await mcp.call_tool("history", {"id": cat})) == await http.memory_history(cat)


@needs_mcp
async def test_streamable_http_takes_the_apis_body_limit_and_refuses_beyond_it_in_json(start, http_mcp):
    """The SDK refused a body over 4 MiB with a plain-text 413; the HTTP API takes 16 MiB."""
    import http.client as http_client_lib
    import socket

    api, http, key, lisbon, cat = await seed(start)
    url = http_mcp(api.data_dir, key, "--allow-writes")
    batch = [{"memory": f"note {i} " + "x" * 90_000} for i in range(60)]  # 5.2 MiB: over the SDK's own limit, within the API's
    async with http_client(url, None) as mcp:
        added = ok(await mcp.call_tool("add_memory", {"memories": batch}))
    assert len(added["memory_ids"]) == 60 and (await http.get_memory(added["memory_ids"][-1]))["memory"] == batch[-1]["memory"]
    # Refused on its declared length, before it is read: the headers alone get the answer.
    host, port = re.match(r"http://([^/:]+):(\d+)/", url).groups()
    with socket.create_connection((host, int(port)), timeout=60) as conn:
        conn.sendall(f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
                     f"Content-Length: {2**24 + 1}\r\n\r\n".encode())
        response = http_client_lib.HTTPResponse(conn)
        response.begin()
        assert response.status == 413 and response.getheader("Content-Type") == "application/json"
        answer = json.loads(response.read())
    assert answer["jsonrpc"] == "2.0" and answer["id"] is None and answer["error"]["code"] == -32600
    assert answer["error"]["data"]["error"]["code"] == "payload_too_large" and answer["error"]["data"]["error"]["field"] == "body"
    assert "16,777,216 bytes" in answer["error"]["message"]


# -- the HTTP API's revert dry run, which the MCP revert uses -------------------------------------------------------


async def test_http_revert_dry_run_writes_nothing(start):
    api, http, key, lisbon, cat = await seed(start)
    written = await http.add_memories({"memory": "a passing thought"}, correlation_id="session-1")
    head = (await http.digest())["position"]
    preview = await http.request("POST", "/v1/reverts", json={"correlation_id": "session-1", "dry_run": True})
    assert preview["positions"] == [] and preview["data"] == {"dry_run": True, "would_revert": 1, "conflicts": [], "forced": False}
    assert preview["memory_ids"] == written.memory_ids
    assert (await http.digest())["position"] == head
    done = await http.request("POST", "/v1/reverts", json={"correlation_id": "session-1"})
    assert done["positions"] and (await http.get_memory(written.memory_ids[0]))["status"] == "deleted"
