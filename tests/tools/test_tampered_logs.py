"""An operator's copy of a data directory whose log was changed behind the product's back.

Each test copies a sealed data directory (two tenants, subjects, a forget, a
merge, a revert), edits ``events.db`` or ``keys.db`` with the ``sqlite3``
module as an attacker would (the append-only triggers dropped first and put
back after), and runs the CLI: ``verify`` exits 1 naming the first bad
position, a digest kept from before disagrees, and no read serves a row the
log no longer holds.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sqlite3
from contextlib import contextmanager
from pathlib import Path

import pytest

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.projections.service import MemoryService
from mnemolog.tools.cli import main

TOKEN = re.compile(r'"memory":"(mnemologSealedV2[^"]*)"')
HASHED = "position, event_id, stream_id, stream_version, type, schema_version, tenant, payload, metadata, recorded_at"


@pytest.fixture(autouse=True)
def plain_environment(monkeypatch):
    for name in [n for n in os.environ if n.startswith("MNEMOLOG_")]:
        monkeypatch.delenv(name)


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> dict:
    """A sealed data directory, its kept digest and the ids it holds (built once, copied by each test)."""
    data = tmp_path_factory.mktemp("original") / "data"
    with MemoryService.open(data) as svc:
        def me():  # a context is one correlation: one per command
            return CommandContext(tenant="default")

        lisbon = svc.run(svc.memories.add, me(), [MemoryContent(memory="I moved to Lisbon in May", subject="u-1")]).memory_ids[0]
        cat = svc.run(svc.memories.add, me(), [MemoryContent(memory="I adopted a cat called Miso", subject="u-2")]).memory_ids[0]
        trams = svc.run(svc.memories.add, me(), [MemoryContent(memory="Lisbon has trams"), MemoryContent(memory="Tram 28 is crowded")]).memory_ids
        svc.run(svc.memories.add, CommandContext(tenant="acme"), [MemoryContent(memory="The office is in Porto", subject="u-9")])
        svc.run(svc.memories.update, me(), lisbon, {"memory": "I moved to Lisbon in June"})
        merging = svc.run(svc.memories.merge, me(), trams)
        merged = merging.data["merged_id"]
        undone = svc.run(svc.memories.archive, me(), cat)
        svc.run(svc.reverts.revert, me(), undone.correlation_id)
    assert main(["--data-dir", str(data), "forget", "--subject", "u-2", "--reason", "asked", "--yes"]) == 0
    with MemoryService.open(data) as svc:
        tip = svc.store.digest()
        # Sealed under a key that still exists (u-2's was forgotten: its tokens read as erased, moved or not).
        sealed = [p for (p, stream, payload) in rows(data, "position, stream_id, payload") if TOKEN.search(payload) and stream == f"memory-{lisbon}"]
    return {
        "data": data, "tip": str(tip), "lisbon": lisbon, "merged": merged, "merged_at": merging.first_position, "sealed": sealed, "last": tip.position,
    }  # fmt: skip


def rows(data: Path, columns: str) -> list[tuple]:
    conn = sqlite3.connect(data / "events.db")
    try:
        return conn.execute(f"SELECT {columns} FROM events ORDER BY position").fetchall()
    finally:
        conn.close()


@contextmanager
def tampering(data: Path):
    """A raw connection to the log with its append-only triggers dropped, and put back on the way out."""
    conn = sqlite3.connect(data / "events.db", isolation_level=None)
    triggers = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'").fetchall()
    for name, _ in triggers:
        conn.execute(f"DROP TRIGGER {name}")
    try:
        yield conn
    finally:
        for _, sql in triggers:
            conn.execute(sql)
        conn.close()


def rehash(conn: sqlite3.Connection) -> None:
    """The documented chain, recomputed over the whole log: what a careful forger does."""
    prev = "0" * 64
    for row in conn.execute(f"SELECT {HASHED} FROM events ORDER BY position").fetchall():
        canonical = json.dumps(list(row), ensure_ascii=False, separators=(",", ":"))
        prev_hash, prev = prev, hashlib.sha256(prev.encode() + canonical.encode()).hexdigest()
        conn.execute("UPDATE events SET prev_hash = ?, hash = ? WHERE position = ?", (prev_hash, prev, row[0]))


@pytest.fixture
def copy(original, tmp_path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(original["data"], target)
    return target


def run(capsys, data: Path, *argv) -> tuple[int, str, str]:
    code = main(["--data-dir", str(data), *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def assert_fails_at(capsys, data: Path, tip: str, position: int) -> None:
    code, out, err = run(capsys, data, "verify")
    assert code == 1 and out.startswith(f"broken at position {position}:"), (out, err)
    code, out, _ = run(capsys, data, "verify", "--against", tip)  # the digest kept from before disagrees
    assert code == 1 and out.startswith("broken at position"), out


def edit_payload(conn, position: int) -> None:
    payload = conn.execute("SELECT payload FROM events WHERE position = ?", (position,)).fetchone()[0]
    at = payload.index("mnemologSealedV2") + 30
    conn.execute("UPDATE events SET payload = ? WHERE position = ?", (payload[:at] + ("A" if payload[at] != "A" else "B") + payload[at + 1 :], position))


def test_the_untouched_copy_verifies(capsys, copy, original):
    code, out, _ = run(capsys, copy, "verify", "--against", original["tip"])
    assert code == 0 and out.startswith(f"ok: {original['last']} events"), out


def test_one_payload_byte(capsys, copy, original):
    position = original["sealed"][1]
    with tampering(copy) as conn:
        edit_payload(conn, position)
    assert_fails_at(capsys, copy, original["tip"], position)


def test_a_deleted_middle_row(capsys, copy, original):
    with tampering(copy) as conn:
        conn.execute("DELETE FROM events WHERE position = 6")
    assert_fails_at(capsys, copy, original["tip"], 7)


def test_two_rows_swapped(capsys, copy, original):
    with tampering(copy) as conn:
        first, second = (conn.execute("SELECT * FROM events WHERE position = ?", (p,)).fetchone() for p in (5, 6))
        conn.execute("DELETE FROM events WHERE position IN (5, 6)")
        marks = ",".join("?" * len(first))
        conn.execute(f"INSERT INTO events VALUES ({marks})", (5, *second[1:]))
        conn.execute(f"INSERT INTO events VALUES ({marks})", (6, *first[1:]))
        rehash(conn)
    assert_fails_at(capsys, copy, original["tip"], 5)
    code, _, err = run(capsys, copy, "rebuild")  # a replay does not read the reordered log as good
    assert code == 2 and "rebuild refused, projections kept: the log fails verify at position 5" in err and err.count("\n") == 1


def test_a_sealed_token_moved_to_another_event_and_the_chain_recomputed(capsys, copy, original):
    """The chain holds (it was recomputed), but the token authenticates only in its own event: verify names it."""
    one, other = original["sealed"][0], original["sealed"][1]
    with tampering(copy) as conn:
        payloads = {p: conn.execute("SELECT payload FROM events WHERE position = ?", (p,)).fetchone()[0] for p in (one, other)}
        tokens = {p: TOKEN.search(payloads[p]).group(1) for p in (one, other)}
        conn.execute("UPDATE events SET payload = ? WHERE position = ?", (payloads[one].replace(tokens[one], tokens[other]), one))
        conn.execute("UPDATE events SET payload = ? WHERE position = ?", (payloads[other].replace(tokens[other], tokens[one]), other))
        rehash(conn)
    code, out, _ = run(capsys, copy, "verify")
    assert code == 1 and out.startswith(f"broken at position {one}: the event does not open") and "does not authenticate" in out, out
    code, out, _ = run(capsys, copy, "verify", "--against", original["tip"])
    assert code == 1 and f"broken at position {one}:" in out and "first difference" in out, out
    code, _, err = run(capsys, copy, "rebuild")  # and no replay opens the moved token as good
    assert code == 2 and "does not authenticate" in err and err.count("\n") == 1
    code, _, err = run(capsys, copy, "history", original["lisbon"])
    assert code == 2 and "does not authenticate" in err and err.count("\n") == 1


def test_the_key_store_of_another_data_directory(capsys, copy, original, tmp_path):
    other = tmp_path / "other"
    assert run(capsys, other, "add", "someone else's memory", "--subject", "u-1")[0] == 0
    for suffix in ("", "-wal", "-shm"):
        (copy / f"keys.db{suffix}").unlink(missing_ok=True)
    shutil.copy(other / "keys.db", copy / "keys.db")
    code, out, _ = run(capsys, copy, "verify")
    assert code == 1 and out.startswith(f"broken at position {original['sealed'][0]}: the event does not open") and "never held" in out, out
    code, _, err = run(capsys, copy, "history", original["lisbon"])
    assert code == 2 and "never held" in err and err.count("\n") == 1
    code, _, err = run(capsys, copy, "rebuild")  # refused before anything is dropped: the projections still answer
    assert code == 2 and err.startswith("mnemolog: error: rebuild refused, projections kept") and err.count("\n") == 1
    code, out, _ = run(capsys, copy, "--json", "get", original["lisbon"])
    assert code == 0 and json.loads(out)["memory"] == "I moved to Lisbon in June"


def test_a_copy_without_keys_verifies_its_chain(capsys, copy, original):
    """An auditor's copy holds no key at all: its chain is all there is to check."""
    for suffix in ("", "-wal", "-shm"):
        (copy / f"keys.db{suffix}").unlink(missing_ok=True)
    code, out, _ = run(capsys, copy, "verify", "--against", original["tip"])
    assert code == 0, out


