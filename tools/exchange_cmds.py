"""Commands that move a log between data directories: export (with its key file, when asked) and import."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import stat
import sys
from pathlib import Path
from typing import Callable, Iterator

from mnemolog.eventstore import ConcurrencyError, EventStoreError, ImportRefused
from mnemolog.eventstore.exchange import export, import_
from mnemolog.eventstore.files import write_unnamed
from mnemolog.eventstore.keystore import read_key_file, write_key_file
from mnemolog.eventstore.settings import Settings

from .common import INTERRUPTED, CommandError, add_command, counted, data_dir, known_tenant, not_blank, open_store, print_json_line
from .progress import progress_for


# -- export / import ----------------------------------------------------------------


#: The files a data directory holds (see the README), those on their way (``.tmp``) and set aside (``.damaged``)
#: too: an export or a key file written over one destroys it. Nor is it written into the directory's ``backups/``.
DATA_FILES = frozenset(
    f"{name}{suffix}"
    for name in ("events.db", "keys.db", "projections.db", "auth.db", "projections.db.damaged")
    for suffix in ("", "-wal", "-shm", "-journal")
) | {
    f"{name}{suffix}" for name in ("vectors.usearch", "vectors.usearch.json", "fts.postings") for suffix in ("", ".tmp")
} | {"vectors.usearch.lock", "vectors.usearch.damaged", "projections.db.lock"}  # fmt: skip
BACKUPS = "backups"
_DATABASE_MAGIC = b"SQLite format 3\x00"


def output_file(value: str, option: str, args: argparse.Namespace) -> Path:
    """A file this command may create or replace, checked before any work (exit 2 naming ``option``): never a
    file of the data directory (``--output DATA/events.db`` replaced the log) nor any other database."""
    not_blank(value, option, ": name a file")
    path = Path(value)
    if written_through(path):
        raise CommandError(f"{option} {value}: is not a regular file (a pipe or a device); name a file")
    if path.is_dir():
        raise CommandError(f"{option} {value}: is a directory; name a file")
    if not path.parent.is_dir():
        raise CommandError(f"{option} {value}: no such directory: {path.parent}")
    if not os.access(path.parent, os.W_OK):
        raise CommandError(f"{option} {value}: the directory {path.parent} is not writable")
    home, folder = data_dir(args).resolve(), path.parent.resolve()
    if (path.name in DATA_FILES and folder == home) or folder == home / BACKUPS:
        raise CommandError(f"{option} {value}: a file of the data directory; name a file outside it")
    try:
        with open(path, "rb") as existing:
            database = existing.read(len(_DATABASE_MAGIC)) == _DATABASE_MAGIC
    except OSError:
        database = False
    if database:
        raise CommandError(f"{option} {value}: is a database (a log, a key store?), which this command would replace; name another file")
    return path


def written_through(path: Path) -> bool:
    """Whether ``path`` exists and is no regular file (a pipe, ``>(gzip > log.gz)``, ``/dev/null``, a terminal):
    an export is written through it, as to stdout; replacing it with a regular file would destroy it (``/dev/null``)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def _is_stdout(path: Path) -> bool:
    """Whether ``path`` is this process's stdout (``--output /dev/stdout``): the export goes there alone, without the summary line."""
    try:
        return os.path.samestat(os.stat(path), os.fstat(sys.stdout.fileno()))
    except (OSError, ValueError, AttributeError):
        return False


@contextlib.contextmanager
def _writing_to(output: str) -> Iterator[None]:
    """A failed write of the export's files (a full disk, a device that takes nothing) is named as that, never
    blamed on the data directory, which an export only reads; a reader gone away (``| head``) stays quiet."""
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as exc:
        if exc.errno is None:
            raise
        where = exc.filename if exc.filename and not str(exc.filename).startswith("/proc/self/fd/") else output
        raise CommandError(f"the export could not be written to {where}: {exc.strerror or exc}") from None


