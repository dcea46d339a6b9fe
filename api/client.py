"""A small typed aiohttp client for mnemolog's HTTP API.

>>> async with MnemologClient("http://127.0.0.1:8765", api_key="mlk_…") as client:
...     written = await client.add({"memory": "I moved to Lisbon", "key": "home city"})
...     found = await client.recall("where do I live?", min_position=written.positions[-1])
"""

from __future__ import annotations

from typing import Any, AsyncIterator

import aiohttp
import msgspec


class ApiError(Exception):
    """A 4xx/5xx answer: ``status``, ``code``, ``message`` and the offending ``field``."""

    def __init__(self, status: int, code: str, message: str, field: str | None, body: dict[str, Any]):
        super().__init__(f"{status} {code}: {message}" + (f" (field {field})" if field else ""))
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.body = body


class Written(msgspec.Struct):
    positions: list[int]
    correlation_id: str
    replayed: bool = False
    memory_ids: list[str] = []
    data: dict[str, Any] = {}


class MnemologClient:
    def __init__(self, base_url: str, *, api_key: str | None = None, tenant: str | None = None, session: aiohttp.ClientSession | None = None, timeout: float = 30.0):
        self.base_url = base_url.rstrip("/")
        self._headers = {}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        if tenant:
            self._headers["X-Mnemolog-Tenant"] = tenant
        self._session = session
        self._own_session = session is None
        self._timeout = aiohttp.ClientTimeout(total=timeout)

    async def __aenter__(self) -> "MnemologClient":
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None and self._own_session:
            await self._session.close()
            self._session = None

    async def request(self, method: str, path: str, *, json: Any = None, params: dict | None = None, headers: dict | None = None) -> Any:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        merged = {**self._headers, **(headers or {})}
        data = msgspec.json.encode(json) if json is not None else None
        if data is not None:
            merged["Content-Type"] = "application/json"
        async with self._session.request(method, self.base_url + path, data=data, params=params, headers=merged) as response:
            body = await response.read()
            try:
                decoded = msgspec.json.decode(body) if body else None
            except msgspec.DecodeError:
                if response.status < 400:
                    raise
                # Not our JSON (a proxy, or the HTTP parser refusing the request): still an ApiError.
                raise ApiError(response.status, "http_error", body.decode("utf-8", "replace")[:500], None, {}) from None
            if response.status >= 400:
                error = (decoded or {}).get("error", {}) if isinstance(decoded, dict) else {}
                raise ApiError(response.status, error.get("code", "http_error"), error.get("message", ""), error.get("field"), decoded or {})
            return decoded

    @staticmethod
    def _write_headers(idempotency_key: str | None, if_match: int | None, correlation_id: str | None) -> dict[str, str]:
        headers = {}
        if idempotency_key:
            headers["Idempotency-Key"] = idempotency_key
        if if_match is not None:
            headers["If-Match"] = str(if_match)
        if correlation_id:
            headers["X-Correlation-Id"] = correlation_id
        return headers

    async def _write(self, method: str, path: str, body: Any = None, *, idempotency_key=None, if_match=None, correlation_id=None) -> Written:
        data = await self.request(method, path, json=body, headers=self._write_headers(idempotency_key, if_match, correlation_id))
        return msgspec.convert(data, Written)

    # -- writes ------------------------------------------------------------------------

    async def add(self, memory: dict[str, Any], **kw) -> Written:
        return await self._write("POST", "/v1/memories", {"memory": memory}, **kw)

    async def add_batch(self, memories: list[dict[str, Any]], **kw) -> Written:
        return await self._write("POST", "/v1/memories", {"memories": memories}, **kw)

    async def update(self, memory_id: str, changes: dict[str, Any], **kw) -> Written:
        return await self._write("PATCH", f"/v1/memories/{memory_id}", changes, **kw)

    async def merge(self, memory_ids: list[str], text: str | None = None, **kw) -> Written:
        return await self._write("POST", "/v1/memories/merge", {"memory_ids": memory_ids, "text": text}, **kw)

    async def archive(self, memory_id: str, reason: str = "", **kw) -> Written:
        return await self._write("POST", f"/v1/memories/{memory_id}/archive", {"reason": reason}, **kw)

    async def delete(self, memory_id: str, reason: str = "", evolve_to: str | None = None, **kw) -> Written:
        return await self._write("POST", f"/v1/memories/{memory_id}/delete", {"reason": reason, "evolve_to": evolve_to}, **kw)

    async def restore(self, memory_id: str, reason: str = "", **kw) -> Written:
        return await self._write("POST", f"/v1/memories/{memory_id}/restore", {"reason": reason}, **kw)

    async def rollback(self, memory_id: str, to_version: int, **kw) -> Written:
        return await self._write("POST", f"/v1/memories/{memory_id}/rollback", {"to_version": to_version}, **kw)

    async def supersede(self, memory_id: str, superseded_by: str, **kw) -> Written:
        return await self._write("POST", f"/v1/memories/{memory_id}/supersede", {"superseded_by": superseded_by}, **kw)

    async def link(self, source: str, target: str, edge_type: str = "RELATED", *, weight: float = 1.0, edge_id: str | None = None, **kw) -> Written:
        body = {"source": source, "target": target, "edge_type": edge_type, "weight": weight, "edge_id": edge_id}
        return await self._write("POST", "/v1/edges", body, **kw)

    async def unlink(self, edge_id: str, **kw) -> Written:
        return await self._write("DELETE", f"/v1/edges/{edge_id}", None, **kw)

    async def undo_namespace(self, prefix: str, **kw) -> Written:
        return await self._write("POST", "/v1/edges/undo-namespace", {"prefix": prefix}, **kw)

    async def revert(self, correlation_id: str, *, force: bool = False, **kw) -> Written:
        return await self._write("POST", "/v1/reverts", {"correlation_id": correlation_id, "force": force}, **kw)

    # -- reads -------------------------------------------------------------------------

    async def get(self, memory_id: str, *, as_of: int | str | None = None) -> dict[str, Any]:
        params = {"as_of": str(as_of)} if as_of is not None else None
        return await self.request("GET", f"/v1/memories/{memory_id}", params=params)

    async def history(self, memory_id: str) -> dict[str, Any]:
        return await self.request("GET", f"/v1/memories/{memory_id}/history")

    async def working_memory(self, *, as_of: int | str | None = None) -> dict[str, Any]:
        params = {"as_of": str(as_of)} if as_of is not None else None
        return await self.request("GET", "/v1/working-memory", params=params)

    async def recall(self, query: str, **options: Any) -> dict[str, Any]:
        return await self.request("POST", "/v1/recall", json={"query": query, **options})

    async def search(self, query: str, **options: Any) -> dict[str, Any]:
        return await self.request("POST", "/v1/search", json={"query": query, **options})

    async def neighbors(self, node: str, *, depth: int = 1, direction: str = "both", as_of: int | str | None = None) -> dict[str, Any]:
        params = {"node": node, "depth": str(depth), "direction": direction}
        if as_of is not None:
            params["as_of"] = str(as_of)
        return await self.request("GET", "/v1/graph/neighbors", params=params)

    async def events(self, *, after: int = 0, limit: int = 100, **filters: str) -> dict[str, Any]:
        return await self.request("GET", "/v1/events", params={"after": str(after), "limit": str(limit), **filters})

    async def tail(self, *, after: int = 0) -> AsyncIterator[dict[str, Any]]:
        """Server-sent events from ``after`` on, as decoded dicts (resumes with their ids)."""
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        headers = {**self._headers, "Last-Event-ID": str(after)}
        async with self._session.get(self.base_url + "/v1/events/stream", headers=headers, timeout=aiohttp.ClientTimeout(total=None)) as response:
            if response.status >= 400:
                body = msgspec.json.decode(await response.read())
                error = body.get("error", {})
                raise ApiError(response.status, error.get("code", ""), error.get("message", ""), error.get("field"), body)
            async for line in response.content:
                if line.startswith(b"data: "):
                    yield msgspec.json.decode(line[6:])

    async def digest(self) -> dict[str, Any]:
        return await self.request("GET", "/v1/digest")

    async def verify(self, against: str | None = None) -> dict[str, Any]:
        return await self.request("GET", "/v1/verify", params={"against": against} if against else None)

    async def capabilities(self) -> dict[str, Any]:
        return await self.request("GET", "/v1/capabilities")

    async def health(self) -> dict[str, Any]:
        return await self.request("GET", "/health")
