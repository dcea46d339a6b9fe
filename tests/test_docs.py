"""The README documents the product: every HTTP route, every setting and every CLI command is mentioned in it.

Routes as ``METHOD /path`` (as declared, e.g. ``GET /v1/memories/{id}``),
settings as ``MNEMOLOG_<NAME>``, commands as ``mnemolog <cmd>`` (nested
ones in full, e.g. ``mnemolog keys create``; options such as
``--data-dir DIR`` may stand between ``mnemolog`` and the command).

Run ``python tests/test_docs.py`` to print what the README still lacks.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"

# Modules that declare settings with mnemolog.eventstore.settings.setting(); imported
# defensively, since some arrive with later issues.
SETTINGS_MODULES = [
    "mnemolog.eventstore.settings",
    "mnemolog.api.settings",
    "mnemolog.api.background",
    "mnemolog.projections.service",
    "mnemolog.projections.recall.searcher",
    "mnemolog.projections.policies.settings",
]
PACKAGES = ("eventstore", "projections", "api", "tools")
_DECLARES = re.compile(r"^\w+\s*=\s*setting\(", re.M)


def _import(name: str) -> None:
    try:
        importlib.import_module(name)
    except ImportError:
        pass


def _declaring_modules() -> list[str]:
    """Every module of ours with a top-level ``NAME = setting(...)``, found by reading the sources."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except OSError:
                continue
            if _DECLARES.search(text):
                module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
                found.append(module.removesuffix(".__init__"))
    return found


def routes() -> list[str]:
    import mnemolog.api.app
    from mnemolog.api.routing import ROUTES

    for module in getattr(mnemolog.api.app, "EXTRA_ROUTE_MODULES", []):
        _import(module)
    return sorted({f"{r.method} {r.path}" for r in ROUTES if r.method != "HEAD"})


def settings() -> list[str]:
    for module in SETTINGS_MODULES + _declaring_modules():
        _import(module)
    from mnemolog.eventstore.settings import REGISTRY

    return sorted(s.env for s in REGISTRY.values())


def commands() -> list[str]:
    from mnemolog.tools.cli import build_parser

    found: list[str] = []

    def walk(parser: argparse.ArgumentParser, prefix: tuple[str, ...]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found.append(" ".join(("mnemolog", *prefix, name)))
                    walk(sub, (*prefix, name))

    walk(build_parser(), ())
    return sorted(set(found))


def _route_pattern(item: str) -> re.Pattern:
    return re.compile(re.escape(item) + r"(?![\w/{}-])")


def _setting_pattern(item: str) -> re.Pattern:
    return re.compile(r"(?<!\w)" + re.escape(item) + r"(?!\w)")


def _command_pattern(item: str) -> re.Pattern:
    words = item.split()[1:]
    options = r"(?:\s+--?[\w-]+(?:[= ](?!-)[^\s`]+)?)*"
    return re.compile(r"(?<![\w-])mnemolog" + options + r"\s+" + r"\s+".join(map(re.escape, words)) + r"(?![\w-])")


def missing() -> dict[str, list[str]]:
    text = README.read_text(encoding="utf-8") if README.exists() else ""
    return {
        "routes": [r for r in routes() if not _route_pattern(r).search(text)],
        "settings": [s for s in settings() if not _setting_pattern(s).search(text)],
        "commands": [c for c in commands() if not _command_pattern(c).search(text)],
    }


def report(gaps: dict[str, list[str]]) -> str:
    lines = [] if README.exists() else [f"{README} does not exist yet"]
    for kind, items in gaps.items():
        if items:
            lines.append(f"README.md does not mention {len(items)} {kind}:")
            lines += [f"  {item}" for item in items]
    return "\n".join(lines)


# -- the checks ----------------------------------------------------------------------------------


def test_the_inventory_is_found():
    """Guard the walkers themselves: an empty inventory would pass vacuously."""
    assert "POST /v1/memories" in routes() and "GET /health" in routes()
    assert {"MNEMOLOG_DATA_DIR", "MNEMOLOG_PORT", "MNEMOLOG_RECALL_RRF_K", "MNEMOLOG_EMBEDDER"} <= set(settings())
    assert {"mnemolog add", "mnemolog bench append"} <= set(commands())
    # The API server's commands (mnemolog.tools.serve_cmds) must be registered with the CLI.
    assert {"mnemolog serve", "mnemolog keys create", "mnemolog keys list", "mnemolog keys revoke"} <= set(commands())


def test_the_patterns_do_not_match_prefixes():
    assert not _route_pattern("POST /v1/memories").search("POST /v1/memories/merge")
    assert _route_pattern("POST /v1/memories").search("`POST /v1/memories` adds")
    assert not _setting_pattern("MNEMOLOG_RECALL_WEIGHT_SEMANTIC").search("MNEMOLOG_RECALL_WEIGHT_SEMANTIC_HASHING=0")
    assert not _command_pattern("mnemolog undo").search("mnemolog undo-namespace")
    assert _command_pattern("mnemolog keys create").search("mnemolog --data-dir ./data keys create --tenant acme")
    assert _command_pattern("mnemolog bench").search("mnemolog bench append")


@pytest.mark.parametrize("kind", ["routes", "settings", "commands"])
def test_readme_mentions_every(kind):
    gaps = missing()
    print(report(gaps))
    assert not gaps[kind], report({kind: gaps[kind]})


if __name__ == "__main__":  # pragma: no cover
    sys.path.insert(0, str(ROOT))
    gaps = missing()
    print(report(gaps) or "README.md mentions every route, setting and command")
    sys.exit(1 if any(gaps.values()) else 0)
