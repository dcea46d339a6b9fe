"""stdin and stdout as event-loop pipes for the MCP server's stdio transport (see :func:`stdio_pipes`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from typing import Any


class PipeLines:
    """Lines read from a pipe on the event loop: what the SDK's stdio transport iterates over."""

    def __init__(self, reader: asyncio.StreamReader):
        self.reader = reader

    def __aiter__(self) -> "PipeLines":
        return self

    async def __anext__(self) -> str:
        line = await self.reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


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
    reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
    in_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(wire_in, "rb", buffering=0))
    out_transport, out_protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, os.fdopen(wire_out, "wb", buffering=0))
    try:
        yield PipeLines(reader), PipeWriter(out_transport, out_protocol)
    finally:
        in_transport.close()
        out_transport.close()
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        os.close(saved_in)
        os.close(saved_out)


__all__ = ["PipeLines", "PipeWriter", "stdio_pipes"]
