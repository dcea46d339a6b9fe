"""``mnemolog forget`` and the key file of ``export --with-keys`` / ``import --keys``, as an operator runs them
(through the CLI's ``main``, in this process: see :mod:`tests.in_process`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.in_process import run_main


def run(data: Path, *argv: str, code: int = 0, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    done = run_main(["--data-dir", str(data), *argv], env=env, text=True)
    assert done.returncode == code, (argv, done.returncode, done.stdout, done.stderr)
    return done


def test_forget_from_the_command_line(tmp_path):
    data = tmp_path / "data"
    added = json.loads(run(data, "add", "Rosalind keeps bees in Porto", "--subject", "u-3", "--tenant", "t", "--json").stdout)
    memory_id = added["memory_ids"][0]
    exported = run(data, "export", "-o", str(tmp_path / "log.jsonl"), "--with-keys", str(tmp_path / "log.keys")).stdout
    assert exported.startswith("exported 1 event to ") and "; 1 key to " in exported  # one of each, in the singular
    assert "Rosalind" not in (tmp_path / "log.jsonl").read_text()
    assert "SECRET" in (tmp_path / "log.keys").read_text()

    refused = run(data, "forget", "--subject", "u-3", "--tenant", "t", code=2)
    assert "--yes" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    done = json.loads(run(data, "forget", "--subject", "u-3", "--tenant", "t", "--reason", "asked by phone", "--yes", "--json").stdout)
    assert done["memories_erased"] == 1 and done["keys_destroyed"] == 1
    again = run(data, "forget", "--subject", "u-3", "--tenant", "t", "--yes").stdout  # nothing left to forget: it says when it was
    assert again.startswith("subject u-3 was already forgotten: position ") and "(asked by phone); nothing written" in again

    shown = json.loads(run(data, "get", memory_id, "--tenant", "t", "--json").stdout)
    assert shown["erased"] is True and "Rosalind" not in shown["memory"]
    history = run(data, "history", memory_id, "--tenant", "t").stdout
    assert "forgotten: subject 'u-3'" in history and "asked by phone" in history
    run(data, "verify")

    # The key file taken before the forget does not bring the subject back: the forget travels with the log.
    copy = tmp_path / "copy"
    run(data, "export", "-o", str(tmp_path / "after.jsonl"))
    run(copy, "import", str(tmp_path / "after.jsonl"), "--keys", str(tmp_path / "log.keys"))
    assert json.loads(run(copy, "get", memory_id, "--tenant", "t", "--json").stdout)["erased"] is True


def test_forget_the_tenants_own_key_from_the_command_line(tmp_path):
    data = tmp_path / "data"
    added = json.loads(run(data, "add", "Ottoline grows saffron", "--tenant", "t", "--json").stdout)
    done = json.loads(run(data, "forget", "--subject", "@tenant", "--tenant", "t", "--reason", "tenant closed", "--yes", "--json").stdout)
    assert done["subject"] == "@tenant" and done["memories_erased"] == 1
    assert json.loads(run(data, "get", added["memory_ids"][0], "--tenant", "t", "--json").stdout)["erased"] is True
    run(data, "verify")


def test_keys_never_go_to_stdout_or_into_the_export_itself(tmp_path):
    data = tmp_path / "data"
    run(data, "add", "x", "--tenant", "t")
    assert "--output" in run(data, "export", "--with-keys", str(tmp_path / "k"), code=2).stderr
    out = tmp_path / "same.jsonl"
    run(data, "export", "-o", str(out), "--with-keys", str(out), code=2)
    bad = tmp_path / "bad.keys"
    bad.write_text("{}\n")
    assert "not a mnemolog key file" in run(data, "import", str(out), "--keys", str(bad), code=2).stderr


def test_a_text_that_starts_like_a_token_is_added_read_and_followed_with_encryption_off(tmp_path):
    data = tmp_path / "data"
    off = {"MNEMOLOG_ENCRYPTION": "off"}
    for text in ("mnemologSealedV2AAAAhello there", "mnemolog:sealed:v1:k:AAAA", "next"):
        memory_id = json.loads(run(data, "add", text, "--json", env=off).stdout)["memory_ids"][0]
        assert json.loads(run(data, "get", memory_id, "--json", env=off).stdout)["memory"] == text
    assert len(run(data, "log", "--json").stdout.splitlines()) >= 3
    run(data, "verify")


def test_a_forget_from_the_command_line_records_who_ran_it(tmp_path):
    """Without ``--actor`` a forget recorded no one: its history read "by -", and an auditor could not tell who
    destroyed the keys. It records the operating-system user the command ran as; ``--actor`` names another."""
    import getpass

    data = tmp_path / "data"
    first = json.loads(run(data, "add", "Rosalind keeps bees", "--subject", "u-3", "--json").stdout)["memory_ids"][0]
    second = json.loads(run(data, "add", "Rosalind keeps wasps", "--subject", "u-4", "--json").stdout)["memory_ids"][0]
    run(data, "forget", "--subject", "u-3", "--reason", "request 12", "--yes")
    run(data, "forget", "--subject", "u-4", "--reason", "request 13", "--actor", "dpo@example.org", "--yes")
    [forget] = [h for h in map(json.loads, run(data, "history", first, "--json").stdout.splitlines()) if h["kind"] == "forgotten"]
    assert forget["actor"] == f"cli:{getpass.getuser()}" and forget["reason"] == "request 12"
    assert f"by cli:{getpass.getuser()}," in run(data, "history", first).stdout
    assert "by dpo@example.org," in run(data, "history", second).stdout


def test_the_log_shows_a_memory_given_to_a_forgotten_subject_erased(tmp_path):
    """A memory added without a subject (the tenant's key), then given one, then the subject forgotten: ``mnemolog
    log`` still printed its first version's text."""
    data = tmp_path / "data"
    memory = json.loads(run(data, "add", "Rosalind keeps bees in Porto", "--json").stdout)["memory_ids"][0]
    run(data, "update", memory, "--subject", "u-3")
    run(data, "add", "the hive is behind the shed")
    run(data, "forget", "--subject", "u-3", "--reason", "request 12", "--yes")
    for argv in (["log", "--json"], ["log"], ["history", memory, "--json"]):
        shown = run(data, *argv).stdout
        assert "Rosalind" not in shown and "bees" not in shown, (argv, shown)
    assert "the hive is behind the shed" in run(data, "log", "--json").stdout
    run(data, "verify")


def _legacy_subject_memory(data: Path, subject: str, text: str) -> str:
    """A memory sealed under ``subject``'s own key, as versions before subject ids had their pattern wrote it
    (any printable text, e.g. ``user 7``), or as an import of such a log brings it; its id."""
    from mnemolog.eventstore import EventStore, StreamAppend
    from mnemolog.eventstore import catalogue as c
    from mnemolog.eventstore.model import MemoryContent
    from mnemolog.eventstore.settings import Settings

    store = EventStore.open(data, settings=Settings({"encryption": "on"}, env={}))
    try:
        event = c.MemoryAdded(memory_id="m-legacy", content=MemoryContent(memory=text, subject=subject), created_at="2024-01-01T00:00:00Z")
        store.append_batch([StreamAppend(c.memory_stream("m-legacy"), [event])], tenant="t")
    finally:
        store.close()
    return "m-legacy"


def test_a_subject_named_before_subject_ids_had_their_pattern_can_be_forgotten(tmp_path):
    """A memory whose subject an earlier version accepted (``user 7``: printable, not an id of today's pattern)
    could never be forgotten: forget refused the name as invalid input, and its text stayed readable for good.
    A forget takes any subject a memory of the tenant names; a name none does is still refused as invalid."""
    data = tmp_path / "data"
    memory = _legacy_subject_memory(data, "user 7", "Philippa Quernstone lives in Lagos")
    assert "Quernstone" in run(data, "get", memory, "--tenant", "t").stdout
    done = json.loads(run(data, "forget", "--subject", "user 7", "--tenant", "t", "--reason", "request 4", "--yes", "--json").stdout)
    assert done["subject"] == "user 7" and done["keys_destroyed"] == 1 and done["memories_erased"] == 1
    assert json.loads(run(data, "get", memory, "--tenant", "t", "--json").stdout)["erased"] is True
    assert "Quernstone" not in run(data, "log", "--json").stdout
    assert not [p for p in data.rglob("*") if p.is_file() and b"Quernstone" in p.read_bytes()]
    again = run(data, "forget", "--subject", "user 7", "--tenant", "t", "--yes").stdout
    assert again.startswith("subject user 7 was already forgotten: position ")
    refused = run(data, "forget", "--subject", "user 8", "--tenant", "t", "--yes", code=2)
    assert "subject: must be 1 to 200" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    run(data, "verify")


def test_importing_a_forget_erases_what_the_projections_held_of_the_subject(tmp_path):
    """A copy read before its source forgot a subject, then given the source's later export: the import destroyed
    the subject's keys, but ``projections.db`` kept its text (rows, free pages, WAL) until some later command
    opened the data directory, and a copy nobody opened again kept it for good. The import applies the forget to
    the projections the data directory holds, and scrubs them, as a forget does."""
    source, copy = tmp_path / "source", tmp_path / "copy"
    memory = json.loads(run(source, "add", "Philippa Quernstone lives in Lagos", "--subject", "u-9", "--tenant", "t", "--json").stdout)["memory_ids"][0]
    run(source, "add", "the office opens at nine", "--tenant", "t")
    run(source, "export", "-o", str(tmp_path / "before.jsonl"), "--with-keys", str(tmp_path / "before.keys"))
    run(copy, "import", str(tmp_path / "before.jsonl"), "--keys", str(tmp_path / "before.keys"))
    assert "Quernstone" in run(copy, "get", memory, "--tenant", "t").stdout  # the copy's projections hold the text
    run(source, "forget", "--subject", "u-9", "--tenant", "t", "--reason", "request 4", "--yes")
    run(source, "export", "-o", str(tmp_path / "after.jsonl"))

    run(copy, "import", str(tmp_path / "after.jsonl"))
    assert not [p.name for p in copy.rglob("*") if p.is_file() and b"Quernstone" in p.read_bytes()]
    assert json.loads(run(copy, "get", memory, "--tenant", "t", "--json").stdout)["erased"] is True
    run(copy, "verify")


def test_a_retry_after_its_subject_was_forgotten_is_not_called_a_different_request(tmp_path):
    """An add retried with its idempotency key after a forget of its subject was refused as "already used for a
    different request": it was the same request, which the key, keyed with the destroyed data key, can no longer
    be compared with. The refusal says so, and what to do."""
    data = tmp_path / "data"
    argv = ("add", "Philippa Quernstone lives in Lagos", "--subject", "u-9", "--idempotency-key", "a-1")
    run(data, *argv)
    run(data, "forget", "--subject", "u-9", "--reason", "request 4", "--yes")
    refused = run(data, *argv, code=2).stderr
    assert "different request" not in refused and "forgotten" in refused and "new idempotency key" in refused, refused
    assert len(refused.strip().splitlines()) == 1
    run(data, "add", "another text", "--idempotency-key", "a-2")
    assert "different request" in run(data, "add", "a third text", "--idempotency-key", "a-2", code=2).stderr


def test_the_history_names_a_forget_of_the_tenants_key_as_it_was_asked(tmp_path):
    """A memory erased by ``forget --subject @tenant`` had its history read "forgotten: subject ''": the event
    names the tenant's key by the empty subject, which no operator types. It reads ``@tenant``, as the forget's answer does."""
    data = tmp_path / "data"
    memory = json.loads(run(data, "add", "Ottoline grows saffron", "--tenant", "t", "--json").stdout)["memory_ids"][0]
    run(data, "forget", "--subject", "@tenant", "--tenant", "t", "--reason", "tenant closed", "--yes")
    shown = run(data, "history", memory, "--tenant", "t").stdout
    assert "forgotten: subject '@tenant' at position " in shown, shown
    [forget] = [json.loads(line) for line in run(data, "history", memory, "--tenant", "t", "--json").stdout.splitlines() if '"event_type":"SubjectForgotten"' in line]
    assert forget["subject"] == "@tenant" and forget["reason"] == "tenant closed"


def test_a_forget_refused_for_keys_the_store_never_held_says_how_to_go_on(tmp_path):
    """With the key store not the log's (``keys.db`` lost or moved), the refusal blamed memories "written with
    MNEMOLOG_ENCRYPTION=off", which a forget erases, and said no forget could erase them: restoring the key store
    lets one. It names the cause and the way on; with the key store back, the forget goes through."""
    data = tmp_path / "data"
    run(data, "add", "Philippa Quernstone lives in Lagos", "--subject", "u-9")
    (data / "keys.db").rename(tmp_path / "keys.db")
    refused = run(data, "forget", "--subject", "u-9", "--reason", "request 4", "--yes", code=2).stderr
    assert "ENCRYPTION=off" not in refused and "never held" in refused and "--keys" in refused and "keys.db" in refused, refused
    assert len(refused.strip().splitlines()) == 1
    for name in ("keys.db", "keys.db-wal", "keys.db-shm"):
        (data / name).unlink(missing_ok=True)
    (tmp_path / "keys.db").rename(data / "keys.db")
    assert json.loads(run(data, "forget", "--subject", "u-9", "--reason", "request 4", "--yes", "--json").stdout)["keys_destroyed"] == 1


def test_a_forget_that_leaves_one_event_in_plaintext_says_so_in_the_singular(tmp_path):
    data = tmp_path / "data"
    run(data, "add", "Rosalind keeps bees", "--subject", "u-3", env={"MNEMOLOG_ENCRYPTION": "off"})
    done = run(data, "forget", "--subject", "u-3", "--reason", "request 12", "--yes").stdout
    assert "; 1 event stays in the log in plaintext (position 1): written unsealed, no key can erase it; every read shows it erased" in done, done


def test_an_erased_memory_restored_or_reverted_back_does_not_come_back_into_working_memory(tmp_path):
    """A forget withdraws its memories from working memory (an entry of erased text recalls nothing), but a memory
    archived or deleted before the forget went back in when restored, or when the archive was reverted: an entry
    reading ``[erased: subject forgotten]`` that took a place of the working memory's capacity."""
    data = tmp_path / "data"
    first = json.loads(run(data, "add", "Philippa Quernstone lives in Lagos", "--subject", "u-9", "--json").stdout)["memory_ids"][0]
    second = json.loads(run(data, "add", "Philippa Quernstone keeps bees", "--subject", "u-9", "--json").stdout)["memory_ids"][0]
    run(data, "add", "the office opens at nine")
    run(data, "delete", first)
    archived = json.loads(run(data, "archive", second, "--json").stdout)["correlation_id"]
    run(data, "forget", "--subject", "u-9", "--reason", "request 4", "--yes")
    run(data, "entity", "upsert", "topic:subject", "--name", "Subject", "--alias", "forgotten")
    restored = json.loads(run(data, "restore", first, "--json").stdout)
    run(data, "revert", archived, "--force")
    linked = [json.loads(line) for line in run(data, "log", "--json", "--type", "EdgeLinked").stdout.splitlines()]
    assert [e for e in linked if e["position"] >= restored["first_position"]] == []  # the marker mentions nothing
    shown = [json.loads(line) for line in run(data, "working-memory", "--json").stdout.splitlines()]
    held = json.dumps(shown)
    assert first not in held and second not in held and "the office opens at nine" in held, shown
    assert json.loads(run(data, "get", first, "--json").stdout)["status"] == "activated"  # restored all the same, erased
