"""One error middleware: every failure leaves as ``{"error": {"code", "message", "field"}}``.

Client mistakes map to 4xx with the offending field named. A database
still busy after its lock wait (SQLite's busy timeout) is a 503 with
``Retry-After``: the request may be sent again, and nothing was half-written
(each write is one transaction). A full disk is a 507, and a write the log
took but the projections could not follow says it was written (see
:class:`~mnemolog.projections.service.WrittenNotProjected`). Anything else
is a bug, logged with its traceback and answered with a bare 500. A request
aiohttp cannot parse, which no middleware sees, is answered with the same
JSON error by :class:`JsonErrorRequestHandler`.
"""

from __future__ import annotations

import itertools
import logging
import re
from http import HTTPStatus
from typing import Any, Callable, Iterable

import msgspec
from aiohttp import StreamReader, web, web_server
from aiohttp.http_exceptions import (
    BadHttpMessage,
    BadStatusLine,
    ContentEncodingError,
    HttpProcessingError,
    InvalidURLError,
    LineTooLong,
    PayloadEncodingError,
    TransferEncodingError,
)
from aiohttp.web_protocol import RequestPayloadError, _ErrInfo

from mnemolog.eventstore.bounds import NameRefused
from mnemolog.eventstore.errors import ConcurrencyError, IdempotencyConflict, is_database_unreachable, is_lock_contention, is_storage_full
from mnemolog.eventstore.model import Conflict, NotFound, ValidationError
from mnemolog.projections.runner import ProjectionsReplaced
from mnemolog.projections.service import WrittenNotProjected

from .api_error import ApiError

log = logging.getLogger("mnemolog.api")


#: Seconds a client is asked to wait (``Retry-After``) when the database stayed busy.
BUSY_RETRY_AFTER_S = 1

class ErrorBody(msgspec.Struct):
    code: str
    message: str
    field: str | None = None


class ErrorResponse(msgspec.Struct):
    error: ErrorBody


#: Where msgspec says the error is, ending its message: ``at `$.memories[1].tags```, or for an object's key
#: ``at `key` in `$.properties``` (the object named: msgspec does not say which key).
_PATH = re.compile(r" - at (?:`key` in )?`\$([^`]*)`$")
_UNKNOWN = re.compile(r"(?:unknown|missing required) field `(.*?)`(?= - at `[^`]*`$|$)", re.S)
#: One step of a msgspec error path: ``.name`` (an object's member), ``[3]`` (an array's item) or ``[...]``
#: (an object's value whose key msgspec does not tell, as it tells none of a dict's).
_STEP = re.compile(r"\.([^.\[]+)|\[([0-9]+)\]|\[(\.\.\.)\]")
#: A key that reads the same as a dotted path's part: none of ``.[]"\``.
_PLAIN_KEY = re.compile(r'[^.\[\]"\\]+')


def member(path: str, key: str) -> str:
    """``path`` with ``key``'s member appended: ``path.key``, as the API names ``expected_versions.<id>`` in a 409, or
    ``path["a.b"]`` (the key as a JSON string) when the key holds a dot, a bracket, a quote or a backslash, or is
    empty or unprintable, so that no key reads as two steps (``properties.a.b``) or as another key."""
    if _PLAIN_KEY.fullmatch(key) and key.isprintable():
        return f"{path}.{key}" if path else key
    return f"{path}[{msgspec.json.encode(key).decode()}]"


def field_path(steps: Iterable[str | int]) -> str:
    """Steps (keys and indices) as the dotted path a 422 names: ``memories[1].properties.a``."""
    path = ""
    for step in steps:
        path = f"{path}[{step}]" if isinstance(step, int) else member(path, step)
    return path


def error_steps(exc: msgspec.ValidationError | msgspec.DecodeError) -> list[str | int | None] | None:
    """The steps to the value msgspec's error is about (None for a step ``[...]``), or None when its message gives no path."""
    found = _PATH.search(str(exc))
    if found is None:
        return [] if _UNKNOWN.search(str(exc)) else None
    steps: list[str | int | None] = []
    at = 0
    for step in _STEP.finditer(found.group(1)):
        if step.start() != at:
            return None
        name, index, _ = step.groups()
        steps.append(name if name is not None else int(index) if index is not None else None)
        at = step.end()
    return steps if at == len(found.group(1)) else None