def cmd_export(args: argparse.Namespace) -> int:
    not_blank(args.with_keys, "--with-keys", ": name a file")  # "" wrote no key file, without a word
    to_stdout = args.output in (None, "-")
    if args.with_keys and to_stdout:
        raise CommandError("--with-keys needs --output FILE (the keys go to their own file, never into the export)")
    if to_stdout and sys.stdout is None:
        raise CommandError("stdout is closed: name a file with --output FILE")
    if args.with_keys and Path(args.with_keys).resolve() == Path(args.output).resolve():
        raise CommandError("--with-keys must name another file than --output")
    # Both files are checked before the log is read: a bad --with-keys must not leave the export written.
    through = None if to_stdout or not written_through(Path(args.output)) else Path(args.output)
    target = None if to_stdout or through else output_file(args.output, "--output", args)
    key_file = output_file(args.with_keys, "--with-keys", args) if args.with_keys else None
    with open_store(args, existing=True) as store:
        known_tenant(store, args.tenant, "export", since_drop=False)  # a typo: an empty backup
        total = None if args.tenant else store.last_position()
        with progress_for(args, "export", total) as progress, _writing_to("stdout" if to_stdout else args.output):
            if to_stdout or (through is not None and _is_stdout(through)):
                count = export(store, sys.stdout.buffer, tenant=args.tenant, progress=progress)
                sys.stdout.buffer.flush()
                if key_file:
                    write_key_file(store.sealer.keys, str(key_file), tenant=args.tenant)
                return 0
            # A pipe or a device is written through (it cannot be replaced whole, and must not be replaced at all).
            # A file is unnamed until whole (a kill leaves no part of it), and the keys first: the export appears
            # under its name only once both are written.
            with open(through, "wb") if through is not None else write_unnamed(target, 0o666, binary=True) as out:
                count = export(store, out, tenant=args.tenant, progress=progress)
                keys_written = write_key_file(store.sealer.keys, str(key_file), tenant=args.tenant) if key_file else None
    if args.json:
        print_json_line({"exported": count, "file": str(through or target), "tenant": args.tenant, "keys": keys_written, "key_file": args.with_keys})
    else:
        print(f"exported {counted(count, 'event')} to {through or target}" + (f"; {counted(keys_written, 'key')} to {args.with_keys} (SECRET: keep it apart)" if args.with_keys else ""))
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    not_blank(args.keys, "--keys", ": name the export's key file", prefix="import refused, nothing written: ")
    if args.keys and args.without_keys:
        raise CommandError("import refused, nothing written: --keys and --without-keys ask for opposite things: give one")
    key_rows = None
    if args.keys:
        try:
            key_rows = read_key_file(args.keys)
        except OSError as exc:
            raise CommandError(f"import refused, nothing written: --keys {args.keys}: {exc.strerror or exc}") from None
        except ValueError as exc:
            raise CommandError(f"import refused, nothing written: {exc}") from None
    if args.file == "-" and sys.stdin is None:
        raise CommandError("import refused, nothing written: stdin is closed: name the export's file")
    if args.file != "-" and (Path(args.file).is_dir() or not Path(args.file).exists()):  # before a fresh data directory gets an empty log
        problem = "is a directory, not an export" if Path(args.file).is_dir() else "no such file"
        raise CommandError(f"import refused, nothing written: {problem}: {args.file}")  # a pipe is read as stdin is
    undo = _undo_new_log(args)
    written = 0
    try:
        with open_store(args) as store:
            before = store.last_position()
            try:
                with progress_for(args, "import") as progress:
                    if args.file == "-":
                        report = import_(store, sys.stdin.buffer, rehash=args.rehash, progress=progress, keys=key_rows, without_keys=args.without_keys)
                    else:
                        with open(args.file, "rb") as lines:
                            report = import_(store, lines, rehash=args.rehash, progress=progress, keys=key_rows, without_keys=args.without_keys)
            except KeyboardInterrupt:
                written = store.last_position() - before
                raise
            forgets = bool(store.read_all(before, 1, types=["SubjectForgotten"]))
    except ImportRefused as exc:
        undo()  # the store is closed: what this command made goes
        raise CommandError(f"import refused, nothing written: {exc}") from None
    except KeyboardInterrupt:
        raise CommandError(_interrupted_import(written, undo), INTERRUPTED) from None
    except ConcurrencyError as exc:  # after the checks, while writing: what either import wrote stays, once
        raise CommandError(
            f"import stopped: {exc}: another writer (another import of the same file?) wrote its events meanwhile;"
            " none is duplicated: run the import again to finish it"
        ) from None
    if forgets:
        _apply_imported_forgets(args)
    if args.json:
        print_json_line(report)
    else:
        tenants = ", ".join(report.tenants) or "-"
        print(
            f"read {counted(report.read, 'event')}: imported {report.imported}, "
            f"skipped {report.skipped_existing} already present; {counted(report.idempotency_keys, 'idempotency key')} recorded; tenants: {tenants}"
        )
    return 0


