"""Memory and edge endpoints: one per command, plus the memory reads."""

from __future__ import annotations

import msgspec
from aiohttp import web

from mnemolog.eventstore.model import NotFound
from mnemolog.projections.service import MemoryService

from . import keys, operations
from .routing import (
    RouteTable,
    authenticate,
    check_as_of,
    if_match,
    json_response,
    param,
    query_int,
    typed,
    read,
    write,
    write_request,
    write_response,
)
from .schemas import (
    AddMemoriesRequest,
    Position,
    DeleteRequest,
    DropTenantRequest,
    EdgeId,
    LinkRequest,
    MergeRequest,
    ReasonRequest,
    RevertRequest,
    RollbackRequest,
    SupersedeRequest,
    UndoNamespaceRequest,
    UpdateMemoryRequest,
    WorkingMemoryResponse,
    WriteResponse,
)
from .schemas_responses import MemoryHistoryResponse, MemoryView
from .errors import ApiError

routes = RouteTable()


def _service(request: web.Request) -> MemoryService:
    return request.app[keys.service_key]


@routes.post("/v1/memories", scope="write", summary="Add one memory or an atomic batch", request=AddMemoriesRequest, response=WriteResponse, statuses=(201,))
async def add_memories(request: web.Request) -> web.Response:
    ctx, body, svc = await write_request(request, AddMemoriesRequest)
    return write_response(await write(request, operations.add_memories, svc, ctx, body), status=201)


@routes.patch("/v1/memories/{id}", scope="write", summary="Update a memory: a new version", request=UpdateMemoryRequest, response=WriteResponse)
async def update_memory(request: web.Request) -> web.Response:
    ctx, body, svc = await write_request(request, UpdateMemoryRequest)
    given = msgspec.json.decode(await request.read() or b"{}")
    result = await write(request, operations.update_memory, svc, ctx, request.match_info["id"], body, given, if_match(request))
    return write_response(result)


@routes.post("/v1/memories/merge", scope="write", summary="Merge memories into a new one", request=MergeRequest, response=WriteResponse, statuses=(201,))
async def merge_memories(request: web.Request) -> web.Response:
    ctx, body, svc = await write_request(request, MergeRequest)
    result = await write(request, svc.run, svc.memories.merge, ctx, body.memory_ids, text=body.text, expected_versions=body.expected_versions)
    return write_response(result, status=201)


def _status_route(name: str, path: str, summary: str, command_name: str, request_type):
    async def handler(request: web.Request) -> web.Response:
        ctx, body, svc = await write_request(request, request_type)
        command = getattr(svc.memories, command_name)
        kwargs = {"reason": body.reason, "expected_version": if_match(request)}
        if isinstance(body, DeleteRequest):
            kwargs["evolve_to"] = body.evolve_to
        result = await write(request, svc.run, command, ctx, request.match_info["id"], **kwargs)
        return write_response(result)

    handler.__name__ = handler.__qualname__ = name  # the operationId
    routes.post(path, scope="write", summary=summary, request=request_type, response=WriteResponse)(handler)
    return handler


archive_memory = _status_route("archive_memory", "/v1/memories/{id}/archive", "Archive a memory", "archive", ReasonRequest)
delete_memory = _status_route("delete_memory", "/v1/memories/{id}/delete", "Soft-delete a memory (optionally evolving to another)", "soft_delete", DeleteRequest)
restore_memory = _status_route("restore_memory", "/v1/memories/{id}/restore", "Restore an archived or deleted memory", "restore", ReasonRequest)


@routes.post("/v1/memories/{id}/rollback", scope="write", summary="Roll a memory back to an earlier version", request=RollbackRequest, response=WriteResponse)
async def rollback_memory(request: web.Request) -> web.Response:
    ctx, body, svc = await write_request(request, RollbackRequest)
    result = await write(
        request, svc.run, svc.memories.rollback, ctx, request.match_info["id"], body.to_version, expected_version=if_match(request), reason=body.reason
    )
    return write_response(result)


@routes.post("/v1/memories/{id}/supersede", scope="write", summary="Mark a memory superseded by a newer one", request=SupersedeRequest, response=WriteResponse)
async def supersede_memory(request: web.Request) -> web.Response:
    ctx, body, svc = await write_request(request, SupersedeRequest)
    result = await write(
        request, svc.run, svc.memories.supersede, ctx, request.match_info["id"], body.superseded_by, expected_version=if_match(request)
    )
    return write_response(result)


