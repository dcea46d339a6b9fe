"""Crypto-shredding: the personal fields of events, sealed with their subject's data key.

What is sealed. Each event type names its personal fields in its
``personal`` class attribute (a field holding a Struct with ``personal`` of
its own, like a memory's ``content``, is sealed inside it): a memory's text,
key, background, tags, sources, source URL, properties and caller embedding;
an entity's name, description, aliases and properties; a document's title,
path and source URL. Ids, types, times, statuses, positions, reasons and the
envelope stay readable to the log's machinery (guards, spans, verify,
revert). Reasons and actors are operator text: keep personal data out of
them.

How. On append, a Struct's personal fields are encoded together (a JSON
array of their values) and encrypted with AES-256-GCM under the subject's key
with a fresh random 96-bit nonce; the *first* personal field (always a
string: the text, the name, the title) then holds the token
``mnemolog:sealed:v1:<key id>:<base64(nonce + ciphertext)>`` and the
others their defaults, so the stored payload still decodes as its Struct.
The associated data is ``<event id>/<field path>``: a token copied into
another event, or another field, does not open. The hash chain covers the
stored (sealed) payload, so ``verify``, digests and exports are unaffected
by a key's later destruction.

The subject is the memory content's ``subject`` (plaintext: use a
pseudonymous id, not a name), or, without one, the tenant (its own key).
Entities and documents use the tenant's key.

On read (:meth:`EventStore.read_all` and every other decoded read) tokens
are opened transparently, so projections, history, export's readers and the
API see plaintext while the key exists. When the key was forgotten, the
Struct reads as *erased*: the first field holds :data:`ERASED_TEXT`, the
others their defaults, and ``erased`` is true where the Struct has it
(memory content). That is deterministic, so a rebuild after a forget gives
the same erased projections. A key the key store never held (a log copied
without its keys) is an error (:class:`~mnemolog.eventstore.errors.KeyMissing`),
never silently erased.

``MNEMOLOG_ENCRYPTION``: ``auto`` (the default) seals when the ``crypto``
extra (the ``cryptography`` package) is installed and the log is SQLite, or
a PostgreSQL log with ``MNEMOLOG_KEY_STORE`` set (the key store its servers
share); ``on`` requires the extra; ``off`` writes plaintext. A log written before, or with it off, reads as
before: a field without the token prefix is plaintext.
"""

from __future__ import annotations

import binascii
import operator
import os
from pathlib import Path
from typing import Any

import msgspec

from .errors import KeyMissing, SealBroken
from .events import DomainEvent
from .keystore import FORGOTTEN, KeyStore
from .model import Conflict
from .settings import SettingError, Settings, SetupError, setting

ENCRYPTION = setting(
    "encryption",
    "auto",
    "Seal the personal fields of new events with per-subject keys (AES-256-GCM) so that forget can erase them: "
    "auto (on when the crypto extra is installed, for a PostgreSQL log only with MNEMOLOG_KEY_STORE set), on, off. "
    "Plaintext events written before stay readable.",
)
KEY_STORE = setting(
    "key_store",
    "",
    "Path of the key store (per-subject data keys, apart from the log): empty means keys.db beside a SQLite "
    "log's events.db, or <data_dir>/keys.db for a PostgreSQL log (servers sharing one log must share this file).",
)

PREFIX = "mnemolog:sealed:v1:"
ERASED_TEXT = "[erased: subject forgotten]"
NONCE_BYTES = 12

try:  # the crypto extra
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
except ImportError:  # pragma: no cover - exercised where the extra is missing
    AESGCM = None  # type: ignore[assignment,misc]
    InvalidTag = Exception  # type: ignore[assignment,misc]


def crypto_available() -> bool:
    return AESGCM is not None


def key_store_path(url: str, settings: Settings) -> Path:
    """Where the key store of the log at ``url`` lives (see :data:`KEY_STORE`)."""
    if settings.key_store:
        return Path(settings.key_store)
    if url.startswith("sqlite:///"):
        return Path(url[len("sqlite:///") :].split("?", 1)[0]).parent / "keys.db"
    return Path(settings.data_dir) / "keys.db"


