"""``mnemolog bench streams``: writes to long streams, with their folded states held and without.

A memory updated N times and an entity that N relations start from are
written to through the commands, each write validated against its stream's
state. With the states held (see ``eventstore.stream_folds``) a write reads
the events after the held version; the reference beside it, measured in the
same run on the same data, folds the whole stream for every write, as a
process without held states (or with the stream just evicted) does. A page of
the memory's history is timed the same two ways.

Each figure is the median of ``--samples`` writes; each run measures both
ways in turn, and the median of ``--runs`` runs is printed.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings
from mnemolog.eventstore.stream_folds import MIN_EVENTS, folds_of

from .bench_runs import add_runs_arg, check_runs, middle, status_line
from .common import between

HELP = "writes to a memory with N versions and an entity with N relations: held folded states vs whole-stream folds"

CTX = CommandContext(tenant="bench", actor="bench")


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=between(MIN_EVENTS, 100_000), default=3000, help="the memory's versions and the entity's relations (default 3000)")
    parser.add_argument("--samples", type=between(5, 10_000), default=40, help="writes timed per figure and run (default 40)")
    add_runs_arg(parser, what="both ways")


def _timed(samples: int, write: Callable[[], object]) -> float:
    """The median milliseconds of ``samples`` calls of ``write()``."""
    took = []
    for _ in range(samples):
        began = time.perf_counter()
        write()
        took.append(time.perf_counter() - began)
    return statistics.median(took) * 1000


def run(args: argparse.Namespace) -> int:
    from mnemolog.projections.service import MemoryService

    runs = check_runs(args.runs)
    status = status_line()
    with tempfile.TemporaryDirectory(prefix="mnemolog-bench-") as tmp:
        data = Path(tmp) / "data"
        service = MemoryService.open(data, settings=Settings({"data_dir": str(data), "synchronous": "NORMAL"}, env={}))
        try:
            status(f"writing a memory with {args.n:,} versions …")
            [memory_id] = service.run(service.memories.add, CTX, [MemoryContent(memory="the user's profile, version 1")]).memory_ids
            for i in range(2, args.n + 1):
                service.run(service.memories.update, CTX, memory_id, {"memory": f"the user's profile, version {i}"})
            status(f"writing an entity with {args.n:,} relations …")
            service.run(service.entities.upsert, CTX, "user", name="The user", entity_type="person")
            for i in range(args.n):
                service.run(service.entities.upsert, CTX, f"thing-{i}", name=f"Thing {i}")
                service.run(service.entities.set_relation, CTX, "user", f"thing-{i}", "KNOWS")
            folds = folds_of(service.store)
            version = [args.n]
            updates, weights = itertools.count(1), itertools.cycle((0.75, 0.5))  # each timed write changes something

            def wrote(result) -> None:
                if result.first_position is None:
                    raise RuntimeError("a timed write appended nothing: the figure would not be of writes")

            def update() -> None:
                wrote(service.run(service.memories.update, CTX, memory_id, {"memory": f"the user's profile, write {next(updates)}"}))
                version[0] += 1

            def relate() -> None:
                wrote(service.run(service.entities.set_relation, CTX, "user", "thing-0", "KNOWS", weight=next(weights)))

            def page() -> None:
                service.history_view("bench", memory_id, after=version[0] - 1, limit=1)

            measures = {"memory update": update, "relation weight set": relate, "history page (1 version)": page}
            results: dict[str, list[tuple[float, float]]] = {name: [] for name in measures}
            for r in range(runs):
                status(f"measuring (run {r + 1} of {runs}) …")
                for name, write in measures.items():
                    folds.min_events = MIN_EVENTS
                    write()  # the state held, as a process that wrote to it before holds it
                    held = _timed(args.samples, write)
                    if not len(folds):
                        raise RuntimeError("no folded state was held: the figure would be of whole folds")
                    folds.min_events = sys.maxsize  # nothing held: every write folds its whole stream
                    folds.drop_text()
                    whole = _timed(args.samples, write)
                    if len(folds):
                        raise RuntimeError("a folded state was held: the reference would not fold whole streams")
                    results[name].append((held, whole))
            folds.min_events = MIN_EVENTS
        finally:
            service.close()
    print(f"mnemolog bench streams: a memory with {args.n:,}+ versions, an entity with {args.n:,} relations (synchronous=NORMAL; median of {args.samples} writes, median of {runs} runs)\n")
    print(f"{'operation':28} {'held ms':>9} {'whole-stream ms':>16} {'ratio':>7}")
    figures = {}
    for name, pairs in results.items():
        held, whole = middle(pairs, key=lambda p: p[0])[0], middle(pairs, key=lambda p: p[1])[1]
        print(f"{name:28} {held:9.2f} {whole:16.2f} {held / whole:7.2f}")
        figures[name.split()[0]] = (held, whole)
    print(
        f"\nupdate_held_ms={figures['memory'][0]:.2f} update_whole_ms={figures['memory'][1]:.2f}"
        f" relation_held_ms={figures['relation'][0]:.2f} relation_whole_ms={figures['relation'][1]:.2f}"
        f" history_held_ms={figures['history'][0]:.2f} history_whole_ms={figures['history'][1]:.2f}"
    )
    return 0
