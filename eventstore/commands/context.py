"""What every command carries (who, why, which correlation) and what it returns."""

from __future__ import annotations

from datetime import datetime, timezone
from hashlib import sha256
from typing import Any, Sequence

import msgspec

from .. import catalogue as c
from ..aggregate import dropped_at
from ..bounds import stored_key_form
from ..catalogue_graph import MENTION_EDGE_PREFIX as MENTION_PREFIX, tenant_segment
from ..errors import IdempotencyConflict
from ..events import Metadata
from ..ids import new_id
from ..keystore import KEYED_FINGERPRINT
from ..sealed_keys import sealed_keys
from ..store import AppendResult, EventStore, RecordedEvent, StreamAppend


def now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class CommandContext(msgspec.Struct, frozen=True, kw_only=True):
    """The tenant a command acts for, and the ids that tie its events together.

    ``correlation_id`` groups everything one request, import run or organizer
    pass did, so it can be reverted as a whole. ``idempotency_key`` makes a
    retried request a no-op that answers as the first one did.
    """

    tenant: str
    correlation_id: str = ""
    actor: str | None = None
    causation_id: str | None = None
    idempotency_key: str | None = None

    def __post_init__(self) -> None:
        if not self.tenant or not isinstance(self.tenant, str):
            raise ValueError("tenant must be a non-empty string")
        if not self.correlation_id:
            msgspec.structs.force_setattr(self, "correlation_id", new_id())

    @property
    def metadata(self) -> Metadata:
        return Metadata(actor=self.actor, correlation_id=self.correlation_id, causation_id=self.causation_id)

    def scoped_key(self, command: str, *, epoch: int = 0) -> str | None:
        """The key as the log stores it, ``tenant/command/key``; past the log's column (255) its digest, ``sha256:HEX`` (no ``/``, so never a stored key's).

        One tenant's key is never another's: a tenant holding ``/`` or ``%``
        is written with those two percent-encoded, so that the tenant part
        never holds a ``/`` (tenant ``a/add`` with key ``k`` and tenant ``a``
        with key ``add/k`` would otherwise both be ``a/add/add/k``, and the
        second would be answered the first's result, nothing written). Only
        such a tenant's part holds a ``%``, and every other tenant's keys are
        stored as they always were.

        ``epoch``: the position of the tenant's last drop (0: never dropped),
        written after its part as ``%@<epoch>`` (no tenant's part holds ``%@``),
        so that a key used before a drop is not the same key after it (see
        :func:`stored_key`).
        """
        if self.idempotency_key is None:
            return None
        tenant = tenant_segment(self.tenant) + (f"%@{epoch}" if epoch else "")
        key = f"{tenant}/{command}/{self.idempotency_key}"
        return stored_key_form(key)


class CommandResult(msgspec.Struct, frozen=True, kw_only=True):
    first_position: int | None = None
    last_position: int | None = None
    replayed: bool = False
    correlation_id: str = ""
    memory_ids: tuple[str, ...] = ()
    data: dict[str, Any] = {}

    @property
    def positions(self) -> range:
        if self.first_position is None:
            return range(0)
        return range(self.first_position, self.last_position + 1)


def fingerprint(command: str, request: Any) -> str:
    return sha256(command.encode() + msgspec.json.encode(request)).hexdigest()


def commit(
    store: EventStore,
    ctx: CommandContext,
    command: str,
    writes: Sequence[StreamAppend],
    *,
    request: Any,
    memory_ids: Sequence[str] = (),
    data: dict[str, Any] | None = None,
) -> CommandResult:
    """Append a command's events under its idempotency key, and describe the result."""
    appended: AppendResult = store.append_batch(
        writes,
        tenant=ctx.tenant,
        metadata=ctx.metadata,
        idempotency_key=stored_key(store, ctx, command),
        fingerprint=fingerprint(command, request) if ctx.idempotency_key else None,
    )
    if appended.replayed:  # a concurrent retry won the race: answer as the first request did
        return _describe_replay(store, appended.first_position, appended.last_position, memory_ids)
    return CommandResult(
        first_position=appended.first_position,
        last_position=appended.last_position,
        replayed=appended.replayed,
        correlation_id=ctx.correlation_id,
        memory_ids=tuple(memory_ids),
        data=data or {},
    )


def nothing_done(ctx: CommandContext, **data: Any) -> CommandResult:
    return CommandResult(correlation_id=ctx.correlation_id, data=data)


def stored_key(store: EventStore, ctx: CommandContext, command: str, *, epoch: int | None = None) -> str | None:
    """``ctx``'s idempotency key for ``command`` as the log stores it (None without one), in the tenant's
    ``epoch``, by default the one since its last drop: a key its tenant used before a drop is another key
    now (the tenant given to someone else keeps none of the first one's requests)."""
    if ctx.idempotency_key is None:
        return None
    return ctx.scoped_key(command, epoch=dropped_at(store, ctx.tenant) if epoch is None else epoch)


