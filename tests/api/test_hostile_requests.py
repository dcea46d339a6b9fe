"""Hostile requests outside the body: headers that are not UTF-8, a one-value parameter given twice, ``as_of`` at the calendar's edges.

Header values whose bytes are not UTF-8 are a 400 naming the header, and write nothing (they were 500s).

aiohttp keeps such bytes as lone surrogates; the tenant, the idempotency key
and the correlation id go into SQL and JSON, which take none. The requests
are written on a raw socket: an HTTP client library sends text headers only.
"""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from aiohttp import web

from mnemolog.api import keys

from .test_errors import assert_error_body


async def send(api, method: str, path: str, headers: list[bytes], body: bytes = b"") -> tuple[int, dict]:
    """One HTTP/1.1 request with headers given as bytes; its status and JSON answer."""
    host, port = api.server.host, api.server.port
    reader, writer = await asyncio.open_connection(host, port)
    try:
        head = f"{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\nContent-Length: {len(body)}\r\n".encode()
        writer.write(head + b"".join(h + b"\r\n" for h in headers) + b"\r\n" + body)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), timeout=30)
    finally:
        writer.close()
    status_line, _, rest = answer.partition(b"\r\n")
    headers_part, _, content = rest.partition(b"\r\n\r\n")
    assert b"application/json" in headers_part.lower(), answer
    return int(status_line.split()[1]), json.loads(content)


async def exchange(server, request_bytes: bytes) -> bytes:
    """``request_bytes`` sent as they are on a new connection; all the server answers until it closes it."""
    reader, writer = await asyncio.open_connection(server.host, server.port)
    try:
        writer.write(request_bytes)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), timeout=30)
    finally:
        writer.close()


@pytest.fixture(params=["c", "python"])
def parser(request, monkeypatch):
    """The server's HTTP parser: aiohttp's C one (its default when built) or its pure-Python one (without the extension)."""
    from aiohttp import http_parser, web_protocol

    if request.param == "c":
        if http_parser.HttpRequestParser is http_parser.HttpRequestParserPy:
            pytest.skip("aiohttp's C parser is not built here")
    else:
        monkeypatch.setattr(web_protocol, "HttpRequestParser", http_parser.HttpRequestParserPy)
    return request.param


ADD = b'{"memory": {"memory": "a memory sent with an odd header"}}'
JSON = b"Content-Type: application/json"


@pytest.mark.parametrize("header", ["Idempotency-Key", "X-Correlation-Id", "X-Mnemolog-Tenant"])
@pytest.mark.parametrize("auth", [False, True], ids=["no-auth", "key for every tenant"])
async def test_a_header_that_is_not_utf8_is_400_naming_it_and_writes_nothing(start, header, auth):
    api = await start(auth=auth)
    sent = [JSON]
    if auth:
        secret, _ = api.keystore.create("*", ["read", "write"], name="every tenant")
        sent.append(f"Authorization: Bearer {secret}".encode())
        if header != "X-Mnemolog-Tenant":
            sent.append(b"X-Mnemolog-Tenant: default")
    sent.append(header.encode() + b": k\xff\xfe")
    head = api.service.store.last_position()
    status, answer = await send(api, "POST", "/v1/memories", sent, ADD)
    assert status == 400, answer
    assert_error_body(answer, status)
    assert answer["error"]["field"] == header, answer
    assert api.service.store.last_position() == head
    if header == "X-Mnemolog-Tenant":  # a read names its tenant the same way
        status, answer = await send(api, "GET", "/v1/events", sent[1:])
        assert (status, answer["error"]["field"]) == (400, header), answer


async def test_the_same_headers_in_utf8_are_taken(api):
    """Text beyond ASCII, sent as UTF-8, is a valid key, correlation id and tenant."""
    sent = [JSON, "Idempotency-Key: clé-😀".encode(), "X-Correlation-Id: corrélation".encode(), "X-Mnemolog-Tenant: équipe".encode()]
    status, first = await send(api, "POST", "/v1/memories", sent, ADD)
    assert status == 201, first
    assert first["correlation_id"] == "corrélation" and not first["replayed"]
    status, again = await send(api, "POST", "/v1/memories", sent, ADD)
    assert (status, again["replayed"], again["positions"]) == (201, True, first["positions"])
    events = api.service.store.read_all(0, 100, tenant="équipe")
    assert [e.position for e in events] == first["positions"]