def field_of(exc: msgspec.ValidationError | msgspec.DecodeError, key_at: Callable[[list[str | int]], str | None] | None = None) -> str | None:
    """The dotted path of the offending field; None when the problem is the body as a whole (the callers say "body").

    msgspec tells an object's value in a dict by ``[...]``, never by its key:
    ``key_at(steps)``, when given, is the key of the value at fault in the
    object at ``steps``, or None if it cannot tell. The path stops at that
    object when no key is told (``properties``, not ``properties[...]``),
    and so it does for a key at fault (``at `key` in `$.properties```).
    """
    steps = error_steps(exc)
    if steps is None:  # a path of another form: as msgspec gives it
        found = _PATH.search(str(exc))
        return found.group(1).lstrip(".") or None if found else None
    known: list[str | int] = []
    for step in steps:
        key = key_at(list(known)) if step is None and key_at is not None else step
        if key is None:
            return field_path(known) or None
        known.append(key)
    unknown = _UNKNOWN.search(str(exc))  # name an unknown or missing field itself, not only the object holding it
    if unknown and unknown.group(1):
        known.append(unknown.group(1))
    return field_path(known) or None


def error_response(status: int, code: str, message: str, field: str | None = None, headers: dict[str, str] | None = None, **extra) -> web.Response:
    body = {"error": {"code": code, "message": message, "field": field, **extra}}
    try:
        data = msgspec.json.encode(body)
    except UnicodeEncodeError:  # it quotes a client's bytes that are no UTF-8 (aiohttp keeps them as lone surrogates)
        data = msgspec.json.encode(_escaped(body))
    return web.Response(status=status, body=data, content_type="application/json", headers=headers)


def _escaped(value: Any) -> Any:
    """``value`` with every lone surrogate of its strings written as its escape (``\\udcff``): JSON holds no such character."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_escaped(k): _escaped(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_escaped(v) for v in value]
    return value


def error_body(error: ApiError) -> dict:
    """The error envelope, ``{"error": {"code", "message", "field"}}``, plus the status it has: what the MCP front end answers."""
    return {"error": {"code": error.code, "message": error.message, "field": error.field, "status": error.status, **error.extra}}


def mcp_message(error: ApiError) -> str:
    """An MCP error's message: the API error's, with the field it names."""
    return error.message + (f" (field: {error.field})" if error.field else "")


def jsonrpc_refusal(error: ApiError, request_id: int | str | None, code: int = -32600) -> dict:
    """The JSON-RPC answer to a message refused before the MCP SDK read it (too large, or no message it reads),
    carrying the API's error; ``code``: -32600 (invalid request) or -32700 (parse error)."""
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": mcp_message(error), "data": error_body(error)}}


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
    if isinstance(exc, NameRefused):  # a name no check of the request's own caught (the MCP tools check theirs)
        return ApiError(422, "invalid", str(exc), exc.field)
    if isinstance(exc, NotFound):
        return ApiError(404, "not_found", str(exc), exc.field)
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
    if is_database_unreachable(exc):
        return ApiError(
            503, "unavailable", "the log's database could not be reached; send the request again (under its Idempotency-Key, a write is applied once)",
            None, headers={"Retry-After": str(BUSY_RETRY_AFTER_S)},
        )
    if isinstance(exc, ProjectionsReplaced):  # an operator's doing, which only a restart undoes: no retry helps before
        return ApiError(503, "unavailable", str(exc), None)
    if is_lock_contention(exc):
        return ApiError(
            503, "busy", "the database stayed busy past its lock wait; send the request again", None, headers={"Retry-After": str(BUSY_RETRY_AFTER_S)}
        )
    if isinstance(exc, TransferEncodingError):  # a chunk that does not parse, as aiohttp's Python parser tells the handler
        return malformed_request(exc, "body")
    if isinstance(exc, HttpProcessingError):  # a part of the request that is read late (a multipart body) does not parse
        return ApiError(400, "bad_request", f"the request body does not parse: {exc.message}", "body")
    if isinstance(exc, RequestPayloadError):  # the body as read: aiohttp's parser failed on it, the cause says why
        if isinstance(exc.__cause__, ContentEncodingError):
            return ApiError(400, "bad_request", f"the body does not decode as its Content-Encoding says: {exc.__cause__.message.strip()}", "Content-Encoding")
        if isinstance(exc.__cause__, HttpProcessingError):  # its framing: a chunk or a trailer that does not parse (see JsonErrorRequestHandler)
            return malformed_request(exc.__cause__, "body")
        return ApiError(400, "bad_request", f"the request body does not parse: {exc}", "body")
    return None


