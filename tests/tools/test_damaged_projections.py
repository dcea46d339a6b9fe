"""A ``projections.db`` damaged on disk (a torn copy, a disk that lost part of it): the next start rebuilds it.

The file is disposable: everything in it comes from the log. A start (here the
``get`` command, then a service) that finds it is not an SQLite database, or
that its pages are malformed, must not fail on it for ever (nor ``mnemolog
rebuild``, the operator's way to start the projections over): it replaces it
with projections replayed from the log, equal to a fresh rebuild, and the log
is not touched.
"""

from __future__ import annotations

import json

import pytest

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.service import MemoryService
from tests.projections.support import dump
from tests.serving import clean_env, run_cli
from tests.tools.test_crash_loops import assert_equal_projections, fresh_rebuild

SETTINGS = Settings({"synchronous": "NORMAL"}, env={})


def damage(path, how: str) -> None:
    data = path.read_bytes()
    if how == "torn":  # the second half lost
        path.write_bytes(data[: len(data) // 2])
    else:  # the first page overwritten
        path.write_bytes(b"\x00" * 4096 + data[4096:])


@pytest.mark.parametrize("how", ["torn", "overwritten"])
@pytest.mark.parametrize("command", [("--json", "--tenant", "t", "get"), ("rebuild",)])
def test_a_damaged_projections_file_is_rebuilt_from_the_log_at_the_next_start(tmp_path, how, command):
    data = tmp_path / "data"
    with MemoryService.open(data, settings=SETTINGS) as svc:
        ids = svc.run(svc.memories.add, CommandContext(tenant="t"), [MemoryContent(memory=f"note {n} on tides") for n in range(40)]).memory_ids
        head = svc.store.last_position()
    damage(data / "projections.db", how)
    args = (*command, ids[7]) if command[-1] == "get" else command
    done = run_cli(data, *args, env=clean_env(synchronous="NORMAL", organizer_enabled="off"))
    assert done.returncode == 0, done.stderr
    if command[-1] == "get":
        assert json.loads(done.stdout)["memory"] == "note 7 on tides"
    with MemoryService.open(data, settings=SETTINGS) as svc:
        assert svc.store.last_position() == head and svc.store.verify().ok  # nothing appended
        assert svc.runner.position() == head
        assert_equal_projections(dump(svc.runner), fresh_rebuild(data, tmp_path / "reference"), f"{how}, then {command}")
