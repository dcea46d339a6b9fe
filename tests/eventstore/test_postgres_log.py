"""What the log promises on PostgreSQL beyond the contract suite.

Append-only by privileges and triggers (checked by ``verify``, restored by
``migrate``), gap-free positions in commit order under writers in several
processes, export and import between backends, and subscriptions woken by
LISTEN/NOTIFY; an append's statements are prepared once whatever its size.
"""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys
import textwrap
import tempfile
import threading
import time
import uuid

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import event

from mnemolog.eventstore import ANY, DomainEvent, EventStore, Metadata, StreamAppend
from mnemolog.eventstore.errors import ConcurrencyError
from mnemolog.eventstore.events import encoder
from mnemolog.eventstore.recorder import PendingEvent, PendingWrite
from mnemolog.eventstore.dialects import PgBigints, PgTexts, create_migration_engine, psycopg_conninfo, register_pg_arrays
from mnemolog.eventstore.exchange import export, import_
from mnemolog.eventstore.guards import restore_guards
from mnemolog.eventstore.schema import APPEND_ONLY_TABLES
from tests.pg import CLUSTER, fresh_database_url, serving_role


class PgNoted(DomainEvent, frozen=True):
    text: str


@pytest.fixture
def store():
    store = EventStore.open(fresh_database_url())
    store.append("s", [PgNoted(text="one"), PgNoted(text="two")], idempotency_key="key-1")
    try:
        yield store
    finally:
        store.close()


def database_of(store: EventStore) -> str:
    return store.url.split("/")[3].split("?")[0]


def connect(store: EventStore, user: str) -> psycopg.Connection:
    return psycopg.connect(host=CLUSTER.dir, user=user, dbname=database_of(store), autocommit=True)


def restore(store: EventStore):
    engine = create_migration_engine(store.url)
    try:
        return restore_guards(engine)
    finally:
        engine.dispose()


@pytest.mark.parametrize("table", APPEND_ONLY_TABLES)
@pytest.mark.parametrize("statement", ["UPDATE {t} SET tenant = tenant", "DELETE FROM {t}", "TRUNCATE {t}"])
def test_the_serving_role_may_not_rewrite_the_log(store, table, statement):
    sql = statement.format(t=table)
    if table == "idempotency_keys" and "tenant" in sql:
        sql = "UPDATE idempotency_keys SET fingerprint = fingerprint"
    with connect(store, "mnemolog") as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(sql)
    assert store.last_position() == 2 and store.verify().ok


@pytest.mark.parametrize("statement", ["UPDATE events SET tenant = 'x'", "DELETE FROM events", "TRUNCATE events"])
def test_triggers_refuse_even_a_superuser(store, statement):
    with connect(store, "postgres") as conn:
        with pytest.raises(psycopg.errors.RaiseException, match="append-only"):
            conn.execute(statement)
    assert store.last_position() == 2 and store.verify().ok


def test_verify_reports_a_dropped_trigger_and_a_granted_privilege_and_migrate_restores_them(store):
    assert store.check_guards() == []
    with connect(store, "postgres") as conn:
        conn.execute("DROP TRIGGER events_append_only ON events")
        conn.execute("GRANT DELETE ON event_spans TO mnemolog")
    result = store.verify()
    assert not result.ok
    found = {(p.table, p.problem, p.privilege) for p in result.guards}
    assert found == {("events", "missing", ""), ("event_spans", "granted", "DELETE")}
    assert "role mnemolog holds DELETE on event_spans" in result.reason
    assert {p.problem for p in restore(store)} == {"missing", "granted"}
    assert store.check_guards() == [] and store.verify().ok
    with connect(store, "mnemolog") as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DELETE FROM event_spans")


