"""Erasure: forgetting a subject (crypto-shredding, see :mod:`mnemolog.eventstore.commands.subjects`)."""

from __future__ import annotations

from aiohttp import web

from .routing import RouteTable, write, write_request, write_response
from .schemas import ForgetRequest, ForgetSubject, WriteResponse

routes = RouteTable()


@routes.post(
    "/v1/subjects/{subject}/forget",
    scope="admin",
    summary="Forget a subject (or @tenant: the tenant's own key): destroy its keys, erase its memories from every read and projection, record who and why; data.plaintext_positions names the events the log keeps in plaintext (written unsealed)",
    request=ForgetRequest,
    response=WriteResponse,
    path_types={"subject": ForgetSubject},
)
async def forget_subject(request: web.Request) -> web.Response:
    ctx, body, svc = await write_request(request, ForgetRequest, scope="admin")
    result = await write(request, svc.forget, ctx, request.match_info["subject"], reason=body.reason)  # the command checks the name
    return write_response(result)
