"""Background tasks of the server, as cleanup contexts."""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Executor
from typing import TYPE_CHECKING, AsyncIterator, Callable

from aiohttp import web

from mnemolog.eventstore.settings import Settings, setting
from mnemolog.eventstore.errors import log_failure

from . import keys

if TYPE_CHECKING:
    from mnemolog.projections.service import MemoryService

log = logging.getLogger("mnemolog.background")

FOLLOW_SECONDS = setting("projection_follow_seconds", 1.0, "How often the server catches projections up with writes from other processes.", above=0)


async def follow(service: "MemoryService", readers: Executor, wake: asyncio.Event | None = None) -> None:
    """Forever: catch the projections up with events written by other processes (the CLI, importers, servers).

    ``wake``, set by a commit listener, starts a round at once; the interval is the fallback poll.
    """
    interval = float(service.settings.projection_follow_seconds)
    run = asyncio.get_running_loop().run_in_executor
    wake = wake or asyncio.Event()
    while True:
        try:
            await asyncio.wait_for(wake.wait(), timeout=interval)
        except asyncio.TimeoutError:
            pass
        wake.clear()
        try:
            behind = await run(readers, lambda: service.store.last_position() > service.position())
            if behind:
                await run(service.writer, service.sync)
            if await run(readers, service.drop_forgotten_text):  # a forget written anywhere: no forgotten text in this process's memory
                await run(service.writer, service.finish_erasures)  # nor its keys or derived files, if the forget's process died midway
        except Exception:  # keep following; the next round retries
            log_failure(log, "projection catch-up failed")


async def follow_log(app: web.Application) -> AsyncIterator[None]:
    """Keep projections caught up with events written by other processes (the CLI,
    importers, other servers on a shared log).

    On PostgreSQL every commit anywhere wakes it at once (LISTEN/NOTIFY), so a
    replica trails the shared log by one catch-up; the interval is the
    fallback poll. Commits made through ``service.run`` on the committing
    thread (every commit on SQLite; on PostgreSQL, NOTIFY still wakes it for
    them too) do not wake it: ``run`` catches the projections up itself right after, and a
    round woken by each of them only queued a second, empty catch-up behind
    every write (and a look at the log's head on a reader thread beside it).
    """
    service = app[keys.service_key]
    loop = asyncio.get_running_loop()
    wake = asyncio.Event()

    def listener(_position: int) -> None:
        if service.catches_up_own_commits():
            return  # a command of service.run committed: run projects it itself, on the writer, at once
        try:
            loop.call_soon_threadsafe(wake.set)
        except RuntimeError:  # the loop has closed
            pass

    service.store.add_commit_listener(listener)
    task = asyncio.create_task(follow(service, app[keys.readers_key], wake))
    yield
    service.store.remove_commit_listener(listener)
    task.cancel()
    try:
        await task
    except (asyncio.CancelledError, Exception):
        pass


def default_background(settings: Settings, *, runs_organizer: bool = True) -> list[Callable[[web.Application], AsyncIterator[None]]]:
    """Following the log, and the organizer where it is on (``runs_organizer`` false: a worker of ``serve`` other than
    the one that runs it, which reports the organizer's stored progress and waits for it)."""
    tasks: list = [follow_log]
    from .routes_organizer import organizer_elsewhere, organizer_task  # declares the organizer's settings too

    if settings.organizer_enabled:
        tasks.append(organizer_task if runs_organizer else organizer_elsewhere)
    return tasks