def encryption_enabled(settings: Settings, url: str = "sqlite:///") -> bool:
    """Whether new events are sealed (see :data:`ENCRYPTION`).

    ``auto`` seals when the crypto extra is installed and every reader of the
    log finds the keys: always for a SQLite log (``keys.db`` beside it); for a
    log shared through PostgreSQL only when ``MNEMOLOG_KEY_STORE`` names the key
    store its servers share, since each server keeps its own data directory.
    """
    mode = str(settings.encryption).strip().lower()
    if mode == "auto":
        return crypto_available() and (url.startswith("sqlite") or bool(settings.key_store))
    if mode in ("on", "true", "1", "yes"):
        if not crypto_available():
            raise SetupError("MNEMOLOG_ENCRYPTION=on needs the cryptography package: pip install 'mnemolog[crypto]'")
        return True
    if mode in ("off", "false", "0", "no"):
        return False
    raise SettingError(f"MNEMOLOG_ENCRYPTION: expected auto, on or off, got {settings.encryption!r}")


def _default(info: Any) -> Any:
    if info.default is not msgspec.NODEFAULT:
        return info.default
    if info.default_factory is not msgspec.NODEFAULT:
        return info.default_factory()
    raise TypeError(f"personal field {info.name!r} needs a default")


class _Group:
    """The personal fields of one Struct type: sealed together into the first one.

    The plaintext is the JSON array of the fields' values in order (every
    value, defaults too), decoded back with their exact types.
    """

    def __init__(self, cls: type, names: tuple[str, ...]):
        infos = {f.name: f for f in msgspec.structs.fields(cls)}
        self.carrier = names[0]
        self.names = names
        self.defaults = {n: _default(infos[n]) for n in names[1:]}
        self.values = operator.attrgetter(*names)
        self.decoder = msgspec.json.Decoder(tuple[tuple(infos[n].type for n in names)])  # type: ignore[misc]
        self.erased = {**self.defaults, self.carrier: ERASED_TEXT}
        if "erased" in infos:
            self.erased["erased"] = True


class _Plan(msgspec.Struct):
    nested: str | None  # the event field holding the Struct to seal, or None: the event itself
    group: _Group
    path: str  # the field path bound into the associated data
    suffix: str = ""  # "/<path>": the associated data is the event id and this

    def __post_init__(self) -> None:
        self.suffix = "/" + self.path


_MISSING = object()


_PLANS: dict[type, _Plan | None] = {}
_encoder = msgspec.json.Encoder()


def _plan(cls: type) -> _Plan | None:
    try:
        return _PLANS[cls]
    except KeyError:
        pass
    plan = None
    names = tuple(getattr(cls, "personal", ()) or ())
    if names:
        infos = {f.name: f for f in msgspec.structs.fields(cls)}
        inner = infos[names[0]].type
        inner_names = tuple(getattr(inner, "personal", ()) or ()) if isinstance(inner, type) else ()
        if len(names) == 1 and inner_names:
            plan = _Plan(names[0], _Group(inner, inner_names), f"{names[0]}.{inner_names[0]}")
        else:
            plan = _Plan(None, _Group(cls, names), names[0])
    _PLANS[cls] = plan
    return plan


def opens(cls: type) -> bool:
    """Whether :meth:`Sealer.unseal` may act on an event of ``cls``: it has
    personal fields, or it is ``SubjectForgotten`` (whose keys it drops from
    the cache). Readers skip the others without a call per event."""
    return _plan(cls) is not None or cls.__name__ == "SubjectForgotten"


def erase(owner: Any) -> Any:
    """``owner`` (an event, or a Struct with personal fields such as a memory content) as it reads once its subject's key is gone."""
    plan = _plan(type(owner))
    if plan is None:
        return owner
    if plan.nested is not None:
        return msgspec.structs.replace(owner, **{plan.nested: erase(getattr(owner, plan.nested))})
    return msgspec.structs.replace(owner, **plan.group.erased)


