"""``mnemolog bench rebuild``: adds through the commands, a full rebuild, point-in-time search.

1. Adds N memories (short sentences) through the command layer in batches
   of 100, and in the same run appends the same events straight to a second
   log in batches of 100: the ratio is what the commands cost over the log.
2. Rebuilds every projection from the log in a child process, reporting
   events/s overall and per projector, and the child's peak RSS.
3. Searches (lexical and vector) at the head and ``as_of`` random past
   positions, p50 of each, and their ratio.

Each phase runs ``--runs`` times (at least 3; the adds each time into a new
data directory, the rebuild and the searches on the last one) and every
figure is the median of its runs, the commands' and the log's alike.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mnemolog.eventstore import EventStore, Metadata, StreamAppend
from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.ids import new_ids
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings

from .bench_runs import add_runs_arg, check_runs, middle, status_line
from .common import between, counted

HELP = "rebuild all projections from a log of N added memories; as-of vs head search; command-layer adds"

_NAMES = ["Alice", "Bob", "Chen", "Dana", "Emeka", "Farah", "Gustav", "Hana", "Ivan", "Jun", "Kofi", "Lena"]
_VERBS = ["visited", "planned", "cooked", "painted", "fixed", "studied", "booked", "cancelled", "joined", "recommended"]
_OBJECTS = [
    "a trip to Lisbon", "the garden shed", "a vegan lasagna", "the quarterly report", "a pottery class", "the team offsite",
    "a chess tournament", "the bike repair", "a sunrise painting", "the new espresso machine", "a charity run", "the roof leak",
    "a jazz concert", "the database migration", "a camping weekend", "the tax return", "a yoga retreat", "the kitchen remodel",
]
_WHEN = ["on Monday", "last week", "in May", "yesterday", "next Friday", "in the summer", "after work", "before the holidays"]


def sentences(n: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    return [
        f"{rng.choice(_NAMES)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_WHEN)} (note {i})"
        for i in range(n)
    ]


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=int, default=100_000, help="memories to add (default 100000)")
    parser.add_argument("--queries", type=between(1, 1_000_000), default=200, help="searches per measurement (default 200)")
    parser.add_argument("--keep", metavar="DIR", help="use and keep this directory instead of a temporary one")
    add_runs_arg(parser, what="each phase")


def _p50(samples: list[float]) -> float:
    return statistics.median(samples) * 1000 if samples else float("nan")


def _add_phase(root: Path, texts: list[str], status) -> tuple[float, float]:
    from mnemolog.projections.service import MemoryService

    settings = Settings({"data_dir": str(root / "data"), "synchronous": "NORMAL"})
    service = MemoryService.open(root / "data", settings=settings)
    began = time.perf_counter()
    for start in range(0, len(texts), 100):
        ctx = CommandContext(tenant="bench", actor="bench")
        batch = [MemoryContent(memory=t, tags=("bench",)) for t in texts[start : start + 100]]
        service.memories.add(ctx, batch)
        if start % 10_000 == 0:
            status(f"adds: {start:,}/{len(texts):,}")
    add_s = time.perf_counter() - began
    service.close()
    # The same events appended straight to a log: the floor under the commands.
    log = EventStore.open(root / "raw", synchronous="NORMAL")
    began = time.perf_counter()
    for start in range(0, len(texts), 100):
        ids = new_ids(len(texts[start : start + 100]))
        writes = [
            StreamAppend(c.memory_stream(i), [c.MemoryAdded(memory_id=i, content=MemoryContent(memory=t, tags=("bench",)), created_at="2026-01-01T00:00:00Z")])
            for i, t in zip(ids, texts[start : start + 100])
        ]
        log.append_batch(writes, tenant="bench", metadata=Metadata(actor="bench"))
    raw_s = time.perf_counter() - began
    log.close()
    return add_s, raw_s


_CHILD = """
import json, resource, sys, time
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.service import MemoryService
root = sys.argv[1]
service = MemoryService.open(root, settings=Settings({"data_dir": root}), catch_up=False)
began = time.perf_counter()
timings = service.runner.rebuild()
total = time.perf_counter() - began
events = service.store.last_position()
service.close()
print(json.dumps({"total_s": total, "timings": timings, "events": events,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _rebuild_phase(root: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", _CHILD, str(root / "data")], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"rebuild child failed: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _search_phase(root: Path, queries: int) -> dict[str, float]:
    from mnemolog.projections.service import MemoryService

    service = MemoryService.open(root / "data", settings=Settings({"data_dir": str(root / "data")}))
    rng = random.Random(5)
    head = service.store.last_position()
    words = [w for obj in _OBJECTS for w in obj.split() if len(w) > 3] + _NAMES
    asks = [" ".join(rng.sample(words, 2)) for _ in range(queries)]
    positions = [rng.randint(max(1, head // 10), head) for _ in range(queries)]
    out: dict[str, float] = {}
    searcher = service.searcher
    from mnemolog.projections.filters import SearchFilters

    filters = SearchFilters()
    channels = {"fts": lambda q, p: searcher.lexical("bench", q, 10, p, False, filters)}
    if searcher.semantic is not None and searcher.embed_query is not None:
        channels["vec"] = lambda q, p: searcher.semantic("bench", searcher.embed_query(q), 10, p, filters)
    for name, search in channels.items():
        for q in asks[:5]:
            search(q, None)  # warm caches
        head_t, asof_t = [], []
        for q, p in zip(asks, positions):
            began = time.perf_counter()
            search(q, None)
            head_t.append(time.perf_counter() - began)
            began = time.perf_counter()
            search(q, p)
            asof_t.append(time.perf_counter() - began)
        out[f"{name}_head_p50_ms"] = _p50(head_t)
        out[f"{name}_asof_p50_ms"] = _p50(asof_t)
    service.close()
    return out


def run(args: argparse.Namespace) -> int:
    if args.n < 1000:
        raise ValueError("--n must be at least 1000")
    runs = check_runs(args.runs)
    status = status_line()
    with tempfile.TemporaryDirectory(prefix="mnemolog-bench-") as tmp:
        root = Path(args.keep) if args.keep else Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        texts = sentences(args.n)
        adds = []
        for i in range(runs):
            status(f"adding through the commands (run {i + 1} of {runs}) …")
            if i:  # a fresh data directory for every run; the last one stays for the next phases
                shutil.rmtree(root / "data")
                shutil.rmtree(root / "raw")
            adds.append(_add_phase(root, texts, status))
        add_s, raw_s = middle(a[0] for a in adds), middle(a[1] for a in adds)
        status("rebuilding …")
        rebuilt = middle([_rebuild_phase(root) for _ in range(runs)], key=lambda r: r["total_s"])
        status("searching …")
        searches = [_search_phase(root, args.queries) for _ in range(runs)]
        search = {key: middle(s[key] for s in searches) for key in searches[0]}
    events = rebuilt["events"]
    timings = rebuilt["timings"]
    graph_fts_s = timings.get("graph", 0.0) + timings.get("fts", 0.0)
    print(f"mnemolog bench rebuild: {counted(args.n, 'memory', 'memories', grouped=True)}, {events:,} events (synchronous=NORMAL; median of {counted(runs, 'run')} per figure)\n")
    print(f"{'phase':42} {'seconds':>9} {'events/s':>12}")
    print(f"{'adds via commands, batches of 100':42} {add_s:9.2f} {args.n / add_s:12,.0f}")
    print(f"{'same events straight to the log (b100)':42} {raw_s:9.2f} {args.n / raw_s:12,.0f}")
    print(f"{'rebuild, all projections':42} {rebuilt['total_s']:9.2f} {events / rebuilt['total_s']:12,.0f}")
    for name, seconds in timings.items():
        share = seconds / rebuilt["total_s"] * 100 if rebuilt["total_s"] else 0
        print(f"{'  projector ' + name:42} {seconds:9.2f} {events / seconds if seconds else float('inf'):12,.0f}  ({share:.0f}% of the rebuild)")
    print(f"\npeak RSS of the rebuilding process: {rebuilt['rss_mb']:.0f} MB")
    print(f"\n{'search p50 (limit 10)':28} {'head ms':>9} {'as-of ms':>9} {'ratio':>7}")
    for name in ("fts", "vec"):
        if f"{name}_head_p50_ms" in search:
            h, a = search[f"{name}_head_p50_ms"], search[f"{name}_asof_p50_ms"]
            print(f"{name:28} {h:9.2f} {a:9.2f} {a / h:7.2f}")
    head_p50 = max(search.get("fts_head_p50_ms", 0), search.get("vec_head_p50_ms", 0))
    asof_p50 = max(search.get("fts_asof_p50_ms", 0), search.get("vec_asof_p50_ms", 0))
    ratio = max(search[f"{n}_asof_p50_ms"] / search[f"{n}_head_p50_ms"] for n in ("fts", "vec") if f"{n}_head_p50_ms" in search)
    print(
        f"\nrebuild_eps={events / rebuilt['total_s']:.0f} graph_fts_eps={events / graph_fts_s if graph_fts_s else 0:.0f}"
        f" rebuild_s={rebuilt['total_s']:.2f} rebuild_rss_mb={rebuilt['rss_mb']:.0f} asof_p50_ms={asof_p50:.2f}"
        f" head_p50_ms={head_p50:.2f} asof_ratio={ratio:.2f} add_b100_eps={args.n / add_s:.0f}"
        f" add_ratio_to_log={raw_s / add_s:.2f}"
    )
    return 0
