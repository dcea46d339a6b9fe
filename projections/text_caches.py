"""What a process keeps in memory of memories' text between requests, and how a forget drops it.

A forget erases a subject's rows from the projections and rewrites the
files derived from them (see :meth:`MemoryService.forget`). A process also
keeps, for speed, what it computed from texts it read: the rule judge's
analyses of texts and keys and its stems of words, whether a text names a
time, the organizer's embeddings by text, the normal forms of entity names,
the alias catalogues of entity names and aliases (a forget of the tenant's
key erases those), the rows recall holds per projection state, the writer's hand-over of its
latest append, the states commands fold from long streams. Each of those registers here, and :func:`drop` empties them
all, so that no forgotten text stays in the memory of a process that goes
on running:

- the process that applies a ``SubjectForgotten`` to the projections drops
  them as it commits (:class:`~mnemolog.projections.runner.ProjectionRunner`);
- every other server process within one round of its follower
  (``MNEMOLOG_PROJECTION_FOLLOW_SECONDS``) after the forget is in the log,
  wherever it was written (:meth:`MemoryService.drop_forgotten_text`).

They fill again from what the projections hold, which no longer holds the
subject's text. Dropping everything, not only the subject's entries, keeps
the caches unaware of subjects; forgets are rare.
"""

from __future__ import annotations

import functools
import threading
import weakref
from typing import Any, Callable, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_lock = threading.Lock()
_module_caches: list[Callable[[], None]] = []  # the cache_clear of each function cache
_instances: "weakref.WeakSet[Any]" = weakref.WeakSet()  # objects with a ``drop_text()`` method, held weakly
_drops = 0  # how many times :func:`drop` ran: what a test reads


def lru_cache(maxsize: int) -> Callable[[F], F]:
    """:func:`functools.lru_cache` whose contents :func:`drop` empties: for a function of text."""

    def wrap(fn: F) -> F:
        cached = functools.lru_cache(maxsize=maxsize)(fn)
        with _lock:
            _module_caches.append(cached.cache_clear)
        return cached  # type: ignore[return-value]

    return wrap


def register(holder: Any) -> None:
    """Have :func:`drop` call ``holder.drop_text()``, for as long as ``holder`` lives."""
    with _lock:
        _instances.add(holder)


def drop() -> None:
    """Empty every registered cache of text."""
    global _drops
    with _lock:
        clears = list(_module_caches)
        holders = list(_instances)
        _drops += 1
    for clear in clears:
        clear()
    for holder in holders:
        holder.drop_text()


def drops() -> int:
    """How many times the caches were dropped in this process."""
    return _drops
