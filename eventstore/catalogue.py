"""The event catalogue: every fact mnemolog records, as frozen tagged Structs.

Streams (one scheme, kept everywhere):

- ``memory-<memory_id>``: one memory's life (added, updated, merged into,
  superseded, archived, deleted, restored, rolled back);
- ``edges-<tenant>``: the tenant's edge changes (link, unlink, undo of a
  namespace, re-pointing after a merge);
- ``working-<tenant>``: working-memory evictions, the withdrawals and
  restorations that follow a memory's status, and those with which a revert
  undoes what a command did to it;
- ``tenant-<tenant>``: tenant-wide facts (reverts, drop);
- ``organizer-<tenant>``: how far the organizer's passes have covered the log;
- ``entity-<tenant>/<entity_id>`` and ``document-<tenant>/<doc_id>``: the
  knowledge-graph side (see :mod:`mnemolog.eventstore.catalogue_graph`).

An event holds everything its projectors need, so replay never calls a model.
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from .events import DomainEvent
from .model import MemoryContent


def memory_stream(memory_id: str) -> str:
    return f"memory-{memory_id}"


def edges_stream(tenant: str) -> str:
    return f"edges-{tenant}"


def working_stream(tenant: str) -> str:
    return f"working-{tenant}"


def tenant_stream(tenant: str) -> str:
    return f"tenant-{tenant}"


def organizer_stream(tenant: str) -> str:
    return f"organizer-{tenant}"


class Decision(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Why an automatic change was made, and by whom: every organizer event carries one.

    ``reason`` and ``fallback`` quote the memories judged (their texts, keys,
    values; an LLM's words about them): personal data. An event stores them
    sealed beside the decision (:func:`decided`), under the memories'
    subject, so that forgetting it erases them too; :func:`decision_of` reads
    the decision whole.
    """

    judge: str
    judge_version: str = ""
    similarity: float | None = None
    reason: str = ""
    fallback: str | None = None


def decided(decision: Decision | None, subject: str | None) -> dict[str, Any]:
    """The fields of a merge or supersede event that record ``decision``: its judge, version and similarity
    readable, its reason and fallback sealed under ``subject`` (``None``: the tenant's key)."""
    if decision is None:
        return {}
    return {
        "decision": msgspec.structs.replace(decision, reason="", fallback=None),
        "decision_reason": decision.reason,
        "decision_fallback": decision.fallback,
        "subject": subject,
    }


def decision_of(event: "MemoriesMerged | MemorySuperseded") -> Decision | None:
    """The decision an event records, whole (reads ``[erased: subject forgotten]`` as its reason once the subject is forgotten)."""
    decision = event.decision
    if decision is None or not (event.decision_reason or event.decision_fallback):
        return decision  # no reason, or one recorded in the decision itself (before reasons were sealed)
    return msgspec.structs.replace(decision, reason=event.decision_reason, fallback=event.decision_fallback)


def _records_a_reason(event: Any) -> bool:
    """Whether a merge or supersede event has a decision's reason or fallback to seal."""
    return bool(event.decision_reason or event.decision_fallback)


