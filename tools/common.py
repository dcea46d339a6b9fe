"""Helpers shared by the ``mnemolog`` subcommands.

A command module defines ``register(subparsers)`` and adds its commands with
:func:`add_command`, which gives every command the same ``--data-dir``
option (also accepted before the command name) and, on request, ``--json``
and ``--tenant`` (both also accepted before the command name, see
:func:`add_global_options`). A command is ``func(args) -> int``: 0 on success, 1 when a
check fails, 2 for bad input (see :func:`fail`).
"""

from __future__ import annotations

import argparse
import os
import socket
import sqlite3
import sys
from pathlib import Path
from typing import Any, Callable

import msgspec

from mnemolog.eventstore import EventStore
from mnemolog.eventstore.bounds import EVERY_TENANT_REFUSED, MAX_CORRELATION_CHARS, check_name, tenant_problem
from mnemolog.eventstore.errors import sqlite_error_is
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MAX_REASON_CHARS
from mnemolog.eventstore.settings import Settings

__all__ = ["INTERRUPTED", "CommandError", "add_command", "as_of_arg", "database_problem", "existing_database", "add_global_options", "apply_global_options", "data_dir", "fail", "listening_socket", "open_store", "port_arg", "print_json_line", "require_log", "sqlite_path"]

Command = Callable[[argparse.Namespace], int]

_json = msgspec.json.Encoder()


INTERRUPTED = 130  # the exit code of a command stopped by Ctrl-C (128 + SIGINT), as shells report it


class CommandError(Exception):
    """Raised anywhere in a command: ``main`` prints it as one line and exits with ``code``."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


DEFAULT_TENANT = "default"


def not_blank(value: str | None, name: str, then: str = "", *, prefix: str = "") -> None:
    """Refuse (exit 2) a ``value`` given but blank: ``"$VAR"`` with ``VAR`` unset reads as an option left out, and
    acted for a default (another directory, tenant or file) or did nothing, without a word. ``then`` says what to do."""
    if value is not None and not value.strip():
        raise CommandError(f"{prefix}{name} must not be blank{then}")


def tenant_of(args: argparse.Namespace) -> str:
    """The tenant a command acts for: ``--tenant``, else ``$MNEMOLOG_TENANT``, else ``default``; a blank
    ``$MNEMOLOG_TENANT`` is refused, as a blank ``--tenant`` is (it acted for a tenant named by spaces)."""
    named = getattr(args, "tenant", None)
    if named:
        return named
    env = os.environ.get("MNEMOLOG_TENANT")
    not_blank(env, "MNEMOLOG_TENANT", ": name a tenant, or unset it for 'default'")
    if env:
        try:
            tenant_name(env)  # as a --tenant is checked
        except argparse.ArgumentTypeError as exc:
            raise CommandError(f"MNEMOLOG_TENANT {exc}") from None
    return env or DEFAULT_TENANT


def os_user() -> str:
    """The login name this command runs as (its uid where the system has no name for it)."""
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError, ImportError):
        return f"uid-{os.getuid()}"


def command_context(args: argparse.Namespace) -> CommandContext:
    """A write's context from its options: the actor (``--actor``, else ``cli:<login name>``: history tells a
    change made at the terminal, and by whom, from one of unknown origin, as the API names its key), the
    correlation id and the idempotency key (a blank one is refused: it made a write no retry could find)."""
    not_blank(getattr(args, "idempotency_key", None), "--idempotency-key")
    return CommandContext(
        tenant=tenant_of(args),
        actor=getattr(args, "actor", None) or f"cli:{os_user()}",
        correlation_id=getattr(args, "correlation_id", None) or "",
        idempotency_key=getattr(args, "idempotency_key", None) or None,
    )


def reason_text(text: str) -> str:
    """An argparse type: a ``--reason``, at most the characters the API takes (it is recorded in the log)."""
    if len(text) > MAX_REASON_CHARS:
        raise argparse.ArgumentTypeError(f"at most {MAX_REASON_CHARS:,} characters, got {len(text):,}")
    return text


def tenant_name(text: str) -> str:
    """An argparse type: a ``--tenant``, never blank (``--tenant "$T"`` with ``T`` unset would otherwise act for
    ``default``, or for every tenant where the option is a filter), and one the API could name too (see
    :func:`~mnemolog.eventstore.bounds.tenant_problem`): ``" acme "``, ``*`` or a name of 255 characters, taken
    here, held memories no key and no request could ever reach."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be blank")
    if text == "*":
        raise argparse.ArgumentTypeError(EVERY_TENANT_REFUSED)
    problem = tenant_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def key_tenant_name(text: str) -> str:
    """An argparse type: the ``--tenant`` of a key: one tenant (see :func:`tenant_name`), or ``*`` for every tenant."""
    return text if text == "*" else tenant_name(text)