async def test_a_query_parameter_of_one_value_given_twice_is_422_naming_it(api):
    """Found by the hostile-client run: ``after=1&after=2`` read events after 1, keeping one of two values silently."""
    for path in ("/v1/events?after=1&after=2", "/v1/events?limit=1&limit=1000", "/v1/graph/neighbors?node=a&node=b", "/v1/entities?q=a&limit=2&limit=3"):
        response = await api.raw.get(path)
        answer = await response.json()
        assert response.status == 422, (path, answer)
        assert_error_body(answer, 422)
        assert answer["error"]["field"] == path.rsplit("&", 1)[1].split("=")[0], answer
    await api.raw.put("/v1/entities/a", json={"name": "A"})
    for path in ("/v1/events?type=MemoryAdded&type=MemoryUpdated", "/v1/graph/neighbors?node=a&type=RELATED&type=MENTIONS"):  # repeatable ones
        response = await api.raw.get(path)
        assert response.status == 200, await response.text()


@pytest.mark.parametrize("path", ["/v1/events", "/v1/graph/stats", "/v1/working-memory", "/v1/entities/person:ada", "/v1/tags", "/v1/entities/person:ada/related"])
async def test_an_as_of_time_at_the_edge_of_the_calendar_reads_before_every_event_or_is_refused_as_to_come(api, path):
    """Found by ``schemathesis run``: ``as_of=0001-01-01T00:00:03+01:00`` lies before year 1 in UTC, and was a 500.
    The last moment there is (after 9999 in UTC) is a time to come: a 409 naming as_of, never a 500."""
    from urllib.parse import quote

    await api.raw.put("/v1/entities/person:ada", json={"name": "Ada"})
    await api.raw.post("/v1/memories", json={"memory": {"memory": "a memory"}})
    before, after = quote("0001-01-01T00:00:03+01:00"), quote("9999-12-31T23:59:59-01:00")
    early = await api.raw.get(f"{path}?as_of={before}")
    assert early.status in (200, 404), await early.text()  # the entity did not exist yet
    late = await api.raw.get(f"{path}?as_of={after}")  # later than now: its answer would change with what is written until then
    answer = await late.json()
    assert late.status == 409 and answer["error"]["field"] == "as_of", answer
    if path == "/v1/events":
        assert (await early.json())["events"] == []


