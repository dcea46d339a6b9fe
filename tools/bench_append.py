"""``mnemolog bench append``: how fast the log takes and gives back events.

In a temporary directory, for each SQLite ``synchronous`` level, N small
events (~300-byte payloads) are appended one per transaction, in batches of
100 and in batches of 1,000; then the same rows go through Python's
``sqlite3`` ``executemany`` into a bare table (same columns and primary key,
no triggers, no other indexes, same WAL journal and ``synchronous``): the
raw limit the log's append is compared with. Last, all N events are read
back decoded into Structs (``iter_all``), and the same rows are read by the
reference: a plain ``sqlite3`` cursor over the envelope's columns, in
position order, whose payload and metadata are decoded by msgspec into the
same Structs, row by row. Ours reads a page ahead on a second thread
(SQLite builds the next page while this one is decoded); the reference is
one thread, as a plain reader would be.

Reads do not depend on the ``synchronous`` level, so both levels read the
log in the same state: at rest, as a replay finds it. The log of the last
1,000-per-transaction run is closed (its WAL checkpointed into the file)
and opened again; ours and the reference each make one untimed pass first
(page cache, decoders, prepared statements), and the garbage left by the
write phase is collected before every timed read, so that neither the
write phase's tail nor a collection it owes is timed as a read.

Every case runs ``--repeat`` times (at least 3, default 3) and the median
run counts, for ours and for each reference alike; the reads of ours and of
the reference alternate, so that both see the same neighbours. Under FULL
every commit waits for the disk, so one-per-transaction runs use fewer
events (the table says how many; at most 5,000 under FULL, 10,000 under
NORMAL).

Then the cost of crypto-shredding (:mod:`mnemolog.tools.bench_sealing`):
sealed vs plaintext memory appends and reads in the same run, and the time
to forget a subject with ``--forget-n`` memories.

The last line of output is ``key=value`` pairs for scripts; keys of the
NORMAL run end in ``_normal``.

``--backend postgres`` measures the log on PostgreSQL instead: in a private
cluster the bench starts and stops (``mnemolog.tools.pg_cluster``), appends
of 1 and 100 per transaction, next to psycopg ``executemany`` of the same
rows into a bare table in the same run; each case in a new database. Then,
in the same cluster, two ``mnemolog serve`` replicas on one log against one
server alone (recall throughput with 16 clients, and the lag from a write on
one to a read on the other: see :mod:`mnemolog.tools.bench_replicas`). Its
last line ends with the issue's figures: ``pg_append_b100_eps``,
``pg_ratio_b100``, ``replica_lag_p50_ms`` and ``replicas_qps_ratio``.
"""

from __future__ import annotations

import argparse
import gc
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import msgspec

from mnemolog.eventstore import DomainEvent, EventStore, Metadata
from mnemolog.eventstore.chain import CANONICAL_FIELDS
from mnemolog.eventstore.dialects import apply_pragmas
from mnemolog.eventstore.store import PAGE_ROWS

from . import bench_replicas
from .bench_runs import MIN_RUNS, check_runs, middle
from .bench_sealing import FORGET_N, run_sealing
from .common import between, counted

HELP = (
    "append throughput (1, 100, 1,000 per transaction) against raw sqlite3, and decoded reads against sqlite3 + msgspec;"
    " --backend postgres: appends against raw psycopg, then two replica servers on one log against one"
)

LEVELS = ("FULL", "NORMAL")
B1_LIMITS = {"FULL": 5000, "NORMAL": 10000}  # events appended one per transaction
RAW_B1_LIMITS = {"FULL": 2000, "NORMAL": 10000}
STREAMS = 64

