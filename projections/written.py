"""What a write raises that committed while the projections could not follow it.

A module of its own, importing nothing of the read side, so that the command
line tells this failure apart (its message says not to run the command
again) without loading the projections before it knows its command.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mnemolog.eventstore.commands import CommandResult


class WrittenNotProjected(Exception):
    """A command committed its events, then the projections could not follow them (a full disk, a database
    still busy past its lock wait): the write is in the log, and sending it again would write it twice. The
    next catch-up projects it; ``cause`` says why this one failed."""

    def __init__(self, result: CommandResult, cause: Exception):
        self.summary = f"the write was committed (correlation {result.correlation_id}), but the projections could not follow it"
        super().__init__(f"{self.summary}: {cause}")
        self.result = result
        self.cause = cause
