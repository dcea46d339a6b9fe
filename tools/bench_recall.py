"""``mnemolog bench recall``: recall latency in process and over HTTP, throughput, ingest, memory.

At 10,000 and 100,000 memories (hashing embedder):

- hybrid recall p50/p95 in process, and over HTTP against a real
  ``mnemolog serve`` subprocess on loopback;
- in the same run, a baseline: brute-force numpy cosine over every vector
  plus one plain FTS5 query, no fusion;
- ``/v1/recall`` throughput with 16 concurrent clients (at 10,000);
- ``POST /v1/memories`` in batches of 100 (memories/s, embedding included);
- the server's peak memory while holding 100,000 memories under that load.

The server runs as ``mnemolog serve`` with ``--workers`` processes
(default: one per core; each then has one read thread). Its memory is
sampled every quarter second over all its processes: the peak of their
summed RSS (which counts the database pages they share through the memory
map once per process) and of their summed PSS (which divides shared pages
among the processes that map them).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings

from .bench_rebuild import _NAMES, _OBJECTS, sentences

HELP = "recall latency (in process, HTTP) at 10k and 100k memories, a numpy+FTS5 baseline, throughput, ingest, RSS"


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--large", type=int, default=100_000, help="memories of the large store (default 100000)")
    parser.add_argument("--small", type=int, default=10_000, help="memories of the small store (default 10000)")
    parser.add_argument("--queries", type=int, default=200, help="queries per latency measurement (default 200)")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds of the 16-client load (default 20)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="server processes (default: one per core)")


def questions(n: int, seed: int = 3) -> list[str]:
    rng = random.Random(seed)
    words = [w for obj in _OBJECTS for w in obj.split() if len(w) > 3]
    forms = ["When did {n} plan {w}?", "What did {n} say about the {w}?", "Who {w} {v}?", "{n} {w} {v}"]
    out = []
    for _ in range(n):
        form = rng.choice(forms)
        out.append(form.format(n=rng.choice(_NAMES), w=rng.choice(words), v=rng.choice(words)))
    return out


def _p(samples: list[float], q: float) -> float:
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A real ``mnemolog serve`` on loopback, without auth, for the measurement."""

    def __init__(self, data_dir: Path, workers: int = 1):
        self.port = _free_port()
        self.workers = workers
        env = {
            **os.environ,
            "MNEMOLOG_AUTH": "off",
            "MNEMOLOG_ORGANIZER_ENABLED": "off",
            "MNEMOLOG_SYNCHRONOUS": "NORMAL",
            "MNEMOLOG_WORKERS": str(workers),
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mnemolog.tools.cli", "--data-dir", str(data_dir), "serve", "--port", str(self.port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("the server did not start")
            if len(self.pids()) == 1 + (workers if workers > 1 else 0):
                try:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                        time.sleep(0.5 if workers > 1 else 0)  # the last workers bind a moment later
                        return
                except OSError:
                    pass
            time.sleep(0.2)
        raise RuntimeError("the server did not start in time")

    def pids(self) -> list[int]:
        """The server's processes: the supervisor and its workers."""
        found = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True).stdout.split()
        return [self.proc.pid] + [int(p) for p in found]

    def memory_mb(self) -> tuple[float, float]:
        """Summed RSS and PSS of the server's processes, in MB."""
        rss = pss = 0
        for pid in self.pids():
            try:
                with open(f"/proc/{pid}/smaps_rollup") as rollup:
                    for line in rollup:
                        if line.startswith("Rss:"):
                            rss += int(line.split()[1])
                        elif line.startswith("Pss:"):
                            pss += int(line.split()[1])
            except OSError:
                pass
        return rss / 1024, pss / 1024

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


async def _http_ingest(url: str, texts: list[str]) -> float:
    from mnemolog.api.client import MnemologClient

    async with MnemologClient(url) as client:
        began = time.perf_counter()
        for start in range(0, len(texts), 100):
            await client.add_memories(memories=[{"memory": t} for t in texts[start : start + 100]])
        return len(texts) / (time.perf_counter() - began)


async def _http_latency(url: str, asks: list[str]) -> list[float]:
    from mnemolog.api.client import MnemologClient

    async with MnemologClient(url) as client:
        for q in asks[:5]:
            await client.recall(q)
        samples = []
        for q in asks:
            began = time.perf_counter()
            await client.recall(q)
            samples.append(time.perf_counter() - began)
        return samples


async def _http_load(url: str, asks: list[str], clients: int, duration: float) -> float:
    import aiohttp

    done = 0
    stop_at = time.monotonic() + duration

    async def worker(k: int, session: aiohttp.ClientSession) -> None:
        nonlocal done
        i = k
        while time.monotonic() < stop_at:
            async with session.post(f"{url}/v1/recall", json={"query": asks[i % len(asks)]}) as response:
                await response.read()
                if response.status == 200:
                    done += 1
            i += clients

    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector) as session:
        began = time.monotonic()
        await asyncio.gather(*(worker(k, session) for k in range(clients)))
        return done / (time.monotonic() - began)


def _in_process(data_dir: Path, asks: list[str]) -> list[float]:
    from mnemolog.projections.recall.searcher import RecallOptions
    from mnemolog.projections.service import MemoryService

    service = MemoryService.open(data_dir, settings=Settings({"data_dir": str(data_dir)}))
    try:
        for q in asks[:5]:
            service.searcher.recall("default", q, RecallOptions())
        samples = []
        for q in asks:
            began = time.perf_counter()
            service.searcher.recall("default", q, RecallOptions())
            samples.append(time.perf_counter() - began)
        return samples
    finally:
        service.close()


