"""Everything in the log that depends on the database dialect lives here.

The rest of :mod:`eventstore` speaks SQLAlchemy Core only. SQLite needs
connection pragmas, ``BEGIN IMMEDIATE`` for the single writer, and triggers
that make the log append-only in the database itself.
"""

from __future__ import annotations

import fcntl
import hashlib
import select
import sqlite3
import struct
import threading
from itertools import repeat
from pathlib import Path
from typing import NamedTuple, Sequence

from sqlalchemy import ColumnElement, Connection, Engine, LargeBinary, cast, create_engine, event, func, literal_column, text
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.pool import NullPool, QueuePool

from .errors import name_database
from .schema import APPEND_ONLY_TABLES, event_spans, events, idempotency
from .sqlite_tx import WAL_PRAGMA, enter_wal

SYNCHRONOUS_LEVELS = ("OFF", "NORMAL", "FULL", "EXTRA")


def sqlite_url(path: Path | str) -> str:
    return f"sqlite:///{Path(path)}"


def is_sqlite(engine_or_conn: Engine | Connection) -> bool:
    return engine_or_conn.dialect.name == "sqlite"


def create_log_engines(url: str, *, synchronous: str = "FULL", busy_timeout: float = 30.0) -> tuple[Engine, Engine]:
    """Return ``(writer, reader)`` engines for the log.

    On SQLite the writer is one connection whose transactions start with
    ``BEGIN IMMEDIATE``, and readers are a pool of WAL connections that a
    writer never blocks.
    """
    level = synchronous.upper()
    if level not in SYNCHRONOUS_LEVELS:
        raise ValueError(f"synchronous must be one of {', '.join(SYNCHRONOUS_LEVELS)}, got {synchronous!r}")
    if not url.startswith("sqlite"):
        writer = refusing_dropped(create_engine(url, pool_size=1, max_overflow=0))
        reader = refusing_dropped(create_engine(url, pool_size=8))
        return writer, reader
    args = {"check_same_thread": False, "timeout": busy_timeout}
    writer = create_engine(url, connect_args=args, poolclass=QueuePool, pool_size=1, max_overflow=0)
    reader = create_engine(url, connect_args=args, poolclass=QueuePool, pool_size=8, max_overflow=8)
    _configure_sqlite(writer, synchronous=level, begin="BEGIN IMMEDIATE", busy_timeout=busy_timeout)
    _configure_sqlite(reader, synchronous=level, begin="BEGIN", busy_timeout=busy_timeout)
    return writer, reader


def connection_dropped(driver) -> bool:
    """Whether the server has closed an idle psycopg connection (a restart, a failover, ``pg_terminate_backend``).

    The server says so before it closes one (a FATAL message), so the socket
    of an idle connection, which has nothing to read otherwise, turns
    readable: one poll, no round trip. A connection cut without a word (a
    network drop) shows only when used.
    """
    if driver.closed or driver.broken:
        return True
    try:
        fd = driver.fileno()
    except Exception:  # psycopg: no socket any more
        return True
    if hasattr(select, "poll"):  # any descriptor, where select() takes only those below FD_SETSIZE (1,024)
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    try:
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return False  # cannot tell: used as it is


def refusing_dropped(engine: Engine) -> Engine:
    """``engine`` (PostgreSQL), its pool replacing a connection the server has closed before handing it out."""
    event.listen(engine, "checkout", _refuse_dropped)
    return engine


def _refuse_dropped(dbapi_connection, _record, _proxy) -> None:
    """Pool checkout on PostgreSQL: a connection the server closed is replaced before use, where its first
    statement would fail (SQLAlchemy then replaced it, and every pooled one, for the next)."""
    if connection_dropped(dbapi_connection):
        raise DisconnectionError("the server closed this connection")


def psycopg_conninfo(url: str) -> str:
    """A ``postgresql+psycopg://`` URL as a libpq connection string, for plain psycopg connections
    (values quoted and escaped by psycopg: a password may hold quotes and backslashes)."""
    from psycopg.conninfo import make_conninfo
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    parts = {"user": parsed.username, "password": parsed.password, "host": parsed.host, "port": parsed.port, "dbname": parsed.database}
    parts.update({k: v for k, v in parsed.query.items() if isinstance(v, str)})
    return make_conninfo(**{k: str(v) for k, v in parts.items() if v})


