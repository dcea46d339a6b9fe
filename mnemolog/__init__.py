"""mnemolog: an event-sourced memory store for AI agents.

The public API, imported on first use so that ``import mnemolog`` stays cheap:

>>> from mnemolog import Client, EventStore, MemoryService, MnemologClient, create_app

The layers install as subpackages: :mod:`mnemolog.eventstore` (the log and
the commands), :mod:`mnemolog.projections` (the read side),
:mod:`mnemolog.api` (the HTTP server and client) and :mod:`mnemolog.tools`
(the ``mnemolog`` command line).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what a type checker sees of the lazy names below
    from mnemolog.api.app import create_app
    from mnemolog.api.client import ApiError, MnemologClient
    from mnemolog.api.sync_client import Client
    from mnemolog.eventstore import ANY, NO_STREAM, Digest, EventStore, StreamAppend
    from mnemolog.eventstore.settings import Settings
    from mnemolog.projections.service import MemoryService

_PUBLIC = {
    "EventStore": "mnemolog.eventstore",
    "StreamAppend": "mnemolog.eventstore",
    "Digest": "mnemolog.eventstore",
    "ANY": "mnemolog.eventstore",
    "NO_STREAM": "mnemolog.eventstore",
    "Settings": "mnemolog.eventstore.settings",
    "MemoryService": "mnemolog.projections.service",
    "create_app": "mnemolog.api.app",
    "MnemologClient": "mnemolog.api.client",
    "Client": "mnemolog.api.sync_client",
    "ApiError": "mnemolog.api.client",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'mnemolog' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
