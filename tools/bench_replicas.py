"""Two ``mnemolog serve`` replicas on one PostgreSQL log, against one server alone.

Part of ``mnemolog bench append --backend postgres``. In the private cluster
that bench starts, one database holds the shared log; server A (its own data
directory and port) takes ``--replica-memories`` memories over HTTP in
batches of 100, then server B starts on an empty data directory of its own
and builds its projections by following the log. Each server runs one
process (``MNEMOLOG_WORKERS=1``), without auth or the organizer. Then:

- **throughput**: 16 clients send ``/v1/recall`` (the questions of ``bench
  recall``) to A alone, then 8 to A and 8 to B at once; the pair alternates
  :data:`~mnemolog.tools.bench_runs.MIN_RUNS` times, so that both cases see
  the same neighbours, and the median of each counts. The load client
  (``tools/http_load.py``) runs in this process on the same cores as the
  servers, so the bench also reports how much CPU it and the servers took:
  on a machine with two cores, two servers and their client share what one
  server and its client had, and the ratio says how much a second replica
  adds there, not what it adds on a machine of its own. Each server runs in
  a session of its own, as a service would: Linux's autogroup scheduling
  (``/proc/sys/kernel/sched_autogroup_enabled``) divides the CPU between
  sessions first, so two servers in the bench's session would split the
  one share that a single server had, and measure that split.
- **replica lag**: one memory at a time is posted to A, and B is asked for
  it (``GET /v1/memories/{id}`` on one kept-alive connection, again as soon
  as it answers 404) until it has it: the time from sending the write to the
  first read on B that returns it, which includes A's write, and separately
  from A's acknowledgement. Each run posts ``--replica-writes`` memories;
  the median of the runs' p50 counts.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Callable, NamedTuple

import msgspec

from . import http_load
from .bench_rebuild import sentences
from .bench_recall import Server, questions
from .bench_runs import MIN_RUNS, middle

CLIENTS = 16


class ReplicaFigures(NamedTuple):
    memories: int
    one_qps: list[float]  # each run's requests/s: one server
    two_qps: list[float]  # ... two servers
    one_client_cores: float  # CPU the load client used per second of the median run, one server
    two_client_cores: float
    one_server_cores: float  # ... and the server(s)
    two_server_cores: float
    lag_ms: list[float]  # each run's p50, from sending the write on A to reading it on B
    lag_p95_ms: list[float]
    ack_lag_ms: list[float]  # each run's p50 from A's acknowledgement
    writes: int

    @property
    def qps_ratio(self) -> float:
        return middle(self.two_qps) / middle(self.one_qps)


def add_args(parser) -> None:
    parser.add_argument("--replica-memories", type=int, default=10_000, help="memories in the log the replicas serve (default 10,000)")
    parser.add_argument("--replica-seconds", type=float, default=10.0, help="seconds of each recall load run (default 10)")
    parser.add_argument("--replica-writes", type=int, default=60, help="writes per run of the replica-lag measurement (default 60)")


def check_args(args) -> None:
    if args.replica_memories < 1 or args.replica_writes < 1 or args.replica_seconds <= 0:
        raise ValueError("--replica-memories and --replica-writes must be at least 1, --replica-seconds above 0")


def _server(url: str, data_dir: Path) -> Server:
    """One replica: one process, in a session of its own (see the module's docstring)."""
    env = {"MNEMOLOG_AUTH": "off", "MNEMOLOG_ORGANIZER_ENABLED": "off", "MNEMOLOG_LOG_URL": url}
    return Server(data_dir, workers=1, env=env, own_session=True)


async def caught_up(url: str, position: int, timeout: float = 600.0) -> None:
    """Wait until the server at ``url`` has applied the log through ``position`` in every projection and its vector index."""
    raw = http_load.get(url, "/health")
    deadline = time.monotonic() + timeout
    conn = await http_load.Connection.open(url)
    try:
        while time.monotonic() < deadline:
            status, body = await conn.send(raw)
            state = msgspec.json.decode(body) if status == 200 else {}
            lags = state.get("projection_lags", {"?": 1})
            if state.get("head_position", 0) >= position and not any(lags.values()) and state.get("vector_index_lag", 1) == 0:
                return
            await asyncio.sleep(0.1)
    finally:
        conn.close()
    raise RuntimeError(f"{url} did not catch up with position {position} in {timeout:.0f} s")


async def _head(url: str) -> int:
    conn = await http_load.Connection.open(url)
    try:
        _, body = await conn.send(http_load.get(url, "/health"))
        return msgspec.json.decode(body)["head_position"]
    finally:
        conn.close()


async def replica_lag(writer: str, reader: str, writes: int, tag: str, timeout: float = 30.0) -> tuple[list[float], list[float]]:
    """Post ``writes`` memories to ``writer`` one at a time, each read back from ``reader`` as soon as it has it.

    Returns the seconds from sending each write to reading it on the other
    server, and from the writer's acknowledgement to that read.
    """
    post_conn, read_conn = await http_load.Connection.open(writer), await http_load.Connection.open(reader)
    from_send: list[float] = []
    from_ack: list[float] = []
    try:
        for i in range(writes):
            text = f"Replica probe {tag}-{i}: the tide table for pier {i} changed"
            raw = http_load.post(writer, "/v1/memories", {"memories": [{"memory": text}]})
            sent = time.perf_counter()
            status, body = await post_conn.send(raw)
            acknowledged = time.perf_counter()
            if status != 201:
                raise RuntimeError(f"the write answered {status}: {body[:200]!r}")
            memory_id = msgspec.json.decode(body)["memory_ids"][0]
            look = http_load.get(reader, f"/v1/memories/{memory_id}")
            while True:
                status, body = await read_conn.send(look)
                if status == 200:
                    break
                if status != 404 or time.perf_counter() - sent > timeout:
                    raise RuntimeError(f"the replica answered {status} for a write {time.perf_counter() - sent:.1f} s old: {body[:200]!r}")
            seen = time.perf_counter()
            from_send.append(seen - sent)
            from_ack.append(seen - acknowledged)
            await asyncio.sleep(0.02)  # writes apart, so that each is followed on its own
    finally:
        post_conn.close()
        read_conn.close()
    return from_send, from_ack


def _p(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(servers: list[Server]) -> float:
    """CPU time (user + system) the servers' processes have used so far."""
    total = 0
    for server in servers:
        for pid in server.pids():
            try:
                with open(f"/proc/{pid}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])  # utime, stime
            except (OSError, IndexError, ValueError):
                pass
    return total / _TICKS


class LoadRun(NamedTuple):
    qps: float
    client_cores: float  # CPU the load client used per second of the run
    server_cores: float  # ... and the servers


def _qps(run: LoadRun) -> float:
    return run.qps


def _load(targets: list[tuple[str, list[bytes]]], servers: list[Server], duration: float) -> LoadRun:
    """One load run: requests/s, and the CPU cores the load client and the servers used meanwhile."""
    cpu, served, wall = time.process_time(), _cpu_seconds(servers), time.perf_counter()
    qps = asyncio.run(http_load.throughput_across(targets, CLIENTS, duration))
    elapsed = time.perf_counter() - wall
    return LoadRun(qps, (time.process_time() - cpu) / elapsed, (_cpu_seconds(servers) - served) / elapsed)


def run_replicas(cluster, args, status: Callable[[str], None]) -> ReplicaFigures:
    """The measurement, in a new database of ``cluster`` (a started :class:`~mnemolog.tools.pg_cluster.PrivateCluster`)."""
    url = cluster.create_database()
    asks = questions(200)
    texts = sentences(args.replica_memories, seed=23)
    with tempfile.TemporaryDirectory(prefix="mnemolog-bench-replicas-") as tmp:
        status(f"replicas: server A takes {len(texts):,} memories")
        a = _server(url, Path(tmp) / "a")
        b = None
        try:
            batches = [texts[i : i + 100] for i in range(0, len(texts), 100)]
            asyncio.run(http_load.send_all(a.url, [http_load.post(a.url, "/v1/memories", {"memories": [{"memory": t} for t in batch]}) for batch in batches]))
            status("replicas: server B follows the log")
            b = _server(url, Path(tmp) / "b")
            head = asyncio.run(_head(a.url))
            for server in (a, b):
                asyncio.run(caught_up(server.url, head))
            one = [(a.url, [http_load.post(a.url, "/v1/recall", {"query": q}) for q in asks])]
            two = one + [(b.url, [http_load.post(b.url, "/v1/recall", {"query": q}) for q in asks])]
            for server_url, requests in two:  # warm up: each process loads its indexes on its first recalls
                asyncio.run(http_load.latencies(server_url, requests[:20]))
            one_runs: list[LoadRun] = []
            two_runs: list[LoadRun] = []
            for run in range(MIN_RUNS):  # alternating, so that both cases see the same neighbours
                status(f"replicas: {CLIENTS} clients, one server then two (run {run + 1} of {MIN_RUNS})")
                one_runs.append(_load(one, [a], args.replica_seconds))
                two_runs.append(_load(two, [a, b], args.replica_seconds))
            lags: list[tuple[list[float], list[float]]] = []
            for run in range(MIN_RUNS):
                status(f"replicas: lag, {args.replica_writes} writes on A read on B (run {run + 1} of {MIN_RUNS})")
                lags.append(asyncio.run(replica_lag(a.url, b.url, args.replica_writes, f"{run}")))
        finally:
            for server in (a, b):
                if server is not None:
                    server.stop()
    one_median, two_median = middle(one_runs, key=_qps), middle(two_runs, key=_qps)
    return ReplicaFigures(
        memories=len(texts),
        one_qps=[run.qps for run in one_runs],
        two_qps=[run.qps for run in two_runs],
        one_client_cores=one_median.client_cores,
        two_client_cores=two_median.client_cores,
        one_server_cores=one_median.server_cores,
        two_server_cores=two_median.server_cores,
        lag_ms=[_p(sent, 0.5) for sent, _ in lags],
        lag_p95_ms=[_p(sent, 0.95) for sent, _ in lags],
        ack_lag_ms=[_p(ack, 0.5) for _, ack in lags],
        writes=args.replica_writes,
    )


def report(figures: ReplicaFigures, seconds: float) -> str:
    runs = lambda values: ", ".join(f"{v:,.0f}" for v in values)  # noqa: E731
    runs_ms = lambda values: ", ".join(f"{v:.1f}" for v in values)  # noqa: E731
    one, two = middle(figures.one_qps), middle(figures.two_qps)
    per_cpu = lambda qps, cores: f"{qps / cores:,.0f}" if cores > 0 else "n/a"  # noqa: E731
    lines = [
        f"Two replicas on one PostgreSQL log ({figures.memories:,} memories; each server one process, its own data directory;"
        f" {os.cpu_count()} cores shared by the servers, their load client and PostgreSQL)",
        f"  /v1/recall, {CLIENTS} clients, {seconds:.0f} s a run, the median of {len(figures.one_qps)}:",
        f"    one server (reference)        {one:>9,.0f} requests/s   (runs {runs(figures.one_qps)}; CPU: server {figures.one_server_cores:.2f} cores, load client {figures.one_client_cores:.2f})",
        f"    two servers, 8 clients each   {two:>9,.0f} requests/s   (runs {runs(figures.two_qps)}; CPU: servers {figures.two_server_cores:.2f} cores, load client {figures.two_client_cores:.2f})",
        f"    two servers / one: {figures.qps_ratio:.2f} ×; requests per CPU-second of the servers: one {per_cpu(one, figures.one_server_cores)},"
        f" two {per_cpu(two, figures.two_server_cores)} (the ratio is what the cores gave the servers, not a limit of the replicas)",
        f"  replica lag, a write on A until a read on B returns it ({figures.writes} writes a run, the median of {len(figures.lag_ms)} runs):",
        f"    from sending the write: p50 {middle(figures.lag_ms):.1f} ms (runs {runs_ms(figures.lag_ms)}), p95 {middle(figures.lag_p95_ms):.1f} ms",
        f"    from A's acknowledgement: p50 {middle(figures.ack_lag_ms):.1f} ms (runs {runs_ms(figures.ack_lag_ms)})",
    ]
    return "\n".join(lines)


def keys(figures: ReplicaFigures) -> list[str]:
    return [
        f"replica_memories={figures.memories}",
        f"replica_one_qps={middle(figures.one_qps):.0f}",
        f"replica_two_qps={middle(figures.two_qps):.0f}",
        f"replica_one_server_cores={figures.one_server_cores:.2f}",
        f"replica_two_server_cores={figures.two_server_cores:.2f}",
        f"replica_ack_lag_p50_ms={middle(figures.ack_lag_ms):.1f}",
        f"replica_lag_p50_ms={middle(figures.lag_ms):.1f}",
        f"replicas_qps_ratio={figures.qps_ratio:.2f}",
    ]