@pytest.mark.parametrize("path", ["/v1/graph/stats", "/v1/tags", "/v1/events?limit=5"])
async def test_an_as_of_position_not_written_yet_is_a_conflict_naming_as_of(api, path):
    await api.raw.post("/v1/memories", json={"memory": {"memory": "a memory"}})
    sep = "&" if "?" in path else "?"
    response = await api.raw.get(f"{path}{sep}as_of=999999")
    assert response.status == 409, await response.text()
    body = await response.json()
    assert body["error"]["field"] == "as_of" and "has not been written" in body["error"]["message"]


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_a_body_that_does_not_decode_as_its_content_encoding_is_400_naming_it_and_writes_nothing(start, parser, caplog, encoding):
    """It was a 500: the decompressor's error reached the handler as the body was read. Then, once answered, aiohttp
    read the rest of the body again, met the error again, and logged it as unhandled, with a traceback."""
    import gzip
    import zlib

    api = await start()
    head = api.service.store.last_position()
    with caplog.at_level(logging.INFO):
        status, answer = await send(api, "POST", "/v1/memories", [JSON, f"Content-Encoding: {encoding}".encode()], b"not compressed at all")
    assert not [(r.name, r.levelname, r.getMessage()) for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert status == 400, answer
    assert_error_body(answer, status)
    assert answer["error"]["field"] == "Content-Encoding" and encoding in answer["error"]["message"]
    assert api.service.store.last_position() == head
    packed = gzip.compress(ADD) if encoding == "gzip" else zlib.compress(ADD)
    status, answer = await send(api, "POST", "/v1/memories", [JSON, f"Content-Encoding: {encoding}".encode()], packed)
    assert status == 201, answer  # the same body, compressed as said, is taken


async def test_an_identifier_ending_in_a_line_break_is_422_naming_it_and_writes_nothing(api):
    """Python's ``$`` matches before a final line break: ``acme\\n`` was an entity beside ``acme``, ``a.md\\n`` a
    document beside ``a.md``, an edge type ``RELATED\\n`` a type of its own, and an undo of ``user:notes:\\n`` ran."""
    from .test_errors import call

    added = (await (await api.raw.post("/v1/memories", json={"memories": [{"memory": "one"}, {"memory": "two"}]})).json())["memory_ids"]
    head = api.service.store.last_position()
    await call(api, "PUT", "/v1/entities/acme%0A", json={"name": "Acme"}, status=422, field="entity_id")
    await call(api, "POST", "/v1/import/documents", json={"documents": [{"filename": "a.md", "content": "# A\n\ntext", "doc_id": "a.md\n"}]}, status=422, field="documents[0].doc_id")
    await call(api, "POST", "/v1/edges", json={"source": added[0], "target": added[1], "edge_type": "RELATED\n"}, status=422, field="edge_type")
    await call(api, "POST", "/v1/edges", json={"source": added[0], "target": added[1], "edge_id": "user:notes:1\n"}, status=422, field="edge_id")
    await call(api, "POST", "/v1/edges/undo-namespace", json={"prefix": "user:notes:\n"}, status=422, field="prefix")
    await call(api, "GET", "/v1/organizer/status", params={"wait": "5s\n", "min_position": "0"}, status=422, field="wait")
    assert api.service.store.last_position() == head


@pytest.mark.parametrize(
    "request_bytes",
    [b"GARBAGE\r\n\r\n", b"GET /v1/health HTTP/1.1\r\nX-Probe: a\x00b\r\n\r\n", b"GET /v1/health HTTP/1.1\r\nX-Long: " + b"a" * 9000 + b"\r\n\r\n"],
    ids=["no-request-line", "control-character-in-a-header", "header-over-the-limit"],
)
async def test_a_request_that_cannot_be_parsed_is_logged_as_one_warning_line(start, caplog, request_bytes):
    """aiohttp answers it with a 400 before any handler runs, and logged an ERROR with a traceback for each: a
    port scanner filled an operator's log with errors that were no failure of the server."""
    api = await start()
    with caplog.at_level(logging.INFO, logger="aiohttp.server"):
        answer = await exchange(api.server, request_bytes)
    assert answer.split(b" ", 2)[1] == b"400", answer[:80]
    records = [r for r in caplog.records if r.name == "aiohttp.server" and r.levelno >= logging.INFO]
    assert all(r.levelno == logging.WARNING and r.exc_info is None for r in records), [(r.levelname, r.getMessage()) for r in records]
    if request_bytes.startswith(b"GET "):  # bytes that are no HTTP at all aiohttp already logs at debug level only
        [record] = records
        message = record.getMessage()
        assert message.startswith("refused a malformed request from 127.0.0.1 (400): ") and "\n" not in message, message


HEAD = b"Host: localhost\r\n"
UNPARSEABLE = {
    "no-request-line": (b"GARBAGE\r\n\r\n", "request line"),
    "a-bad-version": (b"GET /v1/health HTTP/1.1 junk\r\n" + HEAD + b"\r\n", "request line"),
    "request-line-over-the-limit": (b"GET /v1/" + b"a" * 9000 + b" HTTP/1.1\r\n" + HEAD + b"\r\n", "request line"),
    "control-character-in-a-header": (b"GET /v1/health HTTP/1.1\r\n" + HEAD + b"X-Probe: a\x00b\r\n\r\n", "headers"),
    "a-space-in-a-header-name": (b"GET /v1/health HTTP/1.1\r\n" + HEAD + b"X Probe: ab\r\n\r\n", "headers"),
    "header-over-the-limit": (b"GET /v1/health HTTP/1.1\r\n" + HEAD + b"X-Long: " + b"a" * 9000 + b"\r\n\r\n", "headers"),
    "length-and-chunked-both": (b"POST /v1/memories HTTP/1.1\r\n" + HEAD + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "headers"),
    "a-bad-chunk-size": (b"POST /v1/memories HTTP/1.1\r\n" + HEAD + b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", "body"),
}


@pytest.mark.parametrize("request_bytes, field", UNPARSEABLE.values(), ids=UNPARSEABLE)
async def test_a_request_that_cannot_be_parsed_is_answered_with_a_json_error_naming_the_part_at_fault(start, request_bytes, field):
    """aiohttp answered these before any handler ran, in plain text: the one answer of the API that was no JSON error."""
    api = await start()
    head = api.service.store.last_position()
    answer = await exchange(api.server, request_bytes)
    status_line, _, rest = answer.partition(b"\r\n")
    headers, _, content = rest.partition(b"\r\n\r\n")
    assert status_line.split(b" ", 2)[1] == b"400", answer[:300]
    assert b"content-type: application/json" in headers.lower(), answer[:300]
    assert b"cache-control: no-store" in headers.lower(), answer[:300]  # as every answer of the API, this one too
    body = json.loads(content)
    assert_error_body(body, 400)
    assert body["error"]["code"] == "malformed_request" and body["error"]["field"] == field, body
    assert "\n" not in body["error"]["message"], body
    assert api.service.store.last_position() == head


@pytest.mark.parametrize("after_the_key", [b"\x01", b"\x7f", b"x" * 9000], ids=["control-character", "delete", "over-the-limit"])
@pytest.mark.parametrize("header", [b"Authorization: Bearer ", b"X-API-Key: "], ids=["Authorization", "X-API-Key"])
async def test_a_key_in_a_header_that_cannot_be_parsed_is_neither_logged_nor_echoed(start, parser, caplog, header, after_the_key):
    """aiohttp's message quotes the header's bytes, the key among them: the warning line wrote a working key into
    the server's log (and the answer sent it back), for a key followed by a stray control character or padding."""
    api = await start(auth=True)
    secret = api.key("acme", "read").encode()
    request_bytes = b"GET /v1/capabilities HTTP/1.1\r\n" + HEAD + header + secret + after_the_key + b"\r\nConnection: close\r\n\r\n"
    with caplog.at_level(logging.INFO, logger="aiohttp.server"):
        answer = await exchange(api.server, request_bytes)
    assert answer.split(b" ", 2)[1] == b"400", answer[:300]
    body = json.loads(answer.partition(b"\r\n\r\n")[2])
    assert (body["error"]["code"], body["error"]["field"]) == ("malformed_request", "headers"), body
    logged = [r.getMessage() for r in caplog.records if r.name == "aiohttp.server"]
    assert logged and all(m.startswith("refused a malformed request") for m in logged), logged
    for text in (body["error"]["message"], *logged):
        assert secret[-24:].decode() not in text and secret.decode() not in text, text
        assert "withheld" in text, text


async def test_an_app_without_the_error_middleware_keeps_aiohttps_own_answer(start, aiohttp_server):
    """The JSON answer belongs to the API's apps (those with its error middleware), not to every server of the process."""
    await start()  # the API's app is made, as in a test that also runs a fake upstream server
    other = await aiohttp_server(web.Application())
    answer = await exchange(other, b"GARBAGE\r\n\r\n")
    assert answer.split(b" ", 2)[1] == b"400" and b"application/json" not in answer.lower(), answer[:300]


async def test_aiohttp_still_builds_its_connections_where_the_json_answer_hooks_in():
    """aiohttp has no supported hook for the answer to a request it cannot parse: the API reaches it through
    internals (see :func:`mnemolog.api.errors.handle_malformed_requests`). When an aiohttp release moves them,
    this fails, naming which, rather than the API quietly answering in plain text again."""
    import inspect

    from aiohttp import web_server

    from mnemolog.api.errors import JsonErrorRequestHandler, handle_malformed_requests

    handle_malformed_requests()
    assert web_server.RequestHandler is JsonErrorRequestHandler, "aiohttp.web_server no longer builds connections from its RequestHandler name"
    server = web_server.Server(lambda request: None)
    assert type(server()) is JsonErrorRequestHandler, "web.Server() no longer makes its connection from aiohttp.web_server.RequestHandler"
    parameters = list(inspect.signature(web.RequestHandler.handle_error).parameters)
    assert parameters == ["self", "request", "status", "exc", "message"], f"RequestHandler.handle_error changed: {parameters}"


async def test_a_client_that_hangs_up_mid_body_is_one_line_in_the_log_and_writes_nothing(settings_for, caplog):
    """A body cut short by the client's hang-up is the client's doing: one info line, no "unhandled error" with a
    traceback. The server runs as ``web.run_app`` runs it (the test server cancels the handler instead)."""
    from mnemolog.api.app import create_app

    app = create_app(settings_for(), background=[])
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        with caplog.at_level(logging.INFO):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"POST /v1/memories HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n" + ADD[:20])
            await writer.drain()
            await asyncio.sleep(0.2)  # the handler is reading the body
            writer.close()  # the peer hangs up
            for _ in range(100):
                if any(r.name.startswith("mnemolog.api") for r in caplog.records):
                    break
                await asyncio.sleep(0.05)
        mine = [r for r in caplog.records if r.name.startswith("mnemolog.api")]
        assert [(r.levelno, bool(r.exc_info)) for r in mine] == [(logging.INFO, False)], [r.getMessage() for r in mine]
        assert "hung up" in mine[0].getMessage() and "/v1/memories" in mine[0].getMessage()
        assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert app[keys.service_key].store.last_position() == 0
    finally:
        await runner.cleanup()


async def send_body_after_headers(server, head: bytes, body: bytes, *, once_answered: bool = False) -> bytes:
    """A chunked request whose body is sent once the server has parsed its headers (it asked for the body with a
    ``100 Continue``, so the two reach it apart), or ``once_answered``, after the head of its answer; what the server
    answers after the ``100 Continue`` until it closes the connection."""
    reader, writer = await asyncio.open_connection(server.host, server.port)
    try:
        writer.write(head + b"Transfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n")
        await writer.drain()
        interim = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
        assert interim.startswith(b"HTTP/1.1 100 "), interim
        answered = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10) if once_answered else b""
        writer.write(body)
        await writer.drain()
        return answered + await asyncio.wait_for(reader.read(), timeout=10)  # the connection hung until the client gave up
    finally:
        writer.close()


