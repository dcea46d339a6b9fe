"""``mnemolog bench recall``: recall latency in process and over HTTP, throughput, ingest, memory.

At 10,000 and 100,000 memories (hashing embedder):

- hybrid recall p50/p95 in process, and over HTTP against a real
  ``mnemolog serve`` subprocess on loopback;
- in the same run, a baseline: brute-force numpy cosine over every vector
  plus one plain FTS5 query, no fusion;
- ``/v1/recall`` throughput with 16 concurrent clients (at 10,000), beside
  recall in process on one thread;
- ``POST /v1/memories`` in batches of 100 (memories/s, embedding included),
  beside the same batches through the commands in process;
- the server's peak memory while holding 100,000 memories under that load.

Beside every store's memories lives a knowledge graph of one entity per
:data:`MEMORIES_PER_ENTITY` memories and :data:`RELATIONS_PER_ENTITY`
relations each (10,000 entities and 30,000 relations at 100,000): the
bench's twelve first names are person entities, so three questions in four
name one and walk its relations; the others name none, and their p50 is
printed apart.

Each HTTP figure is the median of :data:`RUNS` runs (the ingest: one run per
third of the small store). The load comes from :mod:`mnemolog.tools.http_load`,
prebuilt requests on keep-alive connections, since it shares the cores with
the server it measures.

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
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings

from . import http_load
from .bench_rebuild import _NAMES, _OBJECTS, sentences
from .bench_runs import status_line
from .common import counted

#: The size whose in-process p50 is compared with the baseline (and with the large size).
REFERENCE = 100_000

HELP = "recall latency (in process, HTTP) at 10k and 100k memories with a knowledge graph beside them (an entity per 10 memories, 3 relations each), a numpy+FTS5 baseline, throughput, ingest, RSS"


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--large", type=int, default=100_000, help="memories of the large store (default 100000)")
    parser.add_argument("--small", type=int, default=10_000, help="memories of the small store (default 10000)")
    parser.add_argument("--queries", type=int, default=200, help="queries per latency measurement (default 200)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds of each of the three runs of the 16-client load (default 10)")
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


def listening_sockets(port: int) -> int | None:
    """How many sockets listen on TCP ``port`` (IPv4), from ``/proc/net/tcp``; None where that is not readable.

    Each worker of ``mnemolog serve`` binds its own socket (SO_REUSEPORT), once its service is open.
    """
    try:
        with open("/proc/net/tcp") as table:
            lines = table.readlines()[1:]
    except OSError:
        return None
    wanted = f":{port:04X}"
    return sum(1 for line in lines if (fields := line.split())[1].endswith(wanted) and fields[3] == "0A")  # 0A: LISTEN


class Server:
    """A real ``mnemolog serve`` on loopback, for the measurement.

    By default without auth, the organizer or fsync per commit (recall's
    setup); ``env`` replaces those settings (``{}``: the server's defaults).
    ``own_session``: the server runs in a session of its own, as a service
    would (see :mod:`mnemolog.tools.bench_replicas`).
    """

    def __init__(self, data_dir: Path, workers: int = 1, env: dict[str, str] | None = None, own_session: bool = False):
        self.port = _free_port()
        self.workers = workers
        chosen = {"MNEMOLOG_AUTH": "off", "MNEMOLOG_ORGANIZER_ENABLED": "off", "MNEMOLOG_SYNCHRONOUS": "NORMAL"} if env is None else env
        env = {**os.environ, **chosen, "MNEMOLOG_WORKERS": str(workers)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mnemolog.tools.cli", "--data-dir", str(data_dir), "serve", "--port", str(self.port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=own_session,
        )
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 300
        bind_deadline = deadline - 120  # past it (a server not on IPv4, say), the workers' sockets are no longer counted
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("the server did not start")
            if len(self.pids()) == 1 + (workers if workers > 1 else 0):
                bound = listening_sockets(self.port)
                if bound is not None and bound < workers and time.monotonic() < bind_deadline:
                    time.sleep(0.1)  # a worker still starting: measuring now would measure its start beside the load
                    continue
                try:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                        time.sleep(0.5 if workers > 1 else 0)  # the workers warm up (lexical index, alias catalogues) a moment more
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


#: Runs behind each HTTP figure, and passes over the queries per in-process measurement: the bench prints their median.
RUNS = 3


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2] if values else float("nan")


def _median_p(runs: list[list[float]], q: float) -> float:
    """The median over runs of each run's ``q`` percentile, in ms."""
    return _median([_p(samples, q) for samples in runs])


def _runs_of(texts: list[str], runs: int) -> list[list[list[str]]]:
    """``texts`` cut into ``runs`` consecutive parts, each in batches of 100."""
    parts = [texts[k * len(texts) // runs : (k + 1) * len(texts) // runs] for k in range(runs)]
    return [[part[i : i + 100] for i in range(0, len(part), 100)] for part in parts]


def _http_ingest(url: str, texts: list[str], runs: int = RUNS) -> list[float]:
    """Memories/s of ``POST /v1/memories`` in batches of 100, one run per consecutive part of ``texts``."""
    rates = []
    for batches in _runs_of(texts, runs):
        requests = [http_load.post(url, "/v1/memories", {"memories": [{"memory": t} for t in batch]}) for batch in batches]
        rates.append(sum(map(len, batches)) / asyncio.run(http_load.send_all(url, requests)))
    return rates


def _http_latency(url: str, asks: list[str], runs: int = RUNS) -> list[list[float]]:
    """``runs`` runs of one ``/v1/recall`` per question, one after another: each run's seconds per request."""
    requests = [http_load.post(url, "/v1/recall", {"query": q}) for q in asks]
    return [asyncio.run(http_load.latencies(url, requests)) for _ in range(runs)]


def _http_load(url: str, asks: list[str], clients: int, duration: float, runs: int = RUNS) -> list[float]:
    """Requests/s of ``/v1/recall`` from ``clients`` concurrent connections, ``runs`` runs of ``duration`` seconds."""
    requests = [http_load.post(url, "/v1/recall", {"query": q}) for q in asks]
    return [asyncio.run(http_load.throughput(url, requests, clients, duration)) for _ in range(runs)]


def _command_ingest(data_dir: Path, texts: list[str], runs: int = RUNS) -> list[float]:
    """The reference for the HTTP ingest: the same batches of 100 through the commands, in process (memories/s)."""
    from mnemolog.projections.service import MemoryService

    service = MemoryService.open(data_dir, settings=Settings({"data_dir": str(data_dir), "synchronous": "NORMAL"}))
    try:
        rates = []
        for batches in _runs_of(texts, runs):
            contents = [[MemoryContent(memory=t) for t in batch] for batch in batches]
            began = time.perf_counter()
            for batch in contents:
                service.run(service.memories.add, CommandContext(tenant="default", actor="bench"), batch)
            rates.append(sum(map(len, batches)) / (time.perf_counter() - began))
        return rates
    finally:
        service.close()


def _in_process(data_dir: Path, asks: list[str], runs: int = RUNS) -> list[list[float]]:
    """Recall latencies, ``runs`` passes over ``asks`` (after five warm-up queries, which load the indexes)."""
    from mnemolog.projections.recall.searcher import RecallOptions
    from mnemolog.projections.service import MemoryService

    service = MemoryService.open(data_dir, settings=Settings({"data_dir": str(data_dir)}))
    try:
        for q in asks[:5]:
            service.searcher.recall("default", q, RecallOptions())
        passes = []
        for _ in range(runs):
            samples = []
            for q in asks:
                began = time.perf_counter()
                service.searcher.recall("default", q, RecallOptions())
                samples.append(time.perf_counter() - began)
            passes.append(samples)
        return passes
    finally:
        service.close()


def _median_pass(passes: list[list[float]]) -> tuple[float, float]:
    """p50 and p95 (ms) of the pass whose p50 is the median of the passes."""
    ranked = sorted(passes, key=lambda samples: _p(samples, 0.5))
    middle = ranked[len(ranked) // 2]
    return _p(middle, 0.5), _p(middle, 0.95)


MEMORIES_PER_ENTITY = 10
RELATIONS_PER_ENTITY = 3
_RELATION_TYPES = ("WORKS_WITH", "OWNS", "LOCATED_IN", "MEMBER_OF", "KNOWS")


def _add_graph(data_dir: Path, memories: int, seed: int = 5) -> tuple[int, int]:
    """Entities and relations beside ``memories`` memories, through the commands; returns their counts."""
    from mnemolog.projections.service import MemoryService

    rng = random.Random(seed)
    n = max(len(_NAMES), memories // MEMORIES_PER_ENTITY)
    service = MemoryService.open(data_dir, settings=Settings({"data_dir": str(data_dir), "synchronous": "NORMAL"}))
    ctx = CommandContext(tenant="default", actor="bench")
    try:
        for i in range(n):
            name, kind = (_NAMES[i], "person") if i < len(_NAMES) else (f"Kestrel {i:06d}", "thing")
            service.run(service.entities.upsert, ctx, f"e{i}", name=name, entity_type=kind)
        triples: set[tuple[int, int, str]] = set()
        while len(triples) < n * RELATIONS_PER_ENTITY:
            a, b = rng.randrange(n), rng.randrange(n)
            if a != b:
                triples.add((a, b, rng.choice(_RELATION_TYPES)))
        for a, b, rtype in sorted(triples):
            service.run(service.entities.set_relation, ctx, f"e{a}", f"e{b}", rtype, weight=round(rng.uniform(0.3, 1.0), 2))
        return n, len(triples)
    finally:
        service.close()


def names_an_entity(question: str) -> bool:
    return any(name in question.replace("?", " ").split() for name in _NAMES)


def _label(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    return f"{n // 1000}k" if n >= 1000 else str(n)


def _fill(data_dir: Path, texts: list[str]) -> float:
    """Add ``texts`` through the commands in batches of 1,000 (projections included); memories/s."""
    from mnemolog.projections.service import MemoryService

    settings = Settings({"data_dir": str(data_dir), "synchronous": "NORMAL"})
    service = MemoryService.open(data_dir, settings=settings)
    try:
        began = time.perf_counter()
        for start in range(0, len(texts), 1000):
            service.run(service.memories.add, CommandContext(tenant="default", actor="bench"), [MemoryContent(memory=t, memory_type="OuterMemory") for t in texts[start : start + 1000]])
        return len(texts) / (time.perf_counter() - began)
    finally:
        service.close()


def _baseline(texts: list[str], asks: list[str], runs: int = RUNS) -> list[list[float]]:
    """Brute-force numpy cosine plus one plain FTS5 query: no fusion, no filters, no validity."""
    import numpy as np

    from mnemolog.projections.vectors.embedders import HashingEmbedder

    embedder = HashingEmbedder()
    matrix = embedder.embed(texts)
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(text, tokenize='porter unicode61')")
    conn.executemany("INSERT INTO t (rowid, text) VALUES (?, ?)", enumerate(texts))
    passes = []
    for _ in range(runs):
        samples = []
        for q in asks:
            terms = " OR ".join('"' + w.strip("?").replace('"', '""') + '"' for w in q.split() if w.strip("?"))
            began = time.perf_counter()
            vector = embedder.embed_query(q)
            scores = matrix @ vector
            np.argpartition(-scores, 10)[:10]
            conn.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT 10", (terms,)).fetchall()
            samples.append(time.perf_counter() - began)
        passes.append(samples)
    return passes


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
    from mnemolog.projections.fts.postings import POSTINGS_FILE

    if args.small < 100 or args.large < args.small:
        raise ValueError("need 100 <= --small <= --large")
    if args.workers < 1:
        raise ValueError("--workers must be at least 1")
    say = status_line()
    asks = questions(args.queries)
    rows: list[tuple[str, str, float, float]] = []
    with tempfile.TemporaryDirectory(prefix="mnemolog-bench-") as tmp:
        small, large = Path(tmp) / "small", Path(tmp) / "large"
        texts_small = sentences(args.small, seed=21)
        say(f"a knowledge graph beside {counted(args.small, 'memory', 'memories', grouped=True)} …")
        graphs = {args.small: _add_graph(small, args.small)}
        say(f"ingesting {counted(args.small, 'memory', 'memories', grouped=True)} over HTTP …")
        server = Server(small, args.workers)
        try:
            ingest_runs = _http_ingest(server.url, texts_small)
            say("the vector index catches up …")
            asyncio.run(http_load.index_caught_up(server.url, args.workers))
            http_small = _http_latency(server.url, asks)
            rows.append((_label(args.small), "HTTP /v1/recall", _median_p(http_small, 0.5), _median_p(http_small, 0.95)))
            say("16 concurrent clients …")
            qps_runs = _http_load(server.url, asks, 16, args.duration)
        finally:
            server.stop()
        say("the same batches through the commands, in process …")
        command_runs = _command_ingest(Path(tmp) / "commands", texts_small)
        curve: list[tuple[int, float, float, float | None]] = []  # size, p50, p95, fill memories/s
        small_passes = _in_process(small, asks)
        lat = sorted(small_passes, key=lambda samples: _p(samples, 0.5))[len(small_passes) // 2]  # the median pass
        curve.append((args.small, *_median_pass(small_passes), None))
        # The reference size: 100,000 memories (or --large when it is smaller), with the baseline beside it.
        reference = min(REFERENCE, args.large)
        stores = [(reference, Path(tmp) / "reference")] if args.large > reference else []
        stores.append((args.large, large))
        base_p50 = base_p95 = float("nan")
        for n, where in stores:
            texts = sentences(n, seed=22)
            say(f"adding {counted(n, 'memory', 'memories', grouped=True)} …")
            fill_mps = _fill(where, texts)
            say(f"a knowledge graph beside {counted(n, 'memory', 'memories', grouped=True)} …")
            graphs[n] = _add_graph(where, n)
            passes = _in_process(where, asks)
            curve.append((n, *_median_pass(passes), fill_mps))
            if n == reference:
                split = {named: [[s for q, s in zip(asks, samples) if names_an_entity(q) == named] for samples in passes] for named in (True, False)}
            if n == reference:
                say("baseline …")
                base_p50, base_p95 = _median_pass(_baseline(texts, asks))
            del texts
            if where != large:
                shutil.rmtree(where, ignore_errors=True)
        for n, p50, p95, _ in curve:
            rows.append((_label(n), "recall in process", p50, p95))
        rows.append((_label(reference), "baseline: numpy cosine + FTS5", base_p50, base_p95))
        began = time.perf_counter()
        server = Server(large, args.workers)
        try:
            # A restart over the large store: the workers load the postings saved by the in-process run's close.
            first = http_load.post(server.url, "/v1/recall", {"query": asks[0]})
            asyncio.run(http_load.latencies(server.url, [first], warmup=0))
            start_s = time.perf_counter() - began
            with _MemoryPeak(server) as peak:
                http_large = _http_latency(server.url, asks)
                rows.append((_label(args.large), "HTTP /v1/recall", _median_p(http_large, 0.5), _median_p(http_large, 0.95)))
                say("load on the large store …")
                _http_load(server.url, asks, 16, min(args.duration, 10.0), runs=1)
            rss, pss = peak.rss, peak.pss
        finally:
            server.stop()
    ref_p50 = next(p50 for n, p50, _, _ in curve if n == reference)
    large_p50 = curve[-1][1]
    print(f"mnemolog bench recall: hybrid recall, hashing embedder, {counted(args.queries, 'query', 'queries')}; in process: the median of {RUNS} passes\n")
    print(f"{'size':6} {'path':34} {'p50 ms':>8} {'p95 ms':>8}")
    for size, path, p50, p95 in rows:
        print(f"{size:6} {path:34} {p50:8.2f} {p95:8.2f}")
    print(f"\nrecall in process at {_label(reference)}: {ref_p50 / base_p50:.2f} × the baseline in the same run")
    print("beside the memories: " + ", ".join(f"{_label(n)}: {e:,} entities, {r:,} relations" for n, (e, r) in sorted(graphs.items())))
    named_p50, unnamed_p50 = _median_pass(split[True])[0], _median_pass(split[False])[0]
    print(
        f"recall in process p50 at {_label(reference)}: questions naming an entity {named_p50:.2f} ms ({len(split[True][0])}),"
        f" naming none {unnamed_p50:.2f} ms ({len(split[False][0])})"
    )
    print("cost with size, recall in process p50: " + ", ".join(f"{_label(n)} {p50:.2f} ms" for n, p50, _, _ in curve))
    for n, _, _, fill_mps in curve[1:]:
        print(f"filling {counted(n, 'memory', 'memories', grouped=True)} through the commands, batches of 1,000: {fill_mps:,.0f} memories/s")
    processes = f"{args.workers} worker processes" if args.workers > 1 else "one process"
    qps, ingest_mps, command_mps = _median(qps_runs), _median(ingest_runs), _median(command_runs)
    over_small = _median_p(http_small, 0.5) - curve[0][1]
    over_large = _median_p(http_large, 0.5) - large_p50
    runs = lambda values: ", ".join(f"{v:,.0f}" for v in values)  # noqa: E731
    print(f"\nthe server: mnemolog serve, {processes}. HTTP figures: the median of {RUNS} runs, from a client of")
    print("prebuilt requests on keep-alive connections (tools/http_load.py) sharing the server's cores")
    print(f"HTTP p50 over in process: {over_small:+.2f} ms at {args.small:,}, {over_large:+.2f} ms at {args.large:,} (target: at most +2 ms)")
    print(
        f"/v1/recall with 16 concurrent clients, {args.duration:.0f} s a run, at {args.small:,}: {qps:,.0f} requests/s"
        f" (runs: {runs(qps_runs)}); reference: recall in process on one thread, {len(lat) / sum(lat):,.0f} recalls/s"
    )
    print(
        f"POST /v1/memories, batches of 100: {ingest_mps:,.0f} memories/s (runs of {args.small // RUNS:,}: {runs(ingest_runs)});"
        f" reference: the same batches through the commands in process, {command_mps:,.0f} memories/s"
    )
    print(f"server peak memory holding {counted(args.large, 'memory', 'memories', grouped=True)} under load, all processes: RSS {rss:.0f} MB, PSS {pss:.0f} MB")
    print(f"server start over {counted(args.large, 'memory', 'memories', grouped=True)}: the first /v1/recall answered {start_s:.1f} s after launch (lexical postings read from {POSTINGS_FILE})")
    scale = ""
    if args.large > reference:
        big = _label(args.large)
        scale = f" recall_p50_ms_{big}={large_p50:.2f} scale_{big}_vs_{_label(reference)}={large_p50 / ref_p50:.2f} fill_mps_{big}={curve[-1][3]:.0f}"
    print(
        f"\nrecall_p50_ms_100k={ref_p50:.2f}"
        f" baseline_p50_ms_100k={base_p50:.2f} recall_vs_baseline_100k={ref_p50 / base_p50:.3f}{scale}"
        f" recall_qps_16={qps:.0f} ingest_mps={ingest_mps:.0f} ingest_commands_mps={command_mps:.0f} server_memories={args.large}"
        f" http_p50_ms={_median_p(http_large, 0.5):.2f} http_over_ms={over_large:.2f} server_rss_mb={rss:.0f} server_pss_mb={pss:.0f} start_s={start_s:.1f} workers={args.workers} entities_100k={graphs[reference][0]} relations_100k={graphs[reference][1]}"
        f" recall_p50_ms_100k_entity_named={named_p50:.2f} recall_p50_ms_100k_no_entity={unnamed_p50:.2f}"
    )
    return 0
