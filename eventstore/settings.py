"""Settings as ``(name, default, help)``, read from the environment.

Every layer declares its own settings with :func:`setting` in its own module,
at module level (a tuple of them when declared in a loop). The registry holds
what the imported modules declared, so that :class:`Settings` refuses an
unknown name; the reference (``mnemolog.tools.docs``) lists every setting
from its explicit list of declaring modules. A value is parsed by the type of
its default.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class Setting:
    """A setting; a number's ``minimum`` / ``maximum`` are inclusive, ``above`` exclusive; a text's ``choices`` are
    compared without case. A value from the environment outside them is refused, naming the variable."""

    name: str
    default: Any
    help: str
    minimum: float | None = None
    above: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()

    @property
    def env(self) -> str:
        return "MNEMOLOG_" + self.name.upper()

    def parse(self, raw: str) -> Any:
        try:
            raw.encode("utf-8")
        except UnicodeEncodeError:  # os.environ holds bytes that are no UTF-8 as lone surrogates
            raise SettingError(f"{self.env}: not valid UTF-8 text") from None
        return self._checked(self._parsed(raw))

    def _checked(self, value: Any) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if not self._within(value):
                raise SettingError(f"{self.env}: expected {self._range()}, got {value!r}")
        elif self.choices and str(value).strip().lower() not in self.choices:
            raise SettingError(f"{self.env}: expected {self.takes()}, got {value!r}")
        return value

    def _within(self, value: float) -> bool:
        if not math.isfinite(value) or (self.minimum is not None and value < self.minimum) or (self.above is not None and value <= self.above):
            return False
        return self.maximum is None or value <= self.maximum

    def takes(self) -> str:
        """What the setting takes, as its refusal says it (see the reference)."""
        if self.choices:
            return "one of " + ", ".join(self.choices)
        if type(self.default) is bool:
            return "a boolean"
        return self._range() if isinstance(self.default, (int, float)) else "text"

    def _range(self) -> str:
        kind = "a whole number" if type(self.default) is int else "a number"
        if self.minimum is not None and self.maximum is not None:
            return f"{kind} from {self.minimum:g} to {self.maximum:g}"
        bounds = [f"{word} {bound:g}" for word, bound in (("at least", self.minimum), ("above", self.above), ("at most", self.maximum)) if bound is not None]
        return kind + (" " + ", ".join(bounds) if bounds else "")

    def _parsed(self, raw: str) -> Any:
        kind = type(self.default)
        if kind is bool:
            lowered = raw.strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            # A blank one too: "MNEMOLOG_AUTH=" read as false turned authentication off without a word.
            raise SettingError(f"{self.env}: expected a boolean (1/0, true/false, yes/no, on/off), got {raw!r}; unset it for the default")
        if kind in (int, float):
            try:
                return kind(raw)
            except ValueError:
                raise SettingError(f"{self.env}: expected {'a whole number' if kind is int else 'a number'}, got {raw!r}") from None
        return raw


class SettingError(ValueError):
    """A setting's value from the environment cannot be parsed."""


class SetupError(RuntimeError):
    """This installation cannot do what the settings ask (e.g. an optional extra is missing).

    The operator's to fix, like bad input: the CLI prints it as one line and exits 2.
    """


REGISTRY: dict[str, Setting] = {}


def setting(
    name: str, default: Any, help: str, *,
    minimum: float | None = None, above: float | None = None, maximum: float | None = None, choices: tuple[str, ...] = (),
) -> Setting:
    """Declare a setting; declaring the same name twice must agree."""
    declared = Setting(name, default, help, minimum, above, maximum, choices)
    existing = REGISTRY.get(name)
    if existing is not None and existing != declared:
        raise ValueError(f"setting {name!r} declared twice with different values")
    REGISTRY[name] = declared
    return declared


class Settings:
    """Resolved settings: explicit overrides, then the environment, then defaults.

    Each name is resolved once, at its first read, and kept: recall reads
    settings on every request, and reading ``os.environ`` each time (encode
    the name, look it up, decode, parse) took 15% of the interpreter's time
    in a profile of the server answering recalls that found nothing. The
    environment is read when a setting is first used, not again: a new
    ``Settings`` sees a changed one.
    """

    def __init__(self, overrides: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None):
        self._overrides = dict(overrides or {})
        self._env = os.environ if env is None else env
        self._resolved: dict[str, Any] = {}
        unknown = set(self._overrides) - set(REGISTRY)
        if unknown:
            raise SettingError(f"unknown setting(s): {', '.join(sorted(unknown))}")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return self.get(name)

    def get(self, name: str) -> Any:
        try:
            return self._resolved[name]
        except KeyError:
            pass
        try:
            declared = REGISTRY[name]
        except KeyError:
            raise AttributeError(f"unknown setting {name!r}") from None
        if name in self._overrides:
            value = declared._checked(self._overrides[name])
        else:
            raw = self._env.get(declared.env)
            value = declared.default if raw is None else declared.parse(raw)  # a bad value raises every time
        self._resolved[name] = value
        return value

    def overrides(self) -> dict[str, Any]:
        """The explicit values (the environment and defaults apply under them)."""
        return dict(self._overrides)

    def with_overrides(self, **overrides: Any) -> "Settings":
        merged = {**self._overrides, **overrides}
        return Settings(merged, self._env)

    def as_dict(self) -> dict[str, Any]:
        return {name: self.get(name) for name in sorted(REGISTRY)}


DATA_DIR = setting("data_dir", "./data", "Directory holding events.db, projections.db, vectors.usearch and backups/.")
LOG_URL = setting(
    "log_url",
    "",
    "SQLAlchemy URL of the event log: empty means sqlite:///<data_dir>/events.db; "
    "postgresql+psycopg://user@host/db puts it in PostgreSQL (the postgres extra), shared by every server "
    "that names it, each keeping its projections in its own data_dir.",
)
SYNCHRONOUS = setting(
    "synchronous",
    "FULL",
    "SQLite durability of the log: FULL survives power loss (default); NORMAL is faster for bulk loads.",
    choices=("off", "normal", "full", "extra"),
)
BUSY_TIMEOUT = setting(
    "busy_timeout",
    30.0,
    "Seconds a connection to a SQLite file of the data directory (the log, projections.db, keys.db, auth.db) waits for "
    "a lock another process holds (a long import or rebuild, a held transaction) before its command fails with 'database is locked'.",
    minimum=0,
    maximum=86400,
)
SUBSCRIBE_POLL_SECONDS = setting(
    "subscribe_poll_seconds",
    1.0,
    "How often a subscriber polls for events committed by other processes.",
    above=0,
)
