"""Dropping a tenant: never without a backup that exists, and answered alike for unknown and dropped tenants."""

from __future__ import annotations

import io
import sys

import pytest

from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent, NotFound
from mnemolog.eventstore.settings import Settings, SettingError
from mnemolog.eventstore.store import StreamAppend
from mnemolog.projections.service import MemoryService
from mnemolog.tools import cli


def ctx(tenant: str) -> CommandContext:
    return CommandContext(tenant=tenant)


def add(svc, text: str, tenant: str) -> None:
    svc.run(svc.memories.add, ctx(tenant), [MemoryContent(memory=text)])


def backups(data):
    return sorted(p.name for p in (data / "backups").glob("*.jsonl"))


def drops(svc):
    return [r.event for r in svc.store.read_all(types=["TenantDropped"])]


@pytest.mark.parametrize("keep", [0, -1])
def test_a_keep_below_one_is_refused_before_anything_is_written(tmp_path, keep):
    data = tmp_path / "data"
    with MemoryService.open(data, settings=Settings({"backups_keep": 3})) as svc:
        for tenant in ("a", "b"):
            add(svc, f"{tenant}'s memory", tenant)
        svc.drop_tenant(ctx("a"))
        kept, head = backups(data), svc.store.last_position()
    with MemoryService.open(data, settings=Settings({"backups_keep": keep})) as svc:
        with pytest.raises(SettingError, match="MNEMOLOG_BACKUPS_KEEP: expected a whole number at least 1"):
            svc.drop_tenant(ctx("b"))
        assert svc.store.last_position() == head and backups(data) == kept  # no drop, no file removed


def test_keep_one_keeps_exactly_the_backup_each_tenants_last_drop_recorded(tmp_path):
    data = tmp_path / "data"
    with MemoryService.open(data, settings=Settings({"backups_keep": 1})) as svc:
        recorded = {}
        for turn in range(2):
            for tenant in ("a", "b", "c"):
                add(svc, f"{tenant}'s memory {turn}", tenant)
                svc.drop_tenant(ctx(tenant))
                recorded[tenant] = drops(svc)[-1].backup.rsplit("/", 1)[-1]
                # Every drop's backup existed when it was recorded; each tenant's last one still does.
                assert backups(data) == sorted(recorded.values())


def test_a_tenants_drops_never_remove_another_tenants_backup(tmp_path):
    """The last backups of every tenant together were kept: a tenant's admin key, dropping its own tenant
    again and again (one write between drops), removed the backup of every other tenant's drop."""
    data = tmp_path / "data"
    with MemoryService.open(data, settings=Settings({"backups_keep": 2})) as svc:
        add(svc, "the departed tenant's memory", "a-b")  # its label ends as b's does: "-b"
        svc.drop_tenant(ctx("a-b"))
        kept = drops(svc)[-1].backup.rsplit("/", 1)[-1]
        for turn in range(4):
            add(svc, f"b's memory {turn}", "b")
            svc.drop_tenant(ctx("b"))
        mine = [r.backup.rsplit("/", 1)[-1] for r in drops(svc)[-2:]]
        assert backups(data) == sorted([kept, *mine])


def test_a_tenant_named_as_another_tenants_label_never_takes_that_tenants_backup(tmp_path):
    """A name of safe characters was its own label: ``a_b-<12 hex>`` is the label of ``a/b``, and its drop removed
    ``a/b``'s backup (the only copy of that tenant) as one of its own that no tombstone of its named."""
    import hashlib

    data = tmp_path / "data"
    twin = "a_b-" + hashlib.sha256(b"a/b").hexdigest()[:12]
    with MemoryService.open(data) as svc:
        add(svc, "the only copy of a/b", "a/b")
        svc.drop_tenant(ctx("a/b"))
        add(svc, "another tenant", twin)
        svc.drop_tenant(ctx(twin))
        assert backups(data) == sorted(r.backup.rsplit("/", 1)[-1] for r in drops(svc))
        assert len(backups(data)) == 2


def test_dropped_and_unknown_tenants_are_answered_alike(tmp_path):
    data = tmp_path / "data"
    with MemoryService.open(data) as svc:
        add(svc, "a memory", "a")
        svc.drop_tenant(ctx("a"))
        head, kept = svc.store.last_position(), backups(data)
        for tenant in ("a", "nobody"):
            with pytest.raises(NotFound) as refused:
                svc.drop_tenant(ctx(tenant))
            assert str(refused.value) == str(NotFound("tenant", tenant))
        assert svc.store.last_position() == head and backups(data) == kept and len(drops(svc)) == 1
        add(svc, "back again", "a")  # a tenant used again can be dropped again
        assert svc.drop_tenant(ctx("a")).data["events_backed_up"] >= 1 and len(drops(svc)) == 2