def replayed(
    store: EventStore, ctx: CommandContext, command: str, request: Any, memory_ids: Sequence[str] = ()
) -> CommandResult | None:
    """The first answer to a retried request (same idempotency key), or ``None``.

    Commands call this before checking the request against the current state:
    a retry must not be refused because its first attempt already changed that
    state. A key reused for a different request raises :class:`IdempotencyConflict`.
    """
    row = check_key(store, ctx, command, request)
    if row is None:
        return None
    return _describe_replay(store, row.first_position, row.last_position, memory_ids)


def replayed_in(store: EventStore, ctx: CommandContext, command: str, request: Any, epoch: int) -> CommandResult | None:
    """The first answer to this very request made in the tenant's ``epoch`` (an earlier one), else None:
    a key used there for another request is no conflict now."""
    row, same = _record(store, stored_key(store, ctx, command, epoch=epoch), command, request)
    return _describe_replay(store, row.first_position, row.last_position) if same else None


def check_key(store: EventStore, ctx: CommandContext, command: str, request: Any):
    """The stored record of ``ctx``'s idempotency key for ``command`` (None when unused, or no key);
    :class:`IdempotencyConflict` when it was used for a different request."""
    key = stored_key(store, ctx, command)
    row, same = _record(store, key, command, request)
    if row is not None and not same:
        raise IdempotencyConflict(key, forgotten=same is None)
    return row


def _record(store: EventStore, key: str | None, command: str, request: Any):
    """The stored record of ``key`` (None when unused, or no key), and whether it was stored for this very request
    (``None``: the record is keyed with a data key destroyed since, so no request can tell)."""
    row = store.recorder.idempotency_record(key) if key is not None else None
    if row is None:
        return None, False
    bound = _bound(store, row, fingerprint(command, request))
    return row, None if bound is None else row.fingerprint == bound


def _bound(store: EventStore, row, digest: str) -> str | None:
    """``digest`` as the log stored it for ``row``'s write: keyed with the data keys that sealed the write's events
    (see :meth:`~..keystore.KeyStore.keyed_fingerprint`; ``None`` once one is destroyed: no request matches), or as it is."""
    if not row.fingerprint.startswith(KEYED_FINGERPRINT):
        return digest
    written = store.read_stored(row.first_position - 1, until=row.last_position)
    return store.sealer.keys.keyed_fingerprint(digest, [key_id for r in written for _, key_id in sealed_keys(r.event)])


def _describe_replay(store: EventStore, first: int, last: int, memory_ids: Sequence[str] = ()) -> CommandResult:
    """A replayed command's result, read back from the events it wrote."""
    recorded: list[RecordedEvent] = store.read_all(after=first - 1, until=last)
    created: list[str] = []
    touched: list[str] = []
    data: dict[str, Any] = {}
    for r in recorded:
        event = r.event
        memory_id = getattr(event, "memory_id", None)
        if isinstance(event, (c.MemoryAdded, c.MemoriesMerged)):
            created.append(memory_id)
        elif memory_id is not None and memory_id not in touched:
            touched.append(memory_id)
        if isinstance(event, c.MemoryAdded):
            data.setdefault("evicted", 0)
            data.setdefault("mentions", 0)
        elif isinstance(event, c.MemoriesMerged):
            data.update(merged_id=memory_id, sources=list(event.source_ids), repointed=0)
        elif isinstance(event, c.MemoryUpdated):
            data.update(version=r.stream_version, changed=list(event.changed))
        elif isinstance(event, c.MemoryEvent.__args__) and not created:
            data["version"] = r.stream_version
        elif isinstance(event, c.WorkingMemoryEvicted):
            data["evicted"] = len(event.bindings)
        elif isinstance(event, c.EdgesRepointed):
            data["repointed"] = len(event.previous)
        elif isinstance(event, (c.EdgeLinked, c.EdgeUnlinked)) and (created or touched) and event.edge.edge_id.startswith(MENTION_PREFIX):
            if isinstance(event, c.EdgeLinked) and "mentions" in data:  # the mentions a memory change linked
                data["mentions"] += 1
        elif isinstance(event, (c.EdgeLinked, c.EdgeUnlinked)) and not (created or touched):  # a memory command's edges are no report
            data.setdefault("edge_ids", []).append(event.edge.edge_id)
        elif isinstance(event, c.NamespaceUndone) and not (created or touched):  # a delete's takes its memory's edges out
            data.update(removed=len(event.edges), prefix=event.prefix)
        elif isinstance(event, c.CorrelationReverted):
            data.update(reverted=len(event.reverted_positions), conflicts=list(event.conflicts), forced=event.forced)
        elif isinstance(event, c.TenantDropped):
            data.update(backup=event.backup, events_backed_up=event.events_backed_up)
    if "reverted" in data:  # a revert reports its marker only, not its compensations
        data = {k: data[k] for k in ("reverted", "conflicts", "forced")}
    correlation = recorded[0].metadata.correlation_id if recorded else None
    return CommandResult(
        first_position=first,
        last_position=last,
        replayed=True,
        correlation_id=correlation or "",
        memory_ids=tuple(created or memory_ids or touched),
        data=data,
    )
