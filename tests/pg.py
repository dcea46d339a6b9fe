"""A private PostgreSQL cluster for the tests that need one.

Started once per test run (``initdb`` into a temporary directory, listening
only on a unix socket inside it) and stopped when the run ends. When it
cannot be started (no server binaries, no ``postgres`` user to run as), the
tests that need it are skipped with the reason, which ``pytest -rs`` prints.

``fresh_database_url()`` makes an empty database owned by the non-superuser
role ``mnemolog``, so that privileges apply to the log as they would for a
serving role.
"""

from __future__ import annotations

import atexit
import glob
import itertools
import os
import shutil
import subprocess
import tempfile
import threading

ROLE = "mnemolog"


class _Cluster:
    def __init__(self) -> None:
        self.dir: str | None = None
        self.error: str | None = None
        self.started = False
        self._lock = threading.Lock()
        self._names = itertools.count(1)

    def _bin(self, name: str) -> str | None:
        found = shutil.which(name)
        if found:
            return found
        candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
        return candidates[-1] if candidates else None

    def _as_owner(self, argv: list[str]) -> list[str]:
        if os.geteuid() != 0:
            return argv
        return ["runuser", "-u", "postgres", "--", *argv]

    def ensure(self) -> str | None:
        """Start the cluster if needed; the reason it cannot run, or None."""
        with self._lock:
            if self.started or self.error:
                return self.error
            try:
                self._start()
                self.started = True
            except Exception as exc:  # any failure is a reason to skip, told as one line
                self.error = f"PostgreSQL could not be started: {exc}"
            return self.error

    def _start(self) -> None:
        initdb, pg_ctl = self._bin("initdb"), self._bin("pg_ctl")
        if not initdb or not pg_ctl:
            raise RuntimeError("initdb/pg_ctl not found (apt-get install postgresql)")
        if os.geteuid() == 0:
            try:
                import pwd

                pwd.getpwnam("postgres")
            except KeyError:
                raise RuntimeError("running as root and there is no postgres user to run the server as") from None
        self.dir = tempfile.mkdtemp(prefix="mnemolog-pg-")
        os.chmod(self.dir, 0o755)
        data = os.path.join(self.dir, "data")
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres")
        run = lambda argv: subprocess.run(self._as_owner(argv), check=True, capture_output=True, text=True, timeout=120)
        try:
            run([initdb, "-D", data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C"])
            options = f"-k {self.dir} -c listen_addresses='' -c fsync=off -c max_connections=200"
            run([pg_ctl, "-D", data, "-o", options, "-l", os.path.join(self.dir, "log"), "-w", "-t", "60", "start"])
        except subprocess.CalledProcessError as exc:
            raise RuntimeError((exc.stderr or exc.stdout or str(exc)).strip().splitlines()[-1]) from None
        atexit.register(self.stop)
        self.admin(f"CREATE ROLE {ROLE} LOGIN")

    def admin(self, sql: str, database: str = "postgres") -> None:
        import psycopg

        with psycopg.connect(host=self.dir, user="postgres", dbname=database, autocommit=True) as conn:
            conn.execute(sql)

    def stop(self) -> None:
        if self.dir and self.started:
            subprocess.run(
                self._as_owner([self._bin("pg_ctl"), "-D", os.path.join(self.dir, "data"), "-m", "immediate", "-w", "stop"]),
                capture_output=True,
                timeout=60,
            )
            self.started = False
            shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, database: str, user: str = ROLE) -> str:
        return f"postgresql+psycopg://{user}@/{database}?host={self.dir}"


CLUSTER = _Cluster()


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
    name = f"log_{os.getpid()}_{next(CLUSTER._names)}"
    CLUSTER.admin(f"CREATE DATABASE {name} OWNER {ROLE}")
    return CLUSTER.url(name)