def correlation_id(text: str) -> str:
    """An argparse type: a ``--correlation-id``, as the API takes one (at most
    :data:`~mnemolog.eventstore.bounds.MAX_CORRELATION_CHARS` characters, no NUL): a longer one, taken here, was
    one no revert or correlation read over HTTP could name."""
    try:
        check_name("correlation_id", text, MAX_CORRELATION_CHARS)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def as_of_arg(text: str) -> str:
    """An argparse type: an ``--as-of`` (a position or a time, which the read resolves), never blank: ``--as-of
    "$POS"`` with ``POS`` unset would otherwise read at the head, as if no point in time had been asked for."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be blank (leave --as-of out to read at the head)")
    return text


def between(low: int, high: int):
    """An argparse type: a whole number from ``low`` to ``high``, the bounds the API's parameter has."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected a whole number from {low} to {high}, got {text!r}")
        return value

    return parse


def fail(message: str, code: int = 2) -> int:
    """Print ``mnemolog: error: message`` on stderr and return ``code`` (use ``return fail(...)``)."""
    print(f"mnemolog: error: {one_line(message)}", file=sys.stderr)
    return code


def counted(n: int, word: str, many: str | None = None, *, grouped: bool = False) -> str:
    """``n`` and ``word`` in the number ``n`` asks for: ``1 event``, ``2 events``, ``1 memory``, ``0 memories``
    (``grouped``: thousands separated, ``100,000 memories``)."""
    number = f"{n:,}" if grouped else f"{n}"
    return f"{number} {word if n == 1 else many or word + 's'}"


def one_line(text: object) -> str:
    return " ".join(str(text).split())


def add_data_dir_option(parser: argparse.ArgumentParser, *, top_level: bool = False) -> None:
    parser.add_argument(
        "--data-dir",
        dest="data_dir",
        metavar="DIR",
        default=None if top_level else argparse.SUPPRESS,
        help="data directory holding events.db (default: $MNEMOLOG_DATA_DIR or ./data)",
    )


def add_global_options(parser: argparse.ArgumentParser) -> None:
    """``--json`` and ``--tenant`` before the command name (``mnemolog --json add …``).

    They land in ``global_json`` / ``global_tenant``, apart from the
    command's own options (a subcommand's defaults would overwrite them), and
    :func:`apply_global_options` hands them over once the command is known.
    """
    parser.add_argument("--json", dest="global_json", action="store_true", help="print JSON (one object a line), for every command that can")
    parser.add_argument("--tenant", dest="global_tenant", metavar="TENANT", type=tenant_name, help="the tenant, for every command that takes one")


def apply_global_options(args: argparse.Namespace) -> None:
    """Give the command the ``--json`` / ``--tenant`` written before its name.

    A command without such an option refuses it (CommandError, exit 2)
    rather than ignore it; the same option given twice must agree (a blank
    ``--tenant`` never gets here: see :func:`tenant_name`).
    """
    command = getattr(args, "command_prog", "mnemolog")
    if getattr(args, "global_json", False):
        if not hasattr(args, "json"):
            raise CommandError(f"{command} does not take --json")
        args.json = True
    tenant = getattr(args, "global_tenant", None)
    if tenant is not None:
        if not hasattr(args, "tenant"):
            raise CommandError(f"{command} does not take --tenant")
        if args.tenant is not None and args.tenant != tenant:
            raise CommandError(f"--tenant given twice, as {tenant!r} and {args.tenant!r}")
        args.tenant = tenant
    if hasattr(args, "tenant"):
        tenant_of(args)  # a blank $MNEMOLOG_TENANT is refused before anything is opened


def add_command(
    subparsers,
    name: str,
    func: Command | None,
    *,
    help: str,
    description: str | None = None,
    json: bool = False,
    tenant: bool = False,
) -> argparse.ArgumentParser:
    """Add subcommand ``name`` running ``func(args)``; returns its parser for more options."""
    parser = subparsers.add_parser(name, help=help, description=description or help)
    add_data_dir_option(parser)
    if json:
        parser.add_argument("--json", action="store_true", help="print JSON (one object a line)")
    if tenant:
        parser.add_argument("--tenant", metavar="TENANT", type=tenant_name, help="only this tenant's events")
    parser.set_defaults(command_prog=parser.prog)
    if func is not None:
        parser.set_defaults(func=func)
    return parser


def checked_settings() -> Settings:
    """The settings, with every one the command's modules declare read from the environment and checked now: a bad
    ``MNEMOLOG_*`` value stops the command (one line) before it opens or makes anything, not once it is first read."""
    settings = Settings()
    settings.as_dict()
    return settings


def data_dir(args: argparse.Namespace) -> Path:
    """``--data-dir``, else ``$MNEMOLOG_DATA_DIR``, else ``./data``; a blank one is refused (``--data-dir ""`` fell back
    to ``./data``, and an empty ``$MNEMOLOG_DATA_DIR`` wrote the log into the current directory). Every setting is
    checked first (see :func:`checked_settings`)."""
    checked_settings()
    explicit = getattr(args, "data_dir", None)
    if explicit is not None:
        not_blank(explicit, "--data-dir")
        return _directory(Path(explicit))
    configured = str(Settings().data_dir)
    not_blank(configured, "MNEMOLOG_DATA_DIR", ": name a directory, or unset it for ./data")
    return _directory(Path(configured))


