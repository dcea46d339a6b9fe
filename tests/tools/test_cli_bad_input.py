"""The CLI under bad input and a hostile setup: one line on stderr, exit 2, nothing written.

Commands run through ``main`` in this process (:func:`tests.in_process.run_main`); those whose subject is the
process itself (a lock another process holds, bytes in ``argv``, closed standard streams, stdout on a full disk)
run as real subprocesses.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from tests.in_process import run_main

MNEMOLOG = Path(sys.executable).with_name("mnemolog")


def run(data: Path, *argv: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return run_main(["--data-dir", str(data), *argv], stdin=stdin)


def spawn(data: Path, *argv: str) -> subprocess.CompletedProcess:
    """``mnemolog --data-dir DATA *argv`` as a real subprocess."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMOLOG_")}
    return subprocess.run([str(MNEMOLOG), "--data-dir", str(data), *argv], capture_output=True, env=env, timeout=180)


def assert_refused(done: subprocess.CompletedProcess, *words: str) -> None:
    err = done.stderr.decode()
    assert done.returncode == 2 and err.startswith("mnemolog: error: ") and err.count("\n") == 1, (done.returncode, err)
    assert all(w in err for w in words), err


@pytest.fixture(scope="module")
def first_memory(tmp_path_factory) -> Path:
    """A data directory holding one memory, written by ``mnemolog add`` once for the module."""
    path = tmp_path_factory.mktemp("template") / "data"
    assert run(path, "add", "a first memory").returncode == 0
    return path


@pytest.fixture
def data(tmp_path, first_memory) -> Path:
    """A copy of ``first_memory`` of the test's own (a closed data directory is its files)."""
    path = tmp_path / "data"
    shutil.copytree(first_memory, path)
    return path


def head(data: Path) -> int:
    conn = sqlite3.connect(data / "events.db")
    try:
        return conn.execute("SELECT max(position) FROM events").fetchone()[0]
    finally:
        conn.close()


def test_an_import_of_a_missing_file_creates_no_data_dir(tmp_path):
    assert_refused(run(tmp_path / "fresh", "import", str(tmp_path / "nowhere.jsonl")), "nothing written", "no such file")
    assert not (tmp_path / "fresh").exists()


@pytest.mark.parametrize("body", [b"\xff\xfe\x00not utf-8\n", b'{"mnemolog_export":2,"scope":"log","tenant":null}\n\xc3\x28\n'])
def test_a_non_utf8_import_is_refused_whole(data, tmp_path, body):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(body)
    before = head(data)
    assert_refused(run(data, "import", str(bad)), "nothing written", "line")
    assert_refused(run(data, "import", "-", stdin=body), "nothing written", "line")
    assert head(data) == before


