"""The MCP server over stdio, spoken to in raw JSON-RPC lines: any arguments to any tool, and a message
longer than the server reads, are answered (a 4xx naming what is wrong) and the server carries on."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.api.test_mcp import MNEMOLOG, _env, create_key, needs_mcp


class RawStdio:
    """``mnemolog mcp`` over stdio, spoken to in JSON-RPC lines: what a careless or hostile client can send."""

    def __init__(self, data_dir: Path, key: str, *args: str):
        self.proc = subprocess.Popen(
            [MNEMOLOG, "--data-dir", str(data_dir), "mcp", *args],
            env=_env(MNEMOLOG_API_KEY=key), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.next_id = 0
        self.ask("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fuzzer", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict) -> None:
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def ask(self, method: str, params: dict) -> dict:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        line = self.proc.stdout.readline()
        assert line, f"the server stopped: {self.proc.stderr.read()[-2000:]}"
        answer = json.loads(line)
        assert answer["id"] == self.next_id
        return answer

    def close(self) -> str:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        return self.proc.stderr.read()


@pytest.fixture
def stdio_server(tmp_path):
    """A ``RawStdio`` server allowed to write, with a key of tenant ``default``; once closed, no traceback on its stderr."""
    data_dir = tmp_path / "data"
    server = RawStdio(data_dir, create_key(data_dir, "default", "read,write"), "--allow-writes")
    yield server
    errors = server.close()
    assert "Traceback" not in errors, errors[-3000:]


@needs_mcp
def test_any_arguments_to_any_tool_are_answered_or_refused_naming_a_4xx_and_the_server_carries_on(stdio_server):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from mnemolog.api.mcp_server import TOOLS, input_schema

    server = stdio_server
    added = server.ask("tools/call", {"name": "add_memory", "arguments": {"memory": {"memory": "a memory to aim at"}}})
    memory_id = json.loads(added["result"]["content"][0]["text"])["memory_ids"][0]
    scalars = (
        st.none() | st.booleans() | st.sampled_from([memory_id, "", "default", "2026-01-01T00:00:00Z", "both", "RELATED", "lexical"])
        | st.integers(min_value=-(2**70), max_value=2**70) | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=30)
    )
    values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4), max_leaves=12)
    names = {t.name: sorted(input_schema(t.args)["properties"]) for t in TOOLS}

    @st.composite
    def calls(draw):
        name = draw(st.sampled_from(sorted(names) + ["no_such_tool"]))
        keys = st.sampled_from(names.get(name) or ["x"]) | st.text(max_size=10)
        return name, draw(st.dictionaries(keys, values, max_size=5))

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(calls())
    def call(case):
        name, arguments = case
        answer = server.ask("tools/call", {"name": name, "arguments": arguments})
        assert "result" in answer, answer
        body = json.loads(answer["result"]["content"][0]["text"])
        if answer["result"].get("isError"):
            assert 400 <= body["error"]["status"] < 500 and body["error"]["message"], (name, arguments, body)

    call()
    still = server.ask("tools/call", {"name": "get_memory", "arguments": {"id": memory_id}})
    assert json.loads(still["result"]["content"][0]["text"])["id"] == memory_id


@needs_mcp
def test_a_message_longer_than_the_server_reads_is_refused_and_the_server_carries_on(stdio_server):
    """A line past the stdio reader's limit stopped the server with a traceback; it is answered as too large, for its id when it comes first."""
    from mnemolog.api.mcp_stdio import MAX_LINE_BYTES

    server = stdio_server
    huge = {"memories": [{"memory": "z" * 90_000}] * (MAX_LINE_BYTES // 90_000 + 1)}
    answer = server.ask("tools/call", {"name": "add_memory", "arguments": huge})
    assert answer["error"]["data"]["error"] == {"code": "payload_too_large", "message": answer["error"]["data"]["error"]["message"], "field": "params", "status": 413}
    assert f"{MAX_LINE_BYTES // 2**20} MiB" in answer["error"]["message"]
    server.send({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "add_memory", "arguments": huge}, "id": 99})  # its id past the limit
    assert json.loads(server.proc.stdout.readline())["id"] is None
    written = server.ask("tools/call", {"name": "add_memory", "arguments": {"memory": {"memory": "a memory of a usual size"}}})
    assert json.loads(written["result"]["content"][0]["text"])["positions"] == [1]  # nothing of the huge batches was written


@needs_mcp
def test_a_line_that_is_no_message_the_sdk_reads_is_answered_and_the_server_carries_on(stdio_server):
    """The SDK dropped such lines without a word, and a client waiting for the answer waited for ever."""
    server = stdio_server
    call = '{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": {"name": "recall", "arguments": {"query": %s}}}'
    for line, request_id, code in (
        (call % (7, "9" * 5000), 7, -32700),  # valid JSON, past the SDK's numbers: its id is still read
        (call % (8, '"\\ud800"'), 8, -32700),  # an escaped lone surrogate
        ("this is not json", None, -32700),
        ("[" * 5000 + "]" * 5000, None, -32700),  # nesting past the SDK's parser
        ('[{"jsonrpc": "2.0", "id": 9, "method": "ping"}]', None, -32600),  # a batch
        ('{"jsonrpc": "2.0", "id": 10}', 10, -32600),  # no method, no result
    ):
        server.proc.stdin.write(line + "\n")
        server.proc.stdin.flush()
        answer = json.loads(server.proc.stdout.readline())
        assert (answer["id"], answer["error"]["code"]) == (request_id, code), (line[:80], answer)
        assert answer["error"]["data"]["error"]["field"] == "params" and answer["error"]["data"]["error"]["status"] == 400
    server.proc.stdin.write("\n")  # a blank line is no message: nothing to answer
    assert server.ask("ping", {})["result"] == {}
