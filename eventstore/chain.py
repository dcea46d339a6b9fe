"""The hash chain: each row's hash covers the previous hash and the row itself.

``hash = sha256(prev_hash || canonical(row))`` where the canonical bytes are
the JSON array of the envelope's stored values, in a fixed order. Anyone with
the ``events`` table can recompute it; the sqlite3 shell and a few lines of
any language suffice.
"""

from __future__ import annotations

from hashlib import sha256
from typing import Iterable, NamedTuple

import msgspec

from .guards import GuardProblem

GENESIS_HASH = "0" * 64

canonical_encoder = msgspec.json.Encoder()


class StoredRow(NamedTuple):
    """An envelope exactly as stored: the payload and metadata are JSON text."""

    position: int
    event_id: str
    stream_id: str
    stream_version: int
    type: str
    schema_version: int
    tenant: str
    payload: str
    metadata: str
    correlation_id: str | None
    recorded_at: str
    prev_hash: str
    hash: str


def canonical_bytes(
    position: int,
    event_id: str,
    stream_id: str,
    stream_version: int,
    type_: str,
    schema_version: int,
    tenant: str,
    payload: str,
    metadata: str,
    recorded_at: str,
) -> bytes:
    return canonical_encoder.encode(
        (position, event_id, stream_id, stream_version, type_, schema_version, tenant, payload, metadata, recorded_at)
    )


def row_hash(prev_hash: str, *fields) -> str:
    return sha256(prev_hash.encode("ascii") + canonical_bytes(*fields)).hexdigest()


def expected_hash(row: StoredRow) -> str:
    return row_hash(
        row.prev_hash,
        row.position,
        row.event_id,
        row.stream_id,
        row.stream_version,
        row.type,
        row.schema_version,
        row.tenant,
        row.payload,
        row.metadata,
        row.recorded_at,
    )


class ChainBreak(msgspec.Struct, frozen=True):
    position: int
    reason: str
    checked: int = 0  # rows that held before the break


class _Correlation(msgspec.Struct):
    correlation_id: str | None = None


_correlation = msgspec.json.Decoder(_Correlation)


class VerifyResult(msgspec.Struct, frozen=True):
    """What ``verify`` found.

    ``broken_at``/``reason``: the first break of the chain, or else the kept
    digest (the reference's last position) that the log disagrees with.
    ``differs_at``/``difference``: the first position known to differ from
    the reference, and ``unchanged_through`` the last one it proves intact
    (the edit lies between them; next to each other with an export).
    ``guards``: append-only triggers that are missing or altered.
    """

    ok: bool
    checked: int
    first_position: int | None
    last_position: int | None
    tip_hash: str | None
    broken_at: int | None = None
    reason: str | None = None
    differs_at: int | None = None
    unchanged_through: int | None = None
    difference: str | None = None
    guards: tuple[GuardProblem, ...] = ()


def walk(rows: Iterable[StoredRow], *, prev_hash: str | None, prev_position: int | None) -> ChainBreak | None:
    """Check rows in position order; the first break found, or None.

    ``prev_hash``/``prev_position`` describe the row before the first one
    (``GENESIS_HASH``/0 from the start of the log); None trusts the first
    row's own ``prev_hash``, as when checking a tenant's slice of an export.
    """
    expect_hash, expect_position = prev_hash, prev_position
    for index, row in enumerate(rows):
        if expect_position is not None and row.position != expect_position + 1:
            return ChainBreak(row.position, f"position gap: expected {expect_position + 1}, found {row.position}", index)
        if expect_hash is not None and row.prev_hash != expect_hash:
            return ChainBreak(row.position, "prev_hash does not match the previous row's hash", index)
        if expected_hash(row) != row.hash:
            return ChainBreak(row.position, "hash does not match the row's contents", index)
        # The indexed correlation_id column is a copy of the hashed metadata's.
        try:
            copied = _correlation.decode(row.metadata).correlation_id
        except msgspec.DecodeError:
            copied = None
        if row.correlation_id != copied:
            return ChainBreak(row.position, "correlation_id column does not match the metadata", index)
        expect_hash, expect_position = row.hash, row.position
    return None
