"""The CLI's counts read in the number they count: the operator summaries and the benches' headlines."""

from __future__ import annotations

from mnemolog.tools.common import counted


def test_one_is_singular_and_every_other_count_plural():
    assert [counted(n, "event") for n in (0, 1, 2)] == ["0 events", "1 event", "2 events"]
    assert [counted(n, "memory", "memories") for n in (1, 1000)] == ["1 memory", "1000 memories"]


def test_a_grouped_count_separates_thousands_and_still_reads_singular_for_one():
    assert counted(100_000, "memory", "memories", grouped=True) == "100,000 memories"
    assert counted(1, "memory", "memories", grouped=True) == "1 memory"