class EdgeRecord(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A typed, weighted edge with a namespaced id (``<namespace>:<run>:<n>``).

    The properties of a ``MENTIONS`` edge are personal (the alias the linker
    matched in its memory's text): they are sealed (see
    :mod:`mnemolog.eventstore.sealing`) under ``subject``, the memory's
    subject (``None``: the tenant's key), into ``sealed``, which callers never
    set. Once that key is forgotten the edge reads with no properties and
    ``erased`` true; its ids, type, ends and weight stay. Other edges'
    properties are the caller's and stay as they are.

    ``merged_from`` holds the ids of the edges of the same source, target and
    type folded into this one when a merge brought them onto one pair of
    nodes (see :func:`mnemolog.eventstore.commands.edges.fold`), and of those
    folded into them before: where the edge came from. Their own lives (the
    events that linked them, until the fold ended them) stay in the log and
    the graph's history. Callers never set it.
    """

    #: Sealed together (``sealed`` holds the token) when :meth:`sealable`.
    personal: ClassVar[tuple[str, ...]] = ("sealed", "properties")

    edge_id: str
    edge_type: str
    source: str
    target: str
    weight: float = 1.0
    properties: dict[str, Any] = {}
    subject: str | None = None
    sealed: str | None = None
    erased: bool = False
    merged_from: tuple[str, ...] = ()

    def sealable(self) -> bool:
        return self.edge_type == "MENTIONS" and bool(self.properties)


# -- memories ---------------------------------------------------------------


class MemoryAdded(DomainEvent, frozen=True):
    personal = ("content",)
    memory_id: str
    content: MemoryContent
    created_at: str
    working_binding: str | None = None
    origin: str = "add"  # add | import | topic


class MemoryUpdated(DomainEvent, frozen=True):
    personal = ("content",)
    memory_id: str
    content: MemoryContent
    changed: tuple[str, ...]
    updated_at: str
    reason: str = ""


class MemoriesMerged(DomainEvent, frozen=True):
    """A new memory made from several; recorded on the new memory's stream.

    An automatic merge records its ``decision`` (see :func:`decided`):
    ``decision_reason`` and ``decision_fallback`` sealed under ``subject``,
    the memories' subject."""

    personal = ("content", "decision_reason", "decision_fallback")

    memory_id: str
    source_ids: tuple[str, ...]
    content: MemoryContent
    created_at: str
    decision: Decision | None = None
    decision_reason: str = ""
    decision_fallback: str | None = None
    subject: str | None = None

    sealable = _records_a_reason


class MemoryMergedInto(DomainEvent, frozen=True):
    """A source of a merge: archived, pointing at the merged memory."""

    memory_id: str
    merged_into: str
    updated_at: str


class MemorySuperseded(DomainEvent, frozen=True):
    """An older memory replaced by a newer contradictory one: archived with reason ``conflict``.

    An automatic supersede records its ``decision`` as a merge does (see :class:`MemoriesMerged`)."""

    personal = ("decision_reason", "decision_fallback")

    memory_id: str
    superseded_by: str
    updated_at: str
    decision: Decision | None = None
    decision_reason: str = ""
    decision_fallback: str | None = None
    subject: str | None = None

    sealable = _records_a_reason


class MemoryArchived(DomainEvent, frozen=True):
    memory_id: str
    updated_at: str
    reason: str = ""


class MemorySoftDeleted(DomainEvent, frozen=True):
    memory_id: str
    updated_at: str
    reason: str = ""
    evolve_to: str | None = None


class MemoryRestored(DomainEvent, frozen=True):
    memory_id: str
    updated_at: str
    reason: str = ""


class MemoryRolledBack(DomainEvent, frozen=True):
    personal = ("content",)
    """A new version whose content and status equal those of ``to_version``."""

    memory_id: str
    to_version: int
    content: MemoryContent
    status: str
    updated_at: str
    reason: str = ""


class WorkingMemoryEvicted(DomainEvent, frozen=True):
    """The oldest working-memory entries left the FIFO (capacity reached). ``reason`` is empty for the evictions
    of the command that put entries in, and says why otherwise: working memory found over its capacity after
    concurrent adds, by the policy that keeps it within (see :mod:`mnemolog.projections.policies.working`)."""

    bindings: tuple[str, ...]
    memory_ids: tuple[str, ...]
    capacity: int
    reason: str = ""


class WorkingEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One place in a tenant's working memory.

    ``entered_at`` is the position of the ``MemoryAdded`` that put the memory
    there: the FIFO is ordered by it, so a restored entry takes its old place.
    """

    binding: str
    memory_id: str
    memory_type: str
    entered_at: int


class WorkingMemoryWithdrawn(DomainEvent, frozen=True):
    """Entries taken out of working memory: their memories left the activated state (merged into
    another, superseded, archived, deleted, their subject forgotten: ``reason`` says which, and
    ``judge`` names the organizer's judge when it decided), or a revert undid the command that put
    them in."""

    bindings: tuple[str, ...]
    memory_ids: tuple[str, ...]
    reason: str = ""
    judge: str | None = None


class WorkingMemoryRestored(DomainEvent, frozen=True):
    """Entries put (back) at given places: by a revert of the command that evicted or withdrew them, by
    the restore of a memory withdrawn with its status, or a merged memory in the place of its newest source."""

    entries: tuple[WorkingEntry, ...]
    reason: str = ""


# -- edges --------------------------------------------------------------------


class EdgeLinked(DomainEvent, frozen=True):
    personal = ("edge",)
    edge: EdgeRecord


class EdgeUnlinked(DomainEvent, frozen=True):
    personal = ("edge",)
    edge: EdgeRecord  # the edge as it was, so that an undo can link it again
    reason: str = ""


class EdgesRepointed(DomainEvent, frozen=True):
    """Edges of merged memories moved to the merged node: old ids end, new ones start (one per source, target and
    type: see ``merged_from``). A revert or restore that links an edge back to a memory merged away since writes
    one too, replacing the live edge it folds that edge into."""

    personal = ("previous", "current")

    previous: tuple[EdgeRecord, ...]
    current: tuple[EdgeRecord, ...]
    merged_into: str = ""


class NamespaceUndone(DomainEvent, frozen=True):
    """Every live edge under ``prefix`` removed at once; ``edges`` keeps them for an undo."""

    personal = ("edges",)

    prefix: str
    edges: tuple[EdgeRecord, ...]
    reason: str = ""


class NamespaceRestored(DomainEvent, frozen=True):
    """The edges a namespace undo removed, linked again."""

    personal = ("edges",)

    prefix: str
    edges: tuple[EdgeRecord, ...]
    undo_position: int


# -- tenant-wide ----------------------------------------------------------------


class CorrelationReverted(DomainEvent, frozen=True):
    """Marks that a correlation's events were compensated; the compensations follow it."""

    correlation_id: str
    reverted_positions: tuple[int, ...]
    forced: bool = False
    conflicts: tuple[str, ...] = ()


class TenantDropped(DomainEvent, frozen=True):
    """A tombstone: the tenant's data is gone from every projection."""

    backup: str
    events_backed_up: int
    reason: str = ""


class SubjectForgotten(DomainEvent, frozen=True):
    """A subject's data keys were destroyed: its sealed fields read as erased from now on, in every replay.

    Recorded on the tenant's stream. ``subject`` is the pseudonymous subject
    id (``""``: the tenant's own key, which also sealed its entities and
    documents: the entity projection erases them all then); ``key_ids`` the
    keys destroyed; ``memory_ids`` the memories whose derived rows every
    projection erases (any version of which had the subject), so that no
    memory projector needs to know subjects; the graph erases the
    properties of the mention edges recorded under ``subject``. Who and
    when are the envelope's actor and time. No personal data.
    ``plaintext_positions``: the events it erases that hold personal fields
    in plaintext (written unsealed): those of its memories, the mentions of
    them (or recorded under ``subject``) and, for the tenant's own key, the
    tenant's entities and documents. No key can erase them, so the log keeps
    their bytes (every read and projection shows them erased). A forget of the
    tenant's own key when the tenant holds none (everything written with
    encryption off) destroys no key and erases all of them so.
    ``kept_from``: of ``memory_ids``, those given another subject (or none,
    the tenant's) since their last version of ``subject``, by the position of
    their first version after it: their events from there on are that other
    subject's, and stay (only those before it are erased).
    """

    subject: str
    key_ids: tuple[str, ...]
    memory_ids: tuple[str, ...] = ()
    reason: str = ""
    plaintext_positions: tuple[int, ...] = ()
    kept_from: dict[str, int] = {}
    #: The log position up to which ``memory_ids`` were read (0: not recorded): the memories sealed with ``key_ids``
    #: after it and before this event are another process's late writes, which a second event names.
    checked_through: int = 0

    def erased_before(self, memory_id: str, position: int) -> int:
        """The position before which the memory's events are erased, for this forget recorded at ``position``."""
        return self.kept_from.get(memory_id, position)

    def erased_before_each(self, position: int) -> list[tuple[str, int]]:
        """``(memory id, the position before which its events are erased)`` for each memory it names, this forget
        recorded at ``position``: what a projection erases, the rows of versions written before that position."""
        return [(memory_id, self.erased_before(memory_id, position)) for memory_id in self.memory_ids]


class OrganizerPassRecorded(DomainEvent, frozen=True):
    """An organizer pass decided something and has covered the log up to ``position``.

    The organizer's progress belongs to the log's side: with this record, a
    rebuilt ``projections.db`` (which holds its local checkpoint) does not
    make it judge the log again. ``event_id`` is the id of the event at
    ``position``, so that a copy of the log with other positions (an import)
    is recognised and the record ignored there. ``checkpoint`` is
    ``organizer`` for a pass over every tenant, ``organizer@<tenant>`` for one
    tenant's.
    """

    checkpoint: str
    position: int
    event_id: str
    decisions: int = 0


MemoryEvent = (
    MemoryAdded
    | MemoryUpdated
    | MemoriesMerged
    | MemoryMergedInto
    | MemorySuperseded
    | MemoryArchived
    | MemorySoftDeleted
    | MemoryRestored
    | MemoryRolledBack
)
EdgeEvent = EdgeLinked | EdgeUnlinked | EdgesRepointed | NamespaceUndone | NamespaceRestored
WorkingMemoryEvent = WorkingMemoryEvicted | WorkingMemoryWithdrawn | WorkingMemoryRestored
TenantEvent = WorkingMemoryEvent | CorrelationReverted | TenantDropped | OrganizerPassRecorded | SubjectForgotten
Event = MemoryEvent | EdgeEvent | TenantEvent

MEMORY_EVENT_TYPES = tuple(cls.__name__ for cls in MemoryEvent.__args__)
EDGE_EVENT_TYPES = tuple(cls.__name__ for cls in EdgeEvent.__args__)


def edge_changes(event: EdgeEvent) -> tuple[tuple[EdgeRecord, ...], tuple[EdgeRecord, ...]]:
    """The edges an edge event closes, then those it opens (in that order: a repoint closes the previous ones first)."""
    if isinstance(event, EdgeLinked):
        return (), (event.edge,)
    if isinstance(event, EdgeUnlinked):
        return (event.edge,), ()
    if isinstance(event, EdgesRepointed):
        return event.previous, event.current
    if isinstance(event, NamespaceUndone):
        return event.edges, ()
    return (), event.edges  # NamespaceRestored


# The knowledge-graph events are part of the catalogue: importing the
# catalogue registers them, so every reader of the log can decode them.
from . import catalogue_graph