@routes.get("/v1/memories/{id}", scope="read", summary="A memory, at the head or as of a position or time", query=(("as_of", "position or ISO-8601 time"),), response=MemoryView)
async def get_memory(request: web.Request) -> web.Response:
    _, tenant = authenticate(request, "read")
    svc = _service(request)
    view = await read(request, svc.get, tenant, request.match_info["id"], as_of=check_as_of(request.query.get("as_of")))
    return json_response(typed(MemoryView, view), headers={"ETag": f'"{view.version}"'})



@routes.get(
    "/v1/memories/{id}/history",
    scope="read",
    summary="Every version of a memory, from its stream, a page at a time, with the entities it mentions (as of a position or time: those written by then)",
    query=(("as_of", "position or ISO-8601 time"), param("after", "the version the page starts after", Position), ("limit", f"1..{operations.HISTORY_PAGE}")),
    response=MemoryHistoryResponse,
)
async def memory_history(request: web.Request) -> dict:
    _, tenant = authenticate(request, "read")
    svc = _service(request)
    after = query_int(request, "after", 0)
    limit = query_int(request, "limit", operations.HISTORY_PAGE, low=1, high=operations.HISTORY_PAGE)
    return await read(request, operations.history, svc, tenant, request.match_info["id"], check_as_of(request.query.get("as_of")), after, limit)


def _working_memory(svc: MemoryService, tenant: str, as_of) -> WorkingMemoryResponse:
    position = svc.resolve_as_of(as_of)
    entries = svc.graph.working_memory(tenant, as_of=position, memories=True)
    return WorkingMemoryResponse(as_of=position, capacity=svc.working_capacity, entries=entries)


@routes.get(
    "/v1/working-memory",
    scope="read",
    summary="The tenant's working memory (a FIFO), oldest entry first, each with its memory",
    response=WorkingMemoryResponse,
    query=(("as_of", "position or ISO-8601 time"),),
)
async def working_memory(request: web.Request) -> WorkingMemoryResponse:
    _, tenant = authenticate(request, "read")
    svc = _service(request)
    return await read(request, _working_memory, svc, tenant, check_as_of(request.query.get("as_of")))


@routes.post("/v1/edges", scope="write", summary="Link two nodes with a typed, weighted, namespaced edge", request=LinkRequest, response=WriteResponse, statuses=(201,))
async def link(request: web.Request) -> web.Response:
    ctx, body, svc = await write_request(request, LinkRequest)
    result = await write(
        request,
        svc.run,
        svc.edges.link,
        ctx,
        body.source,
        body.target,
        body.edge_type,
        weight=body.weight,
        edge_id=body.edge_id,
        properties=body.properties,
    )
    return write_response(result, status=201)


@routes.delete(
    "/v1/edges/{edge_id}", scope="write", summary="Unlink an edge (the body, optional, gives the reason)", request=ReasonRequest, response=WriteResponse,
    path_types={"edge_id": EdgeId},
)
async def unlink(request: web.Request) -> web.Response:
    ctx, body, svc = await write_request(request, ReasonRequest)
    result = await write(request, svc.run, svc.edges.unlink, ctx, request.match_info["edge_id"], reason=body.reason)
    return write_response(result)


@routes.post("/v1/edges/undo-namespace", scope="write", summary="Remove every live edge under a namespace prefix", request=UndoNamespaceRequest, response=WriteResponse)
async def undo_namespace(request: web.Request) -> web.Response:
    ctx, body, svc = await write_request(request, UndoNamespaceRequest)
    result = await write(request, svc.run, svc.edges.undo_namespace, ctx, body.prefix, reason=body.reason)
    return write_response(result)


@routes.post("/v1/reverts", scope="write", summary="Revert everything a correlation id did (dry_run: say what it would do, write nothing)", request=RevertRequest, response=WriteResponse)
async def revert(request: web.Request) -> web.Response:
    ctx, body, svc = await write_request(request, RevertRequest)
    result = await write(request, svc.run, svc.reverts.revert, ctx, body.correlation_id, force=body.force, dry_run=body.dry_run)
    return write_response(result)


@routes.post("/v1/admin/drop-tenant", scope="admin", summary="Drop the tenant after writing an export backup", request=DropTenantRequest, response=WriteResponse)
async def drop_tenant(request: web.Request) -> web.Response:
    ctx, body, svc = await write_request(request, DropTenantRequest, scope="admin")
    if body.confirm != ctx.tenant:  # the key's tenant decides what is right, which no schema can say: a 409 naming the field
        raise ApiError(409, "confirmation_mismatch", "confirm must repeat the tenant's name", "confirm")
    try:
        result = await write(request, svc.drop_tenant, ctx, reason=body.reason)
    except NotFound:
        raise ApiError(404, "not_found", f"tenant {ctx.tenant!r} has no events", None) from None
    return write_response(result)
