"""The hash chain: each row's hash covers the previous hash and the row itself.

``hash = sha256(prev_hash || canonical(row))`` where the canonical bytes are
the JSON array of the envelope's stored values, in a fixed order. Anyone with
the ``events`` table can recompute it; the sqlite3 shell and a few lines of
any language suffice.
"""

from __future__ import annotations

from hashlib import sha256
from operator import attrgetter
from typing import Iterable, NamedTuple

import msgspec

from .guards import GuardProblem
from .schema import MAX_POSITION, whole_number

GENESIS_HASH = "0" * 64

canonical_encoder = msgspec.json.Encoder()


class StoredRow(NamedTuple):
    """An envelope exactly as stored: the payload and metadata are JSON text.

    The one definition of the envelope: its fields are the ``events`` table's
    columns in order; :data:`CANONICAL_FIELDS` are those the hash covers (and
    what a reader of domain events gets); the recorder, the reads and the
    export derive their column lists from these two.
    """

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


#: The envelope's fields a row's hash covers, in the canonical order: every
#: stored column but the indexed copy of the correlation id and the chain's own two.
CANONICAL_FIELDS = tuple(f for f in StoredRow._fields if f not in ("correlation_id", "prev_hash", "hash"))

canonical_values = attrgetter(*CANONICAL_FIELDS)


def canonical_bytes(row: StoredRow) -> bytes:
    return canonical_encoder.encode(canonical_values(row))


def expected_hash(row: StoredRow) -> str:
    """``sha256(prev_hash || canonical(row))`` (the recorder's append loop inlines the same formula)."""
    return sha256(row.prev_hash.encode("ascii") + canonical_bytes(row)).hexdigest()


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
    ``plaintext_kept``: events in the range checked that keep text a forget
    erased (of its memories and their mentions; the tenant's entities and
    documents for its own key), in plaintext (written unsealed: no key could
    erase them; every read shows them erased); over HTTP, those of the
    caller's tenant only. A note for an audit, not a break: the chain is whole.
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
    plaintext_kept: tuple[int, ...] = ()


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


class Digest(msgspec.Struct, frozen=True):
    """The chain's tip at a position, ``POSITION:HASH``: kept outside the store, it proves the log up to it unchanged."""

    position: int
    hash: str

    def __str__(self) -> str:
        return f"{self.position}:{self.hash}"

    @classmethod
    def parse(cls, text: str) -> "Digest":
        position, sep, digest = text.strip().partition(":")
        number = whole_number(position)
        if not sep or number is None or number > MAX_POSITION or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ValueError(f"expected POSITION:HASH (a position up to {MAX_POSITION}, then 64 hex digits), got {text[:100]!r}")
        return cls(number, digest)


def digests_of(against) -> list[Digest]:
    """``against`` (a digest, a ``(position, hash)`` pair, a list of either, or None) as a list of digests."""
    if against is None:
        return []
    if isinstance(against, Digest) or (isinstance(against, tuple) and len(against) == 2 and isinstance(against[0], int)):
        against = [against]
    return [a if isinstance(a, Digest) else Digest(*a) for a in against]


def ends_before(end: int, wanted: int) -> str:
    """Why a range the log does not reach is not verified: the log may have lost its tail."""
    return f"the log ends at position {end}, before position {wanted} that was asked for"
