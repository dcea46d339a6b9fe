"""The event log: events, idempotency keys, append-only triggers.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

from mnemolog.eventstore.dialects import append_only_ddl

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


TABLES = ("events", "idempotency_keys")  # the tables this revision makes append-only


def _position():
    return sa.BigInteger().with_variant(sa.Integer, "sqlite")


def upgrade() -> None:
    op.create_table(
        "events",
        sa.Column("position", _position(), primary_key=True, autoincrement=False),
        sa.Column("event_id", sa.String(36), nullable=False, unique=True),
        sa.Column("stream_id", sa.String(255), nullable=False),
        sa.Column("stream_version", sa.Integer, nullable=False),
        sa.Column("type", sa.String(100), nullable=False),
        sa.Column("schema_version", sa.Integer, nullable=False),
        sa.Column("tenant", sa.String(255), nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("metadata", sa.Text, nullable=False),
        sa.Column("correlation_id", sa.String(255), nullable=True),
        sa.Column("recorded_at", sa.String(40), nullable=False),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.UniqueConstraint("stream_id", "stream_version", name="uq_events_stream_version"),
    )
    op.create_index("ix_events_tenant_position", "events", ["tenant", "position"])
    op.create_index("ix_events_type_position", "events", ["type", "position"])
    op.create_index("ix_events_correlation", "events", ["correlation_id"])
    op.create_index("ix_events_recorded_at", "events", ["recorded_at"])
    op.create_table(
        "idempotency_keys",
        sa.Column("key", sa.String(255), primary_key=True),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("first_position", _position(), nullable=False),
        sa.Column("last_position", _position(), nullable=False),
    )
    create, _ = append_only_ddl(op.get_bind().dialect.name, TABLES)
    for statement in create:
        op.execute(statement)


def downgrade() -> None:
    _, drop = append_only_ddl(op.get_bind().dialect.name, TABLES)
    for statement in drop:
        op.execute(statement)
    op.drop_table("idempotency_keys")
    op.drop_table("events")
