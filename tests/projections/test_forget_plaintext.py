"""Forgetting a subject some of whose memories were written in plaintext (before sealing was on, or with
``MNEMOLOG_ENCRYPTION=off``): the log keeps those bytes, since it is append-only and no key sealed them, but
nothing derived from the log does, in the live run or in any replay; and the forget says which events stay."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.sealing import ERASED_TEXT
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.service import MemoryService
from tests.in_process import run_main
from tests.projections.test_forget import _projected, _recall

CTX = CommandContext(tenant="t", actor="privacy-officer")
PLAIN = "Ozymandrel Quibbleworth"
PLAIN_BACKGROUND = "raised near the Farthingale viaduct"
SEALED = "Pemberwick Saltonstall"
LOG_FILES = ("events.db", "events.db-wal", "events.db-shm")  # the log itself: its plaintext events stay, and are reported


def _needles(*texts: str) -> list[bytes]:
    """The texts' longer words as UTF-8 and UTF-16, and as the full-text index stores them (lowercased, stemmed)."""
    out = []
    for word in re.findall(r"\w+", " ".join(texts)):
        if len(word) < 6:
            continue
        for form in (word, word.lower(), word.lower()[:-1], word.lower()[-5:]):  # FTS5 stores a term's tail after a shared prefix
            out += [form.encode("utf-8"), form.encode("utf-16-le"), form.encode("utf-16-be")]
    return out


def _holding(data: Path, needles: list[bytes], *, skip: tuple[str, ...] = LOG_FILES) -> dict[str, list[bytes]]:
    found = {}
    for path in data.rglob("*"):
        if path.is_file() and path.name not in skip:
            content = path.read_bytes()
            if hits := [n for n in needles if n in content]:
                found[path.name] = hits[:3]
    return found


def _seed(data: Path) -> dict[str, list[str]]:
    """Plaintext memories of u-7 (one updated once sealing is on), a sealed one, and other memories."""
    with MemoryService.open(data, settings=Settings({"encryption": "off"}, env={})) as svc:
        plain = svc.run(
            svc.memories.add,
            CTX,
            [MemoryContent(memory=f"{PLAIN} note {i}", subject="u-7", background=PLAIN_BACKGROUND, key=f"quibbleworth {i}") for i in range(3)],
        ).memory_ids
        others = svc.run(svc.memories.add, CTX, [MemoryContent(memory="ordinary harbour memory")]).memory_ids
    with MemoryService.open(data) as svc:
        svc.run(svc.memories.update, CTX, plain[0], {"memory": f"{SEALED} moved"})  # version 2 sealed, version 1 stays plaintext
        sealed = svc.run(svc.memories.add, CTX, [MemoryContent(memory=f"{SEALED} note", subject="u-7")]).memory_ids
        svc.scrub()  # the vector index saved with the subject's vectors in it
    return {"plain": list(plain), "sealed": list(sealed), "others": list(others)}


def _cli(data: Path, *args: str) -> subprocess.CompletedProcess:
    return run_main(list(args), env={"MNEMOLOG_DATA_DIR": str(data)}, text=True)


def test_a_rebuild_after_the_forget_projects_none_of_the_plaintext_memories_text(tmp_path):
    """A replay read a forgotten subject's plaintext events as written, indexed their words and erased the rows at the
    forget: ``mnemolog rebuild`` left the words in projections.db (FTS5 keeps a deleted row's terms until a merge).
    The replay reads them erased, as it reads the sealed ones, so nothing of them is projected at all."""
    data = tmp_path / "data"
    ids = _seed(data)
    with MemoryService.open(data) as svc:
        svc.forget(CTX, "u-7", reason="request 12")
        for memory_id in ids["plain"] + ids["sealed"]:
            view = svc.get("t", memory_id)
            assert view.erased and view.memory == ERASED_TEXT and view.background is None and view.key is None
            assert all(v["erased"] and v["memory"] == ERASED_TEXT for v in svc.history("t", memory_id))
        assert svc.get("t", ids["others"][0]).memory == "ordinary harbour memory"
        assert not _recall(svc, f"{PLAIN} Farthingale viaduct quibbleworth")
        live = _projected(svc)
    needles = _needles(PLAIN, PLAIN_BACKGROUND, SEALED)
    assert _holding(data, needles) == {}
    assert _holding(data, needles, skip=()), "the log keeps the plaintext events: the test would prove nothing"

    rebuilt = _cli(data, "rebuild")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert _holding(data, needles) == {}
    with MemoryService.open(data) as svc:
        assert _projected(svc) == live
        assert svc.get("t", ids["plain"][1]).erased and svc.get("t", ids["others"][0]).memory == "ordinary harbour memory"
    assert _holding(data, needles) == {}
    for name in ("projections.db", "vectors.usearch", "fts.postings"):  # disposable: the next start replays them
        (data / name).unlink(missing_ok=True)
    with MemoryService.open(data) as svc:
        assert _projected(svc) == live
    assert _holding(data, needles) == {}


