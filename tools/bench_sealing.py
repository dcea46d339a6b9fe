"""The cost of crypto-shredding, as part of ``mnemolog bench append``.

- **Sealed vs plaintext appends**, side by side: two logs open at once, one
  with ``MNEMOLOG_ENCRYPTION=on`` and one ``off``, take the same memory
  events of 50 subjects (a ~220-character text, tags, background,
  properties: what a memory write carries), 100 per transaction, turn about:
  each batch goes to one log and then the other, the order switching every
  batch. Each append is timed on its own (wall clock, and the appending
  thread's CPU time); the median transaction of each log counts, over
  ``--repeat`` runs of fresh logs. Interleaved so, both logs see the same
  moment of a shared machine: timed as whole runs one after the other, the
  same code measured anywhere from 0.58 to 0.85 as the machine's speed
  moved between runs. Under ``synchronous=NORMAL`` the disk does not hide
  the CPU cost; the same appends run again under ``synchronous=FULL`` (the
  log's default), where each commit waits for the disk: what a user of the
  defaults sees. The goal is a ratio of at least 0.8. The total of each
  log's appends is printed beside the medians: a garbage collection or a
  checkpoint lands in whichever append runs when it comes due. The same
  comparison with one event a transaction (``SINGLE_N`` of them, at both
  levels) is what an agent writing one memory at a time sees: there the
  commit, not the sealing, is most of an append.
- **Read back**: each run's two logs read back decoded (``iter_all``; the
  sealed one opens every token), one after the other, alternating which
  goes first; the median run counts.
- **Forget**: a subject with ``--forget-n`` memories (default 10,000) among
  a tenth as many of other subjects, written through the service; the time
  of ``MemoryService.forget`` (the command, the projections erasing the
  rows, the compaction of ``projections.db``, the vector index saved anew).
  The goal is under 5 seconds; the median of ``--repeat`` runs counts.
"""

from __future__ import annotations

import gc
import random
import shutil
import time
from pathlib import Path
from typing import Callable

import msgspec

from mnemolog.eventstore import EventStore
from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings

from .bench_runs import middle
from .common import counted

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


BATCH = 100  # events a transaction
SINGLE_N = 500  # appends of one event each, in the single-event comparison (at most a tenth of the events)
MODES = ("off", "on")


class _Timed(msgspec.Struct):
    """One log's appends in a run: each transaction's wall and CPU seconds, and the seconds to read it all back."""

    wall: list[float] = msgspec.field(default_factory=list)
    cpu: list[float] = msgspec.field(default_factory=list)
    read: float = 0.0


