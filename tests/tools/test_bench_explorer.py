"""``mnemolog bench explorer``: the explorer page's calls against a real server, ending with its figures."""

from __future__ import annotations

import subprocess
import sys

CALLS = ["whoami", "timeline", "recall", "neighborhood", "entity", "history", "correlation", "recall_as_of", "neighborhood_as_of", "history_as_of"]


def test_bench_explorer_measures_every_call_of_the_page(tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "mnemolog.tools.cli", "bench", "explorer", "--memories", "3000", "--queries", "5", "--tmp-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.strip().splitlines()
    figures = {k: float(v) for k, v in (pair.split("=") for pair in lines[-1].split())}
    assert list(figures) == ["memories", *(f"{c}_p50_ms" for c in CALLS), "slider_ms", "worst_p50_ms"]
    assert figures["memories"] == 3000
    p50s = [figures[f"{c}_p50_ms"] for c in CALLS]
    assert all(p > 0 for p in p50s) and figures["worst_p50_ms"] == max(p50s)
    assert figures["slider_ms"] == max(figures["recall_as_of_p50_ms"], figures["neighborhood_as_of_p50_ms"], figures["history_as_of_p50_ms"])
    assert [line.split()[0] for line in lines[2:-1]] == CALLS  # the table: one row per call
    assert list(tmp_path.iterdir()) == []  # the store is gone
