"""What the log holds alike on every backend: names within their columns, and no NUL in them.

SQLite stores any string in any column; PostgreSQL refuses a value longer
than its ``varchar(n)`` and any text holding NUL (U+0000), and cannot even
be asked whether such a value is stored. So the log checks the names of an
append (stream id, tenant, correlation id, idempotency key and its
fingerprint) before any
backend sees them, and refuses one that does not fit with a ``ValueError``
naming it, on every backend alike; and a read filter holding NUL matches
nothing. Payloads and metadata are JSON text, where NUL is escaped: they
hold any string.
"""

from __future__ import annotations

import unicodedata
from hashlib import sha256
from typing import Iterable

from .schema import MAX_NAME, MAX_STREAM_ID


#: The longest tenant name a caller may give: the log's tenant column and the ``tenant-<name>`` stream id take 255 characters.
MAX_TENANT_CHARS = 200


def tenant_problem(tenant: str) -> str | None:
    """What keeps ``tenant`` from being a tenant a caller names (a key's, a ``--tenant``), or None (``*``, a key's
    for every tenant, is one).

    A key's tenant is the one every request with it acts for, so it must be
    one a request can name and the log can hold: not empty, at most
    :data:`MAX_TENANT_CHARS` characters, no control character (no header
    carries one) and no space around it (a header's value is read without,
    so ``" acme "`` would be another tenant than the ``acme`` it looks like).
    """
    if not tenant:
        return "must not be empty"
    if len(tenant) > MAX_TENANT_CHARS:
        return f"must be at most {MAX_TENANT_CHARS} characters, got {len(tenant)}"
    if any(unicodedata.category(ch) == "Cc" for ch in tenant):
        return "must not hold control characters (a line break, a tab, NUL, ...)"
    if tenant != tenant.strip():
        return "must not start or end with a space"
    return None


#: Why ``*`` names no tenant, after the name of what gave it.
EVERY_TENANT_REFUSED = "names one tenant; '*' (every tenant) is a key's, never a tenant's name"


#: The longest correlation id a caller may give (a header, a ``--correlation-id``), as reverts and reads take it.
MAX_CORRELATION_CHARS = 200


class NameRefused(ValueError):
    """A name of an append that no backend holds alike; ``field`` names it."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field} {message}")
        self.field = field


def check_name(field: str, value: str | None, most: int = MAX_NAME) -> None:
    """Refuse ``value`` (None passes) when it is longer than ``most`` characters or holds NUL."""
    if value is None:
        return
    if len(value) > most:
        raise NameRefused(field, f"must be at most {most} characters, got {len(value)}")
    if "\x00" in value:
        raise NameRefused(field, "must not contain NUL (U+0000)")


def check_stream_id(stream_id: str) -> None:
    check_name("stream_id", stream_id, MAX_STREAM_ID)


def holds_nul(values: Iterable[str | None]) -> bool:
    """Whether any of ``values`` holds NUL: as a filter, it matches no stored name."""
    return any(value is not None and "\x00" in value for value in values)


def stored_key_form(key: str) -> str:
    """An idempotency key as the log stores it: whole within the column (:data:`MAX_NAME`), else ``sha256:HEX``
    (no ``/``, so never a whole key's form, see ``CommandContext.scoped_key``)."""
    return key if len(key) <= MAX_NAME else "sha256:" + sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
