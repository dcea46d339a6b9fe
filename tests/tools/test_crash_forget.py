"""``mnemolog forget`` SIGKILLed at each step: a restart finishes the forget, or it never happened; never half.

The forget runs as a real subprocess on real files and kills itself at a
named point (:mod:`tests.crashpoints`): before its event is appended, after
the event but before the keys are destroyed, after the keys were destroyed
but before the key file was rewritten, after the projections applied it but
before they were compacted, and before the local files were scrubbed; then
at seeded random moments, each round a new subject, with and without a
server following the log (killed too).
A restart (a service opening the data directory, as any command or server
start does) must leave either no ``SubjectForgotten`` and the subject readable, or
one ``SubjectForgotten``, its key destroyed, every read erased and no
plaintext of the subject in any file of the data directory (the files are
scanned as :mod:`tests.projections.test_forget` scans them).
"""

from __future__ import annotations

import os
import sqlite3

import pytest

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.service import MemoryService
from tests.crashpoints import run_killed_at
from tests.projections.support import dump
from tests.projections.test_forget import _assert_clean, _needles, _seed
from tests.serving import clean_env, run_cli
from tests.tools.test_crash_loops import assert_equal_projections, fresh_rebuild

SETTINGS = Settings({"synchronous": "NORMAL"}, env={})
FORGET = ("forget", "--subject", "u-42", "--tenant", "t", "--yes", "--json")


def seeded(tmp_path):
    """A data directory holding the subject's memories, its vector index and its lexical postings saved."""
    data = tmp_path / "data"
    with MemoryService.open(data, settings=SETTINGS) as svc:
        mine, _ = _seed(svc)
        svc.scrub()  # the vector index saved with the subject's vectors in it
        svc.warm()  # the lexical postings saved with the subject's words
        [key_id] = svc.store.sealer.keys.subject_keys("t", "u-42")
        key = svc.store.sealer.keys.key(key_id)
    assert any(n in (data / "fts.postings").read_bytes() for n in _needles())
    return data, mine, key


def without_counters(dumped: dict) -> dict:
    """The projections without their ``*_stats`` counters: applying an erasure counts the rows it deleted, a replay
    of the erased log has none to delete (the counters only tell caches to reload)."""
    return {name: {t: rows for t, rows in tables.items() if not t.endswith("_stats")} for name, tables in dumped.items()}


def assert_finished(tmp_path, data, mine, key, *, forgets: int = 1):
    with MemoryService.open(data, settings=SETTINGS) as svc:
        found = svc.store.read_all(types=["SubjectForgotten"])
        assert len(found) == forgets, f"{len(found)} SubjectForgotten in the log"
        assert svc.store.sealer.keys.subject_keys("t", "u-42") == [], "the forgotten subject's key is still held"
        assert svc.get("t", mine[0]).erased and all(v["erased"] for v in svc.history("t", mine[0]))
        assert svc.store.verify().ok
        assert_equal_projections(without_counters(dump(svc.runner)), without_counters(fresh_rebuild(data, tmp_path / "reference")), "after restart")
        _assert_clean([p for p in data.rglob("*") if p.is_file()], _needles() + [key])  # while open, as a restarted server is
    _assert_clean([p for p in data.rglob("*") if p.is_file()], _needles() + [key])


@pytest.mark.parametrize(
    "point",
    [
        "mnemolog.eventstore.keystore:KeyStore.forget",  # the event appended, the key not destroyed yet
        "mnemolog.eventstore.keystore:KeyStore.scrub",  # the key destroyed, the key file not rewritten yet
        "mnemolog.projections.runner:ProjectionRunner._compact",  # the projections erased the rows, their bytes not compacted away yet
        "mnemolog.projections.service:MemoryService.scrub",  # the local files not scrubbed yet
    ],
)
def test_a_forget_killed_after_its_event_is_finished_by_a_restart(tmp_path, point):
    data, mine, key = seeded(tmp_path)
    run_killed_at(data, point, *FORGET)
    assert_finished(tmp_path, data, mine, key)


def test_a_forget_killed_before_its_event_leaves_the_subject_readable_and_a_retry_finishes_it(tmp_path):
    data, mine, key = seeded(tmp_path)
    run_killed_at(data, "mnemolog.eventstore.commands.subjects:commit", *FORGET)
    with MemoryService.open(data, settings=SETTINGS) as svc:
        assert svc.store.read_all(types=["SubjectForgotten"]) == []
        assert not svc.get("t", mine[0]).erased and svc.store.verify().ok
    done = run_cli(data, *FORGET, env=clean_env(synchronous="NORMAL"))
    assert done.returncode == 0, done.stderr
    assert_finished(tmp_path, data, mine, key)



