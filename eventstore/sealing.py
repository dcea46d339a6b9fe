"""Crypto-shredding: the personal fields of events, sealed with their subject's data key.

What is sealed. Each event type names its personal fields in its
``personal`` class attribute; a field holding a Struct with ``personal`` of
its own (a memory's ``content``, an edge record), or a tuple of them (the
edges of a namespace undo), is sealed inside it, each Struct on its own: a
memory's text, key, background, tags, sources, source URL, properties and
caller embedding; an entity's name, description, aliases and properties; a
document's title, path and source URL; the properties of a ``MENTIONS`` edge
(the alias the linker matched, and its evidence). Ids, types, times,
statuses, positions, reasons and the envelope stay readable to the log's
machinery (guards, spans, verify, revert). Reasons and actors are operator
text: keep personal data out of them.

How. On append, a Struct's personal fields are encoded together (a JSON
array of their values) and encrypted with AES-256-GCM under the subject's key
with a fresh random 96-bit nonce (one ``os.urandom`` draw per batch); the
*first* personal field (the text, the name, the title, an edge's ``sealed``)
then holds the token and the others are emptied, so the stored payload
still decodes as its Struct. The token is the base64 of ``magic + key id +
nonce + ciphertext``: the carrier holds those bytes and the payload's JSON
encoder writes their base64 in the same pass as the rest of the event; the
magic makes every token start with :data:`TOKEN_MARK`. Tokens written before
(``mnemolog:sealed:v1:<key id>:<base64(nonce + ciphertext)>``, see
:data:`PREFIX`) are read as ever. The associated data is
``<event id>/<field path>``: a token copied into another event, or another
field, does not open. The hash chain covers the stored (sealed) payload, so
``verify``, digests and exports are unaffected by a key's later destruction.

The subject is the ``subject`` of the sealed Struct (a memory content's; a
mention edge carries its memory's; plaintext: use a pseudonymous id, not a
name), or, without one, the tenant (its own key). Entities and documents
use the tenant's key.

On read (:meth:`EventStore.read_all` and every other decoded read) tokens
are opened transparently, so projections, history, export's readers and the
API see plaintext while the key exists. When the key was forgotten, the
Struct reads as *erased*: the first field holds :data:`ERASED_TEXT` (an
edge's ``sealed`` stays empty), the others their defaults, and ``erased`` is
true where the Struct has it. That is deterministic, so a rebuild after a
forget gives the same erased projections. A key the key store never held (a
log copied without its keys) is an error
(:class:`~mnemolog.eventstore.errors.KeyMissing`), never silently erased.

Reserved marks. Every mark starts with :data:`MARK` (``mnemolog``): a
token's (:data:`TOKEN_MARK`, :data:`PREFIX`) and :data:`PLAIN_MARK`. A
carrier stored in plaintext (sealing off, a Struct whose ``sealable`` says
no) that starts with one of them is stored escaped, :data:`PLAIN_MARK`
before it, and read back without it, exactly as written: nothing a user
writes is taken for a token (which would make every read of the log fail),
and nothing is lost. A carrier not starting with :data:`MARK` needs no
second test on either path; a sealed carrier's value is inside its token
and never escaped. Plaintext without a mark is stored and read as ever (a
text written before the escape existed that starts with :data:`PLAIN_MARK`
reads without it). Copies of a value keep it whole: history, revert and
rollback append what they read, escaped again where needed, and a Struct
reads as erased (below) once its key is gone, whatever its carrier held.

``MNEMOLOG_ENCRYPTION``: ``auto`` (the default) seals when the ``crypto``
extra (the ``cryptography`` package) is installed and the log is SQLite, or
a PostgreSQL log with ``MNEMOLOG_KEY_STORE`` set (the key store its servers
share); ``on`` requires the extra; ``off`` writes plaintext. A log written
before, or with it off, reads as before: a field without a token's mark is
plaintext.
"""

from __future__ import annotations

import binascii
import collections
import functools
import operator
import os
import typing
import uuid
from itertools import repeat
from pathlib import Path
from typing import Any, Callable, Sequence

