"""``mnemolog export`` then ``mnemolog import`` into a fresh data directory, sealing on: every read agrees.

The source holds two tenants, several subjects, a forgotten subject, a
merge, a revert, a document and entities. With the key file, the copy's
reads (get at the head and as of several positions, history, recall,
entities, documents) equal the source's. Without it, the import is
refused (from a file or stdin, the data directory left as it was found)
unless ``--without-keys`` asks for an unreadable copy: there a read is an
error naming the missing key (never plaintext, never a crash), and the
same import with ``--keys`` makes it readable.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import msgspec
import pytest

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent, NotFound
from mnemolog.projections.ingest.documents import ParsedDocument, document_import
from mnemolog.projections.recall.searcher import RecallOptions
from mnemolog.projections.service import MemoryService
from tests.in_process import run_main

TENANTS = ("default", "acme")
QUERIES = ("Lisbon trams", "cat Miso", "bridge river", "office Porto")


def cli(data: Path, *argv: str, code: int = 0) -> subprocess.CompletedProcess:
    done = run_main(["--data-dir", str(data), *map(str, argv)], text=True)
    assert done.returncode == code, (argv, done.returncode, done.stdout, done.stderr)
    return done


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("round-trip")
    data = root / "source"
    ids: dict[str, list[str]] = {t: [] for t in TENANTS}
    with MemoryService.open(data) as svc:
        def ctx(tenant: str = "default") -> CommandContext:
            return CommandContext(tenant=tenant)

        def add(tenant: str, text: str, subject: str | None = None) -> str:
            memory_id = svc.run(svc.memories.add, ctx(tenant), [MemoryContent(memory=text, subject=subject)]).memory_ids[0]
            ids[tenant].append(memory_id)
            return memory_id

        svc.run(svc.entities.upsert, ctx(), "lisbon", name="Lisbon", aliases=["Lisboa"], tags=["city"])
        lisbon = add("default", "I moved to Lisbon in May", "u-1")
        add("default", "I adopted a cat called Miso", "u-2")
        trams = [add("default", "Lisbon has yellow trams"), add("default", "Tram 28 crosses Lisbon")]
        add("acme", "The office is in Porto", "u-9")
        add("acme", "Porto has a bridge over the river")
        svc.run(svc.memories.update, ctx(), lisbon, {"memory": "I moved to Lisbon in June"})
        ids["default"].append(svc.run(svc.memories.merge, ctx(), trams).data["merged_id"])
        archived = svc.run(svc.memories.archive, ctx(), lisbon)
        svc.run(svc.reverts.revert, ctx(), archived.correlation_id)
        text = "# Trip\n\nLisbon trams are yellow.\n\nThe river is wide.\n"
        doc = document_import(ParsedDocument("trip.md", "trip.md", [text], "markdown", hashlib.sha256(text.encode()).hexdigest()))
        ids["default"].extend(svc.run(svc.documents.import_document, ctx(), doc).memory_ids)
        svc.forget(ctx(), "u-2", reason="asked")
        head = svc.store.last_position()
    cli(data, "export", "-o", root / "log.jsonl", "--with-keys", root / "log.keys")
    return {"root": root, "data": data, "ids": ids, "head": head}


def reads(data: Path, ids: dict[str, list[str]], head: int) -> dict:
    """Everything a reader sees, at the head and as of a few positions."""
    out: dict = {}
    with MemoryService.open(data) as svc:
        for tenant in TENANTS:
            for memory_id in ids[tenant]:
                for as_of in (None, 1, head // 3, head // 2, head - 1):
                    try:
                        out[(tenant, memory_id, as_of)] = msgspec.structs.asdict(svc.get(tenant, memory_id, as_of=as_of))
                    except NotFound:
                        out[(tenant, memory_id, as_of)] = None
                out[(tenant, memory_id, "history")] = svc.history(tenant, memory_id)
            for query in QUERIES:
                for as_of in (None, head // 2):
                    found = svc.searcher.recall(tenant, query, RecallOptions(limit=10, as_of=as_of))
                    out[(tenant, query, as_of)] = [(h.id, round(h.score, 9)) for h in found.hits]
            out[(tenant, "entity")] = msgspec.structs.asdict(svc.knowledge.get(tenant, "lisbon")) if svc.knowledge.get(tenant, "lisbon") else None
            document = svc.knowledge.document(tenant, "trip.md")
            out[(tenant, "document")] = msgspec.structs.asdict(document) if document else None
    return out


def test_an_import_with_its_keys_reads_as_the_source(source):
    copy = source["root"] / "with-keys"
    cli(copy, "import", source["root"] / "log.jsonl", "--keys", source["root"] / "log.keys")
    cli(copy, "verify", "--against", source["root"] / "log.jsonl")
    expected = reads(source["data"], source["ids"], source["head"])
    found = reads(copy, source["ids"], source["head"])
    assert found == expected
    shown = [v for k, v in expected.items() if len(k) == 3 and k[2] is None and isinstance(v, dict) and v.get("erased")]
    assert len(shown) == 1 and "Miso" not in json.dumps(shown)  # the forgotten subject's memory, erased in both
    assert any(expected[(t, q, None)] for t in TENANTS for q in QUERIES)


def test_an_import_without_its_keys_is_refused_and_leaves_nothing_behind(source):
    export = source["root"] / "log.jsonl"
    fresh = source["root"] / "refused" / "data"
    for argv, stdin in ((["import", export], None), (["import", "-"], export.read_bytes())):
        done = run_main(["--data-dir", str(fresh), *map(str, argv)], stdin=stdin)
        err = done.stderr.decode()
        assert done.returncode == 2 and err.count("\n") == 1 and "Traceback" not in err, err
        assert "--keys" in err and "--without-keys" in err and "import refused, nothing written" in err
        assert not (source["root"] / "refused").exists()  # no data directory left that could not be read
    # A data directory holding a log of its own keeps it, unchanged, and a key file that is not the export's is refused too.
    other = source["root"] / "other"
    cli(other, "add", "a note of its own")
    before = (cli(other, "digest").stdout, (other / "keys.db").read_bytes())
    stray = source["root"] / "stray.keys"
    cli(other, "export", "-o", source["root"] / "stray.jsonl", "--with-keys", stray)
    done = cli(other, "import", export, "--keys", stray, code=2)
    assert "the key file given does not hold it" in done.stderr and done.stderr.count("\n") == 1
    assert (cli(other, "digest").stdout, (other / "keys.db").read_bytes()) == before


def test_an_import_without_its_keys_reads_as_errors_naming_the_key(source):
    copy = source["root"] / "without-keys"
    cli(copy, "import", source["root"] / "log.jsonl", "--without-keys")
    cli(copy, "verify")  # a copy without keys: its chain is what can be checked
    lisbon = source["ids"]["default"][0]
    for argv in (["get", lisbon], ["history", lisbon], ["--tenant", "acme", "get", source["ids"]["acme"][0]]):
        done = cli(copy, *argv, code=2)
        assert "never held" in done.stderr and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
        assert "Lisbon" not in done.stdout + done.stderr and "Porto" not in done.stdout + done.stderr
    # Run again (as after a stop midway), it finds only its own events there: nothing new, and nothing refused.
    assert json.loads(cli(copy, "import", source["root"] / "log.jsonl", "--without-keys", "--json").stdout)["imported"] == 0
    # The same import with the key file: its events are there already, its keys come in, and the copy reads.
    again = json.loads(cli(copy, "import", source["root"] / "log.jsonl", "--keys", source["root"] / "log.keys", "--json").stdout)
    assert again["imported"] == 0 and again["skipped_existing"] == again["read"]
    assert "Lisbon" in json.loads(cli(copy, "get", lisbon, "--json").stdout)["memory"]


def test_an_import_without_keys_into_a_log_of_its_own_is_refused(source):
    """``--without-keys`` into a data directory already in use left every tenant's reads and writes stopped at the
    first event no key opens (the projections follow the log in order): refused, naming why, and nothing written."""
    other = source["root"] / "in-use"
    cli(other, "add", "a note of its own")
    before = (cli(other, "digest").stdout, (other / "keys.db").read_bytes())
    done = cli(other, "import", source["root"] / "log.jsonl", "--without-keys", code=2)
    assert "--without-keys imports only into a new data directory" in done.stderr and "1 event of its own" in done.stderr
    assert done.stderr.count("\n") == 1 and "nothing written" in done.stderr
    assert (cli(other, "digest").stdout, (other / "keys.db").read_bytes()) == before
    cli(other, "add", "a second note")  # the directory goes on


def _edited(path: Path, target: Path, line: int, edit) -> Path:
    """A copy of a JSON-lines file with line ``line`` (0-based) replaced by ``edit(its object)``."""
    lines = path.read_bytes().split(b"\n")
    lines[line] = json.dumps(edit(json.loads(lines[line]))).encode()
    target.write_bytes(b"\n".join(lines))
    return target


def test_a_key_file_key_that_does_not_open_its_events_is_refused_and_nothing_written(source):
    """A key of the right id and other bytes was taken: the import said done, and from that event on every read of
    the data directory failed, other tenants' too, with no way back (the same import again kept the wrong key)."""
    root = source["root"]
    wrong = _edited(root / "log.keys", root / "wrong.keys", 1, lambda row: {**row, "key": "00" * 32})
    other = root / "wrong-key"
    cli(other, "add", "a note of its own")
    before = (cli(other, "digest").stdout, (other / "keys.db").read_bytes())
    done = cli(other, "import", root / "log.jsonl", "--keys", wrong, code=2)
    assert "does not open it" in done.stderr and "import refused, nothing written" in done.stderr and done.stderr.count("\n") == 1
    assert (cli(other, "digest").stdout, (other / "keys.db").read_bytes()) == before
    cli(other, "import", root / "log.jsonl", "--keys", root / "log.keys")  # the right key file then imports
    cli(other, "verify")
    cli(other, "add", "a second note")