_COLUMNS = (
    "position", "event_id", "stream_id", "stream_version", "type", "schema_version", "tenant",
    "payload", "metadata", "correlation_id", "recorded_at", "prev_hash", "hash",
)  # fmt: skip
_RAW_DDL = """
CREATE TABLE events (
    position INTEGER PRIMARY KEY,
    event_id VARCHAR(36) NOT NULL,
    stream_id VARCHAR(255) NOT NULL,
    stream_version INTEGER NOT NULL,
    type VARCHAR(100) NOT NULL,
    schema_version INTEGER NOT NULL,
    tenant VARCHAR(255) NOT NULL,
    payload TEXT NOT NULL,
    metadata TEXT NOT NULL,
    correlation_id VARCHAR(255),
    recorded_at VARCHAR(40) NOT NULL,
    prev_hash VARCHAR(64) NOT NULL,
    hash VARCHAR(64) NOT NULL
)
"""
_RAW_INSERT = f"INSERT INTO events ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})"


class BenchNoted(DomainEvent, frozen=True):
    """A small note written by the append benchmark."""

    text: str
    tags: list[str]
    score: float
    seq: int


_WORDS = (
    "agent memory ledger recall event stream tenant payload vector graph chunk fact "
    "user prefers coffee meeting tuesday project deadline summary budget travel note"
).split()


def make_events(n: int, seed: int = 7) -> list[BenchNoted]:
    rng = random.Random(seed)
    texts = []
    for _ in range(128):
        words: list[str] = []
        while sum(len(w) + 1 for w in words) < 220:
            words.append(rng.choice(_WORDS))
        texts.append(" ".join(words))
    return [
        BenchNoted(text=texts[i % len(texts)], tags=[_WORDS[i % 7], _WORDS[i % 11]], score=round(rng.random(), 4), seq=i)
        for i in range(n)
    ]


