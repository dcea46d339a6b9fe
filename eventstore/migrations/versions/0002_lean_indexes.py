"""Fewer secondary indexes on the log: each one is paid on every append.

- ``ix_events_recorded_at`` goes: time -> position is a binary search over
  positions (recorded times never go backwards), so no query reads it.
- ``ix_events_type_position`` goes: type filters are applied beside the
  position or tenant range being read, which is how every reader pages.
- ``ix_events_correlation`` covers only events that carry a correlation id.
- ``ix_events_tenant`` replaces ``ix_events_tenant_position``: an index
  entry ends with the rowid, which is the position, so the second column
  only made every entry longer.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_WITH_CORRELATION = sa.text("correlation_id IS NOT NULL")


def upgrade() -> None:
    op.drop_index("ix_events_tenant_position", table_name="events")
    op.create_index("ix_events_tenant", "events", ["tenant"])
    op.drop_index("ix_events_recorded_at", table_name="events")
    op.drop_index("ix_events_type_position", table_name="events")
    op.drop_index("ix_events_correlation", table_name="events")
    op.create_index(
        "ix_events_correlation",
        "events",
        ["correlation_id"],
        sqlite_where=_WITH_CORRELATION,
        postgresql_where=_WITH_CORRELATION,
    )


def downgrade() -> None:
    op.drop_index("ix_events_correlation", table_name="events")
    op.create_index("ix_events_correlation", "events", ["correlation_id"])
    op.create_index("ix_events_type_position", "events", ["type", "position"])
    op.create_index("ix_events_recorded_at", "events", ["recorded_at"])
    op.drop_index("ix_events_tenant", table_name="events")
    op.create_index("ix_events_tenant_position", "events", ["tenant", "position"])