def test_a_privilege_granted_to_another_role_is_named_by_verify_and_revoked_by_migrate(store):
    """A serving role that owns nothing, granted UPDATE: verify run by that role named it and said "migrate restores it",
    but migrate, run by the owner, checked the owner's own privileges only, found none and revoked nothing."""
    serving = f"serving_{uuid.uuid4().hex[:8]}"
    with connect(store, "postgres") as conn:
        conn.execute(f'CREATE ROLE "{serving}" LOGIN')
        conn.execute(f'GRANT SELECT, INSERT, UPDATE ON events TO "{serving}"')
        conn.execute("GRANT TRUNCATE ON idempotency_keys TO PUBLIC")
    result = store.verify()  # the owner's view
    assert not result.ok
    granted = {("events", "UPDATE", serving), ("idempotency_keys", "TRUNCATE", "PUBLIC"), ("idempotency_keys", "TRUNCATE", "mnemolog")}  # the owner, as one of PUBLIC
    assert {(p.table, p.privilege, p.role) for p in result.guards} == granted
    assert f"role {serving} holds UPDATE on events" in result.reason
    assert {p.role for p in restore(store)} == {serving, "PUBLIC", "mnemolog"}
    assert store.check_guards() == [] and store.verify().ok
    with connect(store, "postgres") as conn:
        held = conn.execute(
            "SELECT has_table_privilege(%s, 'events', 'UPDATE'), has_table_privilege(%s, 'events', 'INSERT'),"
            " has_table_privilege('public', 'idempotency_keys', 'TRUNCATE')", (serving, serving)
        ).fetchone()
        assert held == (False, True, False)  # what it may do, it still may


def test_a_log_made_by_the_first_revision_upgrades_and_keeps_its_chain():
    """Rows stored under revision 0001 (as an old version wrote them), then opened by this one: every migration runs on them."""
    from mnemolog.eventstore import migrate
    from mnemolog.eventstore.chain import StoredRow
    from tests.eventstore.test_upcast import load_fixture_rows

    url = fresh_database_url()
    engine = create_migration_engine(url)
    try:
        migrate.upgrade(engine, "0001")
        with engine.begin() as conn:
            columns = ", ".join(StoredRow._fields)
            conn.exec_driver_sql(f"INSERT INTO events ({columns}) VALUES ({', '.join(['%s'] * 13)})", [tuple(r) for r in load_fixture_rows()])
    finally:
        engine.dispose()
    with EventStore.open(url) as store:
        assert migrate.current_revision(store.recorder.reader) == migrate.head_revision()
        result = store.verify()
        assert result.ok and result.checked == 4 and store.check_guards() == []
        assert store.recorder.spans_overlapping(1, 4) == [(1, 4, "default", None)]  # backfilled by 0002
        assert [r.position for r in store.read_all(tenant="default")] == [1, 2, 3, 4]
        stream = "document-" + "t" * 255 + "/" + "d" * 255  # past the 255 characters 0001 made room for (0004)
        assert store.append(stream, [PgNoted(text="new")], tenant="t" * 255).positions == range(5, 6)
        assert store.verify().ok and [r.event.text for r in store.read_stream(stream)] == ["new"]
    with psycopg.connect(psycopg_conninfo(url), autocommit=True) as conn:
        for statement in ("UPDATE events SET tenant = tenant", "DELETE FROM event_spans", "TRUNCATE idempotency_keys"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)


def test_connections_the_server_closed_are_replaced_before_an_append_or_a_read_uses_them(store):
    """A restart, a failover or ``pg_terminate_backend`` closes every idle connection: the next append and read still succeed."""
    other = EventStore.open(store.url, migrate_schema=False)
    try:
        assert len(other.read_all()) == 2
        for round_ in range(2):
            CLUSTER.admin(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{database_of(store)}' AND pid <> pg_backend_pid()")
            for _ in range(50):  # the server has closed them
                with psycopg.connect(host=CLUSTER.dir, user="postgres", dbname="postgres") as admin:
                    if admin.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (database_of(store),)).fetchone()[0] == 0:
                        break
            assert store.append("s", [PgNoted(text=f"after {round_}")], expected_version=2 + round_).positions == range(3 + round_, 4 + round_)
            assert [r.event.text for r in store.read_all()][-1] == f"after {round_}"
            assert other.stream_version("s") == 3 + round_ and len(other.read_all()) == 3 + round_
        assert store.verify().ok and store.last_position() == 4
    finally:
        other.close()


