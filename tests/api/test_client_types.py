"""What a type checker sees of the clients: mypy accepts correct use and names each mistake.

The editable install maps ``mnemolog.api`` to ``api/`` through an import hook
that mypy cannot follow, so the test lays the same package out as symlinks
in a temporary directory and points mypy at it. The client modules themselves
are checked too.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.serving import ROOT

pytest.importorskip("mypy")

CORRECT = '''
import mnemolog
from mnemolog.api.client import MnemologClient
from mnemolog.api.schemas import MemoryIn


def blocking(url: str, key: str) -> str:
    with mnemolog.Client(url, api_key=key) as client:
        written = client.add_memories(MemoryIn(memory="I moved to Lisbon"), idempotency_key="k1")
        found = client.recall("where do I live?", min_position=written.positions[-1], limit=3)
        hit = found.hits[0]
        text: str = hit.memory.memory if hit.memory is not None else hit.entity.name if hit.entity is not None else ""
        return text


async def streaming(url: str, key: str) -> int:
    async with MnemologClient(url, api_key=key) as client:
        page = await client.list_events(limit=10)
        entity = await client.get_entity("ada", as_of=page.next_after)
        async for event in client.stream_events(after=page.next_after + len(entity.relations)):
            return event.position
    return 0
'''

# Each line holds one mistake, and mypy must report that line with that code.
MISTAKES = {
    'written = client.add_memories(MemoryIn(memory="x"), expected_version="2")': "arg-type",
    "print(written.position)": "attr-defined",
    'client.recall("q", limt=3)': "call-arg",
    'version: str = client.get_memory("id").version': "assignment",
    'client.remember("x")': "attr-defined",
    'hits: int = len(client.search("q").hits)': "attr-defined",
}


def _layout(tmp_path: Path) -> Path:
    package = tmp_path / "src" / "mnemolog"
    package.mkdir(parents=True)
    (package / "__init__.py").symlink_to(ROOT / "mnemolog" / "__init__.py")
    for layer in ("api", "eventstore", "projections", "tools"):
        (package / layer).symlink_to(ROOT / layer, target_is_directory=True)
    return tmp_path / "src"


def _mypy(cwd: Path, *targets: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--python-version", "3.11", "--follow-imports=silent", "--ignore-missing-imports", "--no-incremental",
         "--cache-dir", str(cwd / ".mypy_cache"), "--show-error-codes", "--no-error-summary", *targets],
        cwd=cwd, capture_output=True, text=True, timeout=300,
    )


def test_mypy_accepts_correct_use_and_reports_every_mistake(tmp_path):
    src = _layout(tmp_path)
    (src / "correct.py").write_text(CORRECT)
    lines = ["import mnemolog", "from mnemolog.api.schemas import MemoryIn", "", "", "def mistaken(url: str) -> None:", "    with mnemolog.Client(url) as client:"]
    lines += [f"        {line}" for line in MISTAKES]
    (src / "mistaken.py").write_text("\n".join(lines) + "\n")
    done = _mypy(src, "correct.py", "mistaken.py", "mnemolog/api/client.py", "mnemolog/api/sync_client.py", "mnemolog/api/sync_methods.py")
    assert done.returncode in (0, 1) and not done.stderr, done.stderr
    reported = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert not [line for line in reported if not line.startswith("mistaken.py:")], done.stdout + done.stderr
    first = len(lines) - len(MISTAKES) + 1
    for number, (line, code) in enumerate(MISTAKES.items(), first):
        assert any(r.startswith(f"mistaken.py:{number}:") and r.endswith(f"[{code}]") for r in reported), f"not reported: {line!r} [{code}]\n{done.stdout}"
    assert len(reported) == len(MISTAKES), done.stdout