@contextlib.contextmanager
def held(path: Path) -> Iterator[None]:
    """The database ``path`` write-locked (``BEGIN EXCLUSIVE``) by a connection of this process for the block:
    another connection, of this process or another, finds it busy."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN EXCLUSIVE")
        yield
    finally:
        conn.close()  # the transaction rolled back


def test_a_locked_log_is_one_line_and_nothing_written(data):
    """Another process holds the log's write lock past the busy timeout (``MNEMOLOG_BUSY_TIMEOUT``): a write is an
    error line naming the log and saying to run it again, never a traceback; a read (``verify``) answers from its snapshot."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MNEMOLOG_")}, "MNEMOLOG_BUSY_TIMEOUT": "1"}
    with held(data / "events.db"):
        children = [
            subprocess.Popen([str(MNEMOLOG), "--data-dir", str(data), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
            for argv in (["add", "written while locked"], ["verify"])
        ]
        (out, err), (verified, _) = (child.communicate(timeout=180) for child in children)
    assert_refused(subprocess.CompletedProcess(children[0].args, children[0].returncode, out, err), "events.db", "busy", "run the command again")
    assert children[1].returncode == 0 and verified.startswith(b"ok: 1 event,"), verified
    assert head(data) == 1


@pytest.mark.parametrize(
    "name, argv",
    [("projections.db", ["rebuild"]), ("keys.db", ["add", "a memory of a new subject", "--subject", "u-2"]), ("auth.db", ["keys", "create", "--tenant", "default"])],
)
def test_every_database_of_the_data_directory_waits_for_a_lock_as_long_as_the_setting_says(data, name, argv):
    """``MNEMOLOG_BUSY_TIMEOUT`` held for the log alone: a lock on projections.db, keys.db or auth.db was waited
    for 30 s whatever it said, and the error named no file. Held by another connection past one second, each
    command gives up after about that second, in one line naming the file, and writes nothing."""
    assert run(data, "keys", "create", "--tenant", "default").returncode == 0  # auth.db made
    with held(data / name):
        began = time.monotonic()
        done = run_main(["--data-dir", str(data), *argv], env={"MNEMOLOG_BUSY_TIMEOUT": "1"})
        waited = time.monotonic() - began
    assert_refused(done, str(data / name), "busy", "run the command again")
    assert waited < 20, waited  # the default would have waited 30 s
    assert head(data) == 1


def test_an_import_of_documents_naming_a_missing_path_writes_nothing(data, tmp_path):
    good = tmp_path / "notes.md"
    good.write_text("# Notes\n\nThe river is wide.\n")
    before = head(data)
    assert_refused(run(data, "import", "docs", str(good), str(tmp_path / "typo.md"), "--root", str(tmp_path)), "no such file", "typo.md")
    assert head(data) == before


def test_an_entity_walk_out_of_its_bounds_is_refused_as_the_api_refuses_it(tmp_path):
    """``--limit -1`` silently dropped the last entity reached (a slice), and ``--depth`` had no bound the API has."""
    assert_refused(run(tmp_path / "data", "entity", "related", "e", "--limit", "-1"), "--limit", "1 to 1000")
    assert_refused(run(tmp_path / "data", "entity", "related", "e", "--depth", "99"), "--depth", "0 to 6")
    assert not (tmp_path / "data").exists()


MISTYPED = [
    ("get", "m-1"),
    ("history", "m-1"),
    ("working-memory",),
    ("update", "m-1", "--text", "new"),
    ("revert", "c-1"),
    ("rebuild",),
    ("projections",),
    ("organize", "--once"),
    ("relink",),
    ("entity", "find", "lisbon"),
]


def test_a_mistyped_data_dir_is_refused_and_left_absent(tmp_path, capsys, monkeypatch):
    """A command that reads, or changes what must already be there, refuses a data directory without a log:
    it neither answers from a new, empty one ("rebuilt 4 projections up to position 0") nor leaves one behind.
    One command runs as a subprocess, the others in this process (the same ``main``)."""
    from mnemolog.tools.cli import main

    missing = tmp_path / "typo"
    assert_refused(spawn(missing, "rebuild"), "no log at", str(missing / "events.db"))
    for name in [n for n in os.environ if n.startswith("MNEMOLOG_")]:
        monkeypatch.delenv(name)
    for argv in MISTYPED:
        code = main(["--data-dir", str(missing), *argv])
        out, err = capsys.readouterr()
        assert code == 2 and out == "" and err.startswith(f"mnemolog: error: no log at {missing / 'events.db'}") and err.count("\n") == 1, (argv, err)
        assert not missing.exists(), argv


def test_an_export_to_a_bad_place_writes_neither_file(tmp_path, capsys, monkeypatch):
    """``export --output``/``--with-keys`` naming a directory, or a file in a missing directory: one line naming
    the option and the path given (not a ``.partial`` the operator never named), exit 2, and no export left
    written when only the key file cannot be."""
    from mnemolog.tools.cli import main

    for name in [n for n in os.environ if n.startswith("MNEMOLOG_")]:
        monkeypatch.delenv(name)
    data = tmp_path / "data"
    assert main(["--data-dir", str(data), "add", "sealed for a subject", "--subject", "alice"]) == 0
    capsys.readouterr()
    out_file, keys_file = tmp_path / "out.jsonl", tmp_path / "keys.jsonl"
    cases = [
        (["--output", str(tmp_path)], ["--output", str(tmp_path), "is a directory"]),
        (["--output", str(tmp_path / "nowhere" / "out.jsonl")], ["--output", "no such directory"]),
        (["--output", str(out_file), "--with-keys", str(tmp_path / "nowhere" / "keys.jsonl")], ["--with-keys", "no such directory"]),
        (["--output", str(out_file), "--with-keys", str(tmp_path)], ["--with-keys", "is a directory"]),
    ]
    for argv, words in cases:
        code = main(["--data-dir", str(data), "export", *argv])
        out, err = capsys.readouterr()
        assert code == 2 and out == "" and err.startswith("mnemolog: error: ") and err.count("\n") == 1, (argv, err)
        assert all(w in err for w in words) and ".partial" not in err, (argv, err)
        assert not out_file.exists() and not list(tmp_path.glob("*.partial")), argv
    assert main(["--data-dir", str(data), "export", "--output", str(out_file), "--with-keys", str(keys_file)]) == 0
    assert out_file.is_file() and keys_file.is_file()
    assert main(["--data-dir", str(tmp_path / "other"), "import", str(tmp_path)]) == 2
    assert "is a directory, not an export" in capsys.readouterr().err and not (tmp_path / "other").exists()


@pytest.mark.parametrize("argv", [("--once",), ("--once", "--dry-run"), ()])
def test_organize_refuses_a_blank_or_unknown_tenant(data, argv):
    """A blank ``--tenant`` ("$TENANT" unset) clustered every tenant; a mistyped one organized nothing and said
    "0 decision(s) applied". Either is one line, exit 2, nothing written (the follow mode included)."""
    before = head(data)
    assert_refused(run(data, "organize", *argv, "--tenant", ""), "--tenant: must not be blank")
    assert_refused(run(data, "organize", *argv, "--tenant", "  "), "--tenant: must not be blank")
    assert_refused(run(data, "organize", *argv, "--tenant", "defualt"), "tenant 'defualt' not found")
    assert head(data) == before


def test_an_export_from_a_newer_mnemolog_is_refused_and_the_data_dir_keeps_working(data, tmp_path):
    """An event of a schema version this code cannot read was imported, and from then on every command failed on it."""
    from mnemolog.eventstore import EventStore
    from mnemolog.eventstore.exchange import export
    from mnemolog.eventstore.recorder import PendingEvent, PendingWrite

    payload = '{"type":"MemoryArchived","memory_id":"m-1","updated_at":"2026-01-01T00:00:00Z"}'
    with EventStore.open(tmp_path / "newer") as newer:
        newer.append_records([PendingWrite("memory-m-1", 0, [PendingEvent("0190f000-0000-7000-8000-000000000001", "MemoryArchived", 9, "default", payload, "{}", None)])])
        with open(tmp_path / "newer.jsonl", "wb") as out:
            export(newer, out)
    before = head(data)
    assert_refused(run(data, "import", str(tmp_path / "newer.jsonl")), "nothing written", "line 2 (position 1)", "schema version 9")
    assert_refused(run(data, "import", "--rehash", str(tmp_path / "newer.jsonl")), "nothing written", "schema version 9")
    assert head(data) == before
    assert run(data, "add", "still writable").returncode == 0


@pytest.mark.parametrize("made", [False, True], ids=["missing", "empty"])
def test_a_refused_import_leaves_a_new_data_dir_as_it_found_it(tmp_path, made):
    """``import refused, nothing written`` left a data directory with an empty log behind (a mistyped
    --data-dir, or a first import of a cut file), which later commands took for a real one."""
    target = tmp_path / "new" / "data"
    if made:
        target.mkdir(parents=True)
        (target / "notes.txt").write_text("mine")
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b'{"mnemolog_export":2,"scope":"log","tenant":null}\n{"position":1,"event_id"')
    assert_refused(run(target, "import", str(cut)), "nothing written", "line 2")
    assert_refused(run(target, "import", "-", stdin=b'{"x": 1}\n'), "nothing written", "line 1")
    if made:
        assert sorted(p.name for p in target.iterdir()) == ["notes.txt"]
    else:
        assert not (tmp_path / "new").exists()
    assert run(target, "add", "a first memory").returncode == 0  # the next command starts a log as usual


@pytest.mark.parametrize("value", ["0", "100001"])
def test_import_docs_refuses_a_chunk_size_no_memory_takes(tmp_path, value):
    """--max-chars past a memory's 100,000 characters: every long document failed on its own, exit 1, after a log was made."""
    doc = tmp_path / "long.txt"
    doc.write_text("word " * 30_000)
    target = tmp_path / "data"
    assert_refused(run(target, "import", "docs", str(doc), "--max-chars", value), "--max-chars must be 1 to 100000")
    assert not target.exists()


@pytest.mark.parametrize(
    "argv, shown",
    [
        (["add", b"caf\xe9"], r"caf\xe9"),
        (["add", "--tags", b"t\xff", "text"], r"t\xff"),
        (["import", "docs", b"notes-\xe9.md"], r"notes-\xe9.md"),
    ],
    ids=["text", "option", "path"],
)
def test_an_argument_that_is_not_utf8_is_named(data, argv, shown):
    """Python keeps such bytes as lone surrogates: the command failed later on "'utf-8' codec can't encode character
    '\\udce9' in position 3", naming neither the argument nor the bytes."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMOLOG_")}
    before = head(data)
    done = subprocess.run([os.fsencode(MNEMOLOG), b"--data-dir", os.fsencode(data), *[os.fsencode(a) if isinstance(a, str) else a for a in argv]], capture_output=True, env=env, timeout=60)
    assert_refused(done, "not valid UTF-8", shown)
    assert head(data) == before


def test_a_data_dir_that_is_not_utf8_is_refused_before_it_is_made(tmp_path):
    """It gave a traceback from the vector index (exit 1) and left a half-made data directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMOLOG_")}
    target = os.fsencode(tmp_path) + b"/data-\xff"
    done = subprocess.run([os.fsencode(MNEMOLOG), b"--data-dir", target, b"add", b"a memory"], capture_output=True, env=env, timeout=60)
    assert_refused(done, r"data-\xff", "not valid UTF-8")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("body, line", [(b'{"memory": "a"}\n\xff\n', 2), (b'{"memory": "caf\xe9"}\n', 1)])
def test_a_batch_line_that_is_not_utf8_is_named(data, body, line):
    before = head(data)
    assert_refused(run(data, "add", stdin=body), f"line {line}", "not valid UTF-8")
    assert head(data) == before


@pytest.mark.parametrize(
    "option, name",
    [
        ("--output", "events.db"),
        ("--with-keys", "keys.db"),
        ("--output", "projections.db"),
        ("--output", "events.db-wal"),
        ("--with-keys", "vectors.usearch"),
        ("--output", "vectors.usearch.json.tmp"),  # a save's checkpoint on its way
        ("--output", "vectors.usearch.damaged"),
        ("--output", "projections.db.damaged-wal"),
        ("--output", "projections.db.lock"),
        ("--output", "fts.postings.tmp"),
        ("--output", "backups/acme.jsonl"),  # a drop's backup
    ],
)
def test_an_export_never_writes_over_a_file_of_the_data_directory(data, tmp_path, option, name):
    """``export --output DATA/events.db`` replaced the log with its own export ("file is not a database" from then on),
    and ``--with-keys DATA/keys.db`` the key store with the key file: a typo destroyed the data directory."""
    (data / "backups").mkdir(exist_ok=True)
    before = {p.name: p.read_bytes() for p in data.iterdir() if p.is_file() and p.name != "events.db-shm"}
    argv = ["--output", str(data / name)] if option == "--output" else ["--output", str(tmp_path / "out.jsonl"), "--with-keys", str(data / name)]
    assert_refused(run(data, "export", *argv), option, name, "data directory")
    assert not (tmp_path / "out.jsonl").exists()
    assert all((data / n).read_bytes() == b for n, b in before.items() if n in ("keys.db", "vectors.usearch"))
    assert run(data, "verify").returncode == 0 and run(data, "add", "still here").returncode == 0


def test_an_export_never_writes_over_another_database(data, tmp_path):
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    assert_refused(run(data, "export", "--output", str(other)), "--output", "is a database")
    assert other.read_bytes().startswith(b"SQLite format 3\x00")


def test_an_export_read_from_a_pipe_is_imported(data, tmp_path):
    """``mnemolog import <(zcat log.jsonl.gz)`` names a pipe: it was refused as "no such file"."""
    export, keys = tmp_path / "log.jsonl", tmp_path / "log.keys"
    assert run(data, "export", "--output", str(export), "--with-keys", str(keys)).returncode == 0
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)

    def feed() -> None:
        with open(pipe, "wb") as out:
            out.write(export.read_bytes())

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        done = run(tmp_path / "copy", "import", str(pipe), "--keys", str(keys))
    finally:
        if writer.is_alive():  # the import never opened the pipe: open it here, so that the writer ends
            with open(os.open(pipe, os.O_RDONLY | os.O_NONBLOCK), "rb") as drain:
                writer.join(timeout=5)
                drain.read()
        writer.join(timeout=30)
    assert done.returncode == 0 and b"imported 1" in done.stdout, done.stderr