def test_a_live_connection_is_not_taken_for_a_dropped_one_whatever_its_descriptor(store):
    """A server with many open sockets gives its connections descriptors past select()'s 1,024: they are still checked."""
    import os
    import resource

    from mnemolog.eventstore.dialects import connection_dropped

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"the descriptor limit ({hard}) stays below 1,200")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        with psycopg.connect(psycopg_conninfo(store.url), autocommit=True) as conn:
            assert conn.fileno() > 1024
            assert not connection_dropped(conn)
            with EventStore.open(store.url, migrate_schema=False) as late:  # every connection it makes lies past 1,024
                assert late.append("s", [PgNoted(text="three")]).positions == range(3, 4)
                assert [r.event.text for r in late.read_all()] == ["one", "two", "three"]
            CLUSTER.admin(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = {conn.info.backend_pid}")
            for _ in range(100):
                if connection_dropped(conn):
                    break
                time.sleep(0.02)
            assert connection_dropped(conn)
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_serving_role_that_does_not_own_the_log_can_append_and_read_but_never_undo_the_guards():
    """The owner of the tables may drop them, disable their triggers or grant itself UPDATE again (``verify`` tells the
    last two); a serving role granted INSERT and SELECT by the owner, as the README sets it up, may do none of these."""
    url = fresh_database_url()  # owned by the role that migrates it
    EventStore.open(url).close()
    role = serving_role(url)
    database, serving = role.database, role.name
    with EventStore.open(role.url) as store:
        store.append("s", [PgNoted(text="one")], idempotency_key="k")
        assert store.append("s", [PgNoted(text="one")], idempotency_key="k").replayed
        assert [r.event.text for r in store.read_all(tenant="default")] == ["one"]
        assert store.verify().ok and store.check_guards() == []
    with psycopg.connect(host=CLUSTER.dir, user=serving, dbname=database, autocommit=True) as conn:
        conn.execute("GRANT UPDATE, DELETE ON events TO CURRENT_USER")  # without the grant option: a warning, and nothing granted
        for statement in (
            "ALTER TABLE events DISABLE TRIGGER events_append_only",
            "DROP TABLE events CASCADE",
            "UPDATE events SET tenant = tenant",
            "TRUNCATE event_spans",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)


WRITER = textwrap.dedent(
    """
    import random, sys
    from mnemolog.eventstore import DomainEvent, EventStore, StreamAppend

    class PgNoted(DomainEvent, frozen=True):
        text: str

    url, me, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(me)
    with EventStore.open(url, migrate_schema=False) as store:
        for i in range(rounds):
            size = rng.choice([1, 1, 3, 40])
            events = [PgNoted(text=f"{me}-{i}-{j}") for j in range(size)]
            if i % 5 == 4:  # two streams, one shared with every writer, under an idempotency key; then its retry
                writes = [StreamAppend(f"writer-{me}", events), StreamAppend("shared", [PgNoted(text=f"{me}-{i}")])]
                first = store.append_batch(writes, tenant=f"t{me % 2}", idempotency_key=f"{me}-{i}")
                again = store.append_batch(writes, tenant=f"t{me % 2}", idempotency_key=f"{me}-{i}")
                assert again.replayed and again.positions == first.positions, (first, again)
            else:
                store.append(f"writer-{me}", events, tenant=f"t{me % 2}")
    print("done")
    """
)


def test_racing_writer_processes_get_gap_free_positions_in_commit_order():
    url = fresh_database_url()
    EventStore.open(url).close()  # migrated once, before the race
    seen: list[tuple[int, int]] = []
    stop = threading.Event()
    database = url.split("/")[3].split("?")[0]

    def watch() -> None:
        # Every snapshot of the log holds positions 1..max exactly: a later
        # position never becomes visible before an earlier one.
        with psycopg.connect(host=CLUSTER.dir, user="mnemolog", dbname=database, autocommit=True) as conn:
            while not stop.is_set():
                seen.append(conn.execute("SELECT count(*), coalesce(max(position), 0) FROM events").fetchone())

    watcher = threading.Thread(target=watch)
    watcher.start()
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, url, str(n), "25"], stdout=subprocess.PIPE, text=True) for n in range(4)]
    try:
        outputs = [w.communicate(timeout=300)[0] for w in writers]
    finally:
        stop.set()
        watcher.join()
    assert [w.returncode for w in writers] == [0, 0, 0, 0] and all("done" in o for o in outputs)
    assert len(seen) > 1 and all(count == top for count, top in seen)
    with EventStore.open(url) as store:
        recorded = store.read_all()
        assert [r.position for r in recorded] == list(range(1, len(recorded) + 1))
        assert [r.recorded_at for r in recorded] == sorted(r.recorded_at for r in recorded)
        for stream_id in [f"writer-{n}" for n in range(4)] + ["shared"]:
            versions = [r.stream_version for r in recorded if r.stream_id == stream_id]
            assert versions == list(range(1, len(versions) + 1))
        assert len([r for r in recorded if r.stream_id == "shared"]) == 4 * 5  # each retry replayed, never appended
        result = store.verify()
        assert result.ok and result.checked == len(recorded)


