"""The ``mnemolog`` CLI: migrate, log, verify, digest, export/import, stats, bench append."""

from __future__ import annotations

import json

from mnemolog.eventstore import migrate
import os
import queue
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from mnemolog.eventstore import ANY, EventStore, Metadata
from mnemolog.eventstore.chain import StoredRow
from mnemolog.eventstore.events import DomainEvent, encode_payload, encoder, type_name
from mnemolog.eventstore.ids import new_id
from mnemolog.eventstore.recorder import PendingEvent, PendingWrite
from mnemolog.tools.cli import main

MNEMOLOG = Path(sys.executable).with_name("mnemolog")


class CliLogNoted(DomainEvent, frozen=True):
    text: str


class CliLogFlagged(DomainEvent, frozen=True):
    flag: str


# (stream, event, tenant, recorded_at, correlation id)
HISTORY = [
    ("mem-1", CliLogNoted(text="alpha"), "acme", "2025-01-01T00:00:00.000000Z", None),
    ("mem-1", CliLogNoted(text="beta"), "acme", "2025-03-01T00:00:00.000000Z", "corr-9"),
    ("mem-2", CliLogFlagged(flag="red"), "globex", "2025-06-01T00:00:00.000000Z", None),
    ("mem-1", CliLogNoted(text="gamma"), "acme", "2025-09-01T00:00:00.000000Z", None),
    ("mem-3", CliLogFlagged(flag="blue"), "globex", "2026-01-01T00:00:00.000000Z", "corr-9"),
]


def record(store: EventStore, stream, event, tenant, at, correlation) -> None:
    meta = encoder.encode(Metadata(correlation_id=correlation)).decode()
    pending = PendingEvent(new_id(), type_name(event), 1, tenant, encode_payload(event).decode(), meta, correlation, at)
    store.append_records([PendingWrite(stream, ANY, [pending])])


@pytest.fixture
def data(tmp_path) -> Path:
    path = tmp_path / "data"
    with EventStore.open(path) as store:
        for entry in HISTORY:
            record(store, *entry)
    return path


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def positions(out: str) -> list[int]:
    return [json.loads(line)["position"] for line in out.splitlines()]


