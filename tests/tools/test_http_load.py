"""The benches' load client (``tools/http_load.py``) against a real server: what it counts are real answers."""

from __future__ import annotations

import asyncio

import msgspec
import pytest

from mnemolog.api.app import create_app
from mnemolog.eventstore.settings import Settings
from mnemolog.tools import http_load


@pytest.fixture
async def url(aiohttp_server, tmp_path):
    """A real server on loopback over a real data directory."""
    server = await aiohttp_server(create_app(Settings({"data_dir": str(tmp_path / "data"), "auth": False}, env={})))
    return str(server.make_url("")).rstrip("/")


async def test_requests_sent_are_answered_and_the_answers_read_whole(url):
    memories = [{"memory": f"note {i} about the harbour"} for i in range(150)]
    batches = [http_load.post(url, "/v1/memories", {"memories": memories[i : i + 100]}) for i in range(0, 150, 100)]
    assert await http_load.send_all(url, batches) > 0
    conn = await http_load.Connection.open(url)
    try:
        status, body = await conn.send(http_load.post(url, "/v1/recall", {"query": "harbour", "limit": 50}))
        assert status == 200 and len(msgspec.json.decode(body)["hits"]) == 50  # a large answer arrives whole
        status, body = await conn.send(http_load.get(url, "/health"))  # the same connection, kept alive
        assert status == 200 and msgspec.json.decode(body)["head_position"] > 150  # 150 adds and the evictions
        status, body = await conn.send(http_load.post(url, "/v1/recall", {"query": "harbour", "bogus": 1}))
        assert status == 422 and msgspec.json.decode(body)["error"]["field"] == "bogus"
    finally:
        conn.close()
    samples = await http_load.latencies(url, [http_load.post(url, "/v1/recall", {"query": "note"})] * 3, warmup=1)
    assert len(samples) == 3 and all(s > 0 for s in samples)
    assert await http_load.throughput(url, [http_load.post(url, "/v1/recall", {"query": "note"})], clients=4, duration=0.3) > 0
    assert await http_load.index_caught_up(url, processes=1, timeout=30)


async def test_a_refused_request_stops_a_measurement(url):
    with pytest.raises(RuntimeError, match="422"):
        await http_load.send_all(url, [http_load.post(url, "/v1/memories", {"memories": []})])


async def test_load_across_servers_deals_the_clients_to_each(aiohttp_server):
    """``throughput_across``: the clients go to the servers in turn, and every answer of each is counted."""
    from aiohttp import web

    served: list[int] = []
    urls = []
    for k in range(2):
        served.append(0)

        async def answer(request: web.Request, k: int = k) -> web.Response:
            served[k] += 1
            return web.json_response({"server": k})

        app = web.Application()
        app.router.add_post("/v1/recall", answer)
        server = await aiohttp_server(app)
        urls.append(str(server.make_url("")).rstrip("/"))
    targets = [(url, [http_load.post(url, "/v1/recall", {"query": "q"})]) for url in urls]
    began = asyncio.get_running_loop().time()
    rate = await http_load.throughput_across(targets, clients=4, duration=0.3)
    elapsed = asyncio.get_running_loop().time() - began
    assert served[0] > 0 and served[1] > 0
    assert rate * elapsed == pytest.approx(sum(served), rel=0.2)  # the rate counts the answers of both
