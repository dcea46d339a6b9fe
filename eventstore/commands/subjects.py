"""Forget: crypto-shredding a subject's personal data while the log stays whole and verifiable.

``forget(ctx, subject)`` runs in three steps, each safe to repeat:

1. the subject's keys are *retired* (new events of the subject get a fresh
   key, so nothing written from now on is lost with the old ones);
2. a :class:`~mnemolog.eventstore.catalogue.SubjectForgotten` is appended to
   the tenant's stream: the keys destroyed, the memories whose derived rows
   every projection erases, who (the actor), when, and why;
3. the keys are destroyed and the key store rewritten without their bytes.

From then on every read of the subject's sealed events gives erased
content, and so does every replay.

The subject :data:`TENANT_KEY` (``@tenant``) names the tenant's own key: what
seals its memories without a subject, its entities (names, descriptions,
aliases, properties), its documents (titles, paths, source URLs; their
chunks are memories without a subject) and the aliases of those memories'
mentions. Forgetting it erases all of them (the event's ``subject`` is
``""``); the tenant's memories of named subjects stay readable, and the
tenant goes on with a new key. If step 3 is interrupted (the process
killed), the next open of the store finishes it
(:meth:`~mnemolog.eventstore.store.EventStore.finish_forgets`: retired keys
that a recorded ``SubjectForgotten`` names are destroyed); forgetting the
subject again does too. Interrupted before step 2, nothing was forgotten:
the subject stays readable, and its retired keys go with its next forget. A forget is
not revertible: nothing can bring a destroyed key back.
"""

from __future__ import annotations

import msgspec

from .. import catalogue as c
from ..keystore import FORGOTTEN, TENANT_SUBJECT, KeyStore
from ..model import NotFound, ValidationError, validate_subject
from ..store import EventStore, StreamAppend
from .context import CommandContext, CommandResult, commit, replayed
from .facts import GraphFacts


TENANT_KEY = "@tenant"  # the subject name that forgets the tenant's own key (never a subject id: those never start with @)


class SubjectCommands:
    def __init__(self, store: EventStore, facts: GraphFacts, keys: KeyStore):
        self.store = store
        self.facts = facts
        self.keys = keys

    def forget(self, ctx: CommandContext, subject: str, *, reason: str = "") -> CommandResult:
        """Destroy the subject's keys and record it; 404 when the subject has no key in this tenant.

        ``subject`` is a subject id, or :data:`TENANT_KEY` for the tenant's own key.
        """
        if subject != TENANT_KEY:
            validate_subject(subject)
        if not isinstance(reason, str):
            raise ValidationError("reason", "must be a string")
        if (done := replayed(self.store, ctx, "forget", [subject, reason])) is not None:
            # A retry after a crash between the append and step 3 finishes the destruction.
            report: dict = {}
            for recorded in self.store.read_all(after=done.first_position - 1, until=done.last_position, types=["SubjectForgotten"]):
                self.keys.forget([k for k in recorded.event.key_ids if self.keys.key(k) not in (None, FORGOTTEN)])
                report = {"subject": subject, "keys_destroyed": len(recorded.event.key_ids), "memories_erased": len(recorded.event.memory_ids)}
            return msgspec.structs.replace(done, data=report)  # answered as the first request was
        key_subject = TENANT_SUBJECT if subject == TENANT_KEY else subject
        key_ids = self.keys.retire(ctx.tenant, key_subject)
        if not key_ids:
            raise NotFound("subject", subject)
        memory_ids = tuple(self.facts.subject_memories(ctx.tenant, key_subject))
        event = c.SubjectForgotten(subject=key_subject, key_ids=tuple(key_ids), memory_ids=memory_ids, reason=reason)
        result = commit(
            self.store,
            ctx,
            "forget",
            [StreamAppend(c.tenant_stream(ctx.tenant), [event])],
            request=[subject, reason],
            data={"subject": subject, "keys_destroyed": len(key_ids), "memories_erased": len(memory_ids)},
        )
        self.keys.forget(key_ids)
        return result
