"""Several servers on one PostgreSQL log: each a read replica with its own data directory.

Writes go to the shared log from any server; a recall with ``min_position``
on another server reads them (read-your-writes across servers); a commit on
one server reaches the other's projections without any request asking for
it (LISTEN/NOTIFY wakes its follower long before the fallback poll).
"""

from __future__ import annotations

import asyncio

from pathlib import Path

from mnemolog.api import keys
from mnemolog.api.app import create_app
from mnemolog.api.background import follow_log
from tests.api.conftest import Api
from tests.pg import fresh_database_url


async def test_a_write_on_one_server_is_read_on_another(aiohttp_server, aiohttp_client, settings_for, tmp_path):
    url = fresh_database_url()
    started = []

    async def start(name: str) -> Api:
        # The fallback poll is far away: only a notification can bring a write over in time.
        settings = settings_for(log_url=url, data_dir=str(tmp_path / name), organizer_enabled=False, projection_follow_seconds=600.0)
        app = create_app(settings, background=[follow_log])
        server = await aiohttp_server(app)
        api = Api(app, server, await aiohttp_client(server), Path(settings.data_dir))
        started.append(api)
        return api

    one, two = await start("one"), await start("two")
    assert (tmp_path / "one" / "projections.db").exists() and (tmp_path / "two" / "projections.db").exists()
    written = await one.client().add_memories({"memory": "The ferry to Cacilhas leaves every twenty minutes"})
    found = await two.client().recall("ferry Cacilhas", min_position=written.positions[-1])
    assert [h["id"] for h in found["hits"]][:1] == written.memory_ids

    later = await two.client().add_memories({"memory": "The night ferry stops at one"})
    runner = one.app[keys.service_key].runner
    for _ in range(200):  # followed without a request: the projections reach it by themselves
        if runner.position() >= later.positions[-1]:
            break
        await asyncio.sleep(0.05)
    assert runner.position() >= later.positions[-1]
    assert one.app[keys.service_key].store.last_position() == two.app[keys.service_key].store.last_position()
    for api in started:
        await api.close()
