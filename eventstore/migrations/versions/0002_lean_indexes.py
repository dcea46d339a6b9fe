"""Fewer per-event indexes on the log: each one is paid on every append.

- ``event_spans`` takes over tenant and correlation reads: one row per run
  of an append's events with the same tenant and correlation id, instead of
  an index entry per event in ``ix_events_tenant_position`` and
  ``ix_events_correlation``. Existing events get their spans here.
- ``ix_events_recorded_at`` goes: time -> position is a binary search over
  positions (recorded times never go backwards), so no query reads it.
- ``ix_events_type_position`` goes: type filters are applied beside the
  position, tenant or stream range being read, which is how readers page.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

from mnemolog.eventstore.dialects import append_only_ddl

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TABLES = ("event_spans",)
_WITH_CORRELATION = sa.text("correlation_id IS NOT NULL")

# Runs of consecutive positions with one tenant and correlation id: within a
# (tenant, correlation) partition, position - row_number() is constant
# exactly along such a run.
_BACKFILL = """
INSERT INTO event_spans (first_position, last_position, tenant, correlation_id)
SELECT min(position), max(position), tenant, correlation_id
FROM (
    SELECT position, tenant, correlation_id,
           position - row_number() OVER (PARTITION BY tenant, correlation_id ORDER BY position) AS run
    FROM events
) AS numbered
GROUP BY tenant, correlation_id, run
"""


def _position():
    return sa.BigInteger().with_variant(sa.Integer, "sqlite")


def upgrade() -> None:
    op.create_table(
        "event_spans",
        sa.Column("first_position", _position(), primary_key=True, autoincrement=False),
        sa.Column("last_position", _position(), nullable=False),
        sa.Column("tenant", sa.String(255), nullable=False),
        sa.Column("correlation_id", sa.String(255), nullable=True),
    )
    op.execute(_BACKFILL)
    op.create_index("ix_event_spans_tenant", "event_spans", ["tenant", "last_position"])
    op.create_index(
        "ix_event_spans_correlation",
        "event_spans",
        ["correlation_id", "last_position"],
        sqlite_where=_WITH_CORRELATION,
        postgresql_where=_WITH_CORRELATION,
    )
    create, _ = append_only_ddl(op.get_bind().dialect.name, TABLES)
    for statement in create:
        op.execute(statement)
    for name in ("ix_events_tenant_position", "ix_events_type_position", "ix_events_correlation", "ix_events_recorded_at"):
        op.drop_index(name, table_name="events")


def downgrade() -> None:
    op.create_index("ix_events_tenant_position", "events", ["tenant", "position"])
    op.create_index("ix_events_type_position", "events", ["type", "position"])
    op.create_index("ix_events_correlation", "events", ["correlation_id"])
    op.create_index("ix_events_recorded_at", "events", ["recorded_at"])
    _, drop = append_only_ddl(op.get_bind().dialect.name, TABLES)
    for statement in drop:
        op.execute(statement)
    op.drop_table("event_spans")
