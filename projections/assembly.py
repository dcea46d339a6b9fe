"""Which projectors and read-side extras a data directory runs with."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from eventstore.settings import Settings

from .graph import GraphProjector


def default_projectors(settings: Settings, data_dir: Path) -> list[Any]:
    return [GraphProjector()]


def default_extras(settings: Settings) -> list[Callable[[Any], None]]:
    return []
