"""Knowledge-graph commands: ``import docs``, ``relink`` and ``entity …``.

``mnemolog import docs PATH…`` shares the ``import`` command with the log's
``mnemolog import FILE``: a first argument ``docs`` selects documents
(``mnemolog import ./docs`` still imports an export file named ``docs``).
Directories are searched for ``.txt``, ``.md``, ``.markdown`` and ``.pdf``
files. A document's id is its path relative to ``--root`` (default: the
current directory), so ``a/README.md`` and ``b/README.md`` are two documents
and importing the same tree again from the same root writes nothing;
``--doc-id`` names a single file's document. A path that does not exist, a
file outside the root, or two files that would share an id, refuse the whole
run before anything is written. A file that cannot be read is reported and skipped; the command then
exits 1 after importing the rest.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from mnemolog.eventstore.commands import CommandContext, CommandResult
from mnemolog.eventstore.commands.documents import check_doc_id, check_document_fields
from mnemolog.eventstore.model import MAX_TEXT_CHARS, NotFound, ValidationError

from .common import CommandError, add_command, data_dir, one_line, print_json_line, require_log, tenant_name
from .common import command_context as _context
from .common import between as _between
from .common import as_of_arg, correlation_id, known_tenant, reason_text
from .common import tenant_of as _tenant
from .progress import progress_for

if TYPE_CHECKING:
    from mnemolog.projections.service import MemoryService

DOC_SUFFIXES = (".txt", ".text", ".md", ".markdown", ".pdf")
_DOC_OPTIONS = ("root", "doc_id", "collection", "doc_type", "lang", "source_url", "model", "tenant", "actor", "correlation_id")


def _open(args: argparse.Namespace, *, existing: bool = True) -> MemoryService:
    """The service over the data directory; unless ``existing`` is False (the commands that may
    write the first events: ``import docs``, ``entity upsert``), one without a log is refused."""
    from mnemolog.projections.service import MemoryService

    if existing:
        require_log(args)
    return MemoryService.open(data_dir(args))


def _where(result: CommandResult) -> str:
    if result.first_position is None:
        return "nothing written"
    return f"positions {result.first_position}-{result.last_position}, correlation {result.correlation_id}"


def _emit(args: argparse.Namespace, data: Any, text: str) -> int:
    if args.json:
        print_json_line(data)
    else:
        print(text)
    return 0


def _written(args: argparse.Namespace, result: CommandResult, text: str) -> int:
    data = {"positions": list(result.positions), "correlation_id": result.correlation_id, "replayed": result.replayed, **msgspec.to_builtins(result.data)}
    return _emit(args, data, f"{text} ({_where(result)})")


def _as_of(svc: MemoryService, args: argparse.Namespace) -> int | None:
    return svc.resolve_as_of(getattr(args, "as_of", None))


# -- import docs --------------------------------------------------------------------------


def document_paths(paths: list[str]) -> list[Path]:
    """Files named directly (any suffix: unsupported ones are reported) and supported files under directories.

    A path that does not exist is a typo, not a file to report and skip: the whole run is refused before anything is written.
    A link under a directory to nothing is a file that cannot be read: reported, where it was left out without a word.
    """
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise CommandError(f"no such file or directory: {raw} (nothing imported)")
        if path.is_dir():
            found = (p for p in path.rglob("*") if p.is_file() or (p.is_symlink() and not p.exists()))
            out.extend(sorted(p for p in found if p.suffix.lower() in DOC_SUFFIXES))
        else:
            out.append(path)
    return list(dict.fromkeys(out))


def document_ids(paths: list[Path], root: Path, doc_id: str | None = None) -> dict[Path, str]:
    """Each file's document id: its path relative to ``root``, or ``doc_id`` for a single file.

    Refuses (before anything is written) a file outside the root and two files that would share an id.
    """
    from mnemolog.projections.ingest.documents import DocumentError, default_doc_id

    if doc_id is not None:
        if len(paths) != 1:
            raise CommandError(f"--doc-id names one document, but {len(paths)} files were given")
        check_doc_id(doc_id, "--doc-id")
        return {paths[0]: doc_id}
    ids: dict[Path, str] = {}
    owners: dict[str, Path] = {}
    for path in paths:
        try:
            found = default_doc_id(path, root)
        except DocumentError as exc:
            raise CommandError(f"{exc}; pass --root DIR (a folder holding every PATH)") from None
        if found in owners:
            raise CommandError(f"{owners[found]} and {path} would both be document {found}; import one of them with --doc-id")
        ids[path], owners[found] = found, path
    return ids


def import_documents(svc: MemoryService, ctx: CommandContext, paths: list[Path], options: dict[str, Any], progress=None, *, root: Path | None = None, doc_id: str | None = None) -> dict[str, Any]:
    from mnemolog.projections.ingest.documents import document_import, import_report
    from mnemolog.projections.ingest.documents import DocumentError, read_document

    ids = document_ids(paths, Path.cwd() if root is None else root, doc_id)
    results: list[dict[str, Any]] = []
    for n, path in enumerate(paths):
        if progress is not None:
            progress(n, path.name)
        shown = str(path).encode("utf-8", "backslashreplace").decode("utf-8")
        if shown != str(path):  # a name of bytes that are no UTF-8 (kept by Python as lone surrogates): no field holds it
            error = f"{shown}: the file name is not valid UTF-8: rename the file"
            results.append({"path": shown, "doc_id": ids[path].encode("utf-8", "backslashreplace").decode("utf-8"), "status": "failed", "reason": "invalid", "error": error})
            continue
        try:
            prepared = document_import(read_document(path), doc_id=ids[path], path=str(path), **options)
            result = svc.run(svc.documents.import_document, ctx, prepared)
        except DocumentError as exc:
            results.append({"path": str(path), "doc_id": ids[path], "status": "failed", "reason": exc.reason, "error": str(exc)})
            continue
        except ValidationError as exc:
            results.append({"path": str(path), "doc_id": ids[path], "status": "failed", "reason": "invalid", "error": f"{path}: {exc}"})
            continue
        results.append({"path": str(path), **result.data, "positions": list(result.positions)})
    if progress is not None:
        progress(len(paths))
    return import_report(results, ctx.correlation_id)


def cmd_import_docs(args: argparse.Namespace) -> int:
    if not args.paths:
        raise CommandError("import docs needs at least one PATH")
    if args.max_chars is not None and not 1 <= args.max_chars <= MAX_TEXT_CHARS:  # a chunk is a memory
        raise CommandError(f"--max-chars must be 1 to {MAX_TEXT_CHARS} (a chunk is one memory), got {args.max_chars}")
    paths = document_paths(args.paths)
    if not paths:
        raise CommandError("no .txt, .md, .markdown or .pdf files found")
    root = Path(args.root) if args.root else Path.cwd()
    if not root.is_dir():
        raise CommandError(f"--root {args.root}: not a directory")
    document_ids(paths, root, args.doc_id)  # refuse bad ids before opening the store
    logging.getLogger("pypdf").setLevel(logging.ERROR)  # a corrupt PDF is reported once, below
    options = {"collection": args.collection, "doc_type": args.doc_type, "lang": args.lang, "source_url": args.source_url, "model": args.model}
    try:  # every chunk carries them: refused before the store is opened, not file after file
        check_document_fields(options, names={name: f"--{name.replace('_', '-')}" for name in options})
    except ValidationError as exc:
        raise CommandError(str(exc)) from None
    if args.max_chars is not None:
        options["max_chars"] = args.max_chars
    with _open(args, existing=False) as svc, progress_for(args, "import docs", total=len(paths)) as progress:
        report = import_documents(svc, _context(args), paths, options, progress, root=root, doc_id=args.doc_id)
    if args.json:
        print_json_line(report)
    else:
        for r in report["results"]:
            if r["status"] == "failed":
                print(f"failed  {one_line(r['error'])}", file=sys.stderr)
            elif r["status"] == "unchanged":
                print(f"skipped {r['path']} ({r['doc_id']}): unchanged (version {r['version']})")
            else:
                print(f"imported {r['path']} as {r['doc_id']} v{r['version']}: {r['chunks']} chunks, {r['archived']} archived, {r['mentions']} mentions")
        print(
            f"documents={report['documents']} chunks={report['chunks']} skipped={report['skipped']} failed={report['failed']}"
            f" correlation={report['correlation_id']}"
        )
    return 1 if report["failed"] else 0


def _extend_import(subparsers) -> None:
    """Let ``mnemolog import docs PATH…`` share the log's ``import FILE`` command."""
    parser = subparsers.choices.get("import")
    if parser is None:
        parser = add_command(subparsers, "import", None, help="import documents: import docs PATH…", json=True)
        parser.add_argument("file", metavar="docs", choices=["docs"])
    original = parser.get_default("func")
    parser.add_argument("paths", nargs="*", metavar="PATH", help="with 'docs': files or directories of .txt, .md, .pdf to import")
    docs = parser.add_argument_group("documents (mnemolog import docs PATH…)")
    docs.add_argument("--root", metavar="DIR", help="document ids are paths relative to DIR (default: the current directory)")
    docs.add_argument("--doc-id", metavar="ID", help="the document id of a single imported file (default: its path relative to --root)")
    docs.add_argument("--collection", metavar="C", help="collection of the imported documents")
    docs.add_argument("--doc-type", metavar="T", help="document type (default: the file format)")
    docs.add_argument("--lang", metavar="L", help="language code, e.g. en")
    docs.add_argument("--source-url", metavar="URL", help="where the documents come from")
    docs.add_argument("--model", metavar="M", help="model metadata kept with the chunks")
    docs.add_argument("--max-chars", type=int, metavar="N", help="largest chunk, in characters (default 1200)")
    docs.add_argument("--tenant", metavar="TENANT", type=tenant_name, help="the tenant (default: $MNEMOLOG_TENANT or 'default')")
    docs.add_argument("--actor", metavar="NAME", help="who imports (kept in the events' metadata)")
    docs.add_argument("--correlation-id", metavar="ID", type=correlation_id, help="correlation id of the import run (default: a new one)")
    parser.epilog = "'mnemolog import docs PATH…' imports documents; exit 1 when a file failed (the rest is imported)."

    def dispatch(args: argparse.Namespace) -> int:
        if args.file == "docs":
            # The export's options, given to a documents import, were ignored without a word.
            exports = [o for o, given in (("--rehash", getattr(args, "rehash", False)), ("--keys", getattr(args, "keys", None)),
                                           ("--without-keys", getattr(args, "without_keys", False))) if given]
            if exports:
                raise CommandError(f"{' '.join(exports)}: only 'mnemolog import FILE' (an export) takes these, not 'import docs'")
            return cmd_import_docs(args)
        extra = [f"--{o.replace('_', '-')}" for o in (*_DOC_OPTIONS, "max_chars") if getattr(args, o, None) not in (None, "")]
        if args.paths or extra:
            raise CommandError(f"{' '.join(args.paths + extra)}: only 'mnemolog import docs PATH…' takes these")
        if original is None:
            raise CommandError("usage: mnemolog import docs PATH…")
        return original(args)

    parser.set_defaults(func=dispatch)


