"""Commands of two services on one data directory, as two processes run them.

A command reads the streams it touches from the log, decides, and appends
expecting them unchanged; the writer lock that keeps that true is the
process's own. When another process appends to one of those streams in
between, the append is refused: the command is then decided again on the
log as it is now. A caller that named no version gets the command applied
after the other one; a caller that named one (``If-Match``) gets the conflict
with the current version; a second revert of one correlation is the no-op it
is when run in turn.
"""

from __future__ import annotations

import pytest

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import Conflict, MemoryContent
from mnemolog.projections.service import MemoryService

TENANT = "t"


def _other_writes_first(monkeypatch, service: MemoryService, write) -> None:
    """Run ``write()`` (another process's command) once, when ``service`` is about to append what it decided."""
    append = service.store.append_batch
    pending = [write]

    def then_append(*args, **kwargs):
        while pending:
            pending.pop()()
        return append(*args, **kwargs)

    monkeypatch.setattr(service.store, "append_batch", then_append)


@pytest.fixture
def two(tmp_path):
    data = tmp_path / "data"
    with MemoryService.open(data) as first, MemoryService.open(data) as second:
        yield first, second


def _add(service: MemoryService, text: str) -> str:
    [memory_id] = service.run(service.memories.add, CommandContext(tenant=TENANT), [MemoryContent(memory=text)]).memory_ids
    return memory_id


def test_an_update_naming_no_version_is_applied_after_another_process_update(two, monkeypatch):
    first, second = two
    memory_id = _add(first, "the meeting is on Monday")
    _other_writes_first(monkeypatch, second, lambda: first.run(first.memories.update, CommandContext(tenant=TENANT), memory_id, {"memory": "the meeting is on Tuesday"}))
    result = second.run(second.memories.update, CommandContext(tenant=TENANT), memory_id, {"memory": "the meeting is on Wednesday"})
    assert result.positions
    memory = second.graph.memory(TENANT, memory_id)
    assert (memory.version, memory.memory) == (3, "the meeting is on Wednesday")


def test_an_update_naming_the_version_another_process_changed_is_a_conflict_with_the_current_one(two, monkeypatch):
    first, second = two
    memory_id = _add(first, "the meeting is on Monday")
    _other_writes_first(monkeypatch, second, lambda: first.run(first.memories.update, CommandContext(tenant=TENANT), memory_id, {"memory": "the meeting is on Tuesday"}))
    with pytest.raises(Conflict) as refused:
        second.run(second.memories.update, CommandContext(tenant=TENANT), memory_id, {"memory": "the meeting is on Wednesday"}, expected_version=1)
    assert refused.value.current_version == 2
    assert second.graph.memory(TENANT, memory_id).memory == "the meeting is on Tuesday"


def test_a_revert_racing_the_same_revert_in_another_process_is_a_no_op(two, monkeypatch):
    first, second = two
    added = first.run(first.memories.add, CommandContext(tenant=TENANT), [MemoryContent(memory="a note to take back")])
    _other_writes_first(monkeypatch, second, lambda: first.run(first.reverts.revert, CommandContext(tenant=TENANT), added.correlation_id))
    result = second.run(second.reverts.revert, CommandContext(tenant=TENANT), added.correlation_id)
    assert (list(result.positions), result.data.get("already_reverted")) == ([], True)


def test_an_update_that_loses_the_race_again_and_again_lands_after_growing_pauses(two, monkeypatch):
    """Another process writes the memory before each of this one's first eight appends: the update naming no version
    lands on the ninth decision, each after a longer (jittered) pause, and every other process's update stays in the log."""
    from mnemolog.projections import service as service_module

    first, second = two
    memory_id = _add(first, "draft 0")
    rivals = 8
    append, left = second.store.append_batch, list(range(1, rivals + 1))

    def rival_then_append(*args, **kwargs):
        if left:
            first.run(first.memories.update, CommandContext(tenant=TENANT), memory_id, {"memory": f"draft {left.pop(0)}"})
        return append(*args, **kwargs)

    pauses: list[float] = []
    monkeypatch.setattr(second.store, "append_batch", rival_then_append)
    monkeypatch.setattr(service_module.random, "uniform", lambda low, high: pauses.append(high) or 0.0)
    second.run(second.memories.update, CommandContext(tenant=TENANT), memory_id, {"memory": "the final plan"})
    assert pauses == [service_module.RETRY_PAUSE_S * 2**n for n in range(rivals)]
    memory = second.graph.memory(TENANT, memory_id)
    assert (memory.version, memory.memory) == (rivals + 2, "the final plan")
    history = [version["memory"] for version in second.history(TENANT, memory_id)]
    assert history == ["draft 0", *(f"draft {n}" for n in range(1, rivals + 1)), "the final plan"]
