"""The cost of crypto-shredding, as part of ``mnemolog bench append``.

- **Sealed vs plaintext appends**, in the same run: memory events of a
  subject (a ~220-character text, tags, background, properties: what a
  memory write carries) appended 100 per transaction with
  ``MNEMOLOG_ENCRYPTION=on`` and ``off``, alternating runs, under
  ``synchronous=NORMAL`` so the disk does not hide the CPU cost; then the
  same logs read back decoded (``iter_all``; the sealed one opens every
  token). The goal is a ratio of at least 0.8. Beside it, the appending
  thread's CPU time an event: on a shared machine it moves far less than
  the wall-clock ratio. The same appends run again under ``synchronous=FULL``
  (the log's default), where each commit waits for the disk: what a user of
  the defaults sees.
- **Forget**: a subject with ``--forget-n`` memories (default 10,000) among
  a tenth as many of other subjects, written through the service; the time
  of ``MemoryService.forget`` (the command, the projections erasing the
  rows, the compaction of ``projections.db``, the vector index saved anew).
  The goal is under 5 seconds.

Each case runs ``--repeat`` times; the median counts.
"""

from __future__ import annotations

import random
import shutil
import time
from pathlib import Path
from typing import Callable

from mnemolog.eventstore import EventStore
from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings

from .bench_runs import middle

LEVELS = ("NORMAL", "FULL")  # NORMAL first: no commit waits for the disk, so the CPU cost of sealing shows
SEAL_LIMIT = 20_000  # events in the sealed vs plaintext comparison (at most)
FORGET_N = 10_000
_WORDS = "alice moved to lisbon in may and prefers green tea her sister works at the harbour office near the old bridge".split()


def memory_events(n: int, seed: int = 11) -> list[c.MemoryAdded]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words: list[str] = []
        while sum(len(w) + 1 for w in words) < 220:
            words.append(rng.choice(_WORDS))
        content = MemoryContent(
            memory=" ".join(words), tags=(_WORDS[i % 7], _WORDS[i % 5]), background="said in a chat", properties={"n": i}, subject=f"u-{i % 50}"
        )
        out.append(c.MemoryAdded(memory_id=f"m-{i}", content=content, created_at="2026-01-01T00:00:00Z"))
    return out


def _append_and_read(directory: Path, events: list[c.MemoryAdded], encryption: str, level: str) -> tuple[float, float, float]:
    """Seconds to append ``events`` under the SQLite ``synchronous`` level ``level`` and to read them back, and
    the appending thread's CPU seconds (steady under load)."""
    settings = Settings({"data_dir": str(directory), "encryption": encryption}, env={})
    with EventStore.open(directory, settings=settings, synchronous=level) as store:
        started, cpu = time.perf_counter(), time.thread_time()
        for start in range(0, len(events), 100):
            store.append(f"memory-{start}", events[start : start + 100], tenant="bench")
        appended, cpu = time.perf_counter() - started, time.thread_time() - cpu
        started = time.perf_counter()
        count = sum(len(batch) for batch in store.iter_all())
        read = time.perf_counter() - started
        assert count == len(events)
    return appended, read, cpu