class RoundTrips:
    """Counts the client's round trips on every connection a store's writer opens, from libpq's protocol trace.

    A round trip is a message after which the client waits for the server's
    answers: a simple ``Query``, or ``Sync`` or ``Flush`` in the extended
    protocol (psycopg's pipeline mode sends many statements, then one of
    those; a ``Flush`` right after a ``Sync`` asks for the same answers).
    """

    WAITS = ("Query", "Sync", "Flush")

    def __init__(self, store: EventStore) -> None:
        self._file = tempfile.TemporaryFile("w+")
        self._traced: list = []
        event.listen(store.recorder.writer, "connect", self._trace)

    def _trace(self, dbapi_connection, _record) -> None:
        dbapi_connection.pgconn.trace(self._file.fileno())
        dbapi_connection.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)

    def sent(self) -> list[str]:
        """The names of the messages the client sent since the last call (``Parse``, ``Bind``, ``Sync``, …)."""
        self._file.flush()
        self._file.seek(0)
        lines = self._file.read().splitlines()
        self._file.seek(0)
        self._file.truncate()
        return [line.split("\t")[2].strip() for line in lines if line.startswith("F\t")]

    def take(self) -> int:
        """Round trips since the last call."""
        sent = self.sent()
        return sum(1 for i, message in enumerate(sent) if message in self.WAITS and (i == 0 or sent[i - 1] not in self.WAITS))


def test_an_append_takes_two_round_trips_whatever_its_shape():
    with EventStore.open(fresh_database_url()) as store:
        trips = RoundTrips(store)
        store.append("s", [PgNoted(text="first")])
        trips.take()  # the first append connects; count from the second
        store.append("s", [PgNoted(text="one")])
        assert trips.take() == 2
        store.append("s", [PgNoted(text="keyed")], idempotency_key="k", expected_version=2)
        assert trips.take() == 2
        assert store.append("s", [PgNoted(text="keyed")], idempotency_key="k").replayed
        assert trips.take() == 2
        many = [StreamAppend(f"s{n}", [PgNoted(text=f"{n}-{i}") for i in range(1500)]) for n in range(3)]
        assert store.append_batch(many).positions == range(4, 4 + 4500)
        assert trips.take() == 2
        with pytest.raises(ConcurrencyError):
            store.append("s", [PgNoted(text="late")], expected_version=1)
        assert trips.take() <= 3  # the check, then the rollback
        assert store.verify().ok and store.last_position() == 4503


