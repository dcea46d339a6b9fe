"""The server's log follower: what wakes it, in the process that writes."""

from __future__ import annotations

import asyncio
from pathlib import Path

from mnemolog.api import keys
from mnemolog.api.app import create_app
from mnemolog.api.background import follow_log
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.projections import text_caches
from mnemolog.projections.service import MemoryService
from tests.api.conftest import Api


async def test_writes_through_the_service_leave_the_follower_asleep_and_a_straight_commit_wakes_it(aiohttp_server, aiohttp_client, settings_for):
    """``service.run`` projects its own commits, so the follower is not woken for them (each woken round
    queued a second catch-up behind the write); a commit of this process outside ``run`` still wakes it."""
    # The fallback poll is far away: only a commit can wake the follower in time.
    settings = settings_for(organizer_enabled=False, projection_follow_seconds=600.0)
    app = create_app(settings, background=[follow_log])
    server = await aiohttp_server(app)
    api = Api(app, server, await aiohttp_client(server), Path(settings.data_dir))
    service = app[keys.service_key]
    looks: list[int] = []
    position = service.position

    def looked() -> int:  # the follower's round compares the log's head with this
        looks.append(1)
        return position()

    service.position = looked
    try:
        client = api.client()
        for i in range(5):
            written = await client.add_memories(memories=[{"memory": f"a note written over HTTP, number {i}"}, {"memory": f"and its pair, number {i}"}])
            assert written.positions[-1] == service.store.last_position()
        await asyncio.sleep(0.3)
        assert looks == []
        assert position() == service.store.last_position()  # projected by the writes themselves

        # A command called on the writer without ``run``: it commits, and nothing projects it but the follower.
        appended = await asyncio.get_running_loop().run_in_executor(
            service.writer, service.memories.add, CommandContext(tenant="default"), [MemoryContent(memory="appended beside run")]
        )
        for _ in range(200):
            if position() >= appended.last_position:
                break
            await asyncio.sleep(0.05)
        assert position() >= appended.last_position and looks
    finally:
        await api.close()


async def test_a_forget_written_by_another_process_empties_the_servers_caches_of_text_within_a_round(aiohttp_server, aiohttp_client, settings_for):
    """Another process forgets a subject, and applies the forget to the projections both share: the server
    never applies it itself, and its follower is what drops the text its caches hold (see ``text_caches``)."""
    settings = settings_for(organizer_enabled=False, projection_follow_seconds=0.05)
    app = create_app(settings, background=[follow_log])
    server = await aiohttp_server(app)
    api = Api(app, server, await aiohttp_client(server), Path(settings.data_dir))
    try:
        await api.client().add_memories(memories=[{"memory": "Quillbert Vandermoot hums in the lift", "subject": "u-9"}])
        with MemoryService.open(Path(settings.data_dir), settings=settings) as forgetter:
            forgetter.forget(CommandContext(tenant="default", actor="privacy-officer"), "u-9", reason="erasure request")
            applied = text_caches.drops()  # the forgetter's own, as it applied the forget
            for _ in range(100):
                if text_caches.drops() > applied:
                    break
                await asyncio.sleep(0.05)
            assert text_caches.drops() > applied, "the server's follower never dropped its caches after the forget"
    finally:
        await api.close()