def create_migration_engine(url: str, busy_timeout: float = 30.0) -> Engine:
    if not url.startswith("sqlite"):
        return create_engine(url, poolclass=NullPool)
    engine = create_engine(url, connect_args={"timeout": busy_timeout}, poolclass=NullPool)
    _configure_sqlite(engine, synchronous="FULL", begin="BEGIN IMMEDIATE", busy_timeout=busy_timeout)
    return engine


WAL_AUTOCHECKPOINT_PAGES = 8192  # 32 MiB of 4 KiB pages between checkpoints


def sqlite_pragmas(synchronous: str, busy_timeout: float = 30.0) -> list[str]:
    """The pragmas every connection to the log runs, in order.

    WAL, so that readers never wait for the writer; ``synchronous`` as
    configured; and fewer, larger checkpoints than SQLite's default of 1,000
    pages: the index pages an append touches are written to the WAL on every
    commit, and a checkpoint copies each page once however often it changed.
    ``journal_size_limit`` trims the WAL file back after a checkpoint.
    """
    return [
        WAL_PRAGMA,
        f"PRAGMA synchronous={synchronous}",
        f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT_PAGES}",
        f"PRAGMA journal_size_limit={WAL_AUTOCHECKPOINT_PAGES * 4096 * 2}",
        f"PRAGMA busy_timeout={round(busy_timeout * 1000)}",
        "PRAGMA foreign_keys=ON",
    ]


def apply_pragmas(conn: sqlite3.Connection | sqlite3.Cursor, synchronous: str, busy_timeout: float = 30.0) -> None:
    """Run :func:`sqlite_pragmas` on a new connection, the journal mode through :func:`enter_wal`."""
    for pragma in sqlite_pragmas(synchronous, busy_timeout):
        if pragma == WAL_PRAGMA:
            enter_wal(conn, busy_timeout)
        else:
            conn.execute(pragma)


def _configure_sqlite(engine: Engine, *, synchronous: str, begin: str, busy_timeout: float) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):  # pragma: no cover - exercised by every test
        # Take transaction control away from the sqlite3 module, so that the
        # "begin" hook below decides how a transaction starts.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        apply_pragmas(cursor, synchronous, busy_timeout)
        cursor.close()

    @event.listens_for(engine, "handle_error")
    def _on_error(context):  # every error of the log's database names its file (see tools/cli.py)
        if engine.url.database:
            name_database(context.original_exception, engine.url.database)

    @event.listens_for(engine, "begin")
    def _on_begin(conn):  # pragma: no cover - exercised by every test
        # Straight to the driver: this runs once per transaction, and the
        # full statement pipeline costs several times the BEGIN itself.
        try:
            conn.connection.driver_connection.execute(begin)
        except sqlite3.Error as exc:  # outside SQLAlchemy's wrapping, so _on_error never sees it: named here
            if engine.url.database:
                name_database(exc, engine.url.database)
            raise


#: The transaction-scoped advisory lock every append on PostgreSQL takes (one per database).
APPEND_LOCK_KEY = 0x6D6E656D6F6C6F67  # "mnemolog"
#: The statement that takes it, in psycopg's parameter style (the recorder sends it straight to the driver).
PG_LOCK_SQL = "SELECT pg_advisory_xact_lock(%s)"


def lock_log(conn: Connection) -> None:
    """Serialise writers for the rest of the transaction.

    SQLite already holds the write lock (``BEGIN IMMEDIATE``). On PostgreSQL
    every append, from any process or machine, first takes one
    transaction-scoped advisory lock, then allocates positions from
    ``max(position) + 1``: the next writer waits until this one commits or
    rolls back, so positions are gap-free and commit in position order (what
    ``LOCK TABLE events IN EXCLUSIVE MODE`` would give, without the UPDATE
    privilege that lock needs and the serving role must not hold). Readers
    never wait for it.
    """
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(PG_LOCK_SQL, (APPEND_LOCK_KEY,))


