"""``mnemolog bench <name>``: the product's benchmarks, listed in one registry.

:data:`BENCHES` names every bench with ``(help, add_args, run)``:
``add_args(parser)`` adds its options, ``run(args) -> int`` runs it, prints a
readable table and ends with one line of ``key=value`` figures. A new bench
is added to the list below; nothing registers itself at import.
"""

from __future__ import annotations

import argparse
from typing import Callable, NamedTuple

from . import bench_append, bench_explorer, bench_graph, bench_ingest, bench_mcp, bench_rebuild, bench_recall, bench_streams, organize_cmds
from .common import add_command


class Bench(NamedTuple):
    help: str
    add_args: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


BENCHES: dict[str, Bench] = {
    "append": Bench(bench_append.HELP, bench_append.add_args, bench_append.run),
    "rebuild": Bench(bench_rebuild.HELP, bench_rebuild.add_args, bench_rebuild.run),
    "recall": Bench(bench_recall.HELP, bench_recall.add_args, bench_recall.run),
    "graph": Bench(bench_graph.HELP, bench_graph.add_args, bench_graph.run),
    "mcp": Bench(bench_mcp.HELP, bench_mcp.add_args, bench_mcp.run),
    "ingest": Bench(bench_ingest.HELP, bench_ingest.add_args, bench_ingest.run),
    "explorer": Bench(bench_explorer.HELP, bench_explorer.add_args, bench_explorer.run),
    "streams": Bench(bench_streams.HELP, bench_streams.add_args, bench_streams.run),
    "organize": Bench(
        "organizer: dedup throughput at 10k memories, clustering 10k, rule judge precision/recall",
        organize_cmds.add_bench_args,
        organize_cmds.run_bench,
    ),
}


def register(subparsers) -> None:
    parser = add_command(subparsers, "bench", None, help="run a benchmark (in a temporary directory)")
    benches = parser.add_subparsers(dest="bench", metavar="BENCH", required=True)
    for name, bench in sorted(BENCHES.items()):
        bench.add_args(add_command(benches, name, bench.run, help=bench.help))
