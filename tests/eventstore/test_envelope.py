"""The envelope is defined once (``chain.StoredRow``): the table, the reads, the export and the hash agree with it."""

from __future__ import annotations

import hashlib
import json

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from mnemolog.eventstore.chain import CANONICAL_FIELDS, GENESIS_HASH, StoredRow, expected_hash
from mnemolog.eventstore.exchange import EXPORTED_FIELDS, ExportedEvent
from mnemolog.eventstore.schema import events
from mnemolog.eventstore.store import RecordedEvent


def test_every_view_of_the_envelope_follows_the_stored_row():
    assert tuple(c.name for c in events.columns) == StoredRow._fields
    assert ExportedEvent.__struct_fields__ == EXPORTED_FIELDS
    assert CANONICAL_FIELDS == (
        "position", "event_id", "stream_id", "stream_version", "type", "schema_version", "tenant", "payload", "metadata", "recorded_at",
    )
    # Reads build RecordedEvents positionally from the canonical columns, the payload decoded into the event.
    assert RecordedEvent.__struct_fields__ == tuple("event" if f == "payload" else f for f in CANONICAL_FIELDS)


text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20)


@given(position=st.integers(1, 2**63 - 1), version=st.integers(1, 2**31), stream=text, tenant=text, payload=text)
def test_the_hash_is_the_documented_formula(position, version, stream, tenant, payload):
    """``sha256(prev_hash || JSON array of the ten canonical values)``, as the README says."""
    body = json.dumps({"text": payload})
    row = StoredRow(position, "0190c0de-0000-7000-8000-000000000000", stream, version, "Noted", 1, tenant, body, "{}", None,
                    "2026-01-01T00:00:00.000000Z", GENESIS_HASH, "")
    values = [position, row.event_id, stream, version, "Noted", 1, tenant, body, "{}", row.recorded_at]
    by_hand = hashlib.sha256(GENESIS_HASH.encode() + msgspec.json.encode(values)).hexdigest()
    assert expected_hash(row) == by_hand
    assert msgspec.json.decode(msgspec.json.encode(values)) == values
