"""Which keys sealed a stored event: the subject and key id each of its sealed Structs names, read unopened.

An import checks that its file's keys are at hand, a forget finds the keys
its subject's events were sealed with, and a sealed write's idempotency
fingerprint is keyed with them; none of them opens a token (see
:mod:`.sealing` for the tokens themselves). :func:`opens_with` does, with one
key given: whether a key file's key is the one that sealed the event.
"""

from __future__ import annotations

import binascii
from typing import Any

from .errors import SealBroken
from .keystore import FORGOTTEN, TENANT_SUBJECT
from .sealing import PREFIX, TOKEN_MARK, Sealer, each_struct, named_key, plan_of


def sealed_keys(event: Any) -> list[tuple[str, str]]:
    """The subject and key id of each sealed Struct of ``event`` as stored (read unopened), in order; a
    Struct stored in plaintext has none. The subject is ``""`` for the tenant's own key."""
    plan = plan_of(type(event))
    found: list[tuple[str, str]] = []
    if plan is None:
        return found

    def visit(slot: Any, owner: Any, index: int | None) -> Any:
        token = getattr(owner, slot.group.carrier)
        try:
            if type(token) is str and token.startswith(TOKEN_MARK):
                key_id = named_key(binascii.a2b_base64(token[:40]))[0]  # 30 bytes: the magic and any UUID reference
            elif type(token) is str and token.startswith(PREFIX):
                key_id = token[len(PREFIX) :].partition(":")[0]
            else:
                return owner
        except (ValueError, IndexError, UnicodeDecodeError, binascii.Error):
            return owner
        subject = slot.group.subject_of(owner) if slot.group.subject_of is not None else None
        found.append((subject or TENANT_SUBJECT, key_id))
        return owner

    each_struct(event, plan, visit)
    return found


class _OneKey:
    """A key store holding one key (every other reads as forgotten, so that only that key's Structs are opened)."""

    _drops = 0
    path = "(the key given)"

    def __init__(self, key_id: str, key: bytes):
        self._by_id = {key_id: key}

    def key(self, key_id: str) -> bytes:
        return self._by_id.get(key_id, FORGOTTEN)

    def forget_cached(self, key_ids: Any) -> None:
        pass


def opens_with(event: Any, event_id: str, key_id: str, key: bytes) -> bool:
    """Whether ``key`` opens the Structs of ``event`` (as stored, decoded unopened) sealed with ``key_id``."""
    try:
        Sealer(_OneKey(key_id, key), enabled=False).unseal(event, event_id)  # type: ignore[arg-type]
    except SealBroken:
        return False
    return True
