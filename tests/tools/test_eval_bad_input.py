"""``mnemolog eval`` under bad input: exit 2, one line on stderr naming the option and what is wrong, no
traceback, and nothing written (no data directory, no folder, no evaluation corpus in somebody's log).

Commands run through ``main`` in this process (:func:`tests.in_process.run_main`), with a corpus of three turns.
"""

from __future__ import annotations

import http.server
import json
import socket
import sqlite3
import subprocess
import threading
from pathlib import Path

import pytest

from tests.in_process import run_main

TURNS = [
    {"id": "c:1", "text": "Ann: I moved to Lisbon in May", "conv": "c", "session": 1},
    {"id": "c:2", "text": "Ben: How do you like Lisbon?", "conv": "c", "session": 1},
    {"id": "c:3", "text": "Ann: I adopted a cat called Miso", "conv": "c", "session": 1},
]
QUESTIONS = [{"qid": "q1", "conv": "c", "query": "Which city did Ann move to?", "gold": ["c:1"]}]


@pytest.fixture
def inputs(tmp_path) -> list[str]:
    corpus, queries = tmp_path / "corpus.jsonl", tmp_path / "queries.jsonl"
    corpus.write_text("".join(json.dumps(t) + "\n" for t in TURNS))
    queries.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    return ["--corpus", str(corpus), "--queries", str(queries)]


def refused(done: subprocess.CompletedProcess, *words: str) -> str:
    err = done.stderr.decode()
    assert done.returncode == 2 and err.startswith("mnemolog: error: ") and err.count("\n") == 1, (done.returncode, err)
    assert done.stdout == b"" and "Traceback" not in err and "[Errno" not in err, err
    assert all(w in err for w in words), err
    return err


