"""Keys, scopes and tenancy over real HTTP; ``mnemolog serve``'s safe defaults, in process and as a real subprocess."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
from pathlib import Path

import pytest

from mnemolog.api.auth import KeyStore
from mnemolog.api.client import ApiError, MnemologClient
from mnemolog.api.app import ROUTES
from mnemolog.tools import cli
from mnemolog.tools.serve_cmds import first_start_key
from tests.serving import BANNER

MNEMOLOG = Path(sys.executable).with_name("mnemolog")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def secured(start):
    return await start(auth=True)


async def expect(status: int, call, *, code: str | None = None) -> ApiError:
    with pytest.raises(ApiError) as err:
        await call
    assert err.value.status == status, err.value
    if code is not None:
        assert err.value.code == code
    return err.value


def sample_path(path: str) -> str:
    return path.replace("{id}", "some-id").replace("{edge_id}", "user:some:1").replace("{subject}", "some-subject")


# -- keys -------------------------------------------------------------------------------------------


async def test_no_key_is_401_json_on_every_route_that_needs_one(secured):
    for r in ROUTES:
        if r.scope is None:
            continue
        response = await secured.raw.request(r.method, sample_path(r.path), json={})
        assert response.status == 401, (r.method, r.path, response.status)
        assert response.content_type == "application/json"
        body = await response.json()
        assert body["error"]["code"] == "unauthorized"
        assert body["error"]["field"] == "Authorization"


async def test_open_routes_need_no_key(secured):
    for path in ("/health", "/openapi.json"):
        response = await secured.raw.get(path)
        assert response.status == 200, path


async def test_health_tells_a_caller_without_a_key_only_that_the_server_lives(secured):
    """The log's positions say how much every tenant writes, and the version which fixes a server lacks."""
    writer = secured.client(secured.key("acme"))
    await writer.add_memories({"memory": "acme's quarterly numbers"})
    anonymous = await secured.raw.get("/health")
    assert anonymous.status == 200
    assert await anonymous.json() == {"status": "ok"}
    with_key = await secured.client(secured.key("other", "read")).health()
    assert with_key["status"] == "ok" and with_key["head_position"] >= 1 and with_key["version"]
    assert set(with_key["projection_lags"]) and with_key["vector_index_lag"] >= 0
    for headers, status in (({"Authorization": "Bearer mlk_not-a-key"}, 401), ({"X-API-Key": secured.key("other", "write")}, 403)):
        refused = await secured.raw.get("/health", headers=headers)
        assert refused.status == status
        assert (await refused.json())["error"]["field"] == "Authorization" if status == 401 else True
    assert (await secured.raw.get("/health", headers={"Authorization": "Bearer "})).status == 200  # an empty key is none
    # A wrong key is named where it came: X-API-Key named Authorization, with a hint of Bearer only
    refused = await (await secured.raw.get("/v1/capabilities", headers={"X-API-Key": "mlk_not-a-key"})).json()
    assert refused["error"]["field"] == "X-API-Key" and "Bearer" not in refused["error"]["message"], refused


async def test_health_without_auth_shows_the_state(api):
    health = await (await api.raw.get("/health")).json()
    assert health["status"] == "ok" and health["head_position"] == 0 and "version" in health and "projection_lags" in health


@pytest.mark.parametrize("secret", [b"\xed\xb2\x8c\xff", "mlk_\u00e9\u4e2d".encode(), b"\x80abc"])
async def test_a_key_of_any_bytes_is_401_json_never_500(secured, secret):
    """A header's bytes that are not UTF-8 reach the server as text with surrogates: no key, not an error."""
    reader, writer = await asyncio.open_connection(secured.server.host, secured.server.port)
    writer.write(
        b"POST /v1/recall HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer " + secret
        + b"\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
    )
    await writer.drain()
    answer = await reader.read()
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 401"), answer[:300]
    assert b'"code":"unauthorized"' in body.replace(b" ", b"") and b'"field":"Authorization"' in body.replace(b" ", b"")