def _client_gone(request: web.Request) -> bool:
    """Whether the client's connection is closed (a reset from a server this one called is another matter)."""
    transport = request.transport
    return transport is None or transport.is_closing()


#: The commands' arguments that a request gives in a header: an error naming one names the header.
_HEADER_OF_ARGUMENT = {"expected_version": "If-Match"}

#: The response a handler streams, once its status and headers are sent (see :func:`start_stream`).
STREAMED: web.RequestKey[web.StreamResponse] = web.RequestKey("streamed", web.StreamResponse)


async def start_stream(request: web.Request, response: web.StreamResponse) -> None:
    """Send ``response``'s status and headers. An error raised after this cannot be answered: the middleware
    logs it and ends the stream where it is (a client resumes, and is answered the error), instead of writing a
    second answer, status line and headers, into the body the client is reading."""
    await response.prepare(request)
    request[STREAMED] = response


def _ended_stream(request: web.Request, exc: BaseException) -> web.StreamResponse | None:
    """The stream the error ``exc`` ends, logged; None when the request's answer has not started."""
    streamed = request.get(STREAMED)
    if streamed is None:
        return None
    bug = not isinstance(exc, web.HTTPException) and as_api_error(exc) is None  # logged with its traceback
    log.warning("%s %s ended its stream: %s", request.method, request.path, exc, exc_info=exc if bug else None)
    return streamed


@web.middleware
async def error_middleware(request: web.Request, handler):
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        if (streamed := _ended_stream(request, exc)) is not None:
            return streamed
        code = _STATUS_CODES.get(exc.status, "http_error")
        message = exc.reason if exc.status != 413 else "the request body is too large"
        # A 405 keeps its Allow header (RFC 9110: the methods the resource takes).
        headers = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None
        return error_response(exc.status, code, message, "body" if exc.status == 413 else None, headers)
    except Exception as exc:
        if (streamed := _ended_stream(request, exc)) is not None:
            return streamed
        if isinstance(exc, ConnectionError) and _client_gone(request):  # not a bug: nothing to answer, nothing done
            log.info("%s %s: the client hung up before its request was read", request.method, request.path)
            return error_response(400, "bad_request", "the connection closed before the request body was read whole", "body")
        known = as_api_error(exc)
        if known is not None:
            if known.status >= 500:  # with the traceback when it is a bug behind a committed write
                log.warning("%s %s answered %d: %s", request.method, request.path, known.status, exc, exc_info=exc if known.status == 500 else None)
            field = _HEADER_OF_ARGUMENT.get(known.field or "", known.field)
            return error_response(known.status, known.code, known.message, field, known.headers, **known.extra)
        # a bug: never a client's fault
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_response(500, "internal", "internal error", None)


def one_line(message: str) -> str:
    """aiohttp's message about bytes it could not parse, on one line: without its line breaks and its ``^`` under the byte at fault."""
    return " ".join(word for word in str(message).split() if word != "^")


