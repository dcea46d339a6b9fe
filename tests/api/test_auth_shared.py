"""API keys of servers that share a PostgreSQL log: one table in its database, so a key made or revoked once holds on every server."""

from __future__ import annotations

import json
import time

import pytest

from mnemolog.api.auth import KeyStore
from mnemolog.api.auth_postgres import PostgresKeyRows
from mnemolog.eventstore.settings import Settings
from tests.in_process import run_main
from tests.pg import fresh_database_url, serving_role
from tests.serving import http_json, start


def shared(url: str, data_dir) -> KeyStore:
    return KeyStore.of(Settings({"log_url": url, "data_dir": str(data_dir)}, env={}))


def refused_within(store: KeyStore, secret: str, seconds: float = 5.0) -> None:
    """``store`` refuses ``secret`` within ``seconds`` (it reads the shared table's change marker once a second)."""
    deadline = time.monotonic() + seconds
    while store.authenticate(secret) is not None:
        assert time.monotonic() < deadline, "a key revoked elsewhere was still taken"
        time.sleep(0.05)


def test_a_key_made_through_one_server_is_refused_by_every_other_once_revoked_anywhere(tmp_path):
    url = fresh_database_url()
    one, two = shared(url, tmp_path / "one"), shared(url, tmp_path / "two")
    try:
        secret, record = one.create("acme", ["read", "write"], "agent")
        assert two.authenticate(secret) == record  # cached from here on
        assert [k.key_id for k in two.list()] == [record.key_id] and two.count_active() == 1
        assert one.revoke(record.key_id)
        assert one.authenticate(secret) is None  # at once where it was revoked
        refused_within(two, secret)  # and within a second elsewhere, its cached lookup dropped
        assert not two.revoke(record.key_id)  # revoked already
        assert [k.revoked_at is not None for k in one.list()] == [True]
    finally:
        one.close()
        two.close()
    assert not (tmp_path / "one" / "auth.db").exists() and not (tmp_path / "two" / "auth.db").exists()  # nothing per server


def test_the_keys_of_a_servers_auth_db_are_taken_in_and_a_revoked_key_stays_revoked(tmp_path):
    url = fresh_database_url()
    local = KeyStore(tmp_path / "a" / "auth.db")
    kept, kept_record = local.create("acme", ["read"])
    revoked_here, revoked_here_record = local.create("acme", ["read"])
    revoked_there, revoked_there_record = local.create("acme", ["read"])
    local.revoke(revoked_here_record.key_id)
    first = shared(url, tmp_path / "a")  # takes in all three
    try:
        assert first.authenticate(kept) == kept_record
        assert first.authenticate(revoked_here) is None
        first.revoke(revoked_there_record.key_id)  # revoked in the shared table; still active in the file
        assert {k.key_id for k in first.list()} == {kept_record.key_id, revoked_here_record.key_id, revoked_there_record.key_id}
    finally:
        first.close()
    local.close()
    rows = PostgresKeyRows.open(url)
    try:
        assert rows.take_in(tmp_path / "a" / "auth.db") == 0  # taken in already: nothing to add, and nothing revived
    finally:
        rows.close()
    again = shared(url, tmp_path / "a")
    try:
        assert again.authenticate(revoked_there) is None and again.authenticate(kept) == kept_record
    finally:
        again.close()


def test_keys_commands_on_a_postgresql_log_act_on_the_shared_keys(tmp_path):
    url = fresh_database_url()
    env = {"MNEMOLOG_LOG_URL": url}
    made = run_main(["--data-dir", str(tmp_path / "one"), "keys", "create", "--tenant", "acme", "--scopes", "read", "--json"], env=env, text=True)
    assert made.returncode == 0, made.stderr
    key_id = json.loads(made.stdout)["key_id"]
    # Another server's data directory, with no auth.db: the shared keys, not a refusal.
    listed = run_main(["--data-dir", str(tmp_path / "two"), "keys", "list", "--json"], env=env, text=True)
    assert listed.returncode == 0, listed.stderr
    assert [json.loads(line)["key_id"] for line in listed.stdout.splitlines()] == [key_id]
    revoked = run_main(["--data-dir", str(tmp_path / "two"), "keys", "revoke", key_id], env=env, text=True)
    assert revoked.returncode == 0 and revoked.stdout.strip() == f"revoked {key_id}", revoked.stderr
    again = run_main(["--data-dir", str(tmp_path / "one"), "keys", "revoke", key_id], env=env, text=True)
    assert again.returncode == 2 and f"no active key {key_id!r}" in again.stderr


