"""Closing a service when a file cannot be saved (a full disk): every part is closed all the same, the error
that ended the work is the one its caller hears of, and the vector index says which file it could not write."""

from __future__ import annotations

import errno
import sqlite3

import pytest

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.projections.service import MemoryService


def _service(tmp_path) -> MemoryService:
    svc = MemoryService.open(tmp_path / "data")
    svc.run(svc.memories.add, CommandContext(tenant="t"), [MemoryContent(memory="a note to index")])
    return svc


def _full(*_args) -> None:
    raise OSError(errno.ENOSPC, "No space left on device", "vectors.usearch.tmp")


def _closed(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute("SELECT 1")
    except sqlite3.ProgrammingError:
        return True
    return False


def test_a_save_that_fails_at_close_leaves_no_database_open_and_is_raised(tmp_path, monkeypatch):
    svc = _service(tmp_path)
    monkeypatch.setattr(svc.vector_index, "save", _full)
    with pytest.raises(OSError, match="No space left"):
        svc.close()
    assert _closed(svc.runner.conn)


def test_the_error_that_ended_the_block_is_not_hidden_by_a_failing_close(tmp_path, monkeypatch):
    svc = _service(tmp_path)
    monkeypatch.setattr(svc.vector_index, "save", _full)
    with pytest.raises(ValueError, match="the work's own error"):
        with svc:
            raise ValueError("the work's own error")
    assert _closed(svc.runner.conn)


def test_a_vector_index_it_cannot_write_names_its_file_and_leaves_no_partial_one(tmp_path, monkeypatch):
    svc = _service(tmp_path)
    index = svc.vector_index
    tmp = index.path.with_name(index.path.name + ".tmp")

    def torn(path: str) -> None:
        with open(path, "wb") as handle:
            handle.write(b"half an index")
        raise RuntimeError("Failed to serialize into stream")  # all usearch says

    monkeypatch.setattr(index._index, "save", torn)
    with pytest.raises(OSError) as raised:
        index.save()
    assert raised.value.filename == str(tmp) and "could not write the vector index" in str(raised.value)
    assert not tmp.exists()
    monkeypatch.undo()
    svc.close()