# -- relink ----------------------------------------------------------------------------------------


def cmd_relink(args: argparse.Namespace) -> int:

    with _open(args) as svc, progress_for(args, "relink") as progress:
        known_tenant(svc.store, getattr(args, "tenant", None), "relink")
        report = svc.linking.relink(
            _context(args), commit=args.commit, include_tags=args.include_tags, max_alias_document_frequency=args.max_df, preview=args.preview,
            progress=lambda step, count: progress(count, step),
        )
    if args.json:
        print_json_line(report)
        return 0
    head = "dry run" if report["dry_run"] else ("committed" if report.get("committed") else "nothing to change")
    print(
        f"{head}: {report['add']} mention edges to add, {report['remove']} to remove, {report['kept']} kept"
        f" ({report['chunks']} chunks, {report['memories']} memories, {report['entities']} entities, {report['catalogue_size']} aliases)"
    )
    for kind, counts in report.get("by_kind", {}).items():
        print(f"  {kind}: +{counts['add']} -{counts['remove']} ={counts['kept']}")
    for sign, key in (("+", "added_preview"), ("-", "removed_preview")):
        for e in report[key]:
            print(f"  {sign} {e['source']} -> {e['target']} ({e['alias']}, {e['weight']})")
    if report["cross_document_pair_count"]:
        print(f"document pairs gaining shared entities: {report['cross_document_pair_count']} ({report['new_document_pair_count']} new)")
        for p in report["cross_document_pairs"]:
            print(f"  {p['documents'][0]} <-> {p['documents'][1]}: {', '.join(p['new_shared_entities'])}")
    if report["dry_run"]:
        if report["add"] or report["remove"]:
            print("run again with --commit to write it")
    elif report.get("committed"):
        print(f"run {report['run_id']}, positions {report['positions'][0]}-{report['positions'][-1]}, correlation {report['correlation_id']}")
        print(f"undo with: mnemolog undo-namespace {report['prefix']}")
    return 0


