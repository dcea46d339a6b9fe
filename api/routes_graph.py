"""Graph reads: neighbours, a bounded subgraph, stats."""

from __future__ import annotations

from typing import Annotated

from aiohttp import web
from msgspec import Meta

from mnemolog.eventstore.model import NotFound
from mnemolog.projections.service import MemoryService

from . import keys, operations
from .errors import ApiError
from .routing import RouteTable, authenticate, check_as_of, decode, param, query_edge_types, query_int, read
from .schemas import EdgeType, SubgraphRequest
from .schemas_responses import GraphStatsResponse, NeighborsResponse, SubgraphResponse

routes = RouteTable()


@routes.get(
    "/v1/graph/neighbors",
    scope="read",
    summary="A node's edges (at most 1,000: edges_truncated says so) and the nodes reached from it (at most 500: truncated says so); a node that is no memory, entity or document is not found",
    query=(
        param("node", "node id", Annotated[str, Meta(min_length=1)], required=True),
        ("depth", "0..5"),
        ("direction", "out|in|both"),
        param("type", "edge type, repeatable", EdgeType),
        ("as_of", "position or time"),
    ),
    response=NeighborsResponse,
)
async def neighbors(request: web.Request) -> dict:
    _, tenant = authenticate(request, "read")
    node = request.query.get("node")
    if not node:
        raise ApiError(422, "invalid", "node is required", "node")
    depth = query_int(request, "depth", 1, low=0, high=5)
    direction = request.query.get("direction", "both")
    if direction not in ("out", "in", "both"):
        raise ApiError(422, "invalid", "direction must be out, in or both", "direction")
    svc = request.app[keys.service_key]
    body = await read(request, operations.neighbors, svc, tenant, node, depth, direction, query_edge_types(request), check_as_of(request.query.get("as_of")))
    return body


def _subgraph(svc: MemoryService, tenant, body: SubgraphRequest):
    position = svc.resolve_as_of(body.as_of)
    seeds = list(dict.fromkeys(body.seeds))
    for seed in seeds:  # a seed that is no node (then) is a typo or another tenant's: not found, as for neighbours
        if not operations.node_exists(svc, tenant, seed, position):
            raise NotFound("node", seed)
    # max_nodes bounds the whole answer, seeds included; one node more is asked
    # for, so that an exact fit is not reported as truncated.
    budget = body.max_nodes - len(seeds)
    reached = []
    if budget >= 0:
        reached = svc.graph.bfs(
            tenant, seeds, depth=body.depth, direction=body.direction, edge_types=body.edge_types, as_of=position, max_nodes=budget + 1
        )
    truncated = len(seeds) > body.max_nodes or len(reached) > budget
    reached = reached[: max(budget, 0)]
    nodes = list(dict.fromkeys([*seeds[: body.max_nodes], *(r.node for r in reached)]))
    edges = svc.graph.edges_between(tenant, nodes, edge_types=body.edge_types, as_of=position)  # the types the walk follows, no other
    truncated = truncated or len(edges) > body.max_edges
    memories = svc.graph.memories(tenant, nodes, as_of=position)
    return {
        "nodes": [{"id": n, "memory": memories.get(n)} for n in nodes],
        "edges": edges[: body.max_edges],
        "reached": reached,
        "truncated": truncated,
    }


@routes.post("/v1/graph/subgraph", scope="read", summary="A bounded BFS subgraph around seed nodes (a seed that is no memory, entity or document is not found)", request=SubgraphRequest, response=SubgraphResponse)
async def subgraph(request: web.Request) -> dict:
    _, tenant = authenticate(request, "read")
    body = await decode(request, SubgraphRequest)
    check_as_of(body.as_of)
    svc = request.app[keys.service_key]
    return await read(request, _subgraph, svc, tenant, body)


@routes.get("/v1/graph/stats", scope="read", summary="Counts of the tenant's memories by status and edges by type", query=(("as_of", "position or time"),), response=GraphStatsResponse)
async def graph_stats(request: web.Request) -> dict:
    _, tenant = authenticate(request, "read")
    svc = request.app[keys.service_key]
    return await read(request, svc.graph.stats, tenant, as_of=check_as_of(request.query.get("as_of")))
