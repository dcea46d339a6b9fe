"""Where a memory stands in a conversation: its place, read from its properties or its sources.

The organizer links the turns of a conversation in order (``follows:`` edges, see
:mod:`mnemolog.projections.policies.topics`), and never merges two turns placed at two
places (see :func:`mnemolog.projections.policies.dedup.decide`): sources join in a merge,
so the merged memory would keep one turn's place and lose the other's.
"""

from __future__ import annotations

import re

from mnemolog.eventstore.model import MemoryContent

_TURN_SOURCE = re.compile(r"^(?P<conv>[^\s:/]+)[:/](?P<session>[A-Za-z]+\d+)[:/](?P<turn>\d+)$")


def conversation_place(content: MemoryContent) -> tuple[str, tuple] | None:
    """``(conversation, order)`` when a memory's properties or sources place it in a conversation."""
    props = content.properties or {}
    conv = next((str(props[k]) for k in ("conv", "conversation", "conversation_id") if props.get(k) not in (None, "")), None)
    session = next((str(props[k]) for k in ("session", "session_id") if props.get(k) not in (None, "")), None)
    found = None
    for source in content.sources:
        m = _TURN_SOURCE.match(source)
        if m:
            found = m
            break
    turn = props.get("turn")
    if isinstance(turn, str) and re.fullmatch(r"\d+(\.\d+)?", turn.strip()):
        turn = float(turn)
    if not isinstance(turn, (int, float)) or isinstance(turn, bool):
        turn = None
    if conv is None:
        conv = session if session is not None and turn is not None else (found.group("conv") if found else None)
        session = None if conv == session else session
    if conv is None:
        return None
    if turn is not None:
        order = (_number(session) if session else (_number(found.group("session")) if found else 0), float(turn))
    elif found is not None and (found.group("conv") == conv):
        order = (_number(found.group("session")), float(found.group("turn")))
    else:
        return None
    safe = re.sub(r"[^\w.-]", "_", conv)[:120]
    return safe, order


def _number(label: str) -> int:
    digits = re.findall(r"\d+", label or "")
    return int(digits[-1]) if digits else 0
