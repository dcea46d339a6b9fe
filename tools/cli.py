"""The ``mnemolog`` command line.

Every area of the product adds its commands from its own module: each module
listed in :data:`COMMAND_MODULES` exposes ``register(subparsers)`` and adds
subcommands with :func:`mnemolog.tools.common.add_command`, each with a
``func(args) -> int``. The list is the whole registry: importing a module
registers nothing. Modules register in the list's order, which matters once:
``knowledge_cmds`` extends the ``import`` command that ``log_cmds`` adds (from ``exchange_cmds``).

Exit codes: 0 success, 1 a failed check (``verify``), 2 bad arguments or bad
input, 130 interrupted (Ctrl-C), always as one line ``mnemolog: error: ...``
on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from pathlib import Path
from types import ModuleType
from typing import Sequence

try:  # most of the first second of every command: Ctrl-C meanwhile is the one line it is later, not a traceback
    import msgspec
    from sqlalchemy.exc import SQLAlchemyError

    from mnemolog.eventstore import EventStoreError
    from mnemolog.eventstore.errors import database_file, is_lock_contention, is_storage_full
    from mnemolog.eventstore.model import Conflict, NotFound, ValidationError
    from mnemolog.eventstore.settings import SetupError
    from mnemolog.projections.written import WrittenNotProjected

    from . import bench_cmds, eval_cmds, knowledge_cmds, log_cmds, mcp_cmds, memory_cmds, organize_cmds, serve_cmds
    from .common import INTERRUPTED, CommandError, add_data_dir_option, add_global_options, apply_global_options, database_problem, fail
except KeyboardInterrupt:
    sys.stderr.write("mnemolog: error: interrupted\n")
    raise SystemExit(130) from None  # common.INTERRUPTED, which is among what did not load

COMMAND_MODULES: tuple[ModuleType, ...] = (
    log_cmds,
    serve_cmds,
    mcp_cmds,
    bench_cmds,
    memory_cmds,
    organize_cmds,
    knowledge_cmds,  # after log_cmds: it extends `mnemolog import` with `import docs`
    eval_cmds,
)


GIVEN = "_options_given"  # where a parse keeps the options it has read: {dest: (option, value)}


def _agree(parser: argparse.ArgumentParser, option: str, first, second) -> None:
    if first != second:
        parser.error(f"{option} given twice, as {first!r} and {second!r}")


def _remember(parser: argparse.ArgumentParser, namespace: argparse.Namespace, dest: str, option: str, value) -> None:
    given = namespace.__dict__.setdefault(GIVEN, {})
    if dest in given:
        _agree(parser, option, given[dest][1], value)
    given[dest] = (option, value)


class _StoreOnce(argparse._StoreAction):
    """An option that takes a value: given twice, the two must agree. argparse kept the last one silently, so that
    ``--data-dir`` read or wrote another data directory than the first one named, ``--tenant`` another tenant."""

    def __call__(self, parser, namespace, values, option_string=None):
        if option_string is not None:
            _remember(parser, namespace, self.dest, option_string, values)
        setattr(namespace, self.dest, values)


class _Subcommands(argparse._SubParsersAction):
    """A command's options are read apart from those before its name (``mnemolog --data-dir A stats --data-dir B``):
    the same option on both sides must agree too."""

    def __call__(self, parser, namespace, values, option_string=None):
        before = dict(getattr(namespace, GIVEN, {}))
        super().__call__(parser, namespace, values, option_string)
        after = getattr(namespace, GIVEN, {})
        for dest, (option, value) in before.items():
            if dest in after:
                _agree(parser, option, value, after[dest][1])
        setattr(namespace, GIVEN, {**before, **after})


class Parser(argparse.ArgumentParser):
    """argparse, with its errors as the one line every other error uses, and an option given twice refused unless
    both times agree."""

    _intermixing = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in (None, "store"):
            self.register("action", name, _StoreOnce)
        self.register("action", "parsers", _Subcommands)

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"mnemolog: error: {message} (see '{self.prog} --help')\n")

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        """A command taking several positionals (``import docs PATH…``, ``merge ID…``) takes them before, between and
        after its options: argparse alone refused ``import docs --root DIR a.md`` ("unrecognized arguments: a.md")."""
        if self._intermixing or not any(a.nargs in ("*", "+") for a in self._get_positional_actions()):
            return super().parse_known_args(args, namespace)
        self._intermixing = True  # parse_known_intermixed_args calls this method back
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


def build_parser(modules: Sequence[ModuleType] = COMMAND_MODULES) -> Parser:
    parser = Parser(
        prog="mnemolog",
        description="mnemolog: an event-sourced memory store for AI agents.",
    )
    add_data_dir_option(parser, top_level=True)
    add_global_options(parser)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in modules:
        module.register(subparsers)
    return parser


def _describe(exc: BaseException) -> str:
    """What failed, and what to do about it when something other than the command is at fault."""
    what = _what_failed(exc)
    if is_storage_full(exc):
        return f"{what}: free space, then run the command again"
    if is_lock_contention(exc):  # another process's write outlasted MNEMOLOG_BUSY_TIMEOUT
        return f"{what}: run the command again"
    return what


def _what_failed(exc: BaseException) -> str:
    if is_storage_full(exc):
        if isinstance(exc, OSError):
            # A file the command writes (an output, a report), or its standard output: not the data directory's disk.
            where = exc.filename if exc.filename is not None else "the command's output"
            return f"no space left writing {where} ({exc.strerror or exc})"
        return f"the disk holding the data directory is full ({_cause(exc)})"
    if is_lock_contention(exc):
        return f"{database_file(exc) or 'a database of the data directory'} stayed busy past its lock wait (another process is writing it)"
    return _cause(exc)


def _cause(exc: BaseException) -> str:
    if (path := database_file(exc)) is not None:
        return database_problem(Path(path), getattr(exc, "orig", None) or exc)
    if isinstance(exc, SQLAlchemyError) and getattr(exc, "orig", None) is not None:
        return f"database: {exc.orig}"
    if isinstance(exc, sqlite3.Error):  # raised outside SQLAlchemy's wrapping (a BEGIN in a connect hook, the key store)
        return f"database: {exc}"
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"{exc.strerror}: {exc.filename}"
    return str(exc) or type(exc).__name__


def _not_utf8(argv: Sequence[str]) -> str | None:
    """The first argument whose bytes are not UTF-8 (Python holds them as lone surrogates), shown with those bytes escaped.

    Every name, text and path the product keeps is UTF-8: such an argument
    would fail later, naming neither itself nor its bytes, or halfway through
    making a data directory.
    """
    for arg in argv:
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            return arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return None


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _run(argv)
    except KeyboardInterrupt:  # what a command committed before stays; it says more where there is more to say (import)
        return fail("interrupted", INTERRUPTED)


def _run(argv: Sequence[str] | None) -> int:
    if (bad := _not_utf8(sys.argv[1:] if argv is None else argv)) is not None:
        return fail(f"an argument is not valid UTF-8 text: {bad}")
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, argparse errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    try:
        apply_global_options(args)
        return int(args.func(args) or 0)
    except BrokenPipeError:
        # The reader went away (``mnemolog log | head``): stop quietly.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return 1
    except CommandError as exc:
        return fail(str(exc), exc.code)
    except Conflict as exc:  # the product refused the command: one line, exit 2
        shown = f" (current version {exc.current_version})" if exc.current_version is not None else ""
        return fail(f"conflict: {exc}{shown}")
    except NotFound as exc:
        return fail(str(exc))
    except ValidationError as exc:
        return fail(f"invalid input: {exc}")
    except WrittenNotProjected as exc:  # committed: running it again would write it twice
        return fail(f"{exc.summary}: {_what_failed(exc.cause)}; do not run it again: the next command catches the projections up")
    except (EventStoreError, SetupError, ValueError, OSError, msgspec.MsgspecError, SQLAlchemyError, sqlite3.Error) as exc:
        return fail(_describe(exc))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
