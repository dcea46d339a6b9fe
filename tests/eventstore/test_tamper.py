"""Tampering with the file behind the store's back, and what ``verify()`` says.

Each edit drops the append-only triggers by raw SQL first, as anyone holding
the file can do, and puts them back exactly as they were afterwards; from
then on only the hash chain stands between an edit and a silently changed
history.

How ``verify()`` walks (``mnemolog.eventstore.chain.walk``), for each row in order:
position must be the previous one + 1, ``prev_hash`` must equal the previous
row's stored ``hash``, and the row's stored ``hash`` must equal
``sha256(prev_hash || canonical(row))``. The expected break positions below
follow from that order of checks.
"""

from __future__ import annotations

import io
import json
from hashlib import sha256

import pytest

from mnemolog.eventstore import Digest, DomainEvent, EventStore, StreamAppend
from mnemolog.eventstore.chain import GENESIS_HASH
from mnemolog.eventstore.exchange import export, read_export
from tests.eventstore.support import db_path, raw, tampering

N = 10
HASHED_COLUMNS = (
    "position",
    "event_id",
    "stream_id",
    "stream_version",
    "type",
    "schema_version",
    "tenant",
    "payload",
    "metadata",
    "recorded_at",
)


class TamperNoted(DomainEvent, frozen=True):
    text: str
    amount: int = 0


@pytest.fixture
def store(tmp_path):
    store = EventStore.open(tmp_path)
    for i in range(1, N + 1, 2):
        store.append_batch(
            [
                StreamAppend(f"s{i % 3}", [TamperNoted(text=f"note-{i}", amount=i)]),
                StreamAppend("ledger", [TamperNoted(text=f"note-{i + 1} €", amount=i + 1)]),
            ],
            tenant="acme",
        )
    assert store.last_position() == N
    try:
        yield store
    finally:
        store.close()


def execute(store: EventStore, sql: str, *params) -> None:
    with tampering(db_path(store)) as conn:
        conn.execute(sql, params)


def cell(store: EventStore, column: str, position: int):
    with raw(db_path(store)) as conn:
        return conn.execute(f"SELECT {column} FROM events WHERE position = ?", (position,)).fetchone()[0]


def independent_hash(prev_hash: str, values: tuple) -> str:
    """The documented formula, written from the docs rather than chain.py:
    sha256(prev_hash || JSON array of the envelope's stored values)."""
    canonical = json.dumps(list(values), ensure_ascii=False, separators=(",", ":"))
    return sha256(prev_hash.encode("ascii") + canonical.encode("utf-8")).hexdigest()


def rehash_everything(store: EventStore) -> None:
    """What a careful forger does after editing: recompute the whole chain."""
    columns = ", ".join(HASHED_COLUMNS)
    with tampering(db_path(store)) as conn:
        rows = conn.execute(f"SELECT {columns} FROM events ORDER BY position").fetchall()
        prev = GENESIS_HASH
        conn.execute("BEGIN")
        for row in rows:
            digest = independent_hash(prev, row)
            conn.execute("UPDATE events SET prev_hash = ?, hash = ? WHERE position = ?", (prev, digest, row[0]))
            prev = digest
        conn.execute("COMMIT")


def flip_one_byte(text: str, needle: str) -> str:
    at = text.index(needle) + len(needle) - 1
    replacement = "X" if text[at] != "X" else "Y"
    edited = text[:at] + replacement + text[at + 1 :]
    assert len(edited.encode()) == len(text.encode()) and edited != text
    return edited


def test_the_documented_formula_matches_the_stored_hashes(store):
    columns = ", ".join(HASHED_COLUMNS)
    with raw(db_path(store)) as conn:
        rows = conn.execute(f"SELECT {columns}, prev_hash, hash FROM events ORDER BY position").fetchall()
    prev = GENESIS_HASH
    for row in rows:
        assert row[-2] == prev
        assert independent_hash(prev, row[:-2]) == row[-1]
        prev = row[-1]
    assert store.digest() == Digest(N, prev)


@pytest.mark.parametrize("position", [1, 4, N])
def test_one_edited_payload_byte_breaks_at_that_position(store, position):
    payload = cell(store, "payload", position)
    execute(store, "UPDATE events SET payload = ? WHERE position = ?", flip_one_byte(payload, "note-"), position)

    result = store.verify()
    assert not result.ok
    assert result.broken_at == position
    assert result.reason == "hash does not match the row's contents"
    # The damage is local: the rows before are intact, and the stored hash of
    # the edited row still links the ones after it.
    if position > 1:
        assert store.verify(to=position - 1).ok
    if position < N:
        assert store.verify(from_=position + 1).ok