#: The PostgreSQL channel every append notifies with its last position, on commit.
NOTIFY_CHANNEL = "mnemolog_log"
#: The statement that sends it (channel, last position), in psycopg's parameter style.
PG_NOTIFY_SQL = "SELECT pg_notify(%s, %s)"


def announce_append(conn: Connection, last_position: int) -> None:
    """Tell listeners in every process that positions up to ``last_position`` are committed.

    PostgreSQL delivers the notification only when the transaction commits,
    and a rolled-back append sends nothing. SQLite has no such channel: its
    subscribers in other processes poll.
    """
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(PG_NOTIFY_SQL, (NOTIFY_CHANNEL, str(last_position)))


class PgAppendStatements:
    """The statements of an append on PostgreSQL, in psycopg's parameter style.

    :meth:`head` (sent after the lock, as a statement of its own so that it
    reads a snapshot taken once the lock is held) returns one row: the tip's
    position, hash and recorded_at (NULLs on an empty log), the current
    version of each stream in the order given (NULL for a new stream), and
    the idempotency key's fingerprint and positions (NULLs when unknown).
    :meth:`write` inserts a run of events, their spans and the key and sends
    the notification, in one statement.

    Rows go column by column: one binary array parameter per column, which
    the statement turns back into rows with ``unnest`` (see
    :func:`_unnest_insert`). So the statement's text and parameter count are
    the same whatever the number of rows: psycopg converts its text once
    (it caches only statements of at most 50 parameters) and prepares it
    once, where a ``VALUES`` list of one placeholder per value was parsed
    again in Python on every append. One event alone goes as a ``VALUES``
    row of scalars, which psycopg dumps in C: for one row that costs less
    than an array per column. Each array is cast to its column's base type
    (``text``, ``bigint``), never to a bounded ``varchar(n)``, whose
    explicit cast would truncate: the insert's own assignment cast refuses a
    value that does not fit. The connection that sends them must have
    :func:`register_pg_arrays` done.
    """

    #: Rows in one INSERT statement: an append of more sends the rest in more statements, each a bounded message.
    ROWS_PER_STATEMENT = 1000

    def __init__(self, event_columns: Sequence[str], span_columns: Sequence[str]) -> None:
        self._width = len(event_columns)
        self._event_arrays = _array_types(events, event_columns)
        self._span_arrays = _array_types(event_spans, span_columns)
        #: Events alone, and spans alone: the rows of an append beyond its first :data:`ROWS_PER_STATEMENT`.
        self.insert_events = _unnest_insert(events, event_columns, self._event_arrays)
        self.insert_spans = _unnest_insert(event_spans, span_columns, self._span_arrays)
        e, k = events.c, idempotency.c
        self._head = (
            f"SELECT tip.{e.position.name}, tip.{e.hash.name}, tip.{e.recorded_at.name}, "
            f"ARRAY(SELECT (SELECT max({e.stream_version.name}) FROM {events.name} WHERE {e.stream_id.name} = s.id) "
            "FROM unnest(%b::text[]) WITH ORDINALITY AS s(id, n) ORDER BY s.n), "
            f"idem.{k.fingerprint.name}, idem.{k.first_position.name}, idem.{k.last_position.name} "
            "FROM (SELECT 1) AS one "
            f"LEFT JOIN LATERAL (SELECT {e.position.name}, {e.hash.name}, {e.recorded_at.name} FROM {events.name} "
            f"ORDER BY {e.position.name} DESC LIMIT 1) AS tip ON true "
            f"LEFT JOIN (SELECT * FROM {idempotency.name} WHERE {k.key.name} = %s::text) AS idem ON true"
        )
        key = (
            f"INSERT INTO {idempotency.name} ({k.key.name}, {k.fingerprint.name}, {k.first_position.name}, "
            f"{k.last_position.name}) VALUES (%s, %s, %s, %s)"
        )
        arrays = f"e AS ({self.insert_events}), s AS ({self.insert_spans})"
        one = f"e AS ({_values_insert(events, event_columns)}), s AS ({_values_insert(event_spans, span_columns)})"
        self._writes = {
            (many, keyed): f"WITH {rows}{f', k AS ({key})' if keyed else ''} {PG_NOTIFY_SQL}"
            for many, rows in ((True, arrays), (False, one))
            for keyed in (False, True)
        }

    def head(self, streams: Sequence[str], key: str | None) -> tuple[str, tuple]:
        """The head query of an append to ``streams`` (in that order) under ``key``, and its parameters."""
        return self._head, (PgTexts(streams), key)

    def write(self, values: list, spans: Sequence[tuple], key: tuple | None, notify: tuple) -> tuple[str, list]:
        """The statement that inserts rows (their values in one flat list, row after row) and ``spans``,
        the idempotency record ``key`` (key, fingerprint, first, last) when given, and sends ``notify``
        (channel, position); and its parameters."""
        many = len(values) > self._width
        params = self.event_columns(values) + self.span_columns(spans) if many else [*values, *spans[0]]
        if key is not None:
            params += key
        params += notify
        return self._writes[many, key is not None], params

    def event_columns(self, values: list) -> list[list]:
        """The parameters of :attr:`insert_events` from rows given as their values in one flat list, row after row."""
        width = self._width
        return [array(values[i::width]) for i, array in enumerate(self._event_arrays)]

    def span_columns(self, spans: Sequence[tuple]) -> list[list]:
        """The parameters of :attr:`insert_spans` from spans given as tuples."""
        return [array(column) for array, column in zip(self._span_arrays, zip(*spans))]