def _fill(data_dir: Path, texts: list[str]) -> None:
    from mnemolog.projections.service import MemoryService

    settings = Settings({"data_dir": str(data_dir), "synchronous": "NORMAL"})
    service = MemoryService.open(data_dir, settings=settings)
    try:
        for start in range(0, len(texts), 1000):
            service.run(service.memories.add, CommandContext(tenant="default", actor="bench"), [MemoryContent(memory=t, memory_type="OuterMemory") for t in texts[start : start + 1000]])
    finally:
        service.close()


def _baseline(texts: list[str], asks: list[str]) -> list[float]:
    """Brute-force numpy cosine plus one plain FTS5 query: no fusion, no filters, no validity."""
    from mnemolog.projections.vectors.embedders import HashingEmbedder

    embedder = HashingEmbedder()
    matrix = embedder.embed(texts)
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(text, tokenize='porter unicode61')")
    conn.executemany("INSERT INTO t (rowid, text) VALUES (?, ?)", enumerate(texts))
    samples = []
    for q in asks:
        terms = " OR ".join('"' + w.strip("?").replace('"', '""') + '"' for w in q.split() if w.strip("?"))
        began = time.perf_counter()
        vector = embedder.embed_query(q)
        scores = matrix @ vector
        np.argpartition(-scores, 10)[:10]
        conn.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT 10", (terms,)).fetchall()
        samples.append(time.perf_counter() - began)
    return samples


class _MemoryPeak:
    """Samples a server's summed RSS and PSS every quarter second; keeps the peaks."""

    def __init__(self, server: Server):
        self.server = server
        self.rss = self.pss = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while True:
            rss, pss = self.server.memory_mb()
            self.rss, self.pss = max(self.rss, rss), max(self.pss, pss)
            if self._stop.wait(0.25):
                return

    def __enter__(self) -> "_MemoryPeak":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def run(args: argparse.Namespace) -> int:
    if args.small < 100 or args.large < args.small:
        raise ValueError("need 100 <= --small <= --large")
    if args.workers < 1:
        raise ValueError("--workers must be at least 1")
    say = (lambda text: print(f"  {text}", file=sys.stderr, flush=True)) if sys.stderr.isatty() else (lambda text: None)
    asks = questions(args.queries)
    rows: list[tuple[str, str, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="mnemolog-bench-") as tmp:
        small, large = Path(tmp) / "small", Path(tmp) / "large"
        texts_small = sentences(args.small, seed=21)
        say(f"ingesting {args.small:,} memories over HTTP …")
        server = Server(small, args.workers)
        try:
            ingest_mps = asyncio.run(_http_ingest(server.url, texts_small))
            lat = asyncio.run(_http_latency(server.url, asks))
            rows.append((f"{args.small // 1000}k", "HTTP /v1/recall", _p(lat, 0.5), _p(lat, 0.95)))
            say("16 concurrent clients …")
            qps = asyncio.run(_http_load(server.url, asks, 16, args.duration))
        finally:
            server.stop()
        lat = _in_process(small, asks)
        rows.append((f"{args.small // 1000}k", "recall in process", _p(lat, 0.5), _p(lat, 0.95)))
        texts_large = sentences(args.large, seed=22)
        say(f"adding {args.large:,} memories …")
        _fill(large, texts_large)
        lat_large = _in_process(large, asks)
        rows.append((f"{args.large // 1000}k", "recall in process", _p(lat_large, 0.5), _p(lat_large, 0.95)))
        base = _baseline(texts_large, asks)
        rows.append((f"{args.large // 1000}k", "baseline: numpy cosine + FTS5", _p(base, 0.5), _p(base, 0.95)))
        server = Server(large, args.workers)
        try:
            with _MemoryPeak(server) as peak:
                http_large = asyncio.run(_http_latency(server.url, asks))
                rows.append((f"{args.large // 1000}k", "HTTP /v1/recall", _p(http_large, 0.5), _p(http_large, 0.95)))
                say("load on the large store …")
                asyncio.run(_http_load(server.url, asks, 16, min(args.duration, 10.0)))
            rss, pss = peak.rss, peak.pss
        finally:
            server.stop()
    print(f"mnemolog bench recall: hybrid recall, hashing embedder, {args.queries} queries\n")
    print(f"{'size':6} {'path':34} {'p50 ms':>8} {'p95 ms':>8}")
    for size, path, p50, p95 in rows:
        print(f"{size:6} {path:34} {p50:8.2f} {p95:8.2f}")
    processes = f"{args.workers} worker processes" if args.workers > 1 else "one process"
    print(f"\nthe server: mnemolog serve, {processes}")
    print(f"/v1/recall with 16 concurrent clients for {args.duration:.0f} s at {args.small:,}: {qps:,.0f} requests/s")
    print(f"POST /v1/memories, batches of 100: {ingest_mps:,.0f} memories/s")
    print(f"server peak memory holding {args.large:,} memories under load, all processes: RSS {rss:.0f} MB, PSS {pss:.0f} MB")
    print(
        f"\nrecall_p50_ms_100k={_p(lat_large, 0.5):.2f} http_p50_ms_100k={_p(http_large, 0.5):.2f}"
        f" baseline_p50_ms_100k={_p(base, 0.5):.2f} recall_qps_16={qps:.0f} ingest_mps={ingest_mps:.0f} rss_mb_100k={rss:.0f}"
        f" pss_mb_100k={pss:.0f} workers={args.workers}"
    )
    return 0