def test_a_cut_tail_fails_the_kept_digest_and_reads_stop_serving_it(capsys, copy, original):
    """Projections built from the lost tail are rebuilt: they would serve it, and skip the appends that take its positions."""
    cut = original["merged_at"] - 1  # the merge, the archive, its revert and the forget are gone
    with tampering(copy) as conn:
        conn.execute("DELETE FROM events WHERE position > ?", (cut,))
        conn.execute("DELETE FROM event_spans WHERE first_position > ?", (cut,))
    code, out, _ = run(capsys, copy, "verify")  # no digest kept: the projections built from the tail are the witness
    assert code == 1 and out.startswith(f"broken at position {cut + 1}:") and "lost its tail" in out, out
    code, out, _ = run(capsys, copy, "verify", "--against", original["tip"])
    assert code == 1 and "the log ends before position" in out, out
    code, _, err = run(capsys, copy, "get", original["merged"])
    assert code == 2 and "not found" in err
    code, out, _ = run(capsys, copy, "--json", "add", "written after the cut")
    added = json.loads(out)["memory_ids"][0]
    code, out, _ = run(capsys, copy, "--json", "get", added)
    assert code == 0 and json.loads(out)["memory"] == "written after the cut"


def test_an_older_log_put_back_and_written_past_the_projections_fails_verify_and_is_not_served(capsys, tmp_path):
    """An older ``events.db`` put back, then written past the projections' checkpoint before any start (an
    import): the chain verifies, but the projections hold the lost events at positions the log now gives to
    others. ``verify`` names it, and the next start rebuilds them rather than serve the lost memories and
    skip the new ones."""
    data, other = tmp_path / "data", tmp_path / "other"
    ctx = CommandContext(tenant="t")
    with MemoryService.open(data) as svc:
        kept = svc.run(svc.memories.add, ctx, [MemoryContent(memory="written before the backup")]).memory_ids[0]
        source, backup = sqlite3.connect(data / "events.db"), sqlite3.connect(tmp_path / "backup.db")
        source.backup(backup)
        source.close(), backup.close()
        lost = [svc.run(svc.memories.add, ctx, [MemoryContent(memory=f"lost with the tail {n}")]).memory_ids[0] for n in range(3)]
    with MemoryService.open(other) as svc:
        imported = [svc.run(svc.memories.add, ctx, [MemoryContent(memory=f"imported later {n}")]).memory_ids[0] for n in range(5)]
    export, keys = tmp_path / "other.jsonl", tmp_path / "other.keys"
    assert run(capsys, other, "export", "-o", export, "--with-keys", keys)[0] == 0
    for suffix in ("-wal", "-shm"):
        (data / f"events.db{suffix}").unlink(missing_ok=True)
    shutil.copyfile(tmp_path / "backup.db", data / "events.db")
    code, _, err = run(capsys, data, "import", export, "--keys", keys)
    assert code == 0, err  # opens the log only: the projections are not looked at
    code, out, _ = run(capsys, data, "verify")
    assert code == 1 and "projections.db was built from events the log does not hold" in out, out
    for memory_id in lost:
        code, _, err = run(capsys, data, "--tenant", "t", "get", memory_id)
        assert code == 2 and "not found" in err, err
    for memory_id in [kept, *imported]:
        code, out, err = run(capsys, data, "--tenant", "t", "--json", "get", memory_id)
        assert code == 0, err
    code, out, _ = run(capsys, data, "verify")
    assert code == 0, out


