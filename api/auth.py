"""API keys: hashed at rest, each mapped to a tenant and scopes.

Keys live in ``<data_dir>/auth.db``, apart from the log: a key is a secret,
not a domain fact, and must not travel with an export. A key is shown once,
when it is created; only its SHA-256 is stored. A key whose tenant is ``*``
acts for the tenant named in the ``X-Mnemolog-Tenant`` header.

Revocation takes effect at the next request in every process that opens
the same ``auth.db`` (the server that revoked, its other workers, a server
whose key the CLI revoked): the lookup cache is dropped whenever the file
changes, which SQLite's ``PRAGMA data_version`` tells for the price of one
pragma per request. A cached lookup is also never older than
:data:`CACHE_SECONDS`, the bound on staleness should a change go unseen.
"""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
import threading
import time
import unicodedata
from pathlib import Path
from typing import Any, Callable, TypeVar

import msgspec

from mnemolog.eventstore.errors import naming_database
from mnemolog.eventstore.settings import BUSY_TIMEOUT, Settings
from mnemolog.eventstore.sqlite_tx import enter_wal

from .api_error import ApiError

T = TypeVar("T")

SCOPES = ("read", "write", "admin")
KEY_PREFIX = "mlk_"
CACHE_SECONDS = 5.0  # the longest a cached lookup is trusted, even when auth.db looks unchanged


class ApiKey(msgspec.Struct, frozen=True):
    key_id: str
    tenant: str
    scopes: tuple[str, ...]
    name: str
    created_at: float
    revoked_at: float | None = None

    def allows(self, scope: str) -> bool:
        return scope in self.scopes or "admin" in self.scopes


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()  # a header of undecodable bytes arrives with surrogates: it is no key


class KeyStore:
    def __init__(self, path: Path | str, busy_timeout: float = BUSY_TIMEOUT.default):
        """The API keys in ``path`` (``auth.db``); a connection waits ``busy_timeout`` seconds for another process's lock."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        with naming_database(self.path):  # a message names the file that is a directory, unreadable, no database
            self._conn = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=busy_timeout)
            enter_wal(self._conn, busy_timeout)
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS api_keys (key_id TEXT PRIMARY KEY, digest TEXT UNIQUE NOT NULL, tenant TEXT NOT NULL,"
                " scopes TEXT NOT NULL, name TEXT NOT NULL, created_at REAL NOT NULL, revoked_at REAL)"
            )
        self._cache: dict[str, tuple[float, ApiKey | None]] = {}
        self._data_version = self._version()

    @classmethod
    def of(cls, settings: Settings) -> "KeyStore":
        """The API keys of ``settings``' data directory (its ``auth.db``), waiting for locks as the log does."""
        return cls(Path(settings.data_dir) / "auth.db", float(settings.busy_timeout))

    def create(self, tenant: str, scopes: tuple[str, ...] | list[str], name: str = "") -> tuple[str, ApiKey]:
        """A new key: ``(secret, record)``. The secret is not stored and cannot be shown again.

        The tenant is one a request can act for (see :func:`key_tenant_problem`); the name is
        one line of text, as ``keys list`` shows it.
        """
        problem = key_tenant_problem(tenant)
        if problem:
            raise ValueError(f"tenant {problem}")
        if any(unicodedata.category(ch) == "Cc" for ch in name):
            raise ValueError("name must not hold control characters (a line break, a tab, NUL, ...)")
        bad = [s for s in scopes if s not in SCOPES]
        if bad or not scopes:
            raise ValueError(f"scopes must be among {', '.join(SCOPES)}, got {', '.join(scopes) or 'none'}")
        key_id = secrets.token_hex(6)
        secret = f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(24)}"
        record = ApiKey(key_id, tenant, tuple(dict.fromkeys(scopes)), name, time.time())
        with self._lock, naming_database(self.path):
            self._conn.execute(
                "INSERT INTO api_keys VALUES (?,?,?,?,?,?,NULL)",
                (key_id, _digest(secret), tenant, ",".join(record.scopes), name, record.created_at),
            )
        return secret, record

    def list(self) -> list[ApiKey]:
        rows = self._conn.execute(
            "SELECT key_id, tenant, scopes, name, created_at, revoked_at FROM api_keys ORDER BY created_at"
        ).fetchall()
        return [ApiKey(r[0], r[1], tuple(r[2].split(",")), r[3], r[4], r[5]) for r in rows]

    def revoke(self, key_id: str) -> bool:
        with self._lock, naming_database(self.path):
            cur = self._conn.execute(
                "UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL", (time.time(), key_id)
            )
            self._cache.clear()
        return cur.rowcount == 1

    def count_active(self) -> int:
        return self._conn.execute("SELECT count(*) FROM api_keys WHERE revoked_at IS NULL").fetchone()[0]

    def _version(self) -> int:
        """auth.db's data version: it changes when another connection (process, worker, CLI) commits to it."""
        return self._conn.execute("PRAGMA data_version").fetchone()[0]

    def authenticate(self, secret: str) -> ApiKey | None:
        """The active key for ``secret``, or None; a key revoked anywhere is refused from the next call on."""
        digest = _digest(secret)
        now = time.monotonic()
        with self._lock:
            version = self._version()
            if version != self._data_version:
                self._cache.clear()
                self._data_version = version
            cached = self._cache.get(digest)
            if cached is not None and now - cached[0] < CACHE_SECONDS:
                return cached[1]
            row = self._conn.execute(
                "SELECT key_id, tenant, scopes, name, created_at, revoked_at FROM api_keys WHERE digest = ?", (digest,)
            ).fetchone()
            record = None
            if row is not None and row[5] is None:
                record = ApiKey(row[0], row[1], tuple(row[2].split(",")), row[3], row[4], None)
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[digest] = (now, record)
            return record

    def close(self) -> None:
        self._conn.close()


