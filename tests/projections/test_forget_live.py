"""A live read of the log (the API's tail, ``mnemolog log --follow``) reads and opens events ahead of a slow
reader: once a forget commits, in this process or another, none of what it erased leaves with its text."""

from __future__ import annotations

import pytest

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.erased import LIVE_PART, ErasedMemories, live_events
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.service import MemoryService

CTX = CommandContext(tenant="t", actor="privacy-officer")
SECRET = "Quillonbury"


@pytest.mark.parametrize("encryption", ["on", "off"])
async def test_events_read_ahead_are_sent_erased_once_a_forget_commits(tmp_path, encryption):
    settings = Settings({"encryption": encryption}, env={})
    with MemoryService.open(tmp_path, settings=settings) as svc:
        count = 3 * LIVE_PART
        svc.run(svc.memories.add, CTX, [MemoryContent(memory=f"{SECRET} note {i}", subject="u-9") for i in range(count)])
        svc.run(svc.memories.add, CTX, [MemoryContent(memory="the harbour opens at six")])
        live = live_events(svc.store, 0, ErasedMemories.of(svc.store, "t"), tenant="t")
        first = await anext(live)  # the subscription read every event at once; a part of them is handed on
        assert len(first) == LIVE_PART and all(SECRET in r.event.content.memory for r in first)
        with MemoryService.open(tmp_path, settings=settings) as other:  # another process's forget: no in-process signal
            forgot = other.run(other.forget, CTX, "u-9", reason="request 3").positions[-1]
        rest = []
        while not rest or rest[-1].position < forgot:
            rest += await anext(live)
        await live.aclose()
    memories = [r for r in rest if r.type == "MemoryAdded"]
    assert len(memories) == count + 1 - LIVE_PART
    assert [r.event.content.memory for r in memories if SECRET in r.event.content.memory] == []
    assert memories[-1].event.content.memory == "the harbour opens at six"  # another subject's stays whole


def test_mnemolog_log_shows_erased_what_a_forget_erased_while_it_printed(tmp_path, monkeypatch, capsys):
    """``mnemolog log`` read the forgets once, before its first line: a forget recorded while it printed (into a
    slow pipe) left every later line of the subject in plaintext."""
    from mnemolog.tools import log_cmds
    from mnemolog.tools.cli import main

    data = tmp_path / "data"
    with MemoryService.open(data) as svc:
        svc.run(svc.memories.add, CTX, [MemoryContent(memory=f"{SECRET} note {i}", subject="u-9") for i in range(3 * LIVE_PART)])
    printed = []

    def slow_reader(line) -> None:
        printed.append(line)
        if len(printed) == 1:  # the forget commits in another process while the log is being printed
            with MemoryService.open(data) as other:
                other.run(other.forget, CTX, "u-9", reason="request 4")

    monkeypatch.setattr(log_cmds, "print_json_line", slow_reader)
    assert main(["--data-dir", str(data), "--json", "log", "--tenant", "t", "--type", "MemoryAdded"]) == 0
    texts = [line["payload"]["content"]["memory"] for line in printed]
    assert len(texts) == 3 * LIVE_PART and all(SECRET in text for text in texts[:LIVE_PART])  # the part printed before
    assert [text for text in texts[LIVE_PART:] if SECRET in text] == []