class PgTexts(list):
    """Strings (or None), sent to PostgreSQL as one binary ``text[]`` parameter (see :func:`register_pg_arrays`)."""

    __slots__ = ()


class PgBigints(list):
    """Integers, sent to PostgreSQL as one binary ``bigint[]`` parameter (see :func:`register_pg_arrays`)."""

    __slots__ = ()


_ARRAY_SQL = {PgTexts: "text[]", PgBigints: "bigint[]"}


def _array_types(table, columns: Sequence[str]) -> list[type]:
    """The array each column's values travel in: text for strings, bigint for integers."""
    return [PgTexts if table.c[name].type.python_type is str else PgBigints for name in columns]


def _values_insert(table, columns: Sequence[str]) -> str:
    """``INSERT INTO table (columns) VALUES (…)``: one row of scalar parameters."""
    return f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))})"


def _unnest_insert(table, columns: Sequence[str], arrays: Sequence[type]) -> str:
    """``INSERT INTO table (columns) SELECT unnest(…), …``: one binary array parameter per column.

    In the select list, the ``unnest`` calls step through their arrays
    together, row by row; ``FROM unnest(…)`` would first copy every array
    into a tuplestore of its own.
    """
    values = ", ".join(f"unnest(%b::{_ARRAY_SQL[array]})" for array in arrays)
    return f"INSERT INTO {table.name} ({', '.join(columns)}) SELECT {values}"


_ARRAY_HEAD = struct.Struct(">iiIii")  # dimensions, has nulls, element type; then length and lower bound of the one dimension
_NULL_LENGTH = (-1).to_bytes(4, "big", signed=True)
_TEXT_OID, _TEXT_ARRAY_OID, _BIGINT_OID, _BIGINT_ARRAY_OID = 25, 1009, 20, 1016


def pg_text_array(items: Sequence[str | None], encoding: str = "utf-8") -> bytes:
    """A one-dimensional ``text[]`` in PostgreSQL's binary format: each item its length, then its bytes.

    psycopg's own list dumper inspects the list and dumps its items one
    Python call each; here, unless NULLs and strings mix, every step is one
    C call over the whole list.
    """
    n = len(items)
    nulls = items.count(None)
    head = _ARRAY_HEAD.pack(1, nulls > 0, _TEXT_OID, n, 1)
    if nulls == n:
        return head + _NULL_LENGTH * n
    parts: list = [head] * (2 * n + 1)
    if nulls:
        for i, item in enumerate(items):
            if item is None:
                parts[2 * i + 1], parts[2 * i + 2] = _NULL_LENGTH, b""
            else:
                data = item.encode(encoding)
                parts[2 * i + 1], parts[2 * i + 2] = len(data).to_bytes(4, "big"), data
    else:
        encoded = list(map(str.encode, items, repeat(encoding)))
        parts[1::2] = map(int.to_bytes, map(len, encoded), repeat(4), repeat("big"))
        parts[2::2] = encoded
    return b"".join(parts)