async def test_unknown_and_revoked_keys_are_401(secured):
    await expect(401, secured.client(api_key="mlk_nope_nope").recall("anything"), code="unauthorized")
    secret, record = secured.keystore.create("acme", ["read", "write"], name="soon revoked")
    client = secured.client(api_key=secret)
    await client.add_memories({"memory": "written before revocation"})
    assert secured.keystore.revoke(record.key_id) is True
    await expect(401, client.recall("written"), code="unauthorized")
    await expect(401, client.add_memories({"memory": "after revocation"}), code="unauthorized")


def test_a_key_revoked_through_another_connection_is_refused_at_once(tmp_path):
    """A worker or the CLI revokes through its own connection: the cached lookup here must not outlive it."""
    server = KeyStore(tmp_path / "auth.db")
    secret, record = server.create("acme", ["read"], name="cached")
    assert server.authenticate(secret).key_id == record.key_id  # now cached
    other = KeyStore(tmp_path / "auth.db")
    try:
        assert other.revoke(record.key_id) is True
        assert server.authenticate(secret) is None
        # A key created elsewhere is known at once too, and unrelated keys stay valid.
        fresh, fresh_record = other.create("acme", ["read"], name="fresh")
        assert server.authenticate(fresh).key_id == fresh_record.key_id
    finally:
        other.close()
        server.close()


