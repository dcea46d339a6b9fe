"""What the client tests share: a live ``mnemolog serve`` with keys, and a TCP proxy on loopback that drops a connection."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator
from urllib.parse import urlparse

from tests.serving import create_key, serve


@dataclass
class Live:
    url: str
    key: str  # read, write, admin on "default"
    reader: str  # read only on "default"
    scratch: str  # read, write, admin on "scratch" (dropped by the tests)
    data_dir: Path


@contextlib.contextmanager
def live_server(tmp: Path, **settings: str) -> Iterator[Live]:
    data_dir = tmp / "data"
    key = create_key(data_dir)
    reader = create_key(data_dir, scopes="read")
    scratch = create_key(data_dir, tenant="scratch")
    with serve(data_dir, tmp / "serve.log", auth="on", organizer_enabled="off", synchronous="NORMAL", **settings) as server:
        yield Live(server.url, key, reader, scratch, data_dir)


class CuttingProxy:
    """A TCP proxy to ``upstream`` that cuts its first connection after forwarding ``cut_after`` bytes of the answer.

    With ``cut_after=0`` the request reaches the server and is answered, but
    the answer never reaches the client: a write that happened and a client
    that cannot know it. Later connections pass through untouched.
    """

    def __init__(self, upstream: str, cut_after: int = 0):
        parsed = urlparse(upstream)
        self.host, self.port = parsed.hostname, parsed.port
        self.cut_after = cut_after
        self.connections = 0
        self.cut = asyncio.Event()
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task] = set()

    async def __aenter__(self) -> "CuttingProxy":
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc) -> None:
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._tasks.add(asyncio.current_task())
        self.connections += 1
        cutting = self.connections == 1
        up_reader, up_writer = await asyncio.open_connection(self.host, self.port)

        async def upstream() -> None:
            while data := await reader.read(65536):
                up_writer.write(data)
                await up_writer.drain()

        pump = asyncio.create_task(upstream())
        sent = 0
        try:
            while data := await up_reader.read(65536):
                if cutting and sent + len(data) >= self.cut_after:
                    writer.write(data[: self.cut_after - sent])
                    await writer.drain()
                    self.cut.set()
                    writer.transport.abort()
                    return
                writer.write(data)
                sent += len(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            pump.cancel()
            up_writer.close()
            writer.close()
            self._tasks.discard(asyncio.current_task())
