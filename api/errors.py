"""One error middleware: every failure leaves as ``{"error": {"code", "message", "field"}}``.

Client mistakes map to 4xx with the offending field named. A database
still busy after its lock wait (SQLite's busy timeout) is a 503 with
``Retry-After``: the request may be sent again, and nothing was half-written
(each write is one transaction). A full disk is a 507, and a write the log
took but the projections could not follow says it was written (see
:class:`~mnemolog.projections.service.WrittenNotProjected`). Anything else
is a bug, logged with its traceback and answered with a bare 500.
"""

from __future__ import annotations

import logging
import re
import sqlite3

import msgspec
from aiohttp import web
from aiohttp.http_exceptions import ContentEncodingError, HttpProcessingError
from aiohttp.web_protocol import RequestPayloadError

from mnemolog.eventstore.errors import ConcurrencyError, IdempotencyConflict, is_storage_full, sqlite_error_is
from mnemolog.eventstore.model import Conflict, NotFound, ValidationError
from mnemolog.projections.service import WrittenNotProjected

log = logging.getLogger("mnemolog.api")


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, field: str | None = None, *, headers: dict[str, str] | None = None, **extra):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.headers = headers
        self.extra = extra


#: Seconds a client is asked to wait (``Retry-After``) when the database stayed busy.
BUSY_RETRY_AFTER_S = 1

_LOCK_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def is_lock_contention(exc: BaseException) -> bool:
    """True when ``exc`` is SQLite's "database is locked" / "busy", raw or wrapped by SQLAlchemy (``.orig``)."""
    return sqlite_error_is(exc, _LOCK_CODES, "locked", "busy")  # BUSY_SNAPSHOT, BUSY_RECOVERY, ... too


class ErrorBody(msgspec.Struct):
    code: str
    message: str
    field: str | None = None


class ErrorResponse(msgspec.Struct):
    error: ErrorBody


_PATH = re.compile(r"at `\$\.?([^`]*)`")
_UNKNOWN = re.compile(r"(?:unknown|missing required) field `([^`]*)`")


def field_of(exc: msgspec.ValidationError | msgspec.DecodeError) -> str | None:
    """The dotted path of the offending field; None when the problem is the body as a whole (the callers say "body")."""
    found = _PATH.search(str(exc))
    path = found.group(1) if found else ""
    unknown = _UNKNOWN.search(str(exc))  # name an unknown or missing field itself, not only the object holding it
    if unknown:
        path = f"{path}.{unknown.group(1)}" if path else unknown.group(1)
    return path or None


def error_response(status: int, code: str, message: str, field: str | None = None, headers: dict[str, str] | None = None, **extra) -> web.Response:
    body = {"error": {"code": code, "message": message, "field": field, **extra}}
    return web.Response(status=status, body=msgspec.json.encode(body), content_type="application/json", headers=headers)


_STATUS_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid",
}


def as_api_error(exc: BaseException) -> ApiError | None:
    """The client's mistake that ``exc`` reports, as an :class:`ApiError`; None for anything else (a bug).

    The one mapping from the product's exceptions to codes and fields, shared
    by the HTTP middleware and the MCP tools.
    """
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, ValidationError):
        return ApiError(422, "invalid", str(exc), exc.field)
    if isinstance(exc, msgspec.ValidationError):
        return ApiError(422, "invalid", str(exc), field_of(exc) or "body")
    if isinstance(exc, msgspec.DecodeError):
        return ApiError(400, "malformed_json", f"the body is not valid JSON: {exc}", field_of(exc) or "body")
    if isinstance(exc, NotFound):
        return ApiError(404, "not_found", str(exc), None)
    if isinstance(exc, Conflict):
        return ApiError(409, "conflict", str(exc), exc.field, current_version=exc.current_version)
    if isinstance(exc, ConcurrencyError):
        return ApiError(409, "version_conflict", str(exc), None, current_version=exc.actual)
    if isinstance(exc, IdempotencyConflict):
        return ApiError(409, "idempotency_conflict", str(exc), "Idempotency-Key")
    if isinstance(exc, WrittenNotProjected):  # never "send it again": that would write it twice
        cause = as_api_error(exc.cause)
        status, code = (cause.status, cause.code) if cause is not None and cause.status >= 500 else (500, "internal")
        why = {"insufficient_storage": "the disk holding the data directory is full", "busy": "their database stayed busy past its lock wait"}
        result = exc.result
        return ApiError(
            status,
            code,
            f"the write was committed (correlation {result.correlation_id}); the projections could not follow it"
            f" ({why.get(code, 'an internal error')}), and reads show it once they have: do not send it again",
            None,
            written=True,
            correlation_id=result.correlation_id,
            first_position=result.first_position,
            last_position=result.last_position,
        )
    if is_storage_full(exc):
        return ApiError(507, "insufficient_storage", "the disk holding the data directory is full: free space, then send the request again", None)
    if is_lock_contention(exc):
        return ApiError(
            503, "busy", "the database stayed busy past its lock wait; send the request again", None, headers={"Retry-After": str(BUSY_RETRY_AFTER_S)}
        )
    if isinstance(exc, HttpProcessingError):  # a part of the request that is read late (a multipart body) does not parse
        return ApiError(400, "bad_request", f"the request body does not parse: {exc.message}", "body")
    if isinstance(exc, RequestPayloadError):  # the body as read: aiohttp's parser failed on it, the cause says why
        if isinstance(exc.__cause__, ContentEncodingError):
            return ApiError(400, "bad_request", f"the body does not decode as its Content-Encoding says: {exc.__cause__.message.strip()}", "Content-Encoding")
        return ApiError(400, "bad_request", f"the request body does not parse: {exc}", "body")
    return None


@web.middleware
async def error_middleware(request: web.Request, handler):
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        code = _STATUS_CODES.get(exc.status, "http_error")
        message = exc.reason if exc.status != 413 else "the request body is too large"
        # A 405 keeps its Allow header (RFC 9110: the methods the resource takes).
        headers = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None
        return error_response(exc.status, code, message, "body" if exc.status == 413 else None, headers)
    except Exception as exc:
        known = as_api_error(exc)
        if known is not None:
            if known.status >= 500:  # with the traceback when it is a bug behind a committed write
                log.warning("%s %s answered %d: %s", request.method, request.path, known.status, exc, exc_info=exc if known.status == 500 else None)
            return error_response(known.status, known.code, known.message, known.field, known.headers, **known.extra)
        # a bug: never a client's fault
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_response(500, "internal", "internal error", None)


class MalformedRequests(logging.Filter):
    """aiohttp answers a request it cannot parse (a bad request line, a header with a control character, headers
    over its limits: a port scanner's or a broken client's bytes) with a plain 400 before any handler runs, and logs
    it as an ERROR with a traceback. That is no failure of the server: this filter makes the record one warning
    line naming the peer and what was wrong. A 5xx of the parser stays an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, HttpProcessingError) and 400 <= (error.code or 500) < 500:
            peer = record.args[0] if isinstance(record.args, tuple) and record.args else "an unknown peer"
            record.msg, record.args = "refused a malformed request from %s (%s): %s", (peer, error.code, " ".join(str(error.message).split()))
            record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
            record.exc_info = record.exc_text = None
        return True


MALFORMED_REQUESTS = MalformedRequests()


def quiet_malformed_requests() -> None:
    """Install :data:`MALFORMED_REQUESTS` on aiohttp's server logger (once, however many apps are made)."""
    logger = logging.getLogger("aiohttp.server")
    if MALFORMED_REQUESTS not in logger.filters:
        logger.addFilter(MALFORMED_REQUESTS)
