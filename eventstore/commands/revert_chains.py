"""Which correlations a tenant's reverts undid: the chains of reverts of reverts that its ``CorrelationReverted``
markers make (a revert, its revert, and so on)."""

from __future__ import annotations

from typing import Iterable

from .. import catalogue as c
from ..store import RecordedEvent

__all__ = ["revert_chain", "undone_correlations"]


def undone_correlations(tenant_events: list[RecordedEvent]) -> set[str]:
    """The correlations whose changes no longer show: each one reverted now (its chain of reverts of odd length)
    with every revert in that chain, and the reverts in the chain of one in effect again (undone in pairs)."""
    markers = [r for r in tenant_events if isinstance(r.event, c.CorrelationReverted)]
    reverts = {r.metadata.correlation_id for r in markers}
    found: set[str] = set()
    for root in {r.event.correlation_id for r in markers} - reverts:
        chain = revert_chain(tenant_events, root)
        found.update(chain)
        if len(chain) % 2:
            found.add(root)
    return found


def revert_chain(tenant_events: Iterable[RecordedEvent], correlation_id: str) -> list[str]:
    """The chain of reverts from ``correlation_id``: the revert of it, the revert of that revert, and so on.

    ``tenant_events`` are the tenant stream's events (its ``CorrelationReverted``
    markers count, in order). An odd length means it is reverted now; an even
    one (zero included), that its changes are in effect.
    """
    reverted_by: dict[str, str] = {}
    for recorded in tenant_events:
        if isinstance(recorded.event, c.CorrelationReverted):
            reverted_by.setdefault(recorded.event.correlation_id, recorded.metadata.correlation_id)
    chain: list[str] = []
    while (correlation_id := reverted_by.get(correlation_id)) is not None and correlation_id not in chain:
        chain.append(correlation_id)
    return chain
