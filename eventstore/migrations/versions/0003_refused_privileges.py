"""PostgreSQL: the role that serves the log may INSERT and SELECT, never UPDATE, DELETE or TRUNCATE.

The triggers refuse those statements too; revoking the privileges makes the
database refuse them before any trigger runs, and ``verify`` reports a role
that holds them again. Nothing to do on SQLite, whose file has no roles.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""

from alembic import op

from mnemolog.eventstore.dialects import REFUSED_PRIVILEGES, revoke_ddl
from mnemolog.eventstore.schema import APPEND_ONLY_TABLES

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    for statement in revoke_ddl(op.get_bind().dialect.name):
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"GRANT {', '.join(REFUSED_PRIVILEGES)} ON {', '.join(APPEND_ONLY_TABLES)} TO CURRENT_USER")
