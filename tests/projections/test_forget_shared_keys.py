"""Forgetting a subject while another process seals and reads with the same key store.

Two services on one data directory, each with its own key store connection
and caches, as two ``serve`` workers (or two servers on one PostgreSQL log
sharing ``MNEMOLOG_KEY_STORE``) are. One forgets a subject; the other, whose
cache still held the subject's key, must seal the subject's next memory with
a fresh key (a write answered after the forget is kept, as in one process)
and must read the forgotten memories as erased, before its own follower has
read the forget.
"""

from __future__ import annotations

import pytest

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.service import MemoryService

CTX = CommandContext(tenant="t", actor="test")


@pytest.fixture
def pair(tmp_path):
    settings = Settings({"synchronous": "NORMAL"}, env={})
    with MemoryService.open(tmp_path, settings=settings) as one, MemoryService.open(tmp_path, settings=settings) as other:
        assert one.store.sealer.enabled and other.store.sealer.enabled
        yield one, other


def texts(svc: MemoryService) -> list[tuple[str, bool]]:
    return [(r.event.content.memory, r.event.content.erased) for r in svc.store.read_all(types=["MemoryAdded"])]


def test_a_memory_written_after_another_process_forgot_its_subject_is_kept(pair):
    one, other = pair
    one.run(one.memories.add, CTX, [MemoryContent(memory="Ada lives in Lisbon", subject="u-42")])  # one caches u-42's key
    other.sync()
    assert other.run(other.forget, CTX, "u-42", reason="asked").data["keys_destroyed"] == 1
    one.run(one.memories.add, CTX, [MemoryContent(memory="Ada now lives in Porto", subject="u-42")])  # after the forget
    for svc in (one, other):
        assert texts(svc) == [("[erased: subject forgotten]", True), ("Ada now lives in Porto", False)]


def test_a_forgotten_memory_reads_erased_in_the_other_process_at_once(pair):
    one, other = pair
    one.run(one.memories.add, CTX, [MemoryContent(memory="Ada lives in Lisbon", subject="u-42")])
    assert texts(one) == [("Ada lives in Lisbon", False)]  # its key now cached by one
    other.sync()
    other.run(other.forget, CTX, "u-42", reason="asked")
    assert texts(one) == [("[erased: subject forgotten]", True)]
