"""What every command carries (who, why, which correlation) and what it returns."""

from __future__ import annotations

from datetime import datetime, timezone
from hashlib import sha256
from typing import Any, Sequence

import msgspec

from ..events import Metadata
from ..ids import new_id
from ..store import AppendResult, EventStore, StreamAppend


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

    def scoped_key(self, command: str) -> str | None:
        if self.idempotency_key is None:
            return None
        return f"{self.tenant}/{command}/{self.idempotency_key}"


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
        idempotency_key=ctx.scoped_key(command),
        fingerprint=fingerprint(command, request) if ctx.idempotency_key else None,
    )
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
