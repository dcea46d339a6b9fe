"""What the explorer page reads beyond the other routes: who the key is, the timeline, a neighbourhood page, a correlation.

Plain functions run in a reader thread, like :mod:`mnemolog.api.operations`:
each takes the service and the caller's tenant and returns the JSON-ready
answer. ``as_of`` is resolved by the service (a position or an ISO-8601 time).
"""

from __future__ import annotations

from typing import Any

import msgspec

from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.commands.revert_chains import revert_chain
from mnemolog.eventstore.erased import ErasedMemories
from mnemolog.eventstore.model import NotFound
from mnemolog.projections.service import MemoryService

from .auth import SCOPES, ApiKey
from .operations import node_exists, since_drop

EDGES_PER_NODE = 8  # edges a memory neighbourhood page draws at most, for each node it shows


def whoami(key: ApiKey | None, tenant: str, *, auth: bool) -> dict[str, Any]:
    """The key's tenant and scopes (every scope when the server runs without auth), never its secret."""
    if key is None:
        return {"auth": auth, "tenant": tenant, "key_id": None, "name": None, "scopes": list(SCOPES)}
    scopes = list(SCOPES) if "admin" in key.scopes else [s for s in SCOPES if s in key.scopes]
    return {"auth": auth, "tenant": tenant, "key_id": key.key_id, "name": key.name, "scopes": scopes}


def timeline(svc: MemoryService, tenant: str, limit: int) -> dict[str, Any]:
    """The tenant's commits as marks for a slider over positions and times (an even sample beyond ``limit``)."""
    head = svc.store.last_position()
    count, commits = svc.store.tenant_commits(tenant, limit, since=since_drop(svc, tenant, 0) + 1)
    return {
        "tenant": tenant,
        "head_position": head,
        "commits": count,
        "sampled": len(commits) < count,
        "marks": [msgspec.structs.asdict(m) for m in commits],
    }


def neighborhood(
    svc: MemoryService,
    tenant: str,
    node: str,
    kind: str,
    depth: int,
    direction: str,
    types: list[str] | None,
    limit: int,
    offset: int,
    as_of: Any,
) -> dict[str, Any]:
    """One page of a node's neighbourhood, ready to draw: the nodes (seed first) with labels, and the edges between them.

    ``kind`` memory walks the graph's edges (a BFS over memories and the
    nodes they link to); ``entity`` walks the entities' relations. Nodes
    come in BFS order, ``limit`` a page from ``offset``; the BFS stops one
    node past the page, so a page costs what its nodes cost, however big the
    neighbourhood. Both walks keep the order they reached the nodes in
    (not by score): cut one node past any page, it is the start of the whole
    walk, so pages neither repeat nor skip a node, and an entity
    neighbourhood pages past the cap of ``/related``'s walk. A page read at the head
    reads the graph as of the position the projections stand at, and says
    it (``position``): the next pages, read ``as_of`` it, continue the same
    walk while writes go on.
    """
    position = svc.resolve_as_of(as_of)
    read_at = svc.position() if position is None else position
    if kind == "entity":
        seed = svc.knowledge.get(tenant, node, as_of=read_at)
        if seed is None:
            raise NotFound("entity", node)
        # In walk order, cut just past the page: the first part of the whole walk, whatever its size.
        reached_all, more = svc.knowledge.related_walk(tenant, node, depth, direction, types, as_of=read_at, max_nodes=offset + limit, by_score=False)
        total: int | None = None if more else len(reached_all)
        page = reached_all[offset : offset + limit]
        shown = [node, *(r.id for r in page)]
        visible = set(shown)
        edges = {}
        for r in page:
            for rel in r.path:
                if rel.source_id in visible and rel.target_id in visible:
                    key = f"{rel.source_id}|{rel.relation_type}|{rel.target_id}"
                    edges[key] = {"id": key, "source": rel.source_id, "target": rel.target_id, "type": rel.relation_type, "weight": rel.weight}
        edge_list = list(edges.values())
        edges_cut = False
        placed = [{"id": r.id, "depth": r.depth, "score": r.score} for r in page]
    else:
        reached = svc.graph.bfs(
            tenant, [node], depth=depth, direction=direction, edge_types=types, as_of=read_at, max_nodes=offset + limit + 1, by_score=False
        )
        if not reached and not node_exists(svc, tenant, node, read_at):
            raise NotFound("node", node)
        page = reached[offset : offset + limit]
        more = len(reached) > offset + limit
        total = None if more else len(reached)
        shown = [node, *(r.node for r in page)]
        between = svc.graph.edges_between(tenant, shown, edge_types=types, as_of=read_at)
        # At most EDGES_PER_NODE a node shown; cut, the edges that brought the walk to the page's nodes first, so the drawing stays connected.
        walked = {r.path[-1] for r in page if r.path}
        drawn = sorted(between, key=lambda e: e.edge_id not in walked)[: EDGES_PER_NODE * limit]
        edges_cut = len(between) > len(drawn)
        edge_list = [{"id": e.edge_id, "source": e.source, "target": e.target, "type": e.edge_type, "weight": e.weight} for e in drawn]
        placed = [{"id": r.node, "depth": r.depth, "score": r.score} for r in page]
    memories = svc.graph.memories(tenant, shown, as_of=read_at)
    entities = svc.knowledge.many(tenant, [n for n in shown if n not in memories], as_of=read_at)

    def describe(node_id: str) -> dict[str, Any]:
        if node_id in memories:
            m = memories[node_id]
            return {"kind": "memory", "label": m.memory, "status": m.status, "version": m.version}
        if node_id in entities:
            e = entities[node_id]
            return {"kind": "entity", "label": e.name, "entity_type": e.entity_type}
        return {"kind": "node", "label": node_id}

    nodes = [{"id": node, "depth": 0, "score": 1.0, **describe(node)}, *({**p, **describe(p["id"])} for p in placed)]
    return {
        "node": node,
        "kind": kind,
        "as_of": position,
        "position": read_at,
        "depth": depth,
        "direction": direction,
        "offset": offset,
        "limit": limit,
        "total": total,
        "edges_truncated": edges_cut,
        "more": more,
        "next_offset": offset + len(page) if more else None,
        "nodes": nodes,
        "edges": edge_list,
    }


