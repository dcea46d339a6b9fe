"""The log's tables, as SQLAlchemy Core objects shared by queries and migrations."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Index, Integer, MetaData, String, Table, Text, UniqueConstraint

metadata = MetaData()

#: The largest position the log can hold (SQLite's largest INTEGER, PostgreSQL's BIGINT):
#: a larger one can only be a caller's mistake.
MAX_POSITION = 2**63 - 1


def whole_number(text: str) -> int | None:
    """``text`` as a number when it is ASCII digits, else None (``int()`` would also read '1_0', '+3' and other
    scripts' digits); past 19 digits, beyond any position or count, ``MAX_POSITION + 1`` (``int()`` refuses more
    than 4,300 digits, leading zeros too, and no more of them would mean anything)."""
    if not (text.isascii() and text.isdigit()):
        return None
    significant = text.lstrip("0")
    return MAX_POSITION + 1 if len(significant) > 19 else int(significant or "0")

#: The longest stream id, in characters. The longest the product makes is
#: 520 (``document-<tenant>/<doc id>``, each of those 255); 600 characters
#: of up to four UTF-8 bytes stay within PostgreSQL's largest b-tree index
#: entry (2,704 bytes), which the (stream_id, stream_version) index holds.
MAX_STREAM_ID = 600
#: The longest tenant, correlation id and idempotency key, in characters.
MAX_NAME = 255
#: The longest fingerprint an idempotency key is bound to (a SHA-256 in hex, unless the caller gives its own).
MAX_FINGERPRINT = 64

events = Table(
    "events",
    metadata,
    Column("position", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=False),
    Column("event_id", String(36), nullable=False, unique=True),
    Column("stream_id", String(MAX_STREAM_ID), nullable=False),
    Column("stream_version", Integer, nullable=False),
    Column("type", String(100), nullable=False),
    Column("schema_version", Integer, nullable=False),
    Column("tenant", String(255), nullable=False),
    Column("payload", Text, nullable=False),
    Column("metadata", Text, nullable=False),
    Column("correlation_id", String(255), nullable=True),
    Column("recorded_at", String(40), nullable=False),
    Column("prev_hash", String(64), nullable=False),
    Column("hash", String(64), nullable=False),
    UniqueConstraint("stream_id", "stream_version", name="uq_events_stream_version"),
)

# One row per run of consecutive events of one append with the same tenant
# and correlation id (an ordinary append is one run). Tenant and correlation
# reads find their position ranges here: one row per append instead of an
# index entry per event. Derived from ``events`` in the same transaction,
# append-only, and checked against the events by ``verify``.
event_spans = Table(
    "event_spans",
    metadata,
    Column("first_position", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=False),
    Column("last_position", BigInteger().with_variant(Integer, "sqlite"), nullable=False),
    Column("tenant", String(255), nullable=False),
    Column("correlation_id", String(255), nullable=True),
)
Index("ix_event_spans_tenant", event_spans.c.tenant, event_spans.c.last_position)
# Partial (``correlation_id IS NOT NULL``) as migration 0002 creates it. The ``where`` is left out here: a
# ``postgresql_where`` loads SQLAlchemy's PostgreSQL dialect into every process at import, which no read
# or write of this table needs (migrations, not this metadata, create it).
Index("ix_event_spans_correlation", event_spans.c.correlation_id, event_spans.c.last_position)

idempotency = Table(
    "idempotency_keys",
    metadata,
    Column("key", String(255), primary_key=True),
    Column("fingerprint", String(MAX_FINGERPRINT), nullable=False),
    Column("first_position", BigInteger().with_variant(Integer, "sqlite"), nullable=False),
    Column("last_position", BigInteger().with_variant(Integer, "sqlite"), nullable=False),
)

APPEND_ONLY_TABLES = ("events", "idempotency_keys", "event_spans")