@pytest.mark.parametrize("command", [["verify"], ["digest"], ["log"], ["stats"], ["export"]])
def test_a_missing_data_dir_is_refused_not_created(capsys, tmp_path, command):
    missing = tmp_path / "typo"
    code, out, err = run(capsys, missing, *command)
    assert code == 2 and err.startswith("mnemolog: error: no log at") and err.count("\n") == 1 and out == ""
    assert not missing.exists()


def test_a_refused_import_writes_no_keys(capsys, copy, tmp_path):
    export, keys = tmp_path / "log.jsonl", tmp_path / "log.keys"
    assert run(capsys, copy, "export", "-o", export, "--with-keys", keys)[0] == 0
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(export.read_text().splitlines(keepends=True)[:5]))
    fresh = tmp_path / "fresh"
    code, _, err = run(capsys, fresh, "import", cut, "--keys", keys)
    assert code == 2 and "nothing written" in err
    found = fresh / "keys.db"
    if found.exists():
        conn = sqlite3.connect(found)
        assert conn.execute("SELECT count(*) FROM data_keys").fetchone()[0] == 0
        conn.close()
    code, _, _ = run(capsys, fresh, "import", export, "--keys", keys)  # the whole file, accepted: its keys too
    assert code == 0 and run(capsys, fresh, "verify")[0] == 0
