"""A ``vectors.usearch`` whose bytes changed under a valid checkpoint is set aside and rebuilt, never loaded.

usearch trusts the file it loads: flipped bits in its graph (a disk's bad
sector, a copy taken while it was written) loaded without an error, and the
first search then died in native code, taking the server down, and every
restart with it. The checkpoint records the file's digest; a file that does
not match it is never handed to usearch.

A save killed midway is no damage: whatever the kill leaves, the next open
loads a file its checkpoint describes, without a warning or a rebuild.
"""

from __future__ import annotations

import json
import logging
import random
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.service import MemoryService
from mnemolog.projections.vectors.index import INDEX_FILE
from mnemolog.projections.vectors.projector import EXACT_THRESHOLD, vector_search
from tests.crashpoints import run_killed_at
from tests.serving import clean_env, serve

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


def _semantic_ranks(url: str) -> list[list[float]]:
    """Each query's semantic channel, unfused: the scores it ranks.

    Scores: what the index answers, compared across its builds."""
    found = []
    for query in QUERIES:
        body = json.dumps({"query": query, "channels": ["semantic"], "limit": 10}).encode()
        request = urllib.request.Request(url + "/v1/search", data=body, headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(request, timeout=60) as response:
            found.append([round(hit["score"], 6) for hit in json.loads(response.read())["channels"]["semantic"]])
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
    assert after == before  # the index is built on one thread: from the same rows, the same graph
    assert (data / f"{INDEX_FILE}.damaged").exists()
    warnings = [line for line in (tmp_path / "after.log").read_text().splitlines() if " WARNING " in line]
    assert len(warnings) == 1 and INDEX_FILE in warnings[0], warnings
    rebuilt = json.loads((data / f"{INDEX_FILE}.json").read_text())
    assert rebuilt["count"] == checkpoint["count"] and rebuilt["sha256"] == checkpoint["sha256"]  # the index it was, byte for byte
    with serve(data, tmp_path / "again.log", **SETTINGS) as server:  # the rebuilt index is saved, and loads as it is
        assert _semantic_ranks(server.url) == after  # as the rebuilt index answered
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


WORDS = "harbour ferry lemon cake budget trail lake river meadow lantern copper violin tulip glacier canyon orchard".split()


def _notes(rng: random.Random, count: int) -> list[MemoryContent]:
    """Texts of a few words each, none alike (each memory's vector nearest to itself)."""
    return [MemoryContent(memory=f"{' '.join(rng.sample(WORDS, 4))} {rng.randrange(10**6)}") for _ in range(count)]


def _behind(data: Path, rng: random.Random, count: int) -> tuple[bytes, bytes]:
    """Add ``count`` memories, then put the index and its checkpoint back as they were (as a process killed before
    its save leaves them), so that the next open adds those and saves; their bytes."""
    index, checkpoint = data / INDEX_FILE, data / f"{INDEX_FILE}.json"
    saved = index.read_bytes(), checkpoint.read_bytes()
    with MemoryService.open(data, settings=Settings({"synchronous": "NORMAL"}, env={})) as svc:
        svc.run(svc.memories.add, CommandContext(tenant="default", actor="test"), _notes(rng, count))
    index.write_bytes(saved[0])
    checkpoint.write_bytes(saved[1])
    return saved


def _lagging(data: Path, rng: random.Random) -> tuple[bytes, bytes]:
    """100 memories with their index saved, then 60 the index lacks (see :func:`_behind`)."""
    with MemoryService.open(data, settings=Settings({"synchronous": "NORMAL"}, env={})) as svc:
        svc.run(svc.memories.add, CommandContext(tenant="default", actor="test"), _notes(rng, 100))
        svc.scrub()
    return _behind(data, rng, 60)


#: The files' renames of one save, in order; a kill at one leaves its file written, synced and not yet in place.
KILL_POINTS = {
    "before the checkpoint of the save under way is in place": 0,
    "before the index is in place": 1,
    "after the index is in place, before its checkpoint is": 2,
}


def _killed_saving(data: Path, point: int, before: tuple[bytes, bytes]) -> None:
    """Run a command whose open saves the index, SIGKILLed at rename ``point`` of that save; check where it landed."""
    env = clean_env(synchronous="NORMAL", organizer_enabled="off")
    run_killed_at(data, "mnemolog.projections.vectors.index:replace_durably", "projections", skip=point, env=env)
    changed = (data / INDEX_FILE).read_bytes() != before[0], (data / f"{INDEX_FILE}.json").read_bytes() != before[1]
    assert changed == [(False, False), (False, True), (True, True)][point], "the kill did not land there"


def _assert_opened_whole(data: Path, caplog, count: int) -> None:
    """The next open loads the files as they are, without a warning, and its index holds every memory's vector once,
    under its row."""
    caplog.set_level(logging.INFO)
    with MemoryService.open(data, settings=Settings({"synchronous": "NORMAL"}, env={})) as svc:
        index = svc.vector_index
        assert index.rebuilt_because is None
        # Every entry compared, not the graph walked: the graph may leave an entry of near-alike vectors
        # unreachable (a search's recall is about 0.99), which says nothing of what the file holds.
        index.exhaustive = True
        conn = svc.read_conn()
        rows = conn.execute("SELECT row_id, memory_id, vector FROM vec_docs WHERE vector_of = row_id").fetchall()
        assert len(rows) == count and len(index) == len(rows)  # every vector once
        assert index.synced_row_id >= max(r[0] for r in rows)  # none left to the exact scan of rows past the index
        for _, memory_id, vector in rows:
            found = vector_search(conn, index, "default", np.frombuffer(vector, dtype=np.float32), limit=1, exact_threshold=0)
            assert [hit.memory_id for hit in found] == [memory_id]
    assert not list(data.glob(f"{INDEX_FILE}.damaged*"))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


@pytest.mark.parametrize("point", KILL_POINTS)
def test_a_save_killed_at_any_point_is_opened_without_a_warning_or_a_rebuild(tmp_path, caplog, point):
    data = tmp_path / "data"
    _killed_saving(data, KILL_POINTS[point], _lagging(data, random.Random(7)))
    _assert_opened_whole(data, caplog, 160)


def test_a_save_killed_after_another_was_is_opened_without_a_warning_or_a_rebuild(tmp_path, caplog):
    """A save that finds the checkpoint of one cut short after its index was in place names that index as the one in
    place (not the older one that checkpoint describes itself)."""
    data, rng = tmp_path / "data", random.Random(7)
    _killed_saving(data, KILL_POINTS["after the index is in place, before its checkpoint is"], _lagging(data, rng))
    _killed_saving(data, KILL_POINTS["before the index is in place"], _behind(data, rng, 10))
    _assert_opened_whole(data, caplog, 170)


def test_an_index_matching_neither_digest_of_a_save_under_way_is_set_aside(tmp_path, caplog):
    """A checkpoint that names the file in place and the one a save was putting there: a file that is neither
    is damaged."""
    data = tmp_path / "data"
    _killed_saving(data, KILL_POINTS["after the index is in place, before its checkpoint is"], _lagging(data, random.Random(7)))
    _flip_bits(data / INDEX_FILE)
    with MemoryService.open(data, settings=Settings({"synchronous": "NORMAL"}, env={})) as svc:
        assert svc.vector_index.rebuilt_because == "index file does not match its checkpoint's digest"
        assert len(svc.vector_index) == 160
    assert (data / f"{INDEX_FILE}.damaged").exists()
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and INDEX_FILE in warnings[0].getMessage(), caplog.text
