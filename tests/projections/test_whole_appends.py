"""The projections take an append whole: no commit of ``projections.db`` holds part of one.

The runner applies the log in batches of a few thousand events, each batch
with its checkpoint in one transaction, which every reader (this process's
read threads, other processes) sees at once. A command's append may be
longer than a batch (an atomic batch of thousands of memories): the batch
then runs on to the end of that append, so that no read ever shows some of
an atomic command's memories and not the others.
"""

from __future__ import annotations

import pytest

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.projections.runner import DEFAULT_BATCH
from mnemolog.projections.service import MemoryService

TENANT = "t"
COUNT = DEFAULT_BATCH + 500


def _visible_after_each_commit(monkeypatch, reader: MemoryService, writer: MemoryService) -> list[int]:
    """The tenant's memories ``reader`` sees after each commit of ``writer``'s runner."""
    seen: list[int] = []
    apply = writer.runner._apply

    def then_count(*args, **kwargs):
        done = apply(*args, **kwargs)
        seen.append(reader.graph.stats(TENANT)["memories_total"])
        return done

    monkeypatch.setattr(writer.runner, "_apply", then_count)
    return seen


@pytest.mark.parametrize("own_appends", [True, False], ids=["as-appended", "read-from-the-log"])
def test_an_atomic_batch_longer_than_a_projection_batch_is_seen_whole_or_not_at_all(tmp_path, monkeypatch, own_appends):
    data = tmp_path / "data"
    with MemoryService.open(data) as writer, MemoryService.open(data) as reader:
        if not own_appends:  # as another process's runner takes it: from the log
            monkeypatch.setattr(writer.store, "take_own_appends", lambda *args, **kwargs: None)
        seen = _visible_after_each_commit(monkeypatch, reader, writer)
        contents = [MemoryContent(memory=f"item {n} of one atomic batch") for n in range(COUNT)]
        writer.run(writer.memories.add, CommandContext(tenant=TENANT), contents)
        assert seen and set(seen) == {COUNT}
        writer.run(writer.memories.add, CommandContext(tenant=TENANT), [MemoryContent(memory="one more")])
        assert seen[-1] == COUNT + 1