class MalformedRequests(logging.Filter):
    """aiohttp answers a request it cannot parse (a bad request line, a header with a control character, headers
    over its limits: a port scanner's or a broken client's bytes) before any handler runs, and logs it as an
    ERROR with a traceback. That is no failure of the server: this filter makes the record one warning line
    naming the peer and what was wrong. So is a body's error aiohttp meets reading the rest of it after the answer,
    which it logs as unhandled (the Python parser sets some on the body as aiohttp reads it, see
    :meth:`JsonErrorRequestHandler.data_received`). A 5xx of the parser stays an error."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, RequestPayloadError) and isinstance(error.__cause__, HttpProcessingError):
            error = error.__cause__
        if isinstance(error, HttpProcessingError) and 400 <= (error.code or 500) < 500:
            peer = record.args[0] if isinstance(record.args, tuple) and record.args else "an unknown peer"
            record.msg, record.args = "refused a malformed request from %s (%s): %s", (peer, error.code, parse_error_text(error, part_at_fault(error)))
            record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
            record.exc_info = record.exc_text = None
        return True


MALFORMED_REQUESTS = MalformedRequests()

#: A line too long that starts as a request line does (a method, then a path or an absolute URL), not as a header.
_REQUEST_TARGET = re.compile(rb"^(?:[A-Z]+ +)?(?:/|[a-zA-Z][a-zA-Z0-9+.-]*://)")


def part_at_fault(exc: HttpProcessingError) -> str | None:
    """Which part of a request aiohttp's parser refused: ``request line``, ``headers`` or ``body``.

    The C parser reports a bad chunk as a plain :class:`BadHttpMessage` whose
    first line names the chunk; a line over the limit is told apart by how it
    starts (the C parser gives the target or the header's value, the Python
    one the whole line).
    """
    if isinstance(exc, (BadStatusLine, InvalidURLError)):
        return "request line"
    if isinstance(exc, PayloadEncodingError) or "chunk" in exc.message.split("\n", 1)[0].lower():
        return "body"
    if isinstance(exc, LineTooLong) and exc.args:
        line = exc.args[0]
        if _REQUEST_TARGET.match(line.encode() if isinstance(line, str) else bytes(line)):
            return "request line"
    return "headers" if isinstance(exc, BadHttpMessage) else None


#: A bytes literal as aiohttp's parser quotes what it refused (``b'Authorization: Bearer mlk_...'``).
_QUOTED_BYTES = re.compile(r"""(?<![A-Za-z0-9_])b(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")""")
#: The header's name, when the quoted bytes start with it (the C parser quotes the value alone of a value too long).
_QUOTED_HEADER_NAME = re.compile(r"^b['\"]([!#$%&*+.^_`|~0-9A-Za-z-]+): ")


def parse_error_text(exc: HttpProcessingError, part: str | None) -> str:
    """What aiohttp's parser says it refused in ``part``, on one line, without the bytes of a header it quotes.

    A header may carry a secret (an API key, a cookie) which neither the
    answer nor the server's log may show: its bytes are withheld, its name
    kept when aiohttp gives it.
    """
    text = one_line(exc.message)
    if part != "headers":
        return text

    def withhold(quoted: re.Match) -> str:
        name = _QUOTED_HEADER_NAME.match(quoted.group(0))
        return f"the header {name.group(1)} (its value withheld)" if name else "a header (its bytes withheld)"

    return _QUOTED_BYTES.sub(withhold, text)


def malformed_request(exc: HttpProcessingError, part: str | None, status: int = 400) -> ApiError:
    """The request aiohttp's parser refused, as the error naming the part at fault (``part``)."""
    return ApiError(status, "malformed_request", f"the request does not parse as HTTP: {parse_error_text(exc, part)}", part)


def unparsed_request_response(status: int, exc: BaseException | None) -> web.Response:
    """The JSON error answering what aiohttp refused before any handler ran, with the status aiohttp chose; it never
    passes the app's ``on_response_prepare``, so it says ``Cache-Control: no-store`` itself, as every answer does."""
    uncached = {"Cache-Control": "no-store"}
    if isinstance(exc, HttpProcessingError) and 400 <= status < 500:
        error = malformed_request(exc, part_at_fault(exc), status)
        return error_response(error.status, error.code, error.message, error.field, headers=uncached)
    if status >= 500:
        return error_response(status, "internal", "internal error", headers=uncached)
    return error_response(status, _STATUS_CODES.get(status, "http_error"), HTTPStatus(status).phrase, headers=uncached)