def _side_by_side(directory: Path, events: list[c.MemoryAdded], level: str, run: int, batch_size: int = BATCH) -> dict[str, _Timed]:
    """Append ``events`` to a sealed and a plaintext log under the SQLite ``synchronous`` level ``level``,
    ``batch_size`` events a transaction, a batch to each in turn (the order switching every batch), each
    append timed; then read both back, the sealed one first in every other ``run``."""
    timed = {mode: _Timed() for mode in MODES}
    stores = {}
    try:
        for mode in MODES:
            settings = Settings({"data_dir": str(directory / mode), "encryption": mode}, env={})
            stores[mode] = EventStore.open(directory / mode, settings=settings, synchronous=level)
        gc.collect()  # what building the events left is not charged to an append
        for k, start in enumerate(range(0, len(events), batch_size)):
            batch = events[start : start + batch_size]
            for mode in MODES if k % 2 == 0 else MODES[::-1]:
                wall, cpu = time.perf_counter(), time.thread_time()
                stores[mode].append(f"memory-{start}", batch, tenant="bench")
                timed[mode].cpu.append(time.thread_time() - cpu)
                timed[mode].wall.append(time.perf_counter() - wall)
        for mode in MODES if run % 2 == 0 else MODES[::-1]:
            wall = time.perf_counter()
            count = sum(len(page) for page in stores[mode].iter_all())
            timed[mode].read = time.perf_counter() - wall
            assert count == len(events)
    finally:
        for store in stores.values():
            store.close()
    return timed


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
    runs: dict[str, list[dict[str, _Timed]]] = {level: [] for level in LEVELS}
    singles: dict[str, list[dict[str, _Timed]]] = {level: [] for level in LEVELS}
    single_count = max(1, min(SINGLE_N, len(events) // 10))
    for level in LEVELS:
        for run in range(repeat):
            status(f"sealing: sealed and plaintext appends side by side, synchronous={level}, run {run + 1} of {repeat}")
            directory = root / f"seal-{level}-{run}"
            runs[level].append(_side_by_side(directory, events, level, run))
            shutil.rmtree(directory)
            status(f"sealing: single-event appends side by side, synchronous={level}, run {run + 1} of {repeat}")
            directory = root / f"single-{level}-{run}"
            singles[level].append(_side_by_side(directory, events[:single_count], level, run, batch_size=1))
            shutil.rmtree(directory)
    count = len(events)

    def median_tx(level: str, mode: str, what: str = "wall", of: dict = runs, per: int = BATCH) -> float:
        """Seconds an event of the median transaction of ``mode`` over every run at ``level`` (``of``: the runs of
        ``per`` events a transaction; ``singles``, one)."""
        return middle(t for timed in of[level] for t in getattr(timed[mode], what)) / per

    def total(level: str, mode: str) -> float:
        """Seconds of a whole run's appends (the median run)."""
        return middle(sum(timed[mode].wall) for timed in runs[level])

    on_append, off_append = median_tx("NORMAL", "on"), median_tx("NORMAL", "off")
    on_full, off_full = median_tx("FULL", "on"), median_tx("FULL", "off")
    on_cpu, off_cpu = median_tx("NORMAL", "on", "cpu") * 1e6, median_tx("NORMAL", "off", "cpu") * 1e6
    on_read, off_read = (middle(timed[mode].read for level in LEVELS for timed in runs[level]) for mode in ("on", "off"))
    on_total, off_total = total("NORMAL", "on"), total("NORMAL", "off")
    forgets = []
    for run in range(repeat):
        status(f"sealing: forget a subject with {counted(forget_n, 'memory', 'memories', grouped=True)}")
        directory = root / f"forget-{run}"
        forgets.append(_forget_once(directory, forget_n))
        shutil.rmtree(directory)
    forget_s = middle(forgets)
    append_ratio, read_ratio, full_ratio = off_append / on_append, off_read / on_read, off_full / on_full
    single = {level: (median_tx(level, "off", of=singles, per=1), median_tx(level, "on", of=singles, per=1)) for level in LEVELS}
    single_ratio = {level: off / on for level, (off, on) in single.items()}
    lines = [
        f"crypto-shredding  (memory events of 50 subjects, {BATCH} per transaction; sealed and plaintext appends side by side,"
        f" a batch to each in turn; the median transaction of {repeat} runs)"
    ]
    lines.append(f"  {'case':<46}{'events':>10}{'µs/event':>10}{'events/s':>12}{'vs off':>9}")

    def row(case: str, per_event: float, ratio: float | None = None, events: int = count) -> str:
        return f"  {case:<46}{events:>10,}{per_event * 1e6:>10.2f}{1 / per_event:>12,.0f}{'' if ratio is None else f'{ratio:.2f}':>9}"

    lines.append(row("append, encryption off (NORMAL)", off_append))
    lines.append(row("append, encryption on (sealed, NORMAL)", on_append, append_ratio))
    lines.append(row("append, encryption off (FULL, the default)", off_full))
    lines.append(row("append, encryption on (sealed, FULL)", on_full, full_ratio))
    for level in LEVELS:
        off, on = single[level]
        lines.append(row(f"one event a transaction, off ({level})", off, events=single_count))
        lines.append(row(f"one event a transaction, sealed ({level})", on, single_ratio[level], events=single_count))
    lines.append(row("read back decoded, encryption off", off_read / count))
    lines.append(row("read back decoded, sealed (opened)", on_read / count, read_ratio))
    lines.append(f"  forget a subject with {counted(forget_n, 'memory', 'memories', grouped=True)}: {forget_s:.2f} s (the median of {counted(repeat, 'run')})")
    lines.append(f"  appending thread's CPU an event, median transaction (NORMAL): {off_cpu:.2f} µs off, {on_cpu:.2f} µs sealed ({on_cpu / off_cpu:.2f}x)")
    lines.append(
        f"  whole runs' appends (NORMAL, the median run, collections and checkpoints included): {off_total:.3f} s off,"
        f" {on_total:.3f} s sealed ({off_total / on_total:.2f}x)"
    )
    lines.append(
        f"  goals: sealed append at least 0.8x plaintext ({BATCH} a transaction: {append_ratio:.2f}x at NORMAL, where the CPU shows,"
        f" {full_ratio:.2f}x at FULL; one a transaction: {single_ratio['NORMAL']:.2f}x at NORMAL, {single_ratio['FULL']:.2f}x at FULL);"
        f" forget of 10,000 memories under 5 s ({forget_s:.2f} s)"
    )
    pairs = [
        f"seal_n={count}",
        f"append_off_eps={1 / off_append:.0f}",
        f"append_on_eps={1 / on_append:.0f}",
        f"seal_append_ratio={append_ratio:.3f}",
        f"append_off_eps_full={1 / off_full:.0f}",
        f"append_on_eps_full={1 / on_full:.0f}",
        f"seal_append_ratio_full={full_ratio:.3f}",
        f"seal_single_ratio={single_ratio['NORMAL']:.3f}",
        f"seal_single_ratio_full={single_ratio['FULL']:.3f}",
        f"seal_cpu_us_off={off_cpu:.2f}",
        f"seal_cpu_us_on={on_cpu:.2f}",
        f"seal_total_ratio={off_total / on_total:.3f}",
        f"seal_read_ratio={read_ratio:.3f}",
        f"forget_n={forget_n}",
        f"forget_s={forget_s:.2f}",
    ]
    return "\n".join(lines), pairs