def assert_one_line_error(err: str) -> None:
    assert err.startswith("mnemolog: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err


# -- migrate ------------------------------------------------------------------


def test_migrate_prints_the_revision(tmp_path, capsys):
    code, out, _ = run(capsys, "--data-dir", tmp_path / "fresh", "migrate")
    head = migrate.head_revision()
    assert code == 0 and out.startswith(f"schema revision {head}")
    code, out, _ = run(capsys, "migrate", "--data-dir", tmp_path / "fresh", "--json")
    assert code == 0 and json.loads(out) == {"revision": head, "previous": head, "head": head, "migrated": False, "restored": []}


def test_a_log_migrated_by_a_newer_mnemolog_is_one_line_naming_its_revision(data, capsys):
    """Every command, migrate included, died on alembic's "Can't locate revision" traceback (exit 1)."""
    conn = sqlite3.connect(data / "events.db")
    with conn:
        conn.execute("UPDATE alembic_version SET version_num = '0099_from_a_newer_mnemolog'")
    conn.close()
    for argv in (["migrate"], ["verify"], ["export"], ["add", "a memory"], ["log"]):
        code, out, err = run(capsys, "--data-dir", data, *argv)
        assert code == 2 and out == "", (argv, out)
        assert_one_line_error(err)
        assert "'0099_from_a_newer_mnemolog'" in err and "newer mnemolog" in err and migrate.head_revision() in err, err
    conn = sqlite3.connect(data / "events.db")
    assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [("0099_from_a_newer_mnemolog",)]  # left as it was
    conn.close()


def test_data_dir_comes_from_the_environment(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MNEMOLOG_DATA_DIR", str(tmp_path / "env-data"))
    assert run(capsys, "migrate")[0] == 0
    assert (tmp_path / "env-data" / "events.db").exists()
    assert run(capsys, "digest")[0] == 0


# -- log ----------------------------------------------------------------------


def test_log_table(data, capsys):
    code, out, _ = run(capsys, "--data-dir", data, "log")
    assert code == 0
    header, *rows = out.splitlines()
    assert header.split() == ["POSITION", "RECORDED_AT", "TENANT", "STREAM@VERSION", "TYPE", "PAYLOAD"]
    assert len(rows) == 5
    assert rows[3].split() == ["4", "2025-09-01T00:00:00.000000Z", "acme", "mem-1@3", "CliLogNoted", "text=gamma"]
    # Aligned: every column starts where its header does.
    start = header.index("TYPE")
    assert all(row[start:].startswith(("CliLog",)) for row in rows)


def test_log_json_decodes_the_payload(data, capsys):
    code, out, _ = run(capsys, "log", "--data-dir", data, "--json")
    assert code == 0
    events = [json.loads(line) for line in out.splitlines()]
    assert [e["position"] for e in events] == [1, 2, 3, 4, 5]
    assert events[1]["payload"] == {"type": "CliLogNoted", "text": "beta"}
    assert events[1]["metadata"] == {"correlation_id": "corr-9"}
    assert events[2]["stream_id"] == "mem-2" and events[2]["tenant"] == "globex"


@pytest.mark.parametrize(
    "filters, expected",
    [
        (["--stream", "mem-1"], [1, 2, 4]),
        (["--type", "CliLogFlagged"], [3, 5]),
        (["--type", "CliLogFlagged", "--type", "CliLogNoted"], [1, 2, 3, 4, 5]),
        (["--tenant", "globex"], [3, 5]),
        (["--after", "2", "--until", "4"], [3, 4]),
        (["--since", "2025-03-01T00:00:00Z"], [2, 3, 4, 5]),
        (["--until-time", "2025-06-01T00:00:00Z"], [1, 2, 3]),
        (["--since", "2025-02-01", "--until-time", "2025-07-01T00:00:00Z"], [2, 3]),
        (["--correlation", "corr-9"], [2, 5]),
        (["--limit", "2"], [1, 2]),
        (["--tenant", "acme", "--after", "1", "--limit", "1"], [2]),
    ],
)
def test_log_filters(data, capsys, filters, expected):
    code, out, _ = run(capsys, "--data-dir", data, "log", "--json", *filters)
    assert code == 0
    assert positions(out) == expected


def test_log_bad_arguments_exit_2(data, capsys):
    for argv in (
        ["log", "--since", "yesterday"], ["log", "--after", "-3"], ["log", "--follow", "--until", "3"],
        ["log", "--after", "10", "--until", "5"], ["log", "--since", "2025-01-02", "--until-time", "2025-01-01"],
    ):
        code, _, err = run(capsys, "--data-dir", data, *argv)
        assert code == 2
        assert_one_line_error(err)
    code, out, err = run(capsys, "--data-dir", data, "log", "--type", "MemoryAdd")  # misspelt: not "(no events)"
    assert code == 2 and out == "" and "unknown event type(s) 'MemoryAdd'" in err and "MemoryAdded" in err
    assert_one_line_error(err)


@pytest.mark.parametrize(
    "argv",
    [["log", "--after"], ["log", "--until"], ["verify", "--from"], ["verify", "--to"]],
    ids=lambda argv: " ".join(argv),
)
def test_a_position_past_the_largest_the_log_numbers_is_refused_as_it_is_parsed(data, capsys, argv):
    """A position beyond 2**63 - 1 reached SQLite and failed there: a traceback (OverflowError)."""
    code, out, err = run(capsys, "--data-dir", data, *argv, 2**63)
    assert code == 2 and out == "" and f"argument {argv[1]}" in err and str(2**63 - 1) in err
    assert_one_line_error(err)
    code, _, err = run(capsys, "--data-dir", data, *argv, 2**63 - 1)
    assert code in (0, 1) and "Traceback" not in err, err


def test_log_follow_in_process(data, capsys):
    codes = []
    follower = threading.Thread(target=lambda: codes.append(main(["--data-dir", str(data), "log", "--follow", "--json", "--limit", "6"])))
    follower.start()
    time.sleep(0.3)
    with EventStore.open(data) as store:
        store.append("mem-4", [CliLogNoted(text="live")], tenant="acme")
    follower.join(timeout=15)
    assert not follower.is_alive() and codes == [0]
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["position"] for e in lines] == [1, 2, 3, 4, 5, 6]
    assert lines[-1]["payload"] == {"type": "CliLogNoted", "text": "live"}


# -- verify / digest ------------------------------------------------------------


def test_verify_ok_and_digest(data, capsys):
    code, out, _ = run(capsys, "--data-dir", data, "digest")
    assert code == 0
    digest = out.strip()
    assert digest.startswith("5:") and len(digest) == 66
    code, out, _ = run(capsys, "--data-dir", data, "verify")
    assert code == 0 and out.strip() == f"ok: 5 events, tip {digest}"
    code, out, _ = run(capsys, "--data-dir", data, "digest", "--json")
    assert json.loads(out) == {"position": 5, "hash": digest[2:]}
    assert run(capsys, "--data-dir", data, "verify", "--against", digest)[0] == 0
    code, out, _ = run(capsys, "--data-dir", data, "verify", "--from", "2", "--to", "3", "--json")
    assert code == 0 and json.loads(out)["checked"] == 2


def test_verify_beside_a_server_that_writes_raises_no_false_alarm(tmp_path, capsys, monkeypatch):
    """The projections a server keeps are the witness of a cut tail: they are read before the log's head,
    so a server that appends and projects between the two reads is not taken for a log that lost its tail."""
    from mnemolog.eventstore.commands import CommandContext
    from mnemolog.eventstore.model import MemoryContent
    from mnemolog.projections.service import MemoryService

    path = tmp_path / "data"
    server = MemoryService.open(path)
    server.run(server.memories.add, CommandContext(tenant="t"), [MemoryContent(memory="before")])
    real = EventStore.last_position
    writing = threading.local()

    def head_then_the_server_writes(self, *args, **kwargs):
        found = real(self, *args, **kwargs)
        if not getattr(writing, "on", False):
            writing.on = True
            try:  # the server appends and projects right after this read
                server.run(server.memories.add, CommandContext(tenant="t"), [MemoryContent(memory="meanwhile")])
            finally:
                writing.on = False
        return found

    monkeypatch.setattr(EventStore, "last_position", head_then_the_server_writes)
    try:
        code, out, _ = run(capsys, "--data-dir", path, "verify")
        assert code == 0 and out.startswith("ok: "), out
        code, out, _ = run(capsys, "--data-dir", path, "projections", "--json")
        assert code == 0 and all(json.loads(line)["lag"] >= 0 for line in out.splitlines()), out
    finally:
        monkeypatch.undo()
        server.close()


def test_verify_of_a_range_the_log_does_not_reach_fails(data, capsys):
    """``--to`` beyond the head is not "ok": the positions asked for are not there (a lost tail looks just so);
    ``--from`` after ``--to`` is bad input."""
    code, out, _ = run(capsys, "--data-dir", data, "verify", "--to", "999")
    assert code == 1 and out.startswith("broken at position ") and "before position 999" in out, out
    code, out, _ = run(capsys, "--data-dir", data, "verify", "--to", "999", "--json")
    assert code == 1 and json.loads(out)["ok"] is False
    code, out, err = run(capsys, "--data-dir", data, "verify", "--from", "3", "--to", "2")
    assert code == 2 and out == "" and "--from 3 is after --to 2" in err
    assert_one_line_error(err)


@pytest.mark.parametrize("start", [6, 7, 20])
def test_verify_from_past_the_head_names_where_the_log_ends(data, capsys, start):
    """On a log of 5 events, ``--from 6`` said the log ends at 5, but ``--from 7`` said "broken at position 6:
    position 6 is missing" and ``--from 20`` "broken at position 19": the first missing position is 6 each time."""
    code, out, _ = run(capsys, "--data-dir", data, "verify", "--from", start)
    assert code == 1 and out.startswith("broken at position 6: the log ends at position 5") and f"before position {start}" in out, out


def test_verify_against_a_different_digest_fails(data, capsys):
    code, out, _ = run(capsys, "--data-dir", data, "verify", "--against", "5:" + "a" * 64)
    assert code == 1 and "position 5" in out


def test_verify_against_malformed_digest_exits_2(data, capsys):
    code, _, err = run(capsys, "--data-dir", data, "verify", "--against", "five:abc")
    assert code == 2
    assert_one_line_error(err)


def test_verify_names_the_tampered_position(data, tmp_path, capsys):
    copy = tmp_path / "copy"
    shutil.copytree(data, copy)
    conn = sqlite3.connect(copy / "events.db")
    conn.execute("DROP TRIGGER events_no_update")
    conn.execute("UPDATE events SET payload = replace(payload, 'gamma', 'GAMMA') WHERE position = 4")
    conn.commit()
    conn.close()
    code, out, _ = run(capsys, "--data-dir", copy, "verify")
    assert code == 1
    assert out.startswith("broken at position 4:")
    code, out, _ = run(capsys, "--data-dir", copy, "verify", "--json")
    assert code == 1 and json.loads(out)["broken_at"] == 4
    assert run(capsys, "--data-dir", data, "verify")[0] == 0  # the original is untouched


def test_a_dropped_trigger_fails_verify_and_migrate_restores_it(data, capsys):
    with sqlite3.connect(data / "events.db") as conn:
        conn.execute("DROP TRIGGER events_no_update")
    conn.close()
    code, out, _ = run(capsys, "--data-dir", data, "verify")
    assert code == 1
    assert "guard missing: trigger events_no_update on events is missing" in out
    code, out, _ = run(capsys, "--data-dir", data, "verify", "--json")
    assert code == 1
    assert json.loads(out)["guards"] == [{"table": "events", "trigger": "events_no_update", "problem": "missing"}]

    code, out, _ = run(capsys, "--data-dir", data, "migrate")
    assert code == 0
    assert "up to date" not in out
    assert "restored events_no_update on events (it was missing)" in out
    assert run(capsys, "--data-dir", data, "verify")[0] == 0
    code, out, _ = run(capsys, "--data-dir", data, "migrate", "--json")
    assert json.loads(out)["restored"] == []
    with sqlite3.connect(data / "events.db") as conn:
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            conn.execute("UPDATE events SET tenant = 'x'")
    conn.close()


def test_an_altered_trigger_fails_verify_and_migrate_restores_it(data, capsys):
    with sqlite3.connect(data / "events.db") as conn:
        conn.execute("DROP TRIGGER event_spans_no_delete")
        conn.execute("CREATE TRIGGER event_spans_no_delete BEFORE DELETE ON event_spans WHEN 0 BEGIN SELECT 1; END")
    conn.close()
    code, out, _ = run(capsys, "--data-dir", data, "verify")
    assert code == 1 and "event_spans_no_delete on event_spans is altered" in out
    code, out, _ = run(capsys, "--data-dir", data, "migrate", "--json")
    assert json.loads(out)["restored"] == [{"table": "event_spans", "trigger": "event_spans_no_delete", "problem": "altered"}]
    assert run(capsys, "--data-dir", data, "verify")[0] == 0


def _rehash_after_editing(path: Path, position: int) -> None:
    """Edit one payload, then recompute every hash, triggers dropped and put back."""
    from mnemolog.eventstore.chain import GENESIS_HASH, expected_hash
    from mnemolog.eventstore.dialects import append_only_triggers
    from mnemolog.eventstore.log_reads import _COLUMNS

    conn = sqlite3.connect(path / "events.db", isolation_level=None)
    triggers = append_only_triggers("sqlite")
    for trigger in triggers:
        conn.execute(trigger.drop)
    conn.execute("UPDATE events SET payload = replace(payload, '\"text\":\"', '\"text\":\"edited ') WHERE position = ?", (position,))
    prev = GENESIS_HASH
    columns = ", ".join(c.name for c in _COLUMNS)
    for row in conn.execute(f"SELECT {columns} FROM events ORDER BY position").fetchall():
        digest = expected_hash(StoredRow(*row[:-2], prev, ""))
        conn.execute("UPDATE events SET prev_hash = ?, hash = ? WHERE position = ?", (prev, digest, row[0]))
        prev = digest
    for trigger in triggers:
        conn.execute(trigger.create)
    conn.close()


def test_verify_against_an_export_and_a_second_digest_names_the_first_difference(data, tmp_path, capsys):
    kept = tmp_path / "kept.jsonl"
    assert run(capsys, "--data-dir", data, "export", "-o", kept)[0] == 0
    early = run(capsys, "--data-dir", data, "verify", "--to", "1", "--json")[1]
    early = f"1:{json.loads(early)['tip_hash']}"
    tip = run(capsys, "--data-dir", data, "digest")[1].strip()
    _rehash_after_editing(data, 4)
    assert run(capsys, "--data-dir", data, "verify")[0] == 0  # the forged chain holds together

    code, out, _ = run(capsys, "--data-dir", data, "verify", "--against", tip)
    assert code == 1
    assert out.startswith("broken at position 5: hash at the digest's position differs from the digest")
    assert "first difference: the log differs somewhere in positions 1..5" in out

    code, out, _ = run(capsys, "--data-dir", data, "verify", "--against", tip, "--against", early)
    assert code == 1
    assert out.startswith("broken at position 5:")
    assert "somewhere in positions 2..5" in out

    code, out, _ = run(capsys, "--data-dir", data, "verify", "--against", kept)
    assert code == 1
    assert "first difference: position 4 differs: payload differs from the export" in out
    code, out, _ = run(capsys, "--data-dir", data, "verify", "--against", kept, "--json")
    found = json.loads(out)
    assert (found["broken_at"], found["differs_at"], found["unchanged_through"]) == (5, 4, 3)


@pytest.mark.parametrize("content", [b"not json\n", b'{"position": 1}\n'])
def test_verify_against_a_malformed_export_exits_2(data, tmp_path, capsys, content):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(content)
    code, _, err = run(capsys, "--data-dir", data, "verify", "--against", bad)
    assert code == 2
    assert_one_line_error(err)
    assert "line 1" in err


@pytest.mark.parametrize("keep", ["nothing", "the header", "the first event", "all but the footer"])
def test_verify_against_an_export_cut_short_exits_2(data, tmp_path, capsys, keep):
    """A kept export cut short (an empty file, one without its footer) was taken as the whole reference: ``verify``
    compared the rows it still held, or none, and said "ok" for the log it was kept to check."""
    kept = tmp_path / "kept.jsonl"
    assert run(capsys, "--data-dir", data, "export", "-o", kept)[0] == 0
    lines = kept.read_bytes().splitlines(keepends=True)
    cut = {"nothing": [], "the header": lines[:1], "the first event": lines[:2], "all but the footer": lines[:-1]}[keep]
    kept.write_bytes(b"".join(cut))
    code, out, err = run(capsys, "--data-dir", data, "verify", "--against", kept)
    assert code == 2 and out == "", (code, out)
    assert_one_line_error(err)
    assert str(kept) in err and ("footer" in err or "empty" in err), err


def test_verify_against_a_missing_file_exits_2(data, tmp_path, capsys):
    code, _, err = run(capsys, "--data-dir", data, "verify", "--against", tmp_path / "nowhere.jsonl")
    assert code == 2
    assert_one_line_error(err)


# -- export / import ------------------------------------------------------------


def test_export_import_round_trip(data, tmp_path, capsys):
    dump = tmp_path / "log.jsonl"
    code, out, _ = run(capsys, "--data-dir", data, "export", "-o", dump)
    assert code == 0 and out.strip() == f"exported 5 events to {dump}"
    fresh = tmp_path / "fresh"
    code, out, _ = run(capsys, "--data-dir", fresh, "import", dump)
    assert code == 0
    assert out.strip() == "read 5 events: imported 5, skipped 0 already present; 0 idempotency keys recorded; tenants: acme, globex"
    with EventStore.open(data) as a, EventStore.open(fresh) as b:
        rows_a = [r for rows in a.iter_rows() for r in rows]
        rows_b = [r for rows in b.iter_rows() for r in rows]
        assert [r.event_id for r in rows_a] == [r.event_id for r in rows_b]
        assert [r.payload for r in rows_a] == [r.payload for r in rows_b]
        assert a.digest() == b.digest()
    code, out, _ = run(capsys, "--data-dir", fresh, "import", dump, "--json")
    assert code == 0
    assert json.loads(out) == {"read": 5, "imported": 0, "skipped_existing": 5, "tenants": ["acme", "globex"], "idempotency_keys": 0}


def test_an_import_overtaken_by_another_import_of_the_same_file_says_to_run_it_again(data, tmp_path, capsys, monkeypatch):
    """Two imports of one file at once: the one overtaken stopped on "stream ... is at version 1, expected 0", which
    reads as a broken log. It says that another writer got there first, that nothing was duplicated, and that
    running it again finishes it; run again, it does, and every event is there once."""
    from mnemolog.eventstore import exchange

    dump = tmp_path / "log.jsonl"
    assert run(capsys, "--data-dir", data, "export", "-o", dump)[0] == 0
    target = tmp_path / "target"
    assert run(capsys, "--data-dir", target, "migrate")[0] == 0
    writes = exchange._writes

    def overtaken(lines):
        monkeypatch.setattr(exchange, "_writes", writes)
        with EventStore.open(target) as other, open(dump, "rb") as again:
            exchange.import_(other, again)  # the other import, between this one's check and its first write
        return writes(lines)

    monkeypatch.setattr(exchange, "_writes", overtaken)
    code, out, err = run(capsys, "--data-dir", target, "import", dump)
    assert code == 2 and out == ""
    assert_one_line_error(err)
    assert "another" in err and "run the import again" in err, err
    assert run(capsys, "--data-dir", target, "import", dump)[0] == 0
    with EventStore.open(data) as a, EventStore.open(target) as b:
        assert a.digest() == b.digest() and b.verify().ok


def test_a_compressed_export_is_refused_saying_so(data, tmp_path, capsys):
    """``import log.jsonl.gz`` was refused as "JSON is malformed: invalid character (byte 0)", as if the file were damaged."""
    import gzip

    dump = tmp_path / "log.jsonl"
    assert run(capsys, "--data-dir", data, "export", "-o", dump)[0] == 0
    packed = tmp_path / "log.jsonl.gz"
    packed.write_bytes(gzip.compress(dump.read_bytes()))
    for argv in (["--data-dir", tmp_path / "fresh", "import", packed], ["--data-dir", data, "verify", "--against", packed]):
        code, out, err = run(capsys, *argv)
        assert code == 2 and out == ""
        assert_one_line_error(err)
        assert "line 1" in err and "gzip" in err and "zcat" in err, err
    assert not (tmp_path / "fresh").exists()


def test_export_one_tenant_to_stdout(data, capsysbinary):
    assert main(["--data-dir", str(data), "export", "--tenant", "acme"]) == 0
    lines = capsysbinary.readouterr().out.splitlines()[1:-1]  # between the header and the footer
    assert [json.loads(line)["position"] for line in lines] == [1, 2, 4]


def test_import_of_a_tampered_file_is_refused(data, tmp_path, capsys):
    dump = tmp_path / "log.jsonl"
    assert run(capsys, "--data-dir", data, "export", "-o", dump)[0] == 0
    dump.write_bytes(dump.read_bytes().replace(b'"text":"gamma"', b'"text":"GAMMA"'))
    fresh = tmp_path / "fresh"
    code, out, err = run(capsys, "--data-dir", fresh, "import", dump)
    assert code == 2 and out == ""
    assert_one_line_error(err)
    assert "line 5" in err and "nothing written" in err
    assert not fresh.exists()  # nothing written: not even a new, empty log
    code, out, _ = run(capsys, "--data-dir", fresh, "import", dump, "--rehash")
    assert code == 0 and "imported 5" in out
    assert run(capsys, "--data-dir", fresh, "verify")[0] == 0


def test_import_of_a_malformed_file_exits_2(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"position": 1,\n')
    code, _, err = run(capsys, "--data-dir", tmp_path / "d", "import", bad)
    assert code == 2
    assert_one_line_error(err)
    assert "line 1" in err


def test_unknown_subcommand_exits_2(capsys):
    code, _, err = run(capsys, "frobnicate")
    assert code == 2
    assert_one_line_error(err)


# -- stats / bench --------------------------------------------------------------


def test_stats(data, capsys):
    code, out, _ = run(capsys, "--data-dir", data, "stats", "--json")
    assert code == 0
    stats = json.loads(out)
    assert stats["events"] == 5 and stats["streams"] == 3
    assert stats["by_type"] == {"CliLogNoted": 3, "CliLogFlagged": 2}
    assert stats["by_tenant"] == {"acme": 3, "globex": 2}
    assert stats["first_recorded_at"].startswith("2025-01-01") and stats["file_bytes"] > 0
    code, out, _ = run(capsys, "--data-dir", data, "stats")
    assert code == 0 and "events.db" in out and "CliLogFlagged" in out


def test_bench_append_smoke(tmp_path, capsys):
    code, out, _ = run(capsys, "bench", "append", "--n", "150", "--synchronous", "normal", "--tmp-dir", tmp_path)
    assert code == 0
    pairs = dict(item.split("=") for item in out.strip().splitlines()[-1].split())
    for key in ("append_b1000_eps", "raw_b1000_eps", "ratio_b1000", "append_b1_eps", "read_eps"):
        assert float(pairs[key + "_normal"]) > 0
    for batch in (1, 100, 1000):  # each ratio compares the log with the raw limit measured in the same run
        ratio = float(pairs[f"append_b{batch}_eps_normal"]) / float(pairs[f"raw_b{batch}_eps_normal"])
        assert float(pairs[f"ratio_b{batch}_normal"]) == pytest.approx(ratio, rel=0.01, abs=0.002)
    # decoded reads against sqlite3 + msgspec over the same rows, in the same run
    ratio = float(pairs["read_eps_normal"]) / float(pairs["raw_read_eps_normal"])
    assert float(pairs["read_ratio_normal"]) == pytest.approx(ratio, rel=0.01, abs=0.002)
    assert "median of 3 runs per case" in out
    assert "raw sqlite3 fetch + msgspec decode" in out and " 150 " in out.split("raw sqlite3 fetch + msgspec decode")[1].split("\n")[0]
    assert list(tmp_path.iterdir()) == []  # the temporary directory is gone


def test_benches_refuse_fewer_than_three_runs(capsys):
    for argv in (["bench", "append", "--n", "10", "--repeat", "2"], ["bench", "graph", "--runs", "1"], ["bench", "rebuild", "--runs", "2"]):
        code, _, err = run(capsys, *argv)
        assert code == 2 and "at least 3" in err and len(err.strip().splitlines()) == 1, argv


# -- as a real process ------------------------------------------------------------


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["MNEMOLOG_SUBSCRIBE_POLL_SECONDS"] = "0.1"
    env.pop("MNEMOLOG_LOG_URL", None)
    return env


def test_console_script(data, tmp_path):
    def mnemolog(*argv):
        return subprocess.run([str(MNEMOLOG), *map(str, argv)], capture_output=True, text=True, env=cli_env(), timeout=60)

    done = mnemolog("--data-dir", data, "log", "--json", "--type", "CliLogFlagged")
    assert done.returncode == 0, done.stderr
    assert positions(done.stdout) == [3, 5]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json at all\n")
    done = mnemolog("--data-dir", tmp_path / "d", "import", bad)
    assert done.returncode == 2
    assert_one_line_error(done.stderr)
    done = mnemolog("nope")
    assert done.returncode == 2 and "Traceback" not in done.stderr


def test_follow_prints_events_appended_after_start(data):
    proc = subprocess.Popen(
        [str(MNEMOLOG), "--data-dir", str(data), "log", "--follow", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
    )
    lines: queue.Queue[bytes] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True)
    reader.start()
    try:
        seen = [json.loads(lines.get(timeout=30)) for _ in range(5)]  # the history first: it is running
        assert [e["position"] for e in seen] == [1, 2, 3, 4, 5]
        with EventStore.open(data) as store:
            store.append("mem-9", [CliLogNoted(text="after start")], tenant="acme")
        live = json.loads(lines.get(timeout=30))
        assert live["position"] == 6 and live["payload"] == {"type": "CliLogNoted", "text": "after start"}
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()
        proc.stderr.close()


@pytest.mark.parametrize(
    "filters, expected",
    [
        (["--since", "0999-01-01"], [1, 2, 3, 4, 5]),  # a year of three digits is before every event, not after
        (["--until-time", "0999-12-31T23:59:59Z"], []),
        (["--since", "0001-01-01T00:00:00Z"], [1, 2, 3, 4, 5]),  # the first moment there is: nothing before it
        (["--until-time", "0001-01-01T00:30:00+01:00"], []),  # before year 1 in UTC
        (["--since", "9999-12-31T23:59:59.999999-01:00"], []),  # after year 9999 in UTC
        (["--until-time", "9999-12-31T23:30:00-01:00"], [1, 2, 3, 4, 5]),
        (["--since", "2025-03-01t00:00:00z"], [2, 3, 4, 5]),  # RFC 3339's lowercase t and z
    ],
)
def test_log_times_at_the_ends_of_the_calendar(data, capsys, filters, expected):
    code, out, err = run(capsys, "--data-dir", data, "log", "--json", *filters)
    assert (code, err) == (0, "")
    assert positions(out) == expected


def test_verify_against_a_reference_says_how_far_it_reaches_and_warns_of_a_headerless_export(tmp_path):
    """A headerless export (the format before the header and footer) cut down to one row passed as "ok: 5 events",
    as the whole export did: the answer now says through which position the reference holds the log, and that
    such a file's end cannot be checked."""
    from tests.in_process import run_main

    data = tmp_path / "data"
    for i in range(5):
        assert run_main(["--data-dir", str(data), "add", f"memory {i}"]).returncode == 0
    full = tmp_path / "full.jsonl"
    assert run_main(["--data-dir", str(data), "export", "-o", str(full)]).returncode == 0
    bare = tmp_path / "bare.jsonl"
    bare.write_bytes(full.read_bytes().splitlines(keepends=True)[1])
    whole = run_main(["--data-dir", str(data), "verify", "--against", str(full)], text=True)
    assert whole.returncode == 0 and "unchanged through position 5\n" in whole.stdout and "header" not in whole.stdout
    cut = run_main(["--data-dir", str(data), "verify", "--against", str(bare)], text=True)
    assert cut.returncode == 0 and "unchanged through position 1 (the export has no header or footer" in cut.stdout
