"""Background tasks of the server, as cleanup contexts."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Executor
from typing import TYPE_CHECKING, AsyncIterator, Callable

from aiohttp import web

from mnemolog.eventstore.settings import Settings, setting

from . import keys

if TYPE_CHECKING:
    from mnemolog.projections.service import MemoryService

log = logging.getLogger("mnemolog.background")

FOLLOW_SECONDS = setting("projection_follow_seconds", 1.0, "How often the server catches projections up with writes from other processes.")


async def follow(service: "MemoryService", readers: Executor) -> None:
    """Forever: catch the projections up with events written by other processes (the CLI, importers, servers)."""
    interval = float(service.settings.projection_follow_seconds)
    run = asyncio.get_running_loop().run_in_executor
    while True:
        await asyncio.sleep(interval)
        try:
            behind = await run(readers, lambda: service.store.last_position() > service.position())
            if behind:
                await run(service.writer, service.sync)
        except Exception:  # keep following; the next round retries
            log.exception("projection catch-up failed")


async def follow_log(app: web.Application) -> AsyncIterator[None]:
    """Keep projections caught up with events written by other processes (the CLI, importers)."""
    task = asyncio.create_task(follow(app[keys.service_key], app[keys.readers_key]))
    yield
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