def pg_bigint_array(items: Sequence[int]) -> bytes:
    """A one-dimensional ``bigint[]`` (no NULLs) in PostgreSQL's binary format."""
    n = len(items)
    fields = [8] * (2 * n)  # each item: its length, then its value
    fields[1::2] = items
    return _ARRAY_HEAD.pack(1, 0, _BIGINT_OID, n, 1) + struct.pack(f">{'iq' * n}", *fields)


def register_pg_arrays(driver) -> None:
    """Make a psycopg connection send :class:`PgTexts` and :class:`PgBigints` as binary arrays."""
    from psycopg.adapt import Dumper
    from psycopg.pq import Format

    class TextsDumper(Dumper):
        format = Format.BINARY
        oid = _TEXT_ARRAY_OID

        def __init__(self, cls, context=None):
            super().__init__(cls, context)
            self._encoding = self.connection.info.encoding if self.connection is not None else "utf-8"

        def dump(self, obj):
            return pg_text_array(obj, self._encoding)

    class BigintsDumper(Dumper):
        format = Format.BINARY
        oid = _BIGINT_ARRAY_OID

        def dump(self, obj):
            return pg_bigint_array(obj)

    driver.adapters.register_dumper(PgTexts, TextsDumper)
    driver.adapters.register_dumper(PgBigints, BigintsDumper)


