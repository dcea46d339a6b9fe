"""``mnemolog forget`` SIGKILLed at each step: a restart finishes the forget, or it never happened; never half.

The forget runs as a real subprocess on real files and kills itself at a
named point (:mod:`tests.crashpoints`): before its event is appended, after
the event but before the keys are destroyed, after the projections applied
it but before they were compacted, and before the local files were scrubbed.
A restart (a service opening the data directory, as any command or server
start does) must leave either no ``SubjectForgotten`` and the subject readable, or
one ``SubjectForgotten``, its key destroyed, every read erased and no
plaintext of the subject in any file of the data directory (the files are
scanned as :mod:`tests.projections.test_forget` scans them).
"""

from __future__ import annotations

import pytest

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.service import MemoryService
from tests.crashpoints import run_killed_at
from tests.projections.support import dump
from tests.projections.test_forget import _assert_clean, _needles, _seed
from tests.serving import clean_env, run_cli
from tests.tools.test_crash_loops import assert_equal_projections, fresh_rebuild

SETTINGS = Settings({"synchronous": "NORMAL"}, env={})
FORGET = ("forget", "--subject", "u-42", "--tenant", "t", "--yes", "--json")


def seeded(tmp_path):
    """A data directory holding the subject's memories, its vector index and its lexical postings saved."""
    data = tmp_path / "data"
    with MemoryService.open(data, settings=SETTINGS) as svc:
        mine, _ = _seed(svc)
        svc.scrub()  # the vector index saved with the subject's vectors in it
        svc.warm()  # the lexical postings saved with the subject's words
        [key_id] = svc.store.sealer.keys.subject_keys("t", "u-42")
        key = svc.store.sealer.keys.key(key_id)
    assert any(n in (data / "fts.postings").read_bytes() for n in _needles())
    return data, mine, key


def without_counters(dumped: dict) -> dict:
    """The projections without their ``*_stats`` counters: applying an erasure counts the rows it deleted, a replay
    of the erased log has none to delete (the counters only tell caches to reload)."""
    return {name: {t: rows for t, rows in tables.items() if not t.endswith("_stats")} for name, tables in dumped.items()}


def assert_finished(tmp_path, data, mine, key, *, forgets: int = 1):
    with MemoryService.open(data, settings=SETTINGS) as svc:
        found = svc.store.read_all(types=["SubjectForgotten"])
        assert len(found) == forgets, f"{len(found)} SubjectForgotten in the log"
        assert svc.store.sealer.keys.subject_keys("t", "u-42") == [], "the forgotten subject's key is still held"
        assert svc.get("t", mine[0]).erased and all(v["erased"] for v in svc.history("t", mine[0]))
        assert svc.store.verify().ok
        assert_equal_projections(without_counters(dump(svc.runner)), without_counters(fresh_rebuild(data, tmp_path / "reference")), "after restart")
    _assert_clean([p for p in data.rglob("*") if p.is_file()], _needles() + [key])


@pytest.mark.parametrize(
    "point",
    [
        "mnemolog.eventstore.keystore:KeyStore.forget",  # the event appended, the key not destroyed yet
        "mnemolog.projections.runner:ProjectionRunner._compact",  # the projections erased the rows, their bytes not compacted away yet
        "mnemolog.projections.service:MemoryService.scrub",  # the local files not scrubbed yet
    ],
)
def test_a_forget_killed_after_its_event_is_finished_by_a_restart(tmp_path, point):
    data, mine, key = seeded(tmp_path)
    run_killed_at(data, point, *FORGET)
    assert_finished(tmp_path, data, mine, key)


def test_a_forget_killed_before_its_event_leaves_the_subject_readable_and_a_retry_finishes_it(tmp_path):
    data, mine, key = seeded(tmp_path)
    run_killed_at(data, "mnemolog.eventstore.commands.subjects:commit", *FORGET)
    with MemoryService.open(data, settings=SETTINGS) as svc:
        assert svc.store.read_all(types=["SubjectForgotten"]) == []
        assert not svc.get("t", mine[0]).erased and svc.store.verify().ok
    done = run_cli(data, *FORGET, env=clean_env(synchronous="NORMAL"))
    assert done.returncode == 0, done.stderr
    assert_finished(tmp_path, data, mine, key)



def test_a_server_that_forgets_does_not_write_the_subject_back_at_its_stop(tmp_path):
    data, mine, key = seeded(tmp_path)
    with MemoryService.open(data, settings=SETTINGS) as server:
        server.warm()  # a server loads the lexical postings at its start
        server.forget(CommandContext(tenant="t", actor="privacy-officer"), "u-42")
    # its clean stop saves what it loaded only if that is still what the database holds
    _assert_clean([p for p in data.rglob("*") if p.is_file()], _needles() + [key])
