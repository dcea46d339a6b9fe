"""A JSON body that breaks its type, looked into: is it JSON at all, and which key of a dict is at fault.

Only a body already refused comes here (``routing.parse_json``): a body that
decodes costs nothing more. msgspec names an object's value in a dict by
``[...]``, never by its key; :func:`key_at_fault` finds the key, so that a 422
names ``memory.properties.a`` rather than ``memory.properties[...]``.
"""

from __future__ import annotations

import itertools
from typing import Any

import msgspec

from .operations import integral_numbers


def decode_typed(body: bytes, kind: Any) -> Any:
    """``body`` decoded as ``kind``, a whole number written with a fraction taken where an integer is."""
    try:
        return msgspec.json.decode(body, type=kind)
    except msgspec.ValidationError as exc:
        if "got `float`" not in str(exc):
            raise
        # JSON has one kind of number: 5.0 is the integer 5 (as JSON Schema counts it), so it is taken where an integer is.
        return msgspec.convert(integral_numbers(msgspec.json.decode(body)), kind)


def check_json(body: bytes) -> None:
    """A :class:`msgspec.DecodeError` unless ``body`` is one JSON document, in UTF-8.

    Decoded as a :class:`msgspec.Raw`, the body is read whole for its syntax
    but its values are not made (a number out of any type's range is still
    JSON); that reading does not check the text's UTF-8, which is checked
    apart, with the message msgspec gives for it.
    """
    msgspec.json.decode(body, type=msgspec.Raw)
    try:
        str(body, "utf-8")
    except UnicodeDecodeError:
        raise msgspec.DecodeError("Invalid UTF-8 encoded string") from None


_MEMBERS = dict[str, msgspec.Raw]
_ITEMS = list[msgspec.Raw]


def _path_to(body: bytes, steps: list[str | int]) -> tuple[list[Any], dict[str, msgspec.Raw]]:
    """The objects and arrays on the path to the object at ``steps`` (keys and indices), each read one level deep
    (its values kept as their JSON), and that object's members."""
    levels: list[Any] = []
    raw: bytes | msgspec.Raw = body
    for step in steps:
        levels.append(msgspec.json.decode(raw, type=_ITEMS if isinstance(step, int) else _MEMBERS))
        raw = levels[-1][step]
    return levels, msgspec.json.decode(raw, type=_MEMBERS)


def _put(levels: list[Any], steps: list[str | int], inner: bytes) -> bytes:
    """The document ``levels`` were read from, with ``inner`` (JSON) at ``steps``."""
    for level, step in zip(reversed(levels), reversed(steps)):
        level = level.copy()
        level[step] = msgspec.Raw(inner)
        inner = msgspec.json.encode(level)
    return inner


def _skeleton(steps: list[str | int], inner: bytes) -> bytes:
    """A document holding ``inner`` (JSON) at ``steps`` and nothing else (each index made 0)."""
    for step in reversed(steps):
        inner = msgspec.json.encode([msgspec.Raw(inner)] if isinstance(step, int) else {step: msgspec.Raw(inner)})
    return inner


def key_at_fault(body: bytes, kind: Any, message: str, steps: list[str | int]) -> str | None:
    """The key of the value at fault in the object at ``steps`` of ``body``, which breaks ``kind`` with ``message``
    (where msgspec says ``[...]``, as it tells no dict's key); None when it cannot be told.

    An object of one key has it. Else its members are tried in runs, each
    decoded alone in a skeleton of the body (the object with that run of
    members only, on its path only): a run breaks the type with the message
    of the whole skeleton when it holds the first key at fault (the values
    before it are good, and the decode stops at it), and not otherwise. Runs
    of 1, 1, 2, 4... members find the run that holds it, halved then down to
    the key: some three decodes of the members up to that key, on a body
    already refused. The key found is checked in the body itself (its object
    holding that key alone must break it with ``message``), so the key told
    is always one at fault.
    """

    def error(document: bytes) -> str | None:
        try:
            decode_typed(document, kind)
        except msgspec.ValidationError as exc:
            return str(exc)
        return None

    try:
        levels, members = _path_to(body, steps)
        if len(members) == 1:
            return next(iter(members))
        # The skeleton's error is ``message``, but for its indices (each 0): an array on the path asks for it.
        expected = error(_skeleton(steps, msgspec.json.encode(members))) if any(isinstance(step, int) for step in steps) else message

        def breaks(run: list[tuple[str, msgspec.Raw]]) -> bool:
            return error(_skeleton(steps, msgspec.json.encode(dict(run)))) == expected

        rest, taken = iter(members.items()), 0
        while True:
            run = list(itertools.islice(rest, max(taken, 1)))
            if not run:
                return None
            taken += len(run)
            if breaks(run):
                break
        while len(run) > 1:
            half = run[: len(run) // 2]
            run = half if breaks(half) else run[len(half) :]
        return run[0][0] if error(_put(levels, steps, msgspec.json.encode(dict(run)))) == message else None
    except (msgspec.DecodeError, msgspec.ValidationError, KeyError, IndexError, TypeError, RecursionError):
        return None
