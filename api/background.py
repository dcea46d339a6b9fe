"""Background tasks of the server, as cleanup contexts."""

from __future__ import annotations

import asyncio
import logging
from typing import AsyncIterator, Callable

from aiohttp import web

from mnemolog.eventstore.settings import Settings, setting

from . import keys

log = logging.getLogger("mnemolog.background")

FOLLOW_SECONDS = setting("projection_follow_seconds", 1.0, "How often the server catches projections up with writes from other processes.")


async def follow_log(app: web.Application) -> AsyncIterator[None]:
    """Keep projections caught up with events written by other processes (the CLI,
    importers, other servers on a shared log).

    On PostgreSQL every commit anywhere wakes it at once (LISTEN/NOTIFY), so a
    replica trails the shared log by one catch-up; the interval is the
    fallback poll.
    """
    service = app[keys.service_key]
    loop_ = asyncio.get_running_loop()
    wake = asyncio.Event()

    def listener(_position: int) -> None:
        try:
            loop_.call_soon_threadsafe(wake.set)
        except RuntimeError:  # the loop has closed
            pass

    async def loop() -> None:
        interval = float(app[keys.settings_key].projection_follow_seconds)
        run = loop_.run_in_executor
        while True:
            try:
                await asyncio.wait_for(wake.wait(), timeout=interval)
            except asyncio.TimeoutError:
                pass
            wake.clear()
            try:
                behind = await run(app[keys.readers_key], lambda: service.store.last_position() > service.runner.position())
                if behind:
                    await run(service.writer, service.sync)
            except Exception:  # keep following; the next round retries
                log.exception("projection catch-up failed")

    service.store.add_commit_listener(listener)
    task = asyncio.create_task(loop())
    yield
    service.store.remove_commit_listener(listener)
    task.cancel()
    try:
        await task
    except (asyncio.CancelledError, Exception):
        pass


def default_background(settings: Settings) -> list[Callable[[web.Application], AsyncIterator[None]]]:
    tasks: list = [follow_log]
    from .routes_organizer import organizer_task  # declares the organizer's settings too

    if settings.organizer_enabled:
        tasks.append(organizer_task)
    return tasks
