"""A client retries its request after the operator moved the data (``mnemolog export``, then ``import`` elsewhere):
it gets its first answer, and its memories are not written twice; a tenant dropped and used again included."""

from __future__ import annotations

from pathlib import Path

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.projections.service import MemoryService
from tests.in_process import run_main


def cli(data: Path, *argv: str) -> str:
    done = run_main(["--data-dir", str(data), *map(str, argv)], text=True)
    assert done.returncode == 0, (argv, done.stdout, done.stderr)
    return done.stdout


def add(svc: MemoryService, key: str, text: str, tenant: str = "acme"):
    return svc.run(svc.memories.add, CommandContext(tenant=tenant, idempotency_key=key), [MemoryContent(memory=text)])


def test_retries_after_an_export_and_import_are_answered_not_written_again(tmp_path):
    source, target = tmp_path / "source", tmp_path / "target"
    with MemoryService.open(source) as svc:
        before_drop = add(svc, "req-1", "the harbour office opens at nine")
        svc.drop_tenant(CommandContext(tenant="acme"))
        again = add(svc, "req-1", "the harbour office opens at nine")  # the same key after the drop: a new request
        assert again.memory_ids != before_drop.memory_ids and not again.replayed
        later = add(svc, "req-2", "Miso the cat likes the window")
    cli(source, "export", "--output", tmp_path / "log.jsonl", "--with-keys", tmp_path / "keys.json")
    with MemoryService.open(target) as svc:  # the target holds writes of its own: every position moves
        add(svc, "own", "a note of the target's own", tenant="globex")
    out = cli(target, "import", tmp_path / "log.jsonl", "--keys", tmp_path / "keys.json")
    assert "3 idempotency keys recorded" in out
    with MemoryService.open(target) as svc:
        head = svc.store.last_position()
        for key, text, first in (("req-1", "the harbour office opens at nine", again), ("req-2", "Miso the cat likes the window", later)):
            retried = add(svc, key, text)
            assert retried.replayed and retried.memory_ids == first.memory_ids
        assert svc.store.last_position() == head
        added = svc.store.read_all(tenant="acme", types=["MemoryAdded"])
        assert [e.event.memory_id for e in added] == list(before_drop.memory_ids + again.memory_ids + later.memory_ids)
        assert svc.get("acme", later.memory_ids[0]).memory == "Miso the cat likes the window"