def test_the_forget_names_the_events_the_log_keeps_in_plaintext(tmp_path):
    """The forget answered "3 memories erased" and its event named no event, while the log kept the plaintext
    versions' bytes: the answer and the ``SubjectForgotten`` now name their positions; a retry and a forget of
    a subject forgotten already answer the same."""
    data = tmp_path / "data"
    ids = _seed(data)
    with MemoryService.open(data) as svc:
        expected = sorted(r.position for r in svc.store.read_all() if getattr(r.event, "memory_id", None) in ids["plain"] and r.type == "MemoryAdded")
        ctx = CommandContext(tenant="t", actor="privacy-officer", idempotency_key="erase-u-7")
        result = svc.forget(ctx, "u-7", reason="request 12")
        assert result.data["memories_erased"] == 4 and result.data["keys_destroyed"] == 1
        assert result.data["plaintext_positions"] == expected  # the sealed update of plain[0] and the sealed memory are not named
        [event] = svc.store.read_all(types=["SubjectForgotten"])
        assert list(event.event.plaintext_positions) == expected
        assert svc.forget(ctx, "u-7", reason="request 12").data["plaintext_positions"] == expected  # a retry
        again = svc.forget(CTX, "u-7", reason="request 12")
        assert again.data["already_forgotten"] and again.data["plaintext_positions"] == expected
        for position in expected:  # the log keeps them: read as stored, the text is there
            [stored] = [r for r in svc.store.read_stored(position - 1, tenant="t", until=position)]
            assert PLAIN in stored.event.content.memory
        # A subject whose events were all sealed leaves nothing in plaintext.
        svc.run(svc.memories.add, CTX, [MemoryContent(memory="a sealed note", subject="u-8")])
        assert svc.forget(CTX, "u-8").data["plaintext_positions"] == []


def test_the_cli_forget_says_which_events_stay_in_plaintext(tmp_path):
    data = tmp_path / "data"
    ids = _seed(data)
    with MemoryService.open(data) as svc:
        expected = sorted(r.position for r in svc.store.read_all() if getattr(r.event, "memory_id", None) in ids["plain"] and r.type == "MemoryAdded")
    done = _cli(data, "forget", "--tenant", "t", "--subject", "u-7", "--reason", "request 12", "--yes")
    assert done.returncode == 0, done.stderr
    shown = ", ".join(map(str, expected))
    assert f"{len(expected)} events stay in the log in plaintext (positions {shown})" in done.stdout, done.stdout


def test_verify_lists_the_events_forgets_left_in_plaintext(tmp_path):
    """``mnemolog verify`` said only "ok": an auditor could not learn from it that the log still holds the text
    of memories a forget erased. It says so (the chain still verifies: exit 0), naming the positions, also
    for a forget whose event does not name them (recorded before it did, or imported)."""
    data = tmp_path / "data"
    _seed(data)
    assert "plaintext" not in _cli(data, "verify").stdout  # nothing forgotten yet: nothing to say
    done = _cli(data, "forget", "--tenant", "t", "--subject", "u-7", "--reason", "request 12", "--yes", "--json")
    assert done.returncode == 0, done.stderr
    positions = json.loads(done.stdout.splitlines()[-1])["plaintext_positions"]
    assert len(positions) == 3

    checked = _cli(data, "verify")
    assert checked.returncode == 0, checked.stderr
    shown = ", ".join(map(str, positions))
    assert checked.stdout.startswith("ok: ") and f"3 events keep text a forget erased in plaintext (positions {shown})" in checked.stdout
    report = json.loads(_cli(data, "verify", "--json").stdout)
    assert report["ok"] is True and report["plaintext_kept"] == positions
    assert json.loads(_cli(data, "verify", "--from", str(positions[1]), "--json").stdout)["plaintext_kept"] == positions[1:]


def test_verify_finds_them_for_a_forget_recorded_without_its_plaintext_positions(tmp_path):
    from mnemolog.eventstore import StreamAppend
    from mnemolog.eventstore import catalogue as c
    from mnemolog.eventstore.erased import plaintext_kept

    data = tmp_path / "data"
    ids = _seed(data)
    with MemoryService.open(data) as svc:  # a forget as recorded before its event named them
        event = c.SubjectForgotten(subject="u-7", key_ids=(), memory_ids=tuple(ids["plain"]), reason="old")
        svc.store.append_batch([StreamAppend(c.tenant_stream("t"), [event])], tenant="t")
        expected = sorted(r.position for r in svc.store.read_all() if getattr(r.event, "memory_id", None) in ids["plain"] and r.type == "MemoryAdded")
        assert list(plaintext_kept(svc.store)) == expected
        assert list(plaintext_kept(svc.store, expected[-1])) == expected[-1:]
        svc.sync()
        assert svc.get("t", ids["plain"][2]).erased


