"""The API keys of servers that share a PostgreSQL log: one table in the log's database, so one revocation holds everywhere.

Each server keeping its keys in its own ``auth.db`` made an operator create
every key, and revoke a leaked one, on every server. Here the ``api_keys``
table (the columns of ``auth.db``'s) sits in the database of the log the
servers share, beside the log's tables but not part of the log: a key is a
secret, not a domain fact, and no event or export holds one. Opening it
takes in the keys of the data directory's ``auth.db``, if it has one (the
keys a server used before): a key new to the table is added, and a key
revoked in either place stays revoked; a key is never revived.

A server caches a lookup until the table changes, as with ``auth.db``: the
change marker is the pair of the count of keys and the count of revoked
ones, which only ever grow (keys are made and revoked, never deleted or
restored). It costs a round trip to the database, so a server reads it at
most once a second (:attr:`PostgresKeyRows.recheck_seconds`), not on every
request: a key revoked through one server is refused by the others within a
second, and by that server at once.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Column, Float, MetaData, String, Table, create_engine, func, insert, inspect, select, text, update
from sqlalchemy.exc import ProgrammingError
from sqlalchemy.dialects.postgresql import insert as pg_insert

from mnemolog.eventstore.dialects import refusing_dropped
from mnemolog.eventstore.settings import BUSY_TIMEOUT, SetupError

from .key_rows import COLUMNS, SqliteKeyRows

_METADATA = MetaData()
API_KEYS = Table(
    "api_keys",
    _METADATA,
    Column("key_id", String, primary_key=True),
    Column("digest", String, unique=True, nullable=False),
    Column("tenant", String, nullable=False),
    Column("scopes", String, nullable=False),
    Column("name", String, nullable=False),
    Column("created_at", Float, nullable=False),
    Column("revoked_at", Float),
)
_LISTED = [API_KEYS.c[name] for name in COLUMNS if name != "digest"]
#: Serialises the table's creation among servers starting together (CREATE TABLE IF NOT EXISTS races in PostgreSQL).
_CREATE_LOCK = 0x6D6E656D6F6B6579  # "mnemokey"


class PostgresKeyRows:
    """The rows of the shared ``api_keys`` table (the methods of :class:`~mnemolog.api.key_rows.SqliteKeyRows`)."""

    #: How often a lookup reads the change marker: a round trip to the database, which a request would otherwise
    #: wait for on the server's event loop. A revocation made elsewhere holds here within this bound.
    recheck_seconds = 1.0

    def __init__(self, url: str):
        self.url = url
        self._engine = refusing_dropped(create_engine(url, pool_size=1, max_overflow=0))

    @classmethod
    def open(cls, url: str, take_in: Path | None = None, busy_timeout: float = BUSY_TIMEOUT.default) -> "PostgresKeyRows":
        """The table in the database of ``url``, made if missing, with the keys of the SQLite ``take_in`` (if that file
        exists; waiting ``busy_timeout`` seconds for another process's lock on it) in it."""
        rows = cls(url)
        try:
            with rows._engine.begin() as conn:
                conn.execute(text("SELECT pg_advisory_xact_lock(:lock)"), {"lock": _CREATE_LOCK})
                if not inspect(conn).has_table(API_KEYS.name):
                    try:
                        API_KEYS.create(conn)
                    except ProgrammingError as exc:  # a serving role that owns nothing
                        raise SetupError(
                            f"the log's database has no {API_KEYS.name} table (the API keys its servers share), and this role cannot"
                            f" create it: run mnemolog migrate as the tables' owner ({str(exc.orig).strip().splitlines()[0]})"
                        ) from None
            if take_in is not None and take_in.is_file():
                rows.take_in(take_in, busy_timeout)
        except BaseException:
            rows.close()
            raise
        return rows

    def take_in(self, path: Path, busy_timeout: float = BUSY_TIMEOUT.default) -> int:
        """Add the keys of the ``auth.db`` at ``path`` that the table lacks, and revoke those revoked there; the number of changes."""
        local = SqliteKeyRows(path, busy_timeout)
        try:
            found = local.every_row()
        finally:
            local.close()
        changed = 0
        with self._engine.begin() as conn:
            for row in found:
                values = dict(zip(COLUMNS, row))
                changed += len(conn.execute(pg_insert(API_KEYS).values(values).on_conflict_do_nothing().returning(API_KEYS.c.key_id)).all())
                if values["revoked_at"] is not None:
                    changed += self._revoke(conn, values["key_id"], values["revoked_at"])
        return changed

    def insert(self, row: tuple) -> None:
        with self._engine.begin() as conn:
            conn.execute(insert(API_KEYS).values(dict(zip(COLUMNS, row))))

    def rows(self) -> list[tuple]:
        with self._engine.connect() as conn:
            return [tuple(r) for r in conn.execute(select(*_LISTED).order_by(API_KEYS.c.created_at))]

    def find(self, digest: str) -> tuple | None:
        with self._engine.connect() as conn:
            row = conn.execute(select(*_LISTED).where(API_KEYS.c.digest == digest)).first()
        return None if row is None else tuple(row)

    def revoke(self, key_id: str, at: float) -> bool:
        with self._engine.begin() as conn:
            return self._revoke(conn, key_id, at) == 1

    @staticmethod
    def _revoke(conn, key_id: str, at: float) -> int:
        return conn.execute(update(API_KEYS).where(API_KEYS.c.key_id == key_id, API_KEYS.c.revoked_at.is_(None)).values(revoked_at=at)).rowcount

    def count_active(self) -> int:
        with self._engine.connect() as conn:
            return conn.execute(select(func.count()).select_from(API_KEYS).where(API_KEYS.c.revoked_at.is_(None))).scalar_one()

    def version(self) -> tuple[int, int]:
        """Keys made, keys revoked: both only grow, so any change anywhere changes the pair."""
        with self._engine.connect() as conn:
            made, revoked = conn.execute(select(func.count(), func.count(API_KEYS.c.revoked_at)).select_from(API_KEYS)).one()
        return made, revoked

    def close(self) -> None:
        self._engine.dispose()
