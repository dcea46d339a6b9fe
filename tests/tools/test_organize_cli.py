"""``mnemolog organize`` as an operator runs it: a real subprocess following the log."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tests.serving import ctrl_c_as_at_a_terminal

MNEMOLOG = Path(sys.executable).with_name("mnemolog")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMOLOG_")}
    return env | {"MNEMOLOG_ORGANIZER_POLL_S": "0.05", "MNEMOLOG_ORGANIZER_CLUSTER_INTERVAL_S": "0"}


def _count(data: Path, type_: str, tenant: str) -> int:
    conn = sqlite3.connect(f"file:{data / 'events.db'}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT count(*) FROM events WHERE type = ? AND tenant = ?", (type_, tenant)).fetchone()[0]
    finally:
        conn.close()


def test_organize_following_the_log_keeps_to_its_tenant(tmp_path, monkeypatch, capsys):
    """``organize --tenant a`` (no ``--once``) merged every tenant's duplicates: the follower ignored ``--tenant``."""
    from mnemolog.tools.cli import main

    data = tmp_path / "data"
    for name in [n for n in os.environ if n.startswith("MNEMOLOG_")]:
        monkeypatch.delenv(name)
    for tenant in ("a", "b"):
        for text in ("Alice lives in Berlin.", "alice lives in  berlin"):
            assert main(["--data-dir", str(data), "--tenant", tenant, "add", text]) == 0
    child = subprocess.Popen(
        [str(MNEMOLOG), "--data-dir", str(data), "organize", "--tenant", "a"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env() | {"PYTHONFAULTHANDLER": "1"}, preexec_fn=ctrl_c_as_at_a_terminal,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while _count(data, "OrganizerPassRecorded", "a") == 0:
            assert child.poll() is None and time.monotonic() < deadline, child.communicate(timeout=5)
            time.sleep(0.05)
        time.sleep(0.5)  # a few more polls of the follower
        assert _count(data, "MemoriesMerged", "a") == 1
        assert _count(data, "MemoriesMerged", "b") == 0 and _count(data, "OrganizerPassRecorded", "b") == 0
    finally:
        child.send_signal(signal.SIGINT)
        try:
            out, err = child.communicate(timeout=30)
        except subprocess.TimeoutExpired:  # every thread's stack, for the report
            child.send_signal(signal.SIGABRT)
            raise AssertionError(f"organize did not stop on Ctrl-C: {child.communicate(timeout=30)[1].decode()[-4000:]}") from None
    assert "organizing tenant 'a'" in err.decode()


def test_organize_once_is_refused_while_another_organizer_holds_the_lease(tmp_path, monkeypatch):
    """On SQLite the lease was always held: ``organize --once`` beside a server's (or another ``organize``'s)
    organizer was a second organizer on one log. Now it is refused in one line; a follower stands by, and the
    lease frees itself when its holder is killed."""
    from mnemolog.tools.cli import main

    data = tmp_path / "data"
    for name in [n for n in os.environ if n.startswith("MNEMOLOG_")]:
        monkeypatch.delenv(name)
    for text in ("Alice lives in Berlin.", "alice lives in  berlin"):
        assert main(["--data-dir", str(data), "add", text]) == 0
    holder = subprocess.Popen([str(MNEMOLOG), "--data-dir", str(data), "organize"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    try:
        deadline = time.monotonic() + 60
        while _count(data, "OrganizerPassRecorded", "default") == 0:  # it holds the lease and organized
            assert holder.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        head = _count(data, "MemoriesMerged", "default")
        once = subprocess.run([str(MNEMOLOG), "--data-dir", str(data), "organize", "--once"], capture_output=True, env=_env(), timeout=60)
        err = once.stderr.decode()
        assert once.returncode == 2 and err.count("\n") == 1 and "another organizer holds this log's lease" in err, err
        assert _count(data, "MemoriesMerged", "default") == head
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    again = subprocess.run([str(MNEMOLOG), "--data-dir", str(data), "organize", "--once", "--no-topics"], capture_output=True, env=_env(), timeout=60)
    assert again.returncode == 0, again.stderr  # the killed holder's lease went with it


def test_a_dry_run_says_the_pass_may_decide_more_on_the_memories_its_merges_make(tmp_path, capsys):
    """The dry run stops after one round (it writes no merge to judge again): it printed "1 decision(s) would be
    written" where the pass then also superseded the merged memory by a newer value of its key."""
    from mnemolog.tools.cli import main

    def run(*argv) -> tuple[int, str]:
        code = main(["--data-dir", str(tmp_path / "data"), *argv])
        return code, capsys.readouterr().out

    for argv in (["Alice lives in Berlin", "--key", "alice home"], ["alice lives in berlin."], ["Alice lives in Paris", "--key", "alice home"]):
        assert run("add", *argv)[0] == 0
    code, out = run("organize", "--dry-run", "--no-topics")
    assert code == 0 and out.count("merge [") == 1 and "supersede" not in out
    assert out.splitlines()[-1] == (
        "dry run: 1 decision(s) and 0 new topic(s) would be written; nothing was"
        " (the pass then judges the memories its merges make, and may decide more)"
    )
    code, out = run("--json", "organize", "--dry-run", "--no-topics")
    assert code == 0 and json.loads(out.splitlines()[-1])["may_decide_more"] is True
    code, out = run("organize", "--once", "--no-topics")
    assert code == 0 and out.count("merge [") == 1 and out.count("supersede") == 1


def test_a_dry_run_without_a_merge_says_nothing_more(tmp_path, capsys):
    from mnemolog.tools.cli import main

    assert main(["--data-dir", str(tmp_path / "data"), "add", "Bob plays chess"]) == 0
    capsys.readouterr()
    assert main(["--data-dir", str(tmp_path / "data"), "--json", "organize", "--dry-run", "--no-topics"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["may_decide_more"] is False


def test_organize_following_the_log_with_no_topics_writes_no_topic(tmp_path, monkeypatch):
    """``organize --no-topics`` without ``--once`` ignored the option: the follower clustered the memories into
    topics every ``MNEMOLOG_ORGANIZER_CLUSTER_INTERVAL_S`` all the same. A clustering run is due right after the
    first pass (an interval of a millisecond), so once a second pass is recorded, one would have been written."""
    from mnemolog.projections.service import MemoryService
    from mnemolog.tools.cli import main

    for name in [n for n in os.environ if n.startswith("MNEMOLOG_")]:
        monkeypatch.delenv(name)
    clustering = {"MNEMOLOG_ORGANIZER_CLUSTER_INTERVAL_S": "0.001", "MNEMOLOG_ORGANIZER_MIN_GROUP_SIZE": "5",
                  "MNEMOLOG_ORGANIZER_MIN_CLUSTER_SIZE": "2"}
    themes = ("My cat number {} likes fish and sleeping on the sofa", "Car model {} has a diesel engine and four doors")
    for option, topics in (("--no-topics", False), (None, True)):
        data = tmp_path / (option or "topics")
        for i in range(8):
            assert main(["--data-dir", str(data), "add", themes[i % 2].format(i)]) == 0
        for text in ("Alice lives in Berlin.", "alice lives in  berlin"):
            assert main(["--data-dir", str(data), "add", text]) == 0
        child = subprocess.Popen([str(MNEMOLOG), "--data-dir", str(data), "organize", *([option] if option else [])],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env() | clustering, preexec_fn=ctrl_c_as_at_a_terminal)
        try:
            for passes, text in ((1, None), (2, "Bob plays chess every Sunday.")):
                if text:
                    for duplicate in (text, text.lower()):
                        assert main(["--data-dir", str(data), "add", duplicate]) == 0
                deadline = time.monotonic() + 120
                while _count(data, "OrganizerPassRecorded", "default") < passes:
                    assert child.poll() is None and time.monotonic() < deadline, child.communicate(timeout=5)
                    time.sleep(0.05)
        finally:
            child.send_signal(signal.SIGINT)
            child.communicate(timeout=60)
        with MemoryService.open(data) as service:
            written = service.read_conn().execute(
                "SELECT count(*) FROM graph_memories WHERE json_extract(content, '$.memory_type') = 'TopicMemory'").fetchone()[0]
        assert bool(written) is topics, (option, written)