def correlation(svc: MemoryService, tenant: str, correlation_id: str, after: int, limit: int) -> dict[str, Any]:
    """What one correlation (a request, an import, an organizer pass) wrote: a page of its events, and the reverts of it.

    ``reverted`` says whether its changes are undone now: a revert of it that
    was itself reverted leaves it in effect (``revert_chain``: its revert,
    the revert of that revert, and so on; odd, it is reverted).
    """
    floor = since_drop(svc, tenant, 0)
    found = svc.store.read_all(max(after, floor), limit + 1, tenant=tenant, correlation_id=correlation_id)
    if not found and (after <= floor or not svc.store.read_all(floor, 1, tenant=tenant, correlation_id=correlation_id)):
        raise NotFound("correlation", correlation_id)  # whatever the cursor: an empty last page is one of a correlation that wrote
    page = found[:limit]
    markers = svc.store.read_all(floor, tenant=tenant, stream_id=c.tenant_stream(tenant), types=["CorrelationReverted"])  # a drop ends the reverts too
    reverted_by = [
        {
            "position": r.position,
            "recorded_at": r.to_dict()["recorded_at"],
            "correlation_id": r.metadata.correlation_id,
            "actor": r.metadata.actor,
            "forced": r.event.forced,
            "reverted": len(r.event.reverted_positions),
        }
        for r in markers
        if r.event.correlation_id == correlation_id
    ]
    chain = revert_chain(markers, correlation_id)  # as the revert command reads it: what a revert of it would do now
    reverts = next((r.event.correlation_id for r in markers if r.metadata.correlation_id == correlation_id), None)
    erased = ErasedMemories.of(svc.store, tenant)
    return {
        "correlation_id": correlation_id,
        "events": [erased.mask(r).to_dict() for r in page],
        "more": len(found) > limit,
        "next_after": page[-1].position if page else after,
        "reverted_by": reverted_by,
        "reverts": reverts,
        "reverted": len(chain) % 2 == 1,
        "revert_chain": chain,
    }