@pytest.mark.parametrize(
    "change",
    [{"state": None}, {"subject": None}, {"state": "stolen"}, {"state": 7}, {"subject": 7}, {"created_at": 5}],
    ids=["no-state", "no-subject", "unknown-state", "state-not-text", "subject-not-text", "time-not-text"],
)
def test_a_key_file_with_a_malformed_key_is_refused_and_leaves_nothing_behind(data, tmp_path, change):
    """A key record without its state or subject ended the import in a traceback (``KeyError``) after it had made
    the fresh data directory's log and key store; an unknown state was dropped without a word."""
    import json

    export, keys = tmp_path / "log.jsonl", tmp_path / "log.keys"
    assert run(data, "export", "--output", str(export), "--with-keys", str(keys)).returncode == 0
    header, first, *rest = keys.read_text().splitlines()
    row = json.loads(first)
    for field, value in change.items():
        row.pop(field) if value is None else row.__setitem__(field, value)
    keys.write_text("\n".join([header, json.dumps(row), *rest]) + "\n")
    fresh = tmp_path / "fresh"
    assert_refused(run(fresh, "import", str(export), "--keys", str(keys)), "nothing written", "line 2", "not a key record")
    assert not fresh.exists()


def test_an_export_to_a_pipe_is_written_through_it_never_over_it(data, tmp_path):
    """``export --output FIFO`` (or ``/dev/null``, ``>(gzip > log.gz)``) replaced the pipe or the device with a
    regular file holding the export (run as root, ``--output /dev/null`` replaced ``/dev/null``): a file that is
    no regular file is written through, and a key file is never written to one."""
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    reader = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)  # a reader is there, so the export's open does not wait
    try:
        done = run(data, "export", "--output", str(pipe))
        received = b""
        while chunk := _read_some(reader):
            received += chunk
    finally:
        os.close(reader)
    assert done.returncode == 0, done.stderr
    assert stat.S_ISFIFO(os.lstat(pipe).st_mode)
    lines = received.splitlines()
    assert lines[0].startswith(b'{"mnemolog_export":3') and lines[-1].startswith(b'{"mnemolog_export_end":true')
    assert_refused(run(data, "export", "--output", str(tmp_path / "out.jsonl"), "--with-keys", str(pipe)), "--with-keys", "not a regular file")
    assert stat.S_ISFIFO(os.lstat(pipe).st_mode) and not (tmp_path / "out.jsonl").exists()


