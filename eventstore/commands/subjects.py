"""Forget: crypto-shredding a subject's personal data while the log stays whole and verifiable.

``forget(ctx, subject)`` runs in three steps, each safe to repeat:

1. the subject's keys are *retired* (new events of the subject get a fresh
   key, so nothing written from now on is lost with the old ones);
2. a :class:`~mnemolog.eventstore.catalogue.SubjectForgotten` is appended to
   the tenant's stream: the keys destroyed, the memories whose derived rows
   every projection erases, who (the actor), when, and why; a memory that
   another process sealed with a retired key between the read of the
   subject's memories and this event is named by a second one. The event
   (and the answer) also names the events of those memories stored in
   plaintext (written unsealed): no key can erase them, so the log keeps
   them, though every read and projection shows them erased;
3. the keys are destroyed and the key store rewritten without their bytes.

From then on every read of the subject's sealed events gives erased
content, and so does every replay.

The subject :data:`TENANT_KEY` (``@tenant``) names the tenant's own key: what
seals its memories without a subject, its entities (names, descriptions,
aliases, properties), its documents (titles, paths, source URLs; their
chunks are memories without a subject) and the aliases of those memories'
mentions. Forgetting it erases all of them (the event's ``subject`` is
``""``), those written unsealed too: when everything was written with
encryption off the tenant holds no key, and the forget destroys none but
erases them from every read and projection all the same, naming the events
the log keeps in plaintext. The tenant's memories of named subjects stay
readable, and the tenant goes on with a new key. If step 3 is interrupted (the process
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
from ..sealed_keys import sealed_keys
from ..aggregate import dropped_at
from ..erased import late_forget, plaintext_erased, sealed_meanwhile, stored_events
from ..keystore import FORGOTTEN, TENANT_SUBJECT, KeyStore
from ..model import Conflict, NotFound, ValidationError, validate_subject
from ..recorder import utc_stamp
from ..store import EventStore, StreamAppend
from .context import CommandContext, CommandResult, commit, replayed, stored_key
from .facts import GraphFacts
from .working import WorkingMemory


_LATE = "forget-late"  # the command name of a forget's second event (see erased.sealed_meanwhile)
TENANT_KEY = "@tenant"  # the subject name that forgets the tenant's own key (never a subject id: those never start with @)


class SubjectCommands:
    def __init__(self, store: EventStore, facts: GraphFacts, keys: KeyStore):
        self.store = store
        self.facts = facts
        self.keys = keys
        self.working = WorkingMemory(store, facts)

    def forget(self, ctx: CommandContext, subject: str, *, reason: str = "") -> CommandResult:
        """Destroy the subject's keys and record it, naming its memories (erased from every read, those written
        unsealed too) and the events the log keeps in plaintext; 404 when no memory or forget names the subject.

        ``subject`` is a subject id, or :data:`TENANT_KEY` for the tenant's own key.
        """
        if subject != TENANT_KEY:
            self._check_subject(ctx.tenant, subject)
        if not isinstance(reason, str):
            raise ValidationError("reason", "must be a string")
        if (done := replayed(self.store, ctx, "forget", [subject, reason])) is not None:
            return self._finish_replayed(ctx, subject, done)
        key_subject = TENANT_SUBJECT if subject == TENANT_KEY else subject
        key_ids = self.keys.retire(ctx.tenant, key_subject)
        read_from = self.store.last_position()  # the facts below hold every event up to here, at least
        if key_ids:
            memory_ids = tuple(self.facts.subject_memories(ctx.tenant, key_subject))  # erased ones too: one may have been moved back to it since
        else:  # no key to destroy: memories of it written unsealed are still erased from every read (or nothing to do)
            found = self._nothing_to_forget(ctx, subject, key_subject)
            if isinstance(found, CommandResult):
                return found
            memory_ids = found
        # One given another subject since (or none) keeps its versions from then on: they are that subject's.
        kept_from = self.facts.moved_away(ctx.tenant, key_subject, memory_ids)
        # A topic over one of them, or a merge of one, quotes its text, sealed with another key when the memory was given
        # the subject after the topic was written: the forget erases those too.
        memory_ids += tuple(self.facts.quoting_memories(ctx.tenant, memory_ids))
        dropped = dropped_at(self.store, ctx.tenant)
        if dropped:  # the projections hold nothing from before the tenant's drop: the log names what its keys sealed
            memory_ids += sealed_meanwhile(self.store, ctx.tenant, key_subject, key_ids, 0, dropped, memory_ids)
        plaintext = plaintext_erased(self.store, ctx.tenant, key_subject, memory_ids, kept_from)
        result = commit(
            self.store,
            ctx,
            "forget",
            [
                StreamAppend(
                    c.tenant_stream(ctx.tenant),
                    [
                        c.SubjectForgotten(
                            subject=key_subject, key_ids=tuple(key_ids), memory_ids=memory_ids, reason=reason, plaintext_positions=plaintext,
                            kept_from=kept_from, checked_through=read_from,
                        )
                    ],
                ),
                *self._leaving(ctx.tenant, tuple(m for m in memory_ids if m not in kept_from)),
            ],
            request=[subject, reason],
        )
        erased = len(memory_ids)
        late = sealed_meanwhile(self.store, ctx.tenant, key_subject, key_ids, read_from, result.first_position - 1, memory_ids)
        if late:
            second = late_forget(self.store, ctx.tenant, key_subject, key_ids, late, reason)
            plaintext += second.plaintext_positions
            more = commit(
                self.store,
                ctx,
                _LATE,
                [StreamAppend(c.tenant_stream(ctx.tenant), [second]), *self._leaving(ctx.tenant, late)],
                request=[subject, reason, late],
            )
            result, erased = msgspec.structs.replace(result, last_position=more.last_position), erased + len(late)
        self.keys.forget(key_ids)
        return msgspec.structs.replace(result, data=_answer(subject, len(key_ids), erased, plaintext))

    def _check_subject(self, tenant: str, subject: object) -> None:
        """A subject id (see :func:`validate_subject`), or a name that is not one but that a memory of the tenant or
        a key of its key store holds: an earlier version took any printable text (``user 7``), and an import of its
        log brings it. Its data is erased as any other subject's; a name the store holds is never refused. A blank
        name is refused first: the key store holds the tenant's own key under the empty subject, which only
        :data:`TENANT_KEY` names (a blank ``--subject`` destroyed it)."""
        if isinstance(subject, str) and not subject.strip():
            raise ValidationError("subject", f"must not be blank (the tenant's own key is forgotten as {TENANT_KEY})")
        try:
            validate_subject(subject)
        except ValidationError:
            if not isinstance(subject, str) or subject.startswith("@") or not self._names(tenant, subject):
                raise

    def _names(self, tenant: str, subject: str) -> bool:
        """Whether a memory of the tenant, or a key of its key store, names ``subject``."""
        return bool(self.keys.subject_keys(tenant, subject) or self.facts.subject_memories(tenant, subject))

    def _nothing_to_forget(self, ctx: CommandContext, subject: str, key_subject: str) -> CommandResult | tuple[str, ...]:
        """When the subject holds no key in this tenant: its memories no forget erased yet, if every event of
        them is stored in plaintext or sealed with a key this store holds (written with encryption off, or
        given the subject later): the forget erases them from every read and projection, and names the events
        the log keeps in plaintext. For the tenant's own key, so too when only its entities, documents or
        mentions written unsealed since its last forget are left. Otherwise the answer, writing nothing:
        already forgotten (everything of it erased by an earlier forget, which the answer names: who, when,
        why); not found (nothing of it and no forget of it); or a conflict when some memories are sealed with
        a key this store never held (imported without their key file)."""
        earlier = self._earlier_forgets(ctx.tenant, key_subject)
        erased = {memory_id for r in earlier for memory_id in r.event.memory_ids}
        left = tuple(memory_id for memory_id in self.facts.subject_memories(ctx.tenant, key_subject) if memory_id not in erased)
        if left or (subject == TENANT_KEY and self._own_left(ctx.tenant, earlier)):
            if not self._sealed_elsewhere(ctx.tenant, left):
                return left
            raise Conflict(
                f"subject {subject!r}: {len(left)} of its memories (first {left[0]}) are sealed with a key the key store"
                f" {self.keys.path} never held (a key store that is not the log's, or a log imported without its key file):"
                " restore the log's key store, or import its key file (mnemolog import --keys KEYFILE), then forget again;"
                " nothing was forgotten",
                field="subject",
            )
        if not earlier:
            raise NotFound("subject", subject)
        forgets = [
            {"position": r.position, "recorded_at": utc_stamp(r.recorded_at), "actor": r.metadata.actor, "reason": r.event.reason}
            for r in earlier
        ]
        plaintext = tuple(p for r in earlier for p in r.event.plaintext_positions)
        return CommandResult(correlation_id=ctx.correlation_id, data=_answer(subject, 0, 0, plaintext) | {"already_forgotten": forgets})

    def _sealed_elsewhere(self, tenant: str, memory_ids: tuple[str, ...]) -> bool:
        """Whether an event of ``memory_ids`` is sealed with a key this key store never held (a log imported
        without its key file): its text is readable where that key is, so no forget here can erase it."""
        keys = {key_id for r in stored_events(self.store, tenant, memory_ids) for _, key_id in sealed_keys(r.event)}
        return any(self.keys.key(key_id) is None for key_id in keys)

    def _own_left(self, tenant: str, earlier: list) -> bool:
        """Whether the tenant's entities, documents or mentions hold personal fields in plaintext written after
        the last of its ``earlier`` forgets of its own key (before it, that forget erased them)."""
        last = earlier[-1].position if earlier else 0
        return any(p > last for p in plaintext_erased(self.store, tenant, TENANT_SUBJECT, ()))

    def _earlier_forgets(self, tenant: str, subject: str) -> list:
        """The ``SubjectForgotten`` events recorded for ``subject`` in the tenant, oldest first."""
        forgets = self.store.read_all(stream_id=c.tenant_stream(tenant), tenant=tenant, types=["SubjectForgotten"])
        return [r for r in forgets if r.event.subject == subject]

    def _leaving(self, tenant: str, memory_ids: tuple[str, ...]) -> list[StreamAppend]:
        """The erased memories leave working memory with the forget: an entry of erased text recalls nothing."""
        return self.working.write(tenant, self.working.leaving(tenant, memory_ids, "subject forgotten"))

    def _finish_replayed(self, ctx: CommandContext, subject: str, done: CommandResult) -> CommandResult:
        """A retried forget: the keys its events name destroyed (a crash may have come between its append and
        step 3), and answered as the first request was."""
        ranges = [(done.first_position, done.last_position)]
        late = self.store.recorder.idempotency_record(key) if (key := stored_key(self.store, ctx, _LATE)) is not None else None
        if late is not None:
            ranges.append((late.first_position, late.last_position))
            done = msgspec.structs.replace(done, last_position=late.last_position)
        keys_destroyed, erased, plaintext = 0, 0, ()
        for first, last in ranges:
            for recorded in self.store.read_all(after=first - 1, until=last, types=["SubjectForgotten"]):
                self.keys.forget([k for k in recorded.event.key_ids if self.keys.key(k) not in (None, FORGOTTEN)])
                keys_destroyed, erased = len(recorded.event.key_ids), erased + len(recorded.event.memory_ids)
                plaintext += recorded.event.plaintext_positions
        return msgspec.structs.replace(done, data=_answer(subject, keys_destroyed, erased, plaintext))


def _answer(subject: str, keys_destroyed: int, erased: int, plaintext: tuple[int, ...]) -> dict:
    """A forget's answer: what it destroyed and erased, and the events it could not erase, which the log keeps
    in plaintext (their positions, oldest first, each once: a mention an earlier forget of the subject named
    too; empty when everything it erased was sealed)."""
    return {"subject": subject, "keys_destroyed": keys_destroyed, "memories_erased": erased, "plaintext_positions": sorted(set(plaintext))}
