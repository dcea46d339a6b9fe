"""A small progress reporter for long commands (export, import, verify).

It draws a counter (and a bar when the total is known) on stderr, and only
when stderr is a terminal: piped, under CI, or with ``--json`` it stays
quiet, so scripts and logs never see carriage returns.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

BAR_WIDTH = 24


def interactive(stream: TextIO | None = None) -> bool:
    """True when progress may be drawn: a terminal, and not under CI."""
    stream = stream if stream is not None else sys.stderr
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    """Call it with a running count (and optionally a stage); close it at the end.

    >>> with Progress("export", total=1000, enabled=False) as progress:
    ...     progress(500)
    """

    def __init__(
        self,
        label: str,
        total: int | None = None,
        *,
        enabled: bool | None = None,
        stream: TextIO | None = None,
        interval: float = 0.1,
    ):
        self.label = label
        self.total = total or None
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = interactive(self.stream) if enabled is None else enabled
        self.interval = interval
        self.count = 0
        self.stage: str | None = None
        self._drawn_at = 0.0
        self._width = 0

    def __call__(self, count: int, stage: str | None = None) -> None:
        self.count = count
        if stage != self.stage:
            self.stage = stage
            self._drawn_at = 0.0  # a new stage is drawn at once
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._drawn_at >= self.interval:
            self._drawn_at = now
            self._draw(self.render())

    def render(self) -> str:
        label = f"{self.label} ({self.stage})" if self.stage else self.label
        if self.total:
            done = min(self.count / self.total, 1.0)
            filled = int(done * BAR_WIDTH)
            bar = "#" * filled + "." * (BAR_WIDTH - filled)
            return f"{label}: [{bar}] {self.count:,}/{self.total:,} {done:4.0%}"
        return f"{label}: {self.count:,}"

    def _draw(self, text: str) -> None:
        pad = " " * max(0, self._width - len(text))
        self._width = len(text)
        self.stream.write("\r" + text + pad)
        self.stream.flush()

    def close(self) -> None:
        """Erase the line, leaving the terminal as it was."""
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def progress_for(args, label: str, total: int | None = None) -> Progress:
    """The reporter a command should use: quiet when the command prints JSON."""
    quiet = bool(getattr(args, "json", False))
    return Progress(label, total, enabled=False if quiet else None)