@pytest.mark.skipif(not os.path.exists("/dev/full") or not stat.S_ISCHR(os.stat("/dev/full").st_mode), reason="needs /dev/full")
def test_an_export_to_a_full_disk_names_its_output_not_the_data_directory(data):
    """An export whose output could not be written (``export > /mnt/full/log.jsonl``) said that "the disk holding
    the data directory is full", sending the operator to free space where none was missing."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMOLOG_")}
    with open("/dev/full", "wb") as full:
        piped = subprocess.run([str(MNEMOLOG), "--data-dir", str(data), "export"], stdout=full, stderr=subprocess.PIPE, env=env, timeout=180)
    named = run(data, "export", "--output", "/dev/full")
    for done, where in ((piped, "stdout"), (named, "/dev/full")):
        assert_refused(done, "export", where, "No space left on device")
        assert "data directory" not in done.stderr.decode()
    assert run(data, "verify").returncode == 0


def test_an_export_or_import_over_a_closed_standard_stream_is_one_line(data, tmp_path):
    """``mnemolog export >&-`` and ``mnemolog import - <&-`` ended in a traceback (Python has no ``sys.stdout`` or
    ``sys.stdin`` then), the import after making the fresh data directory's log."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMOLOG_")}
    fresh = tmp_path / "fresh"
    for argv, fd, words in ((["--data-dir", str(data), "export"], 1, ("stdout", "--output")), (["--data-dir", str(fresh), "import", "-"], 0, ("stdin",))):
        done = subprocess.run([str(MNEMOLOG), *argv], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env=env, timeout=180, preexec_fn=lambda fd=fd: os.close(fd))  # fmt: skip
        assert_refused(done, "closed", *words)
    assert not fresh.exists()