import msgspec

from .errors import KeyMissing, SealBroken
from .events import DomainEvent
from .keystore import FORGOTTEN, TENANT_SUBJECT, KeyStore
from .model import Conflict
from .settings import SettingError, Settings, SetupError, setting

ENCRYPTION = setting(
    "encryption",
    "auto",
    "Seal the personal fields of new events with per-subject keys (AES-256-GCM) so that forget can erase them: "
    "auto (on when the crypto extra is installed, for a PostgreSQL log only with MNEMOLOG_KEY_STORE set), on "
    "(for a PostgreSQL log, with MNEMOLOG_KEY_STORE set), off. "
    "Plaintext events written before stay readable, and stay in the log after a forget (which erases them from every read and names them).",
    choices=("auto", "on", "off", "true", "false", "1", "0", "yes", "no"),
)
KEY_STORE = setting(
    "key_store",
    "",
    "Path of the key store (per-subject data keys, apart from the log): empty means keys.db beside a SQLite "
    "log's events.db, or <data_dir>/keys.db for a PostgreSQL log (servers sharing one log must share this file).",
)

MARK = "mnemolog"  # what every reserved mark starts with: a carrier that does not is plaintext, at one test
PREFIX = "mnemolog:sealed:v1:"  # tokens written before the current format: read, never written
TOKEN_MARK = "mnemologSealedV2"  # how every token of the current format starts (the base64 of its magic)
PLAIN_MARK = "mnemologPlain:"  # before plaintext that starts with a reserved mark: stored escaped, read without it
_MARKS = (TOKEN_MARK, PREFIX, PLAIN_MARK)
ERASED_TEXT = "[erased: subject forgotten]"
NONCE_BYTES = 12
_MAGIC = binascii.a2b_base64(TOKEN_MARK)  # 12 bytes: a whole number of base64 groups, so the mark is fixed
_V1 = PREFIX.encode()  # a first-format token, parsed, starts with it (never stored so)

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
        if not url.startswith("sqlite") and not settings.key_store:  # each server would seal with keys only it holds
            raise SettingError(
                "MNEMOLOG_ENCRYPTION=on with a PostgreSQL log needs MNEMOLOG_KEY_STORE: the key store every server "
                "of the log shares (the data directory's keys.db for a single server), or the others cannot read what one seals"
            )
        return True
    if mode in ("off", "false", "0", "no"):
        return False
    raise SettingError(f"MNEMOLOG_ENCRYPTION: expected auto, on or off, got {settings.encryption!r}")


def is_sealed(value: object) -> bool:
    """Whether a stored field holds a token (either format) rather than plaintext."""
    if isinstance(value, bytes):
        return value.startswith(_MAGIC)
    return isinstance(value, str) and value.startswith((TOKEN_MARK, PREFIX))


def _default(info: Any) -> Any:
    if info.default is not msgspec.NODEFAULT:
        return info.default
    if info.default_factory is not msgspec.NODEFAULT:
        return info.default_factory()
    raise TypeError(f"personal field {info.name!r} needs a default")


def _key_ref(key_id: str) -> bytes:
    """The key id inside a token: 0 and its 16 bytes for a UUID (every key this store makes), else its length and ASCII."""
    try:
        if str(uuid.UUID(key_id)) == key_id:
            return b"\x00" + uuid.UUID(key_id).bytes
    except ValueError:
        pass
    raw = key_id.encode("ascii")
    if not 0 < len(raw) < 256:
        raise ValueError(f"key id {key_id!r} cannot be named in a token")
    return bytes((len(raw),)) + raw


