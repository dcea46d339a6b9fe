"""Stream ids up to 600 characters (``schema.MAX_STREAM_ID``), on PostgreSQL as on SQLite.

The product names streams after tenants and ids (``entity-<tenant>/<id>``,
``document-<tenant>/<doc id>``): up to 520 characters, past the 255 that
PostgreSQL's ``varchar(255)`` took, while SQLite, which enforces no length,
stored them. Widening a ``varchar`` is a change of the catalogue only on
PostgreSQL: no row is rewritten, no index rebuilt, no trigger fires.
Nothing to do on SQLite.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

from mnemolog.eventstore.schema import MAX_STREAM_ID

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.alter_column("events", "stream_id", type_=sa.String(MAX_STREAM_ID), existing_type=sa.String(255), existing_nullable=False)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.alter_column("events", "stream_id", type_=sa.String(255), existing_type=sa.String(MAX_STREAM_ID), existing_nullable=False)
