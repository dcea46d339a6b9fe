"""The reference documents the product: every HTTP route, every setting and every CLI command.

``docs/reference.md`` is generated from the explicit registries (the route
tables of :mod:`mnemolog.api.app`, the settings modules of
:mod:`mnemolog.tools.docs`, the CLI's parser): these tests fail when the file
is not what the generator writes, when a registry misses something the
product declares, or when the README stops pointing at the reference.

Run ``python -m mnemolog.tools.docs --write docs/reference.md`` to update it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mnemolog.tools import docs

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
REFERENCE = ROOT / "docs" / "reference.md"


def routes() -> list[str]:
    return sorted({f"{r.method} {r.path}" for r in docs.routes()})


def settings() -> list[str]:
    return sorted(s.env for s in docs.settings())


def commands() -> list[str]:
    return sorted(name for name, _, _ in docs.commands())


def _route_pattern(item: str) -> re.Pattern:
    return re.compile(re.escape(item) + r"(?![\w/{}-])")


def _setting_pattern(item: str) -> re.Pattern:
    return re.compile(r"(?<!\w)" + re.escape(item) + r"(?!\w)")


def _command_pattern(item: str) -> re.Pattern:
    words = item.split()[1:]
    options = r"(?:\s+--?[\w-]+(?:[= ](?!-)[^\s`]+)?)*"
    return re.compile(r"(?<![\w-])mnemolog" + options + r"\s+" + r"\s+".join(map(re.escape, words)) + r"(?![\w-])")


def missing(text: str) -> dict[str, list[str]]:
    return {
        "routes": [r for r in routes() if not _route_pattern(r).search(text)],
        "settings": [s for s in settings() if not _setting_pattern(s).search(text)],
        "commands": [c for c in commands() if not _command_pattern(c).search(text)],
    }


# -- the checks ----------------------------------------------------------------------------------


def test_the_inventory_is_found():
    """Guard the registries themselves: an empty inventory would pass vacuously."""
    assert "POST /v1/memories" in routes() and "GET /health" in routes()
    assert {"MNEMOLOG_DATA_DIR", "MNEMOLOG_PORT", "MNEMOLOG_RECALL_RRF_K", "MNEMOLOG_EMBEDDER"} <= set(settings())
    assert {"MNEMOLOG_LINKER_MAX_ALIAS_DOCUMENT_FREQUENCY", "MNEMOLOG_ENTITY_MAX_TAGS"} <= set(settings())
    assert {"mnemolog add", "mnemolog bench append", "mnemolog bench graph", "mnemolog import"} <= set(commands())
    assert {"mnemolog serve", "mnemolog keys create", "mnemolog keys list", "mnemolog keys revoke"} <= set(commands())


def test_the_settings_modules_declare_every_setting():
    """Importing every module of the product declares no setting the explicit list leaves out."""
    script = """
import importlib, json, pkgutil
from mnemolog.eventstore.settings import REGISTRY
from mnemolog.tools import docs
listed = sorted(s.name for s in docs.settings())
for package in ("eventstore", "projections", "api", "tools"):
    root = importlib.import_module("mnemolog." + package)
    for module in pkgutil.walk_packages(root.__path__, root.__name__ + "."):
        if ".migrations" not in module.name:
            importlib.import_module(module.name)
print(json.dumps({"listed": listed, "declared": sorted(REGISTRY)}))
"""
    found = json.loads(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120).stdout)
    assert found["declared"] == found["listed"], set(found["declared"]) ^ set(found["listed"])


def test_the_patterns_do_not_match_prefixes():
    assert not _route_pattern("POST /v1/memories").search("POST /v1/memories/merge")
    assert _route_pattern("POST /v1/memories").search("`POST /v1/memories` adds")
    assert not _setting_pattern("MNEMOLOG_RECALL_WEIGHT_SEMANTIC").search("MNEMOLOG_RECALL_WEIGHT_SEMANTIC_HASHING=0")
    assert not _command_pattern("mnemolog undo").search("mnemolog undo-namespace")
    assert _command_pattern("mnemolog keys create").search("mnemolog --data-dir ./data keys create --tenant acme")
    assert _command_pattern("mnemolog bench").search("mnemolog bench append")


def test_the_reference_is_what_the_generator_writes():
    assert REFERENCE.exists(), f"{REFERENCE} is missing: python -m mnemolog.tools.docs --write docs/reference.md"
    assert REFERENCE.read_text(encoding="utf-8") == docs.render(), "docs/reference.md is out of date: python -m mnemolog.tools.docs --write docs/reference.md"


@pytest.mark.parametrize("kind", ["routes", "settings", "commands"])
def test_the_reference_mentions_every(kind):
    gaps = missing(REFERENCE.read_text(encoding="utf-8"))[kind]
    assert not gaps, f"docs/reference.md does not mention {len(gaps)} {kind}: {gaps}"


def test_the_generator_checks_a_file(tmp_path, capsys):
    current, stale = tmp_path / "current.md", tmp_path / "stale.md"
    assert docs.main(["--write", str(current)]) == 0
    stale.write_text(current.read_text().replace("| `GET /health` |", "| `GET /healthz` |"))
    assert docs.main(["--check", str(current)]) == 0
    assert docs.main(["--check", str(stale)]) == 1
    assert "out of date" in capsys.readouterr().err


def test_the_readme_is_the_overview_and_points_at_the_reference():
    text = README.read_text(encoding="utf-8")
    assert "docs/reference.md" in text
    for section in ("## The two commands", "## How it is built", "## HTTP API", "## CLI", "## Measured"):
        assert section in text
    top_level = {c.split()[1] for c in commands()}
    assert not [c for c in sorted(top_level) if not _command_pattern(f"mnemolog {c}").search(text)]


if __name__ == "__main__":  # pragma: no cover
    gaps = missing(REFERENCE.read_text(encoding="utf-8") if REFERENCE.exists() else "")
    for kind, items in gaps.items():
        for item in items:
            print(f"docs/reference.md does not mention {kind[:-1]} {item}")
    sys.exit(1 if any(gaps.values()) else 0)