@pytest.mark.parametrize(
    "column, value",
    [
        ("event_id", "00000000-0000-7000-8000-000000000000"),
        ("stream_id", "elsewhere"),
        ("stream_version", 42),
        ("type", "TamperForged"),
        ("schema_version", 2),
        ("tenant", "evil"),
        ("metadata", '{"actor":"mallory"}'),
        ("recorded_at", "1999-01-01T00:00:00.000000Z"),
    ],
)
def test_every_hashed_column_is_covered(store, column, value):
    execute(store, f"UPDATE events SET {column} = ? WHERE position = 6", value)
    result = store.verify()
    assert (result.ok, result.broken_at) == (False, 6)


def test_edited_correlation_id_column_is_detected(store):
    execute(store, "UPDATE events SET correlation_id = 'forged' WHERE position = 6")
    result = store.verify()
    assert not result.ok and result.broken_at == 6 and "correlation_id" in result.reason


def test_a_changed_hash_breaks_at_its_own_row(store):
    # Row 5 still links to row 4, so the first check that fails is row 5's own
    # recomputed hash against the forged one: the break is at 5, not 6.
    forged = sha256(b"forged").hexdigest()
    execute(store, "UPDATE events SET hash = ? WHERE position = 5", forged)
    result = store.verify()
    assert (result.ok, result.broken_at, result.reason) == (False, 5, "hash does not match the row's contents")
    # Starting after it, the walk trusts row 5's stored (forged) hash, and row
    # 6's prev_hash no longer matches it: the break shows at the next position.
    after = store.verify(from_=6)
    assert (after.ok, after.broken_at, after.reason) == (False, 6, "prev_hash does not match the previous row's hash")


def test_a_changed_hash_relinked_forward_still_breaks_at_its_row(store):
    forged = sha256(b"forged").hexdigest()
    execute(store, "UPDATE events SET hash = ? WHERE position = 5", forged)
    execute(store, "UPDATE events SET prev_hash = ? WHERE position = 6", forged)
    result = store.verify()
    assert (result.ok, result.broken_at) == (False, 5)


def test_a_changed_prev_hash_breaks_at_that_row(store):
    execute(store, "UPDATE events SET prev_hash = ? WHERE position = 7", sha256(b"x").hexdigest())
    result = store.verify()
    assert (result.ok, result.broken_at, result.reason) == (False, 7, "prev_hash does not match the previous row's hash")


def test_a_changed_tip_hash_breaks_at_the_tip(store):
    old = store.digest()
    execute(store, "UPDATE events SET hash = ? WHERE position = ?", "0" * 64, N)
    result = store.verify()
    assert (result.ok, result.broken_at) == (False, N)
    assert not store.verify(against=old).ok


@pytest.mark.parametrize("position", [1, 5])
def test_a_deleted_row_is_reported_as_a_gap(store, position):
    execute(store, "DELETE FROM events WHERE position = ?", position)
    result = store.verify()
    assert not result.ok
    assert result.broken_at == position + 1
    assert result.reason == f"position gap: expected {position}, found {position + 1}"


def test_a_deleted_tip_is_only_caught_by_a_kept_digest(store):
    old = store.digest()
    execute(store, "DELETE FROM events WHERE position = ?", N)
    assert store.verify().ok  # the chain alone cannot see a shortened log ...
    result = store.verify(against=old)  # ... a digest kept outside can
    assert (result.ok, result.broken_at) == (False, N - 1)
    assert "ends before" in result.reason


def test_a_rewritten_and_rehashed_log_passes_verify_but_not_an_old_digest(store):
    before_edit = store.verify(to=2)
    early = Digest(2, before_edit.tip_hash)
    old = store.digest()
    payload = cell(store, "payload", 3)
    execute(store, "UPDATE events SET payload = ? WHERE position = 3", payload.replace('"amount":3', '"amount":3000'))
    assert store.verify().broken_at == 3

    rehash_everything(store)

    assert store.verify().ok  # internally consistent again
    assert store.read_all(after=2, limit=1)[0].event.amount == 3000
    result = store.verify(against=old)
    assert not result.ok
    assert result.broken_at == old.position
    assert "differs" in result.reason
    assert store.verify(against=early).ok  # the untouched prefix still proves out


def test_a_truncated_and_regrown_log_fails_an_old_digest(store):
    old = store.digest()
    execute(store, "DELETE FROM events WHERE position > 7")
    # A careful forger trims the spans too, so that the rest of the log holds.
    execute(store, "DELETE FROM event_spans WHERE last_position > 7 AND first_position > 7")
    execute(store, "DELETE FROM event_spans WHERE first_position = 7")
    execute(store, "INSERT INTO event_spans VALUES (7, 7, 'acme', NULL)")
    store.append("ledger", [TamperNoted(text=f"replacement-{i}") for i in range(3)])
    assert store.last_position() == N
    assert store.verify().ok
    result = store.verify(against=old)
    assert (result.ok, result.broken_at) == (False, N)


