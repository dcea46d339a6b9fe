"""``mnemolog bench explorer``: the calls the explorer page makes, over HTTP, at 100,000 memories.

A store of ``--memories`` memories (the hashing embedder) is built through
the commands: the last 1,000 as one import (one correlation), a hub memory
linked to 1,000 others and 50 of those to 10 more each (a neighbourhood
of about 1,500 nodes at depth 2, drawn 40 a page), 200 memories updated
once, 300 entities in a chain with a star of 100 relations on the first.
Then a real ``mnemolog serve`` (one worker, no auth) answers, one request
after another on one keep-alive connection, what the page asks:

- at sign-in: ``GET /v1/whoami`` and ``GET /v1/timeline`` (1,000 marks);
- a search: ``POST /v1/recall``;
- a neighbourhood page: ``GET /v1/graph/neighborhood`` of the hub (depth 2,
  40 nodes, pages across the whole neighbourhood) and of the first entity;
- a history: ``GET /v1/memories/{id}/history``;
- a correlation: ``GET /v1/correlation`` (a page of 500 events);
- the slider: recall, neighbourhood and history ``as_of`` the middle of the
  log, which the page sends together; ``slider_ms`` is the slowest of the
  three medians.

Each figure is the median over ``--runs`` runs of a call's median latency;
``worst_p50_ms`` is the slowest call's. The last line holds the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings

from . import http_load
from .bench_recall import Server, questions
from .bench_rebuild import sentences
from .bench_runs import add_runs_arg, check_runs, middle, status_line
from .common import counted

HELP = "the explorer page's calls (recall, neighbourhood, history, timeline, correlation, as_of) over HTTP at 100k memories"

IMPORT = "bench-import"
PAGE = 40


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--memories", type=int, default=100_000, help="memories in the store (default 100000)")
    parser.add_argument("--queries", type=int, default=50, help="requests per call and run (default 50)")
    parser.add_argument("--tmp-dir", help="build the store under this directory (default: the system's temporary directory)")
    add_runs_arg(parser, what="each call's measurement")


def _seed(data_dir: Path, n: int, say) -> dict:
    """Build the store; what the requests need: the hub, updated ids, an entity, the middle position."""
    from mnemolog.projections.service import MemoryService

    settings = Settings({"data_dir": str(data_dir), "synchronous": "NORMAL"}, env={})
    svc = MemoryService.open(data_dir, settings=settings)
    try:
        texts = sentences(n, seed=5)
        ids: list[str] = []
        imported = max(n - 1000, 0)
        for start in range(0, imported, 1000):
            ctx = CommandContext(tenant="default", actor="bench", correlation_id=f"bench-add-{start}")
            ids += svc.memories.add(ctx, [MemoryContent(memory=t) for t in texts[start : min(start + 1000, imported)]]).memory_ids
            if start % 20_000 == 0:
                say(f"adds: {start:,}/{n:,}")
        ctx = CommandContext(tenant="default", actor="bench-import", correlation_id=IMPORT)
        ids += svc.memories.add(ctx, [MemoryContent(memory=t, memory_type="OuterMemory") for t in texts[imported:]]).memory_ids
        say("projections catch up …")
        svc.sync()
        hub = ids[0]
        ctx = CommandContext(tenant="default", actor="bench", correlation_id="bench-links")
        edges = [c.EdgeRecord(edge_id=f"user:bench:{i}", edge_type="RELATED", source=hub, target=ids[i]) for i in range(1, min(1001, len(ids)))]
        edges += [
            c.EdgeRecord(edge_id=f"user:bench:{i}:{k}", edge_type="FOLLOWS", source=ids[i], target=ids[(1000 + i * 10 + k) % len(ids)])
            for i in range(1, min(51, len(ids)))
            for k in range(10)
        ]
        svc.edges.link_many(ctx, edges)
        middle_position = svc.store.last_position()
        updated = range(2000, 2200) if len(ids) > 2200 else range(len(ids) - 200, len(ids))
        for i in updated:
            svc.memories.update(CommandContext(tenant="default", actor="bench"), ids[i], {"memory": "updated: " + texts[i]}, reason="bench")
        say("entities …")
        for i in range(300):
            svc.entities.upsert(CommandContext(tenant="default", actor="bench"), f"e{i}", name=f"Entity {i}", entity_type="thing")
        svc.sync()
        for i in range(299):
            svc.entities.set_relation(CommandContext(tenant="default", actor="bench"), f"e{i}", f"e{i + 1}", "NEXT")
        for i in range(2, 102):
            svc.entities.set_relation(CommandContext(tenant="default", actor="bench"), "e0", f"e{i}", "HAS")
        svc.sync()
        return {"hub": hub, "updated": [ids[i] for i in updated], "middle": middle_position, "head": svc.store.last_position()}
    finally:
        svc.close()


def _calls(url: str, seeded: dict, queries: int) -> dict[str, list[bytes]]:
    asks = questions(queries)
    hub, mid = quote(seeded["hub"]), seeded["middle"]
    pages = range(queries)
    return {
        "whoami": [http_load.get(url, "/v1/whoami")] * queries,
        "timeline": [http_load.get(url, "/v1/timeline?limit=1000")] * queries,
        "recall": [http_load.post(url, "/v1/recall", {"query": q, "limit": 10}) for q in asks],
        "neighborhood": [http_load.get(url, f"/v1/graph/neighborhood?node={hub}&depth=2&limit={PAGE}&offset={(k * PAGE) % 1500}") for k in pages],
        "entity": [http_load.get(url, f"/v1/graph/neighborhood?node=e{k % 3}&kind=entity&depth=2&limit={PAGE}") for k in pages],
        "history": [http_load.get(url, f"/v1/memories/{quote(seeded['updated'][k % len(seeded['updated'])])}/history") for k in pages],
        "correlation": [http_load.get(url, f"/v1/correlation?correlation_id={IMPORT}&limit=500")] * queries,
        "recall_as_of": [http_load.post(url, "/v1/recall", {"query": q, "limit": 10, "as_of": mid}) for q in asks],
        "neighborhood_as_of": [
            http_load.get(url, f"/v1/graph/neighborhood?node={hub}&depth=2&limit={PAGE}&offset={(k * PAGE) % 1000}&as_of={mid}") for k in pages
        ],
        "history_as_of": [
            http_load.get(url, f"/v1/memories/{quote(seeded['updated'][k % len(seeded['updated'])])}/history?as_of={seeded['head']}") for k in pages
        ],
    }


def run(args: argparse.Namespace) -> int:
    runs = check_runs(args.runs)
    if args.memories < 3000:
        raise ValueError("--memories must be at least 3000")
    say = status_line()
    with tempfile.TemporaryDirectory(prefix="mnemolog-bench-", dir=args.tmp_dir) as tmp:
        data_dir = Path(tmp) / "data"
        began = time.perf_counter()
        seeded = _seed(data_dir, args.memories, say)
        build_s = time.perf_counter() - began
        say("serving …")
        server = Server(data_dir, workers=1)
        try:
            asyncio.run(http_load.index_caught_up(server.url, 1))
            calls = _calls(server.url, seeded, args.queries)
            medians: dict[str, list[float]] = {name: [] for name in calls}
            p95s: dict[str, list[float]] = {name: [] for name in calls}
            for run_index in range(runs):
                say(f"run {run_index + 1}/{runs} …")
                for name, requests in calls.items():
                    samples = sorted(asyncio.run(http_load.latencies(server.url, requests)))
                    medians[name].append(statistics.median(samples) * 1000)
                    p95s[name].append(samples[min(len(samples) - 1, int(0.95 * len(samples)))] * 1000)
        finally:
            server.stop()
    p50 = {name: middle(values) for name, values in medians.items()}
    p95 = {name: middle(values) for name, values in p95s.items()}
    print(f"explorer calls over HTTP at {counted(args.memories, 'memory', 'memories', grouped=True)} (store built in {build_s:.0f} s; median of {counted(runs, 'run')} of {counted(args.queries, 'request')} each)")
    print(f"{'call':22} {'p50 ms':>8} {'p95 ms':>8}")
    for name in calls:
        print(f"{name:22} {p50[name]:8.2f} {p95[name]:8.2f}")
    slider = max(p50["recall_as_of"], p50["neighborhood_as_of"], p50["history_as_of"])
    figures = {
        "memories": args.memories,
        **{f"{name}_p50_ms": round(value, 2) for name, value in p50.items()},
        "slider_ms": round(slider, 2),
        "worst_p50_ms": round(max(p50.values()), 2),
    }
    print(" ".join(f"{k}={v}" for k, v in figures.items()))
    return 0