class Sealer:
    """Seals events on append and opens them on read, with the keys of one :class:`KeyStore`."""

    def __init__(self, keys: KeyStore, *, enabled: bool):
        self.keys = keys
        self.enabled = enabled
        self._ciphers: dict[str, Any] = {}
        self._live = keys._live  # (tenant, subject) -> (key id, key): the key store's cache, read without a call

    @classmethod
    def open(cls, url: str, settings: Settings) -> "Sealer":
        return cls(KeyStore(key_store_path(url, settings)), enabled=encryption_enabled(settings, url))

    def close(self) -> None:
        self.keys.close()

    def _cipher(self, key_id: str, key: bytes):  # one AESGCM object per key, made on first use
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            cipher = self._ciphers[key_id] = AESGCM(key)
        return cipher

    # -- sealing -----------------------------------------------------------------

    def prepare(self, events, tenant: str) -> bool:
        """Make the keys a batch of events needs before sealing them (new subjects' keys in one
        transaction); whether any event of the batch has personal fields to seal."""
        live = self._live
        missing = set()
        sealable = False
        for e in events:
            plan = _PLANS.get(type(e), _MISSING)
            if plan is _MISSING:
                plan = _plan(type(e))
            if plan is not None:
                sealable = True
                subject = getattr(getattr(e, "content", None), "subject", None)
                if (tenant, subject or "") not in live:
                    missing.add(subject)
        if missing:
            self.keys.ensure(tenant, missing)
        return sealable

    def seal(self, event: DomainEvent, event_id: str, tenant: str, nonce: bytes | None = None) -> DomainEvent:
        """``event`` with its personal fields sealed (itself when it has none, or sealing is off).

        ``nonce``: 12 random bytes for this event (a batch draws them at once); drawn here when not given.
        """
        if not self.enabled:
            return event
        plan = _PLANS.get(type(event), _MISSING)
        if plan is _MISSING:
            plan = _plan(type(event))
        if plan is None:
            return event
        nested = plan.nested
        owner = event if nested is None else getattr(event, nested)
        if getattr(owner, "erased", False):
            raise Conflict(f"{type(event).__name__}: the content of a forgotten subject was erased; it is never written again")
        group = plan.group
        subject = getattr(getattr(event, "content", None), "subject", None)
        key_id, key = self._live.get((tenant, subject or "")) or self.keys.key_for(tenant, subject)
        cipher = self._ciphers.get(key_id) or self._cipher(key_id, key)
        if nonce is None:
            nonce = os.urandom(NONCE_BYTES)
        sealed = cipher.encrypt(nonce, _encoder.encode(group.values(owner)), (event_id + plan.suffix).encode())
        changes = dict(group.defaults)
        changes[group.carrier] = PREFIX + key_id + ":" + binascii.b2a_base64(nonce + sealed, newline=False).decode()
        owner = msgspec.structs.replace(owner, **changes)
        return owner if nested is None else msgspec.structs.replace(event, **{nested: owner})

    # -- opening -----------------------------------------------------------------

    def unseal(self, event: DomainEvent, event_id: str) -> DomainEvent:
        """``event`` with its sealed fields opened, or erased if the key was forgotten."""
        plan = _PLANS.get(type(event), _MISSING)
        if plan is _MISSING:
            plan = _plan(type(event))
        if plan is None:
            if type(event).__name__ == "SubjectForgotten":  # another process may have forgotten these keys
                self.keys.forget_cached(event.key_ids)
            return event
        nested = plan.nested
        owner = event if nested is None else getattr(event, nested)
        group = plan.group
        token = getattr(owner, group.carrier)
        if not token.startswith(PREFIX):
            return event  # plaintext: written before sealing, or with it off
        key_id, _, body = token[len(PREFIX) :].partition(":")
        key = self.keys.key(key_id)
        if key is None:
            raise KeyMissing(
                f"event {event_id} is sealed with key {key_id}, which the key store {self.keys.path} never held:"
                " restore keys.db, or import the export's key file (mnemolog import --keys)"
            )
        if key == FORGOTTEN:
            self._ciphers.pop(key_id, None)
            owner = msgspec.structs.replace(owner, **group.erased)
        else:
            if AESGCM is None:
                raise SetupError("this log holds sealed events; opening them needs the cryptography package: pip install 'mnemolog[crypto]'")
            cipher = self._ciphers.get(key_id) or self._cipher(key_id, key)
            try:
                raw = binascii.a2b_base64(body)
                opened = cipher.decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], (event_id + plan.suffix).encode())
            except (InvalidTag, ValueError, binascii.Error):
                raise SealBroken(f"event {event_id}: the sealed {plan.path} does not authenticate (altered, or moved from another event)") from None
            owner = msgspec.structs.replace(owner, **dict(zip(group.names, group.decoder.decode(opened))))
        return owner if nested is None else msgspec.structs.replace(event, **{nested: owner})
