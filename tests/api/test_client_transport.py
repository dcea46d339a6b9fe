"""The clients against what is not a mnemolog server answering well: a proxy's own pages, a dead port, a silent peer, a stream that stops.

Each failure is raised as a client error that says what happened (and is
documented by the client), never as a decoding error of the client's own
parsing or an endless retry.
"""

from __future__ import annotations

import pytest
from aiohttp import web

from mnemolog.api.client import ApiError, MnemologClient, UnexpectedResponseError


async def serving(aiohttp_server, **routes) -> str:
    """A bare aiohttp server answering GET ``path`` with ``handler`` for each ``path=handler``; its base URL."""
    app = web.Application()
    for path, handler in routes.items():
        app.router.add_get(path, handler)
    server = await aiohttp_server(app)
    return str(server.make_url("")).rstrip("/")


async def test_a_success_answer_that_is_not_the_apis_json_is_an_unexpected_response_error(aiohttp_server):
    async def login_page(request: web.Request) -> web.Response:  # a proxy's own page, with a 200
        return web.Response(text="<html>sign in to the proxy</html>", content_type="text/html")

    async def other_json(request: web.Request) -> web.Response:  # JSON, but not the operation's answer
        return web.json_response({"status": "up"})

    async def empty(request: web.Request) -> web.Response:
        return web.Response(status=200)

    url = await serving(aiohttp_server, **{"/v1/digest": login_page, "/health": other_json, "/v1/capabilities": empty})
    async with MnemologClient(url) as client:
        with pytest.raises(UnexpectedResponseError) as page:
            await client.digest()
        assert isinstance(page.value, ApiError) and page.value.status == 200 and page.value.code == "unexpected_response"
        assert "GET /v1/digest" in page.value.message and "text/html" in page.value.message and "sign in to the proxy" in page.value.message
        with pytest.raises(UnexpectedResponseError) as mismatched:
            await client.health()
        assert "head_position" in mismatched.value.message or "required" in mismatched.value.message
        with pytest.raises(UnexpectedResponseError) as nothing:
            await client.capabilities()
        assert "empty" in nothing.value.message
