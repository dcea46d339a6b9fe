"""Helpers shared by the ``mnemolog`` subcommands.

A command module defines ``register(subparsers)`` and adds its commands with
:func:`add_command`, which gives every command the same ``--data-dir``
option (also accepted before the command name) and, on request, ``--json``
and ``--tenant``. A command is ``func(args) -> int``: 0 on success, 1 when a
check fails, 2 for bad input (see :func:`fail`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

import msgspec

from mnemolog.eventstore import EventStore
from mnemolog.eventstore.settings import Settings

__all__ = ["CommandError", "add_command", "data_dir", "fail", "open_store", "print_json_line", "sqlite_path"]

Command = Callable[[argparse.Namespace], int]

_json = msgspec.json.Encoder()


class CommandError(Exception):
    """Raised anywhere in a command: ``main`` prints it as one line and exits with ``code``."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


def fail(message: str, code: int = 2) -> int:
    """Print ``mnemolog: error: message`` on stderr and return ``code`` (use ``return fail(...)``)."""
    print(f"mnemolog: error: {one_line(message)}", file=sys.stderr)
    return code


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
        parser.add_argument("--tenant", metavar="TENANT", help="only this tenant's events")
    if func is not None:
        parser.set_defaults(func=func)
    return parser


def data_dir(args: argparse.Namespace) -> Path:
    explicit = getattr(args, "data_dir", None)
    return Path(explicit if explicit else Settings().data_dir)


def open_store(args: argparse.Namespace, *, migrate: bool = True) -> EventStore:
    """Open the log named by ``--data-dir`` (or the environment), migrating its schema."""
    explicit = getattr(args, "data_dir", None)
    if explicit:
        return EventStore.open(explicit, migrate_schema=migrate)
    return EventStore.open(settings=Settings(), migrate_schema=migrate)


def sqlite_path(store: EventStore) -> Path | None:
    """The database file behind ``store``, when it is SQLite."""
    prefix = "sqlite:///"
    return Path(store.url[len(prefix) :]) if store.url.startswith(prefix) else None


def print_json_line(obj: Any) -> None:
    """One JSON object on one line of stdout (Structs, datetimes and dicts alike)."""
    sys.stdout.write(_json.encode(obj).decode() + "\n")