def test_an_append_of_a_size_never_sent_before_reuses_the_prepared_statements():
    """Rows go as one array per column, so the statements are the same whatever an append's size:
    once prepared, an append of a new size sends parameters only, never a statement's text (Parse)."""
    with EventStore.open(fresh_database_url()) as store:
        trips = RoundTrips(store)
        for n in [1] * 6 + list(range(2, 8)):  # psycopg prepares a statement on its fifth use
            store.append("s", [PgNoted(text=f"{n}-{i}") for i in range(n)])
        trips.sent()
        store.append("s", [PgNoted(text=f"new-{i}") for i in range(37)])
        store.append("s", [PgNoted(text="one")])
        sent = trips.sent()
        assert sent.count("Bind") == 2 * 5 and "Parse" not in sent, sent
        assert store.last_position() == 6 + sum(range(2, 8)) + 38 and store.verify().ok
        assert [r.event.text for r in store.read_stream("s")][-3:] == ["new-35", "new-36", "one"]


def test_a_value_longer_than_its_column_is_refused_not_cut(store):
    """Arrays are cast to text, never to varchar(n), whose explicit cast would cut the value silently."""
    too_long = "s" * 601  # stream_id is VARCHAR(600); straight to the recorder, past the store's own check (see .bounds)
    for count in (1, 3):  # one row goes as VALUES, more as arrays
        rows = [PendingEvent(str(uuid.uuid4()), "PgNoted", 1, "default", '{"text":"x"}', "{}", None) for _ in range(count)]
        with pytest.raises(psycopg.errors.StringDataRightTruncation):
            store.recorder.append([PendingWrite(too_long, ANY, rows)])
        with pytest.raises(ValueError, match="stream_id must be at most 600"):
            store.append_records([PendingWrite(too_long, ANY, rows)])
    assert store.last_position() == 2 and store.verify().ok


def test_a_url_becomes_a_connection_string_whatever_its_password_holds():
    from psycopg.conninfo import conninfo_to_dict

    url = "postgresql+psycopg://ada:it's%20a%5Cpass@db.internal:5433/memories?sslmode=require"
    assert conninfo_to_dict(psycopg_conninfo(url)) == {
        "user": "ada", "password": "it's a\\pass", "host": "db.internal", "port": "5433", "dbname": "memories", "sslmode": "require",
    }  # fmt: skip


@pytest.fixture(scope="module")
def pg_conn():
    with psycopg.connect(psycopg_conninfo(fresh_database_url()), autocommit=True) as conn:
        register_pg_arrays(conn)
        yield conn


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    texts=st.lists(st.none() | st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")), max_size=40),
    numbers=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=40),
)
def test_binary_arrays_reach_postgresql_unchanged(pg_conn, texts, numbers):
    """What appends send as one array per column arrives element for element: NULLs, quotes, backslashes, any script."""
    got_texts, got_numbers = pg_conn.execute(
        "SELECT coalesce(%b::text[], '{}'), coalesce(%b::bigint[], '{}')", (PgTexts(texts), PgBigints(numbers))
    ).fetchone()
    assert got_texts == texts and got_numbers == numbers


