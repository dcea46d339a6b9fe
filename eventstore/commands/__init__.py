"""Command handlers: validate a command against the streams it touches, append its events."""

from .context import CommandContext, CommandResult
from .edges import EdgeCommands
from .facts import GraphFacts
from .memories import MemoryCommands
from .revert import RevertCommands

__all__ = ["CommandContext", "CommandResult", "EdgeCommands", "GraphFacts", "MemoryCommands", "RevertCommands"]
