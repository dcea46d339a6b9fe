"""``mnemolog bench mcp``: recall over MCP stdio next to the same recall over HTTP, in one run.

The store holds ``--memories`` memories (default 10,000; hashing embedder).
Each question is asked of a real ``mnemolog serve`` on loopback (through
:class:`mnemolog.api.client.MnemologClient`) and then of a real ``mnemolog
mcp`` subprocess over stdio (through the MCP SDK's own client, calling the
``recall`` tool), alternately, so that both paths see the same load on a
shared machine. Both run without auth and without the organizer, over the
same data directory. The difference of the two p50s is what the MCP path
adds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

from .bench_rebuild import sentences
from .bench_recall import Server, _fill, _p, questions
from .common import CommandError, counted

HELP = "recall p50 over MCP stdio next to the same recall over HTTP, at 10k memories (needs the mcp extra)"


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--memories", type=int, default=10_000, help="memories in the store (default 10000)")
    parser.add_argument("--queries", type=int, default=200, help="queries per path (default 200)")


async def _latencies(url: str, data_dir: Path, asks: list[str]) -> tuple[list[float], list[float]]:
    """Each question over HTTP, then over MCP, alternately: both paths see the same load on the machine."""
    import mcp_types as types
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    from mnemolog.api.client import MnemologClient

    env = {**os.environ, "MNEMOLOG_AUTH": "off", "MNEMOLOG_ORGANIZER_ENABLED": "off", "MNEMOLOG_SYNCHRONOUS": "NORMAL"}
    target = StdioServerParameters(command=sys.executable, args=["-m", "mnemolog.tools.cli", "--data-dir", str(data_dir), "mcp"], env=env)
    async with MnemologClient(url) as http, Client(target, client_info=types.Implementation(name="bench", version="1"), cache=None) as mcp:
        for q in asks[:10]:
            await http.recall(q)
            await mcp.call_tool("recall", {"query": q})
        over_http, over_mcp = [], []
        for q in asks:
            began = time.perf_counter()
            await http.recall(q)
            over_http.append(time.perf_counter() - began)
            began = time.perf_counter()
            result = await mcp.call_tool("recall", {"query": q})
            over_mcp.append(time.perf_counter() - began)
            if result.is_error:
                raise RuntimeError(f"recall over MCP failed: {result.content[0].text}")
        return over_http, over_mcp


def run(args: argparse.Namespace) -> int:
    from mnemolog.api.mcp_server import INSTALL_HINT, McpUnavailable, require_sdk

    try:
        require_sdk()
    except McpUnavailable:
        raise CommandError(f"mnemolog bench mcp needs the optional mcp package: {INSTALL_HINT}") from None
    if args.memories < 100 or args.queries < 10:
        raise CommandError("need --memories >= 100 and --queries >= 10")
    asks = questions(args.queries)
    with tempfile.TemporaryDirectory(prefix="mnemolog-bench-") as tmp:
        data_dir = Path(tmp) / "data"
        _fill(data_dir, sentences(args.memories, seed=21))
        server = Server(data_dir, 1)
        try:
            http, mcp = asyncio.run(_latencies(server.url, data_dir, asks))
        finally:
            server.stop()
    http_p50, mcp_p50 = _p(http, 0.5), _p(mcp, 0.5)
    print(f"mnemolog bench mcp: recall at {counted(args.memories, 'memory', 'memories', grouped=True)}, hashing embedder, {counted(args.queries, 'query', 'queries')}, one at a time\n")
    print(f"{'path':34} {'p50 ms':>8} {'p95 ms':>8}")
    print(f"{'HTTP POST /v1/recall':34} {http_p50:8.2f} {_p(http, 0.95):8.2f}")
    print(f"{'MCP stdio, recall tool':34} {mcp_p50:8.2f} {_p(mcp, 0.95):8.2f}")
    added = _p([m - h for m, h in zip(mcp, http)], 0.5)
    print(f"\nthe MCP path adds {mcp_p50 - http_p50:+.2f} ms at p50; the median of the paired differences"
          f" (each question over MCP minus the same question over HTTP, asked back to back) is {added:+.2f} ms (goal: at most 2 ms)")
    print(f"\nmcp_recall_p50_ms={mcp_p50:.2f} http_recall_p50_ms={http_p50:.2f} mcp_added_p50_ms={added:.2f}")
    return 0
