"""The private PostgreSQL cluster of the tests that need one (see ``mnemolog.tools.pg_cluster``).

Started once per test run, on first use, and stopped when the run ends. When
it cannot be started (no server binaries, no ``postgres`` user to run as),
the tests that need it are skipped with the reason, which ``pytest -rs``
prints.
"""

from __future__ import annotations

from typing import NamedTuple

from mnemolog.tools.pg_cluster import ROLE, PrivateCluster

__all__ = ["CLUSTER", "ROLE", "ServingRole", "fresh_database_url", "serving_role", "unavailable"]

CLUSTER = PrivateCluster()


def unavailable() -> str | None:
    """Why PostgreSQL tests cannot run here, or None when they can."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install -e '.[postgres]')"
    return CLUSTER.ensure()


def fresh_database_url() -> str:
    """A new, empty database on the test cluster, owned by the serving role."""
    reason = unavailable()
    if reason:
        import pytest

        pytest.skip(reason)
    return CLUSTER.create_database()


class ServingRole(NamedTuple):
    name: str
    database: str
    url: str  # the database's URL, as this role


def serving_role(url: str, *, log_grants: bool = True) -> ServingRole:
    """A new login role on the database of ``url`` (a migrated log) that owns nothing, granted what the README
    grants a serving role on the log's tables (``log_grants``), or nothing at all."""
    import uuid

    import psycopg

    from mnemolog.eventstore.dialects import psycopg_conninfo

    database, name = url.split("/")[3].split("?")[0], f"serving_{uuid.uuid4().hex[:8]}"
    CLUSTER.admin(f"CREATE ROLE {name} LOGIN")
    if log_grants:
        with psycopg.connect(psycopg_conninfo(url), autocommit=True) as owner:
            owner.execute(f"GRANT SELECT, INSERT ON events, event_spans, idempotency_keys TO {name}")
            owner.execute(f"GRANT SELECT ON alembic_version TO {name}")
    return ServingRole(name, database, CLUSTER.url(database, user=name))
