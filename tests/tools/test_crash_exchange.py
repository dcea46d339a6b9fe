"""SIGKILL ``mnemolog export`` and ``mnemolog import`` midway, at random moments (seeded).

- An export killed while it writes leaves no file at its output path (or the
  complete one that was there before), and nothing beside it: never a
  truncated file that looks complete, nor a partial one holding part of the
  log. What is there imports, checked, into an empty data directory.
- An import killed while it appends leaves a log that verifies, holds each
  imported event at most once, and is finished by running the import again:
  then every event of the export is there exactly once, and the projections
  a restart opens equal a fresh rebuild. Every other round a server
  follows the import and is killed with it.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from pathlib import Path

import pytest

from mnemolog.eventstore import EventStore
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.projections.service import MemoryService
from tests.projections.support import write_log
from tests.serving import clean_env, run_cli
from tests.tools.test_crash_loops import CHILD_ENV, SETTINGS, assert_equal_projections, fresh_rebuild, head, kill, restart, spawn

SEED = 20261203
ROUNDS = 3
IMPORT_ROUNDS = int(os.environ.get("CRASH_ROUNDS", "2"))


def source_log(data_dir: Path) -> tuple[int, list[str]]:
    """Sealed memories of a few subjects through the commands, then thousands of events straight to the log."""
    with MemoryService.open(data_dir, settings=SETTINGS) as svc:
        ctx = CommandContext(tenant="t1", actor="test")
        sealed = svc.run(svc.memories.add, ctx, [MemoryContent(memory=f"sealed note {i}", subject=f"s{i % 3}") for i in range(30)]).memory_ids
    with EventStore.open(data_dir, settings=SETTINGS) as store:
        write_log(store, random.Random(SEED), target=8000)
        return store.last_position(), list(sealed)


def writes_into(pid: int, directory: Path) -> bool:
    """Whether process ``pid`` holds open a file in ``directory`` it is writing: one without a name yet
    (``O_TMPFILE``: ``/proc`` shows ``#<inode> (deleted)``), or a ``.partial`` one."""
    try:
        links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
    except OSError:  # it ended
        return False
    return any(link.startswith(f"{directory}/") and link.endswith((" (deleted)", ".partial")) for link in links)


def event_ids(data_dir: Path) -> Counter:
    with EventStore.open(data_dir, settings=SETTINGS) as store:
        result = store.verify()
        assert result.ok, result
        return Counter(r.event_id for page in store.iter_all(batch_size=5000) for r in page)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("source") / "data"
    last, sealed = source_log(data_dir)
    export = data_dir.parent / "full.jsonl"
    done = run_cli(data_dir, "export", "-o", str(export), "--with-keys", str(data_dir.parent / "full.keys"), env=CHILD_ENV)
    assert done.returncode == 0, done.stderr
    return data_dir, export, last, sealed


@pytest.mark.slow
def test_an_export_killed_midway_leaves_no_truncated_file(source, tmp_path):
    data_dir, _, last, _ = source
    target = tmp_path / "out.jsonl"

    def writing(child) -> float:
        """Wait until ``child`` has begun writing its export (or ended); when that was."""
        deadline = time.monotonic() + 60
        while child.poll() is None and not writes_into(child.pid, tmp_path) and time.monotonic() < deadline:
            time.sleep(0.001)
        return time.monotonic()

    # How long an export writes here: the kills land at fractions of it.
    child = spawn(data_dir, "export", "-o", str(target), log=tmp_path / "children.log")
    started = writing(child)
    while child.poll() is None:
        time.sleep(0.001)
    span = time.monotonic() - started
    interrupted = 0
    for round_ in range(ROUNDS + 1):
        target.unlink(missing_ok=True)
        child = spawn(data_dir, "export", "-o", str(target), log=tmp_path / "children.log")
        writing(child)
        time.sleep(span * round_ / (ROUNDS + 1) if round_ < ROUNDS else 0.0)
        killed = kill(child)
        interrupted += killed and not target.exists()
        print(f"export round {round_}: killed={killed}, output {'present' if target.exists() else 'absent'}")
        # Nothing of a killed export stays beside it: its file has no name until it is whole.
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("out.")) == (["out.jsonl"] if target.exists() else [])
        if round_ == ROUNDS:  # the last round lets it finish
            assert run_cli(data_dir, "export", "-o", str(target), env=CHILD_ENV).returncode == 0
        if target.exists():
            copy = tmp_path / f"copy-{round_}"
            done = run_cli(copy, "import", str(target), "--without-keys", env=CHILD_ENV)  # checked against its header and footer first
            assert done.returncode == 0, f"round {round_}: the export left at the output does not import: {done.stderr}"
            with EventStore.open(copy, settings=SETTINGS) as store:
                assert store.last_position() == last and store.verify().ok
        else:
            assert killed, "an export that finished left no file"
    assert interrupted >= 1, "no kill landed during an export"