def test_json_nested_too_deep_in_an_export_or_a_key_file_is_refused_in_one_line(source):
    """msgspec and json stop at some thousand levels with a RecursionError: a traceback, and an empty log left."""
    root = source["root"]
    deep = "[" * 3000 + "]" * 3000
    nested = _edited(root / "log.jsonl", root / "deep.jsonl", 3, lambda e: {**e, "content_deep": None})
    nested.write_bytes(nested.read_bytes().replace(b'"content_deep": null', b'"content_deep": ' + deep.encode()))
    keys = root / "deep.keys"
    keys.write_bytes((root / "log.keys").read_bytes().split(b"\n")[0] + b"\n" + deep.encode() + b"\n")
    for argv in (["import", nested, "--keys", root / "log.keys"], ["import", root / "log.jsonl", "--keys", keys]):
        fresh = root / "deep" / "data"
        done = cli(fresh, *argv, code=2)
        assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1 and "nothing written" in done.stderr, done.stderr
        assert not fresh.exists()


def test_a_digest_past_any_position_is_refused_not_a_traceback(source):
    done = cli(source["data"], "verify", "--against", "9" * 30 + ":" + "0" * 64, code=2)
    assert "a position up to" in done.stderr or "export file" in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


@pytest.mark.parametrize("stamp, why", [("2026-12-04T03:40:17Z", "recorded_at"), ("2099-01-01T00:00:00.000000Z", "later than this machine's clock")])
def test_a_recorded_time_in_another_form_or_in_the_future_is_refused(source, stamp, why):
    """Times are compared as text: "…17Z" sorted after "…17.9Z" and as-of reads by time answered wrong; a time in
    2099 would have stamped every later write 2099 (recorded times never go back)."""
    root = source["root"]
    edited = _edited(root / "log.jsonl", root / "stamp.jsonl", 2, lambda e: {**e, "recorded_at": stamp})
    done = cli(root / "stamped", "import", edited, "--keys", root / "log.keys", "--rehash", code=2)
    assert why in done.stderr and done.stderr.count("\n") == 1 and not (root / "stamped").exists()