def one_answer(answer: bytes) -> tuple[int, dict]:
    """The status and JSON body of the one HTTP answer in ``answer``."""
    assert answer.count(b"HTTP/1.1 ") == 1, answer
    status_line, _, rest = answer.partition(b"\r\n")
    headers, _, content = rest.partition(b"\r\n\r\n")
    assert b"content-type: application/json" in headers.lower(), answer
    return int(status_line.split()[1]), json.loads(content)


POST_MEMORIES = b"POST /v1/memories HTTP/1.1\r\n" + HEAD + JSON + b"\r\n"
BAD_CHUNKS = {
    "a-bad-chunk-size": b"zz\r\n{}\r\n0\r\n\r\n",
    "a-chunk-longer-than-its-size": b"2\r\n" + ADD + b"\r\n0\r\n\r\n",
    "a-bad-size-after-a-good-chunk": b"%x\r\n" % len(ADD) + ADD + b"\r\nzz\r\n",
    "a-bad-trailer": b"2\r\n{}\r\n0\r\nX Y: z\r\n\r\n",
    "a-chunk-size-line-over-the-limit": b"2" + b"0" * 9000 + b"\r\n",
}


async def test_a_chunked_body_sent_after_its_headers_is_taken(start, parser):
    api = await start()
    status, answer = one_answer(await send_body_after_headers(api.server, POST_MEMORIES + b"Connection: close\r\n", b"%x\r\n" % len(ADD) + ADD + b"\r\n0\r\n\r\n"))
    assert status == 201, answer


