"""Schema migrations of the log, run through alembic."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

MIGRATIONS = Path(__file__).with_name("migrations")


def alembic_config(url: str | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    if url:
        config.set_main_option("sqlalchemy.url", url)
    return config


@lru_cache(maxsize=1)
def head_revision() -> str:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine: Engine) -> bool:
    """Bring the log's schema to the newest revision; True when anything ran."""
    if current_revision(engine) == head_revision():
        return False
    config = alembic_config()
    with engine.connect() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, "head")
        conn.commit()
    return True