def free_port() -> int:
    """A port on 127.0.0.1 where nothing listens: bound, read, closed."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def events(log: Path) -> int:
    conn = sqlite3.connect(log)
    try:
        return conn.execute("SELECT count(*) FROM events").fetchone()[0]
    finally:
        conn.close()


# -- --url ----------------------------------------------------------------------------------------------


def test_a_server_that_cannot_be_reached_is_one_line_naming_the_url(tmp_path, inputs):
    """Nothing listening ended in an 83-line traceback (ConnectionFailedError), exit 1."""
    url = f"http://127.0.0.1:{free_port()}"
    refused(run_main(["--data-dir", str(tmp_path / "data"), "eval", *inputs, "--url", url]), f"--url {url}: cannot connect: ")
    assert not (tmp_path / "data").exists()  # no rankings file, nor the data directory to hold it


@pytest.mark.parametrize(
    "url, words",
    [
        ("ftp://localhost/", ["must be an http:// or https:// URL", "ftp://localhost/"]),  # was a traceback (NonHttpUrlClientError)
        ("notaurl", ["must be an http:// or https:// URL", "notaurl"]),  # was "mnemolog: error: notaurl/v1/memories"
        ("http://[::1", ["not a valid URL", "Invalid IPv6 URL"]),
        ("http://localhost:99999", ["not a valid URL", "Port out of range"]),
        ("http://localhost:0", ["expected a port from 1 to 65535"]),
        ("http://", ["names no host"]),
        ("http://localhost:8080/?tenant=a", ["no query or fragment"]),
        ("", ["must not be blank"]),  # --url "$URL" with URL unset evaluated in process instead
    ],
)
def test_a_bad_url_is_refused_up_front_saying_what_is_wrong(tmp_path, inputs, url, words):
    err = refused(run_main(["--data-dir", str(tmp_path / "data"), "eval", *inputs, "--url", url]), "argument --url: ", *words)
    assert "/v1/" not in err
    assert not (tmp_path / "data").exists()


def test_a_server_that_refuses_the_request_is_one_line(tmp_path, inputs):
    """An error answer (here 401, a missing key) was an ApiError traceback."""

    class Refusing(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802
            body = json.dumps({"error": {"code": "unauthorized", "message": "missing API key"}}).encode()
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        refused(run_main(["--data-dir", str(tmp_path / "data"), "eval", *inputs, "--url", url]), f"--url {url}: ", "401", "missing API key", "--api-key")
    finally:
        server.shutdown()
        server.server_close()
    assert not (tmp_path / "data").exists()


def test_a_work_dir_with_a_url_is_refused(tmp_path, inputs):
    """The server keeps what it is sent: a --work-dir was silently ignored."""
    url = f"http://127.0.0.1:{free_port()}"
    refused(run_main(["eval", *inputs, "--url", url, "--work-dir", str(tmp_path / "work")]), "--work-dir")
    assert not (tmp_path / "work").exists()


# -- --work-dir -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def a_log(tmp_path_factory) -> Path:
    """A data directory holding a log of one memory, as ``mnemolog add`` leaves it."""
    path = tmp_path_factory.mktemp("log") / "data"
    assert run_main(["--data-dir", str(path), "add", "a memory of somebody's"]).returncode == 0
    return path


def test_a_work_dir_holding_a_log_is_refused_and_the_log_left_alone(tmp_path, inputs, a_log):
    """The corpus went into the existing log as tenant ``eval``, for good: the log is append-only."""
    before = events(a_log / "events.db")
    files = sorted(p.name for p in a_log.iterdir())
    refused(run_main(["--data-dir", str(tmp_path / "data"), "eval", *inputs, "--work-dir", str(a_log)]), f"--work-dir {a_log}: holds a log (events.db)")
    refused(run_main(["eval", "--entities", "--work-dir", str(a_log)]), f"--work-dir {a_log}: holds a log")
    assert events(a_log / "events.db") == before and sorted(p.name for p in a_log.iterdir()) == files
    assert not (tmp_path / "data").exists()


def test_a_work_dir_that_is_not_new_or_empty_is_refused(tmp_path, inputs):
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine\n")
    refused(run_main(["eval", *inputs, "--work-dir", str(busy)]), f"--work-dir {busy}: is not empty")
    assert [p.name for p in busy.iterdir()] == ["notes.txt"]
    refused(run_main(["eval", *inputs, "--work-dir", str(busy / "notes.txt")]), "is not a directory")
    refused(run_main(["eval", *inputs, "--work-dir", str(tmp_path / "nowhere" / "work")]), "no such directory")
    assert not (tmp_path / "nowhere").exists()
    refused(run_main(["eval", *inputs, "--work-dir", " "]), "--work-dir must not be blank")
    empty = tmp_path / "empty"
    empty.mkdir()  # an empty directory is taken, and kept
    assert run_main(["eval", *inputs, "--work-dir", str(empty), "--rankings", str(tmp_path / "ranks.jsonl")]).returncode == 0
    assert (empty / "events.db").is_file()


def test_eval_never_writes_into_a_shared_log(tmp_path, inputs):
    """With MNEMOLOG_LOG_URL set, the in-process store opened that log and appended the corpus to it."""
    shared = tmp_path / "shared"
    shared.mkdir()
    env = {"MNEMOLOG_LOG_URL": f"sqlite:///{shared / 'events.db'}"}
    done = run_main(["eval", *inputs, "--rankings", str(tmp_path / "ranks.jsonl")], env=env)
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "set"
    folder.mkdir()
    (folder / "knowledge.json").write_text(json.dumps({"entities": [{"id": "ada", "name": "Ada", "entity_type": "person"}], "relations": [], "memories": [{"id": "m1", "text": "Ada likes tea"}]}))
    (folder / "questions.jsonl").write_text(json.dumps({"qid": "q1", "query": "Ada", "gold": ["ada"]}) + "\n")
    done = run_main(["eval", "--entities", str(folder)], env=env)
    assert done.returncode == 0, done.stderr
    assert list(shared.iterdir()) == []


# -- --rankings -----------------------------------------------------------------------------------------


def test_rankings_in_a_missing_folder_are_refused_and_no_folder_made(tmp_path, inputs):
    target = tmp_path / "nowhere" / "ranks.jsonl"
    refused(run_main(["eval", *inputs, "--rankings", str(target)]), f"--rankings {target}: no such directory")
    assert not (tmp_path / "nowhere").exists()


def test_rankings_never_replace_a_database(tmp_path, inputs, a_log):
    log = a_log / "events.db"
    before = log.read_bytes()
    refused(run_main(["eval", *inputs, "--rankings", str(log)]), "--rankings", "is a database")
    refused(run_main(["eval", *inputs, "--rankings", ""]), "--rankings must not be blank")
    assert log.read_bytes() == before


def test_rankings_go_through_a_device(tmp_path, inputs):
    assert run_main(["eval", *inputs, "--rankings", "/dev/null"]).returncode == 0


# -- --corpus / --queries -------------------------------------------------------------------------------


def test_a_missing_or_unreadable_corpus_or_queries_is_one_line(tmp_path, inputs):
    """These were Python's own words: "[Errno 2] No such file or directory: 'x'"."""
    corpus, queries = inputs[1], inputs[3]
    missing = tmp_path / "missing.jsonl"
    refused(run_main(["eval", "--corpus", str(missing), "--queries", queries]), f"--corpus {missing}: no such file")
    refused(run_main(["eval", "--corpus", corpus, "--queries", str(missing)]), f"--queries {missing}: no such file")
    refused(run_main(["eval", "--corpus", str(tmp_path), "--queries", queries]), f"--corpus {tmp_path}: is a directory")
    refused(run_main(["eval", "--corpus", corpus, "--queries", corpus]), f"--queries {corpus}:1: ", "qid")


@pytest.mark.parametrize("option, lines, words", [
    ("--queries", [*QUESTIONS, {**QUESTIONS[0], "query": "What pet did Ann adopt?", "gold": ["c:3"]}], ["queries.jsonl:2", "qid 'q1' again (line 1)"]),
    ("--corpus", [*TURNS, {**TURNS[0], "text": "Ann: I moved to Porto"}], ["corpus.jsonl:4", "id 'c:1' again (line 1)"]),
])
def test_a_second_line_of_one_id_is_refused_naming_both_lines(tmp_path, inputs, option, lines, words):
    """Rankings are keyed by qid: two questions of one qid were both scored against the last one's ranking."""
    path = Path(inputs[inputs.index(option) + 1])
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    refused(run_main(["eval", *inputs, "--work-dir", str(tmp_path / "work")]), option, *words)
    assert not (tmp_path / "work").exists()
