"""``mnemolog organize`` as an operator runs it: a real subprocess following the log."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

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
    child = subprocess.Popen([str(MNEMOLOG), "--data-dir", str(data), "organize", "--tenant", "a"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
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
        out, err = child.communicate(timeout=30)
    assert "organizing tenant 'a'" in err.decode()