class JsonErrorRequestHandler(web.RequestHandler):
    """aiohttp's connection handler, answering in JSON where aiohttp answers on its own in plain text.

    A request aiohttp cannot parse never reaches the app, its middlewares or
    its signals: aiohttp answers it from :meth:`handle_error`. On a
    connection of an app that has :func:`error_middleware` (the API's), that
    answer is the same JSON error as every other one; other apps of the
    process keep aiohttp's. aiohttp still logs the request and refuses to
    answer one whose answer has already begun.

    A body that stops parsing once its request was handed to the app (a bad
    chunk arriving after the headers) is told to the handler reading it, as
    the same JSON error: see :meth:`data_received`.
    """

    __slots__ = ("_json_errors", "_body_in_parse", "_body_answered")

    def __init__(self, manager: web.Server, **kwargs) -> None:
        super().__init__(manager, **kwargs)
        app = getattr(manager.request_handler, "__self__", None)  # an app's server handles with its bound _handle
        self._json_errors = isinstance(app, web.Application) and error_middleware in app.middlewares
        self._body_in_parse: StreamReader | None = None  # the body of the request parsed last
        self._body_answered: StreamReader | None = None  # the body of the request answered last

    def data_received(self, data: bytes) -> None:
        """Parse ``data``; when it ends a body in a parse error, the handler reading that body gets the error.

        aiohttp queues a parse error as an error answer to come after the
        requests before it. When it is in a body the app already reads, the
        C parser drops that body without ending it, and the handler waits
        for the rest until the client hangs up. The Python parser, and both
        for a body that does not decompress, set the error on the body, but
        do not end it either: once the handler has answered, aiohttp reads
        the rest of the body, meets the error again, and logs it as
        unhandled. Here the body is ended with the error, so the handler
        answers it (:func:`as_api_error`), with nothing in the log, and the
        connection takes no further request: it closes once the handler at
        work has answered, as what follows the error on it cannot be trusted
        to start a request.
        """
        queued = len(self._messages)
        super().data_received(data)
        failed = None
        for message, body in itertools.islice(self._messages, queued, None):
            if not isinstance(message, _ErrInfo):
                self._body_in_parse = body
            elif isinstance(message.exc, HttpProcessingError):
                failed = message.exc
        body = self._body_in_parse  # when the error starts a request of its own, that body is whole: aiohttp answers the error
        if self._json_errors and body is not None and not body.is_eof() and (failed is not None or body.exception() is not None):
            self._end_body_in_error(body, failed)

    def _end_body_in_error(self, body: StreamReader, exc: HttpProcessingError | None) -> None:
        """End ``body`` with ``exc`` (unless the parser set its own error), and take no further request."""
        if exc is not None and body.exception() is None and body is not self._body_answered:  # else only aiohttp's lingering close reads it still
            error = RequestPayloadError(str(exc))
            error.__cause__ = exc
            body.set_exception(error, exc)
        body.feed_eof()  # the lingering close reads no more of it: it would meet the error, and log it as unhandled
        self.close()

    async def finish_response(self, request, resp, start_time):
        """Answer ``request``: its handler is done, and what is left of its body only aiohttp reads and drops."""
        self._body_answered = request.content
        return await super().finish_response(request, resp, start_time)

    def handle_error(self, request, status: int = 500, exc: BaseException | None = None, message: str | None = None):
        answer = super().handle_error(request, status, exc, message)
        if not self._json_errors:
            return answer
        answer = unparsed_request_response(status, exc)
        answer.force_close()  # as aiohttp's: what follows on the connection cannot be trusted to start a request
        return answer


def handle_malformed_requests() -> None:
    """Answer a request aiohttp cannot parse in JSON, and log it as one warning line (once, however many apps are made).

    aiohttp has no supported hook for that answer (its web.Server builds
    every connection as ``aiohttp.web_server.RequestHandler``, and no
    setting of the app or the runner reaches it), so that name is pointed at
    :class:`JsonErrorRequestHandler`, for every server of the process. A test
    (``test_aiohttp_still_builds_its_connections_where_the_json_answer_hooks_in``)
    fails when an aiohttp release moves that.
    """
    logger = logging.getLogger("aiohttp.server")
    if MALFORMED_REQUESTS not in logger.filters:
        logger.addFilter(MALFORMED_REQUESTS)
    web_server.RequestHandler = JsonErrorRequestHandler