@pytest.mark.parametrize("body", BAD_CHUNKS.values(), ids=BAD_CHUNKS)
async def test_a_chunk_that_does_not_parse_after_the_headers_is_a_json_400_naming_the_body(start, parser, caplog, body):
    """With aiohttp's C parser the handler reading the body waited until the client hung up: the parser's error
    never reached the body. With the Python one it was a ``bad_request`` and an unhandled error with a traceback in
    the log. Now it is the same ``malformed_request`` as a bad chunk sent with its headers, and the connection closes."""
    api = await start()
    head = api.service.store.last_position()
    with caplog.at_level(logging.INFO):
        status, answer = one_answer(await send_body_after_headers(api.server, POST_MEMORIES, body))
    assert status == 400, answer
    assert_error_body(answer, status)
    assert (answer["error"]["code"], answer["error"]["field"]) == ("malformed_request", "body"), answer
    assert answer["error"]["message"].startswith("the request does not parse as HTTP: ") and "\n" not in answer["error"]["message"], answer
    assert api.service.store.last_position() == head
    logged = [(r.name, r.levelname, r.getMessage()) for r in caplog.records if r.levelno >= logging.WARNING or r.name in ("aiohttp.server", "mnemolog.api")]
    assert not logged, logged


@pytest.mark.parametrize("body", BAD_CHUNKS.values(), ids=BAD_CHUNKS)
async def test_a_chunk_that_does_not_parse_after_the_answer_closes_the_connection_without_another_answer(start, parser, caplog, body):
    """The app answered without reading the body (a request without its key), and aiohttp reads what is left of it
    before it keeps the connection: the chunk's error ends it there with no second answer (with the C parser it was
    read for 10 seconds more), and no unhandled error with a traceback in the log (an error set on it there is one)."""
    api = await start(auth=True)
    with caplog.at_level(logging.INFO):
        status, answer = one_answer(await send_body_after_headers(api.server, POST_MEMORIES, body, once_answered=True))
    assert (status, answer["error"]["code"]) == (401, "unauthorized"), answer
    assert not [(r.name, r.levelname, r.getMessage()) for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info], caplog.text
    if parser == "c":  # the Python parser ends the body with the error itself: aiohttp's one warning line (see MalformedRequests)
        assert not [(r.name, r.levelname, r.getMessage()) for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


async def test_aiohttp_still_queues_a_parse_error_where_a_body_that_stops_parsing_is_ended():
    """How :meth:`JsonErrorRequestHandler.data_received` finds a body the parser failed in (aiohttp has no hook for
    it either): the connection queues each parsed request as (message, body) and a parse error as ``_ErrInfo``. When
    an aiohttp release changes that, this fails, naming what, rather than a handler waiting on such a body again."""
    import inspect

    from aiohttp import StreamReader, http_parser, web_protocol, web_server
    from aiohttp.http_exceptions import HttpProcessingError

    from mnemolog.api.errors import handle_malformed_requests

    handle_malformed_requests()
    connection = web_server.Server(lambda request: None)()
    connection.data_received(b"POST /v1/memories HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    [(message, body)] = connection._messages
    assert not isinstance(message, web_protocol._ErrInfo) and isinstance(body, StreamReader), "a parsed request is no longer queued as (message, body)"
    connection.data_received(b"zz\r\n")
    (_, first_body), (error, _) = connection._messages
    assert first_body is body and isinstance(error, web_protocol._ErrInfo), "a parse error is no longer queued as _ErrInfo after the request it ends"
    assert isinstance(error.exc, HttpProcessingError), f"a parse error is queued as {type(error.exc).__name__}, no HttpProcessingError"
    if web_protocol.HttpRequestParser is not http_parser.HttpRequestParserPy:
        assert not body.is_eof() and body.exception() is None, "the C parser now ends the body it failed in: JsonErrorRequestHandler.data_received may go"
    parameters = list(inspect.signature(web.RequestHandler.finish_response).parameters)
    assert parameters == ["self", "request", "resp", "start_time"], f"RequestHandler.finish_response changed: {parameters}"