async def test_a_key_revoked_with_the_cli_is_refused_by_the_running_server_at_once(secured):
    secret, record = secured.keystore.create("acme", ["read", "write"], name="cli revoked")
    client = secured.client(api_key=secret)
    await client.add_memories({"memory": "written before revocation"})
    await client.capabilities()  # the lookup is cached now
    process = await asyncio.create_subprocess_exec(
        str(MNEMOLOG), "keys", "revoke", record.key_id, "--data-dir", str(secured.data_dir),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode == 0, err
    await expect(401, client.capabilities(), code="unauthorized")


async def test_x_api_key_header_works_too(secured):
    secret = secured.key("acme", "read")
    response = await secured.raw.get("/v1/capabilities", headers={"X-API-Key": secret})
    assert response.status == 200


async def test_keys_are_hashed_at_rest(tmp_path):
    store = KeyStore(tmp_path / "auth.db")
    secret, record = store.create("acme", ["read"], name="hashed")
    assert store.authenticate(secret).key_id == record.key_id
    store.close()
    raw = (tmp_path / "auth.db").read_bytes() + b"".join(p.read_bytes() for p in tmp_path.glob("auth.db-*"))
    assert secret.encode() not in raw
    with sqlite3.connect(tmp_path / "auth.db") as conn:
        rows = conn.execute("SELECT * FROM api_keys").fetchall()
    assert rows and all(secret not in map(str, row) for row in rows)


async def test_read_only_key_cannot_write_on_any_write_route(secured):
    reader = secured.key("acme", "read")
    writer = secured.client(api_key=secured.key("acme", "read", "write"))
    written = await writer.add_memories({"memory": "readers may read this"})
    headers = {"Authorization": f"Bearer {reader}"}
    tip = (await writer.digest())["position"]
    for r in ROUTES:
        if r.scope not in ("write", "admin"):
            continue
        response = await secured.raw.request(r.method, sample_path(r.path), json={"memory": {"memory": "x"}}, headers=headers)
        assert response.status == 403, (r.method, r.path, response.status)
        assert (await response.json())["error"]["code"] == "forbidden"
    assert (await writer.digest())["position"] == tip
    reading = secured.client(api_key=reader)
    assert (await reading.get_memory(written.memory_ids[0]))["memory"] == "readers may read this"
    await expect(403, reading.verify(), code="forbidden")  # verify needs admin


async def test_write_only_key_cannot_read_and_admin_can_do_everything(secured):
    writer = secured.client(api_key=secured.key("acme", "write"))
    written = await writer.add_memories({"memory": "write only"})
    await expect(403, writer.get_memory(written.memory_ids[0]), code="forbidden")
    admin = secured.client(api_key=secured.key("acme", "admin"))
    assert (await admin.get_memory(written.memory_ids[0]))["memory"] == "write only"
    assert (await admin.verify())["ok"] is True
    await admin.archive_memory(written.memory_ids[0])


# -- tenancy ---------------------------------------------------------------------------------------


@pytest.fixture
async def tenants(secured):
    """Tenant A's client, tenant B's client, and B's memory, edge and correlation."""
    a = secured.client(api_key=secured.key("tenant-a", "read", "write", "admin"))
    b = secured.client(api_key=secured.key("tenant-b", "read", "write", "admin"))
    b1 = await b.add_memories({"memory": "Tenant B's secret launch code is zebra", "key": "launch"}, correlation_id="b-corr")
    b2 = await b.add_memories({"memory": "Tenant B's second zebra note"})
    await b.link(b1.memory_ids[0], b2.memory_ids[0], edge_id="bns:secret:1")
    mine = await a.add_memories({"memory": "Tenant A's own zebra note"})
    return secured, a, b, b1.memory_ids[0], b2.memory_ids[0], mine.memory_ids[0]


async def test_tenant_a_cannot_read_tenant_b(tenants):
    api, a, b, b_id, b_other, a_id = tenants
    await expect(404, a.get_memory(b_id), code="not_found")
    await expect(404, a.get_memory(b_id, as_of=1), code="not_found")
    await expect(404, a.memory_history(b_id), code="not_found")
    # The answers are those for a memory that does not exist at all.
    unknown = await expect(404, a.get_memory("01a00000-0000-7000-8000-000000000000"))
    assert unknown.code == "not_found"
    events = (await a.list_events(limit=1000))["events"]
    assert events and {e["tenant"] for e in events} == {"tenant-a"}
    assert (await a.list_events(stream=f"memory-{b_id}"))["events"] == []
    assert (await a.list_events(correlation_id="b-corr"))["events"] == []
    found = await a.recall("zebra launch code")
    assert [h["id"] for h in found["hits"]] == [a_id]
    assert found["relationships"] == []
    searched = await a.search("zebra launch")
    assert all(h["id"] == a_id for hits in searched["channels"].values() for h in hits)
    assert (await expect(404, a.neighbors(b_id, depth=2))).code == (await expect(404, a.neighbors("no-such-node", depth=2))).code == "not_found"
    assert (await expect(404, a.request("POST", "/v1/graph/subgraph", json={"seeds": [b_id]}))).code == "not_found"
    stats = await a.request("GET", "/v1/graph/stats")
    assert stats["memories_total"] == 1 and stats["edges_total"] == 0
    # B still sees its own.
    assert (await b.get_memory(b_id))["memory"].startswith("Tenant B's secret")


async def test_tenant_a_cannot_write_tenant_b(tenants):
    api, a, b, b_id, b_other, a_id = tenants
    tip = (await b.digest())["position"]
    await expect(404, a.update_memory(b_id, {"memory": "overwritten by A"}))
    await expect(404, a.update_memory(b_id, {"memory": "overwritten by A"}, expected_version=1))
    await expect(404, a.archive_memory(b_id))
    await expect(404, a.delete_memory(b_id))
    await expect(404, a.restore_memory(b_id))
    await expect(404, a.rollback_memory(b_id, 1))
    await expect(404, a.merge_memories([b_id, a_id]))
    await expect(404, a.supersede_memory(a_id, b_id))
    await expect(404, a.delete_memory(a_id, evolve_to=b_id))
    await expect(404, a.link(a_id, b_id, edge_id="a:steal:1"))
    await expect(404, a.link(b_id, b_other, edge_id="a:steal:2"))
    await expect(404, a.unlink("bns:secret:1"))
    await expect(404, a.revert("b-corr"))
    removed = await a.undo_namespace("bns:")
    assert removed.data["removed"] == 0 and removed.positions == []
    assert (await b.digest())["position"] == tip
    view = await b.get_memory(b_id)
    assert view["version"] == 1 and view["status"] == "activated"
    assert [e["edge_id"] for e in (await b.neighbors(b_id))["edges"]] == ["bns:secret:1"]


async def test_a_tenant_header_naming_another_tenant_than_the_keys_is_refused(tenants):
    """A key bound to one tenant acted for it whatever ``X-Mnemolog-Tenant`` said: a client set up for tenant B
    with A's key read A's memories and wrote B's into A without a word. It is now a 403 naming the header, and
    nothing is written; the header naming the key's own tenant is accepted."""
    api, a, b, b_id, b_other, a_id = tenants
    secret = api.key("tenant-a", "read", "write")
    tip = (await b.digest())["position"]
    spoofing = api.client(api_key=secret, tenant="tenant-b")
    refused = await expect(403, spoofing.get_memory(b_id), code="forbidden")
    assert refused.field == "X-Mnemolog-Tenant" and "tenant-a" in refused.message
    await expect(403, spoofing.add_memories({"memory": "meant for tenant B"}), code="forbidden")
    assert (await b.digest())["position"] == tip
    own = api.client(api_key=secret, tenant="tenant-a")
    written = await own.add_memories({"memory": "lands in tenant A"})
    assert (await a.get_memory(written.memory_ids[0]))["tenant"] == "tenant-a"


async def test_sse_tail_only_carries_the_callers_tenant(tenants):
    api, a, b, b_id, b_other, a_id = tenants
    secret = api.key("tenant-a", "read")
    async with api.raw.get("/v1/events/stream", headers={"Authorization": f"Bearer {secret}"}) as response:
        assert response.status == 200
        await b.add_memories({"memory": "B writes while A tails"})
        mine = await a.add_memories({"memory": "A writes while A tails"})
        seen = []

        async def read_until_mine():
            while True:
                line = (await response.content.readline()).decode()
                if line.startswith("data: "):
                    seen.append(line)
                    if '"A writes while A tails"' in line:
                        return

        await asyncio.wait_for(read_until_mine(), 10)
    assert all('"tenant":"tenant-a"' in line for line in seen)
    assert not any("B writes" in line or "Tenant B" in line for line in seen)
    assert mine.positions


async def test_wildcard_key_needs_a_tenant_header(secured):
    secret = secured.key("*", "read", "write")
    bare = secured.client(api_key=secret)
    error = await expect(400, bare.recall("anything"))
    assert error.field == "X-Mnemolog-Tenant"
    await expect(400, bare.add_memories({"memory": "nowhere"}))
    # '*' is what a key's tenant says for every tenant, never a tenant: written to, no single-tenant key could read it.
    star = secured.client(api_key=secret, tenant="*")
    for call in (star.add_memories({"memory": "in the tenant named *"}), star.recall("anything")):
        error = await expect(400, call)
        assert error.field == "X-Mnemolog-Tenant" and "'*'" in error.message
    acme = secured.client(api_key=secret, tenant="acme")
    globex = secured.client(api_key=secret, tenant="globex")
    written = await acme.add_memories({"memory": "acme's memory"})
    assert (await acme.get_memory(written.memory_ids[0]))["tenant"] == "acme"
    await expect(404, globex.get_memory(written.memory_ids[0]))


async def test_admin_drop_tenant_only_drops_the_keys_tenant(tenants):
    api, a, b, b_id, b_other, a_id = tenants
    error = await expect(409, a.request("POST", "/v1/admin/drop-tenant", json={"confirm": "tenant-b"}))
    assert error.field == "confirm"
    dropped = await a.request("POST", "/v1/admin/drop-tenant", json={"confirm": "tenant-a"})
    assert dropped["positions"]
    await expect(404, a.get_memory(a_id))
    assert (await b.get_memory(b_id))["status"] == "activated"


# -- serve: safe defaults ----------------------------------------------------------------------------


def test_serve_refuses_a_public_address_without_auth(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MNEMOLOG_AUTH", "off")
    code = cli.main(["serve", "--host", "0.0.0.0", "--port", "1", "--data-dir", str(tmp_path / "data")])
    out, err = capsys.readouterr()
    assert code == 2
    assert err.startswith("mnemolog: error: ") and err.count("\n") == 1, err
    assert "refusing" in err and "0.0.0.0" in err and "auth" in err.lower(), err
    assert "Traceback" not in err
    assert not (tmp_path / "data" / "events.db").exists()


def test_first_start_key_is_printed_once_with_url_and_curl(tmp_path, capsys):
    store = KeyStore(tmp_path / "auth.db")
    try:
        secret = first_start_key(store, "127.0.0.1", 8765)
        out = capsys.readouterr().out
        assert secret and secret.startswith("mlk_")
        assert out.count(secret) >= 2  # shown, and used in the ready-to-paste curl example
        assert f"Authorization: Bearer {secret}" in out
        assert "http://127.0.0.1:8765/v1/memories" in out and "http://127.0.0.1:8765/v1/recall" in out
        assert "curl" in out
        [record] = store.list()
        assert record.tenant == "default" and set(record.scopes) == {"read", "write", "admin"}
        assert store.authenticate(secret) is not None
        # Second start: no new key, nothing printed.
        assert first_start_key(store, "127.0.0.1", 8765) is None
        assert capsys.readouterr().out == ""
        assert len(store.list()) == 1
        # Revoking every key does not mint a fresh one either.
        store.revoke(record.key_id)
        assert first_start_key(store, "127.0.0.1", 8765) is None
    finally:
        store.close()


def test_first_start_key_brackets_an_ipv6_host(tmp_path, capsys):
    store = KeyStore(tmp_path / "auth.db")
    try:
        first_start_key(store, "::1", 9000)
        assert "http://[::1]:9000/v1/recall" in capsys.readouterr().out
    finally:
        store.close()


def test_keys_cli_create_list_revoke(tmp_path, capsys):
    data = str(tmp_path / "data")
    assert cli.main(["keys", "create", "--tenant", "acme", "--scopes", "read", "--json", "--data-dir", data]) == 0
    import json

    created = json.loads(capsys.readouterr().out)
    assert created["key"].startswith("mlk_") and created["tenant"] == "acme" and created["scopes"] == ["read"]
    assert cli.main(["keys", "list", "--json", "--data-dir", data]) == 0
    listed = capsys.readouterr().out
    assert created["key_id"] in listed and created["key"] not in listed
    assert cli.main(["keys", "revoke", created["key_id"], "--data-dir", data]) == 0
    capsys.readouterr()
    assert cli.main(["keys", "revoke", created["key_id"], "--data-dir", data]) == 2
    assert capsys.readouterr().err.startswith("mnemolog: error: ")


@pytest.mark.parametrize(
    "options, says",
    [
        (["--tenant", "t" * 201], "--tenant: must be at most 200 characters"),
        (["--tenant", "acme\nglobex"], "--tenant: must not hold control characters"),
        (["--tenant", " acme "], "--tenant: must not start or end with a space"),
        (["--tenant", "acme", "--name", "ci\nkey"], "name must not hold control characters"),
    ],
)
def test_keys_create_refuses_a_tenant_no_request_can_act_for_and_a_name_of_several_lines(tmp_path, capsys, options, says):
    """Such keys were made: a tenant longer than any tenant may be answered its writes with a 500, one with a
    line break or spaces around it named a tenant no header can name, and keys list printed a key over two lines."""
    data = str(tmp_path / "data")
    assert cli.main(["keys", "create", *options, "--data-dir", data]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1
    made = (tmp_path / "data").exists()  # refused as it was read (an option), nothing was made
    assert not made or (cli.main(["keys", "list", "--data-dir", data]) == 0 and capsys.readouterr().out == "")


async def test_the_longest_tenant_a_key_may_name_writes_and_reads(secured):
    client = secured.client(api_key=secured.key("t" * 200))
    written = await client.add_memories({"memory": "the longest tenant's note"})
    assert (await client.get_memory(written.memory_ids[0]))["tenant"] == "t" * 200


async def test_real_serve_subprocess_prints_a_key_that_works(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MNEMOLOG_")}
    env["PYTHONUNBUFFERED"] = "1"
    command = [str(MNEMOLOG)] if MNEMOLOG.exists() else [sys.executable, "-m", "mnemolog.tools.cli"]
    errors = open(tmp_path / "serve.stderr", "wb")
    proc = await asyncio.create_subprocess_exec(
        *command,
        "serve",
        "--port",
        "0",
        "--data-dir",
        str(tmp_path / "data"),
        stdout=asyncio.subprocess.PIPE,
        stderr=errors,
        env=env,
        cwd=str(ROOT),
    )
    lines: list[str] = []
    try:
        async def read_banner() -> str:
            secret = None
            while True:
                raw = await proc.stdout.readline()
                if not raw:
                    await asyncio.wait_for(proc.wait(), 10)
                    err = (tmp_path / "serve.stderr").read_text(errors="replace")
                    raise AssertionError(f"serve exited with {proc.returncode}: {lines} {err}")
                line = raw.decode().strip()
                lines.append(line)
                if line.startswith("mlk_"):
                    secret = line
                if line.startswith("mnemolog: serving"):
                    return secret

        secret = await asyncio.wait_for(read_banner(), 30)
        assert secret, lines
        banner = "\n".join(lines)
        url = BANNER.search(banner).group(1)  # the port the server bound
        assert url.startswith("http://127.0.0.1:") and not url.endswith(":0"), banner
        assert f"{url}/v1/memories" in banner and f"{url}/v1/recall" in banner and f"{url}/explorer" in banner

        async with MnemologClient(url, api_key=secret, timeout=10) as client:
            health = None
            for _ in range(100):
                try:
                    health = await client.health()
                    break
                except OSError:
                    await asyncio.sleep(0.1)
            assert health and health.status == "ok"
            # What the printed curl lines do.
            written = await client.add_memories({"memory": "I moved to Lisbon in May", "key": "home city"})
            found = await client.recall("where do I live? Lisbon", min_position=written.positions[-1])
            assert [h.id for h in found.hits][:1] == written.memory_ids
        async with MnemologClient(url, timeout=10) as anonymous:
            await expect(401, anonymous.recall("Lisbon"))
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 15)
            except asyncio.TimeoutError:
                proc.kill()
                await proc.wait()
        errors.close()


async def test_no_answer_may_be_kept_by_a_cache(tenants):
    """Tenant data read with a key leaves as ``Cache-Control: no-store``: read, refused, streamed, by either key header.

    A shared cache may store an answer to a request whose key came as
    ``X-API-Key`` (only ``Authorization`` keeps it from doing so) and serve it
    to the next caller, key or none; a private one would keep it past a forget.
    """
    api, a, b, b_id, b_other, a_id = tenants
    secret = api.key("tenant-b", "read")
    reads = [sample_path(r.path).replace("some-id", b_id) for r in ROUTES if r.method == "GET" and r.scope is not None and r.path != "/v1/events/stream"]
    for headers in ({"X-API-Key": secret}, {"Authorization": f"Bearer {secret}"}, {}):
        for path in reads:
            response = await api.raw.get(path, headers=headers)
            assert response.headers.get("Cache-Control") == "no-store", (path, headers, response.status, dict(response.headers))
    answered = await api.raw.post("/v1/recall", json={"query": "zebra"}, headers={"X-API-Key": secret})
    assert answered.status == 200 and answered.headers.get("Cache-Control") == "no-store"
    async with api.raw.get("/v1/events/stream", headers={"X-API-Key": secret}) as response:
        assert response.status == 200 and response.headers.get("Cache-Control") == "no-store"
    page = await api.raw.get("/explorer")  # the page's own files carry no data: they may be kept, and revalidated
    assert page.headers.get("Cache-Control") == "no-cache"


async def test_a_tenant_whose_name_holds_a_slash_never_replays_another_tenants_idempotent_write(secured):
    """Tenant ``acme`` with key ``add/x`` and tenant ``acme/add`` with key ``x`` once shared one stored key:
    the second tenant's write was answered with the first's memory and correlation, and nothing was written."""
    secret = secured.key("*", "read", "write")
    acme = secured.client(api_key=secret, tenant="acme")
    other = secured.client(api_key=secret, tenant="acme/add")
    first = await acme.add_memories({"memory": "acme's private note"}, idempotency_key="add/x")
    second = await other.add_memories({"memory": "acme's private note"}, idempotency_key="x")
    assert not second.replayed and second.memory_ids != first.memory_ids and second.correlation_id != first.correlation_id
    assert (await other.get_memory(second.memory_ids[0]))["tenant"] == "acme/add"
    await expect(404, other.get_memory(first.memory_ids[0]))
    # Another body under that key is its own tenant's business: no conflict with acme's request.
    third = await other.add_memories({"memory": "something else"}, idempotency_key="add/y")
    assert not third.replayed
    assert (await acme.add_memories({"memory": "acme's private note"}, idempotency_key="add/x")).replayed


async def test_head_answers_as_its_get_without_the_body_keys_and_tenancy_included(tenants):
    """RFC 9110: a server answers HEAD wherever it answers GET (a monitor probing /health, a cache revalidating); it was a 405."""
    api, a, b, b_id, b_other, a_id = tenants
    secret = api.key("tenant-b", "read")
    mine = {"Authorization": f"Bearer {secret}"}
    for path, headers in (("/health", {}), ("/openapi.json", {}), (f"/v1/memories/{b_id}", mine), ("/v1/events?limit=2", mine), ("/explorer", {})):
        got = await api.raw.get(path, headers=headers)
        body = await got.read()
        head = await api.raw.head(path, headers=headers)
        assert head.status == got.status == 200, (path, head.status, got.status)
        assert await head.read() == b""
        assert head.headers["Content-Type"] == got.headers["Content-Type"] and int(head.headers["Content-Length"]) == len(body), path
        assert head.headers.get("Cache-Control") == got.headers.get("Cache-Control"), path
    assert (await api.raw.head(f"/v1/memories/{b_id}")).status == 401  # no key
    other = api.key("tenant-a", "read")
    assert (await api.raw.head(f"/v1/memories/{b_id}", headers={"Authorization": f"Bearer {other}"})).status == 404  # another tenant's
    assert (await api.raw.head("/v1/events?limt=2", headers=mine)).status == 422  # its query checked as the GET's
    assert (await api.raw.head("/v1/events/stream", headers=mine)).status == 405  # an endless tail has no headers-only answer
    assert (await api.raw.post("/v1/memories/" + b_id, headers=mine)).headers["Allow"] == "GET,HEAD,PATCH"


async def test_a_refused_key_says_which_challenge_answers_it(secured):
    """RFC 9110 §11.6.1: a 401 carries WWW-Authenticate (it had none); RFC 6750 says why a bearer token was refused."""
    missing = await secured.raw.get("/v1/capabilities")
    assert missing.status == 401 and missing.headers["WWW-Authenticate"] == 'Bearer realm="mnemolog"'
    unknown = await secured.raw.get("/v1/capabilities", headers={"Authorization": "Bearer mlk_nope_nope"})
    assert unknown.status == 401 and unknown.headers["WWW-Authenticate"] == 'Bearer realm="mnemolog", error="invalid_token"'
    reader = secured.key("acme", "read")
    short = await secured.raw.post("/v1/memories", json={"memory": {"memory": "x"}}, headers={"Authorization": f"Bearer {reader}"})
    assert short.status == 403 and short.headers["WWW-Authenticate"] == 'Bearer realm="mnemolog", error="insufficient_scope", scope="write"'
    assert (await short.json())["error"]["code"] == "forbidden"
    fine = await secured.raw.get("/v1/capabilities", headers={"Authorization": f"Bearer {reader}"})
    assert fine.status == 200 and "WWW-Authenticate" not in fine.headers


async def test_a_live_tail_ends_when_its_key_is_revoked(secured):
    """An open ``/v1/events/stream`` went on carrying the tenant's new events to a key revoked after it connected."""
    secret, record = secured.keystore.create("acme", ["read"], name="tail")
    writer = secured.client(api_key=secured.key("acme"))
    async with secured.raw.get("/v1/events/stream", headers={"Authorization": f"Bearer {secret}"}) as response:
        assert response.status == 200
        await writer.add_memories({"memory": "written while the key is good"})

        async def first_event() -> str:
            while not (line := (await response.content.readline()).decode()).startswith("data: "):
                pass
            return line

        assert "written while the key is good" in await asyncio.wait_for(first_event(), 10)
        secured.keystore.revoke(record.key_id)
        await writer.add_memories({"memory": "written after the revocation"})
        rest = (await asyncio.wait_for(response.content.read(), 10)).decode()  # the tail ends: read() returns at its end
    assert "written after the revocation" not in rest
    tail = secured.typed_client(api_key=secret)
    with pytest.raises(ApiError) as err:
        async for _ in tail.stream_events():
            pass
    assert err.value.status == 401


async def test_a_quiet_live_tail_ends_when_its_key_is_revoked_without_waiting_for_an_event(secured, monkeypatch):
    """A tail with nothing to send checked its key only at its next keep-alive: the connection of a revoked key
    stayed open, as if the key still worked, until the tenant wrote again or the keep-alive came."""
    from mnemolog.api import routes_log

    monkeypatch.setattr(routes_log, "KEEPALIVE_SECONDS", 3600.0)
    secret, record = secured.keystore.create("acme", ["read"], name="quiet tail")
    written = await secured.client(api_key=secured.key("acme")).add_memories({"memory": "the one event"})
    async with secured.raw.get("/v1/events/stream", headers={"Authorization": f"Bearer {secret}"}) as response:
        assert response.status == 200
        while not (await asyncio.wait_for(response.content.readline(), 10)).startswith(b"data: "):
            pass
        secured.keystore.revoke(record.key_id)
        rest = await asyncio.wait_for(response.content.read(), 20)  # the tail ends: read() returns at its end
    assert b"data: " not in rest and written.positions


async def test_a_tenant_whose_name_holds_a_slash_has_document_streams_of_its_own(secured, tmp_path, capsys):
    """Tenant ``acme`` with document ``x/y`` and tenant ``acme/x`` with document ``y`` once wrote one stream:
    acme's revert was refused over acme/x's import ("changed after"), and acme/x's export (its drop backup
    too) could not be imported anywhere, its stream starting at acme's version."""
    secret = secured.key("*", "read", "write")
    acme = secured.client(api_key=secret, tenant="acme")
    other = secured.client(api_key=secret, tenant="acme/x")
    async with acme.correlation() as cid:
        await acme.import_documents(("y.md", b"# Plan\n\nAcme's plan for Lisbon.\n"), doc_id="x/y")
    await other.import_documents(("y.md", b"# Notes\n\nNotes about Porto.\n"), doc_id="y")
    await other.import_documents(("y.md", b"# Notes\n\nMore notes about Porto.\n"), doc_id="y")
    dry = await acme.revert(cid, dry_run=True)
    assert dry.data["conflicts"] == [] and dry.data["would_revert"] == 2
    mine = {e["stream_id"] for e in (await acme.list_events())["events"] if e["type"] == "DocumentImported"}
    theirs = {e["stream_id"] for e in (await other.list_events())["events"] if e["type"] == "DocumentImported"}
    assert len(mine) == len(theirs) == 1 and mine != theirs
    assert [e["stream_version"] for e in (await other.list_events(stream=theirs.pop()))["events"]] == [1, 2]
    exported, keys, fresh = tmp_path / "acme-x.jsonl", tmp_path / "acme-x.keys", tmp_path / "fresh"
    export = ["export", "--tenant", "acme/x", "--output", str(exported), "--with-keys", str(keys), "--data-dir", str(secured.data_dir)]
    assert await asyncio.to_thread(cli.main, export) == 0
    assert await asyncio.to_thread(cli.main, ["import", str(exported), "--keys", str(keys), "--data-dir", str(fresh)]) == 0, capsys.readouterr().err
    await acme.revert(cid)  # acme's revert leaves acme/x's document as it was
    assert [r["status"] for r in (await other.import_documents(("y.md", b"# Notes\n\nMore notes about Porto.\n"), doc_id="y"))["results"]] == ["unchanged"]


async def test_documents_a_slash_tenant_wrote_to_the_shared_stream_go_on_from_their_versions(secured, monkeypatch):
    """A tenant holding ``/`` whose documents were written before its streams were its own keeps their versions."""
    from mnemolog.eventstore import catalogue_graph

    other = secured.client(api_key=secured.key("*", "read", "write"), tenant="acme/x")
    with monkeypatch.context() as before:  # the stream ids as they were
        before.setattr(catalogue_graph, "document_stream", lambda tenant, doc_id: f"document-{tenant}/{doc_id}")
        report = await other.import_documents(("y.md", b"# Notes\n\nNotes about Porto.\n"), doc_id="y")
    first = report["results"][0]
    assert first["status"] == "imported" and first["version"] == 1
    again = (await other.import_documents(("y.md", b"# Notes\n\nNotes about Porto.\n"), doc_id="y"))["results"][0]
    assert again["status"] == "unchanged"
    second = (await other.import_documents(("y.md", b"# Notes\n\nMore notes about Porto.\n"), doc_id="y"))["results"][0]
    assert second["status"] == "imported" and second["version"] == 2
    dry = await other.revert(report["correlation_id"], dry_run=True)  # its stream versions are not those of the stream it has now
    assert any("shared with other tenants" in conflict for conflict in dry.data["conflicts"])
