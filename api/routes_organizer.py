"""The organizer over HTTP: its status (waiting for a position), and its background task.

``GET /v1/organizer/status?min_position=P&wait=5s`` answers
``{position, enabled, last_run, decisions, caught_up}``; with ``wait`` it
first waits (at most that long, 30 s at most) until the organizer has
processed position ``P`` (the log's head when ``P`` is omitted), so a client
that just wrote can read the organized result. ``decisions`` counts the
caller's tenant's decisions since the server started, and ``last_run`` /
``last_cluster`` give the caller's tenant's share of the last pass and
clustering run (its events, decisions, topics, skipped types and errors),
never another tenant's.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Annotated, AsyncIterator

from aiohttp import web
from msgspec import Meta

from mnemolog.projections.policies.organizer import Organizer, OrganizerElsewhere, stored_status

from . import keys, operations
from .errors import ApiError
from .routing import RouteTable, authenticate, param, query_int, read
from .schemas import Position
from .schemas_responses import OrganizerStatusResponse

routes = RouteTable()

log = logging.getLogger("mnemolog.organizer")
MAX_WAIT_S = 30.0
#: A wait of at most 30 s: seconds (``5``, ``2.5s``) or milliseconds (``500ms``); the OpenAPI document publishes this pattern.
WAIT_RE = re.compile(r"^(?:(?:[0-9]|[12][0-9])(?:\.[0-9]{1,3})?|30(?:\.0{1,3})?)s?$|^(?:[0-9]{1,4}|[12][0-9]{4}|30000)ms$")


def parse_wait(raw: str | None, field: str = "wait") -> float:
    """``"5s"``, ``"500ms"`` or plain seconds, at most 30 s; a bad value is a 422 naming ``field``."""
    if raw is None:
        return 0.0
    if not WAIT_RE.fullmatch(raw):
        raise ApiError(422, "invalid", f"{field} must be a duration of at most {MAX_WAIT_S:g}s, such as 5s or 500ms", field)
    return float(raw[:-2]) / 1000.0 if raw.endswith("ms") else float(raw.removesuffix("s"))


@routes.get(
    "/v1/organizer/status",
    scope="read",
    summary="The organizer's position and last run; waits (wait=5s) until it has processed min_position",
    query=(
        param("min_position", "a log position to wait for (default: the head)", Position),
        param("wait", "how long to wait, e.g. 5s or 500ms (at most 30s)", Annotated[str, Meta(pattern=WAIT_RE.pattern)]),
    ),
    response=OrganizerStatusResponse,
)
async def organizer_status(request: web.Request) -> dict:
    _, tenant = authenticate(request, "read")
    min_position = query_int(request, "min_position", None, low=0)
    wait = parse_wait(request.query.get("wait"))
    service = request.app[keys.service_key]
    if min_position is not None:  # a position not written yet: a 409, as recall answers
        operations.written(min_position, await read(request, service.store.last_position))
    organizer = request.app.get(keys.organizer_key)
    if organizer is None:
        return await read(request, stored_status, service, min_position)
    if wait > 0:
        target = min_position if min_position is not None else await read(request, service.store.last_position)
        await organizer.wait_for(target, wait)
    return await read(request, organizer.status, tenant, min_position)


async def organizer_task(app: web.Application) -> AsyncIterator[None]:
    """The organizer as a cleanup context: reads in the reader pool, writes on the service's writer."""
    loop = asyncio.get_running_loop()
    service = app[keys.service_key]
    organizer = await loop.run_in_executor(service.writer, Organizer, service, app[keys.settings_key])
    app[keys.organizer_key] = organizer
    task = asyncio.create_task(organizer.follow(read_executor=app[keys.readers_key], write_executor=service.writer))
    yield
    organizer.stopped = True
    task.cancel()
    try:
        await task
    except (asyncio.CancelledError, Exception):
        pass
    await organizer.aclose()


async def organizer_elsewhere(app: web.Application) -> AsyncIterator[None]:
    """For a worker of ``serve`` other than the organizer's: its status and waits follow the stored checkpoint."""
    app[keys.organizer_key] = OrganizerElsewhere(app[keys.service_key], app[keys.readers_key])
    yield