# -- entities ------------------------------------------------------------------------------------------


def _properties(items: list[str] | None) -> dict[str, str]:
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CommandError(f"--prop expects KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def cmd_upsert(args: argparse.Namespace) -> int:
    with _open(args, existing=False) as svc:
        result = svc.run(
            svc.entities.upsert, _context(args), args.id, name=args.name, entity_type=args.type or "", description=args.description or "",
            aliases=args.alias or [], tags=args.tags or "", properties=_properties(args.prop),
        )
    d = result.data
    verb = "created" if d.get("created") else ("updated" if d.get("changed") else "unchanged")
    cut = f"; {d['tags_dropped']} tag(s) over the limit of {d['max_tags']} dropped: {', '.join(d['dropped_tags'])}" if d["tags_dropped"] else ""
    return _written(args, result, f"{verb} {args.id}: {d['tags_kept']} tag(s) kept{cut}")


def cmd_remove(args: argparse.Namespace) -> int:
    with _open(args) as svc:
        result = svc.run(svc.entities.remove, _context(args), args.id, reason=args.reason or "")
    d = result.data
    return _written(args, result, f"removed {args.id}, {d.get('removed_relations', 0)} relation(s), {d.get('unlinked_edges', 0)} edge(s)")


def cmd_relate(args: argparse.Namespace) -> int:
    with _open(args) as svc:
        if args.remove:
            result = svc.run(svc.entities.remove_relation, _context(args), args.source, args.target, args.type)
            return _written(args, result, f"removed {args.source} -{args.type}-> {args.target}")
        result = svc.run(svc.entities.set_relation, _context(args), args.source, args.target, args.type, weight=args.weight)
    return _written(args, result, f"{args.source} -{args.type}-> {args.target} weight {args.weight}")


def cmd_set_tags(args: argparse.Namespace) -> int:
    with _open(args) as svc:
        result = svc.run(svc.entities.set_tags, _context(args), args.id, args.tags)
    d = result.data
    return _written(args, result, f"{args.id}: {d['tags_kept']} tag(s) kept, {d['tags_dropped']} dropped")


def cmd_get(args: argparse.Namespace) -> int:
    with _open(args) as svc:
        as_of = _as_of(svc, args)
        entity = svc.knowledge.get(_tenant(args), args.id, as_of=as_of)
        if entity is None:
            raise NotFound("entity", args.id)
        relations = svc.knowledge.relations_of(_tenant(args), args.id, as_of=as_of)
    data = {**msgspec.structs.asdict(entity), "relations": relations}
    lines = [f"{entity.id}  {entity.name}  [{entity.entity_type or '-'}]", f"  aliases: {', '.join(entity.aliases) or '-'}", f"  tags: {', '.join(entity.tags) or '-'}"]
    lines += [f"  {r.source_id} -{r.relation_type}-> {r.target_id} ({r.weight})" for r in relations]
    return _emit(args, data, "\n".join(lines))


def cmd_related(args: argparse.Namespace) -> int:
    with _open(args) as svc:
        as_of = _as_of(svc, args)
        found = svc.knowledge.related_walk(_tenant(args), args.id, args.depth, args.direction, args.type, as_of=as_of)[0][: args.limit]
        names = svc.knowledge.many(_tenant(args), [r.id for r in found], as_of=as_of)
    if args.json:
        for r in found:
            print_json_line({**msgspec.structs.asdict(r), "name": names[r.id].name if r.id in names else ""})
        return 0
    for r in found:
        path = " ".join(f"-{h.relation_type}->" for h in r.path)
        print(f"{r.score:8.4f}  depth {r.depth}  {r.id}  {names[r.id].name if r.id in names else ''}  {path}")
    if not found:
        print("nothing related")
    return 0


def cmd_find(args: argparse.Namespace) -> int:
    with _open(args) as svc:
        found = svc.knowledge.find_by_keywords(_tenant(args), args.keywords, tag=args.tag, entity_type=args.type, limit=args.limit, as_of=_as_of(svc, args))
    if args.json:
        for e in found:
            print_json_line(e)
        return 0
    for e in found:
        print(f"{e.id}  {e.name}  [{e.entity_type or '-'}]  tags: {', '.join(e.tags) or '-'}")
    return 0


def cmd_tags(args: argparse.Namespace) -> int:
    with _open(args) as svc:
        found = svc.knowledge.find_tags(_tenant(args), args.prefix or "", limit=args.limit, as_of=_as_of(svc, args))
    if args.json:
        for tag, count in found:
            print_json_line({"tag": tag, "entities": count})
        return 0
    for tag, count in found:
        print(f"{count:>6}  {tag}")
    return 0


def cmd_doc_links(args: argparse.Namespace) -> int:
    with _open(args) as svc:
        found = svc.linking.document_links(_tenant(args), doc_id=args.doc_id, collection=args.collection, limit=args.limit, as_of=_as_of(svc, args))
    if args.json:
        print_json_line(found)
        return 0
    for p in found["pairs"]:
        shared = ", ".join(s["name"] or s["entity_id"] for s in p["shared"])
        print(f"{p['score']:8.3f}  {p['documents'][0]} <-> {p['documents'][1]}: {shared}")
    return 0


def _entity_command(sub, name: str, func, help: str, *, writes: bool = False, as_of: bool = False) -> argparse.ArgumentParser:
    parser = add_command(sub, name, func, help=help, json=True)
    parser.add_argument("--tenant", metavar="TENANT", type=tenant_name, help="the tenant (default: $MNEMOLOG_TENANT or 'default')")
    if writes:
        parser.add_argument("--actor", metavar="NAME", help="who makes the change")
        parser.add_argument("--correlation-id", metavar="ID", type=correlation_id, help="correlation id (default: a new one)")
        parser.add_argument("--idempotency-key", metavar="KEY", help="a retry with the same key writes nothing")
    if as_of:
        parser.add_argument("--as-of", type=as_of_arg, metavar="P|TIME", help="a log position or an ISO-8601 UTC time")
    return parser


def _weight(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}") from None


def register(subparsers) -> None:
    _extend_import(subparsers)
    p = add_command(subparsers, "relink", cmd_relink, help="re-run the entity linker over stored chunks and memories (a dry run unless --commit)", json=True)
    p.add_argument("--commit", action="store_true", help="write the run (one batch, undoable with undo-namespace mention:<run>:)")
    p.add_argument("--include-tags", action="store_true", help="link entity tags too (default: names and aliases only)")
    p.add_argument("--max-df", type=float, metavar="F", help="drop aliases found in more than this share of the chunks (of the memories)")
    p.add_argument("--preview", type=_between(0, 1000), default=20, metavar="N", help="edges and document pairs shown, 0 to 1000 (default 20)")
    p.add_argument("--tenant", metavar="TENANT", type=tenant_name, help="the tenant (default: $MNEMOLOG_TENANT or 'default')")
    p.add_argument("--actor", metavar="NAME", help="who runs it")
    p.add_argument("--correlation-id", metavar="ID", type=correlation_id, help="correlation id (default: a new one)")

    group = add_command(subparsers, "entity", None, help="entities and relations: upsert, remove, relate, related, find, …")
    sub = group.add_subparsers(dest="entity_command", metavar="ACTION", required=True)
    e = _entity_command(sub, "upsert", cmd_upsert, "create or replace an entity (every field given is its new state)", writes=True)
    e.add_argument("id", metavar="ID")
    e.add_argument("--name", required=True, metavar="NAME")
    e.add_argument("--type", metavar="T", help="entity type, e.g. person")
    e.add_argument("--description", metavar="TEXT")
    e.add_argument("--alias", action="append", metavar="A", help="an alias (repeatable)")
    e.add_argument("--tags", metavar="A,B", help="comma-separated tags (extra ones beyond the limit are cut)")
    e.add_argument("--prop", action="append", metavar="K=V", help="a string property (repeatable)")
    e = _entity_command(sub, "remove", cmd_remove, "remove an entity, its relations and its edges", writes=True)
    e.add_argument("id", metavar="ID")
    e.add_argument("--reason", metavar="R", type=reason_text)
    e = _entity_command(sub, "relate", cmd_relate, "set (or with --remove, remove) a relation SRC -TYPE-> DST", writes=True)
    e.add_argument("source", metavar="SRC")
    e.add_argument("target", metavar="DST")
    e.add_argument("--type", required=True, metavar="T", help="relation type, e.g. works_on")
    e.add_argument("--weight", type=_weight, default=1.0, metavar="W", help="between 0 and 1 (default 1)")
    e.add_argument("--remove", action="store_true", help="remove the relation instead")
    e = _entity_command(sub, "set-tags", cmd_set_tags, "replace an entity's tags", writes=True)
    e.add_argument("id", metavar="ID")
    e.add_argument("tags", metavar="A,B", help="comma-separated tags ('' clears them)")
    e = _entity_command(sub, "get", cmd_get, "show an entity and its relations", as_of=True)
    e.add_argument("id", metavar="ID")
    e = _entity_command(sub, "related", cmd_related, "entities reached by BFS over relations", as_of=True)
    e.add_argument("id", metavar="ID")
    e.add_argument("--depth", type=_between(0, 6), default=2, metavar="N", help="hops, 0 to 6 (default 2)")
    e.add_argument("--direction", choices=("out", "in", "both"), default="out")
    e.add_argument("--type", action="append", metavar="T", help="only this relation type (repeatable)")
    e.add_argument("--limit", type=_between(1, 1000), default=50, metavar="N")
    e = _entity_command(sub, "find", cmd_find, "find entities by keywords, tag or type", as_of=True)
    e.add_argument("keywords", nargs="*", metavar="KEYWORD", help="all must appear in name, aliases, tags or description")
    e.add_argument("--tag", metavar="T")
    e.add_argument("--type", metavar="T")
    e.add_argument("--limit", type=_between(1, 500), default=50, metavar="N")
    e = _entity_command(sub, "tags", cmd_tags, "tags starting with a prefix, with entity counts", as_of=True)
    e.add_argument("--prefix", metavar="P")
    e.add_argument("--limit", type=_between(1, 1000), default=100, metavar="N")
    e = _entity_command(sub, "doc-links", cmd_doc_links, "document pairs sharing entities, most distinctive first", as_of=True)
    e.add_argument("--doc-id", metavar="D", help="only pairs with this document")
    e.add_argument("--collection", metavar="C")
    e.add_argument("--limit", type=_between(1, 500), default=20, metavar="N")
