"""Operator commands over memories and edges: add, get, history, working-memory,
update, merge, archive, delete, restore, rollback, link, unlink,
undo-namespace, revert, drop-tenant, rebuild and projections.

Every command goes through :class:`mnemolog.projections.service.MemoryService`, so the
write rules, idempotency and projections are those of the API. A command that
names a tenant takes ``--tenant`` (default: ``$MNEMOLOG_TENANT`` or
``default``); a command that writes also takes ``--actor``,
``--correlation-id`` and ``--idempotency-key``. Refusals (invalid input, an
unknown memory, a state conflict) print one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable, Iterable

import msgspec

from mnemolog.eventstore.commands import CommandResult
from mnemolog.eventstore.commands.revert import FORCE_HINT
from mnemolog.eventstore.schema import MAX_POSITION
from mnemolog.eventstore.model import CONTENT_FIELDS, Conflict, MemoryContent, ValidationError

from .common import CommandError, add_command, data_dir, fail, one_line, print_json_line, require_log, tenant_name
from .common import as_of_arg, between, correlation_id, counted, reason_text
from .common import command_context as _context
from .common import tenant_of as _tenant

_ALIASES = {"text": "memory", "type": "memory_type"}
_generic = msgspec.json.Decoder()


# -- plumbing -------------------------------------------------------------------------


def _open(args: argparse.Namespace, *, catch_up: bool = True, existing: bool = True):
    """The service over the data directory; unless ``existing`` is False (``add``), one without a log is refused."""
    from mnemolog.projections.service import MemoryService

    if existing:
        require_log(args)
    return MemoryService.open(data_dir(args), catch_up=catch_up)


def _positions(result: CommandResult) -> str:
    if result.first_position is None:
        return "nothing written"
    if result.first_position == result.last_position:
        where = f"position {result.first_position}"
    else:
        where = f"positions {result.first_position}-{result.last_position}"
    if result.replayed:
        where += ", replayed: nothing new written"
    return where


def _trailer(result: CommandResult) -> str:
    return f"({_positions(result)}, correlation {result.correlation_id})"


def _result_json(result: CommandResult, **extra: Any) -> dict[str, Any]:
    out = {
        "first_position": result.first_position,
        "last_position": result.last_position,
        "replayed": result.replayed,
        "correlation_id": result.correlation_id,
        "memory_ids": list(result.memory_ids),
    }
    out.update(msgspec.to_builtins(result.data))
    out.update(extra)
    return out


def _report(args: argparse.Namespace, result: CommandResult, text: str, **extra: Any) -> int:
    if args.json:
        print_json_line(_result_json(result, **extra))
    else:
        print(text)
    return 0


def _tags(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [t for t in text.split(",") if t.strip()]


# -- add -------------------------------------------------------------------------------


def _item_from_json(lineno: int, raw: str) -> MemoryContent:
    try:
        obj = _generic.decode(raw)
    except msgspec.DecodeError as exc:
        raise ValidationError(f"line {lineno}", f"not valid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise ValidationError(f"line {lineno}", "expected a JSON object such as {\"memory\": \"...\"}")
    fields: dict[str, Any] = {}
    for name, value in obj.items():
        field = _ALIASES.get(name, name)
        if field not in CONTENT_FIELDS:
            raise ValidationError(f"line {lineno}", f"unknown field {name!r}")
        if field in fields:
            raise ValidationError(f"line {lineno}", f"field {field!r} given twice")
        fields[field] = value
    if isinstance(fields.get("tags"), str):
        fields["tags"] = _tags(fields["tags"])
    if isinstance(fields.get("sources"), str):
        fields["sources"] = [fields["sources"]]
    if "memory" not in fields:
        raise ValidationError(f"line {lineno}", "missing field 'memory' (the text)")
    try:
        return msgspec.convert(fields, MemoryContent)
    except msgspec.ValidationError as exc:
        raise ValidationError(f"line {lineno}", str(exc)) from None


def _read_batch(lines: Iterable[bytes]) -> list[MemoryContent]:
    items = []
    for lineno, raw in enumerate(lines, 1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValidationError(f"line {lineno}", f"not valid UTF-8 (byte {exc.start}: {raw[exc.start : exc.start + 1]!r})") from None
        if text.strip():
            items.append(_item_from_json(lineno, text))
    if not items:
        raise ValidationError("stdin", "no memories given: pass TEXT or JSON lines on stdin")
    return items


def cmd_add(args: argparse.Namespace) -> int:
    if args.text is not None and args.text != "-":
        fields: dict[str, Any] = {"memory": args.text}
        if args.key is not None:
            fields["key"] = args.key
        if args.type is not None:
            fields["memory_type"] = args.type
        if args.tags is not None:
            fields["tags"] = _tags(args.tags)
        if args.source:
            fields["sources"] = args.source
        if args.subject is not None:
            fields["subject"] = args.subject
        items = [msgspec.convert(fields, MemoryContent)]
    else:
        if any(v is not None for v in (args.key, args.type, args.tags, args.subject)) or args.source:
            return fail("--key, --type, --tags, --subject and --source apply to TEXT; in a batch give them in each JSON line")
        if sys.stdin is None or sys.stdin.isatty():
            return fail("give TEXT, or pipe JSON lines (one memory each) on stdin")
        items = _read_batch(sys.stdin.buffer)
    with _open(args, existing=False) as svc:
        result = svc.run(svc.memories.add, _context(args), items)
    n = len(result.memory_ids)
    text = f"added {n} {'memory' if n == 1 else 'memories'}: {', '.join(result.memory_ids)} {_trailer(result)}"
    evicted = result.data.get("evicted", 0)
    if evicted:
        text += f"; {evicted} left working memory"
    return _report(args, result, text)


# -- reads -------------------------------------------------------------------------------


def cmd_get(args: argparse.Namespace) -> int:
    with _open(args) as svc:
        view = svc.get(_tenant(args), args.id, as_of=args.as_of)
    if args.json:
        print_json_line(view)
        return 0
    rows = [
        ("id", view.id),
        ("version", str(view.version)),
        ("status", view.status),
        ("type", view.memory_type),
        ("key", view.key or "-"),
        ("tags", ", ".join(view.tags) or "-"),
        ("sources", ", ".join(view.sources) or "-"),
        ("created", view.created_at),
        ("updated", view.updated_at),
        ("valid", f"from position {view.valid_from}" + (f" to {view.valid_to}" if view.valid_to is not None else "")),
        ("memory", view.memory),
    ]
    for name, value in rows:
        print(f"{name:<9}{value}")
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    with _open(args) as svc:  # caught up: the mention links come from the graph projection
        view = svc.history_view(_tenant(args), args.id, args.as_of, after=args.after, limit=args.limit)
    versions, links, forgotten = view["versions"], view["mention_links"], view["forgotten"]
    if args.json:  # one object a line, each saying what it is; the page's line last (where the next one starts)
        for kind, items in (("version", versions), ("forgotten", forgotten), ("mention_link", links)):
            for item in items:
                print_json_line({"kind": kind, **item})
        print_json_line({"kind": "page", "more": view["more"], "next_after": view["next_after"]})
        return 0
    # The correlation id is shown whole: it is what `mnemolog revert` takes.
    correlation_width = max([len("CORRELATION"), *(len(v["correlation_id"] or "-") for v in versions)])
    print(
        f"{'VERSION':<8} {'POSITION':<9} {'STATUS':<10} {'EVENT':<18} {'ACTOR':<16} "
        f"{'CORRELATION':<{correlation_width}} {'REASON':<32} {'CHANGED':<24} MEMORY"
    )
    for v in versions:
        reason = _cut(v["reason"] or "-", 32)
        actor = _cut(v["actor"] or "-", 16)
        correlation = one_line(v["correlation_id"] or "-")
        changed = _cut(",".join(v["changed"]) or "-", 24)
        memory = _cut(v["memory"], 60)
        print(
            f"{v['version']:<8} {v['position']:<9} {v['status']:<10} {v['event_type']:<18} {actor:<16} "
            f"{correlation:<{correlation_width}} {reason:<32} {changed:<24} {memory}"
        )
    if view["more"]:
        print(f"more versions follow: --after {view['next_after']}")
    if links:
        print("mentions:")
        for link in links:
            held = f"positions {link['linked_at']}-{link['unlinked_at']}" if link["unlinked_at"] is not None else f"since position {link['linked_at']}"
            print(f"  {link['entity_id']} ({link['alias']}, {link['weight']}) {held}")
    for f in forgotten:
        print(
            f"forgotten: subject {f['subject']!r} at position {f['position']} ({f['recorded_at']}) by {f['actor'] or '-'},"
            f" correlation {f['correlation_id']}: {one_line(f['reason'] or '-')}"
        )
    return 0


def _cut(text: str, width: int) -> str:
    text = one_line(text)
    return text if len(text) <= width else text[: width - 1] + "…"


def cmd_working_memory(args: argparse.Namespace) -> int:
    with _open(args) as svc:
        position = svc.resolve_as_of(args.as_of)
        entries = svc.graph.working_memory(_tenant(args), as_of=position, memories=True)
        capacity = svc.working_capacity
    if args.json:
        for entry in entries:
            print_json_line(entry)
        return 0
    where = "at the head" if position is None else f"as of position {position}"
    print(f"working memory of {_tenant(args)} {where}: {len(entries)} of {capacity} entries, oldest first")
    if entries:
        print(f"{'ENTERED':<9} {'TYPE':<16} {'STATUS':<10} {'MEMORY':<38} TEXT")
    for e in entries:
        status = e.memory.status if e.memory is not None else "-"
        text = _cut(e.memory.memory, 60) if e.memory is not None else "-"
        print(f"{e.entered_at:<9} {e.memory_type:<16} {status:<10} {e.memory_id:<38} {text}")
    return 0


# -- content changes -----------------------------------------------------------------------


def cmd_update(args: argparse.Namespace) -> int:
    changes: dict[str, Any] = {}
    if args.text is not None:
        changes["memory"] = args.text
    if args.key is not None:
        changes["key"] = args.key or None
    if args.tags is not None:
        changes["tags"] = tuple(_tags(args.tags) or ())
    if args.subject is not None:
        changes["subject"] = args.subject or None
    if not changes:
        return fail("nothing to update: give --text, --key, --tags or --subject")
    with _open(args) as svc:
        result = svc.run(svc.memories.update, _context(args), args.id, changes, expected_version=args.if_version, reason=args.reason or "")
    if not result.data.get("changed"):
        text = f"no change: {args.id} stays at version {result.data.get('version')}"
    else:
        text = f"updated {args.id} to version {result.data['version']} (changed {', '.join(result.data['changed'])}) {_trailer(result)}"
    return _report(args, result, text)


def cmd_merge(args: argparse.Namespace) -> int:
    with _open(args) as svc:
        result = svc.run(svc.memories.merge, _context(args), args.ids, text=args.text)
    data = result.data
    text = (
        f"merged {counted(len(data['sources']), 'memory', 'memories')} into {data['merged_id']}"
        f" (sources archived, {counted(data['repointed'], 'edge')} re-pointed) {_trailer(result)}"
    )
    return _report(args, result, text)


def cmd_rollback(args: argparse.Namespace) -> int:
    with _open(args) as svc:
        result = svc.run(
            svc.memories.rollback, _context(args), args.id, args.to, expected_version=args.if_version, reason=args.reason or ""
        )
    text = f"rolled {args.id} back to version {args.to}'s content and status, as version {result.data['version']} {_trailer(result)}"
    return _report(args, result, text)


def _status_command(verb: str, method: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        kwargs: dict[str, Any] = {"reason": args.reason or "", "expected_version": args.if_version}
        if method == "soft_delete":
            kwargs["evolve_to"] = args.evolve_to
        with _open(args) as svc:
            result = svc.run(getattr(svc.memories, method), _context(args), args.id, **kwargs)
        text = f"{verb} {args.id} (version {result.data['version']}) {_trailer(result)}"
        return _report(args, result, text)

    return run


# -- edges ---------------------------------------------------------------------------------


def cmd_link(args: argparse.Namespace) -> int:
    with _open(args) as svc:
        result = svc.run(svc.edges.link, _context(args), args.source, args.target, args.type, weight=args.weight, edge_id=args.id)
    edge_id = result.data["edge_ids"][0]
    text = f"linked {edge_id}: {args.source} -[{args.type} {args.weight:g}]-> {args.target} {_trailer(result)}"
    return _report(args, result, text)


def cmd_unlink(args: argparse.Namespace) -> int:
    with _open(args) as svc:
        result = svc.run(svc.edges.unlink, _context(args), args.edge_id, reason=args.reason or "")
    return _report(args, result, f"unlinked {args.edge_id} {_trailer(result)}")


def cmd_undo_namespace(args: argparse.Namespace) -> int:
    with _open(args) as svc:
        result = svc.run(svc.edges.undo_namespace, _context(args), args.prefix, reason=args.reason or "")
    removed = result.data.get("removed", 0)
    if removed:
        text = f"removed {removed} live edge{'s' if removed != 1 else ''} under {args.prefix!r} {_trailer(result)}"
    else:
        text = f"no live edges under {args.prefix!r}: nothing written"
    return _report(args, result, text)


# -- revert, drop --------------------------------------------------------------------------


def cmd_revert(args: argparse.Namespace) -> int:
    with _open(args) as svc:
        try:
            result = svc.run(svc.reverts.revert, _context(args), args.correlation, force=args.force, dry_run=args.dry_run)
        except Conflict as exc:
            if exc.field != "force":
                raise
            raise CommandError(f"conflict: {str(exc).replace(FORCE_HINT, 'pass --force to revert anyway')}") from None
    data = result.data
    if data.get("already_reverted"):
        text = f"correlation {args.correlation} was already reverted: nothing written"
    elif data.get("nothing_to_revert"):
        text = f"correlation {args.correlation} is a revert that changed nothing: nothing to revert, nothing written"
    elif data.get("dry_run"):
        n, touched, conflicts = data["would_revert"], result.memory_ids, data["conflicts"]
        text = f"would revert {counted(n, 'event')} of correlation {args.correlation}, touching {counted(len(touched), 'memory', 'memories')}"
        text += f" ({', '.join(touched)})" if touched else ""
        if data.get("through"):
            text += f", by reverting {data['through']}, the revert that brought it back"
        if data.get("forced"):
            text += f"; would force {counted(len(conflicts), 'conflict')}: " + "; ".join(conflicts)
        else:
            text += f"; refused unless --force, {counted(len(conflicts), 'conflict')}: " + "; ".join(conflicts) if conflicts else "; no conflict"
        text += " (nothing written)"
    else:
        text = f"reverted {counted(data['reverted'], 'event')} of correlation {args.correlation} {_trailer(result)}"
        if data.get("through"):
            text = f"reverted correlation {args.correlation} again, by reverting {data['through']}, the revert that brought it back: {counted(data['reverted'], 'event')} {_trailer(result)}"
        if data.get("forced"):
            text += f"; forced over {counted(len(data['conflicts']), 'conflict')}: " + "; ".join(data["conflicts"])
    return _report(args, result, text)


def cmd_forget(args: argparse.Namespace) -> int:
    if not args.yes:
        return fail(f"forgetting subject {args.subject!r} destroys its keys: its data can never be read again; pass --yes to confirm")
    ctx = _context(args)
    with _open(args) as svc:
        result = svc.forget(ctx, args.subject, reason=args.reason or "")
    data = result.data
    text = (
        f"forgot subject {args.subject}: {counted(data.get('keys_destroyed', 0), 'key')} destroyed,"
        f" {counted(data.get('memories_erased', 0), 'memory', 'memories')} erased {_trailer(result)}"
    )
    if data.get("already_forgotten"):
        earlier = "; ".join(f"position {f['position']} at {f['recorded_at']}" + (f" ({f['reason']})" if f["reason"] else "") for f in data["already_forgotten"])
        text = f"subject {args.subject} was already forgotten: {earlier}; nothing written"
    if plaintext := data.get("plaintext_positions"):
        one = len(plaintext) == 1
        text += (
            f"; {len(plaintext)} {'event stays' if one else 'events stay'} in the log in plaintext"
            f" ({'position' if one else 'positions'} {', '.join(map(str, plaintext))}):"
            f" written unsealed, no key can erase {'it' if one else 'them'}; every read shows {'it' if one else 'them'} erased"
        )
    return _report(args, result, text)


def cmd_drop_tenant(args: argparse.Namespace) -> int:
    if not args.tenant:
        return fail("name the tenant to drop with --tenant")
    if not args.yes:
        return fail(f"dropping tenant {args.tenant!r} hides all its data from every projection; pass --yes to confirm")
    with _open(args) as svc:
        result = svc.drop_tenant(_context(args), reason=args.reason or "")
        data = result.data  # the backup named relative to the data directory, as the log records it
        text = f"dropped tenant {args.tenant}: {counted(data['events_backed_up'], 'event')} backed up to {svc.data_dir / data['backup']} {_trailer(result)}"
    return _report(args, result, text, tenant=args.tenant)


# -- projections ---------------------------------------------------------------------------


def cmd_rebuild(args: argparse.Namespace) -> int:
    with _open(args, catch_up=False) as svc:
        names = args.projection or None
        unknown = [n for n in names or () if n not in svc.runner.by_name]
        if unknown:
            return fail(f"unknown projection(s): {', '.join(unknown)}; known: {', '.join(svc.runner.by_name)}")
        # Before anything is dropped: a replay must not read a log whose chain is broken as good, and a log it
        # cannot read (a key store that is not the log's, a sealed field that does not authenticate) would leave
        # the projections empty, where they still answer now. The triggers are verify's concern, not the replay's.
        checked = svc.store.verify(guards=False)
        if not checked.ok:
            return fail(f"rebuild refused, projections kept: the log fails verify at position {checked.broken_at}: {checked.reason}")
        timings = svc.runner.rebuild(names)
        position = svc.runner.position()
    if args.json:
        for name, seconds in timings.items():
            print_json_line({"name": name, "seconds": round(seconds, 6), "position": position})
        return 0
    width = max(len(n) for n in timings) if timings else 0
    for name, seconds in timings.items():
        print(f"{name:<{width}}  {seconds:8.3f} s")
    print(f"rebuilt {len(timings)} projection{'s' if len(timings) != 1 else ''} up to position {position}")
    return 0


def cmd_projections(args: argparse.Namespace) -> int:
    with _open(args, catch_up=False) as svc:
        status = svc.runner.status()
    if args.json:
        for row in status:
            print_json_line(row)
        return 0
    width = max([len("NAME")] + [len(str(r["name"])) for r in status])
    print(f"{'NAME':<{width}}  {'SCHEMA':>6}  {'CHECKPOINT':>10}  {'LAG':>8}  {'ROWS':>10}")
    for r in status:
        rows = "-" if r["rows"] is None else str(r["rows"])
        print(f"{r['name']:<{width}}  {r['schema_version']:>6}  {r['checkpoint']:>10}  {r['lag']:>8}  {rows:>10}")
    return 0


# -- argument types and registration ----------------------------------------------------------


def _positive(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a version number (1 or more), got {text!r}")
    return int(text)


def _weight(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}") from None


def _tenant_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tenant", metavar="TENANT", type=tenant_name, help="the tenant (default: $MNEMOLOG_TENANT or 'default')")


def _writer_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--actor", metavar="NAME", help="who makes the change (kept in the events' metadata)")
    parser.add_argument("--correlation-id", metavar="ID", type=correlation_id, help="correlation id (default: a new one), for a later revert")
    parser.add_argument("--idempotency-key", metavar="KEY", help="a retry with the same key writes nothing and answers the same")


def _command(subparsers, name: str, func, help: str, *, writes: bool = False, tenant: bool = True) -> argparse.ArgumentParser:
    parser = add_command(subparsers, name, func, help=help, json=True)
    if tenant:
        _tenant_option(parser)
    if writes:
        _writer_options(parser)
    return parser


def register(subparsers) -> None:
    p = _command(subparsers, "add", cmd_add, "add a memory (TEXT), or a batch of JSON lines from stdin, atomically", writes=True)
    p.add_argument("text", nargs="?", metavar="TEXT", help="the memory's text (omit it, or give -, to read JSON lines from stdin)")
    p.add_argument("--key", metavar="K", help="a short key (e.g. 'home city')")
    p.add_argument("--type", metavar="TYPE", help="memory type (default LongTermMemory)")
    p.add_argument("--tags", metavar="A,B", help="comma-separated tags")
    p.add_argument("--source", action="append", metavar="S", help="a source (repeatable)")
    p.add_argument("--subject", metavar="S", help="whose data it is (a pseudonymous id): sealed with that subject's key, erased by forget")

    p = _command(subparsers, "get", cmd_get, "show a memory (as of a position or time)")
    p.add_argument("id", metavar="ID")
    p.add_argument("--as-of", type=as_of_arg, metavar="P|TIME", help="a log position or an ISO-8601 UTC time")

    p = _command(subparsers, "history", cmd_history, "list a memory's versions (as of a position or time)")
    p.add_argument("id", metavar="ID")
    p.add_argument("--as-of", type=as_of_arg, metavar="P|TIME", help="a log position or an ISO-8601 UTC time: the versions written by then")
    p.add_argument("--after", type=between(0, MAX_POSITION), default=0, metavar="V", help="only the versions after version V")
    p.add_argument("--limit", type=between(1, MAX_POSITION), metavar="N", help="at most N versions (default: all)")

    p = _command(subparsers, "working-memory", cmd_working_memory, "list the tenant's working memory, oldest entry first (as of a position or time)")
    p.add_argument("--as-of", type=as_of_arg, metavar="P|TIME", help="a log position or an ISO-8601 UTC time")

    p = _command(subparsers, "update", cmd_update, "write a new version of a memory", writes=True)
    p.add_argument("id", metavar="ID")
    p.add_argument("--text", metavar="T", help="new text")
    p.add_argument("--key", metavar="K", help="new key ('' clears it)")
    p.add_argument("--tags", metavar="A,B", help="new tags, comma-separated ('' clears them)")
    p.add_argument("--subject", metavar="S", help="new subject ('' makes it the tenant's)")
    p.add_argument("--if-version", type=_positive, metavar="N", help="refuse unless the memory is at version N")
    p.add_argument("--reason", metavar="R", type=reason_text, help="why (kept in history)")

    p = _command(subparsers, "merge", cmd_merge, "merge memories into a new one (sources archived)", writes=True)
    p.add_argument("ids", nargs="+", metavar="ID", help="two or more memory ids")
    p.add_argument("--text", metavar="T", help="the merged memory's text (default: the longest)")

    for name, verb, method, help_text in (
        ("archive", "archived", "archive", "archive an activated memory"),
        ("delete", "deleted", "soft_delete", "soft-delete a memory (restorable)"),
        ("restore", "restored", "restore", "make an archived or deleted memory active again"),
    ):
        p = _command(subparsers, name, _status_command(verb, method), help_text, writes=True)
        p.add_argument("id", metavar="ID")
        p.add_argument("--reason", metavar="R", type=reason_text, help="why (kept in history)")
        p.add_argument("--if-version", type=_positive, metavar="N", help="refuse unless the memory is at version N")
        if name == "delete":
            p.add_argument("--evolve-to", metavar="ID", help="the memory this one evolved into")

    p = _command(subparsers, "rollback", cmd_rollback, "a new version equal to an earlier one", writes=True)
    p.add_argument("id", metavar="ID")
    p.add_argument("--to", type=_positive, required=True, metavar="N", help="the version to return to")
    p.add_argument("--if-version", type=_positive, metavar="N", help="refuse unless the memory is at version N")
    p.add_argument("--reason", metavar="R", type=reason_text, help="why (kept in history)")

    p = _command(subparsers, "link", cmd_link, "link two nodes with a typed, weighted edge", writes=True)
    p.add_argument("source", metavar="SRC")
    p.add_argument("target", metavar="DST")
    p.add_argument("--type", required=True, metavar="T", help="edge type, UPPER_SNAKE_CASE (e.g. RELATED)")
    p.add_argument("--weight", type=_weight, default=1.0, metavar="W", help="between 0 and 1 (default 1)")
    p.add_argument("--id", metavar="NAMESPACED_ID", help="edge id as <namespace>:<run>:<n> (default user:<correlation>:<n>, the first number free in the correlation)")

    p = _command(subparsers, "unlink", cmd_unlink, "remove a live edge", writes=True)
    p.add_argument("edge_id", metavar="EDGE_ID")
    p.add_argument("--reason", metavar="R", type=reason_text)

    p = _command(subparsers, "undo-namespace", cmd_undo_namespace, "remove every live edge under PREFIX (a namespace or a run, whole segments)", writes=True)
    p.add_argument("prefix", metavar="PREFIX", help="e.g. mention: (the namespace) or mention:run-7 (the run; never mention:run-70)")
    p.add_argument("--reason", metavar="R", type=reason_text)

    p = _command(subparsers, "revert", cmd_revert, "undo everything one correlation did, with compensating events", writes=True)
    p.add_argument("correlation", metavar="CORRELATION_ID")
    p.add_argument("--force", action="store_true", help="revert even when later changes touch the same memories or edges")
    p.add_argument("--dry-run", action="store_true", help="say what it would revert, and the conflicts, writing nothing")

    p = _command(
        subparsers, "forget", cmd_forget, "crypto-shred a subject: destroy its keys, erase its memories from every read, record who and why, name the events the log keeps in plaintext", writes=True
    )
    p.add_argument(
        "--subject", required=True, metavar="S", help="the subject named on its memories, or @tenant: the tenant's own key (its entities, documents and memories without a subject)"
    )
    p.add_argument("--reason", metavar="R", type=reason_text, help="why (recorded in the log; no personal data)")
    p.add_argument("--yes", action="store_true", help="confirm")
    p.epilog = "Without --actor, the log records the operating-system user as the actor (cli:USER)."

    p = _command(subparsers, "drop-tenant", cmd_drop_tenant, "back the tenant up, then remove it from every projection", writes=True)
    p.add_argument("--yes", action="store_true", help="confirm")
    p.add_argument("--reason", metavar="R", type=reason_text)

    p = _command(subparsers, "rebuild", cmd_rebuild, "drop projections and replay them from the log", tenant=False)
    p.add_argument("--projection", action="append", metavar="NAME", help="only this projection (repeatable)")

    _command(subparsers, "projections", cmd_projections, "each projection's checkpoint, lag and rows", tenant=False)

