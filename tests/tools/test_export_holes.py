"""An export with a hole is refused on import, naming the line; a complete one (or a drop's backup) imports and verifies."""

from __future__ import annotations

import json

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.projections.service import MemoryService
from mnemolog.tools import cli


def make_log(data) -> None:
    with MemoryService.open(data) as svc:
        ctx = CommandContext(tenant="acme")
        a, b = svc.run(svc.memories.add, ctx, [MemoryContent(memory="Alice lives in Berlin"), MemoryContent(memory="alice lives in berlin")]).memory_ids
        svc.run(svc.memories.merge, ctx, [a, b], text="Alice lives in Berlin")
        svc.run(svc.memories.add, CommandContext(tenant="globex"), [MemoryContent(memory="Globex sells widgets")])


def test_a_full_export_missing_its_merge_is_refused(tmp_path, capsys):
    data, dump = tmp_path / "data", tmp_path / "log.jsonl"
    make_log(data)
    assert cli.main(["--data-dir", str(data), "export", "-o", str(dump), "--with-keys", str(tmp_path / "log.keys")]) == 0
    lines = dump.read_bytes().splitlines(keepends=True)
    [merged] = [n for n, line in enumerate(lines, 1) if b'"type":"MemoriesMerged"' in line]
    holed = tmp_path / "holed.jsonl"
    holed.write_bytes(b"".join(lines[: merged - 1] + lines[merged:]))
    capsys.readouterr()
    fresh = tmp_path / "fresh"
    assert cli.main(["--data-dir", str(fresh), "import", str(holed)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"line {merged} " in err and "missing" in err and "nothing written" in err
    assert not fresh.exists()  # nothing written: not even a new, empty log
    # The complete export imports, hash for hash.
    assert cli.main(["--data-dir", str(fresh), "import", str(dump), "--keys", str(tmp_path / "log.keys")]) == 0
    assert cli.main(["--data-dir", str(fresh), "verify"]) == 0
    capsys.readouterr()
    assert cli.main(["--data-dir", str(fresh), "digest"]) == 0
    assert capsys.readouterr().out.strip() == json.loads(lines[-1])["digest"]


def test_a_drop_backup_imports_and_a_cut_one_is_refused(tmp_path, capsys):
    data = tmp_path / "data"
    make_log(data)
    with MemoryService.open(data) as svc:
        backup = str(data / svc.drop_tenant(CommandContext(tenant="acme")).data["backup"])
    lines = open(backup, "rb").read().splitlines(keepends=True)
    assert json.loads(lines[0]) == {"mnemolog_export": 3, "scope": "tenant", "tenant": "acme"}
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"".join(lines[:-2]))
    assert cli.main(["--data-dir", str(tmp_path / "restored"), "import", str(cut)]) == 2
    assert "cut short" in capsys.readouterr().err
    # Elsewhere, the backup's sealed events need the tenant's keys: the import says so and leaves nothing.
    assert cli.main(["--data-dir", str(tmp_path / "restored"), "import", backup]) == 2
    assert "--keys" in capsys.readouterr().err and not (tmp_path / "restored").exists()
    keys = tmp_path / "acme.keys"
    assert cli.main(["--data-dir", str(data), "export", "--tenant", "acme", "-o", str(tmp_path / "acme.jsonl"), "--with-keys", str(keys)]) == 0
    capsys.readouterr()
    assert cli.main(["--data-dir", str(tmp_path / "restored"), "import", backup, "--keys", str(keys)]) == 0
    assert f"imported {len(lines) - 2}" in capsys.readouterr().out
    with MemoryService.open(tmp_path / "restored") as svc:
        assert svc.store.read_all(after=0, limit=1, tenant="acme")[0].event.content.memory == "Alice lives in Berlin"
