"""Idempotency records travel with an export: a request retried after its data moved is answered, not written twice."""

from __future__ import annotations

import io
import json

import pytest

from mnemolog.eventstore import EventStore, ImportRefused
from mnemolog.eventstore.errors import IdempotencyConflict
from mnemolog.eventstore.exchange import export, import_

from . import test_exchange
from .test_exchange import ExchangeNoted, ExchangeTagged

any_target = test_exchange.any_target  # an empty store on each backend


def fill(store: EventStore) -> None:
    store.append("notes-1", [ExchangeNoted(text="first"), ExchangeNoted(text="second")], tenant="acme", idempotency_key="acme/add/r-1", fingerprint="f1")
    store.append("notes-2", [ExchangeTagged(tag="blue")], tenant="globex", idempotency_key="globex/add/r-1", fingerprint="f2")
    store.append("notes-1", [ExchangeNoted(text="third")], tenant="acme")
    store.append("notes-3", [ExchangeTagged(tag="red"), ExchangeTagged(tag="green")], tenant="globex", idempotency_key="globex/add/r-2", fingerprint="f3")


@pytest.fixture
def source(tmp_path):
    with EventStore.open(tmp_path / "source") as store:
        fill(store)
        yield store


def dump(store, **kwargs) -> bytes:
    out = io.BytesIO()
    export(store, out, **kwargs)
    return out.getvalue()


def records(data: bytes) -> list[dict]:
    return [json.loads(line) for line in data.splitlines() if line.startswith(b'{"mnemolog_idempotency":')]


def test_the_export_carries_each_keyed_append_and_the_footer_counts_them(source):
    data = dump(source)
    assert records(data) == [
        {"mnemolog_idempotency": "acme/add/r-1", "fingerprint": "f1", "first_position": 1, "last_position": 2},
        {"mnemolog_idempotency": "globex/add/r-1", "fingerprint": "f2", "first_position": 3, "last_position": 3},
        {"mnemolog_idempotency": "globex/add/r-2", "fingerprint": "f3", "first_position": 5, "last_position": 6},
    ]
    lines = data.splitlines()
    assert json.loads(lines[-1])["idempotency_keys"] == 3 and lines[-2].startswith(b'{"mnemolog_idempotency":')
    tenant = dump(source, tenant="globex")
    assert [r["mnemolog_idempotency"] for r in records(tenant)] == ["globex/add/r-1", "globex/add/r-2"]
    assert json.loads(tenant.splitlines()[-1])["idempotency_keys"] == 2


def test_a_retry_after_the_move_is_answered_at_the_positions_here(source, any_target):
    """Into a log of either backend that holds an append of its own; exported from there again, the records follow."""
    busy = any_target
    busy.append("own", [ExchangeTagged(tag="mine")], tenant="acme", idempotency_key="acme/add/own", fingerprint="o")
    report = import_(busy, io.BytesIO(dump(source)))
    assert (report.imported, report.idempotency_keys) == (6, 3)
    tip = busy.last_position()
    # The same request again: its first answer (shifted by the event that was here), nothing written.
    again = busy.append("notes-1", [ExchangeNoted(text="first"), ExchangeNoted(text="second")], tenant="acme", idempotency_key="acme/add/r-1", fingerprint="f1")
    assert (again.first_position, again.last_position, again.replayed) == (2, 3, True)
    again = busy.append("notes-3", [ExchangeTagged(tag="red"), ExchangeTagged(tag="green")], tenant="globex", idempotency_key="globex/add/r-2", fingerprint="f3")
    assert (again.first_position, again.last_position, again.replayed) == (6, 7, True)
    with pytest.raises(IdempotencyConflict):  # the key with another request
        busy.append("notes-1", [ExchangeNoted(text="other")], tenant="acme", idempotency_key="acme/add/r-1", fingerprint="other")
    assert busy.last_position() == tip
    assert busy.recorder.idempotency_record("acme/add/own").first_position == 1  # its own, untouched
    # Imported again: nothing new, records included.
    assert import_(busy, io.BytesIO(dump(source))).idempotency_keys == 0
    assert [(r["mnemolog_idempotency"], r["first_position"]) for r in records(dump(busy, tenant="acme"))] == [("acme/add/own", 1), ("acme/add/r-1", 2)]