def test_a_server_that_forgets_does_not_write_the_subject_back_at_its_stop(tmp_path):
    data, mine, key = seeded(tmp_path)
    with MemoryService.open(data, settings=SETTINGS) as server:
        server.warm()  # a server loads the lexical postings at its start
        server.forget(CommandContext(tenant="t", actor="privacy-officer"), "u-42")
    # its clean stop saves what it loaded only if that is still what the database holds
    _assert_clean([p for p in data.rglob("*") if p.is_file()], _needles() + [key])


@pytest.mark.parametrize(
    "point",
    [
        "mnemolog.eventstore.keystore:KeyStore.forget",  # the event appended, the key not destroyed, nothing projected
        "mnemolog.projections.service:MemoryService.scrub",  # the key destroyed and the rows erased, the files not scrubbed
    ],
)
def test_a_running_server_finishes_a_forget_whose_command_was_killed_after_its_event(tmp_path, point):
    """The forget's command dies after appending its event; a server that goes on running (no restart comes)
    finishes the forget within a few rounds of its follower: the key destroyed and the key file rewritten,
    the saved postings and vector index scrubbed, none of the subject's plaintext nor its key in any file of
    the data directory."""
    import time

    from tests.serving import serve

    data, mine, key = seeded(tmp_path)
    settings = dict(synchronous="NORMAL", auth="off", organizer_enabled="off", projection_follow_seconds="0.2")
    with serve(data, tmp_path / "server.log", **settings) as server:
        run_killed_at(data, point, *FORGET)
        deadline = time.monotonic() + 10
        while True:
            try:
                _assert_clean([p for p in data.rglob("*") if p.is_file()], _needles() + [key])
                break
            except (AssertionError, FileNotFoundError):  # not yet, or a file the server is replacing: look again
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert server.proc.poll() is None, server.log_tail()
    assert_finished(tmp_path, data, mine, key)


def test_a_server_stopping_while_another_process_forgets_does_not_save_the_erased_vectors_back(tmp_path):
    """A server's stop brings its vector index up to date, then saves it; a forget committed and scrubbed by
    another process in between must not find its erased vectors written back over the scrubbed file (nor may
    a later open keep such a file because nothing new was added)."""
    from usearch.index import Index

    data, mine, key = seeded(tmp_path)
    server = MemoryService.open(data, settings=SETTINGS)
    index = server.vector_index
    synced = index.sync

    def sync_then_forget(*args, **kwargs):
        added = synced(*args, **kwargs)
        done = run_cli(data, *FORGET, env=clean_env(synchronous="NORMAL"))  # another process, between the stop's sync and its save
        assert done.returncode == 0, done.stderr
        return added

    index.sync = sync_then_forget
    server.close()
    conn = sqlite3.connect(data / "projections.db")
    live = {r[0] for r in conn.execute("SELECT vector_of FROM vec_docs")}
    conn.close()
    saved = {int(k) for k in Index.restore(str(data / "vectors.usearch")).keys}
    assert saved <= live, f"the saved vector index holds {len(saved - live)} vectors of rows the forget erased"
    assert_finished(tmp_path, data, mine, key)


def test_a_server_stopping_while_another_process_forgets_does_not_save_the_erased_words_back(tmp_path, monkeypatch):
    """A server's stop saves its lexical postings when they grew; a forget committed and scrubbed by another
    process after the stop checked the database, before it wrote the file, must not find the erased words
    written back into ``fts.postings``."""
    from mnemolog.eventstore.model import MemoryContent
    from mnemolog.projections.fts import postings

    data, mine, key = seeded(tmp_path)
    server = MemoryService.open(data, settings=SETTINGS)
    server.warm()  # loaded from the saved file
    server.run(server.memories.add, CommandContext(tenant="t"), [MemoryContent(memory="a later note about tides")])
    postings.PostingsIndex.for_connection(server.read_conn()).load(server.read_conn())  # as a search brings it up to date
    locked = postings._file_lock

    def forget_then_lock(path, *, wait):
        if not wait:  # the stop's save, between its look at the database and its write
            done = run_cli(data, *FORGET, env=clean_env(synchronous="NORMAL"))
            assert done.returncode == 0, done.stderr
        return locked(path, wait=wait)

    monkeypatch.setattr(postings, "_file_lock", forget_then_lock)
    server.close()
    monkeypatch.setattr(postings, "_file_lock", locked)
    _assert_clean([p for p in data.rglob("*") if p.is_file()], _needles() + [key])
    assert_finished(tmp_path, data, mine, key)