def test_a_subject_written_only_unsealed_is_erased_from_every_derived_file(tmp_path):
    """No key sealed the subject's memories, so the forget has none to destroy: it still erases them from every
    read and projection, live and after a rebuild, and names the events the log keeps."""
    data = tmp_path / "data"
    off = Settings({"encryption": "off"}, env={})
    with MemoryService.open(data, settings=off) as svc:
        mine = svc.run(svc.memories.add, CTX, [MemoryContent(memory=f"{PLAIN} note {i}", subject="u-7", background=PLAIN_BACKGROUND) for i in range(3)])
        svc.scrub()
        result = svc.forget(CTX, "u-7", reason="request 12")
        assert result.data == {"subject": "u-7", "keys_destroyed": 0, "memories_erased": 3, "plaintext_positions": list(mine.positions)}
        assert all(svc.get("t", m).erased for m in mine.memory_ids) and not _recall(svc, PLAIN)
        live = _projected(svc)
    needles = _needles(PLAIN, PLAIN_BACKGROUND)
    assert _holding(data, needles) == {}
    assert _cli(data, "rebuild").returncode == 0
    assert _holding(data, needles) == {}
    with MemoryService.open(data, settings=off) as svc:
        assert _projected(svc) == live


def test_a_forgotten_memorys_history_says_which_of_its_versions_the_log_keeps_in_plaintext(tmp_path):
    """The history of an erased memory named the forget (who, when, why) and showed every version erased, but not
    that the log still holds some of them in plaintext: each forget it lists names those of the memory's events."""
    data = tmp_path / "data"
    ids = _seed(data)
    with MemoryService.open(data) as svc:
        svc.forget(CTX, "u-7", reason="request 12")
        versions = svc.history_view("t", ids["plain"][0])["versions"]
        assert [v["memory"] for v in versions] == [ERASED_TEXT, ERASED_TEXT]
        [forget] = svc.history_view("t", ids["plain"][0])["forgotten"]
        assert forget["plaintext_kept"] == [versions[0]["position"]]  # version 2 was sealed: its key is gone
        [forget] = svc.forgotten("t", ids["sealed"][0])
        assert forget["plaintext_kept"] == []


# -- the mentions of a forgotten subject's memories, written in plaintext -------------------------------------------------

MENTIONED = "Zebulon Harrowgate"
OTHER_MENTIONED = "Ottoline Brackenridge"


def _seed_mentions(data: Path) -> dict[str, str]:
    """Unsealed memories of u-7 mentioning an entity (one written without a subject and given it later, one whose
    mention its update unlinked), and a memory of the tenant mentioning another entity."""
    with MemoryService.open(data, settings=Settings({"encryption": "off"}, env={})) as svc:
        svc.run(svc.entities.upsert, CTX, "person:z1", name=MENTIONED)
        svc.run(svc.entities.upsert, CTX, "person:o1", name=OTHER_MENTIONED)
        [named] = svc.run(svc.memories.add, CTX, [MemoryContent(memory=f"{MENTIONED} called at noon", subject="u-7")]).memory_ids
        svc.run(svc.memories.update, CTX, named, {"memory": "called at noon"})  # its unlink keeps the edge whole
        [given] = svc.run(svc.memories.add, CTX, [MemoryContent(memory=f"{MENTIONED} signed the lease")]).memory_ids
        svc.run(svc.memories.update, CTX, given, {"subject": "u-7"})
        [other] = svc.run(svc.memories.add, CTX, [MemoryContent(memory=f"{OTHER_MENTIONED} owns the mill")]).memory_ids
        assert [link["alias"] for link in svc.mention_links("t", named)] == [MENTIONED.lower()]
    return {"named": named, "given": given, "other": other}


def _shown_mentions(lines: list[dict]) -> str:
    """The events of ``lines`` but the entities' own (the tenant's, which no forget of u-7 erases), as one lowercased text."""
    return json.dumps([line for line in lines if line["type"] != "EntityUpserted"]).lower()