def test_an_export_of_a_tenant_the_log_never_held_is_refused_and_writes_nothing(data, tmp_path):
    """``export --tenant acem`` (a typo) wrote an empty export and exited 0: a backup that holds nothing."""
    out = tmp_path / "acme.jsonl"
    assert_refused(run(data, "--tenant", "acem", "export", "--output", str(out)), "tenant 'acem'", "not found")
    assert not out.exists()
    assert_refused(run(data, "--tenant", "acem", "export"), "tenant 'acem'", "not found")
    assert run(data, "--tenant", "acme", "add", "an acme memory").returncode == 0
    assert run(data, "--tenant", "acme", "drop-tenant", "--yes").returncode == 0
    assert run(data, "--tenant", "acme", "export", "--output", str(out)).returncode == 0  # dropped, still in the log
    assert b'"tenant":"acme"' in out.read_bytes().splitlines()[1]


def _read_some(fd: int) -> bytes:
    try:
        return os.read(fd, 1 << 16)
    except BlockingIOError:
        return b""


@pytest.mark.parametrize("argv", [("forget", "--subject", "u-1", "--yes"), ("archive", "{memory}"), ("update", "{memory}", "--text", "new text")])
def test_a_reason_longer_than_the_api_takes_is_refused(data, argv):
    """The API caps a reason (recorded in the log) at 2,000 characters; the command line wrote any length."""
    import json

    memory = json.loads(run(data, "add", "a memory with a subject", "--subject", "u-1", "--json").stdout)["memory_ids"][0]
    before = head(data)
    assert_refused(run(data, *[a.format(memory=memory) for a in argv], "--reason", "x" * 2_001), "--reason", "at most 2,000 characters")
    assert head(data) == before