def test_a_key_the_importing_store_holds_keeps_its_own_record(source, tmp_path):
    with EventStore.open(tmp_path / "other") as other:
        other.append("mine", [ExchangeTagged(tag="x")], tenant="acme", idempotency_key="acme/add/r-1", fingerprint="mine")
        assert import_(other, io.BytesIO(dump(source))).idempotency_keys == 2
        record = other.recorder.idempotency_record("acme/add/r-1")
        assert (record.fingerprint, record.first_position, record.last_position) == ("mine", 1, 1)


def test_a_format_2_file_imports_without_records(source, tmp_path):
    lines = dump(source).splitlines(keepends=True)
    older = [lines[0].replace(b'"mnemolog_export":3', b'"mnemolog_export":2')]
    older += [line for line in lines[1:-1] if not line.startswith(b'{"mnemolog_idempotency":')]
    older.append(lines[-1].replace(b',"idempotency_keys":3', b""))
    with EventStore.open(tmp_path / "target") as target:
        report = import_(target, io.BytesIO(b"".join(older)))
        assert (report.imported, report.idempotency_keys) == (6, 0)
        assert target.recorder.idempotency_record("acme/add/r-1") is None


def edited(data: bytes, change) -> bytes:
    lines = data.splitlines(keepends=True)
    return b"".join(change(lines) or lines)


def _replace_record(lines: list[bytes], old: bytes, new: bytes) -> None:
    for i, line in enumerate(lines):
        if line.startswith(b'{"mnemolog_idempotency":"globex/add/r-1"'):
            lines[i] = line.replace(old, new)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda lines: _replace_record(lines, b'"first_position":3,"last_position":3', b'"first_position":3,"last_position":9'), "positions 3 to 9, which are not all in the file"),
        (lambda lines: _replace_record(lines, b'"first_position":3,"last_position":3', b'"first_position":3,"last_position":2'), "first_position is after its last_position"),
        (lambda lines: _replace_record(lines, b'"fingerprint":"f2"', b'"fingerprint":7'), "Expected `str`"),
        (lambda lines: _replace_record(lines, b'"globex/add/r-1"', b'"acme/add/r-1"'), "appears twice in the file"),
        (lambda lines: lines.pop(-2) and None, "counts 3 idempotency records, the file holds 2"),
    ],
)
def test_a_record_that_does_not_hold_is_refused_and_nothing_is_written(source, tmp_path, change, message):
    with EventStore.open(tmp_path / "target") as target:
        with pytest.raises(ImportRefused, match=message):
            import_(target, io.BytesIO(edited(dump(source), change)))
        assert target.last_position() == 0


def test_rehash_leaves_out_a_record_whose_events_the_file_lacks(source, tmp_path):
    data = edited(dump(source), lambda lines: _replace_record(lines, b'"first_position":3,"last_position":3', b'"first_position":30,"last_position":30'))
    with EventStore.open(tmp_path / "target") as target:
        assert import_(target, io.BytesIO(data), rehash=True).idempotency_keys == 2
        assert target.recorder.idempotency_record("globex/add/r-1") is None


def test_an_import_stopped_before_its_records_writes_them_when_run_again(source, tmp_path, monkeypatch):
    from mnemolog.eventstore import exchange_idempotency

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    data = dump(source)
    with EventStore.open(tmp_path / "target") as target:
        with monkeypatch.context() as patched:
            patched.setattr(exchange_idempotency, "take_in", stopped)
            with pytest.raises(KeyboardInterrupt):
                import_(target, io.BytesIO(data))
        assert target.last_position() == 6 and target.recorder.idempotency_record("acme/add/r-1") is None
        report = import_(target, io.BytesIO(data))
        assert (report.imported, report.skipped_existing, report.idempotency_keys) == (0, 6, 3)
        assert target.append("notes-1", [ExchangeNoted(text="first")], tenant="acme", idempotency_key="acme/add/r-1", fingerprint="f1").replayed