def _forget_once(directory: Path, n: int) -> float:
    from mnemolog.eventstore.commands import CommandContext
    from mnemolog.projections.service import MemoryService

    settings = Settings({"data_dir": str(directory), "encryption": "on", "synchronous": "NORMAL"}, env={})
    ctx = CommandContext(tenant="bench", actor="bench")
    with MemoryService.open(directory, settings=settings) as svc:
        texts = [e.content.memory for e in memory_events(min(n, 2_000))]
        for start in range(0, n, 2_000):
            batch = [MemoryContent(memory=f"{texts[i % len(texts)]} {i}", subject="forgotten") for i in range(start, min(n, start + 2_000))]
            svc.run(svc.memories.add, ctx, batch)
        svc.run(svc.memories.add, ctx, [MemoryContent(memory=f"{texts[i % len(texts)]} other {i}", subject=f"u-{i}") for i in range(max(1, n // 10))])
        svc.scrub()  # the vector index built and saved, as a running server keeps it
        started = time.perf_counter()
        result = svc.forget(ctx, "forgotten", reason="bench")
        seconds = time.perf_counter() - started
        assert result.data["memories_erased"] == n
    return seconds


def run_sealing(root: Path, n: int, forget_n: int, repeat: int, status: Callable[[str], None]) -> tuple[str, list[str]]:
    """The table and the ``key=value`` pairs of the sealing cases."""
    events = memory_events(min(n, SEAL_LIMIT))
    runs: dict[tuple[str, str], list[tuple[float, float, float]]] = {(level, mode): [] for level in LEVELS for mode in ("on", "off")}
    for level in LEVELS:
        for run in range(repeat):
            for mode in ("off", "on") if run % 2 == 0 else ("on", "off"):  # alternate, so both see the same neighbours
                status(f"sealing: append and read, synchronous={level}, encryption {mode}")
                directory = root / f"seal-{level}-{mode}-{run}"
                runs[level, mode].append(_append_and_read(directory, events, mode, level))
                shutil.rmtree(directory)
    count = len(events)
    on, off = runs["NORMAL", "on"], runs["NORMAL", "off"]
    on_append, off_append = middle(r[0] for r in on), middle(r[0] for r in off)
    on_read, off_read = middle(r[1] for r in on), middle(r[1] for r in off)
    on_cpu, off_cpu = middle(r[2] for r in on) / count * 1e6, middle(r[2] for r in off) / count * 1e6
    on_full, off_full = middle(r[0] for r in runs["FULL", "on"]), middle(r[0] for r in runs["FULL", "off"])
    forgets = []
    for run in range(repeat):
        status(f"sealing: forget a subject with {forget_n:,} memories")
        directory = root / f"forget-{run}"
        forgets.append(_forget_once(directory, forget_n))
        shutil.rmtree(directory)
    forget_s = middle(forgets)
    append_ratio, read_ratio, full_ratio = off_append / on_append, off_read / on_read, off_full / on_full
    lines = [f"crypto-shredding  (memory events of 50 subjects, 100 per transaction; median of {repeat} runs per case)"]
    lines.append(f"  {'case':<46}{'events':>10}{'seconds':>10}{'events/s':>12}{'vs off':>9}")
    lines.append(f"  {'append, encryption off (NORMAL)':<46}{count:>10,}{off_append:>10.2f}{count / off_append:>12,.0f}{'':>9}")
    lines.append(f"  {'append, encryption on (sealed, NORMAL)':<46}{count:>10,}{on_append:>10.2f}{count / on_append:>12,.0f}{append_ratio:>9.2f}")
    lines.append(f"  {'append, encryption off (FULL, the default)':<46}{count:>10,}{off_full:>10.2f}{count / off_full:>12,.0f}{'':>9}")
    lines.append(f"  {'append, encryption on (sealed, FULL)':<46}{count:>10,}{on_full:>10.2f}{count / on_full:>12,.0f}{full_ratio:>9.2f}")
    lines.append(f"  {'read back decoded, encryption off':<46}{count:>10,}{off_read:>10.2f}{count / off_read:>12,.0f}{'':>9}")
    lines.append(f"  {'read back decoded, sealed (opened)':<46}{count:>10,}{on_read:>10.2f}{count / on_read:>12,.0f}{read_ratio:>9.2f}")
    lines.append(f"  {f'forget a subject with {forget_n:,} memories':<46}{forget_n:>10,}{forget_s:>10.2f}{forget_n / forget_s:>12,.0f}{'':>9}")
    lines.append(f"  appending thread's CPU an event (NORMAL): {off_cpu:.2f} µs off, {on_cpu:.2f} µs sealed ({on_cpu / off_cpu:.2f}x)")
    lines.append(
        f"  goals: sealed append at least 0.8x plaintext ({append_ratio:.2f}x at NORMAL, where the CPU shows; {full_ratio:.2f}x at FULL);"
        f" forget of 10,000 memories under 5 s ({forget_s:.2f} s)"
    )
    pairs = [
        f"seal_n={count}",
        f"append_off_eps={count / off_append:.0f}",
        f"append_on_eps={count / on_append:.0f}",
        f"seal_append_ratio={append_ratio:.3f}",
        f"append_off_eps_full={count / off_full:.0f}",
        f"append_on_eps_full={count / on_full:.0f}",
        f"seal_append_ratio_full={full_ratio:.3f}",
        f"seal_cpu_us_off={off_cpu:.2f}",
        f"seal_cpu_us_on={on_cpu:.2f}",
        f"seal_read_ratio={read_ratio:.3f}",
        f"forget_n={forget_n}",
        f"forget_s={forget_s:.2f}",
    ]
    return "\n".join(lines), pairs