class CommitListener:
    """A thread that LISTENs on :data:`NOTIFY_CHANNEL` and calls ``on_commit(position)``.

    It owns one connection outside the pools; when the connection breaks it
    reconnects after a pause (subscribers keep polling meanwhile).
    """

    def __init__(self, engine: Engine, on_commit) -> None:
        self._engine = engine
        self._on_commit = on_commit
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mnemolog-log-listener", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                raw = self._engine.raw_connection()
                conn = raw.driver_connection
                raw.detach()
                try:
                    conn.rollback()
                    conn.autocommit = True
                    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=0.5):
                            self._on_commit(int(note.payload))
                finally:
                    conn.close()
            except Exception:  # a lost connection: retry, polling covers the gap
                self._stop.wait(1.0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class Lease:
    """One holder at a time, across every process and machine on the log.

    On PostgreSQL a session advisory lock on a connection of its own, held
    until :meth:`release` or until that connection drops (a crashed holder's
    lease frees itself); :meth:`held` takes it when free and tells whether
    this process holds it now. On SQLite (the log lives on one machine, but a
    server and ``mnemolog organize`` may share it) an exclusive ``flock`` on
    ``events.db.<name>.lease`` beside the log, on a file description of its
    own: the system frees it when its holder exits, even killed.
    """

    def __init__(self, engine: Engine, name: str) -> None:
        self._engine = engine
        self.name = name
        self._key = int.from_bytes(hashlib.sha256(f"mnemolog:{name}".encode()).digest()[:8], "big", signed=True)
        self._conn = None
        self._file = None  # SQLite: the open lease file whose flock this holds
        self._lock = threading.Lock()

    def held(self) -> bool:
        if self._engine.dialect.name != "postgresql":
            return self._held_file()
        with self._lock:
            try:
                if self._conn is not None:
                    self._conn.execute("SELECT 1")  # still connected, so still held
                    return True
                raw = self._engine.raw_connection()
                conn = raw.driver_connection
                raw.detach()
                conn.rollback()
                conn.autocommit = True
                if conn.execute("SELECT pg_try_advisory_lock(%s)", (self._key,)).fetchone()[0]:
                    self._conn = conn
                    return True
                conn.close()
                return False
            except Exception:  # the connection dropped: the lease went with it
                self._close()
                return False

    def _held_file(self) -> bool:
        database = self._engine.url.database
        if not database or database == ":memory:" or database.startswith("file:"):
            return True  # a log no other process can open
        with self._lock:
            if self._file is not None:
                return True
            handle = open(f"{database}.{self.name}.lease", "a+b")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                return False
            self._file = handle
            return True

    def _close(self) -> None:
        if self._file is not None:
            self._file.close()  # closing the last descriptor of its description frees the flock
            self._file = None
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:
                pass
            self._conn = None

    def release(self) -> None:
        """Free the lease now: unlocked before its connection closes, since the
        server frees a closed session's locks only once that backend has exited."""
        with self._lock:
            if self._conn is not None:
                try:
                    self._conn.execute("SELECT pg_advisory_unlock(%s)", (self._key,))
                except Exception:  # the connection dropped: the lease went with it
                    pass
            self._close()


class AppendOnlyTrigger(NamedTuple):
    """One trigger that keeps a log table append-only, with the SQL that makes and removes it."""

    name: str
    table: str
    create: str
    drop: str


def append_only_triggers(dialect_name: str, tables: Sequence[str] = APPEND_ONLY_TABLES) -> list[AppendOnlyTrigger]:
    """The triggers that make ``tables`` append-only, in creation order."""
    triggers: list[AppendOnlyTrigger] = []
    for table in tables:
        if dialect_name == "sqlite":
            for op in ("UPDATE", "DELETE"):
                name = f"{table}_no_{op.lower()}"
                create = (
                    f"CREATE TRIGGER {name} BEFORE {op} ON {table} "
                    f"BEGIN SELECT RAISE(ABORT, 'mnemolog: {table} is append-only; {op} is refused'); END"
                )
                triggers.append(AppendOnlyTrigger(name, table, create, f"DROP TRIGGER IF EXISTS {name}"))
        elif dialect_name == "postgresql":
            name = f"{table}_append_only"
            create = (
                f"CREATE TRIGGER {name} BEFORE UPDATE OR DELETE OR TRUNCATE ON {table} "
                "FOR EACH STATEMENT EXECUTE FUNCTION mnemolog_append_only()"
            )
            triggers.append(AppendOnlyTrigger(name, table, create, f"DROP TRIGGER IF EXISTS {name} ON {table}"))
    return triggers


_PG_FUNCTION = (
    "CREATE OR REPLACE FUNCTION mnemolog_append_only() RETURNS trigger AS $$ "
    "BEGIN RAISE EXCEPTION 'mnemolog: % is append-only; % is refused', TG_TABLE_NAME, TG_OP; END; "
    "$$ LANGUAGE plpgsql"
)


def append_only_ddl(dialect_name: str, tables: Sequence[str] = APPEND_ONLY_TABLES) -> tuple[list[str], list[str]]:
    """``(create, drop)`` statements that make the log's tables append-only.

    Migrations name the tables they create; the trigger function that
    PostgreSQL shares between tables belongs to the ``events`` table's.
    """
    triggers = append_only_triggers(dialect_name, tables)
    create = [t.create for t in triggers]
    drop = [t.drop for t in triggers]
    if dialect_name == "postgresql":
        create.insert(0, _PG_FUNCTION)
        if "events" in tables:
            drop.append("DROP FUNCTION IF EXISTS mnemolog_append_only()")
    return create, drop


def guard_setup_ddl(dialect_name: str) -> list[str]:
    """Statements a restored trigger needs first (PostgreSQL's shared trigger function)."""
    return [_PG_FUNCTION] if dialect_name == "postgresql" else []


class InstalledTrigger(NamedTuple):
    name: str
    table: str
    sql: str | None  # as the database keeps it; None where it cannot be compared with the DDL


def installed_triggers(conn: Connection) -> dict[str, InstalledTrigger]:
    """The triggers the database holds now, by name.

    SQLite keeps each trigger's statement verbatim, so it can be compared
    with the DDL; PostgreSQL rewrites it, so there only presence and table
    are known.
    """
    if conn.dialect.name == "sqlite":
        rows = conn.execute(text("SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'trigger'"))
        return {name: InstalledTrigger(name, table, sql) for name, table, sql in rows}
    if conn.dialect.name == "postgresql":
        rows = conn.execute(
            text(
                "SELECT t.tgname, c.relname FROM pg_trigger AS t JOIN pg_class AS c ON c.oid = t.tgrelid "
                "WHERE NOT t.tgisinternal AND t.tgenabled <> 'D'"
            )
        )
        return {name: InstalledTrigger(name, table, None) for name, table in rows}
    return {}


#: What no role serving the log may do to its tables on PostgreSQL: the
#: serving role may INSERT and SELECT only. Revoked by migration 0003 and by
#: ``mnemolog migrate``; ``verify`` reports any of them held.
REFUSED_PRIVILEGES = ("UPDATE", "DELETE", "TRUNCATE")


def revoke_ddl(dialect_name: str, tables: Sequence[str] = APPEND_ONLY_TABLES, roles: Sequence[str] = ()) -> list[str]:
    """Statements that take the refused privileges from the connected role, from PUBLIC and from ``roles`` (quoted names)."""
    if dialect_name != "postgresql":
        return []
    return [f"REVOKE {', '.join(REFUSED_PRIVILEGES)} ON {', '.join(tables)} FROM {', '.join(('PUBLIC', 'CURRENT_USER', *roles))}"]


#: Each refused privilege granted on the tables named, to a role or to PUBLIC (grantee 0), as the tables' ACLs say.
_GRANTED = text(
    "SELECT c.relname, a.privilege_type, CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee) END "
    "FROM pg_class AS c CROSS JOIN LATERAL aclexplode(c.relacl) AS a "
    "WHERE c.oid IN (SELECT to_regclass(t) FROM unnest(CAST(:tables AS text[])) AS t) "
    "AND a.privilege_type = ANY(CAST(:privileges AS text[]))"
)


def held_privileges(conn: Connection, tables: Sequence[str] = APPEND_ONLY_TABLES) -> list[tuple[str, str, str]]:
    """``(table, privilege, role)`` of each refused privilege held (PostgreSQL only): by the connected role, or
    granted to any other role or to PUBLIC (a serving role that owns nothing, seen by the owner that migrates).

    A superuser holds every privilege whatever was revoked, so a log served
    by one is reported as such.
    """
    if conn.dialect.name != "postgresql":
        return []
    me = conn.execute(text("SELECT current_user")).scalar()
    held = {
        (table, privilege, me)
        for table in tables
        for privilege in REFUSED_PRIVILEGES
        if conn.execute(text("SELECT has_table_privilege(current_user, :t, :p)"), {"t": table, "p": privilege}).scalar()
    }
    held.update(tuple(row) for row in conn.execute(_GRANTED, {"tables": list(tables), "privileges": list(REFUSED_PRIVILEGES)}))
    return sorted(held)


# The envelope of one event as a JSON array of RecordedEvent's fields in
# their order (RecordedEvent is array_like: no keys for SQLite to write or
# msgspec to match): the stored payload and metadata are JSON already and go
# in as they are; stream ids and tenants, which may hold any character, are
# quoted. Event ids (UUIDs), type names (identifiers) and recorded_at
# (RFC 3339) are checked on every way in, and never need escaping.
_ENVELOPE_FORMAT = '[%d,"%s",%s,%d,"%s",%d,%s,%s,%s,"%s"]'


def envelope_json(dialect_name: str) -> ColumnElement | None:
    """An expression that renders a row of ``events`` as JSON, or None.

    Readers then decode a whole page with one msgspec call instead of
    building a Python tuple per row and decoding its columns one by one.
    """
    if dialect_name != "sqlite":
        return None
    c = events.c
    return func.printf(
        literal_column("'" + _ENVELOPE_FORMAT.replace("'", "''") + "'"),
        c.position,
        c.event_id,
        func.json_quote(c.stream_id),
        c.stream_version,
        c.type,
        c.schema_version,
        func.json_quote(c.tenant),
        c.payload,
        c.metadata,
        c.recorded_at,
    )


def concat_rows(column: ColumnElement) -> ColumnElement:
    """A page of :func:`envelope_json` rows joined by commas, in UTF-8 bytes (NULL when empty):
    the elements of a JSON array, whose brackets the reader adds (:meth:`LogReads.select_event_page`).

    Bytes, not text: msgspec reads UTF-8 bytes as they are, where a text
    value would first be decoded into a Python string (widened, if it holds
    any non-ASCII character) and encoded back for msgspec. No brackets:
    SQLite would copy the whole page twice to add them, Python once.
    """
    return cast(func.group_concat(column, literal_column("','")), LargeBinary)
