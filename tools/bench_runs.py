"""Repeated runs for the benches: each figure is the median of at least three.

On a shared machine one run measures the neighbours as much as the code; the
median of several runs, taken the same way for a figure and for the
reference beside it, is steadier than one run and honester than the fastest.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable, Iterable, TypeVar

MIN_RUNS = 3

T = TypeVar("T")


def add_runs_arg(parser: argparse.ArgumentParser, *, flag: str = "--runs", what: str = "each measurement") -> None:
    parser.add_argument(
        flag,
        dest="runs",
        type=int,
        default=MIN_RUNS,
        metavar="N",
        help=f"runs of {what}; the median counts (at least {MIN_RUNS}, default {MIN_RUNS})",
    )


def check_runs(runs: int, flag: str = "--runs") -> int:
    if runs < MIN_RUNS:
        raise ValueError(f"{flag} must be at least {MIN_RUNS} (the median of fewer runs is one neighbour's noise)")
    return runs


def middle(samples: Iterable[T], key: Callable[[T], Any] | None = None) -> T:
    """The median of ``samples`` (by ``key``): with an even count the lower of
    the two middle ones, so that the figure is one that was measured."""
    ordered = sorted(samples, key=key)
    if not ordered:
        raise ValueError("no runs to take the median of")
    return ordered[(len(ordered) - 1) // 2]


def status_line() -> Callable[[str], None]:
    """What a bench says of its progress: a line on stderr when that is a terminal, else nothing (its output
    stays the table and the figures)."""
    if sys.stderr.isatty():
        return lambda text: print(f"  {text}", file=sys.stderr, flush=True)
    return lambda text: None
