"""A memory written by another process while a forget is under way.

The forget reads the subject's memories from the projections, then appends
its event. A writer in another process that still held the subject's key
(it looked at the key store just before the forget retired the key) can
append a memory in between and project its plaintext. The forget names that
memory in a second event, so nothing of it stays in any file, every read
shows it erased, and its history names the forget; a memory sealed with the
subject's new key was written after the forget began, and stays.
"""

from __future__ import annotations

import threading
from pathlib import Path

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.sealing import ERASED_TEXT
from mnemolog.projections.service import MemoryService

TENANT = "t"
SECRET = "Philomena Kastellorizo"


def _between_facts_and_forget(monkeypatch, forgetter: MemoryService, write) -> None:
    """Run ``write()`` once, right after the forget has read the subject's memories from the projections."""
    facts = forgetter.subjects.facts
    read = facts.subject_memories

    def then_write(tenant: str, subject: str) -> list[str]:
        found = read(tenant, subject)
        write()
        return found

    monkeypatch.setattr(facts, "subject_memories", then_write)


def _files_hold(data: Path, text: str) -> list[str]:
    needles = [text.encode("utf-8"), text.lower().encode("utf-8"), "kastellorizo".encode("utf-8")]
    return [p.name for p in data.rglob("*") if p.is_file() and any(n in p.read_bytes() for n in needles)]


def test_a_memory_sealed_with_the_retired_key_meanwhile_is_forgotten_too(tmp_path, monkeypatch):
    """The writer's transaction on the log has found its key live; then the forget retires the key and reads
    the subject's memories, before the writer commits and projects its memory's plaintext."""
    data = tmp_path / "data"
    ctx = CommandContext(tenant=TENANT, actor="privacy-officer", idempotency_key="erasure-7")
    with MemoryService.open(data) as other, MemoryService.open(data) as forgetter:
        [first] = other.run(other.memories.add, CommandContext(tenant=TENANT), [MemoryContent(memory="an early note", subject="u-9")]).memory_ids
        facts_read, committed = threading.Event(), threading.Event()
        results: list = []

        def forget() -> None:
            try:
                results.append(forgetter.forget(ctx, "u-9", reason="erasure request 7"))
            except BaseException as error:  # reported below
                results.append(error)
                facts_read.set()

        def wait_for_the_writer(tenant: str, subject: str, read=forgetter.subjects.facts.subject_memories) -> list[str]:
            found = read(tenant, subject)
            facts_read.set()
            assert committed.wait(30)
            return found

        monkeypatch.setattr(forgetter.subjects.facts, "subject_memories", wait_for_the_writer)
        keys = other.store.sealer.keys
        check = keys.require_live
        forgetting = threading.Thread(target=forget)

        def checked_then_forget_begins(mark, key_ids) -> None:
            check(mark, key_ids)  # live: this append goes on
            monkeypatch.setattr(keys, "require_live", check)
            forgetting.start()
            assert facts_read.wait(30)

        monkeypatch.setattr(keys, "require_live", checked_then_forget_begins)
        late = list(other.run(other.memories.add, CommandContext(tenant=TENANT), [MemoryContent(memory=f"{SECRET} lives on Kastellorizo", subject="u-9")]).memory_ids)
        committed.set()
        forgetting.join(30)
        monkeypatch.undo()
        [result] = results
        assert not isinstance(result, BaseException), result
        assert result.data == {"subject": "u-9", "keys_destroyed": 1, "memories_erased": 2, "plaintext_positions": []}
        forgets = forgetter.store.read_all(types=["SubjectForgotten"])
        assert [f.event.memory_ids for f in forgets] == [(first,), (late[0],)]
        [withdrawn] = forgetter.store.read_all(after=forgets[-1].position, until=result.last_position)  # it leaves working memory too
        assert withdrawn.type == "WorkingMemoryWithdrawn" and withdrawn.event.memory_ids == (late[0],)

        other.sync()
        for svc in (forgetter, other):
            view = svc.get(TENANT, late[0])
            assert view.erased and view.memory == ERASED_TEXT
            assert [f["reason"] for f in svc.forgotten(TENANT, late[0])] == ["erasure request 7"]
        assert forgetter.forget(ctx, "u-9", reason="erasure request 7").data == result.data  # a retry answers as the first
        forgetter.scrub()
        assert _files_hold(data, SECRET) == []
        forgetter.runner.rebuild()
        assert forgetter.get(TENANT, late[0]).erased


