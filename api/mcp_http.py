"""The MCP front end over streamable HTTP: the request-body limit answered as every other error is.

The MCP SDK refuses a body over its limit (4 MiB by default) with a plain-text
``413 Request body too large``. Over HTTP the server takes what the HTTP API
takes (``MNEMOLOG_MAX_BODY_BYTES``), and a body over it gets a JSON-RPC error
carrying the API's error envelope (``payload_too_large``, naming ``body``), as
an over-long line does over stdio.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from .errors import ApiError, jsonrpc_refusal


def refusal(limit: int) -> bytes:
    """The JSON-RPC answer to a request body over ``limit`` bytes (no id can be read from a body left unread)."""
    error = ApiError(413, "payload_too_large", f"the request body is larger than this server takes ({limit:,} bytes, MNEMOLOG_MAX_BODY_BYTES): send less at a time (a batch in parts)", "body")
    return json.dumps(jsonrpc_refusal(error, None)).encode()


def body_limited(app: Callable[..., Any], limit: int) -> Callable[..., Any]:
    """``app`` (the SDK's ASGI app, built with ``max_request_body_size=limit``) with its 413 answered in JSON."""
    body = refusal(limit)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), (b"cache-control", b"no-store")]

    async def limited(scope: dict, receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        refused = False

        async def answer(message: dict) -> None:
            nonlocal refused
            if message["type"] == "http.response.start" and message["status"] == 413:
                refused = True
                await send({"type": "http.response.start", "status": 413, "headers": headers})
                await send({"type": "http.response.body", "body": body})
            elif not refused:  # the SDK's plain-text body of its 413 is dropped
                await send(message)

        await app(scope, receive, answer)

    return limited
