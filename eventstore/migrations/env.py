"""Alembic environment for the event log.

Run through :func:`mnemolog.eventstore.migrate.upgrade` (``mnemolog migrate``), which
passes an open connection; plain ``alembic upgrade head`` from the repository
root works too and finds the database from the settings.
"""

from alembic import context

from mnemolog.eventstore.dialects import create_migration_engine
from mnemolog.eventstore.schema import metadata as target_metadata

config = context.config


def _run(connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    from mnemolog.eventstore.migrate import locked
    from mnemolog.eventstore.store import resolve_url

    url = config.get_main_option("sqlalchemy.url") or resolve_url()
    if url.startswith("sqlite:///"):
        from pathlib import Path

        Path(url[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)  # as EventStore.open does
    engine = create_migration_engine(url)
    with locked(engine) as conn:
        _run(conn)
