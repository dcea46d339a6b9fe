"""Fixtures shared by the projection tests: an empty log, a writer of memory events, a service."""

from __future__ import annotations

import pytest

from mnemolog.eventstore import EventStore
from mnemolog.projections.service import MemoryService
from tests.projections.support import Log


@pytest.fixture
def store(tmp_path):
    s = EventStore.open(tmp_path)
    yield s
    s.close()


@pytest.fixture
def log(store):
    return Log(store)


@pytest.fixture
def settings():
    """The service's settings (None: the defaults); a test module overrides this fixture for its own."""
    return None


@pytest.fixture
def svc(tmp_path, settings):
    service = MemoryService.open(tmp_path / "data", settings=settings)
    yield service
    service.close()
