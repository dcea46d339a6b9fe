"""Plaintext that looks like a token: stored escaped, read back exactly as written, the log readable after it.

A carrier (a memory's text, an entity's name, a document's title, an edge's
``sealed``) left in plaintext (sealing off, or a Struct the sealer does not
seal) that starts with a reserved mark would otherwise be taken for a token
on every read, and one such row would make the whole log unreadable.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings as hsettings, strategies as st

from mnemolog.eventstore import EventStore
from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore import catalogue_graph as g
from mnemolog.eventstore import exchange
from mnemolog.eventstore.keystore import KeyStore
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.sealing import ERASED_TEXT, PLAIN_MARK, PREFIX, TOKEN_MARK, Sealer
from mnemolog.eventstore.settings import Settings

# A real token of the current format, as a user might paste it (it names a key no store here holds).
PASTED = TOKEN_MARK + "AAHaqLCbU0fSq9x8XQ3xTzwUqDjE8k5h0Vv2Xz8mXyQk0sYp7iD8w1Xq"
VALUES = [
    TOKEN_MARK + "AAAAhello there",
    TOKEN_MARK,
    PASTED,
    PREFIX + "some-key:AAAA",
    PREFIX,
    PLAIN_MARK + "x",
    PLAIN_MARK,
    PLAIN_MARK + PLAIN_MARK + TOKEN_MARK,
    "mnemolog notes, no mark",
]


def _events(value: str) -> list:
    mention = c.EdgeRecord(
        edge_id="mention:r1:1", edge_type=g.MENTIONS, source="m-1", target="e1", subject="u-1", sealed=value,
        properties={"alias": value, "occurrences": 1},
    )  # fmt: skip
    user_edge = c.EdgeRecord(edge_id="user:1", edge_type="RELATED", source="m-1", target="m-2", sealed=value)  # never sealed: escaped
    return [
        c.MemoryAdded(memory_id="m-1", content=MemoryContent(memory=value, subject="u-1", tags=("t",)), created_at="2026-01-01T00:00:00Z"),
        c.MemoryAdded(memory_id="m-2", content=MemoryContent(memory=value), created_at="2026-01-01T00:00:00Z"),
        g.EntityUpserted(entity_id="e1", name=value, aliases=(value,)),
        g.DocumentImported(doc_id="d1", version=1, title=value, content_hash="h", chunk_ids=(), path=value),
        c.EdgeLinked(edge=mention),
        c.EdgeLinked(edge=user_edge),
        c.NamespaceUndone(prefix="mention:r1:", edges=(mention, user_edge)),
    ]


def _open(path: Path, encryption: str) -> EventStore:
    return EventStore.open(path, settings=Settings({"data_dir": str(path), "encryption": encryption}, env={}))


def _payloads(path: Path) -> list[str]:
    return [r[0] for r in sqlite3.connect(path / "events.db").execute("SELECT payload FROM events ORDER BY position")]


@pytest.mark.parametrize("encryption", ["off", "on"])
@pytest.mark.parametrize("value", VALUES)
def test_a_carrier_starting_with_a_mark_round_trips_and_the_log_stays_readable(tmp_path, encryption, value):
    events = _events(value)
    with _open(tmp_path / "a", encryption) as store:
        for i, event in enumerate(events):
            store.append(f"stream-{i}", [event], tenant="t")
        assert [r.event for r in store.read_all()] == events
        assert [r.event for batch in store.iter_all() for r in batch] == events
        store.append("stream-next", [c.MemoryAdded(memory_id="m-3", content=MemoryContent(memory="next"), created_at="2026-01-01T00:00:00Z")], tenant="t")
        assert store.read_all()[-1].event.content.memory == "next"
        assert store.verify().ok
        with open(tmp_path / "log.jsonl", "wb") as out:
            exchange.export(store, out)
        keys = store.sealer.keys.export_rows()
    with _open(tmp_path / "b", encryption) as copy, open(tmp_path / "log.jsonl", "rb") as lines:
        copy.sealer.keys.import_rows(keys)
        exchange.import_(copy, lines)
        assert [r.event for r in copy.read_all()][:-1] == events
        assert copy.verify().ok


def test_with_sealing_off_only_marked_carriers_are_escaped_and_the_rest_is_stored_as_before(tmp_path):
    with _open(tmp_path, "off") as store:
        for i, value in enumerate([TOKEN_MARK + "A", PREFIX + "k:A", PLAIN_MARK + "p", "mnemolog plain", "plain"]):
            store.append(f"memory-{i}", [c.MemoryAdded(memory_id=f"m-{i}", content=MemoryContent(memory=value), created_at="x")], tenant="t")
        texts = [msgspec.json.decode(p)["content"]["memory"] for p in _payloads(tmp_path)]
        assert texts == [PLAIN_MARK + TOKEN_MARK + "A", PLAIN_MARK + PREFIX + "k:A", PLAIN_MARK + PLAIN_MARK + "p", "mnemolog plain", "plain"]


def test_a_sealed_carrier_is_never_escaped_and_an_escaped_one_erases_like_any_other(tmp_path):
    value = TOKEN_MARK + "AAAAhello"
    with _open(tmp_path, "on") as store:
        store.append("memory-1", [_events(value)[0]], tenant="t")
        [payload] = _payloads(tmp_path)
        assert PLAIN_MARK not in payload and value not in payload  # inside the ciphertext, as any text
        keys = store.sealer.keys
        keys.forget(keys.retire("t", "u-1"))
        assert store.read_all()[0].event.content.memory == ERASED_TEXT


_marked = st.sampled_from(["", TOKEN_MARK, PREFIX, PLAIN_MARK, PLAIN_MARK + TOKEN_MARK, "mnemolog"]).flatmap(
    lambda mark: st.text(max_size=30).map(lambda rest: mark + rest)
)


@hsettings(max_examples=80, deadline=None)
@given(text=_marked, name=_marked, enabled=st.booleans())
def test_any_text_reads_back_as_written_sealed_or_not(text, name, enabled):
    sealer = Sealer(KeyStore(":memory:"), enabled=enabled)
    events = [
        c.MemoryAdded(memory_id="m", content=MemoryContent(memory=text, subject="u"), created_at="x"),
        g.EntityUpserted(entity_id="e", name=name),
        c.EdgeLinked(edge=c.EdgeRecord(edge_id="user:1", edge_type="RELATED", source="a", target="b", sealed=name)),
    ]
    ids = ["e-1", "e-2", "e-3"]
    stored = [msgspec.json.decode(p, type=type(e)) for p, e in zip(sealer.payloads(events, ids, "t"), events)]
    assert [sealer.unseal(e, i) for e, i in zip(stored, ids)] == events
