"""Schema migrations of the log, run through alembic.

alembic loads for a migration only: an open of a log already at :data:`HEAD`
(every open but a new log's, or a new version's first) reads its revision
with one query. Loading alembic and reading its scripts took a good part
of a short command's start.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from sqlalchemy import Connection, Engine, column, inspect, select, table

from . import dialects
from .settings import SetupError

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS = Path(__file__).with_name("migrations")
#: The newest revision in migrations/versions; a test holds it to alembic's own reading of the scripts.
HEAD = "0004"
_VERSIONS = table("alembic_version", column("version_num"))


def alembic_config(url: str | None = None) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if url:
        config.set_main_option("sqlalchemy.url", url)
    return config


@lru_cache(maxsize=1)
def head_revision() -> str:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()


@lru_cache(maxsize=1)
def known_revisions() -> frozenset[str]:
    from alembic.script import ScriptDirectory

    return frozenset(script.revision for script in ScriptDirectory.from_config(alembic_config()).walk_revisions())


def current_revision(engine: Engine | Connection) -> str | None:
    """The revision the log's schema is at; None for a log never migrated."""
    with engine.connect() if isinstance(engine, Engine) else nullcontext(engine) as conn:
        if not inspect(conn).has_table(_VERSIONS.name):
            return None
        return conn.execute(select(_VERSIONS.c.version_num)).scalar()


class Upgrade(NamedTuple):
    """What :func:`upgrade_log` did: the revision the log was at (read under the migration lock) and whether any
    migration ran."""

    previous: str | None
    ran: bool


def upgrade(engine: Engine, revision: str = "head") -> bool:
    """Bring the log's schema to ``revision`` (the newest by default); True when anything ran."""
    return upgrade_log(engine, revision).ran


def upgrade_log(engine: Engine, revision: str = "head") -> Upgrade:
    """Bring the log's schema to ``revision`` (the newest by default). The revision is read again under the lock:
    a process that waited for another's migration says it found the log migrated, not that it migrated it from
    where the log was before it waited."""
    target = head_revision() if revision == "head" else revision
    current = current_revision(engine)
    if current == target:
        return Upgrade(current, False)
    _known(current)
    from alembic import command

    with locked(engine) as conn:
        current = current_revision(conn)
        if current == target:
            return Upgrade(current, False)
        _known(current)
        config = alembic_config()
        config.attributes["connection"] = conn
        command.upgrade(config, revision)
    return Upgrade(current, True)


def _known(current: str | None) -> None:
    if current is not None and current not in known_revisions():
        # A newer mnemolog migrated this log: alembic could only fail on it (a traceback), and nothing here may change it.
        raise SetupError(
            f"the log's schema is at revision {current!r}, which this mnemolog does not know (its newest is {head_revision()!r}):"
            " a newer mnemolog migrated it; upgrade mnemolog to open it"
        )


def upgrade_on_open(url: str, reader: Engine, busy_timeout: float) -> bool:
    """Bring the log at ``url`` to the newest schema as a store opens it; True when anything ran.

    The revision is read through ``reader``, in a read transaction: a log
    already at the newest schema (every open but a new log's or a new
    version's first) takes no write lock, so a process opening it beside a
    long write of another one neither waits for that write nor fails when it
    outlasts the lock wait. Only a log behind takes the lock (see
    :func:`locked`), and reads its revision again under it.
    """
    if current_revision(reader) == HEAD:
        return False
    engine = dialects.create_migration_engine(url, busy_timeout)
    try:
        return upgrade(engine)
    finally:
        engine.dispose()


def downgrade(engine: Engine, revision: str) -> None:
    """Take the log's schema back to ``revision`` (its data stays)."""
    _run(engine, "downgrade", revision)


def _run(engine: Engine, step_name: str, revision: str) -> None:
    from alembic import command

    step = getattr(command, step_name)
    config = alembic_config()
    with locked(engine) as conn:
        config.attributes["connection"] = conn
        step(config, revision)


@contextmanager
def locked(engine: Engine) -> Iterator[Connection]:
    """A connection holding the log's write lock from before the first migration step until after the last; commits on success.

    One migration at a time, and no append while it runs: alembic reads the
    revision after this lock, so a process that waited for another's
    migration finds it done. SQLite's BEGIN IMMEDIATE does the same; on
    PostgreSQL two processes opening a fresh log both created its tables. The
    transaction begins here, before alembic sees the connection: alembic
    commits after every step of a transaction it began itself (it counts
    SQLite's DDL as non-transactional), which let a waiting process in
    between two steps.
    """
    with engine.connect() as conn:
        conn.begin()
        dialects.lock_log(conn)
        yield conn
        conn.commit()
