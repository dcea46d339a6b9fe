"""``mnemolog bench <name>``: the product's benchmarks, one registry.

:data:`BENCHES` maps a bench's name to ``(help, add_args, run)``:
``add_args(parser)`` adds its options, ``run(args) -> int`` runs it. A module
adds its bench with :func:`add_bench` (at import, before the CLI registers
commands), or this module lists it below.
"""

from __future__ import annotations

import argparse
from typing import Callable

from . import bench_append
from . import bench_rebuild
from . import bench_recall
from .common import add_command

AddArgs = Callable[[argparse.ArgumentParser], None]
Run = Callable[[argparse.Namespace], int]

BENCHES: dict[str, tuple[str, AddArgs, Run]] = {}


def add_bench(name: str, help: str, add_args: AddArgs, run: Run) -> None:
    if name in BENCHES and BENCHES[name] != (help, add_args, run):
        raise ValueError(f"bench {name!r} is registered twice")
    BENCHES[name] = (help, add_args, run)


add_bench("append", bench_append.HELP, bench_append.add_args, bench_append.run)
add_bench("rebuild", bench_rebuild.HELP, bench_rebuild.add_args, bench_rebuild.run)
add_bench("recall", bench_recall.HELP, bench_recall.add_args, bench_recall.run)


def register(subparsers) -> None:
    parser = add_command(subparsers, "bench", None, help="run a benchmark (in a temporary directory)")
    benches = parser.add_subparsers(dest="bench", metavar="BENCH", required=True)
    for name, (help_text, add_args, run) in sorted(BENCHES.items()):
        add_args(add_command(benches, name, run, help=help_text))
