"""A ``vectors.usearch`` whose bytes changed under a valid checkpoint is set aside and rebuilt, never loaded.

usearch trusts the file it loads: flipped bits in its graph (a disk's bad
sector, a copy taken while it was written) loaded without an error, and the
first search then died in native code, taking the server down, and every
restart with it. The checkpoint records the file's digest; a file that does
not match it is never handed to usearch.
"""

from __future__ import annotations

import json
import random
import urllib.request
from pathlib import Path

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.service import MemoryService
from mnemolog.projections.vectors.index import INDEX_FILE
from mnemolog.projections.vectors.projector import EXACT_THRESHOLD
from tests.serving import serve

SETTINGS = {"auth": "off", "organizer_enabled": "off", "synchronous": "NORMAL"}
QUERIES = [f"a note about topic {i} and place {i % 5}" for i in range(0, 17, 3)]


def _written(data: Path) -> None:
    """Memories through the commands (more than a semantic search scans exactly, so that it walks the index),
    their index saved with its checkpoint."""
    with MemoryService.open(data, settings=Settings({"synchronous": "NORMAL"}, env={})) as svc:
        texts = [f"note {i} about topic {i % 17} and place {i % 5}" for i in range(EXACT_THRESHOLD + 500)]
        svc.run(svc.memories.add, CommandContext(tenant="default", actor="test"), [MemoryContent(memory=t) for t in texts])
        svc.scrub()  # the index and its checkpoint saved


def _flip_bits(path: Path, seed: int = 0, flips: int = 64) -> None:
    """Flip single bits at random places of the middle half of the file (its graph: what usearch follows blindly)."""
    raw = bytearray(path.read_bytes())
    rng = random.Random(seed)
    for _ in range(flips):
        raw[rng.randrange(len(raw) // 4, 3 * len(raw) // 4)] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(raw))


def _semantic_ranks(url: str) -> list[list[str]]:
    """Each query's semantic channel, unfused: the ids it ranks."""
    found = []
    for query in QUERIES:
        body = json.dumps({"query": query, "channels": ["semantic"], "limit": 10}).encode()
        request = urllib.request.Request(url + "/v1/search", data=body, headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(request, timeout=60) as response:
            found.append([hit["id"] for hit in json.loads(response.read())["channels"]["semantic"]])
    return found


def test_an_index_with_flipped_bits_is_set_aside_and_rebuilt_and_recall_answers_as_before(tmp_path):
    data = tmp_path / "data"
    _written(data)
    with serve(data, tmp_path / "before.log", **SETTINGS) as server:
        before = _semantic_ranks(server.url)
    assert all(before)
    checkpoint = json.loads((data / f"{INDEX_FILE}.json").read_text())
    _flip_bits(data / INDEX_FILE)
    with serve(data, tmp_path / "after.log", **SETTINGS) as server:
        after = _semantic_ranks(server.url)
        assert server.proc.poll() is None, server.log_tail()
    assert after == before
    assert (data / f"{INDEX_FILE}.damaged").exists()
    warnings = [line for line in (tmp_path / "after.log").read_text().splitlines() if " WARNING " in line]
    assert len(warnings) == 1 and INDEX_FILE in warnings[0], warnings
    rebuilt = json.loads((data / f"{INDEX_FILE}.json").read_text())
    assert rebuilt["count"] == checkpoint["count"] and rebuilt["sha256"] != checkpoint.get("sha256")
    with serve(data, tmp_path / "again.log", **SETTINGS) as server:  # the rebuilt index is saved, and loads as it is
        assert _semantic_ranks(server.url) == before
    assert " WARNING " not in (tmp_path / "again.log").read_text()


def test_a_forget_removes_the_index_set_aside(tmp_path):
    """The index set aside holds the vectors of every memory it indexed: a forget's scrub removes it, as it
    removes a damaged ``projections.db`` set aside."""
    from tests.projections.test_forget import CTX as FORGETTER, _seed

    data = tmp_path / "data"
    with MemoryService.open(data) as svc:
        _seed(svc)
        svc.scrub()
    _flip_bits(data / INDEX_FILE)
    with MemoryService.open(data) as svc:
        assert svc.vector_index.rebuilt_because == "index file does not match its checkpoint's digest"
        assert (data / f"{INDEX_FILE}.damaged").exists()
        svc.forget(FORGETTER, "u-42")
    assert not (data / f"{INDEX_FILE}.damaged").exists()