@pytest.mark.slow
def test_an_import_killed_midway_is_finished_by_running_it_again(source, tmp_path):
    _, export, last, sealed = source
    rng = random.Random(SEED)
    expected = event_ids(source[0])
    target = tmp_path / "data"
    interrupted = 0
    for round_ in range(IMPORT_ROUNDS):
        server = None
        if round_ % 2:  # a server follows the import, and is killed with it
            server = spawn(target, "serve", "--port", "0", log=tmp_path / "children.log", env=clean_env(synchronous="NORMAL", auth="off"))
        child = spawn(target, "import", str(export), "--keys", str(export.with_suffix(".keys")), log=tmp_path / "children.log")
        deadline = time.monotonic() + 120
        while child.poll() is None and time.monotonic() < deadline and head(target) < (round_ + 1) * last // (IMPORT_ROUNDS + 1):
            time.sleep(0.001)
        time.sleep(rng.uniform(0.0, 0.03))
        killed = kill(child)
        if server is not None:
            kill(server)
        interrupted += killed and head(target) < last
        found = event_ids(target)
        print(f"import round {round_}: killed={killed}, {sum(found.values())} of {last} events imported")
        assert not [e for e, n in found.items() if n > 1], "an event was imported twice"
        assert set(found) <= set(expected)
    done = run_cli(target, "import", str(export), "--keys", str(export.with_suffix(".keys")), env=clean_env(synchronous="NORMAL"))
    assert done.returncode == 0, done.stderr
    assert event_ids(target) == expected
    assert interrupted >= 1, "no kill landed during an import"
    assert_equal_projections(restart(target), fresh_rebuild(target, tmp_path / "reference"), "after the import finished")
    with MemoryService.open(target, settings=SETTINGS) as svc:
        assert [svc.get("t1", m).memory for m in sealed] == [f"sealed note {i}" for i in range(30)]  # the keys came with it


@pytest.mark.slow
def test_an_export_to_stdout_cut_by_a_kill_is_refused_by_import(source, tmp_path):
    """``export > FILE`` killed midway leaves the shell's file cut short: it lacks the footer, and import says so."""
    import signal
    import subprocess
    import sys

    from tests.serving import ROOT

    data_dir = source[0]
    cut = tmp_path / "cut.jsonl"
    with open(cut, "wb") as out:
        child = subprocess.Popen([sys.executable, "-m", "mnemolog.tools.cli", "--data-dir", str(data_dir), "export"], stdout=out, env=CHILD_ENV, cwd=str(ROOT))
        deadline = time.monotonic() + 60
        while child.poll() is None and cut.stat().st_size < 200_000 and time.monotonic() < deadline:
            time.sleep(0.002)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL, "the export finished before the kill"
    done = run_cli(tmp_path / "copy", "import", str(cut), env=CHILD_ENV)
    assert done.returncode == 2 and "nothing written" in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    if (tmp_path / "copy" / "events.db").exists():
        with EventStore.open(tmp_path / "copy", settings=SETTINGS) as store:
            assert store.last_position() == 0


@pytest.fixture(scope="module")
def forgotten_export(tmp_path_factory):
    """A log whose subject was forgotten, exported, with a key file taken before the forget; the subject's memory id."""
    root = tmp_path_factory.mktemp("forgotten")
    source = root / "source"
    with MemoryService.open(source, settings=SETTINGS) as svc:
        [memory_id] = svc.run(svc.memories.add, CommandContext(tenant="t"), [MemoryContent(memory="Quenbrightly's note", subject="u-1")]).memory_ids
    assert run_cli(source, "export", "-o", str(root / "before.jsonl"), "--with-keys", str(root / "before.keys"), env=CHILD_ENV).returncode == 0
    assert run_cli(source, "forget", "--subject", "u-1", "--tenant", "t", "--yes", env=CHILD_ENV).returncode == 0
    assert run_cli(source, "export", "-o", str(root / "after.jsonl"), env=CHILD_ENV).returncode == 0
    return root / "after.jsonl", root / "before.keys", memory_id


@pytest.mark.parametrize("point", ["mnemolog.eventstore.store:EventStore.append_records", "mnemolog.eventstore.keystore:KeyStore.tombstone"])
def test_an_import_of_a_forget_killed_midway_is_whole_or_absent_after_a_restart(forgotten_export, tmp_path, point):
    """Imported with the key file taken before the forget, and killed before or after the forget's event
    is appended, the target never has the key destroyed without the event, nor (once restarted) the event
    without the key destroyed."""
    from tests.crashpoints import run_killed_at

    export, keys, memory_id = forgotten_export
    target = tmp_path / "target"
    run_killed_at(target, point, "import", str(export), "--keys", str(keys))
    with MemoryService.open(target, settings=SETTINGS) as svc:
        forgets = svc.store.read_all(types=["SubjectForgotten"])
        view = svc.graph.memory("t", memory_id)
        if forgets:
            assert svc.store.sealer.keys.subject_keys("t", "u-1") == [], "the forget is in the log, its key still held"
            assert view is None or view.erased
        else:
            assert view is None or not view.erased, "the key was destroyed, the forget is not in the log"
            assert svc.store.sealer.keys.subject_keys("t", "u-1"), "the key was destroyed, the forget is not in the log"
    done = run_cli(target, "import", str(export), "--keys", str(keys), env=CHILD_ENV)  # run again, it finishes
    assert done.returncode == 0, done.stderr
    with MemoryService.open(target, settings=SETTINGS) as svc:
        assert len(svc.store.read_all(types=["SubjectForgotten"])) == 1 and svc.get("t", memory_id).erased
        assert svc.store.sealer.keys.subject_keys("t", "u-1") == []