#: What a refusal over HTTP asks for (RFC 9110 §11.6.1: a 401 names its challenge; RFC 6750 for bearer tokens):
#: the key as a bearer token, and with a key refused why (``invalid_token``, or ``insufficient_scope`` and the scope needed).
CHALLENGE = 'Bearer realm="mnemolog"'

#: The longest tenant name a caller may give: the log's tenant column and the ``tenant-<name>`` stream id take 255 characters.
MAX_TENANT_CHARS = 200


def key_tenant_problem(tenant: str) -> str | None:
    """What keeps ``tenant`` from being a key's tenant, or None.

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


def check_tenant(tenant: str, field: str) -> str:
    """``tenant`` as a caller names it (a header, an option); a 400 naming ``field`` when it is longer than any tenant may be."""
    if len(tenant) > MAX_TENANT_CHARS:
        raise ApiError(400, "bad_request", f"{field} must be at most {MAX_TENANT_CHARS} characters", field)
    return tenant


def authorize(
    keystore: KeyStore,
    secret: str,
    scope: str,
    *,
    tenant: str | None,
    secret_field: str,
    secret_hint: str,
    tenant_field: str,
    default_tenant: str | None = None,
) -> tuple[ApiKey, str]:
    """The key for ``secret`` and the tenant it acts for: what every front end checks before a call.

    401 without a secret or for an unknown or revoked one, 403 without
    ``scope``; a key for every tenant (``*``) acts for ``tenant`` (the one the
    request names in ``tenant_field``, else ``default_tenant``), which must then
    be named (400). A key for one tenant acts for it, and refuses a request
    that names another (403), which it once served as its own tenant without a
    word, writes included.
    ``secret_field`` and ``tenant_field`` name where the caller gives them (a
    header over HTTP, an option for MCP) and ``secret_hint`` how, so that the
    error says what to fix.
    """
    if not secret:
        raise ApiError(401, "unauthorized", f"an API key is needed: {secret_hint}", secret_field, headers={"WWW-Authenticate": CHALLENGE})
    key = keystore.authenticate(secret)
    if key is None:
        raise ApiError(401, "unauthorized", "unknown or revoked API key", secret_field, headers={"WWW-Authenticate": f'{CHALLENGE}, error="invalid_token"'})
    if not key.allows(scope):
        challenge = f'{CHALLENGE}, error="insufficient_scope", scope="{scope}"'
        raise ApiError(403, "forbidden", f"this key lacks the {scope!r} scope", None, headers={"WWW-Authenticate": challenge})
    if key.tenant != "*":
        if tenant and tenant != key.tenant:
            raise ApiError(403, "forbidden", f"this key acts for tenant {key.tenant!r} only, not {tenant!r}", tenant_field)
        return key, key.tenant
    tenant = tenant or default_tenant
    if not tenant:
        raise ApiError(400, "bad_request", f"a key for every tenant must name one in {tenant_field}", tenant_field)
    return key, tenant


def still_authorized(check: Callable[[], Any] | None, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` once ``check()`` (the caller's key checked again, as it was on arrival) passes.

    A request waits after its key was checked: for the writer, behind other
    writes; for a reader thread, behind other reads. Revocation takes effect at
    once, so what it queued runs only if its key is still good when its turn
    comes; else ``check`` raises the 401 (it costs a pragma, see
    :meth:`KeyStore.authenticate`). None: no key to check (auth off).
    """
    if check is not None:
        check()
    return fn(*args, **kwargs)
