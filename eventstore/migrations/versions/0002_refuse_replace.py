"""Refuse INSERT OR REPLACE on the log's tables.

SQLite's REPLACE deletes the conflicting row without firing delete
triggers, so an insert that would replace a stored row is refused before it
happens.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_TRIGGERS = {
    "events_no_replace": (
        "CREATE TRIGGER events_no_replace BEFORE INSERT ON events WHEN EXISTS ("
        "SELECT 1 FROM events WHERE position = NEW.position OR event_id = NEW.event_id"
        " OR (stream_id = NEW.stream_id AND stream_version = NEW.stream_version)) "
        "BEGIN SELECT RAISE(ABORT, 'memledger: events is append-only; an insert may not replace a stored event'); END"
    ),
    "idempotency_keys_no_replace": (
        "CREATE TRIGGER idempotency_keys_no_replace BEFORE INSERT ON idempotency_keys WHEN EXISTS ("
        "SELECT 1 FROM idempotency_keys WHERE key = NEW.key) "
        "BEGIN SELECT RAISE(ABORT, 'memledger: idempotency_keys is append-only; an insert may not replace a stored key'); END"
    ),
}


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return  # PostgreSQL has no REPLACE; its statement triggers cover UPDATE/DELETE/TRUNCATE
    for statement in _TRIGGERS.values():
        op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for name in _TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {name}")