def test_appends_bigger_than_one_statement_keep_positions_versions_spans_and_chain(tmp_path):
    """More rows, spans and streams than one statement carries: several statements, one transaction, as on SQLite."""
    meta = [encoder.encode(Metadata(correlation_id=f"c{i}")).decode() for i in range(2600)]
    rows = [PendingEvent(str(uuid.uuid4()), "PgNoted", 1, f"t{i % 3}", '{"text":"x"}', meta[i], f"c{i}") for i in range(2600)]
    writes = [PendingWrite(f"big-{n}", 0 if n % 2 else ANY, rows[2 * n : 2 * n + 2]) for n in range(1300)]  # 1,300 new streams
    with EventStore.open(fresh_database_url()) as store, EventStore.open(tmp_path) as lite:
        for log in (store, lite):
            log.append("s", [PgNoted(text="before")])
            appended = log.append_records(writes)
            assert (appended.first_position, appended.last_position) == (2, 2601)
            log.append("s", [PgNoted(text="after")], expected_version=1)
            with pytest.raises(ConcurrencyError):
                log.append_records([PendingWrite("fresh", ANY, rows[:1]), PendingWrite("big-1299", 1, rows[1:2])])
        assert store.verify().ok and lite.verify().ok
        assert store.digest().position == lite.digest().position == 2602
        for n in (0, 999, 1000, 1299):
            assert [r.stream_version for r in store.read_stream(f"big-{n}")] == [1, 2]
        assert store.recorder.spans_overlapping(1, 2602) == lite.recorder.spans_overlapping(1, 2602)
        assert len(store.read_all(tenant="t1")) == len([r for r in rows if r.tenant == "t1"])


def test_a_failed_append_writes_nothing_and_the_next_one_follows_without_a_gap(store):
    duplicate = PendingEvent(str(uuid.uuid4()), "PgNoted", 1, "default", '{"text":"dup"}', "{}", None)
    store.append_records([PendingWrite("d", ANY, [duplicate])])
    with pytest.raises(psycopg.errors.UniqueViolation):  # the same event id again, refused by the database
        store.append_records([PendingWrite("e", ANY, [PendingEvent(str(uuid.uuid4()), "PgNoted", 1, "default", "{}", "{}", None), duplicate])])
    assert store.last_position() == 3 and store.stream_version("e") == 0
    assert store.append("s", [PgNoted(text="three")], expected_version=2).positions == range(4, 5)
    assert store.verify().ok


def test_export_from_sqlite_imports_into_postgres_and_back(tmp_path):
    with EventStore.open(tmp_path / "lite") as lite:
        lite.append("a", [PgNoted(text="é ✓ \\" + '"'), PgNoted(text="two")], tenant="acme")
        lite.append("b", [PgNoted(text="three")], tenant="globex")
        dumped = io.BytesIO()
        export(lite, dumped)
        lite_digest = lite.digest()
    with EventStore.open(fresh_database_url()) as pg:
        report = import_(pg, io.BytesIO(dumped.getvalue()))
        assert report.imported == 3
        assert pg.digest() == lite_digest and pg.verify().ok
        again = io.BytesIO()
        export(pg, again)
    assert again.getvalue() == dumped.getvalue()
    with EventStore.open(tmp_path / "back") as back:
        import_(back, io.BytesIO(again.getvalue()))
        assert back.digest() == lite_digest


async def test_a_subscriber_is_woken_by_another_instance_commit_without_polling(store):
    other = EventStore.open(store.url, migrate_schema=False)
    try:
        subscription = store.subscribe(after=2, poll_seconds=600)
        first = asyncio.ensure_future(subscription.__anext__())
        await asyncio.sleep(0.3)  # the subscriber has caught up and waits
        assert not first.done()
        await asyncio.get_running_loop().run_in_executor(None, lambda: other.append("t", [PgNoted(text="three")]))
        recorded = await asyncio.wait_for(first, timeout=30)
        assert (recorded.position, recorded.event.text) == (3, "three")
        await subscription.aclose()
    finally:
        other.close()


def test_a_lease_frees_itself_when_its_holder_dies(store):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom mnemolog.eventstore import EventStore\n"
         "lease = EventStore.open(sys.argv[1], migrate_schema=False).lease('organizer')\n"
         "print(lease.held(), flush=True)\ntime.sleep(600)", store.url],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "True"
        mine = store.lease("organizer")
        assert not mine.held()
    finally:
        holder.kill()
        holder.wait()
    for _ in range(100):  # the server notices the dropped session
        if mine.held():
            break
        time.sleep(0.05)
    assert mine.held()
    mine.release()
