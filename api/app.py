"""``create_app(settings)``: the aiohttp application.

Resources (the memory service, executors, the key store) and background
tasks live in ``cleanup_ctx``; handlers reach them through typed AppKeys.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path
from typing import Any, AsyncIterator, Callable

from aiohttp import web

from mnemolog.eventstore.settings import Settings
from mnemolog.projections.service import MemoryService

from . import keys
from .settings import read_threads  # the module declares the server's settings too
from .auth import KeyStore
from .errors import error_middleware
from .routing import ROUTES, as_of_middleware

# Route modules register themselves in ROUTES when imported.
from . import routes_graph
from . import routes_log
from . import routes_memories
from . import routes_meta
from . import routes_recall

EXTRA_ROUTE_MODULES: list[str] = ["mnemolog.api.routes_organizer", "mnemolog.api.routes_knowledge"]


def version_info() -> dict[str, str]:
    try:
        version = metadata.version("mnemolog")
    except metadata.PackageNotFoundError:
        version = "0+unknown"
    return {"version": version, "commit": _commit()}


def _commit() -> str:
    head = Path(__file__).resolve().parent.parent / ".git" / "HEAD"
    try:
        ref = head.read_text().strip()
        if ref.startswith("ref: "):
            return (head.parent / ref[5:]).read_text().strip()[:12]
        return ref[:12]
    except OSError:
        return "unknown"


def create_app(
    settings: Settings | None = None,
    *,
    service_factory: Callable[[Settings], MemoryService] | None = None,
    background: list[Callable[[web.Application], Any]] | None = None,
) -> web.Application:
    settings = settings or Settings()
    app = web.Application(middlewares=[error_middleware, as_of_middleware], client_max_size=int(settings.max_body_bytes))
    app[keys.settings_key] = settings
    app[keys.version_key] = version_info()
    for module in EXTRA_ROUTE_MODULES:
        __import__(module)
    for r in ROUTES:
        app.router.add_route(r.method, r.path, r.handler, name=r.handler.__name__ + ":" + r.method)

    async def resources(app: web.Application) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        factory = service_factory or (lambda s: MemoryService.open(s.data_dir, settings=s))
        service = await loop.run_in_executor(None, factory, settings)
        app[keys.service_key] = service
        app[keys.keystore_key] = KeyStore(Path(service.data_dir) / "auth.db")
        app[keys.readers_key] = ThreadPoolExecutor(max_workers=read_threads(settings), thread_name_prefix="mnemolog-read")
        app[keys.writer_key] = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mnemolog-write")
        yield
        app[keys.readers_key].shutdown(wait=True)
        app[keys.writer_key].shutdown(wait=True)
        app[keys.keystore_key].close()
        await loop.run_in_executor(None, service.close)

    app.cleanup_ctx.append(resources)
    for task in background or []:
        app.cleanup_ctx.append(task)
    return app
