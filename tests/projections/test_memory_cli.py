"""The ``mnemolog`` commands over memories and edges, run in-process (``cli.main``) on real SQLite files:
add, get, update, history (as of a position, with actors, correlations and mentions), status changes,
merge, links, relink, revert and the projections' rebuild; and what those commands refuse."""

from __future__ import annotations

import getpass
import io
import json
import sqlite3
import sys

import pytest

from mnemolog.tools import cli


@pytest.fixture
def run_cli(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("MNEMOLOG_TENANT", raising=False)

    def run(*argv, stdin=None, code=0):
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8")), encoding="utf-8"))  # read as bytes
        rc = cli.main([*argv, "--data-dir", str(tmp_path)])
        out, err = capsys.readouterr()
        assert rc == code, (argv, out, err)
        if code:
            assert err.startswith("mnemolog: error: ") and err.count("\n") == 1 and "Traceback" not in err
        return err if code else out

    return run


def test_cli_add_get_update_history(run_cli, monkeypatch):
    out = run_cli("add", "I live in Berlin", "--key", "home", "--tags", "a,b", "--source", "chat")
    assert out.startswith("added 1 memory: ") and "(position 1, correlation " in out
    m = out.split(": ", 1)[1].split(" ")[0]
    batch = json.loads(run_cli("add", "--json", "--correlation-id", "imp-1", stdin='{"memory": "x"}\n\n{"text": "y", "tags": "p,q"}\n'))
    assert batch["first_position"] == 2 and batch["last_position"] == 3 and batch["correlation_id"] == "imp-1"
    dash = json.loads(run_cli("add", "-", "--json", stdin='{"memory": "from stdin"}\n'))  # "-" names stdin, as elsewhere
    assert dash["first_position"] == 4 and len(dash["memory_ids"]) == 1
    assert json.loads(run_cli("get", dash["memory_ids"][0], "--json"))["memory"] == "from stdin"
    assert "memories[1].memory" in run_cli("add", stdin='{"memory": "x"}\n{"memory": ""}\n', code=2)
    assert "line 1: unknown field 'colour'" in run_cli("add", stdin='{"memory": "x", "colour": 1}\n', code=2)
    run_cli("add", stdin="not json\n", code=2)
    view = json.loads(run_cli("get", m, "--json"))
    assert (view["memory"], view["key"], view["tags"], view["sources"]) == ("I live in Berlin", "home", ["a", "b"], ["chat"])
    assert run_cli("update", m, "--text", "I live in Paris", "--if-version", "1").startswith(f"updated {m} to version 2")
    run_cli("update", m, "--text", "again", "--if-version", "1", code=2)
    run_cli("update", m, code=2)
    assert "I live in Berlin" in run_cli("get", m, "--as-of", "1")
    history = [json.loads(line) for line in run_cli("history", m, "--json").splitlines()][:-1]
    assert [h["memory"] for h in history] == ["I live in Berlin", "I live in Paris"]
    assert "MemoryUpdated" in run_cli("history", m)
    run_cli("get", m, "--tenant", "other", code=2)
    monkeypatch.setenv("MNEMOLOG_TENANT", "other")
    run_cli("get", m, code=2)
    assert run_cli("add", "theirs").startswith("added 1 memory")
    monkeypatch.delenv("MNEMOLOG_TENANT")
    run_cli("get", "no-such-id", "--as-of", "yesterday", code=2)


def test_cli_history_table_shows_actor_and_correlation_id(run_cli):
    out = run_cli("add", "I live in Berlin", "--actor", "alice", "--correlation-id", "onboarding-run-0001")
    m = out.split(": ", 1)[1].split(" ")[0]
    run_cli("update", m, "--text", "I live in Paris", "--actor", "a-very-long-actor-name-indeed", "--reason", "moved")
    header, first, second = run_cli("history", m).splitlines()
    assert header.split()[:7] == ["VERSION", "POSITION", "STATUS", "EVENT", "ACTOR", "CORRELATION", "REASON"]
    assert first.split()[:6] == ["1", "1", "activated", "MemoryAdded", "alice", "onboarding-run-0001"]
    row = second.split()
    assert row[4] == "a-very-long-act…"  # cut to its column
    generated = [h["correlation_id"] for h in map(json.loads, run_cli("history", m, "--json").splitlines()[:-1])][1]
    assert row[5] == generated and len(generated) > 16  # whole: revert takes it
    assert second.index(generated) == header.index("CORRELATION")
    assert second[header.index("CHANGED") :].split()[0] == "memory" and first[header.index("CHANGED") :].split()[0] == "-"
    run_cli("update", m, "--tags", "home,city", "--reason", "tagged")  # a change of metadata only, under a reason
    third = run_cli("history", m).splitlines()[3]
    assert third[header.index("REASON") :].split()[:2] == ["tagged", "tags"]
    assert json.loads(run_cli("history", m, "--json").splitlines()[2])["changed"] == ["tags"]


def test_cli_changes_without_actor_are_the_clis_in_history_as_entity_changes_are(run_cli):
    """Without --actor a memory change names the CLI as its actor, as an entity change and an API write
    (api:<key>) do, rather than none: history tells a change at the terminal from one of unknown origin."""
    m = run_cli("add", "I live in Berlin").split(": ", 1)[1].split(" ")[0]
    run_cli("update", m, "--text", "I live in Paris")
    run_cli("archive", m, "--actor", "ops-alice")
    run_cli("entity", "upsert", "place:paris", "--name", "Paris")
    history = [json.loads(line) for line in run_cli("history", m, "--json").splitlines()][:-1]
    assert [h["actor"] for h in history] == [f"cli:{getpass.getuser()}"] * 2 + ["ops-alice"]
    entity_event = json.loads(run_cli("log", "--json", "--type", "EntityUpserted").splitlines()[-1])
    assert entity_event["metadata"]["actor"] == f"cli:{getpass.getuser()}"


def test_cli_history_as_of_shows_the_versions_written_by_then(run_cli):
    """``history --as-of``, as ``GET /v1/memories/{id}/history?as_of=``: the versions written by then; before
    the memory, or beyond the head, one line and exit 2."""
    m = run_cli("add", "I live in Berlin").split(": ", 1)[1].split(" ")[0]
    run_cli("update", m, "--text", "I live in Paris")
    run_cli("update", m, "--text", "I live in Rome")
    history = [json.loads(line) for line in run_cli("history", m, "--as-of", "2", "--json").splitlines()][:-1]  # the page's line last
    assert [h["memory"] for h in history] == ["I live in Berlin", "I live in Paris"]
    assert "I live in Rome" not in run_cli("history", m, "--as-of", "2")
    assert len(run_cli("history", m).splitlines()) == 4  # the header and three versions
    assert "not found" in run_cli("history", m, "--as-of", "0", code=2)
    assert "has not been written" in run_cli("history", m, "--as-of", "99", code=2)
    assert "as_of" in run_cli("history", m, "--as-of", "yesterday", code=2)
    paged = [json.loads(line) for line in run_cli("history", m, "--after", "1", "--limit", "1", "--json").splitlines()]
    assert [(p["kind"], p.get("version")) for p in paged] == [("version", 2), ("page", None)]
    assert paged[-1] == {"kind": "page", "more": True, "next_after": 2}  # where `--after` takes the next page up
    table = run_cli("history", m, "--limit", "2").splitlines()
    assert len(table) == 4 and table[-1] == "more versions follow: --after 2"
    assert "I live in Rome" in run_cli("history", m, "--after", "2")
    for bad in (["--limit", "0"], ["--after", "-1"], ["--after", "two"]):
        assert "expected a whole number" in run_cli("history", m, *bad, code=2)


def test_cli_status_merge_links_revert(run_cli):
    ids = json.loads(run_cli("add", "--json", stdin='{"memory": "a"}\n{"memory": "b"}\n{"memory": "c"}\n'))["memory_ids"]
    a, b, d = ids
    assert run_cli("archive", a, "--reason", "old").startswith(f"archived {a} (version 2)")
    run_cli("archive", a, code=2)
    run_cli("delete", a, "--evolve-to", "ghost", code=2)
    assert run_cli("delete", a, "--evolve-to", b).startswith(f"deleted {a}")
    assert run_cli("restore", a).startswith(f"restored {a}")
    assert "as version 5" in run_cli("rollback", a, "--to", "2")
    run_cli("rollback", a, "--to", "0", code=2)
    run_cli("restore", a)
    out = run_cli("link", a, d, "--type", "RELATED", "--weight", "0.5", "--id", "user:cli:1")
    assert out.startswith("linked user:cli:1")
    run_cli("link", a, d, "--type", "RELATED", "--weight", "2", code=2)
    run_cli("link", a, d, "--type", "RELATED", "--id", "nonamespace", code=2)
    run_cli("link", a, "ghost", "--type", "RELATED", code=2)
    run_cli("link", a, d, "--type", "RELATED", "--weight", "heavy", code=2)
    merged = json.loads(run_cli("merge", a, b, "--json", "--text", "a and b"))
    assert merged["repointed"] == 1 and merged["memory_ids"] == [merged["merged_id"]]
    assert "reverted 8 events" in run_cli("revert", merged["correlation_id"])  # 2 of working memory: the sources out, the merged in
    assert "already reverted" in run_cli("revert", merged["correlation_id"])
    undone = json.loads(run_cli("log", "--json", "--type", "CorrelationReverted").splitlines()[-1])["metadata"]["correlation_id"]
    assert f"of correlation {undone}" in run_cli("revert", undone)  # the merge is back
    out = run_cli("revert", merged["correlation_id"])
    assert out.startswith(f"reverted correlation {merged['correlation_id']} again, by reverting ") and "already" not in out
    run_cli("link", a, b, "--type", "RELATED", "--id", "mention:r1:1")
    assert "removed 1 live edge" in run_cli("undo-namespace", "mention:r1:")
    assert "nothing written" in run_cli("undo-namespace", "mention:r1:")
    assert run_cli("unlink", "user:cli:1").startswith("unlinked user:cli:1")
    run_cli("unlink", "user:cli:1", code=2)
    upd = json.loads(run_cli("update", b, "--tags", "x", "--json", "--correlation-id", "c-1"))
    run_cli("update", b, "--tags", "y")
    head = json.loads(run_cli("log", "--json").splitlines()[-1])["position"]
    preview = run_cli("revert", "c-1", "--dry-run")  # what a revert would do, as POST /v1/reverts with dry_run: nothing written
    assert preview.startswith("would revert 1 event of correlation c-1, touching 1 memory") and b in preview and "refused unless --force, 1 conflict: " in preview
    previewed = json.loads(run_cli("revert", "c-1", "--dry-run", "--json"))
    assert previewed["dry_run"] and previewed["would_revert"] == 1 and len(previewed["conflicts"]) == 1 and previewed["memory_ids"] == [b]
    assert previewed["first_position"] is None and json.loads(run_cli("log", "--json").splitlines()[-1])["position"] == head
    assert "pass --force to revert anyway" in run_cli("revert", upd["correlation_id"], code=2)
    forcing = run_cli("revert", "c-1", "--dry-run", "--force")  # the dry run of the forced revert: it would go ahead
    assert "would force 1 conflict: " in forcing and "refused" not in forcing and "(nothing written)" in forcing
    assert json.loads(run_cli("revert", "c-1", "--dry-run", "--force", "--json"))["forced"] is True
    assert "forced over 1 conflict: " in run_cli("revert", "c-1", "--force")
    first = json.loads(run_cli("add", "retry me", "--idempotency-key", "k", "--json"))
    again = json.loads(run_cli("add", "retry me", "--idempotency-key", "k", "--json"))
    assert again["replayed"] and again["memory_ids"] == first["memory_ids"]


def test_cli_projections_rebuild_and_drop(run_cli, tmp_path):
    run_cli("add", "x", "--tenant", "t1")
    status = [json.loads(line) for line in run_cli("projections", "--json").splitlines()]
    assert status and all(s["lag"] == 0 and s["checkpoint"] == 1 for s in status)
    assert "CHECKPOINT" in run_cli("projections")
    out = run_cli("rebuild")
    assert out.strip().endswith("up to position 1") and " s" in out
    assert json.loads(run_cli("rebuild", "--projection", "graph", "--json"))["name"] == "graph"
    run_cli("rebuild", "--projection", "nope", code=2)
    # A projection named twice is rebuilt once: its replay applied every event twice (two rows of the one memory).
    rebuilt = [json.loads(line)["name"] for line in run_cli("rebuild", "--projection", "graph", "--projection", "fts", "--projection", "graph", "--json").splitlines()]
    assert rebuilt == ["graph", "fts"]
    with sqlite3.connect(tmp_path / "projections.db") as conn:
        assert conn.execute("SELECT count(*) FROM graph_memories").fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM fts_docs").fetchone()[0] == 1
    run_cli("drop-tenant", "--tenant", "t1", code=2)
    out = run_cli("drop-tenant", "--tenant", "t1", "--yes")
    assert out.startswith("dropped tenant t1: 1 event backed up to ") and str(tmp_path / "backups") in out
    run_cli("drop-tenant", "--tenant", "t9", "--yes", code=2)
    with sqlite3.connect(tmp_path / "projections.db") as conn:
        assert conn.execute("SELECT count(*) FROM graph_memories").fetchone()[0] == 0


def test_cli_history_and_relink_show_the_entities_a_memory_mentions(run_cli):
    run_cli("entity", "upsert", "acme", "--name", "Acme Corp")
    m = json.loads(run_cli("add", "Alice joined Acme Corp", "--json"))["memory_ids"][0]
    version, link, page = [json.loads(line) for line in run_cli("history", m, "--json").splitlines()]
    assert version["kind"] == "version" and version["mentions"] == ["acme"]
    assert (link["kind"], link["entity_id"], link["alias"], link["weight"], link["unlinked_at"]) == ("mention_link", "acme", "acme corp", 1.0, None)
    assert page == {"kind": "page", "more": False, "next_after": 1}
    assert "mentions:\n  acme (acme corp, 1.0) since position" in run_cli("history", m)
    run_cli("entity", "upsert", "alice", "--name", "Alice")
    out = run_cli("relink")
    assert out.startswith("dry run: 1 mention edges to add, 0 to remove, 1 kept (0 chunks, 1 memories,")
    assert "  memories: +1 -0 =1" in out
    assert json.loads(run_cli("relink", "--commit", "--json"))["by_kind"]["memories"]["add"] == 1


def test_a_background_longer_than_a_memory_is_refused_by_the_command(run_cli):
    err = run_cli("add", stdin='{"memory": "fine"}\n{"memory": "long", "background": "' + "w" * 100_001 + '"}\n', code=2)
    assert "memories[1].background" in err and "100000" in err