# -- random moments --------------------------------------------------------------------------------------------------

ROUNDS = 3 * int(os.environ.get("CRASH_ROUNDS", "1"))


def secret_words(subject: str) -> list[str]:
    n = subject.split("-")[1]
    return [f"Vorquendal{n}x", f"Thrushmarrow{n}q"]


def subject_needles(subject: str) -> list[bytes]:
    out = []
    for word in secret_words(subject):
        for form in (word, word.lower(), word.lower()[:-1]):
            out += [form.encode("utf-8"), form.encode("utf-16-le")]
    return out


def add_subject(data, subject: str, n: int = 300) -> None:
    from mnemolog.eventstore.model import MemoryContent

    a, b = secret_words(subject)
    with MemoryService.open(data, settings=SETTINGS) as svc:
        svc.run(svc.memories.add, CommandContext(tenant="t", actor="test"), [MemoryContent(memory=f"{a} wrote note {i}", subject=subject, background=b) for i in range(n)])
        svc.scrub()
        svc.warm()  # the vector index and the lexical postings saved with the subject in them


@pytest.mark.slow
def test_forgets_killed_at_random_moments_are_finished_or_absent_after_a_restart(tmp_path):
    import random
    import time

    from tests.tools.test_crash_loops import head, kill, spawn

    rng = random.Random(20261204)
    data = tmp_path / "data"
    add_subject(data, "u-0")
    began = time.monotonic()  # how long a forget takes to open the data directory and find a subject: some kills land around it
    assert run_cli(data, *FORGET[:2], "nobody", *FORGET[3:], env=clean_env(synchronous="NORMAL")).returncode == 2
    startup = time.monotonic() - began
    outcomes = []
    for round_ in range(ROUNDS):
        subject = f"u-{round_ + 1}"
        add_subject(data, subject)
        with_server = rng.random() < 0.5  # a server follows the log meanwhile, and is killed too
        server = spawn(data, "serve", "--port", "0", log=tmp_path / "children.log", env=clean_env(synchronous="NORMAL", auth="off", organizer_enabled="off")) if with_server else None
        before = head(data)
        child = spawn(data, *FORGET[:2], subject, *FORGET[3:], log=tmp_path / "children.log")
        last_chance = round_ == ROUNDS - 1 and not any(killed for killed, _ in outcomes)  # on a fast machine every forget may have finished first
        if rng.random() < 0.3 and not last_chance:  # around the moment it opens the data directory
            time.sleep(rng.uniform(0.8, 1.3) * startup)
        else:  # once its event is appended: destroying the key, erasing, compacting, scrubbing
            deadline = time.monotonic() + 60
            while child.poll() is None and head(data) == before and time.monotonic() < deadline:
                time.sleep(0.001)
            time.sleep(0.0 if last_chance else rng.uniform(0.0, 0.4))
        killed = kill(child)
        if server is not None:
            kill(server)
        forgotten = restart_and_check(tmp_path / f"round-{round_}", data, subject)
        outcomes.append((killed, forgotten))
        print(f"forget round {round_} ({subject}, server={with_server}): killed={killed}, forgotten={forgotten}")
    assert any(killed for killed, _ in outcomes), "no kill landed during a forget"


def restart_and_check(tmp_path, data, subject) -> bool:
    """After a restart: the subject is forgotten in full (one event, no key, erased reads, no plaintext) or not at all; which."""
    with MemoryService.open(data, settings=SETTINGS) as svc:
        forgets = [r for r in svc.store.read_all(types=["SubjectForgotten"]) if r.event.subject == subject]
        keys = svc.store.sealer.keys.subject_keys("t", subject)
        [memory_id] = [r[0] for r in svc.read_conn().execute("SELECT memory_id FROM graph_memories WHERE tenant = 't' AND valid_to IS NULL AND json_extract(content, '$.subject') = ? LIMIT 1", (subject,))] or [None]
        assert len(forgets) <= 1 and svc.store.verify().ok
        if forgets:
            assert keys == [], f"{subject}: forgotten in the log, its key still held"
        else:
            assert keys, f"{subject}: no forget in the log, its key destroyed"
            assert memory_id is not None and not svc.get("t", memory_id).erased
        assert_equal_projections(without_counters(dump(svc.runner)), without_counters(fresh_rebuild(data, tmp_path / "reference")), f"{subject}")
        if forgets:  # while open, as a restarted server is, and after it stopped
            _assert_clean([p for p in data.rglob("*") if p.is_file()], subject_needles(subject))
    if forgets:
        _assert_clean([p for p in data.rglob("*") if p.is_file()], subject_needles(subject))
    return bool(forgets)