@pytest.mark.slow
def test_two_servers_on_one_log_take_one_key_and_both_refuse_it_once_revoked(tmp_path):
    url = fresh_database_url()
    env = {"MNEMOLOG_LOG_URL": url}
    made = run_main(["--data-dir", str(tmp_path / "one"), "keys", "create", "--tenant", "acme", "--scopes", "read,write", "--json"], env=env, text=True)
    key = json.loads(made.stdout)
    settings = {"log_url": url, "auth": "on", "synchronous": "NORMAL", "organizer_enabled": "off"}
    log = tmp_path / "servers.log"
    a, b = start(tmp_path / "one", log, **settings), start(tmp_path / "two", log, **settings)
    try:
        status, written = http_json(a.url, "POST", "/v1/memories", {"memory": {"memory": "the ferry leaves at nine"}}, key=key["key"])
        assert status == 201, written
        status, me = http_json(b.url, "GET", "/v1/whoami", key=key["key"])  # the other server knows the key too
        assert status == 200 and me["tenant"] == "acme", me
        assert run_main(["--data-dir", str(tmp_path / "two"), "keys", "revoke", key["key_id"]], env=env).returncode == 0
        for server in (a, b):  # within a second on both (each looked the key up a moment ago)
            deadline = time.monotonic() + 10
            while (answer := http_json(server.url, "GET", "/v1/whoami", key=key["key"]))[0] == 200:
                assert time.monotonic() < deadline, "a revoked key was still taken"
                time.sleep(0.1)
            assert answer[0] == 401 and answer[1]["error"]["code"] == "unauthorized", answer
    finally:
        for server in (a, b):
            if server.proc.poll() is None:
                server.proc.terminate()
                server.proc.wait(timeout=60)


def test_a_serving_role_that_owns_nothing_uses_the_table_migrate_made_and_is_told_when_there_is_none(tmp_path):
    import psycopg

    from mnemolog.eventstore import EventStore
    from mnemolog.eventstore.dialects import psycopg_conninfo
    from mnemolog.eventstore.settings import SetupError

    url = fresh_database_url()  # owned by the role that migrates it
    EventStore.open(url).close()
    role = serving_role(url, log_grants=False)
    serving, as_serving = role.name, role.url
    with pytest.raises(SetupError, match="no api_keys table .* run mnemolog migrate as the tables' owner"):
        shared(as_serving, tmp_path)
    migrated = run_main(["--data-dir", str(tmp_path), "migrate"], env={"MNEMOLOG_LOG_URL": url}, text=True)
    assert migrated.returncode == 0, migrated.stderr
    with psycopg.connect(psycopg_conninfo(url), autocommit=True) as owner:
        owner.execute(f"GRANT SELECT, INSERT, UPDATE ON api_keys TO {serving}")  # as the README sets it up
    store = shared(as_serving, tmp_path)
    try:
        secret, record = store.create("acme", ["read"])
        assert store.authenticate(secret) == record and store.revoke(record.key_id) and store.authenticate(secret) is None
    finally:
        store.close()


async def test_without_auth_a_server_needs_no_grant_on_the_keys(tmp_path, aiohttp_client):
    """No request looks a key up: a serving role granted only the log's tables serves, with no api_keys table at all."""
    import psycopg

    from mnemolog.api.app import create_app
    from mnemolog.eventstore import EventStore
    from mnemolog.eventstore.dialects import psycopg_conninfo

    url = fresh_database_url()
    EventStore.open(url).close()
    settings = Settings({"log_url": serving_role(url).url, "data_dir": str(tmp_path / "data"), "auth": False, "organizer_enabled": False}, env={})
    client = await aiohttp_client(create_app(settings))
    written = await client.post("/v1/memories", json={"memory": {"memory": "the ferry leaves at nine"}})
    assert written.status == 201, await written.text()
    with psycopg.connect(psycopg_conninfo(url), autocommit=True) as owner:
        assert owner.execute("SELECT to_regclass('api_keys')").fetchone()[0] is None
