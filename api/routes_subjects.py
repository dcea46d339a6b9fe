"""Erasure: forgetting a subject (crypto-shredding, see :mod:`mnemolog.eventstore.commands.subjects`)."""

from __future__ import annotations

from aiohttp import web

from mnemolog.eventstore.model import validate_subject

from .routing import RouteTable, write, write_request, write_response
from .schemas import ForgetRequest, Subject, WriteResponse

routes = RouteTable()


@routes.post(
    "/v1/subjects/{subject}/forget",
    scope="admin",
    summary="Forget a subject: destroy its keys, erase its memories from every projection, record who and why",
    request=ForgetRequest,
    response=WriteResponse,
    path_types={"subject": Subject},
)
async def forget_subject(request: web.Request) -> web.Response:
    ctx, body, svc = await write_request(request, ForgetRequest, scope="admin")
    subject = validate_subject(request.match_info["subject"])
    result = await write(request, svc.forget, ctx, subject, reason=body.reason)
    return write_response(result)