@pytest.mark.parametrize(
    "argv",
    [("add", "hello", "--tenant", ""), ("--tenant", "", "add", "hello"), ("log", "--tenant", " "), ("add", "hello", "--tenant", "t" * 256)],
    ids=["empty", "empty-before-the-command", "blank-filter", "too-long"],
)
def test_a_blank_or_overlong_tenant_is_refused_not_taken_for_the_default(data, argv):
    """``--tenant "$T"`` with ``T`` unset must not write into (or read) tenant ``default``."""
    before = head(data)
    assert_refused(run(data, *argv), "--tenant")
    assert head(data) == before

def test_a_blank_tenant_is_refused_by_every_command_that_takes_one(tmp_path, capsys):
    """``mnemolog --tenant "$TENANT" add ...`` with TENANT unset wrote into the default tenant (and read it back);
    ``log`` and ``export`` read a tenant named "" as if it were one."""
    from mnemolog.tools.cli import main

    data = str(tmp_path / "data")
    assert main(["--data-dir", data, "add", "a first memory"]) == 0
    capsys.readouterr()
    for argv in (["add", "a note for nobody"], ["get", "some-id"], ["log"], ["export"], ["working-memory"], ["drop-tenant", "--yes"]):
        for blank in ("", " "):
            assert main(["--data-dir", data, "--tenant", blank, *argv]) == 2 and main(["--data-dir", data, *argv, "--tenant", blank]) == 2
            err = capsys.readouterr().err
            assert err.count("\n") == 2 and err.count("--tenant: must not be blank") == 2, (argv, err)
    assert head(Path(data)) == 1


def test_a_blank_as_of_is_refused_not_read_as_the_head(tmp_path, capsys):
    """``--as-of "$POS"`` with POS unset answered with the head's state, as if no point in time had been asked for."""
    from mnemolog.tools.cli import main

    data = str(tmp_path / "data")
    assert main(["--data-dir", data, "--json", "add", "a first memory"]) == 0
    memory_id = json.loads(capsys.readouterr().out)["memory_ids"][0]
    for argv in (["get", memory_id], ["history", memory_id], ["working-memory"], ["entity", "find", "memory"]):
        for blank in ("", " "):
            assert main(["--data-dir", data, *argv, "--as-of", blank]) == 2, argv
            out, err = capsys.readouterr()
            assert out == "" and err.startswith("mnemolog: error: argument --as-of: must not be blank") and err.count("\n") == 1, (argv, err)


