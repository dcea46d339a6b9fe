"""Fixtures for the HTTP API tests: a real aiohttp server on loopback over a real SQLite data directory.

``start(**settings)`` builds ``create_app(Settings(...))`` on ``tmp_path``,
serves it with the ``aiohttp_server`` fixture (127.0.0.1, a free port) and
returns an :class:`Api` handle. ``Api.typed_client(...)`` gives a
:class:`mnemolog.api.client.MnemologClient` talking real HTTP to it (closed at
teardown); ``Api.client(...)`` a :class:`JsonClient`, the same client whose
read answers are the JSON the server sent, for the behaviour tests that
compare answers with literal JSON (the typed results are tested in
``test_client.py``); ``Api.raw`` is an aiohttp ``TestClient`` for requests the
typed client cannot make (malformed bodies, odd content types, raw headers).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, AsyncIterator

import msgspec
import pytest
from aiohttp import web

from mnemolog.api import keys
from mnemolog.api.app import create_app
from mnemolog.api.client import MnemologClient
from mnemolog.api.schemas import WriteResponse
from mnemolog.eventstore.settings import Settings


def as_json(value: Any) -> Any:
    """``value`` as the JSON it is sent as, decoded: plain dicts and lists."""
    return msgspec.json.decode(msgspec.json.encode(value))


class JsonClient(MnemologClient):
    """The client, answering reads (and the import and relink reports) as plain JSON; a write still answers a :class:`WriteResponse`."""

    async def _read(self, method: str, path: str, kind: Any, **kwargs: Any) -> Any:
        return as_json(await super()._read(method, path, kind, **kwargs))

    async def _write(self, method: str, path: str, body: Any, options: Any, kind: Any, **kwargs: Any) -> Any:
        answer = await super()._write(method, path, body, options, kind, **kwargs)
        return answer if kind is WriteResponse else as_json(answer)

    async def stream_events(self, **options: Any) -> AsyncIterator[Any]:  # type: ignore[override]
        async for event in super().stream_events(**options):
            yield as_json(event)


class Api:
    def __init__(self, app: web.Application, server, raw, data_dir: Path):
        self.app = app
        self.server = server
        self.raw = raw
        self.data_dir = data_dir
        self.url = str(server.make_url("")).rstrip("/")
        self._clients: list[MnemologClient] = []

    @property
    def service(self):
        return self.app[keys.service_key]

    @property
    def keystore(self):
        return self.app[keys.keystore_key]

    def key(self, tenant: str = "default", *scopes: str) -> str:
        """A new API key (the secret) for ``tenant`` with ``scopes`` (default read, write)."""
        secret, _ = self.keystore.create(tenant, list(scopes or ("read", "write")), name="test")
        return secret

    def client(self, api_key: str | None = None, tenant: str | None = None) -> Any:
        """A :class:`JsonClient`: read answers as JSON."""
        return self.typed_client(api_key, tenant, kind=JsonClient)

    def typed_client(self, api_key: str | None = None, tenant: str | None = None, *, kind: type[MnemologClient] = MnemologClient) -> MnemologClient:
        client = kind(self.url, api_key=api_key, tenant=tenant, timeout=20)
        self._clients.append(client)
        return client

    async def close(self) -> None:
        for client in self._clients:
            await client.close()

    async def event_count(self, client: MnemologClient) -> int:
        """How many events the client's tenant can see in /v1/events."""
        total, after = 0, 0
        while True:
            page = await client.list_events(after=after, limit=1000)
            total += len(page["events"])
            if not page["events"]:
                return total
            after = page["next_after"]


@pytest.fixture
def settings_for(tmp_path):
    """Settings on ``tmp_path/data``, isolated from the caller's MNEMOLOG_* environment."""

    def make(**overrides: Any) -> Settings:
        values = {"data_dir": str(tmp_path / "data"), "auth": False, **overrides}
        return Settings(values, env={})

    return make


@pytest.fixture
async def start(aiohttp_server, aiohttp_client, settings_for):
    started: list[Api] = []

    async def start(**overrides: Any) -> Api:
        settings = settings_for(**overrides)
        app = create_app(settings)
        server = await aiohttp_server(app)
        raw = await aiohttp_client(server)
        api = Api(app, server, raw, Path(settings.data_dir))
        started.append(api)
        return api

    yield start
    for api in started:
        await api.close()


@pytest.fixture
async def api(start) -> Api:
    """A server without auth (loopback), tenant from X-Mnemolog-Tenant or 'default'."""
    return await start()


@pytest.fixture
async def client(api) -> MnemologClient:
    return api.client()


@pytest.fixture
async def memory_id(client) -> str:
    """A memory the tests of bad input aim their routes at."""
    return (await client.add_memories({"memory": "an existing memory", "key": "existing"})).memory_ids[0]