def _interrupted_import(written: int, undo: Callable[[], None]) -> str:
    """What an import stopped by Ctrl-C says, once the store is closed: it appends its events group by group,
    each whole or not at all, so the events written stay, and the same import run again finishes it. Stopped
    before it wrote any, it takes back the data directory it was starting, as a refused import does."""
    if written == 0:
        undo()
        return "import interrupted: no event written"
    return f"import interrupted after writing {counted(written, 'event')}: run the same import again to finish it (the events already here are skipped)"


def _apply_imported_forgets(args: argparse.Namespace) -> None:
    """Erase from the data directory's projections what the forgets an import brought erase, and scrub their
    files, as a forget does: the import destroyed the keys, but the projections, built before, hold the text
    until they catch up, and nothing may open them again. A data directory without projections has none to
    erase; projections that cannot catch up (a log imported without its key file) are named on stderr."""
    from mnemolog.projections.service import MemoryService

    root = data_dir(args)
    if not (root / "projections.db").exists():
        return
    try:
        MemoryService.open(root).close()  # catches up, destroys, compacts and scrubs (MemoryService.finish_erasures)
    except EventStoreError as exc:
        print(f"mnemolog: note: the projections in {root} may still hold what the imported forget erases, until they catch up: {exc}", file=sys.stderr)


def _undo_new_log(args: argparse.Namespace) -> Callable[[], None]:
    """What takes back the data directory an import is about to start a log in, should the file be refused:
    the folders it creates, or the files it adds to an existing folder without a log. Nothing once a log is
    there (or the log is shared): a refused import never touches one."""
    if Settings().log_url:
        return lambda: None
    root = data_dir(args).absolute()
    if (root / "events.db").exists():
        return lambda: None
    if not root.is_dir():
        top = root
        while not top.parent.exists():
            top = top.parent
        return lambda: shutil.rmtree(top, ignore_errors=True)
    before = set(os.listdir(root))

    def undo() -> None:
        for name in set(os.listdir(root)) - before:
            path = root / name
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)

    return undo


# -- stats --------------------------------------------------------------------------


# -- registration -------------------------------------------------------------------


def register(subparsers) -> None:
    p = add_command(subparsers, "export", cmd_export, help="write the log as JSON lines", json=True, tenant=True)
    p.add_argument("-o", "--output", metavar="FILE", help="file to write (default: stdout)")
    p.add_argument("--with-keys", metavar="KEYFILE", help="also write the data keys to KEYFILE, a separate file marked secret (never into the export)")

    p = add_command(subparsers, "import", cmd_import, help="import an export (checked first; existing events skipped)", json=True)
    p.add_argument("file", metavar="FILE", help="JSON lines from 'mnemolog export' ('-' for stdin)")
    p.add_argument("--keys", metavar="KEYFILE", help="first add the data keys of 'mnemolog export --with-keys' to this data directory's key store")
    p.add_argument(
        "--without-keys",
        action="store_true",
        help="import a sealed export without its key file: its sealed fields stay unreadable here (reads of them fail naming the key)"
        " until the same import is run again with --keys (without this flag such an import is refused)",
    )
    p.add_argument("--rehash", action="store_true", help="accept a file whose hashes, links, header or footer do not hold (an edited export, or one from before the header and footer)")
