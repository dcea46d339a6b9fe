"""Two ``mnemolog serve`` processes on one data directory, written to at once.

Each server decides a command on the log as it reads it and appends expecting
the streams it read unchanged; the other server may append in between. A
write that names no version (no ``If-Match``) is then applied after the
other's, never refused; one that names a version another write changed is a
409 with the current version.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import Counter

from tests.serving import clean_env, create_key, http_json, run_cli, serve

ROUNDS = 20


def call(url: str, key: str, method: str, path: str, body: dict | None = None, headers: dict[str, str] | None = None) -> tuple[int, dict]:
    return http_json(url, method, path, body, key=key, headers=headers)


def test_updates_naming_no_version_from_two_servers_are_all_applied(tmp_path):
    data = tmp_path / "data"
    assert run_cli(data, "migrate").returncode == 0
    key = create_key(data)
    with serve(data, tmp_path / "a.log", organizer_enabled="off") as first, serve(data, tmp_path / "b.log", organizer_enabled="off") as second:
        status, added = call(first.url, key, "POST", "/v1/memories", {"memory": {"memory": "the plan for the week"}})
        assert status == 201
        [memory_id] = added["memory_ids"]
        answers: list[tuple[int, dict]] = []

        def update(server, name: str) -> None:
            for n in range(ROUNDS):
                answers.append(call(server.url, key, "PATCH", f"/v1/memories/{memory_id}", {"memory": f"the plan, {name} draft {n}"}))

        writers = [threading.Thread(target=update, args=(server, name)) for server, name in ((first, "first"), (second, "second"))]
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.join()
        assert Counter(status for status, _ in answers) == {200: 2 * ROUNDS}, [body for status, body in answers if status != 200][:3]
        status, memory = call(second.url, key, "GET", f"/v1/memories/{memory_id}")
        assert memory["version"] == 2 * ROUNDS + 1
        status, refused = call(first.url, key, "PATCH", f"/v1/memories/{memory_id}", {"memory": "a stale edit"}, {"If-Match": "1"})
        assert (status, refused["error"]["current_version"]) == (409, 2 * ROUNDS + 1)
    assert run_cli(data, "verify").returncode == 0


def test_a_command_that_finds_the_log_locked_past_its_lock_wait_says_so_in_one_line(tmp_path):
    """Another process's write outlasting ``MNEMOLOG_BUSY_TIMEOUT``: nothing written, and a line that says to run it again."""
    data = tmp_path / "data"
    assert run_cli(data, "add", "a note written before").returncode == 0
    writer = sqlite3.connect(str(data / "events.db"), isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # another process's long write, in progress
    try:
        done = run_cli(data, "add", "a note that waits its turn", env=clean_env(busy_timeout="0.2"))
    finally:
        writer.rollback()
        writer.close()
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert "events.db" in line and "busy" in line and "run the command again" in line, line
    assert run_cli(data, "--json", "stats").stdout.count('"events":1,') == 1