def test_serve_refuses_to_start_with_a_keep_below_one(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MNEMOLOG_BACKUPS_KEEP", "0")
    monkeypatch.setenv("MNEMOLOG_AUTH", "off")
    assert cli.main(["--data-dir", str(tmp_path / "data"), "serve", "--port", "0"]) == 2
    assert "MNEMOLOG_BACKUPS_KEEP: expected a whole number at least 1" in capsys.readouterr().err


def test_cli_drop_of_a_dropped_tenant_exits_like_an_unknown_one(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("MNEMOLOG_TENANT", raising=False)
    data = str(tmp_path / "data")
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert cli.main(["--data-dir", data, "add", "--tenant", "gone", "hello"]) == 0
    assert cli.main(["--data-dir", data, "drop-tenant", "--tenant", "gone", "--yes"]) == 0
    capsys.readouterr()
    messages = []
    for tenant in ("gone", "nobody"):
        assert cli.main(["--data-dir", data, "drop-tenant", "--tenant", tenant, "--yes"]) == 2
        messages.append(capsys.readouterr().err.replace(repr(tenant), "TENANT"))
    assert messages[0] == messages[1] and "not found" in messages[0]


def test_any_tenant_name_can_be_dropped_and_names_its_own_backup(tmp_path):
    """A tenant name longer than a file name may be, or one that only differs in characters a file name
    cannot hold, still gets its backup, under a label no other tenant shares."""
    data = tmp_path / "data"
    tenants = ["t" * 255, "../x", ".._x", "a/b", "a_b", "café"]  # the longest tenant the log holds (see eventstore.bounds)
    with MemoryService.open(data) as svc:
        for tenant in tenants:
            add(svc, f"{tenant}'s memory", tenant)
        for tenant in tenants:
            svc.drop_tenant(ctx(tenant))
        recorded = [d.backup for d in drops(svc)]
    names = [p.rsplit("/", 1)[-1] for p in recorded]
    assert len(set(n.split("-", 1)[1] for n in names)) == len(tenants)  # one label per tenant
    assert all(len(n) < 255 for n in names) and sorted(names) == backups(data)
    assert all((data / "backups" / n).parent == data / "backups" for n in names)
    assert names[4].endswith("-a_b.jsonl")  # a name a file can hold is kept as it is


def test_a_drop_records_and_answers_its_backup_relative_to_the_data_directory(tmp_path):
    """The tombstone and the answer named the backup by its absolute path: the log, exported to another
    machine, carried the first host's layout (its home, its mount points) with it."""
    data = tmp_path / "data"
    with MemoryService.open(data) as svc:
        add(svc, "a memory", "a")
        answer = svc.drop_tenant(CommandContext(tenant="a", idempotency_key="drop-1"))
        again = svc.drop_tenant(CommandContext(tenant="a", idempotency_key="drop-1"))  # a retry, answered from the log
        [recorded] = drops(svc)
    assert answer.data["backup"] == again.data["backup"] == recorded.backup == f"backups/{backups(data)[0]}"
    assert (data / recorded.backup).is_file() and str(tmp_path) not in repr(answer.data)


def test_a_tombstone_naming_its_backup_by_an_absolute_path_still_reads_and_names_that_backup(tmp_path):
    """A drop recorded before backups were named relative to the data directory names its own by an absolute
    path: it still reads, and the tenant's next drop keeps that backup as one a tombstone names."""
    data = tmp_path / "data"
    with MemoryService.open(data, settings=Settings({"backups_keep": 2})) as svc:
        add(svc, "a memory", "a")
        old = data / "backups" / "20200101T000000.000000000-a.jsonl"
        old.parent.mkdir()
        old.write_text("an export written by an earlier version\n")
        event = c.TenantDropped(backup=str(old.resolve()), events_backed_up=1)
        svc.store.append_batch([StreamAppend(c.tenant_stream("a"), [event])], tenant="a")
        add(svc, "a memory after that drop", "a")
        svc.drop_tenant(ctx("a"))
        assert [d.backup for d in drops(svc)] == [str(old.resolve()), f"backups/{backups(data)[1]}"]
        assert backups(data)[0] == old.name