class _Group:
    """The personal fields of one Struct type: sealed together into the first one (the carrier).

    The plaintext is the JSON array of the fields' values in order (every
    value, defaults too), decoded back with their exact types. (The Struct's
    own JSON encodes faster, but decodes slower, and an event is opened more
    often than it is sealed.)
    """

    def __init__(self, cls: type, names: tuple[str, ...]):
        infos = {f.name: f for f in msgspec.structs.fields(cls)}
        self.carrier = names[0]
        self.names = names
        self.defaults = {n: _default(infos[n]) for n in names[1:]}
        self.blank = {**self.defaults, self.carrier: b""}  # a sealed Struct before its carrier gets the token
        self.blanked = functools.partial(_replace, **self.blank)
        getter = operator.attrgetter(*names)
        self.values = getter if len(names) > 1 else (lambda owner: (getter(owner),))
        self.decoder = msgspec.json.Decoder(tuple[tuple(infos[n].type for n in names)])  # type: ignore[misc]
        # A dedicated token field (an edge's ``sealed``, empty by default) stays empty once erased; a text reads as the marker.
        carrier_default = infos[self.carrier].default
        self.erased = {**self.defaults, self.carrier: None if carrier_default is None else ERASED_TEXT}
        self.erasable = "erased" in infos  # reads true once erased: such a Struct is never written again
        if self.erasable:
            self.erased["erased"] = True
        # Whose key: the Struct's ``subject``; without the field, the tenant's.
        self.subject_of = operator.attrgetter("subject") if "subject" in infos else None
        self.sealable = getattr(cls, "sealable", None)  # a predicate on the Struct: seal this one at all?


class _Slot(msgspec.Struct):
    """Where a group's Structs sit in an event: the event itself (``field`` None), a Struct field, or a tuple field (``many``)."""

    field: str | None
    many: bool
    group: _Group
    path: str  # the field path bound into the associated data (for ``many``: the field, then ``.<i>.<carrier>``)
    suffix: str = ""
    owner_of: Any = None  # the event's Struct at ``field`` (an attrgetter)

    def __post_init__(self) -> None:
        self.suffix = "/" + self.path
        if self.field is not None:
            self.owner_of = operator.attrgetter(self.field)

    def ad(self, event_id: str, index: int | None = None) -> bytes:
        if index is None:
            return (event_id + self.suffix).encode()
        return f"{event_id}{self.suffix}.{index}.{self.group.carrier}".encode()


class _Plan(msgspec.Struct):
    """Where the Structs with personal fields sit in an event type, in the order they are sealed."""

    slots: tuple[_Slot, ...]
    one: _Slot | None  # the only slot, when it holds one Struct (every memory, entity and document event): the fast path
    # The event's carrier with ``one`` (an attrgetter of its dotted path); else :data:`MARK`: each Struct needs a look.
    carrier_of: Callable[[Any], Any] = lambda event: MARK

    def __post_init__(self) -> None:
        if self.one is not None:
            one = self.one
            self.carrier_of = operator.attrgetter(one.group.carrier if one.field is None else f"{one.field}.{one.group.carrier}")


_MISSING = object()
_PLANS: dict[type, _Plan | None] = {}
_GROUPS: dict[type, _Group] = {}
_encoder = msgspec.json.Encoder()
_encode = _encoder.encode
_replace = msgspec.structs.replace
_force_setattr = msgspec.structs.force_setattr  # on a Struct just made, before anything else sees it
_copy = msgspec.Struct.__copy__
_consume = collections.deque(maxlen=0).extend  # runs a ``map`` for its effects
_ERASED = operator.attrgetter("erased")
_FIRST, _SECOND, _THIRD = operator.itemgetter(0), operator.itemgetter(1), operator.itemgetter(2)


def _nonce_slices(count: int) -> list[slice]:
    """Where each of ``count`` events' nonces sits in a batch's draw: event ``i`` takes the ``i``-th."""
    if count <= len(_SLICES):
        return _SLICES[:count]
    return [slice(NONCE_BYTES * i, NONCE_BYTES * i + NONCE_BYTES) for i in range(count)]


_SLICES: list[slice] = []
_SLICES = _nonce_slices(4096)  # every append but the largest takes its slices from here


def _by_class(events: Sequence) -> dict[type, Sequence[int]]:
    """The indices of ``events`` by class, in order (one class: a range, without a loop)."""
    classes = set(map(type, events))
    if len(classes) == 1:
        return {classes.pop(): range(len(events))}
    found: dict[type, list[int]] = {}
    for i, cls in enumerate(map(type, events)):
        found.setdefault(cls, []).append(i)
    return found