# -- where a re-hashed log differs from what was kept outside ---------------------


def exported_rows(store: EventStore) -> list:
    buffer = io.BytesIO()
    export(store, buffer)
    buffer.seek(0)
    return list(read_export(buffer))


def test_a_rehashed_log_against_one_digest_says_where_it_disagrees_and_the_span_of_the_edit(store):
    old = store.digest()
    edit_and_rehash(store, 3)
    result = store.verify(against=old)
    assert (result.ok, result.broken_at) == (False, N)
    # One digest cannot say more than: something at or before its position changed.
    assert (result.differs_at, result.unchanged_through) == (N, 0)
    assert f"positions 1..{N}" in result.difference


def test_a_second_digest_narrows_the_edit_down(store):
    early, late = Digest(2, store.verify(to=2).tip_hash), store.digest()
    edit_and_rehash(store, 3)
    result = store.verify(against=[late, early])  # any order
    assert (result.ok, result.broken_at) == (False, N)
    assert (result.differs_at, result.unchanged_through) == (N, 2)
    assert f"positions 3..{N}" in result.difference
    # Digests on both sides of the edit, next to each other, pin it.
    forged = Digest(3, store.verify(to=3).tip_hash)  # taken after the forgery: it agrees with it
    assert not store.verify(against=[early, Digest(3, "a" * 64)]).ok
    pinned = store.verify(against=[early, Digest(3, "a" * 64), late])
    assert (pinned.differs_at, pinned.unchanged_through, pinned.broken_at) == (3, 2, N)
    assert pinned.difference.startswith("position 3 differs")
    assert store.verify(against=[early, forged]).ok


@pytest.mark.parametrize("position", [1, 3, N])
def test_a_stored_export_names_the_first_edited_row_of_a_rehashed_log(store, position):
    kept = exported_rows(store)
    edit_and_rehash(store, position)
    assert store.verify().ok  # internally consistent
    result = store.verify(export=kept)
    assert not result.ok
    assert (result.broken_at, result.differs_at, result.unchanged_through) == (N, position, position - 1)
    assert result.difference == f"position {position} differs: payload differs from the export"
    assert result.reason == "the log differs from the export's row here (the last row that differs)"


def test_a_stored_export_and_an_untouched_log_agree(store):
    kept = exported_rows(store)
    assert store.verify(export=kept).ok
    store.append("later", [TamperNoted(text="after the export")])
    result = store.verify(export=kept, against=store.digest())
    assert result.ok and result.checked == N + 1


@pytest.mark.parametrize("edited, differs, unchanged, exact", [(5, 6, 4, False), (6, 6, 4, True)])
def test_an_export_with_gaps_brackets_an_edit_between_its_rows(store, edited, differs, unchanged, exact):
    # A tenant's export holds only some positions; here, the even ones.
    kept = [row for row in exported_rows(store) if row.position % 2 == 0]
    edit_and_rehash(store, edited)
    result = store.verify(export=kept)
    assert (result.differs_at, result.unchanged_through) == (differs, unchanged)
    if exact:
        assert result.difference == "position 6 differs: payload differs from the export"
    else:
        assert result.difference.startswith("the log differs somewhere in positions 5..6")
        assert "stored hash differs from the export's" in result.difference


def test_a_shortened_log_differs_at_the_first_missing_row_of_the_export(store):
    kept = exported_rows(store)
    execute(store, "DELETE FROM events WHERE position > 7")
    execute(store, "DELETE FROM event_spans WHERE first_position > 7")
    execute(store, "DELETE FROM event_spans WHERE first_position = 7")
    execute(store, "INSERT INTO event_spans VALUES (7, 7, 'acme', NULL)")
    result = store.verify(export=kept)
    assert not result.ok
    assert (result.broken_at, result.differs_at, result.unchanged_through) == (7, 8, 7)
    assert "ends before" in result.reason and "the log ends at position 7" in result.difference


def test_a_reference_that_goes_back_is_refused(store):
    kept = exported_rows(store)
    with pytest.raises(ValueError, match="goes back"):
        store.verify(export=[kept[3], kept[1]])


def edit_and_rehash(store: EventStore, position: int) -> None:
    payload = cell(store, "payload", position)
    execute(store, "UPDATE events SET payload = ? WHERE position = ?", flip_one_byte(payload, "note-"), position)
    rehash_everything(store)
