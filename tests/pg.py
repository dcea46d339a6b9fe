"""The private PostgreSQL cluster of the tests that need one (see ``mnemolog.tools.pg_cluster``).

Started once per test run, on first use, and stopped when the run ends. When
it cannot be started (no server binaries, no ``postgres`` user to run as),
the tests that need it are skipped with the reason, which ``pytest -rs``
prints.
"""

from __future__ import annotations

from mnemolog.tools.pg_cluster import ROLE, PrivateCluster

__all__ = ["CLUSTER", "ROLE", "fresh_database_url", "unavailable"]

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