def _subjects(group: _Group, owners: Sequence) -> list[str]:
    """Whose key seals each of ``owners``: its ``subject``, or without one (or without the field) the tenant's."""
    if group.subject_of is None:
        return [TENANT_SUBJECT] * len(owners)
    subjects = list(map(group.subject_of, owners))
    return [subject or TENANT_SUBJECT for subject in subjects] if None in subjects else subjects


def _ads(event_ids: Sequence[str], suffix: str) -> list[bytes]:
    """The associated data of a run's Structs, ``<event id><suffix>`` each, made by one join, encode and split
    (when an id holds the separator, one by one)."""
    ads = ((suffix + "\n").join(event_ids) + suffix).encode().split(b"\n")
    return ads if len(ads) == len(event_ids) else [(event_id + suffix).encode() for event_id in event_ids]


def _with_field(structs: Sequence, name: str, values: Any, make: Callable[[Any], Any] = _copy) -> list:
    """A copy of each of ``structs`` (made by ``make``) with its field ``name`` set to the matching one of ``values``."""
    made = list(map(make, structs))
    _consume(map(_force_setattr, made, repeat(name), values))
    return made


def _personal_struct(annotation: Any) -> tuple[type | None, bool]:
    """The Struct type with personal fields an annotation holds, and whether as a tuple of them."""
    if isinstance(annotation, type) and getattr(annotation, "personal", ()):
        return annotation, False
    if typing.get_origin(annotation) is tuple:
        args = typing.get_args(annotation)
        if args and isinstance(args[0], type) and getattr(args[0], "personal", ()):
            return args[0], True
    return None, False


def _group(cls: type) -> _Group:
    found = _GROUPS.get(cls)
    if found is None:
        found = _GROUPS[cls] = _Group(cls, tuple(cls.personal))
    return found


def plan_of(cls: type) -> _Plan | None:
    """Where the Structs with personal fields sit in an event of ``cls`` (None: it has none); made once per class."""
    try:
        return _PLANS[cls]
    except KeyError:
        pass
    plan = None
    names = tuple(getattr(cls, "personal", ()) or ())
    if names:
        infos = {f.name: f for f in msgspec.structs.fields(cls)}
        slots, own = [], []
        for name in names:
            inner, many = _personal_struct(infos[name].type)
            if inner is None:
                own.append(name)
                continue
            group = _group(inner)
            slots.append(_Slot(name, many, group, name if many else f"{name}.{group.carrier}"))
        if own:  # the event's own personal fields, sealed before the Structs it holds
            slots.insert(0, _Slot(None, False, _Group(cls, tuple(own)), own[0]))
        plan = _Plan(tuple(slots), slots[0] if len(slots) == 1 and not slots[0].many else None)
    _PLANS[cls] = plan
    return plan


def each_struct(event: Any, plan: _Plan, change: Callable[[_Slot, Any, int | None], Any]) -> Any:
    """``event`` with ``change(slot, struct, index in its tuple or None)`` applied to each Struct its plan names;
    itself where every call returned its Struct unchanged."""
    replace = _replace
    for slot in plan.slots:
        if slot.field is None:
            event = change(slot, event, None)
        elif slot.many:
            owners = getattr(event, slot.field)
            changed = tuple(change(slot, owner, i) for i, owner in enumerate(owners))
            if any(a is not b for a, b in zip(changed, owners)):
                event = replace(event, **{slot.field: changed})
        else:
            owner = getattr(event, slot.field)
            changed = change(slot, owner, None)
            if changed is not owner:
                event = replace(event, **{slot.field: changed})
    return event


def erase_owner(slot: _Slot, owner: Any, index: int | None = None) -> Any:
    return _replace(owner, **slot.group.erased)


