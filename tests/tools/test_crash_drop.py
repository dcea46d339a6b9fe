"""``mnemolog drop-tenant`` SIGKILLed while it writes its backup, and after: the drop is absent or whole, never half.

The command runs as a real subprocess on real files and kills itself at a named
point (:mod:`tests.crashpoints`): once the backup's bytes are written but before
they are synced and renamed into place, and once the backup is in place but
before the tombstone is appended. The tenant must then still be readable and a
second run must drop it, recording a backup that holds every one of its events,
leaving no partial backup behind (a backup has no name until it is whole: a kill
while it is written leaves nothing of it); ``verify`` passes and the projections equal a
fresh rebuild.
"""

from __future__ import annotations

import json

import pytest

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.service import MemoryService
from tests.crashpoints import paused_at, run_killed_at
from tests.projections.support import dump
from tests.serving import clean_env, run_cli
from tests.tools.test_crash_loops import assert_equal_projections, fresh_rebuild

SETTINGS = Settings({"synchronous": "NORMAL"}, env={})
DROP = ("--tenant", "acme", "drop-tenant", "--yes", "--reason", "contract ended", "--json")


def seeded(tmp_path):
    data = tmp_path / "data"
    with MemoryService.open(data, settings=SETTINGS) as svc:
        for tenant in ("acme", "other"):
            svc.run(svc.memories.add, CommandContext(tenant=tenant), [MemoryContent(memory=f"{tenant} note {n}") for n in range(20)])
        events = len(svc.store.read_all(tenant="acme", limit=10_000))
    return data, events


def backup_named_by(done) -> str:
    """The backup a ``drop-tenant --json`` run answered with, relative to the data directory."""
    recorded = json.loads(done.stdout)
    return recorded.get("backup") or recorded["data"]["backup"]


@pytest.mark.parametrize(
    "point",
    [
        "os:fsync",  # the backup's bytes written, not synced nor renamed yet
        "mnemolog.eventstore.commands.context:commit",  # the backup in place, the tombstone not appended yet
    ],
)
def test_a_drop_killed_before_its_tombstone_leaves_the_tenant_and_a_retry_drops_it_with_one_whole_backup(tmp_path, point):
    data, events = seeded(tmp_path)
    run_killed_at(data, point, *DROP, env=clean_env(synchronous="NORMAL", organizer_enabled="off"))
    if point == "os:fsync":  # a backup not whole yet has no name: nothing of it is left
        assert list((data / "backups").iterdir()) == []
    with MemoryService.open(data, settings=SETTINGS) as svc:
        assert svc.store.read_all(types=["TenantDropped"]) == []
        assert svc.graph.stats("acme")["memories"] == {"activated": 20} and svc.store.verify().ok
    done = run_cli(data, *DROP, env=clean_env(synchronous="NORMAL", organizer_enabled="off"))
    assert done.returncode == 0, done.stderr
    backup = backup_named_by(done)
    with open(data / backup) as saved:  # named relative to the data directory
        assert sum(1 for line in saved if "position" in json.loads(line)) == events
    assert list((data / "backups").glob("*.partial")) == [], "a partial backup of the killed drop was left behind"
    with MemoryService.open(data, settings=SETTINGS) as svc:
        assert len(svc.store.read_all(types=["TenantDropped"])) == 1 and svc.store.verify().ok
        assert_equal_projections(dump(svc.runner), fresh_rebuild(data, tmp_path / "reference"), "after the retry")
    assert sorted((data / "backups").glob("*.jsonl")) == [data / backup], "a backup no tombstone names was left behind"


def test_a_backup_no_tombstone_names_stays_until_that_tenants_next_drop_which_removes_it(tmp_path):
    """A drop killed once its backup was in place, before its tombstone, left that backup for good: a whole copy
    of a tenant that was not dropped, beside the log, and one more of its backups kept by every rotation after.
    The tenant's next drop removes it (another tenant's drop leaves it: it is no backup of theirs)."""
    data, _ = seeded(tmp_path)
    env = clean_env(synchronous="NORMAL", organizer_enabled="off")
    run_killed_at(data, "mnemolog.eventstore.commands.context:commit", *DROP, env=env)
    [orphan] = (data / "backups").glob("*.jsonl")
    other = run_cli(data, "--tenant", "other", "drop-tenant", "--yes", "--json", env=env)
    assert other.returncode == 0, other.stderr
    assert orphan.exists()
    with MemoryService.open(data, settings=SETTINGS) as svc:  # the tenant is written to again before its drop
        svc.run(svc.memories.add, CommandContext(tenant="acme"), [MemoryContent(memory="one more note")])
    done = run_cli(data, *DROP, env=env)
    assert done.returncode == 0, done.stderr
    named = {backup_named_by(answer) for answer in (other, done)}
    assert {p.relative_to(data).as_posix() for p in (data / "backups").glob("*.jsonl")} == named


def test_a_drop_in_another_process_keeps_its_backup_while_it_appends_its_tombstone(tmp_path):
    """A drop removes the tenant's backups no tombstone names: one whose drop, in another process, has its
    backup in place and is appending its tombstone is no such backup. Two drops of one tenant at once (the CLI
    and the API) both keep theirs: every tombstone names a backup that exists."""
    data, _ = seeded(tmp_path)
    env = clean_env(synchronous="NORMAL", organizer_enabled="off")
    with paused_at(data, "mnemolog.eventstore.commands.context:commit", *DROP, env=env) as first:
        [waiting] = (data / "backups").glob("*.jsonl")
        with MemoryService.open(data, settings=SETTINGS) as svc:
            svc.drop_tenant(CommandContext(tenant="acme"))
        assert waiting.exists(), "the backup of a drop in progress was removed as one no tombstone names"
    assert first.returncode == 0, first.stderr.read()
    with MemoryService.open(data, settings=SETTINGS) as svc:
        named = [d.event.backup for d in svc.store.read_all(types=["TenantDropped"])]
    assert len(named) == 2 and all((data / backup).is_file() for backup in named), named
