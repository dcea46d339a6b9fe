"""API keys: hashed at rest, each mapped to a tenant and scopes.

Keys live in ``<data_dir>/auth.db``, apart from the log: a key is a secret,
not a domain fact, and must not travel with an export. Servers sharing a
PostgreSQL log share their keys in its database instead (see
:mod:`mnemolog.api.auth_postgres`). A key is shown once,
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
import threading
import time
import unicodedata
from pathlib import Path
from typing import Any, Callable, TypeVar

import msgspec

from mnemolog.eventstore.bounds import EVERY_TENANT_REFUSED, MAX_TENANT_CHARS, tenant_problem
from mnemolog.eventstore.settings import BUSY_TIMEOUT, Settings

from .api_error import ApiError
from .key_rows import SqliteKeyRows

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


def _record(row: tuple) -> ApiKey:
    return ApiKey(row[0], row[1], tuple(row[2].split(",")), row[3], row[4], row[5])


class KeyStore:
    """The API keys: made, listed, revoked, and looked up for every request, a lookup cached until the keys change.

    The rows are in ``auth.db`` (:class:`SqliteKeyRows`), or, for servers
    sharing a PostgreSQL log, in that database
    (:class:`~mnemolog.api.auth_postgres.PostgresKeyRows`): see :meth:`of`.
    """

    def __init__(self, path: Path | str | None = None, busy_timeout: float = BUSY_TIMEOUT.default, *, rows: Any = None):
        """The API keys in ``path`` (``auth.db``; a connection waits ``busy_timeout`` seconds for another process's
        lock), or in ``rows`` (a store of the same methods as :class:`SqliteKeyRows`)."""
        self._rows = rows if rows is not None else SqliteKeyRows(Path(path), busy_timeout)
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, ApiKey | None]] = {}
        self._data_version = self._rows.version()
        self._version_read_at = time.monotonic()

    @classmethod
    def of(cls, settings: Settings, data_dir: Path | str | None = None) -> "KeyStore":
        """The API keys of the servers of ``settings``: those of a PostgreSQL log (``MNEMOLOG_LOG_URL``) share them
        in its database, any key from the data directory's ``auth.db`` taken in; else ``auth.db``, waiting for locks
        as the log does. ``data_dir``: the data directory, when not ``settings``' own."""
        local = Path(data_dir or settings.data_dir) / "auth.db"
        if is_shared(settings):
            from .auth_postgres import PostgresKeyRows

            return cls(rows=PostgresKeyRows.open(settings.log_url, take_in=local, busy_timeout=float(settings.busy_timeout)))
        return cls(local, float(settings.busy_timeout))

    def create(self, tenant: str, scopes: tuple[str, ...] | list[str], name: str = "") -> tuple[str, ApiKey]:
        """A new key: ``(secret, record)``. The secret is not stored and cannot be shown again.

        The tenant is one a request can act for (see :func:`~mnemolog.eventstore.bounds.tenant_problem`); the name is
        one line of text, as ``keys list`` shows it.
        """
        problem = tenant_problem(tenant)
        if problem:
            raise ValueError(f"tenant {problem}")
        if any(unicodedata.category(ch) == "Cc" for ch in name):
            raise ValueError("name must not hold control characters (a line break, a tab, NUL, ...)")
        if len(name) > MAX_KEY_NAME_CHARS:
            raise ValueError(f"name must be at most {MAX_KEY_NAME_CHARS} characters, got {len(name):,}")
        bad = [s for s in scopes if s not in SCOPES]
        if bad or not scopes:
            raise ValueError(f"scopes must be among {', '.join(SCOPES)}, got {', '.join(scopes) or 'none'}")
        key_id = secrets.token_hex(6)
        secret = f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(24)}"
        record = ApiKey(key_id, tenant, tuple(dict.fromkeys(scopes)), name, time.time())
        with self._lock:
            self._rows.insert((key_id, _digest(secret), tenant, ",".join(record.scopes), name, record.created_at, None))
        return secret, record

    def list(self) -> list[ApiKey]:
        with self._lock:
            return [_record(row) for row in self._rows.rows()]

    def revoke(self, key_id: str) -> bool:
        with self._lock:
            done = self._rows.revoke(key_id, time.time())
            self._cache.clear()
        return done

    def count_active(self) -> int:
        with self._lock:
            return self._rows.count_active()

    def authenticate(self, secret: str) -> ApiKey | None:
        """The active key for ``secret``, or None; a key revoked anywhere is refused from the next call on (from
        the store's ``recheck_seconds`` on, for a store whose change marker costs a round trip to a server)."""
        digest = _digest(secret)
        now = time.monotonic()
        with self._lock:
            if now - self._version_read_at >= self._rows.recheck_seconds:
                version = self._rows.version()
                self._version_read_at = now
                if version != self._data_version:
                    self._cache.clear()
                    self._data_version = version
            cached = self._cache.get(digest)
            if cached is not None and now - cached[0] < CACHE_SECONDS:
                return cached[1]
            row = self._rows.find(digest)
            record = _record(row) if row is not None and row[5] is None else None
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[digest] = (now, record)
            return record

    def close(self) -> None:
        self._rows.close()