def _escape_owner(slot: _Slot, owner: Any, index: int | None = None) -> Any:
    """``owner`` as stored in plaintext: a carrier starting with a reserved mark gets :data:`PLAIN_MARK` before it."""
    carrier = slot.group.carrier
    value = getattr(owner, carrier)
    if type(value) is str and value.startswith(MARK) and value.startswith(_MARKS):
        return _replace(owner, **{carrier: PLAIN_MARK + value})
    return owner


def named_key(blob: bytes) -> tuple[str, int]:
    """The key id a token's bytes name, and where its nonce starts; ValueError, IndexError or
    UnicodeDecodeError when they are no token."""
    if blob[:12] == _MAGIC:
        size = blob[12]
        if size == 0:
            return str(uuid.UUID(bytes=blob[13:29])), 29
        return blob[13 : 13 + size].decode("ascii"), 13 + size
    if blob.startswith(_V1):  # a first-format token, as :meth:`Sealer._v1_blob` gives it
        key_id, _, _ = blob[len(_V1) :].partition(b"\0")
        return key_id.decode("ascii"), len(_V1) + len(key_id) + 1
    raise ValueError


def opens(cls: type) -> bool:
    """Whether :meth:`Sealer.unseal` may act on an event of ``cls``: it has
    personal fields, or it is ``SubjectForgotten`` (whose keys it drops from
    the cache). Readers skip the others without a call per event."""
    return plan_of(cls) is not None or cls.__name__ == "SubjectForgotten"


def erase(owner: Any) -> Any:
    """``owner`` (an event, or a Struct with personal fields such as a memory content) as it reads once its subject's key is gone."""
    plan = plan_of(type(owner))
    return owner if plan is None else each_struct(owner, plan, erase_owner)


def escape(event: Any) -> Any:
    """``event`` as stored in plaintext: every carrier that starts with a reserved mark escaped (see the module docstring).

    The hot path of a plaintext append: an event with one carrier that does
    not start with :data:`MARK` is itself, at one test.
    """
    plan = _PLANS.get(type(event), _MISSING)
    if plan is _MISSING:
        plan = plan_of(type(event))
    if plan is None:
        return event
    value = plan.carrier_of(event)
    if type(value) is str and not value.startswith(MARK):
        return event
    return each_struct(event, plan, _escape_owner)