def test_a_memory_sealed_with_the_new_key_meanwhile_stays(tmp_path, monkeypatch):
    data = tmp_path / "data"
    ctx = CommandContext(tenant=TENANT, actor="privacy-officer")
    with MemoryService.open(data) as other, MemoryService.open(data) as forgetter:
        other.run(other.memories.add, CommandContext(tenant=TENANT), [MemoryContent(memory="an early note", subject="u-9")])
        later: list[str] = []
        # The other process looks at the key store as it appends: the key is retired, so it seals with a new one.
        _between_facts_and_forget(
            monkeypatch, forgetter,
            lambda: later.extend(other.run(other.memories.add, CommandContext(tenant=TENANT), [MemoryContent(memory="written as the forget ran", subject="u-9")]).memory_ids),
        )
        result = forgetter.forget(ctx, "u-9", reason="erasure request 8")
        assert result.data["memories_erased"] == 1 and len(forgetter.store.read_all(types=["SubjectForgotten"])) == 1
        other.sync()
        assert forgetter.get(TENANT, later[0]).memory == "written as the forget ran"
        forgetter.runner.rebuild()
        assert forgetter.get(TENANT, later[0]).memory == "written as the forget ran"


def test_a_write_sealed_before_the_retirement_that_reaches_the_log_after_the_forget_is_sealed_again(tmp_path, monkeypatch):
    """Sealed with the old key, then held up until the forget had appended its event and destroyed the key:
    the append finds the key retired in its transaction and seals its events again, with the new key."""
    data = tmp_path / "data"
    with MemoryService.open(data) as other, MemoryService.open(data) as forgetter:
        other.run(other.memories.add, CommandContext(tenant=TENANT), [MemoryContent(memory="an early note", subject="u-9")])
        commit = other.store._commit

        def forget_first(*args, **kwargs):
            monkeypatch.undo()  # once
            forgetter.forget(CommandContext(tenant=TENANT, actor="privacy-officer"), "u-9", reason="erasure request 9")
            return commit(*args, **kwargs)

        monkeypatch.setattr(other.store, "_commit", forget_first)
        text = f"{SECRET} moved to Rhodes"
        written = other.run(other.memories.add, CommandContext(tenant=TENANT), [MemoryContent(memory=text, subject="u-9")])
        [late] = written.memory_ids
        assert written.first_position > forgetter.store.read_all(types=["SubjectForgotten"])[-1].position
        for svc in (other, forgetter):
            svc.sync()
            assert svc.get(TENANT, late).memory == text and svc.store.read_all(after=written.first_position - 1)[0].event.content.memory == text
        other.runner.rebuild()
        assert other.get(TENANT, late).memory == text


def test_a_memory_of_the_subject_written_unsealed_meanwhile_is_forgotten_too(tmp_path, monkeypatch):
    """A process with sealing off (``MNEMOLOG_ENCRYPTION=off``) wrote a memory of the subject after the forget
    had read the subject's memories and before its event: the memory is in the log before the forget, which did
    not name it, so it stayed readable in every read and projection, its plaintext in ``projections.db``. No key
    says it came after the forget began: the forget names it in a second event, and names its plaintext events."""
    from mnemolog.eventstore.settings import Settings

    data = tmp_path / "data"
    ctx = CommandContext(tenant=TENANT, actor="privacy-officer")
    with MemoryService.open(data, settings=Settings({"encryption": "off"}, env={})) as plain, MemoryService.open(data) as forgetter:
        [first] = forgetter.run(forgetter.memories.add, CommandContext(tenant=TENANT), [MemoryContent(memory="an early note", subject="u-9")]).memory_ids
        late: list[str] = []
        _between_facts_and_forget(
            monkeypatch, forgetter,
            lambda: late.extend(plain.run(plain.memories.add, CommandContext(tenant=TENANT), [MemoryContent(memory=f"{SECRET} lives on Kastellorizo", subject="u-9")]).memory_ids),
        )
        result = forgetter.forget(ctx, "u-9", reason="erasure request 10")
        monkeypatch.undo()
        written = [r.position for r in forgetter.store.read_all(types=["MemoryAdded"]) if r.event.memory_id == late[0]]
        assert result.data["memories_erased"] == 2 and result.data["plaintext_positions"] == written, result.data
        assert [f.event.memory_ids for f in forgetter.store.read_all(types=["SubjectForgotten"])] == [(first,), (late[0],)]
        plain.sync()
        for svc in (forgetter, plain):
            assert svc.get(TENANT, late[0]).erased
        forgetter.scrub()
        assert {name.split("-")[0] for name in _files_hold(data, SECRET)} == {"events.db"}  # the log keeps the unsealed event, and the answer says so
        forgetter.runner.rebuild()
        assert forgetter.get(TENANT, late[0]).erased