def _directory(path: Path) -> Path:
    """``path``, refused in one line when something other than a directory holds its name (a file, a link to
    nowhere): making the data directory there failed as "File exists", which named neither problem nor fix."""
    if path.is_dir() or not (path.exists() or path.is_symlink()):
        return path
    kind = "a link that leads to no directory" if path.is_symlink() and not path.exists() else "not a directory"
    raise CommandError(f"data directory {path}: {kind}")


def open_store(args: argparse.Namespace, *, migrate: bool = True, existing: bool = False) -> EventStore:
    """Open the log named by ``MNEMOLOG_LOG_URL``, else the one in ``--data-dir`` (or the environment), migrating its schema.

    A shared log (PostgreSQL) is the same whichever data directory a server
    keeps its projections in. With ``existing`` (the commands that only read
    or check the log) a data directory without ``events.db`` is refused
    rather than given a new, empty log: ``verify`` of a mistyped directory
    must not pass over zero events.
    """
    settings = checked_settings()
    if settings.log_url:
        return EventStore.open(settings.log_url, settings=settings, migrate_schema=migrate)
    directory = data_dir(args)  # a blank one, or a name held by something other than a directory, is refused here
    if existing:
        require_log(args, settings)
    if getattr(args, "data_dir", None):
        return EventStore.open(directory, migrate_schema=migrate)
    return EventStore.open(settings=settings, migrate_schema=migrate)


def port_arg(text: str) -> int:
    """An argparse type: a TCP port number, 0 (a free one) to 65535."""
    if not text.strip().isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"expected a port number from 0 to 65535, got {text!r}")
    return int(text)


def listening_socket(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: a free one), bound before anything is printed or made,
    so that a port in use is one line (exit 2) and the address announced is the one bound."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise CommandError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)  # connections from now on wait in the backlog until the app serves them
    except OSError as exc:
        sock.close()
        raise CommandError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def require_log(args: argparse.Namespace, settings: Settings | None = None) -> None:
    """Refuse (CommandError, exit 2) a data directory without ``events.db`` when the log is not shared.

    Every command that reads, or changes what must already be there (a memory,
    a correlation, the projections), asks this first: a mistyped ``--data-dir``
    must fail, not leave behind a new, empty data directory and answer from it.
    """
    settings = settings or Settings()
    if settings.log_url:
        return
    log = data_dir(args) / "events.db"
    existing_database(log, f"no log at {log}: check --data-dir or MNEMOLOG_DATA_DIR (or MNEMOLOG_LOG_URL)")


def database_problem(path: Path, exc: BaseException | None = None) -> str:
    """What is wrong with the database file ``path`` that SQLite failed on with ``exc``, naming it: SQLite's own
    words ("unable to open database file") say neither which file nor why."""
    if path.is_dir():
        return f"{path} is a directory, not a database file"
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        return f"{path}: permission denied: this user must be able to read and write it ({exc})"
    if not os.access(path.parent, os.W_OK | os.X_OK):
        return f"{path}: permission denied on its directory {path.parent}, where SQLite writes its journal ({exc})"
    if sqlite_error_is(exc, (sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT), "not a database", "malformed"):
        return f"{path} is not a readable database ({exc})"
    return f"database {path}: {exc}"


def existing_database(path: Path, missing: str) -> Path:
    """``path`` when it is a file; else CommandError: the directory named as one (see :func:`database_problem`), or
    ``missing`` when there is nothing there."""
    if path.is_dir():
        raise CommandError(database_problem(path))
    if not path.is_file():
        raise CommandError(missing)
    return path


def sqlite_path(store: EventStore) -> Path | None:
    """The database file behind ``store``, when it is SQLite."""
    prefix = "sqlite:///"
    return Path(store.url[len(prefix) :]) if store.url.startswith(prefix) else None


def print_json_line(obj: Any) -> None:
    """One JSON object on one line of stdout (Structs, datetimes and dicts alike)."""
    sys.stdout.write(_json.encode(obj).decode() + "\n")


def known_tenant(store: EventStore, tenant: str | None, command: str, *, since_drop: bool = True) -> str | None:
    """``--tenant`` as given (never blank, see :func:`tenant_name`), refused (exit 2) when the log holds no event of
    that tenant since its last drop (``since_drop=False``: ever, as an export of its whole history asks): a typo
    would have ``command`` do nothing and say it did."""
    from mnemolog.eventstore.aggregate import dropped_at

    if tenant is None:
        return None
    if next(store.iter_rows(batch_size=1, after=dropped_at(store, tenant) if since_drop else 0, tenant=tenant), None) is None:
        raise CommandError(f"{command}: tenant {tenant!r} not found (no events in this log)")
    return tenant
