"""``mnemolog bench ingest``: sustained ingest into a server run as users run it, organizer on and off.

Each run starts a real ``mnemolog serve`` subprocess on a free loopback port
with the server's default settings (auth on, with a key made for the run;
one worker; the log fsynced at every commit) in a fresh data directory.
``--clients`` asyncio clients (default 4) post batches of ``--batch``
(default 10) distinct memories to ``POST /v1/memories`` for ``--duration``
seconds (default 30); the rate is the memories the server acknowledged per
second. The same is done with ``MNEMOLOG_ORGANIZER_ENABLED=0``: the
reference, measured in the same run, alternating with the organizer-on
runs so that both see the same neighbours on a shared machine.

The memories are distinct facts of one template (see
:func:`mnemolog.tools.organize_cmds.distinct_facts`): close in wording and
vectors, so the organizer finds candidates and judges them; none is a
duplicate, and about one in a thousand contradicts another ("enjoys" /
"dislikes" the same thing). Each organizer-on run reports the decisions it
made, how far behind the log's head the organizer was when the load
stopped, and how long after it the organizer had caught up
(``--catch-up-limit``): under load it steps aside (``MNEMOLOG_ORGANIZER_BUSY_SHARE``)
and does the rest once the writes stop.

Each configuration runs ``--runs`` times (default 3) and the medians count.
The last line is ``sustained_mps= sustained_mps_no_organizer= organizer_ratio=``
(the ratio of the two medians).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .common import counted

HELP = "sustained ingest over HTTP (4 clients, batches of 10, 30 s) with the organizer on and off, in the same run"


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of load per run (default 30)")
    parser.add_argument("--clients", type=int, default=4, help="concurrent clients (default 4)")
    parser.add_argument("--batch", type=int, default=10, help="memories per request (default 10)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each configuration; the medians count (default 3)")
    parser.add_argument("--catch-up-limit", type=float, default=120.0, help="seconds to wait after the load for the organizer to catch up (default 120)")
    parser.add_argument("--tmp-dir", metavar="DIR", help="where to make the temporary directories")


class Load:
    """What one run measured: memories acknowledged, when, and the organizer's state at the end."""

    def __init__(self) -> None:
        self.acked: list[tuple[float, int]] = []  # (seconds since the start, memories) per acknowledged request
        self.errors = 0
        self.seconds = 0.0
        self.organizer: dict[str, Any] = {}
        self.caught_up_s: float | None = None  # after the load, until the organizer had processed the log (None: not within the limit)

    @property
    def memories(self) -> int:
        return sum(n for _, n in self.acked)

    @property
    def rate(self) -> float:
        return self.memories / self.seconds if self.seconds else 0.0

    def rate_between(self, start: float, end: float) -> float:
        """Memories per second acknowledged in ``[start, end)`` seconds of the run."""
        return sum(n for t, n in self.acked if start <= t < end) / (end - start) if end > start else 0.0


async def _post_load(
    url: str, key: str, texts: list[str], clients: int, batch: int, duration: float, organizer: bool, catch_up_limit: float
) -> Load:
    import aiohttp

    load = Load()
    headers = {"Authorization": f"Bearer {key}"}
    cursor = 0

    def next_batch() -> list[dict[str, str]]:
        nonlocal cursor
        if cursor + batch > len(texts):
            raise RuntimeError("ran out of distinct memories: raise the pool in bench ingest")
        chunk = texts[cursor : cursor + batch]
        cursor += batch
        return [{"memory": t} for t in chunk]

    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector, headers=headers) as session:
        began = time.monotonic()
        stop_at = began + duration

        async def client() -> None:
            while time.monotonic() < stop_at:
                body = {"memories": next_batch()}
                async with session.post(f"{url}/v1/memories", json=body) as response:
                    await response.read()
                    if response.status in (200, 201):
                        load.acked.append((time.monotonic() - began, len(body["memories"])))
                    else:
                        load.errors += 1

        await asyncio.gather(*(client() for _ in range(clients)))
        load.seconds = time.monotonic() - began
        if organizer:
            async with session.get(f"{url}/v1/digest") as response:
                head = (await response.json())["position"]
            async with session.get(f"{url}/v1/organizer/status") as response:
                status = await response.json()
            load.organizer = {**status, "head": head}
            # The work left behind is done once the writes stop: how long that takes.
            stopped = time.monotonic()
            while time.monotonic() - stopped < catch_up_limit:
                async with session.get(f"{url}/v1/organizer/status", params={"min_position": str(head), "wait": "10s"}) as response:
                    if (await response.json())["caught_up"]:
                        load.caught_up_s = time.monotonic() - stopped
                        break
    return load