class Sealer:
    """Seals events on append and opens them on read, with the keys of one :class:`KeyStore`."""

    def __init__(self, keys: KeyStore, *, enabled: bool):
        self.keys = keys
        self.enabled = enabled
        self._ciphers: dict[str, Any] = {}  # key id -> one AESGCM object per key, made on first use
        # tenant -> subject -> (cipher, magic + key reference, key id) of its live key: what every token it seals starts with
        self._by_subject: dict[str, dict[str, tuple[Any, bytes, str]]] = {}
        self._drops_seen = keys._drops
        self._refs: dict[bytes, tuple[str, int]] = {}  # a token's first 29 bytes (magic, UUID key reference) -> (key id, nonce offset)
        self._held = keys._by_id  # key id -> key bytes (empty once forgotten): the key store's cache, read without a call

    @classmethod
    def open(cls, url: str, settings: Settings) -> "Sealer":
        return cls(KeyStore(key_store_path(url, settings), float(settings.busy_timeout)), enabled=encryption_enabled(settings, url))

    def close(self) -> None:
        self.keys.close()

    def _cipher(self, key_id: str, key: bytes):
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            cipher = self._ciphers[key_id] = AESGCM(key)
        return cipher

    # -- sealing -----------------------------------------------------------------

    def _owner_keys(self, tenant: str, subjects: list[str], used: set[str] | None = None) -> list[tuple[Any, bytes, str]]:
        """The cipher, token head (magic and key reference) and id of each subject's live key, in order: the
        subjects without a key yet get theirs in one key-store transaction. A batch of any size costs one
        ``map`` over a dict of the tenant's subjects (emptied whenever the key store drops a live key from
        its cache), the cipher made once per key. The ids of the keys are added to ``used``."""
        keys = self.keys
        if keys._drops != self._drops_seen:  # a key retired or forgotten: every subject looks again
            self._drops_seen = keys._drops
            self._by_subject.clear()
        known = self._by_subject.get(tenant)
        if known is None:
            known = self._by_subject[tenant] = {}
        made = list(map(known.get, subjects))
        if None in made:
            missing = {subject for subject, head in zip(subjects, made) if head is None}
            keys.ensure(tenant, missing)
            for subject in missing:
                key_id, key = keys.key_for(tenant, subject)  # made just now (or again, had another thread dropped it since)
                known[subject] = (self._cipher(key_id, key), _MAGIC + _key_ref(key_id), key_id)
            made = list(map(known.__getitem__, subjects))
        if used is not None:
            used.update(map(_THIRD, made))
        return made

    @staticmethod
    def _seal_owners(group: _Group, owners: Sequence, keys: Sequence[tuple[Any, bytes, str]], nonces: Sequence[bytes], ads: Sequence[bytes]) -> list:
        """``owners`` (Structs of one group) with their personal fields sealed into their carriers, each with
        the matching key (cipher and token head, see :meth:`_owner_keys`), nonce and associated data. The
        carrier holds the token's bytes (the encoder writes their base64). Each step is one ``map`` over all
        of them: a run of a batch costs the interpreter no loop per Struct; one Struct, the same steps without them."""
        if group.erasable and any(map(_ERASED, owners)):
            raise Conflict(f"{type(owners[0]).__name__}: the content of a forgotten subject was erased; it is never written again")
        if len(owners) == 1:
            (cipher, head, _), nonce = keys[0], nonces[0]
            sealed = group.blanked(owners[0])
            _force_setattr(sealed, group.carrier, head + nonce + cipher.encrypt(nonce, _encode(group.values(owners[0])), ads[0]))
            return [sealed]
        ciphertexts = map(AESGCM.encrypt, map(_FIRST, keys), nonces, map(_encode, map(group.values, owners)), ads)
        return _with_field(owners, group.carrier, map(b"".join, zip(map(_SECOND, keys), nonces, ciphertexts)), group.blanked)

    def seal_batch(
        self, events: Sequence[DomainEvent], event_ids: Sequence[str], tenant: str, nonces: bytes | None = None, used: set[str] | None = None
    ) -> list[DomainEvent]:
        """The events of one append as stored: their personal fields sealed, and every Struct left in
        plaintext (sealing off, or its ``sealable`` says no) escaped (see :func:`escape`).

        The hot path of a sealed append. Events of one class holding one
        Struct to seal (every memory, entity and document event) are sealed
        as a run, each step one C-level ``map`` over the run: values encoded,
        encrypted, tokens joined, Structs copied with their tokens. One
        ``os.urandom`` draw gives every event's nonce (event ``i`` takes
        ``nonces[12 i : 12 i + 12]``), each key's cipher is made once, and
        the subjects without a key yet get theirs in one key-store
        transaction. Events holding tuples of Structs are sealed one by one,
        after. The ids of the keys that sealed them are added to ``used``.
        """
        if not self.enabled:
            return list(map(escape, events))
        count = len(events)
        if nonces is None:
            nonces = os.urandom(NONCE_BYTES * count)
        if count == 1 and (plan := plan_of(type(events[0]))) is not None and (one := plan.one) is not None:
            # One event holding one Struct (an append of one memory, the commonest write): a run's steps, no bookkeeping.
            owner = events[0] if one.field is None else one.owner_of(events[0])
            if one.group.sealable is not None and not one.group.sealable(owner):
                return [each_struct(events[0], plan, _escape_owner)]
            keys = self._owner_keys(tenant, _subjects(one.group, (owner,)), used)
            sealed = self._seal_owners(one.group, (owner,), keys, (nonces,), ((event_ids[0] + one.suffix).encode(),))
            return sealed if one.field is None else _with_field(events, one.field, sealed)
        out = list(events)
        runs: list[tuple[_Slot, Sequence[int], Sequence, list]] = []  # (slot, indices, events, the Structs to seal)
        one_by_one: list[int] = []  # events holding tuples of Structs
        for cls, indices in _by_class(events).items():
            plan = plan_of(cls)
            if plan is None:
                continue
            one = plan.one
            if one is None:
                one_by_one.extend(indices)
                continue
            run = events if len(indices) == count else [events[i] for i in indices]
            owners = run if one.field is None else list(map(one.owner_of, run))
            if one.group.sealable is not None:  # the others stay plaintext, escaped
                wanted = list(map(one.group.sealable, owners))
                if not all(wanted):
                    for i, yes in zip(indices, wanted):
                        if not yes:
                            out[i] = each_struct(events[i], plan, _escape_owner)
                    kept = [k for k, yes in enumerate(wanted) if yes]
                    indices, run, owners = [indices[k] for k in kept], [run[k] for k in kept], [owners[k] for k in kept]
            if indices:
                runs.append((one, indices, run, owners))
        keys = self._owner_keys(tenant, [subject for one, _, _, owners in runs for subject in _subjects(one.group, owners)], used)
        slices = _nonce_slices(count)
        taken = 0
        for one, indices, run, owners in runs:
            whole = len(indices) == count
            sealed = self._seal_owners(
                one.group,
                owners,
                keys[taken : taken + len(owners)],
                list(map(nonces.__getitem__, slices if whole else [slices[i] for i in indices])),
                _ads(event_ids if whole else [event_ids[i] for i in indices], one.suffix),
            )
            taken += len(owners)
            if one.field is not None:
                sealed = _with_field(run, one.field, sealed)
            if whole:
                out = sealed
            else:
                for i, event in zip(indices, sealed):
                    out[i] = event
        for i in one_by_one:
            out[i] = self._seal_slots(_PLANS[type(events[i])], events[i], event_ids[i], tenant, nonces[slices[i]], used)
        return out

    def _seal_slots(self, plan: _Plan, event: DomainEvent, event_id: str, tenant: str, nonce: bytes, used: set[str] | None) -> DomainEvent:
        """``event`` sealed Struct by Struct (the first sealed gets ``nonce``, the others their own draws)."""
        nonces = [nonce]

        def seal(slot: _Slot, owner: Any, index: int | None) -> Any:
            group = slot.group
            if group.sealable is not None and not group.sealable(owner):
                return _escape_owner(slot, owner)
            nonce = nonces.pop() if nonces else os.urandom(NONCE_BYTES)
            return self._seal_owners(group, (owner,), self._owner_keys(tenant, _subjects(group, (owner,)), used), (nonce,), (slot.ad(event_id, index),))[0]

        return each_struct(event, plan, seal)

    def seal(self, event: DomainEvent, event_id: str, tenant: str, nonce: bytes | None = None) -> DomainEvent:
        """``event`` as stored (see :meth:`seal_batch`)."""
        return self.seal_batch([event], [event_id], tenant, nonce)[0]

    def payloads(self, events: Sequence[DomainEvent], event_ids: Sequence[str], tenant: str, used: set[str] | None = None) -> list[str]:
        """The stored payload (JSON text) of each event of one append: the events of :meth:`seal_batch`, encoded."""
        return list(map(bytes.decode, map(_encode, self.seal_batch(events, event_ids, tenant, used=used))))

    # -- opening -----------------------------------------------------------------

    def unseal(self, event: DomainEvent, event_id: str) -> DomainEvent:
        """``event`` with its sealed fields opened (or erased if the key was forgotten) and escaped ones restored."""
        plan = _PLANS.get(type(event), _MISSING)
        if plan is _MISSING:
            plan = plan_of(type(event))
        if plan is None:
            if type(event).__name__ == "SubjectForgotten":  # another process may have forgotten these keys
                self.keys.forget_cached(event.key_ids)
            return event
        one = plan.one
        if one is not None:  # the hot path of every decoded read
            field = one.field
            owner = event if field is None else getattr(event, field)
            opened = self._open_owner(one, owner, event_id, None)
            if opened is owner:
                return event
            return opened if field is None else _replace(event, **{field: opened})
        return each_struct(event, plan, lambda slot, owner, index: self._open_owner(slot, owner, event_id, index))

    def _open_owner(self, slot: _Slot, owner: Any, event_id: str, index: int | None) -> Any:
        """``owner`` opened (or erased), or unescaped; itself when its carrier holds plaintext."""
        token = getattr(owner, slot.group.carrier)
        kind = type(token)
        if kind is str:
            if not token.startswith(MARK):
                return owner  # plaintext: written before sealing, or with it off
            if token.startswith(TOKEN_MARK):
                try:
                    blob = binascii.a2b_base64(token)
                except (ValueError, binascii.Error):
                    raise SealBroken(f"event {event_id}: the sealed {slot.path} is no token") from None
            elif token.startswith(PLAIN_MARK):
                return _replace(owner, **{slot.group.carrier: token[len(PLAIN_MARK) :]})
            elif token.startswith(PREFIX):
                blob = self._v1_blob(token, slot, event_id)
            else:
                return owner
        elif kind is bytes:  # sealed in this process and not stored yet
            blob = token
        else:
            return owner
        key_id, at = self._refs.get(blob[:29]) or self._key_of(blob, slot, event_id)  # magic and a UUID key reference: parsed once per key
        # Only a key the key store holds now (a forget, here or seen from another process, leaves it empty or absent).
        cipher = self._ciphers.get(key_id) if self._held.get(key_id) else None
        if cipher is None:
            cipher = self._opening_cipher(key_id, event_id)
            if cipher is None:
                self._ciphers.pop(key_id, None)
                return _replace(owner, **slot.group.erased)
        try:
            ad = (event_id + slot.suffix).encode() if index is None else slot.ad(event_id, index)
            opened = cipher.decrypt(blob[at : at + NONCE_BYTES], blob[at + NONCE_BYTES :], ad)
        except (InvalidTag, ValueError):
            raise SealBroken(f"event {event_id}: the sealed {slot.path} does not authenticate (altered, or moved from another event)") from None
        opened_owner = _copy(owner)  # then its fields set one by one: a third cheaper than a replace by keywords
        for name, value in zip(slot.group.names, slot.group.decoder.decode(opened)):
            _force_setattr(opened_owner, name, value)
        return opened_owner

    def _key_of(self, blob: bytes, slot: _Slot, event_id: str) -> tuple[str, int]:
        """The key id a token names, and where its nonce starts (a UUID reference parsed once per key)."""
        try:
            found = named_key(blob)
        except (ValueError, IndexError, UnicodeDecodeError):
            raise SealBroken(f"event {event_id}: the sealed {slot.path} is no token") from None
        if found[1] == 29 and blob[12] == 0:
            self._refs[blob[:29]] = found
        return found

    @staticmethod
    def _v1_blob(token: str, slot: _Slot, event_id: str) -> bytes:
        """A token of the first format, ``mnemolog:sealed:v1:<key id>:<base64(nonce + ciphertext)>``, as
        ``_V1 + key id + NUL + nonce + ciphertext`` (see :meth:`_key_of`)."""
        key_id, _, body = token[len(PREFIX) :].partition(":")
        try:
            return _V1 + key_id.encode("ascii") + b"\0" + binascii.a2b_base64(body)
        except (ValueError, binascii.Error, UnicodeEncodeError):
            raise SealBroken(f"event {event_id}: the sealed {slot.path} is no token") from None

    def _opening_cipher(self, key_id: str, event_id: str) -> Any:
        """The cipher of a key met for the first time (or after another process's forget); None once it was forgotten."""
        key = self.keys.key(key_id)
        if key is None:
            raise KeyMissing(
                f"event {event_id} is sealed with key {key_id}, which the key store {self.keys.path} never held:"
                " restore keys.db, or import the export's key file (mnemolog import --keys)"
            )
        if key == FORGOTTEN:
            return None
        if AESGCM is None:
            raise SetupError("this log holds sealed events; opening them needs the cryptography package: pip install 'mnemolog[crypto]'")
        return self._cipher(key_id, key)