def server_keys(settings: Settings, data_dir: Path | str | None = None) -> KeyStore | None:
    """The key store a server (HTTP or MCP) looks its callers' keys up in (:meth:`KeyStore.of`); None without auth,
    where no request looks a key up: a PostgreSQL log's serving role then needs no grant on the shared keys, nor the table."""
    return KeyStore.of(settings, data_dir) if settings.auth else None


def is_shared(settings: Settings) -> bool:
    """Whether the keys of ``settings``' servers are shared in their log's database (PostgreSQL), not in ``auth.db``."""
    return keys_beside_log(str(settings.log_url or ""))


def keys_beside_log(log_url: str) -> bool:
    """Whether the log at ``log_url`` keeps the API keys of its servers in its own database: a server's (PostgreSQL) does."""
    return bool(log_url) and not log_url.startswith("sqlite")


#: What a refusal over HTTP asks for (RFC 9110 §11.6.1: a 401 names its challenge; RFC 6750 for bearer tokens):
#: the key as a bearer token, and with a key refused why (``invalid_token``, or ``insufficient_scope`` and the scope needed).
CHALLENGE = 'Bearer realm="mnemolog"'

#: The longest key name: one line of ``keys list``.
MAX_KEY_NAME_CHARS = 200

def check_tenant(tenant: str, field: str) -> str:
    """``tenant`` as a caller names it (a header, an option); a 400 naming ``field`` when it is longer than any tenant
    may be, or ``*``: what a key's tenant says for every tenant, never a tenant (written to, no key of its own reaches it)."""
    if len(tenant) > MAX_TENANT_CHARS:
        raise ApiError(400, "bad_request", f"{field} must be at most {MAX_TENANT_CHARS} characters", field)
    if tenant == "*":
        raise ApiError(400, "bad_request", f"{field} {EVERY_TENANT_REFUSED}", field)
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
    scope_field: str | None = None,
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
    error says what to fix; ``scope_field`` is what a 403 for a missing scope
    names (MCP: the key it acts as; HTTP: none, the key being a header).
    """
    if not secret:
        raise ApiError(401, "unauthorized", f"an API key is needed: {secret_hint}", secret_field, headers={"WWW-Authenticate": CHALLENGE})
    key = keystore.authenticate(secret)
    if key is None:
        raise ApiError(401, "unauthorized", "unknown or revoked API key", secret_field, headers={"WWW-Authenticate": f'{CHALLENGE}, error="invalid_token"'})
    if not key.allows(scope):
        challenge = f'{CHALLENGE}, error="insufficient_scope", scope="{scope}"'
        raise ApiError(403, "forbidden", f"this key lacks the {scope!r} scope", scope_field, headers={"WWW-Authenticate": challenge})
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
