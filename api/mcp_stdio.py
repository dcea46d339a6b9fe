"""stdin and stdout as event-loop pipes for the MCP server's stdio transport (see :func:`stdio_pipes`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import stat
from typing import Any

from .errors import ApiError, jsonrpc_refusal

#: The longest message (one line) read from stdin; the HTTP API takes bodies of 16 MiB.
MAX_LINE_BYTES = 64 * 1024 * 1024
#: The id of a JSON-RPC message that names it before its params (after jsonrpc and method, if at all).
_LEADING_ID = re.compile(rb'\s*\{(?:\s*"(?:jsonrpc|method)"\s*:\s*"[^"\\]*"\s*,)*\s*"id"\s*:\s*(-?[0-9]{1,18}|"(?:[^"\\]|\\.){0,200}")')


class PipeLines:
    """Lines read from a pipe on the event loop: what the SDK's stdio transport iterates over.

    A line longer than :data:`MAX_LINE_BYTES` is dropped and answered on
    ``out`` as too large (for its id when the message names it first, as
    clients write them), rather than stopping the server.
    """

    def __init__(self, reader: asyncio.StreamReader, out: "PipeWriter"):
        self.reader = reader
        self.out = out

    def __aiter__(self) -> "PipeLines":
        return self

    async def __anext__(self) -> str:
        while True:
            try:
                line = await self.reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as eof:  # the last line, without its newline
                line = eof.partial
            except asyncio.LimitOverrunError as overrun:
                await self._refuse(await self.reader.readexactly(min(overrun.consumed, 4096)))
                continue
            if not line:
                raise StopAsyncIteration
            text = line.decode("utf-8", errors="replace")
            if not text.strip():
                continue
            refusal = _unreadable(text, line)
            if refusal is None:
                return text
            await self.out.write(json.dumps(refusal) + "\n")
            await self.out.flush()

    async def _refuse(self, head: bytes) -> None:
        """Drop the rest of an overlong line and answer it, naming the request by the id ``head`` starts with."""
        while True:
            try:
                await self.reader.readuntil(b"\n")
                break
            except asyncio.IncompleteReadError:
                break
            except asyncio.LimitOverrunError as more:
                await self.reader.readexactly(more.consumed)
        error = ApiError(413, "payload_too_large", f"the message is larger than this server reads ({MAX_LINE_BYTES // 2**20} MiB): send less at a time (a batch in parts)", "params")
        await self.out.write(json.dumps(jsonrpc_refusal(error, _leading_id(head))) + "\n")
        await self.out.flush()


def _unreadable(text: str, line: bytes) -> dict | None:
    """The JSON-RPC error answering ``text`` when it is no message the SDK reads (None when it is one).

    The SDK's stdio transport drops such a line without a word (not JSON, a
    number out of its range, an escaped lone surrogate, a batch, nesting too
    deep), and a client waiting for its answer waits for ever. It is read
    here as the SDK reads it, and answered: a parse error, or an invalid
    request, for its id when the message names it first.
    """
    import pydantic
    from mcp import types

    try:
        types.jsonrpc_message_adapter.validate_json(text, by_name=False)  # as the SDK reads a line
        return None
    except pydantic.ValidationError as exc:
        problem = exc.errors(include_url=False)[0]
        parse = problem["type"] == "json_invalid"
        what = problem["msg"] if parse else "not a JSON-RPC request, notification or response (one message a line; no batches)"
        error = ApiError(400, "bad_request", f"the message does not read: {what}", "params")
        return jsonrpc_refusal(error, _leading_id(line[:4096]), -32700 if parse else -32600)


def _leading_id(head: bytes) -> int | str | None:
    """The id ``head`` names first; None when it names none there (JSON-RPC's id of a request it cannot tell)."""
    named = _LEADING_ID.match(head)
    try:
        return json.loads(named.group(1)) if named else None
    except ValueError:  # a bad escape inside the string
        return None


class PipeWriter:
    """Text written to a pipe on the event loop: what the SDK's stdio transport writes to."""

    def __init__(self, transport: asyncio.WriteTransport, protocol: Any):
        self.writer = asyncio.StreamWriter(transport, protocol, None, asyncio.get_running_loop())

    async def write(self, text: str) -> None:
        self.writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self.writer.drain()


@contextlib.asynccontextmanager
async def stdio_pipes():
    """stdin and stdout as event-loop pipes, or ``(None, None)`` when they are not pipes.

    The SDK's own stdio streams hand every line read and every write to a
    worker thread; on busy cores each hand-off costs about a millisecond.
    Pipes (what an MCP client launching this server gives it) are read and
    written on the event loop instead. As the SDK does, file descriptors 0
    and 1 are pointed at the null device and at stderr while serving, so
    that stray output never corrupts the protocol.
    """
    if not all(stat.S_ISFIFO(os.fstat(fd).st_mode) or stat.S_ISSOCK(os.fstat(fd).st_mode) for fd in (0, 1)):
        yield None, None
        return
    loop = asyncio.get_running_loop()
    wire_in, wire_out = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)
    os.close(devnull)
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
    in_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(wire_in, "rb", buffering=0))
    out_transport, out_protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, os.fdopen(wire_out, "wb", buffering=0))
    try:
        out = PipeWriter(out_transport, out_protocol)
        yield PipeLines(reader, out), out
    finally:
        in_transport.close()
        out_transport.close()
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)


__all__ = ["PipeLines", "PipeWriter", "stdio_pipes"]