def _one_run(root: Path, texts: list[str], args: argparse.Namespace, organizer: bool) -> Load:
    from mnemolog.api.auth import KeyStore

    from .bench_recall import Server

    data_dir = root / ("organizer-on" if organizer else "organizer-off")
    data_dir.mkdir(parents=True)
    keystore = KeyStore(data_dir / "auth.db")
    try:
        key, _ = keystore.create("bench", ["read", "write"], name="bench ingest")
    finally:
        keystore.close()
    server = Server(data_dir, workers=1, env={"MNEMOLOG_ORGANIZER_ENABLED": "1" if organizer else "0"})
    try:
        return asyncio.run(_post_load(server.url, key, texts, args.clients, args.batch, args.duration, organizer, args.catch_up_limit))
    finally:
        server.stop()


def run(args: argparse.Namespace) -> int:
    from .organize_cmds import distinct_facts

    if args.duration <= 0 or args.clients < 1 or args.batch < 1 or args.runs < 1:
        raise ValueError("--duration, --clients, --batch and --runs must be positive")
    verbose = sys.stderr.isatty()
    # More memories than the fastest server takes in the time; the same ones for every run.
    texts = distinct_facts(min(500_000, int(args.duration * 6000) + args.clients * args.batch), random.Random(7))
    with_organizer: list[Load] = []
    without: list[Load] = []
    with tempfile.TemporaryDirectory(prefix="mnemolog-bench-ingest-", dir=args.tmp_dir) as tmp:
        for n in range(args.runs):
            for organizer, out in ((True, with_organizer), (False, without)):
                if verbose:
                    print(f"bench ingest: run {n + 1}/{args.runs}, organizer {'on' if organizer else 'off'}", file=sys.stderr, flush=True)
                out.append(_one_run(Path(tmp) / f"run{n}", texts, args, organizer))
    on = statistics.median(load.rate for load in with_organizer)
    off = statistics.median(load.rate for load in without)
    ratio = on / off if off else float("nan")
    third = args.duration / 3
    print(f"ingest bench  ({counted(args.clients, 'client')}, batches of {counted(args.batch, 'distinct memory', 'distinct memories')}, {args.duration:g} s per run, "
          f"mnemolog serve with default settings, {args.runs} run(s) each)")
    print(f"  {'run':<30}{'memories':>10}{'mem/s':>9}{'first third':>13}{'last third':>12}{'errors':>8}  organizer at the end")
    for name, loads in (("organizer on", with_organizer), ("organizer off (reference)", without)):
        for n, load in enumerate(loads, 1):
            state = ""
            if load.organizer:
                o = load.organizer
                behind = f", {o['head'] - o['position']:,} events behind the head"
                caught = f"caught up {load.caught_up_s:.1f} s later" if load.caught_up_s is not None else f"not caught up {args.catch_up_limit:g} s later"
                state = f"{o.get('decisions', 0)} decision(s){behind}; {caught}"
            print(f"  {f'{name} #{n}':<30}{load.memories:>10,}{load.rate:>9,.0f}{load.rate_between(0, third):>13,.0f}"
                  f"{load.rate_between(2 * third, args.duration):>12,.0f}{load.errors:>8}  {state}")
    print(f"  median: organizer on {on:,.0f} memories/s, off {off:,.0f} memories/s (the reference); ratio {ratio:.2f} (target >= 0.8)")
    pairs = [a.rate / b.rate for a, b in zip(with_organizer, without) if b.rate]
    print(f"  each run against the reference run right after it: {', '.join(f'{r:.2f}' for r in pairs)} (median {statistics.median(pairs):.2f})")
    print(f"sustained_mps={on:.0f} sustained_mps_no_organizer={off:.0f} organizer_ratio={ratio:.2f}")
    return 0
