"""Commands over the event log: migrate, log, verify, digest, stats (export and import: :mod:`.exchange_cmds`)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import sqlite3
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Callable, Iterable

import msgspec

from mnemolog.api.auth import keys_beside_log
from mnemolog.eventstore import Digest, EventStore, EventStoreError, ImportRefused, RecordedEvent
from mnemolog.eventstore import dialects
from mnemolog.eventstore import migrate
from mnemolog.eventstore.chain import StoredRow, VerifyResult
from mnemolog.eventstore.erased import LIVE_PART, ErasedMemories, live_events, plaintext_kept
from mnemolog.eventstore.events import decode_payload, registered_types
from mnemolog.eventstore.exchange import read_export
from mnemolog.eventstore.guards import restore_guards
from mnemolog.eventstore.recorder import parse_moment
from mnemolog.eventstore.schema import MAX_POSITION
from mnemolog.projections.runner import not_from_log

from . import exchange_cmds
from .common import CommandError, add_command, between, counted, data_dir, fail, open_store, print_json_line, sqlite_path
from .progress import progress_for

_generic = msgspec.json.Decoder()

# -- argument types -----------------------------------------------------------


def position_arg(text: str) -> int:
    """A log position, 0 to the largest the log numbers (a larger one would fail in the database, not here)."""
    if not text.strip().isdigit() or int(text) > MAX_POSITION:
        raise argparse.ArgumentTypeError(f"expected a position (a whole number from 0 to {MAX_POSITION}), got {text!r}")
    return int(text)


def time_arg(text: str) -> datetime:
    """An ISO time; naive times are UTC, a bare date is its midnight."""
    try:
        return parse_moment(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an ISO time such as 2026-01-31T12:00:00Z, got {text!r}") from None


# -- rendering ----------------------------------------------------------------


def _payload(row: StoredRow, sealer=None, erased: ErasedMemories | None = None) -> Any:
    """The payload decoded through its event type (upcast, sealed fields opened, erased where a later forget
    names its memory), or as stored for types this process lacks."""
    try:
        event = decode_payload(row.type, row.schema_version, row.payload)
        event = sealer.unseal(event, row.event_id) if sealer is not None else event
        return msgspec.to_builtins(erased.event(row.tenant, row.position, event) if erased is not None else event)
    except (EventStoreError, msgspec.MsgspecError):
        return _generic.decode(row.payload)


def row_dict(row: StoredRow, sealer=None, erased: ErasedMemories | None = None) -> dict[str, Any]:
    return {
        "position": row.position,
        "event_id": row.event_id,
        "stream_id": row.stream_id,
        "stream_version": row.stream_version,
        "type": row.type,
        "schema_version": row.schema_version,
        "tenant": row.tenant,
        "recorded_at": row.recorded_at,
        "payload": _payload(row, sealer, erased),
        "metadata": _generic.decode(row.metadata),
    }


def recorded_dict(recorded: RecordedEvent) -> dict[str, Any]:
    return recorded.to_dict()


def summary(payload: Any, width: int = 60) -> str:
    if isinstance(payload, dict):
        parts = []
        for key, value in payload.items():
            if key == "type":
                continue
            shown = value if isinstance(value, str) else msgspec.json.encode(value).decode()
            parts.append(f"{key}={shown}")
        text = " ".join(parts)
    else:
        text = str(payload)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


class Table:
    """Aligned columns; widths come from the first rows shown and are kept after."""

    HEADERS = ("POSITION", "RECORDED_AT", "TENANT", "STREAM@VERSION", "TYPE", "PAYLOAD")
    CAPS = (12, 27, 16, 40, 32, 0)

    def __init__(self, out: Callable[[str], None]):
        self.out = out
        self.widths: list[int] | None = None

    @staticmethod
    def cells(event: dict[str, Any]) -> tuple[str, ...]:
        return (
            str(event["position"]),
            event["recorded_at"],
            event["tenant"],
            f"{event['stream_id']}@{event['stream_version']}",
            event["type"],
            summary(event["payload"]),
        )

    def show(self, events: list[dict[str, Any]]) -> None:
        rows = [self.cells(e) for e in events]
        if self.widths is None:
            self.widths = [
                min(cap, max(len(h), *(len(r[i]) for r in rows))) if cap else 0
                for i, (h, cap) in enumerate(zip(self.HEADERS, self.CAPS))
            ]
            self._line(self.HEADERS)
        for row in rows:
            self._line(row)

    def _line(self, cells: Iterable[str]) -> None:
        parts = []
        for cell, width in zip(cells, self.widths or ()):
            if width and len(cell) > width:
                cell = cell[: width - 1] + "…"
            parts.append(cell.ljust(width) if width else cell)
        self.out("  ".join(parts).rstrip())


# -- migrate --------------------------------------------------------------------


def cmd_migrate(args: argparse.Namespace) -> int:
    with open_store(args, migrate=False) as store:
        engine = dialects.create_migration_engine(store.url)
        try:
            before, ran = migrate.upgrade_log(engine)
            after = migrate.current_revision(engine)
            restored = restore_guards(engine)
        finally:
            engine.dispose()
        if keys_beside_log(store.url):  # the API keys its servers share, beside the log (made as the owner, as the log is)
            from mnemolog.api.auth_postgres import PostgresKeyRows

            PostgresKeyRows.open(store.url).close()
    if args.json:
        print_json_line(
            {"revision": after, "previous": before, "head": migrate.head_revision(), "migrated": ran, "restored": restored}
        )
        return 0
    if ran:
        print(f"schema revision {after} (migrated from {before or 'an empty database'})")
    else:
        print(f"schema revision {after} ({'guards restored' if restored else 'up to date'})")
    for problem in restored:
        print(f"restored {problem.trigger} on {problem.table} (it was {problem.problem})")
    return 0


# -- log --------------------------------------------------------------------------


def _range(store, args) -> tuple[int, int | None]:
    after, until = args.after or 0, args.until
    if args.since is not None and args.since > datetime.min.replace(tzinfo=args.since.tzinfo):  # nothing is before the first moment
        after = max(after, store.position_at(args.since - timedelta(microseconds=1)))
    if args.until_time is not None:
        bound = store.position_at(args.until_time)
        until = bound if until is None else min(until, bound)
    return after, until


def _holds_type(store, type_: str) -> bool:
    """Whether the log holds an event of ``type_`` (its raw rows: a type this version cannot decode too)."""
    with contextlib.closing(store.iter_rows(0, batch_size=1, types=[type_])) as pages:
        return next(pages, None) is not None


def _check_types(store, types: list[str] | None) -> None:
    """Refuse a ``--type`` that names no event type this version writes (the catalogue registers them as it
    is imported) and none the log holds: misspelt, it would list nothing, as a type never written does."""
    importlib.import_module("mnemolog.eventstore.catalogue")
    known = registered_types()
    unknown = [t for t in types or () if t not in known and not _holds_type(store, t)]
    if unknown:
        raise CommandError(f"--type: unknown event type(s) {', '.join(map(repr, unknown))}; known: {', '.join(sorted(known))}")


def cmd_log(args: argparse.Namespace) -> int:
    if args.follow and (args.until is not None or args.until_time is not None):
        return fail("--follow cannot be combined with --until or --until-time")
    if args.after is not None and args.until is not None and args.until < args.after:
        return fail(f"--until {args.until} is before --after {args.after}: no position lies between")
    if args.since is not None and args.until_time is not None and args.until_time < args.since:
        return fail("--until-time is before --since: no moment lies between")
    emitted = 0
    table = None if args.json else Table(lambda text: print(text, flush=args.follow))

    def emit(events: list[dict[str, Any]]) -> bool:
        """Print events; False once --limit is reached."""
        nonlocal emitted
        if args.limit is not None:
            events = events[: args.limit - emitted]
        if table is not None:
            if events:
                table.show(events)
        else:
            for event in events:
                print_json_line(event)
            if args.follow:
                sys.stdout.flush()
        emitted += len(events)
        return args.limit is None or emitted < args.limit

    with open_store(args, existing=True) as store:
        _check_types(store, args.types)
        after, until = _range(store, args)
        head = store.last_position()
        if args.follow:
            until = head if until is None else min(until, head)
        filters = {"tenant": args.tenant, "types": args.types, "stream_id": args.stream, "correlation_id": args.correlation}
        batch = min(args.limit or 5000, 5000)
        going = True
        erased = ErasedMemories.of(store, args.tenant)  # the memories forgets erased: their events read erased, as everywhere
        for rows in store.iter_rows(after, until=until, batch_size=batch, **filters):
            for start in range(0, len(rows), LIVE_PART):  # the forgets read again before each part, as a live read does
                erased.refresh()
                if not emit([row_dict(r, store.sealer, erased) for r in rows[start : start + LIVE_PART]]):
                    going = False
                    break
            if not going:
                break
        if not args.follow:
            if emitted == 0 and table is not None:
                print("(no events)")
            return 0
        if not going:
            return 0
        if table is not None and table.widths is None:
            table.widths = [8, 27, 12, 28, 24, 0]
            table._line(Table.HEADERS)
            sys.stdout.flush()
        try:
            asyncio.run(_follow(store, args, max(after, head), emit, erased))
        except KeyboardInterrupt:
            pass
    return 0


async def _follow(store, args, after: int, emit: Callable[[list[dict[str, Any]]], bool], erased: ErasedMemories) -> None:
    """Tail the log through :func:`live_events` (erased as forgets go, those recorded while it runs too) until
    --limit is reached (or Ctrl-C)."""

    def wanted(stream_id: str, correlation_id: str | None) -> bool:
        return (args.stream is None or stream_id == args.stream) and (
            args.correlation is None or correlation_id == args.correlation
        )

    position = after
    while True:
        try:
            async for part in live_events(store, position, erased, tenant=args.tenant, types=args.types):
                for recorded in part:
                    position = recorded.position
                    if wanted(recorded.stream_id, recorded.metadata.correlation_id) and not emit([recorded_dict(recorded)]):
                        return
        except (EventStoreError, msgspec.MsgspecError):
            # A type this process cannot decode: show the next rows as stored, then resubscribe.
            rows = store.recorder.select_rows(after=position, limit=1000, tenant=args.tenant, types=args.types)
            for row in rows:
                position = row.position
                if wanted(row.stream_id, row.correlation_id) and not emit([row_dict(row, store.sealer, erased)]):
                    return


# -- verify / digest ------------------------------------------------------------


def _references(values: list[str] | None) -> tuple[list[Digest], list[Path]]:
    """``--against`` values: digests (POSITION:HASH) and stored export files."""
    digests: list[Digest] = []
    exports: list[Path] = []
    for value in values or ():
        try:
            digests.append(Digest.parse(value))
            continue
        except ValueError:
            pass
        path = Path(value)
        if not path.is_file():
            raise CommandError(f"--against: expected POSITION:HASH (64 hex digits) or an export file, got {value!r}")
        exports.append(path)
    if len(exports) > 1:
        raise CommandError("--against: give at most one export file")
    return digests, exports


def _headerless(exports: list[Path]) -> str:
    """A note for an export file without the header (written before the header and footer existed): nothing says
    where it ended, so a file cut short still reads as a reference for the rows it has."""
    if not exports:
        return ""
    try:
        with open(exports[0], "rb") as file:
            first = file.readline(200)
    except OSError:
        return ""
    if first.lstrip().startswith(b'{"mnemolog_export"'):
        return ""
    return " (the export has no header or footer, the format before them: a file cut short would not show)"


def cmd_verify(args: argparse.Namespace) -> int:
    if args.from_ is not None and args.to is not None and args.from_ > args.to:
        raise CommandError(f"--from {args.from_} is after --to {args.to}: nothing to check")
    digests, exports = _references(args.against)
    with contextlib.ExitStack() as stack:
        rows = None
        if exports:
            try:
                rows = read_export(stack.enter_context(open(exports[0], "rb")))
            except OSError as exc:
                raise CommandError(f"--against {exports[0]}: {exc.strerror or exc}") from None
        store = stack.enter_context(open_store(args, existing=True))
        total = store.last_position()
        if args.to is not None:
            total = min(total, args.to)
        with progress_for(args, "verify", max(0, total - (args.from_ or 1) + 1)) as progress:
            try:
                result = store.verify(args.from_ or 1, args.to, against=digests or None, export=rows, progress=progress)
            except (ImportRefused, ValueError) as exc:
                raise CommandError(f"--against {exports[0]}: {exc}" if exports else f"--against: {exc}") from None
        tip = store.digest() if result.last_position is None and args.to is None and args.from_ is None else None
        if result.ok and args.to is None:
            result = _against_projections(result, data_dir(args) / "projections.db", store)
        if result.ok:
            result = msgspec.structs.replace(result, plaintext_kept=plaintext_kept(store, args.from_ or 1, args.to))
    if args.json:
        print_json_line(result)
    elif result.ok:
        if result.last_position is not None:
            shown = f"{result.last_position}:{result.tip_hash}"
        else:
            shown = str(tip) if tip is not None else "-"
        print(f"ok: {counted(result.checked, 'event')}, tip {shown}")
        if result.unchanged_through is not None:
            print(f"the reference holds the log unchanged through position {result.unchanged_through}{_headerless(exports)}")
        if kept := result.plaintext_kept:
            print(
                f"note: {len(kept)} event{'s keep' if len(kept) != 1 else ' keeps'} text a forget erased in plaintext"
                f" (positions {', '.join(map(str, kept))}): written unsealed, no key can erase them; every read shows them erased"
            )
    else:
        if result.broken_at is not None:
            print(f"broken at position {result.broken_at}: {result.reason} ({counted(result.checked, 'event')} checked before it)")
        if result.difference is not None:
            print(f"first difference: {result.difference}")
        for problem in result.guards:
            print(f"guard {problem.problem}: {problem} (mnemolog migrate restores it)")
    return 0 if result.ok else 1


def _against_projections(result: VerifyResult, path: Path, store: EventStore) -> VerifyResult:
    """A witness beside the log: projections built from events the log does not hold mean it lost them.

    Projections applied up to a position the log does not reach (a cut tail), or whose last
    applied event is not the log's event at that position (an older ``events.db`` put back
    and written past it since): see :func:`~mnemolog.projections.runner.not_from_log`.
    Read only, before any ``serve`` or command rebuilds them (which they then do). Without a
    kept digest this is the only sign of a lost tail that the chain itself cannot show. The
    checkpoints are read before the log's head: a server beside this command applies only
    what the log holds, so a write it appends and projects in between moves the head first
    and is never taken for a lost tail.
    """
    if not path.is_file():
        return result
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            try:
                applied = conn.execute("SELECT DISTINCT position, event_id FROM checkpoints ORDER BY position DESC").fetchall()
            except sqlite3.OperationalError:  # written before checkpoints kept their event
                applied = [(p, None) for (p,) in conn.execute("SELECT DISTINCT position FROM checkpoints ORDER BY position DESC")]
        finally:
            conn.close()
    except sqlite3.Error:  # no checkpoints yet, or not ours: no witness
        return result
    head = store.last_position()
    in_log: dict[int, str | None] = {}
    for position, event_id in applied:
        reason = not_from_log(store, position, event_id, head, in_log)
        if reason is not None:
            reason = f"{path.name} was built from events the log does not hold: {reason}"
            return msgspec.structs.replace(result, ok=False, broken_at=min(position, head + 1), reason=reason)
    return result


def cmd_digest(args: argparse.Namespace) -> int:
    with open_store(args, existing=True) as store:
        digest = store.digest()
    if args.json:
        print_json_line({"position": digest.position, "hash": digest.hash})
    else:
        print(digest)
    return 0


def _size(nbytes: int) -> str:
    size = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{nbytes} B"  # pragma: no cover


def cmd_stats(args: argparse.Namespace) -> int:
    with open_store(args, existing=True) as store:
        stats = store.stats()
        path = sqlite_path(store)
    if path is not None:
        wal = path.with_name(path.name + "-wal")
        stats["file"] = str(path)
        stats["file_bytes"] = path.stat().st_size if path.exists() else 0
        stats["wal_bytes"] = wal.stat().st_size if wal.exists() else 0
    if args.json:
        print_json_line(stats)
        return 0
    rows = [
        ("events", f"{stats['events']:,}"),
        ("streams", f"{stats['streams']:,}"),
        ("last position", str(stats["last_position"])),
        ("first recorded", stats["first_recorded_at"] or "-"),
        ("last recorded", stats["last_recorded_at"] or "-"),
    ]
    if path is not None:
        rows.append(("events.db", f"{_size(stats['file_bytes'])} (+ {_size(stats['wal_bytes'])} WAL)"))
    for name, value in rows:
        print(f"{name:<16}{value}")
    for title, counts in (("by type", stats["by_type"]), ("by tenant", stats["by_tenant"])):
        print(title)
        width = max((len(k) for k in counts), default=0)
        for key, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            print(f"  {key:<{width}}  {count:>10,}")
    return 0


# -- registration -------------------------------------------------------------------


def register(subparsers) -> None:
    p = add_command(
        subparsers, "migrate", cmd_migrate, help="bring the log's schema up to date, restore its append-only triggers, print its revision", json=True
    )

    p = add_command(subparsers, "log", cmd_log, help="list events (filters, table or JSON lines, --follow)", json=True, tenant=True)
    p.add_argument("--stream", metavar="STREAM_ID", help="only this stream")
    p.add_argument("--type", dest="types", action="append", metavar="TYPE", help="only this event type (repeatable)")
    p.add_argument("--after", type=position_arg, metavar="POS", help="only positions after POS")
    p.add_argument("--until", type=position_arg, metavar="POS", help="only positions up to POS")
    p.add_argument("--since", type=time_arg, metavar="TIME", help="only events recorded at or after TIME (ISO, UTC)")
    p.add_argument("--until-time", type=time_arg, metavar="TIME", help="only events recorded up to TIME (ISO, UTC)")
    p.add_argument("--correlation", metavar="ID", help="only events with this correlation id")
    p.add_argument("--limit", type=between(1, MAX_POSITION), metavar="N", help="at most N events")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing new events until Ctrl-C")

    p = add_command(subparsers, "verify", cmd_verify, help="check the hash chain and the append-only triggers", json=True)
    p.add_argument("--from", dest="from_", type=position_arg, metavar="P", help="first position to check")
    p.add_argument("--to", type=position_arg, metavar="P", help="last position to check (a log that ends before it fails the check)")
    p.add_argument(
        "--against",
        action="append",
        metavar="POSITION:HASH|FILE",
        help="a digest kept elsewhere, or a stored export, that the log must still match (repeatable)",
    )

    add_command(subparsers, "digest", cmd_digest, help="print the log's tip as POSITION:HASH", json=True)

    exchange_cmds.register(subparsers)

    add_command(subparsers, "stats", cmd_stats, help="counts, time span and file size of the log", json=True)
