"""The refusal a request gets, apart from the middleware that answers it (:mod:`.errors`).

Key checks and tenant names raise it from the command line too (``serve``,
``keys``, ``mcp``), which then need not load aiohttp: its import makes TLS
contexts from the system's certificates, a good part of a command's start.
"""

from __future__ import annotations


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, field: str | None = None, *, headers: dict[str, str] | None = None, **extra):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.headers = headers
        self.extra = extra
