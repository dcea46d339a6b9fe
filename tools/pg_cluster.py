"""A private PostgreSQL cluster for benches and tests: no server to set up.

``initdb`` into a temporary directory (as the ``postgres`` user when run as
root, since PostgreSQL refuses to run as root), listening only on a unix
socket inside it, with ``fsync`` off: it holds throwaway logs. The role
``mnemolog`` (not a superuser) owns the databases it makes, so privileges
apply as they would to a serving role.
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


class PrivateCluster:
    """A throwaway PostgreSQL cluster: ``initdb`` into a temporary directory, a unix socket only, stopped by :meth:`stop` (or at exit)."""

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
                if self.dir:  # a cluster half made (initdb or the role failed) is not left in the temporary directory
                    self._remove()
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
            self._remove()

    def _remove(self) -> None:
        """Stop the server if it runs, and delete its directory."""
        if os.path.isdir(os.path.join(self.dir, "data")):
            subprocess.run(
                self._as_owner([self._bin("pg_ctl"), "-D", os.path.join(self.dir, "data"), "-m", "immediate", "-w", "stop"]),
                capture_output=True,
                timeout=60,
            )
        self.started = False
        shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, database: str, user: str = ROLE) -> str:
        return f"postgresql+psycopg://{user}@/{database}?host={self.dir}"

    def create_database(self) -> str:
        """A new, empty database owned by :data:`ROLE`; its SQLAlchemy URL."""
        name = f"log_{os.getpid()}_{next(self._names)}"
        self.admin(f"CREATE DATABASE {name} OWNER {ROLE}")
        return self.url(name)
