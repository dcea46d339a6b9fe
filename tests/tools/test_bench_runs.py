"""The benches' figure of several runs: the median run, never the fastest."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemolog.tools.bench_runs import MIN_RUNS, check_runs, middle


def test_the_middle_run_counts_not_the_fastest():
    assert middle([3.0, 1.0, 2.0]) == 2.0
    runs = [{"s": 5.0, "n": "a"}, {"s": 1.0, "n": "b"}, {"s": 9.0, "n": "c"}]
    assert middle(runs, key=lambda r: r["s"])["n"] == "a"
    assert middle([4.0, 1.0, 3.0, 2.0]) == 2.0  # even count: the lower middle, a run that happened


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=30))
def test_the_middle_is_a_measured_run_with_as_many_above_as_below(samples):
    chosen = middle(samples)
    assert chosen in samples
    below = sum(1 for s in samples if s < chosen)
    above = sum(1 for s in samples if s > chosen)
    assert below <= len(samples) // 2 and above <= len(samples) // 2


def test_fewer_than_three_runs_are_refused():
    assert check_runs(MIN_RUNS) == 3
    with pytest.raises(ValueError, match="at least 3"):
        check_runs(2)
    with pytest.raises(ValueError):
        middle([])
