"""``mnemolog export --with-keys`` killed while it writes the key file leaves no key material behind.

Before, the keys went to ``KEYFILE.partial`` first, renamed once complete: a
kill midway left that file, every data key written so far in the clear, in
the operator's folder for good. Now the file has no name until it is
complete (Linux's ``O_TMPFILE``: the kernel frees it with the process); the
``.partial`` route is only for a file system that refuses that, and the next
export to the same path removes a stale ``.partial``.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from mnemolog.eventstore import EventStore
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.keystore import read_key_file, write_key_file
from mnemolog.eventstore.model import MemoryContent
from mnemolog.projections.service import MemoryService
from tests.crashpoints import run_killed_at
from tests.serving import clean_env, run_cli
from tests.tools.test_crash_loops import SETTINGS

SUBJECTS = 200  # a key file of ~50 KB: the rows written before the kill are past the write buffer, on the disk


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    data_dir = tmp_path_factory.mktemp("keys") / "data"
    with MemoryService.open(data_dir, settings=SETTINGS) as svc:
        content = [MemoryContent(memory=f"a note of subject {i}", subject=f"s{i}") for i in range(SUBJECTS)]
        svc.run(svc.memories.add, CommandContext(tenant="t", actor="test"), content)
    return data_dir


def _key_hexes(data_dir: Path) -> list[str]:
    conn = sqlite3.connect(data_dir / "keys.db")
    try:
        return [row[0].hex() for row in conn.execute("SELECT key FROM data_keys WHERE key IS NOT NULL")]
    finally:
        conn.close()


def _holding_keys(folder: Path, data_dir: Path) -> list[str]:
    """The files of ``folder`` that hold any data key of ``data_dir`` in the clear."""
    needles = [h.encode() for h in _key_hexes(data_dir)]
    return [p.name for p in folder.iterdir() if p.is_file() and any(n in p.read_bytes() for n in needles)]


def test_an_export_killed_while_it_writes_the_keys_leaves_none_behind(data, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    argv = ("export", "-o", str(out / "all.jsonl"), "--with-keys", str(out / "all.keys"))
    run_killed_at(data, "mnemolog.eventstore.keystore:_key_line", *argv, skip=SUBJECTS // 2, env=clean_env(synchronous="NORMAL"))
    assert not (out / "all.keys").exists() and not (out / "all.jsonl").exists()
    assert _holding_keys(out, data) == [], sorted(p.name for p in out.iterdir())
    done = run_cli(data, *argv, env=clean_env(synchronous="NORMAL"))  # and the next export writes both whole
    assert done.returncode == 0, done.stderr
    assert {row["key"] for row in read_key_file(out / "all.keys")} >= set(_key_hexes(data))
    assert _holding_keys(out, data) == ["all.keys"]


def test_the_next_export_removes_a_stale_partial_key_file(data, tmp_path):
    """What an export killed on the ``.partial`` route (a file system without ``O_TMPFILE``) left is removed."""
    stale = tmp_path / "all.keys.partial"
    stale.write_text("the first half of an earlier key file\n")
    done = run_cli(data, "export", "-o", str(tmp_path / "all.jsonl"), "--with-keys", str(tmp_path / "all.keys"), env=clean_env(synchronous="NORMAL"))
    assert done.returncode == 0, done.stderr
    assert not stale.exists() and (tmp_path / "all.keys").exists()


@pytest.mark.parametrize("tmpfile", [True, False], ids=["unnamed", "partial-route"])
@pytest.mark.parametrize("existing", [False, True], ids=["new", "replaced"])
def test_the_key_file_is_written_whole_and_owner_only_either_way(data, tmp_path, monkeypatch, tmpfile, existing):
    if not tmpfile:
        monkeypatch.delattr(os, "O_TMPFILE", raising=False)  # as on a system without it
    target = tmp_path / "all.keys"
    if existing:
        target.write_text("an older key file\n")
    with EventStore.open(data, settings=SETTINGS) as store:
        written = write_key_file(store.sealer.keys, target)
    assert written == len(read_key_file(target)) >= SUBJECTS
    assert target.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["all.keys"]
