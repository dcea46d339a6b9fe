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

from hashlib import sha256
from typing import Iterable

from .schema import MAX_NAME, MAX_STREAM_ID


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