def test_the_log_shows_no_alias_of_a_forgotten_subjects_plaintext_mentions(tmp_path):
    """The forget erased the memories' text from every read of the log, but ``mnemolog log`` still showed the
    alias the linker matched in their unsealed ``MENTIONS`` edges (and its evidence): those edges now read erased
    where a later forget names their memory, and a rebuild projects none of them."""
    data = tmp_path / "data"
    ids = _seed_mentions(data)
    assert MENTIONED.lower() in _shown_mentions([json.loads(line) for line in _cli(data, "log", "--json").stdout.splitlines()])
    with MemoryService.open(data) as svc:
        assert svc.forget(CTX, "u-7", reason="request 12").data["keys_destroyed"] == 0
        assert all(link["alias"] is None for m in ("named", "given") for link in svc.mention_links("t", ids[m]))
        live = _projected(svc)

    shown = _cli(data, "log", "--json")
    assert shown.returncode == 0, shown.stderr
    lines = [json.loads(line) for line in shown.stdout.splitlines()]
    assert MENTIONED.split()[1].lower() not in _shown_mentions(lines)
    assert OTHER_MENTIONED.lower() in _shown_mentions(lines)  # the tenant's memory's mention stays
    edges = [e for line in lines if line["type"] in ("EdgeLinked", "EdgeUnlinked") for e in [line["payload"]["edge"]] if e["source"] != ids["other"]]
    assert len(edges) == 3 and all(e["erased"] and "properties" not in e for e in edges)  # linked, unlinked; and the given memory's

    rebuilt = _cli(data, "rebuild")
    assert rebuilt.returncode == 0, rebuilt.stderr
    with MemoryService.open(data) as svc:
        assert _projected(svc) == live


# -- the tenant's own key, when everything was written unsealed ---------------------------------------------------------


def _tenants_own(svc: MemoryService) -> list[int]:
    """The positions of the tenant's own personal events as stored: entities, documents, memories without a subject
    and the mentions recorded under the tenant's key."""
    out = []
    for r in svc.store.read_stored(tenant="t"):
        event = r.event
        if r.type in ("EntityUpserted", "DocumentImported") or (r.type == "MemoryAdded" and event.content.subject is None):
            out.append(r.position)
        elif r.type == "EdgeLinked" and event.edge.edge_type == "MENTIONS" and event.edge.subject is None:
            out.append(r.position)
    return out


def test_the_tenants_own_key_is_forgotten_though_everything_was_written_unsealed(tmp_path):
    """With everything written unsealed the tenant holds no key, and a forget of ``@tenant`` was refused with a
    conflict. It erases the tenant's entities, documents, memories without a subject and their mentions from every
    read of the log, every projection and every replay, as a forget of its key does, and names the events the log
    keeps in plaintext (``verify`` too); the memories of a named subject stay."""
    from tests.projections.test_forget import TENANT_SECRETS, _seed_tenant, _tenant_needles

    data = tmp_path / "data"
    off = Settings({"encryption": "off"}, env={})
    with MemoryService.open(data, settings=off) as svc:
        ids = _seed_tenant(svc, tmp_path / "docs")
        expected = _tenants_own(svc)
        assert len(expected) >= 6  # two entities, the document, its chunk, the memory, their mentions
        svc.scrub()
        svc.warm()
    words = [w.lower() for w in re.findall(r"\w+", " ".join(TENANT_SECRETS))]
    assert any(w in _cli(data, "log", "--json").stdout.lower() for w in words)

    done = _cli(data, "forget", "--tenant", "t", "--subject", "@tenant", "--reason", "tenant closed", "--yes", "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.splitlines()[-1])
    assert answer["keys_destroyed"] == 0 and answer["memories_erased"] >= 2 and answer["plaintext_positions"] == expected

    shown = _cli(data, "log", "--json")
    assert shown.returncode == 0, shown.stderr
    assert not [w for w in words if w in shown.stdout.lower()]
    assert "an ordinary harbour note" in shown.stdout  # a named subject has its own key
    report = json.loads(_cli(data, "verify", "--json").stdout)
    assert report["ok"] is True and report["plaintext_kept"] == expected

    with MemoryService.open(data, settings=off) as svc:
        entity = svc.knowledge.get("t", "person:q1")
        assert entity.erased and entity.name == ERASED_TEXT and entity.aliases == [] and entity.description == ""
        document = svc.knowledge.document("t", ids["doc"])
        assert document.erased and document.title == ERASED_TEXT and document.source_url is None
        assert svc.get("t", ids["memory"]).erased and svc.get("t", document.chunk_ids[0]).erased
        assert svc.get("t", ids["named"]).memory == "an ordinary harbour note"
        assert [link["alias"] for link in svc.mention_links("t", ids["memory"])] == [None]
        assert "quorvath" not in repr(svc.history_view("t", ids["memory"])).lower()
        again = svc.forget(CTX, "@tenant", reason="tenant closed")
        assert again.data["already_forgotten"] and again.data["plaintext_positions"] == expected
        live = _projected(svc)
    needles = _tenant_needles()
    assert _holding(data, needles) == {}
    assert _cli(data, "rebuild").returncode == 0
    assert _holding(data, needles) == {}
    with MemoryService.open(data, settings=off) as svc:
        assert _projected(svc) == live
