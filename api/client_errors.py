"""The errors the client raises: an :class:`ApiError` subclass per kind of error answer, chosen by :func:`error_for`.

Each carries the server's JSON error (``status``, ``code``, ``message``,
``field`` and the whole ``body``); :mod:`mnemolog.api.client` re-exports them.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import msgspec


class ApiError(Exception):
    """An error answer: ``status``, ``code``, ``message``, the offending ``field`` and the whole JSON ``body``.

    ``idempotency_key``: the key a write was sent with (None for a read), to
    send the same write again later and have it written once.
    """

    idempotency_key: str | None = None

    def __init__(self, status: int, code: str, message: str, field: str | None, body: dict[str, Any]):
        super().__init__(f"{status} {code}: {message}" + (f" (field {field})" if field else ""))
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.body = body


class InvalidInputError(ApiError):
    """400, 415 or 422: the request is wrong; ``field`` names what (``body`` for the body as a whole)."""


class AuthenticationError(ApiError):
    """401: no key, or an unknown or revoked one."""


class ForbiddenError(ApiError):
    """403: the key lacks the operation's scope."""


class NotFoundError(ApiError):
    """404: no such memory, entity, edge or tenant (at that position)."""


class ConflictError(ApiError):
    """409: the request conflicts with the current state."""


class VersionConflictError(ConflictError):
    """409: ``expected_version`` (``If-Match``) is not the current version; ``current_version`` is."""

    @property
    def current_version(self) -> int | None:
        return self.body.get("error", {}).get("current_version")


class IdempotencyConflictError(ConflictError):
    """409: the idempotency key was used before for a different request."""


class PayloadTooLargeError(ApiError):
    """413: the body or an uploaded file is larger than the server takes."""


class ServerError(ApiError):
    """5xx: a server fault (never the caller's)."""


class UnexpectedResponseError(ApiError):
    """A success status whose body is not the operation's answer: a proxy's own page, an empty body, a server of another version.

    ``code`` is ``unexpected_response``; ``message`` names the request, the
    content type that came and the start of the body.
    """


_BY_STATUS: dict[int, type[ApiError]] = {400: InvalidInputError, 401: AuthenticationError, 403: ForbiddenError, 404: NotFoundError, 409: ConflictError, 413: PayloadTooLargeError, 415: InvalidInputError, 422: InvalidInputError}
_BY_CODE: dict[str, type[ApiError]] = {"version_conflict": VersionConflictError, "idempotency_conflict": IdempotencyConflictError}


def error_for(status: int, body: bytes, *, expected_version: str | None = None) -> ApiError:
    """The exception for an error answer, by its code, else by its status.

    The server answers every state conflict with code ``conflict`` (a revert
    that later changes block, an ``as_of`` past the head, an archived memory
    archived again); it is a :class:`VersionConflictError` only when the
    request expected a version (``If-Match``: ``expected_version``) and the
    memory is at another one.
    """
    try:
        decoded = msgspec.json.decode(body) if body else {}
    except msgspec.DecodeError:
        decoded = {}
    error = decoded.get("error") if isinstance(decoded, dict) else None
    if not isinstance(error, dict):  # not our JSON (a proxy, or the HTTP parser refusing the request)
        error, decoded = {"code": "http_error", "message": body.decode("utf-8", "replace")[:500]}, {}
    code = str(error.get("code") or "http_error")
    current = error.get("current_version")
    if code == "conflict" and expected_version is not None and current is not None and str(current) != expected_version:
        kind: type[ApiError] = VersionConflictError
    else:
        kind = _BY_CODE.get(code) or _BY_STATUS.get(status) or (ServerError if status >= 500 else ApiError)
    return kind(status, code, str(error.get("message") or ""), error.get("field"), decoded)


class ConnectionFailedError(aiohttp.ClientConnectionError):
    """No answer came on any attempt: the connection was refused, dropped or cut off mid-answer (the last cause chained).

    A write may have been done all the same: send it again with its ``idempotency_key``.
    """

    idempotency_key: str | None = None


class RequestTimeoutError(TimeoutError):
    """No answer came within the client's ``timeout`` on any attempt (a :class:`TimeoutError`); ``idempotency_key`` as for :class:`ConnectionFailedError`."""

    idempotency_key: str | None = None


def transport_error(method: str, url: str, attempts: int, exc: BaseException, timeout: float | None) -> ConnectionFailedError | RequestTimeoutError:
    """What a request raises when its last attempt got no answer: the request, how often it was tried, and why."""
    tried = f"{attempts} attempt" + ("s" if attempts > 1 else "")
    if isinstance(exc, asyncio.TimeoutError):
        return RequestTimeoutError(f"{method} {url}: no answer within {timeout:g} s ({tried})")
    return ConnectionFailedError(f"{method} {url}: {exc or type(exc).__name__} ({tried})")


def unexpected_response(method: str, path: str, status: int, content_type: str, body: bytes, problem: str) -> UnexpectedResponseError:
    """The error for a success answer that is not the operation's: what came, and why it is not the answer."""
    shown = body.decode("utf-8", "replace")[:200]
    message = f"{method} {path} answered {status} with {content_type or 'no Content-Type'}, not the operation's answer ({problem})"
    return UnexpectedResponseError(status, "unexpected_response", message + (f": {shown!r}" if shown else ""), None, {})


#: The longest the client waits on a ``Retry-After`` (a server asking for more is sent the request again after it).
MAX_RETRY_AFTER_S = 5.0


def retry_after_seconds(value: str) -> float:
    """The seconds a ``Retry-After`` asks for (a number; a date or nonsense: one second), at most :data:`MAX_RETRY_AFTER_S`."""
    try:
        seconds = float(value)
    except ValueError:
        seconds = 1.0
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S) if seconds == seconds else 1.0