@pytest.mark.parametrize("preview", ["-1", "1001", "x"])
def test_a_relink_preview_out_of_its_bounds_is_refused_as_the_api_refuses_it(tmp_path, capsys, preview):
    """``--preview -1`` silently left the last edge and document pair out of the preview (a slice); the API takes 0 to 1000."""
    from mnemolog.tools.cli import main

    data = str(tmp_path / "data")
    assert main(["--data-dir", data, "add", "Ada works at Acme"]) == 0
    capsys.readouterr()
    assert main(["--data-dir", data, "relink", "--preview", preview]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("mnemolog: error: argument --preview") and "0 to 1000" in err and err.count("\n") == 1, err


@pytest.mark.parametrize("option, value", [("--collection", "c" * 201), ("--source-url", "https://e.org/" + "u" * 2000), ("--model", "m" * 201)])
def test_import_docs_refuses_metadata_longer_than_every_chunk_may_carry(tmp_path, option, value):
    """Every chunk carries the document's metadata: each file failed on its own (exit 1) after a log was made."""
    doc = tmp_path / "notes.txt"
    doc.write_text("Ada met Grace.\n")
    target = tmp_path / "data"
    assert_refused(run(target, "import", "docs", str(doc), "--root", str(tmp_path), option, value), option, "at most")
    assert not target.exists()


def test_a_blank_data_directory_or_tenant_is_refused_and_nothing_is_written(tmp_path, monkeypatch):
    """``MNEMOLOG_DATA_DIR=""`` wrote events.db and keys.db into the current directory, ``--data-dir ""`` fell back to
    ``./data`` and ``MNEMOLOG_TENANT="   "`` wrote to a tenant named by spaces: each is refused in one line."""
    monkeypatch.chdir(tmp_path)
    assert_refused(run_main(["add", "y"], env={"MNEMOLOG_DATA_DIR": ""}), "MNEMOLOG_DATA_DIR must not be blank")
    assert_refused(run_main(["add", "y"], env={"MNEMOLOG_DATA_DIR": "  "}), "MNEMOLOG_DATA_DIR must not be blank")
    assert_refused(run_main(["--data-dir", "", "add", "y"]), "--data-dir must not be blank")
    assert_refused(run_main(["--data-dir", str(tmp_path / "d"), "add", "y"], env={"MNEMOLOG_TENANT": "   "}), "MNEMOLOG_TENANT must not be blank")
    assert_refused(run_main(["--data-dir", str(tmp_path / "d"), "add", "y"], env={"MNEMOLOG_TENANT": ""}), "MNEMOLOG_TENANT must not be blank")
    assert list(tmp_path.iterdir()) == []
    done = run_main(["--data-dir", str(tmp_path / "d"), "--json", "add", "y"], env={"MNEMOLOG_TENANT": "acme"})
    assert done.returncode == 0 and json.loads(done.stdout)["memory_ids"]


@pytest.mark.parametrize("name", ["MNEMOLOG_AUTH", "MNEMOLOG_ORGANIZER_ENABLED"])
def test_a_blank_boolean_setting_stops_the_server_before_it_listens(tmp_path, name):
    """``MNEMOLOG_AUTH=`` was read as false: the server ran with authentication off."""
    assert_refused(run_main(["--data-dir", str(tmp_path / "d"), "serve", "--port", "0"], env={name: ""}), name, "expected a boolean")
    assert not (tmp_path / "d").exists()


def test_a_data_directory_that_is_a_file_or_a_dangling_link_is_named_so(tmp_path):
    """It failed as "File exists: PATH", which named neither the problem nor its fix."""
    (tmp_path / "file").write_text("not a directory")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert_refused(run(tmp_path / "file", "add", "x"), "file: not a directory")
    assert_refused(run(tmp_path / "loop", "add", "x"), "loop: a link that leads to no directory")
    assert_refused(run(tmp_path / "dangling", "migrate"), "dangling: a link that leads to no directory")
    assert not (tmp_path / "nowhere").exists()


def test_a_full_output_is_not_called_a_full_data_directory(first_memory):
    """``mnemolog log > /dev/full`` said the disk holding the data directory was full."""
    with open("/dev/full", "w") as full:
        done = subprocess.run([str(MNEMOLOG), "--data-dir", str(first_memory), "log"], stdout=full, stderr=subprocess.PIPE, timeout=120,
                              env={k: v for k, v in os.environ.items() if not k.startswith("MNEMOLOG_")})
    err = done.stderr.decode()
    assert done.returncode != 0 and "data directory" not in err and "no space left writing the command's output" in err, err


def test_import_options_that_contradict_or_do_not_apply_are_refused(tmp_path):
    """``import docs … --rehash`` (or ``--keys``) ignored the export's options, and ``--keys K --without-keys`` took one
    of two opposite asks without a word: each is refused in one line, before a data directory is made."""
    (tmp_path / "a.md").write_text("# A\n\nsome text\n")
    data = tmp_path / "data"
    assert_refused(run(data, "import", "docs", str(tmp_path / "a.md"), "--rehash"), "--rehash", "not 'import docs'")
    assert_refused(run(data, "import", "docs", str(tmp_path / "a.md"), "--keys", str(tmp_path / "k")), "--keys", "not 'import docs'")
    (tmp_path / "x.jsonl").write_text("")
    assert_refused(run(data, "import", str(tmp_path / "x.jsonl"), "--keys", str(tmp_path / "k"), "--without-keys"), "opposite things")
    assert not data.exists()


def test_relink_of_a_tenant_the_log_never_saw_is_refused_as_organize_is(first_memory):
    """``--tenant nosuch relink`` reported a relink of nothing, exit 0: a typo looked like a tenant with no mentions."""
    assert_refused(run(first_memory, "--tenant", "nosuch", "relink"), "relink: tenant 'nosuch' not found")
    assert_refused(run(first_memory, "organize", "--once", "--tenant", "nosuch"), "organize: tenant 'nosuch' not found")
    assert run(first_memory, "relink").returncode == 0


def test_a_key_file_that_is_missing_or_binary_is_named_without_python_error_text(tmp_path):
    """``import --keys /nonexistent`` said "[Errno 2] No such file or directory: ...", and a binary key file "'utf-8'
    codec can't decode bytes ...": one line each, naming the option and the file."""
    export = tmp_path / "x.jsonl"
    export.write_text("")
    missing = run(tmp_path / "data", "import", str(export), "--keys", str(tmp_path / "nowhere.keys"))
    assert_refused(missing, f"--keys {tmp_path / 'nowhere.keys'}: No such file or directory")
    assert "Errno" not in missing.stderr.decode()
    assert_refused(run(tmp_path / "data", "import", str(export), "--keys", ""), "--keys must not be blank")
    binary = tmp_path / "binary.keys"
    binary.write_bytes(b'{"mnemolog_keys": 1}\n\xff\xfe\x00 garbage\n')
    done = run(tmp_path / "data", "import", str(export), "--keys", str(binary))
    assert done.returncode == 2 and "codec" not in done.stderr.decode() and "not a mnemolog key file" in done.stderr.decode(), done.stderr
    assert not (tmp_path / "data").exists()


def test_a_blank_output_is_refused_as_blank(first_memory):
    """``export -o ""`` said "--output : is a directory; name a file"."""
    assert_refused(run(first_memory, "export", "-o", ""), "--output must not be blank")
    for blank in ("", " "):
        assert_refused(run(first_memory, "export", "-o", str(first_memory.parent / "out.jsonl"), "--with-keys", blank), "--with-keys must not be blank")
    assert not (first_memory.parent / "out.jsonl").exists()


def test_a_blank_idempotency_key_is_refused(first_memory):
    """``add x --idempotency-key ""`` wrote the memory with no key: a retry wrote it twice."""
    before = run(first_memory, "log", "--json").stdout
    assert_refused(run(first_memory, "add", "x", "--idempotency-key", ""), "--idempotency-key must not be blank")
    assert run(first_memory, "log", "--json").stdout == before


@pytest.mark.parametrize("limit", ["0", "-1", "abc", "99999999999999999999"])
def test_log_limit_takes_the_range_every_other_limit_takes(first_memory, limit):
    """``log --limit 99999999999999999999`` was taken, ``abc`` said "invalid int value": the range, as history says it."""
    assert_refused(run(first_memory, "log", "--limit", limit), "expected a whole number from 1 to")


@pytest.mark.parametrize(
    "name, value",
    [
        ("MNEMOLOG_SYNCHRONOUS", "bogus"),  # left an empty data directory
        ("MNEMOLOG_BUSY_TIMEOUT", "nan"),  # left events.db, and named nothing
        ("MNEMOLOG_WORKING_MEMORY_CAPACITY", "0"),  # refused after a first-start key and the banner
        ("MNEMOLOG_RECALL_CANDIDATES", "0"),  # accepted: every recall then looped forever
        ("MNEMOLOG_RECALL_FUSION", "bogus"),  # accepted: every recall then a 500
        ("MNEMOLOG_DATA_DIR", "caf\udce9"),  # bytes that are no UTF-8: a traceback after the banner
    ],
)
def test_a_bad_setting_stops_a_command_naming_it_before_anything_is_made(tmp_path, name, value):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMOLOG_")}
    env[name] = value
    target = tmp_path / "data"
    argv = [] if name == "MNEMOLOG_DATA_DIR" else ["--data-dir", os.fsencode(target)]
    for command in (["serve", "--port", "0"], ["add", "a memory"]):
        done = subprocess.run([str(MNEMOLOG), *argv, *command], capture_output=True, env={k: os.fsencode(v) for k, v in env.items()}, cwd=tmp_path, timeout=60)
        assert_refused(done, name)
        assert sorted(p.name for p in tmp_path.iterdir()) == [], command


@pytest.mark.parametrize(
    "argv, words",
    [
        (("--tenant", "*"), ("--tenant", "never a tenant's name")),
        (("--tenant", " acme "), ("--tenant", "start or end with a space")),
        (("--tenant", "a\nb"), ("--tenant", "control characters")),
        (("--tenant", "t" * 201), ("--tenant", "at most 200")),
        (("--correlation-id", "c" * 201), ("--correlation-id", "at most 200")),
    ],
    ids=["star", "spaces", "line-break", "long-tenant", "long-correlation"],
)
def test_a_write_names_its_tenant_and_correlation_as_the_api_would(data, argv, words):
    """Each was taken: memories of a tenant no key and no request could reach, a correlation no revert over HTTP could name."""
    before = head(data)
    assert_refused(run(data, "add", *argv, "a memory"), *words)
    assert head(data) == before


def test_a_key_for_every_tenant_is_still_made(data):
    done = run(data, "keys", "create", "--tenant", "*", "--scopes", "read")
    assert done.returncode == 0, done.stderr
