"""``create_app(settings)``: the aiohttp application.

The routes are those of the tables listed in :data:`ROUTE_TABLES`, one per
``routes_*`` module. Resources (the memory service, the reader pool, the key
store) and background tasks live in ``cleanup_ctx``; handlers reach them
through typed AppKeys. Writes go through the service's own writer
(``service.writer``).
"""

from __future__ import annotations

import asyncio
import functools
import subprocess
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Any, AsyncIterator, Callable

from aiohttp import web

from mnemolog.eventstore.settings import Settings
from mnemolog.projections.service import MemoryService

from . import keys
from .settings import read_threads  # the module declares the server's settings too
from .auth import server_keys
from .errors import error_middleware, handle_malformed_requests
from .routing import Route, query_parameters_middleware, router_path
from . import routes_graph, routes_knowledge, routes_log, routes_memories, routes_meta, routes_organizer, routes_recall
from . import routes_explorer
from . import routes_subjects

#: Every route table the app serves, added in this order (the whole registry:
#: a route module registers nothing by being imported).
ROUTE_TABLES = (
    routes_meta.routes,
    routes_recall.routes,
    routes_memories.routes,
    routes_graph.routes,
    routes_log.routes,
    routes_organizer.routes,
    routes_knowledge.routes,
    routes_explorer.routes,
    routes_subjects.routes,
)

#: The routes of :data:`ROUTE_TABLES`, in order.
ROUTES: tuple[Route, ...] = tuple(r for table in ROUTE_TABLES for r in table)


def version_info() -> dict[str, str]:
    try:
        version = metadata.version("mnemolog")
    except metadata.PackageNotFoundError:
        version = "0+unknown"
    return {"version": version, "commit": _source_commit()}


@functools.cache
def _source_commit() -> str:
    return source_commit(Path(__file__).resolve().parent)


def source_commit(directory: Path, tracked: str = "app.py") -> str:
    """The git commit (12 hex digits) of the checkout ``directory`` belongs to, or ``unknown``.

    Git is asked rather than ``.git`` read, so packed refs, worktrees (whose
    ``.git`` is a file) and submodules all work. ``tracked`` must be a file
    git tracks there: an installed copy that merely sits inside some other
    checkout (a virtualenv in a repository) reports ``unknown``, as does a
    machine without git.
    """

    def git(*argv: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(directory), *argv], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL
        )
        if done.returncode != 0:
            raise LookupError(done.stderr.strip())
        return done.stdout.strip()

    try:
        git("ls-files", "--error-unmatch", "--", tracked)
        return git("rev-parse", "HEAD")[:12]
    except (LookupError, OSError, subprocess.SubprocessError):
        return "unknown"


async def no_store(request: web.Request, response: web.StreamResponse) -> None:
    """Every answer leaves as ``Cache-Control: no-store`` unless its route says otherwise (the explorer's page files).

    An answer holds one tenant's data as of now, read with one key: no cache,
    shared or private, may keep it, serve it to another caller (a key sent as
    ``X-API-Key`` does not keep a shared cache from storing the answer, as
    ``Authorization`` does), or keep it past a forget or a revocation.
    """
    response.headers.setdefault("Cache-Control", "no-store")


async def closing(app: web.Application) -> None:
    """The server is shutting down: its live tails end now, rather than hold the shutdown for its whole grace period
    (an idle tail sends nothing for a client to answer, and would be cut off only when it ran out)."""
    app[keys.closing_key].set()


def create_app(
    settings: Settings | None = None,
    *,
    service_factory: Callable[[Settings], MemoryService] | None = None,
    background: list[Callable[[web.Application], Any]] | None = None,
) -> web.Application:
    settings = settings or Settings()
    handle_malformed_requests()  # a request aiohttp cannot parse is a JSON error and a warning line, not an error with a traceback
    app = web.Application(middlewares=[error_middleware, query_parameters_middleware(ROUTES)], client_max_size=int(settings.max_body_bytes))
    app[keys.settings_key] = settings
    app[keys.version_key] = version_info()
    app[keys.routes_key] = ROUTES
    app.on_response_prepare.append(no_store)
    app[keys.closing_key] = asyncio.Event()
    app.on_shutdown.append(closing)
    for r in ROUTES:
        app.router.add_route(r.method, router_path(r, ROUTES), r.handler, name=r.handler.__name__ + ":" + r.method)
        if r.method == "GET" and r.media_type != "text/event-stream":  # RFC 9110: HEAD wherever GET, its headers without the body (an endless tail has none to give)
            app.router.add_route("HEAD", router_path(r, ROUTES), r.handler, name=r.handler.__name__ + ":HEAD")

    async def resources(app: web.Application) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        factory = service_factory or (lambda s: MemoryService.open(s.data_dir, settings=s))
        service = await loop.run_in_executor(None, factory, settings)
        app[keys.service_key] = service
        try:
            keystore = await loop.run_in_executor(None, server_keys, settings, service.data_dir)
        except BaseException:
            await loop.run_in_executor(None, service.close)
            raise
        if keystore is not None:
            app[keys.keystore_key] = keystore
        app[keys.readers_key] = ThreadPoolExecutor(max_workers=read_threads(settings), thread_name_prefix="mnemolog-read")
        app[keys.readers_key].submit(service.warm)  # the lexical index loads while the server already answers
        yield
        app[keys.readers_key].shutdown(wait=True)
        if keys.keystore_key in app:
            app[keys.keystore_key].close()
        await loop.run_in_executor(None, service.close)

    app.cleanup_ctx.append(resources)
    for task in background or []:
        app.cleanup_ctx.append(task)
    return app
