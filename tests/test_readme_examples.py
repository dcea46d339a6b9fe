"""Every example in README.md runs as written.

The README's fenced ``sh`` and ``python`` blocks are extracted and each one
runs as its own test, in a fresh, empty working directory:

- a ``sh`` block that calls ``curl`` runs against a live ``mnemolog serve``
  (a real subprocess on a free loopback port, over its own data directory).
  The README's ``127.0.0.1:8765`` becomes that server's address and ``$KEY``
  holds a real key of tenant ``default`` (read, write, admin). ``curl`` runs
  with ``--fail-with-body``, so an HTTP error fails the block;
- any other ``sh`` block runs in ``bash`` with ``set -euo pipefail``, the
  installed ``mnemolog`` first on ``PATH`` and a fresh ``MNEMOLOG_DATA_DIR``;
- a ``python`` block runs in a subprocess of this interpreter, with the same
  environment as a ``sh`` block (the server's address substituted, ``KEY``
  set), so that it may use the data directory or the server.

A block that must not run (one that installs packages, or starts a server
that runs until stopped) is preceded by the line::

    <!-- readme-test: skip (the reason) -->

and the reason is required. Fenced blocks in any other language, or in none
(the data directory's layout), are not code and are not run. The
``MNEMOLOG_*`` variables of the caller's environment are removed first.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.serving import serve

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BIN = Path(sys.executable).parent
MNEMOLOG = BIN / "mnemolog"
README_ADDRESS = "127.0.0.1:8765"
RUNNABLE = ("sh", "python")

_FENCE = re.compile(r"^```([\w-]*)\s*$")
_SKIP = re.compile(r"^<!--\s*readme-test:\s*skip\s*(.*?)\s*-->$")


@dataclass(frozen=True)
class Block:
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    skip: str | None  # the reason, when marked

    @property
    def kind(self) -> str:
        if self.language == "sh":
            return "curl" if re.search(r"(?m)^\s*curl\s", self.code) else "shell"
        return self.language

    @property
    def id(self) -> str:
        return f"line{self.line}-{self.kind}"


def blocks(text: str) -> list[Block]:
    """The fenced blocks of ``text`` in order, with the skip marker on the line before each, if any."""
    found: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        start, language = i, opening.group(1)
        i += 1
        body = []
        while i < len(lines) and lines[i].rstrip() != "```":
            body.append(lines[i])
            i += 1
        previous = next((lines[j].strip() for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marked = _SKIP.match(previous)
        found.append(Block(start + 1, language, "\n".join(body) + "\n", marked.group(1).strip("() ") if marked else None))
        i += 1
    return found


README_BLOCKS = blocks(README.read_text(encoding="utf-8"))
RUN = [b for b in README_BLOCKS if b.language in RUNNABLE and b.skip is None]


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMOLOG_")}
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])
    env.update(extra)
    return env


@dataclass(frozen=True)
class Server:
    address: str
    key: str


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``mnemolog serve`` as a real subprocess on a free loopback port, with a key made by ``mnemolog keys create``."""
    data = tmp_path_factory.mktemp("readme-server") / "data"
    env = _clean_env()
    created = subprocess.run(
        [str(MNEMOLOG), "--json", "--tenant", "default", "keys", "create", "--scopes", "read,write,admin", "--data-dir", str(data)],
        env=env, capture_output=True, text=True, timeout=120, check=True,
    )
    key = json.loads(created.stdout)["key"]
    with serve(data, data.parent / "serve.log") as served:
        yield Server(served.url.removeprefix("http://"), key)


def _run(block: Block, server: Server, workdir: Path) -> subprocess.CompletedProcess:
    code = block.code.replace(README_ADDRESS, server.address)
    env = _clean_env(MNEMOLOG_DATA_DIR=str(workdir / "data"), KEY=server.key)
    if block.language == "python":
        command = [sys.executable, "-c", code]
    else:
        prelude = "set -euo pipefail\ncurl() { command curl --fail-with-body --show-error \"$@\"; }\n"
        command = ["bash", "-c", prelude + code]
    return subprocess.run(command, env=env, cwd=workdir, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("block", RUN, ids=[b.id for b in RUN])
def test_the_example_runs(block: Block, server: Server, tmp_path):
    done = _run(block, server, tmp_path)
    assert done.returncode == 0, f"README.md line {block.line} ({block.kind}) exited {done.returncode}:\n{block.code}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    if block.kind == "curl":
        answers = json_values(done.stdout)  # curl prints each answer without a newline after it
        assert answers and all(isinstance(a, dict) and "error" not in a for a in answers), done.stdout


def json_values(text: str) -> list:
    """The JSON values written one after another in ``text``."""
    decoder, values, at = json.JSONDecoder(), [], 0
    while (at := len(text) - len(text[at:].lstrip())) < len(text):
        value, at = decoder.raw_decode(text, at)
        values.append(value)
    return values


def test_the_readme_has_examples_of_every_kind_and_marks_say_why():
    kinds = {b.kind for b in RUN}
    assert {"shell", "curl", "python"} <= kinds, kinds
    assert all(b.skip for b in README_BLOCKS if b.skip is not None), "a skip marker needs its reason"
    # Every sh or python block is run unless marked: nothing is left out silently.
    marked = [b for b in README_BLOCKS if b.skip is not None]
    assert sorted(RUN + marked, key=lambda b: b.line) == [b for b in README_BLOCKS if b.language in RUNNABLE or b.skip is not None]
    assert "memledger" not in README.read_text(encoding="utf-8").lower()


def test_the_extractor_reads_languages_markers_and_bodies():
    text = "intro\n\n<!-- readme-test: skip (starts a server) -->\n```sh\nmnemolog serve\n```\n\n```\nlayout\n```\n```python\nprint(1)\n```\n"
    found = blocks(text)
    assert [(b.line, b.language, b.code, b.skip) for b in found] == [
        (4, "sh", "mnemolog serve\n", "starts a server"),
        (8, "", "layout\n", None),
        (11, "python", "print(1)\n", None),
    ]
    assert Block(1, "sh", "x=1\ncurl -s http://h\n", None).kind == "curl"
    assert Block(1, "sh", "mnemolog stats\n", None).kind == "shell"


def test_a_failing_example_fails(server, tmp_path):
    """The runner itself: a command that fails, or a 4xx answer, fails the block."""
    assert _run(Block(1, "sh", "mnemolog get no-such-memory\n", None), server, tmp_path).returncode != 0
    bad = Block(1, "sh", 'curl -s -X POST http://127.0.0.1:8765/v1/relations -H "Authorization: Bearer $KEY" -d \'{"query": "x"}\'\n', None)
    assert _run(bad, server, tmp_path).returncode != 0
    assert _run(Block(1, "python", "raise SystemExit(3)\n", None), server, tmp_path).returncode == 3
