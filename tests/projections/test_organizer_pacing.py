"""The organizer beside ingest: it applies decisions a short slice of the writer at a time,
and its background passes rest after slices in which others wrote."""

from __future__ import annotations

import asyncio
import threading

import pytest

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import SettingError, Settings
from mnemolog.projections.policies import organizer as organizer_module
from mnemolog.projections.policies.organizer import Organizer
from mnemolog.projections.policies.pacing import Pacer

TENANT = "t1"
DUPLICATES = [
    ("Alice lives in Berlin.", "alice lives in  berlin"),
    ("Bob plays chess on Sundays.", "bob plays chess on sundays"),
    ("Carol drinks green tea every morning.", "carol drinks green tea every morning!"),
    ("Dave repairs old bicycles in his garage.", "DAVE REPAIRS OLD BICYCLES IN HIS GARAGE"),
    ("Erin studies Japanese on weekday evenings.", "erin studies japanese on weekday evenings"),
]


@pytest.fixture
def settings() -> Settings:
    return Settings({"organizer_cluster_interval_s": 0.0}, env={})


def add(svc, *texts: str) -> list[str]:
    return list(svc.run(svc.memories.add, CommandContext(tenant=TENANT), [MemoryContent(memory=t) for t in texts]).memory_ids)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# -- the pacer ------------------------------------------------------------------------------------


def test_the_pacer_rests_only_after_a_slice_in_which_others_wrote():
    clock, wrote = FakeClock(), [False]
    pacer = Pacer(0.25, lambda: wrote[0], slice_s=0.02, clock=clock)
    clock.now += 0.01
    assert pacer.due() == 0  # within the slice: not even asked
    clock.now += 0.03
    assert pacer.due() == 0  # a slice passed, but nobody else wrote
    wrote[0] = True
    clock.now += 0.04
    assert pacer.due() == pytest.approx(0.04 * 3)  # work 1/4 of the time: rest three times the slice
    assert pacer.due() == 0  # the slice starts again
    clock.now += 10.0
    assert pacer.due() == 1.0  # one rest is bounded
    assert pacer.rested == pytest.approx(0.12 + 1.0)


def test_idle_time_before_a_pass_is_not_counted_as_work():
    clock = FakeClock()
    pacer = Pacer(0.25, lambda: True, slice_s=0.02, clock=clock)
    clock.now += 3600  # the organizer waited an hour for writes
    pacer.restart()
    clock.now += 0.04
    assert pacer.due() == pytest.approx(0.12)


def test_a_pacer_with_the_whole_share_never_rests_and_a_bad_share_is_refused():
    clock = FakeClock()
    pacer = Pacer(1.0, lambda: True, slice_s=0.0, clock=clock)
    clock.now += 5
    assert pacer.due() == 0
    for share in (0.0, -0.5, 1.5):
        with pytest.raises(ValueError):
            Pacer(share, lambda: True)


def test_the_organizer_tells_its_own_writes_from_others(svc, settings):
    add(svc, *DUPLICATES[0])
    organizer = Organizer(svc, settings)
    assert organizer.run_once()["applied"] == 1
    organizer._others_wrote()  # what came before this point is seen
    assert organizer._others_wrote() is False
    add(svc, "Frank collects stamps from Iceland")
    assert organizer._others_wrote() is True
    assert organizer._others_wrote() is False
    assert organizer.pacer().share == 0.25
    assert Organizer(svc, settings.with_overrides(organizer_busy_share=1.0)).pacer() is None
    for bad in (0, -1, 1.5):
        with pytest.raises(SettingError, match="MNEMOLOG_ORGANIZER_BUSY_SHARE"):
            Organizer(svc, settings.with_overrides(organizer_busy_share=bad))


# -- passes beside other writes --------------------------------------------------------------------


def test_a_write_waits_for_one_slice_of_a_pass_not_for_all_its_decisions(svc, settings, monkeypatch):
    """An add submitted while the pass applies its first decision is appended before the later ones."""
    monkeypatch.setattr(organizer_module, "APPLY_SLICE_S", 0.0)  # a slice of one decision
    for pair in DUPLICATES:
        add(svc, *pair)
    organizer = Organizer(svc, settings)
    applying = organizer.apply
    submitted: list = []

    def apply(planned, correlation_id):
        outcome = applying(planned, correlation_id)
        if not submitted:  # another writer arrives while the pass holds the writer
            done = threading.Event()
            submitted.append(done)
            svc.writer.submit(lambda: (add(svc, "Grace paints lighthouses at dawn"), done.set()))
        return outcome

    monkeypatch.setattr(organizer, "apply", apply)

    async def pass_on_the_writer_thread():
        return await organizer.arun_once(write_executor=svc.writer)

    report = asyncio.run(pass_on_the_writer_thread())
    assert report["applied"] == len(DUPLICATES)
    assert submitted[0].wait(10)
    merges = [r.position for r in svc.store.read_all(tenant=TENANT, types=["MemoriesMerged"])]
    [other] = [r.position for r in svc.store.read_all(tenant=TENANT, types=["MemoryAdded"]) if r.event.content.memory.startswith("Grace")]
    assert len(merges) == len(DUPLICATES)
    assert merges[0] < other < merges[-1]


def test_a_paced_pass_rests_while_others_write_and_decides_the_same(svc, settings):
    for pair in DUPLICATES:
        add(svc, *pair)
    organizer = Organizer(svc, settings)
    asked = []

    def others_wrote() -> bool:
        asked.append(1)
        return True

    pacer = Pacer(0.5, others_wrote, slice_s=0.0)
    report = asyncio.run(organizer.arun_once(inline=True, pacer=pacer))
    assert report["applied"] == len(DUPLICATES)
    assert asked and pacer.rested > 0
    merged = {tuple(sorted(p["texts"].values())) for p in report["planned"]}
    assert merged == {tuple(sorted(pair)) for pair in DUPLICATES}