def test_a_memory_written_between_the_commands_catch_up_and_the_retirement_is_forgotten(tmp_path, monkeypatch):
    """The command's catch-up ran before another process appended a memory sealed with the live key; then the
    forget retired the key, before the writer had projected its memory. The projections had not seen it, and
    the log up to the retirement was taken for read: the forget named it in neither event, and it stayed
    readable."""
    data = tmp_path / "data"
    ctx = CommandContext(tenant=TENANT, actor="privacy-officer")
    with MemoryService.open(data) as other, MemoryService.open(data) as forgetter:
        [first] = forgetter.run(forgetter.memories.add, CommandContext(tenant=TENANT), [MemoryContent(memory="an early note", subject="u-9")]).memory_ids
        keys = forgetter.subjects.keys
        retire = keys.retire
        late: list[str] = []

        def written_then_retired(tenant: str, subject: str | None) -> list[str]:
            monkeypatch.setattr(keys, "retire", retire)
            with monkeypatch.context() as held:  # the writer's own catch-up has not run yet when the key is retired
                held.setattr(other.runner, "catch_up", lambda **_: 0)
                late.extend(other.run(other.memories.add, CommandContext(tenant=TENANT), [MemoryContent(memory=f"{SECRET} lives on Kastellorizo", subject="u-9")]).memory_ids)
            return retire(tenant, subject)

        monkeypatch.setattr(keys, "retire", written_then_retired)
        result = forgetter.forget(ctx, "u-9", reason="erasure request 11")
        assert result.data["memories_erased"] == 2, result.data
        assert sorted(m for f in forgetter.store.read_all(types=["SubjectForgotten"]) for m in f.event.memory_ids) == sorted([first, *late])
        other.sync()
        for svc in (forgetter, other):
            assert svc.get(TENANT, late[0]).erased
        forgetter.scrub()
        assert _files_hold(data, SECRET) == []


def test_a_forget_killed_before_naming_the_memories_written_meanwhile_is_finished_by_the_next_open(tmp_path, monkeypatch):
    """Killed between its event and the second one naming the memories another process sealed meanwhile with the
    retired key: the next open destroyed the key but named nothing, so that memory's plaintext stayed in the
    projections (``get`` showed it, unlike a rebuild) until a rebuild."""
    from mnemolog.eventstore.commands import subjects

    data = tmp_path / "data"
    ctx = CommandContext(tenant=TENANT, actor="privacy-officer")
    with MemoryService.open(data) as other, MemoryService.open(data) as forgetter:
        [first] = other.run(other.memories.add, CommandContext(tenant=TENANT), [MemoryContent(memory="an early note", subject="u-9")]).memory_ids
        late: list[str] = []
        keys = other.store.sealer.keys
        live = dict(keys._live)  # the other process still holds the key it looked up before the retirement

        def write_with_the_old_key() -> None:
            monkeypatch.setattr(keys, "_live", live)
            monkeypatch.setattr(keys, "require_live", lambda mark, key_ids: None)
            late.extend(other.run(other.memories.add, CommandContext(tenant=TENANT), [MemoryContent(memory=f"{SECRET} lives on Kastellorizo", subject="u-9")]).memory_ids)

        _between_facts_and_forget(monkeypatch, forgetter, write_with_the_old_key)

        def killed(*args, **kwargs):
            raise SystemExit("killed")

        monkeypatch.setattr(subjects, "sealed_meanwhile", killed)
        try:
            forgetter.forget(ctx, "u-9", reason="erasure request 9")
        except SystemExit:
            pass
        monkeypatch.undo()
        assert [f.event.memory_ids for f in forgetter.store.read_all(types=["SubjectForgotten"])] == [(first,)]
        other.sync()
        assert other.get(TENANT, late[0]).memory.startswith(SECRET)  # the key still there: readable, and projected
    with MemoryService.open(data) as svc:  # the next open finishes the forget: names the late memory, then destroys the key
        forgets = svc.store.read_all(types=["SubjectForgotten"])
        assert [f.event.memory_ids for f in forgets] == [(first,), (late[0],)]
        assert forgets[1].metadata.actor == "privacy-officer" and forgets[1].event.reason == "erasure request 9"
        view = svc.get(TENANT, late[0])
        assert view.erased and view.memory == ERASED_TEXT
        live_rows = {name: svc.read_conn().execute(f"SELECT count(*) FROM {name}").fetchone()[0] for name in ("fts_docs", "vec_docs", "graph_memories")}
        svc.scrub()
        assert _files_hold(data, SECRET) == []
        svc.runner.rebuild()
        assert {name: svc.read_conn().execute(f"SELECT count(*) FROM {name}").fetchone()[0] for name in live_rows} == live_rows
        assert svc.get(TENANT, late[0]).erased
