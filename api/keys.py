"""Typed application keys: every shared resource of the app, in one place."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from aiohttp import web

from mnemolog.eventstore.settings import Settings

from .auth import KeyStore

if TYPE_CHECKING:
    from mnemolog.projections.service import MemoryService

settings_key: web.AppKey[Settings] = web.AppKey("settings", Settings)
service_key: web.AppKey["MemoryService"] = web.AppKey("service")
keystore_key: web.AppKey[KeyStore] = web.AppKey("keystore", KeyStore)
readers_key: web.AppKey[ThreadPoolExecutor] = web.AppKey("readers", ThreadPoolExecutor)
organizer_key: web.AppKey[object] = web.AppKey("organizer", object)
version_key: web.AppKey[dict] = web.AppKey("version", dict)
routes_key: web.AppKey[tuple] = web.AppKey("routes", tuple)  # the Routes served (mnemolog.api.routing.Route)
closing_key: web.AppKey[asyncio.Event] = web.AppKey("closing", asyncio.Event)  # set as the server shuts down: live tails end