class Result:
    def __init__(self, label: str, events: int, seconds: float):
        self.label, self.events, self.seconds = label, events, seconds

    @property
    def eps(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else float("inf")


def time_append(root: Path, level: str, events: list[BenchNoted], batch: int) -> tuple[float, EventStore]:
    store = EventStore.open(root, synchronous=level)
    started = time.perf_counter()
    for index, start in enumerate(range(0, len(events), batch)):
        store.append(f"bench-{index % STREAMS}", events[start : start + batch])
    return time.perf_counter() - started, store


def time_raw(directory: Path, level: str, rows: list[tuple], batch: int) -> float:
    directory.mkdir()
    conn = sqlite3.connect(directory / "raw.db", isolation_level=None)
    try:
        apply_pragmas(conn, level)  # exactly the log's own
        conn.execute(_RAW_DDL)
        started = time.perf_counter()
        for start in range(0, len(rows), batch):
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(_RAW_INSERT, rows[start : start + batch])
            conn.execute("COMMIT")
        return time.perf_counter() - started
    finally:
        conn.close()
        shutil.rmtree(directory)


def time_read(store: EventStore) -> Result:
    gc.collect()
    started = time.perf_counter()
    count = 0
    for batch in store.iter_all():
        count += len(batch)
    return Result("read back decoded (iter_all)", count, time.perf_counter() - started)


_RAW_SELECT = f"SELECT {', '.join(CANONICAL_FIELDS)} FROM events ORDER BY position"
_PAYLOAD, _METADATA = CANONICAL_FIELDS.index("payload"), CANONICAL_FIELDS.index("metadata")


def time_raw_read(path: Path, level: str) -> Result:
    """The reference for reads: a plain sqlite3 cursor over the same rows
    (the log's pragmas), payload and metadata decoded by msgspec row by row,
    one page of rows in memory at a time like ``iter_all``."""
    payloads, metadatas = msgspec.json.Decoder(BenchNoted), msgspec.json.Decoder(Metadata)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        apply_pragmas(conn, level)
        gc.collect()
        started = time.perf_counter()
        count = 0
        cursor = conn.execute(_RAW_SELECT)
        while rows := cursor.fetchmany(PAGE_ROWS):
            decoded = [(row, payloads.decode(row[_PAYLOAD]), metadatas.decode(row[_METADATA])) for row in rows]
            count += len(decoded)
        return Result("raw sqlite3 fetch + msgspec decode", count, time.perf_counter() - started)
    finally:
        conn.close()


def _seconds(result: Result) -> float:
    return result.seconds


def run_level(root: Path, level: str, events: list[BenchNoted], repeat: int, status: Callable[[str], None]) -> dict[str, Result]:
    """Each case runs ``repeat`` times, each append into a new file; the median run counts."""
    n = len(events)
    n_b1 = min(n, B1_LIMITS[level])
    n_raw_b1 = min(n, RAW_B1_LIMITS[level])
    results: dict[str, Result] = {}
    rows: list[tuple] = []
    for batch, count in ((1, n_b1), (100, n), (1000, n)):
        status(f"{level}: append, {batch} per transaction")
        runs: list[float] = []
        for run in range(repeat):
            directory = root / f"{level}-b{batch}-{run}"
            seconds, store = time_append(directory, level, events[:count], batch)
            runs.append(seconds)
            if batch == 1000 and run == repeat - 1:
                rows = [tuple(row) for rows in store.iter_rows() for row in rows]
                store.close()  # at rest: the WAL checkpointed into the file, as a replay finds the log
                store = EventStore.open(directory, synchronous=level)
                status(f"{level}: read back")
                time_read(store), time_raw_read(directory / "events.db", level)  # one untimed pass each
                ours: list[Result] = []
                reference: list[Result] = []
                for _ in range(repeat):  # alternate, so that both see the same neighbours
                    ours.append(time_read(store))
                    reference.append(time_raw_read(directory / "events.db", level))
                results["read"], results["raw_read"] = middle(ours, key=_seconds), middle(reference, key=_seconds)
            store.close()
            shutil.rmtree(directory)  # keeps the disk footprint to one log
        results[f"append_b{batch}"] = Result(f"append, {batch:,} per transaction", count, middle(runs))
    for batch, count in ((1, n_raw_b1), (100, n), (1000, n)):
        status(f"{level}: raw sqlite3, {batch} per transaction")
        seconds = middle([time_raw(root / f"raw-{level}-b{batch}-{run}", level, rows[:count], batch) for run in range(repeat)])
        results[f"raw_b{batch}"] = Result(f"raw sqlite3 executemany, {batch:,} per transaction", count, seconds)
    return results


def table(level: str, n: int, repeat: int, results: dict[str, Result]) -> str:
    lines = [f"synchronous={level}  (N={n:,}; median of {counted(repeat, 'run')} per case)"]
    lines.append(f"  {'case':<46}{'events':>10}{'seconds':>10}{'events/s':>12}{'vs raw':>9}")
    order = ("append_b1", "append_b100", "append_b1000", "raw_b1", "raw_b100", "raw_b1000", "read", "raw_read")
    for key in order:
        r = results[key]
        ratio = ""
        if key.startswith("append_"):
            ratio = f"{r.eps / results['raw_' + key.split('_', 1)[1]].eps:.2f}"
        elif key == "read":
            ratio = f"{r.eps / results['raw_read'].eps:.2f}"
        lines.append(f"  {r.label:<46}{r.events:>10,}{r.seconds:>10.2f}{r.eps:>12,.0f}{ratio:>9}")
    for key in ("append_b1", "raw_b1"):
        if results[key].events < n:
            why = "each commit waits for its own sync" if level == "FULL" else "capped to keep the run short"
            lines.append(f"  ({results[key].label}: {results[key].events:,} of N events; {why})")
    lines.append("  raw appends: bare table with the same columns and primary key; no triggers, no unique or secondary indexes")
    lines.append("  raw read: sqlite3 cursor over the envelope's columns in position order, payload and metadata decoded by msgspec per row")
    lines.append("  reads: the log at rest (closed and opened again), after one untimed pass each; garbage collected before each timed read")
    lines.append("  iter_all fetches the next page on a second thread while it decodes this one; the raw read is one thread")
    return "\n".join(lines)


def keys(results: dict[str, Result], n: int, suffix: str) -> list[str]:
    out = [f"n{suffix}={n}", f"n_b1{suffix}={results['append_b1'].events}"]
    for batch in (1, 100, 1000):
        append, raw = results[f"append_b{batch}"], results[f"raw_b{batch}"]
        out.append(f"append_b{batch}_eps{suffix}={append.eps:.0f}")
        out.append(f"raw_b{batch}_eps{suffix}={raw.eps:.0f}")
        out.append(f"ratio_b{batch}{suffix}={append.eps / raw.eps:.3f}")
    read, raw_read = results["read"], results["raw_read"]
    out.append(f"read_eps{suffix}={read.eps:.0f}")
    out.append(f"raw_read_eps{suffix}={raw_read.eps:.0f}")
    out.append(f"read_ratio{suffix}={read.eps / raw_read.eps:.3f}")
    return out


PG_B1_LIMIT = 2000  # events appended one per transaction on PostgreSQL


def time_append_url(url: str, events: list[BenchNoted], batch: int) -> float:
    with EventStore.open(url) as store:
        started = time.perf_counter()
        for index, start in enumerate(range(0, len(events), batch)):
            store.append(f"bench-{index % STREAMS}", events[start : start + batch])
        return time.perf_counter() - started


def time_raw_psycopg(url: str, rows: list[tuple], batch: int) -> float:
    """psycopg 3 ``executemany`` into a bare table (same columns and primary key), ``batch`` rows per transaction."""
    import psycopg

    from mnemolog.eventstore.dialects import psycopg_conninfo

    with psycopg.connect(psycopg_conninfo(url)) as conn:
        conn.execute(_RAW_DDL.replace("position INTEGER", "position BIGINT"))
        conn.commit()
        insert = _RAW_INSERT.replace("?", "%s")
        started = time.perf_counter()
        with conn.cursor() as cursor:
            for start in range(0, len(rows), batch):
                cursor.executemany(insert, rows[start : start + batch])
                conn.commit()
        return time.perf_counter() - started


#: The issue's headline figures, which end the last line of ``--backend postgres`` in this order.
PG_HEADLINE = ("pg_append_b100_eps", "pg_ratio_b100", "replica_lag_p50_ms", "replicas_qps_ratio")


def run_postgres(args: argparse.Namespace, events: list[BenchNoted], status: Callable[[str], None]) -> list[str]:
    from .pg_cluster import PrivateCluster

    bench_replicas.check_args(args)
    cluster = PrivateCluster()
    reason = cluster.ensure()
    if reason:
        raise RuntimeError(reason)
    try:
        n = len(events)
        results: dict[str, Result] = {}
        rows: list[tuple] = []
        for batch, count in ((1, min(n, PG_B1_LIMIT)), (100, n)):
            status(f"postgres: append, {batch} per transaction")
            best = middle([time_append_url(cluster.create_database(), events[:count], batch) for _ in range(args.repeat)])
            results[f"append_b{batch}"] = Result(f"append, {batch:,} per transaction", count, best)
        url = cluster.create_database()
        with EventStore.open(url) as store:
            for start in range(0, n, 1000):
                store.append("rows", events[start : start + 1000])
            rows = [tuple(row) for page in store.iter_rows() for row in page]
        for batch, count in ((1, min(n, PG_B1_LIMIT)), (100, n)):
            status(f"postgres: raw psycopg, {batch} per transaction")
            best = middle([time_raw_psycopg(cluster.create_database(), rows[:count], batch) for _ in range(args.repeat)])
            results[f"raw_b{batch}"] = Result(f"raw psycopg executemany, {batch:,} per transaction", count, best)
        replicas = bench_replicas.run_replicas(cluster, args, status)
    finally:
        cluster.stop()
    lines = [f"PostgreSQL (private cluster, fsync off; N={n:,}; the median of {counted(args.repeat, 'run')} per case)"]
    lines.append(f"  {'case':<50}{'events':>10}{'seconds':>10}{'events/s':>12}{'vs raw':>9}")
    for key in ("append_b1", "append_b100", "raw_b1", "raw_b100"):
        r = results[key]
        ratio = f"{r.eps / results['raw_' + key.split('_', 1)[1]].eps:.2f}" if key.startswith("append_") else ""
        lines.append(f"  {r.label:<50}{r.events:>10,}{r.seconds:>10.2f}{r.eps:>12,.0f}{ratio:>9}")
    lines.append("  raw: bare table with the same columns and primary key; no triggers, no unique or secondary indexes, no lock")
    lines.append("  an append: two round trips whatever its size (BEGIN, lock and head read; then one INSERT statement and COMMIT)")
    print("\n".join(lines), flush=True)
    print()
    print(bench_replicas.report(replicas, args.replica_seconds), flush=True)
    print()
    b100, raw100 = results["append_b100"], results["raw_b100"]
    pairs = [
        f"pg_n={n}",
        f"pg_append_b1_eps={results['append_b1'].eps:.0f}",
        f"pg_raw_b1_eps={results['raw_b1'].eps:.0f}",
        f"pg_ratio_b1={results['append_b1'].eps / results['raw_b1'].eps:.3f}",
        f"pg_raw_b100_eps={raw100.eps:.0f}",
        f"pg_append_b100_eps={b100.eps:.0f}",
        f"pg_ratio_b100={b100.eps / raw100.eps:.3f}",
        *bench_replicas.keys(replicas),
    ]
    headline = {pair.split("=")[0]: pair for pair in pairs}
    return [pair for pair in pairs if pair.split("=")[0] not in PG_HEADLINE] + [headline[key] for key in PG_HEADLINE]


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=int, default=100_000, help="events per batched run (default 100,000)")
    parser.add_argument(
        "--backend",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="the log's database: sqlite (default) or postgres (a private cluster the bench starts; needs the postgres extra and server binaries)",
    )
    parser.add_argument(
        "--synchronous",
        type=str.upper,
        choices=("FULL", "NORMAL", "BOTH"),
        default="BOTH",
        help="SQLite synchronous level(s) to measure (default: both)",
    )
    parser.add_argument(
        "--repeat", type=int, default=MIN_RUNS, help=f"runs of each case; the median counts (at least {MIN_RUNS}, default {MIN_RUNS})"
    )
    parser.add_argument("--tmp-dir", metavar="DIR", help="where to make the temporary directory (default: the system's)")
    bench_replicas.add_args(parser)
    parser.add_argument("--forget-n", type=between(1, 10_000_000), default=FORGET_N, help=f"memories of the subject forgotten (default {FORGET_N:,}, at most --n)")


def run(args: argparse.Namespace) -> int:
    if args.n < 1:
        raise ValueError("--n must be at least 1")
    check_runs(args.repeat, "--repeat")
    levels = LEVELS if args.synchronous == "BOTH" else (args.synchronous,)
    events = make_events(args.n)
    verbose = sys.stderr.isatty()

    def status(text: str) -> None:
        if verbose:
            print(f"bench append: {text}", file=sys.stderr, flush=True)

    pairs: list[str] = []
    if args.backend == "postgres":
        pairs = run_postgres(args, events, status)
        print(" ".join(pairs))
        return 0
    with tempfile.TemporaryDirectory(prefix="mnemolog-bench-", dir=args.tmp_dir) as tmp:
        for level in levels:
            results = run_level(Path(tmp), level, events, args.repeat, status)
            print(table(level, args.n, args.repeat, results), flush=True)
            print()
            pairs.extend(keys(results, args.n, "" if level == "FULL" else "_" + level.lower()))
        text, sealing = run_sealing(Path(tmp), args.n, min(args.forget_n, args.n), args.repeat, status)
        print(text, flush=True)
        print()
        pairs.extend(sealing)
    print(" ".join(pairs))
    return 0
