"""Entity commands: upsert, remove, set and remove relations, set tags.

An entity's state is folded from its own stream (``entity-<tenant>/<id>``),
which also holds the relations that start at it, so every check reads the
truth, never a projection. Each relation is mirrored as a graph edge
``rel:<source>:<TYPE>:<target>`` (type = the relation type, weight = the
relation's) appended in the same atomic batch, so that graph reads, BFS and
recall see relations without knowing about entities.

Rules:

- ids: 1 to 100 characters of letters, digits and ``. _ : @ + # ~ -``,
  starting with a letter or digit; ``document:…`` is reserved for documents,
  and a memory's id is refused (:class:`Conflict`): entities and memories
  are nodes of one graph;
- tags: NFKC-normalised, stripped, lowercased, inner whitespace turned into ``-``, duplicates
  dropped; at most ``max_tags`` are kept (8 by default) and the rest are cut,
  the result reporting ``tags_kept``, ``tags_dropped`` and ``dropped_tags``;
- relation types: letters, digits and ``_`` (``-`` and spaces become ``_``),
  stored in upper case; the graph's own edge types (``MENTIONS``,
  ``FOLLOWS``, …) are reserved;
- a relation's weight is a number in [0, 1]; setting an existing triple
  overwrites its weight (a new ``RelationSet``); both ends must be existing
  entities, or the command raises :class:`NotFound`;
- removing an entity removes, in the same batch, every relation into or out
  of it (``RelationRemoved`` on each source's stream) and unlinks every live
  graph edge that touches it (relations, mentions, user links).

Reverting a correlation brings every entity stream it touched back to the
state folded from the events before it (:func:`load_entity` with
``until_version``): see :mod:`mnemolog.eventstore.commands.revert`.
"""

from __future__ import annotations

import math
import re
import unicodedata
from typing import Any, Callable, Iterable, Sequence

import msgspec

from .. import catalogue as c
from .. import catalogue_graph as g
from ..aggregate import dropped_at
from ..model import TAG_RE, Conflict, NotFound, ValidationError
from ..store import NO_STREAM, EventStore, RecordedEvent, StreamAppend
from ..stream_folds import folds_of
from .context import CommandContext, CommandResult, commit, nothing_done, replayed
from .facts import GraphFacts

DEFAULT_MAX_TAGS = 8
ENTITY_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+#~-]{0,99}$")
RELATION_TYPE_RE = re.compile(r"^[A-Z][A-Z0-9_]{0,39}$")
RESERVED_RELATION_TYPES = frozenset({"MENTIONS", "FOLLOWS", "PARENT", "MERGED_TO", "SUPERSEDED_BY"})
MAX_ALIASES = 64
MAX_PROPERTIES = 64

#: ``incoming(tenant, entity_id)`` -> ``[(source_id, relation_type)]``: relations into an entity.
IncomingRelations = Callable[[str, str], list[tuple[str, str]]]


class EntityState(msgspec.Struct):
    entity_id: str
    stream_version: int = 0  # the stream's version, for the append's expected version
    active: bool = False
    name: str = ""
    entity_type: str = ""
    description: str = ""
    aliases: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    properties: dict[str, str] = {}
    relations: dict[tuple[str, str], float] = {}  # (target_id, relation_type) -> weight
    created_position: int = 0  # the position that (re)created it, as the projection keeps it

    @property
    def expected(self) -> int | str:
        return self.stream_version or NO_STREAM


def load_entity(store: EventStore, tenant: str, entity_id: str, *, since: int | None = None, until_version: int | None = None) -> EntityState:
    """Fold an entity's stream; events before the tenant's last drop (or ``since``) are ignored.

    ``until_version`` folds only the stream's events up to that version (the
    state a revert brings the entity back to); ``stream_version`` stays the
    stream's last, for the append's expected version. Without it, a long
    stream's state is continued from the one this process folded last (see
    :mod:`~mnemolog.eventstore.stream_folds`).
    """
    stream = g.entity_stream(tenant, entity_id)
    floor = dropped_at(store, tenant) if since is None else since

    def step(state: EntityState | None, recorded: Sequence[RecordedEvent]) -> EntityState:
        state = state or EntityState(entity_id=entity_id)
        state.stream_version = recorded[-1].stream_version
        _fold_entity(state, recorded, tenant, floor, until_version)
        return state

    if until_version is None:
        state, _ = folds_of(store).fold(tenant, stream, step, _copy_entity, _entity_weight, basis=floor)
        return state or EntityState(entity_id=entity_id)
    recorded = store.read_stream(stream)
    return step(None, recorded) if recorded else EntityState(entity_id=entity_id)


def _fold_entity(state: EntityState, recorded: Sequence[RecordedEvent], tenant: str, floor: int, until_version: int | None) -> None:
    entity_id = state.entity_id
    for r in recorded:
        if r.position < floor or r.tenant != tenant:
            continue
        if until_version is not None and r.stream_version > until_version:
            break
        event = r.event
        if isinstance(event, (g.EntityUpserted, g.EntityRolledBack)):
            if isinstance(event, g.EntityRolledBack):
                state.created_position = event.created_position
            elif not state.active:
                state.created_position = r.position
            state.active = True
            state.name, state.entity_type, state.description = event.name, event.entity_type, event.description
            state.aliases, state.tags, state.properties = event.aliases, event.tags, dict(event.properties)
        elif isinstance(event, g.EntityTagsSet):
            state.tags = event.tags
        elif isinstance(event, g.EntityRemoved):
            state.active = False
            state.relations = {}
        elif isinstance(event, g.RelationSet) and event.source_id == entity_id:
            state.relations[(event.target_id, event.relation_type)] = event.weight
        elif isinstance(event, g.RelationRemoved) and event.source_id == entity_id:
            state.relations.pop((event.target_id, event.relation_type), None)


def _copy_entity(state: EntityState) -> EntityState:
    """A copy that folding more events into leaves ``state`` as it is (its relations are changed in place)."""
    return msgspec.structs.replace(state, relations=dict(state.relations))


def _entity_weight(recorded: Sequence[RecordedEvent]) -> int:
    """About the bytes holding an entity's state costs for ``recorded``: a relation each at most, or its fields."""
    return 200 * len(recorded)


# -- validation -----------------------------------------------------------------------


def check_entity_id(entity_id: Any, field: str = "entity_id") -> str:
    if not isinstance(entity_id, str) or not ENTITY_ID_RE.fullmatch(entity_id):
        raise ValidationError(field, "must be 1 to 100 letters, digits or . _ : @ + # ~ -, starting with a letter or digit")
    if entity_id.startswith(g.DOCUMENT_NODE_PREFIX):
        raise ValidationError(field, f"ids starting with {g.DOCUMENT_NODE_PREFIX!r} are reserved for documents")
    return entity_id


def normalise_relation_type(value: Any) -> str:
    if not isinstance(value, str):
        raise ValidationError("relation_type", "must be a string")
    text = re.sub(r"[\s-]+", "_", value.strip()).upper()
    if not RELATION_TYPE_RE.fullmatch(text):
        raise ValidationError("relation_type", "must be 1 to 40 letters, digits or _, starting with a letter (e.g. works_on)")
    if text in RESERVED_RELATION_TYPES:
        raise ValidationError("relation_type", f"{text} is reserved for the graph's own edges")
    return text


def check_weight(weight: Any) -> float:
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or not 0.0 <= weight <= 1.0:
        raise ValidationError("weight", "must be a number between 0 and 1")
    return float(weight) + 0.0  # -0.0 is 0.0 (it was stored and shown as -0.0)


def normalise_tag(tag: str) -> str:
    """A tag as stored and looked up: NFKC (full-width letters are the ASCII ones), trimmed, lower case, inner whitespace as ``-``."""
    return re.sub(r"\s+", "-", unicodedata.normalize("NFKC", tag).strip().lower())


def cut_tags(tags: Any, limit: int, field: str = "tags") -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Normalised tags split into ``(kept, dropped)``: the first ``limit`` are kept."""
    if tags is None:
        return (), ()
    if isinstance(tags, str):
        tags = tags.split(",")
    out: list[str] = []
    for tag in tags:
        if not isinstance(tag, str):
            raise ValidationError(field, "tags must be strings")
        tag = normalise_tag(tag)
        if not tag:
            continue
        if not TAG_RE.fullmatch(tag):  # as a memory's tags
            raise ValidationError(field, f"invalid tag {tag!r} (no commas or control characters, at most 64 characters)")
        if tag not in out:
            out.append(tag)
    return tuple(out[:limit]), tuple(out[limit:])


def _text(value: Any, field: str, limit: int, *, required: bool = False) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise ValidationError(field, "must be a string")
    value = value.strip()
    if required and not value:
        raise ValidationError(field, "must not be empty")
    if len(value) > limit:
        raise ValidationError(field, f"at most {limit} characters")
    return value


def _one_line(value: Any, field: str, limit: int = 200) -> str:
    """A name, an alias or a type: its whitespace collapsed to single spaces, and any other control character (NUL,
    ...) refused: a name of a NUL alone passed as not blank, and named nothing a reader could see."""
    return _no_controls(" ".join(_text(value, field, limit, required=field == "name").split()), field)


def _no_controls(text: str, field: str) -> str:
    """``text``, or a 422 naming ``field`` when it holds a control character that is no whitespace (NUL, ...)."""
    if any(unicodedata.category(ch) == "Cc" and not ch.isspace() for ch in text):
        raise ValidationError(field, "must not hold control characters (NUL, ...)")
    return text


def _aliases(values: Iterable[Any] | None, name: str) -> tuple[str, ...]:
    """The aliases, each kept once and none the name, as the linker tells surfaces apart (:func:`~mnemolog.eventstore.catalogue_graph.fold_text`)."""
    seen = {" ".join(g.fold_text(name).split())}
    out: list[str] = []
    for value in values or ():
        alias = _one_line(value, "aliases")
        key = " ".join(g.fold_text(alias).split())
        if alias and key not in seen:
            seen.add(key)
            out.append(alias)
    if len(out) > MAX_ALIASES:
        raise ValidationError("aliases", f"at most {MAX_ALIASES} aliases")
    return tuple(out)


def _properties(values: dict[str, Any] | None) -> dict[str, str]:
    values = values or {}
    if not isinstance(values, dict):
        raise ValidationError("properties", "must be an object of strings")
    if len(values) > MAX_PROPERTIES:
        raise ValidationError("properties", f"at most {MAX_PROPERTIES} properties")
    out = {}
    for key, value in values.items():
        if not isinstance(key, str) or not 1 <= len(key) <= 100:
            raise ValidationError("properties", "keys must be strings of 1 to 100 characters")
        if not isinstance(value, str) or len(value) > 2000:
            raise ValidationError("properties", f"{key}: values must be strings of at most 2000 characters")
        out[key] = value
    return dict(sorted(out.items()))


# -- commands ---------------------------------------------------------------------------------


class EntityCommands:
    def __init__(
        self,
        store: EventStore,
        facts: GraphFacts,
        *,
        max_tags: int = DEFAULT_MAX_TAGS,
        incoming: IncomingRelations | None = None,
    ):
        if max_tags < 1:
            raise ValueError("max_tags must be at least 1")
        self.store = store
        self.facts = facts
        self.max_tags = int(max_tags)
        self.incoming = incoming

    def _active(self, tenant: str, entity_id: str, field: str = "entity_id", *, since: int | None = None) -> EntityState:
        state = load_entity(self.store, tenant, check_entity_id(entity_id, field), since=since)
        if not state.active:
            raise NotFound("entity", entity_id)
        return state

    def upsert(
        self,
        ctx: CommandContext,
        entity_id: str,
        *,
        name: str,
        entity_type: str = "",
        description: str = "",
        aliases: Sequence[str] = (),
        tags: Sequence[str] | str = (),
        properties: dict[str, str] | None = None,
    ) -> CommandResult:
        """Create or replace an entity (every field given is its new state)."""
        check_entity_id(entity_id)
        name = _one_line(name, "name")
        kept, dropped = cut_tags(tags, self.max_tags)
        event = g.EntityUpserted(
            entity_id=entity_id,
            name=name,
            entity_type=_one_line(entity_type, "entity_type", 64),
            description=_no_controls(_text(description, "description", 4000), "description"),
            aliases=_aliases(aliases, name),
            tags=kept,
            properties=_properties(properties),
        )
        report = {"entity_id": entity_id, "tags_kept": len(kept), "tags_dropped": len(dropped), "dropped_tags": list(dropped), "max_tags": self.max_tags}
        if (done := replayed(self.store, ctx, "upsert-entity", event)) is not None:
            return _with(done, created=not self._before(done, ctx.tenant, entity_id).active, changed=True, **report)
        state = load_entity(self.store, ctx.tenant, entity_id)
        if not state.active and self.facts.node_exists(ctx.tenant, entity_id):
            # A graph node with this id that is no entity: a memory. Sharing its id, the entity would share its edges too.
            raise Conflict(f"{entity_id!r} is a memory's id: an entity needs an id of its own", field="entity_id")
        current = (state.name, state.entity_type, state.description, state.aliases, state.tags, state.properties)
        if state.active and current == (event.name, event.entity_type, event.description, event.aliases, event.tags, event.properties):
            return nothing_done(ctx, created=False, changed=False, **report)
        result = commit(
            self.store,
            ctx,
            "upsert-entity",
            [StreamAppend(g.entity_stream(ctx.tenant, entity_id), [event], state.expected)],
            request=event,
        )
        return _with(result, created=not state.active, changed=True, **report)

    def set_tags(self, ctx: CommandContext, entity_id: str, tags: Sequence[str] | str) -> CommandResult:
        kept, dropped = cut_tags(tags, self.max_tags)
        report = {"entity_id": entity_id, "tags_kept": len(kept), "tags_dropped": len(dropped), "dropped_tags": list(dropped), "max_tags": self.max_tags}
        if (done := replayed(self.store, ctx, "set-entity-tags", [entity_id, kept])) is not None:
            return _with(done, changed=True, **report)
        state = self._active(ctx.tenant, entity_id)
        if state.tags == kept:
            return nothing_done(ctx, changed=False, **report)
        event = g.EntityTagsSet(entity_id=entity_id, tags=kept)
        result = commit(
            self.store,
            ctx,
            "set-entity-tags",
            [StreamAppend(g.entity_stream(ctx.tenant, entity_id), [event], state.expected)],
            request=[entity_id, kept],
        )
        return _with(result, changed=True, **report)

    def remove(self, ctx: CommandContext, entity_id: str, *, reason: str = "") -> CommandResult:
        """Remove an entity, its relations both ways and every live edge touching it, atomically."""
        if (done := replayed(self.store, ctx, "remove-entity", [entity_id, reason])) is not None:
            written = self.store.read_all(after=done.first_position - 1, until=done.last_position)
            removed = sum(isinstance(r.event, g.RelationRemoved) for r in written)
            unlinked = sum(isinstance(r.event, c.EdgeUnlinked) for r in written)
            return msgspec.structs.replace(done, data={"entity_id": entity_id, "removed_relations": removed, "unlinked_edges": unlinked})
        floor = dropped_at(self.store, ctx.tenant)
        state = self._active(ctx.tenant, entity_id, since=floor)
        why = reason or f"entity {entity_id} removed"
        own: list = [
            g.RelationRemoved(source_id=entity_id, target_id=target, relation_type=rtype, reason=why)
            for (target, rtype) in sorted(state.relations)
        ]
        own.append(g.EntityRemoved(entity_id=entity_id, reason=reason))
        writes: list[StreamAppend] = []
        removed = len(own) - 1
        for source in sorted({s for s, _ in self._incoming(ctx.tenant, entity_id)} - {entity_id}):
            other = load_entity(self.store, ctx.tenant, source, since=floor)
            gone = [
                g.RelationRemoved(source_id=source, target_id=entity_id, relation_type=rtype, reason=why)
                for (target, rtype) in sorted(other.relations)
                if target == entity_id
            ]
            if gone:
                writes.append(StreamAppend(g.entity_stream(ctx.tenant, source), gone, other.stream_version))
                removed += len(gone)
        writes.insert(0, StreamAppend(g.entity_stream(ctx.tenant, entity_id), own, state.expected))
        edges = [c.EdgeUnlinked(edge=e, reason=why) for e in self.facts.live_edges_of(ctx.tenant, [entity_id])]
        if edges:
            writes.append(StreamAppend(c.edges_stream(ctx.tenant), edges))
        result = commit(self.store, ctx, "remove-entity", writes, request=[entity_id, reason])
        return _with(result, entity_id=entity_id, removed_relations=removed, unlinked_edges=len(edges))

    def _incoming(self, tenant: str, entity_id: str) -> list[tuple[str, str]]:
        found = set(self.incoming(tenant, entity_id)) if self.incoming is not None else set()
        for edge in self.facts.live_edges_of(tenant, [entity_id]):  # the mirrored graph edges, as a second source
            if edge.edge_id.startswith(g.RELATION_EDGE_PREFIX) and edge.target == entity_id:
                found.add((edge.source, edge.edge_type))
        return sorted(found)

    def _before(self, done: CommandResult, tenant: str, entity_id: str) -> EntityState:
        """The entity as it stood before a replayed command's event on its stream: what the first answer reported (created, previous weight)."""
        stream = g.entity_stream(tenant, entity_id)
        written = next(r for r in self.store.read_all(after=done.first_position - 1, until=done.last_position) if r.stream_id == stream)
        return load_entity(self.store, tenant, entity_id, until_version=written.stream_version - 1)

    def set_relation(
        self,
        ctx: CommandContext,
        source_id: str,
        target_id: str,
        relation_type: str,
        *,
        weight: float = 1.0,
    ) -> CommandResult:
        """Create the relation, or overwrite its weight; both entities must exist."""
        check_entity_id(source_id, "source_id")
        check_entity_id(target_id, "target_id")
        rtype = normalise_relation_type(relation_type)
        weight = check_weight(weight)
        if source_id == target_id:
            raise ValidationError("target_id", "a relation cannot start and end at the same entity")
        request = [source_id, target_id, rtype, weight]
        edge_id = g.relation_edge_id(source_id, rtype, target_id)
        if (done := replayed(self.store, ctx, "set-relation", request)) is not None:
            previous = self._before(done, ctx.tenant, source_id).relations.get((target_id, rtype))
            report = dict(created=previous is None, changed=True, edge_id=edge_id, previous_weight=previous)
            return msgspec.structs.replace(done, data=report)  # the first answer's report, not the edge events' ids
        source = self._active(ctx.tenant, source_id, "source_id")
        self._active(ctx.tenant, target_id, "target_id")
        previous = source.relations.get((target_id, rtype))
        live = self.facts.relation_edge(ctx.tenant, source_id, rtype, target_id)
        if live is not None:
            edge_id = live.edge_id
        elif self.facts.live_edge(ctx.tenant, edge_id) is not None:  # another relation spells this id (see relation_edge_id)
            edge_id = g.relation_edge_id(source_id, rtype, target_id, escaped=True)
        if previous == weight and live is not None and live.weight == weight:
            return nothing_done(ctx, created=False, changed=False, edge_id=edge_id, previous_weight=previous)
        # Also when only the graph edge is missing (or stale): a log written before rel: edges were kept to their relations may hold one unlinked alone.
        edge = c.EdgeRecord(edge_id=edge_id, edge_type=rtype, source=source_id, target=target_id, weight=weight)
        edge_events: list = []
        if live is not None:
            edge_events.append(c.EdgeUnlinked(edge=live, reason="relation weight changed"))
        edge_events.append(c.EdgeLinked(edge=edge))
        event = g.RelationSet(source_id=source_id, target_id=target_id, relation_type=rtype, weight=weight)
        writes = [
            StreamAppend(g.entity_stream(ctx.tenant, source_id), [event], source.expected),
            StreamAppend(c.edges_stream(ctx.tenant), edge_events),
        ]
        result = commit(self.store, ctx, "set-relation", writes, request=request)
        return _with(result, created=previous is None, changed=True, edge_id=edge_id, previous_weight=previous)

    def remove_relation(self, ctx: CommandContext, source_id: str, target_id: str, relation_type: str, *, reason: str = "") -> CommandResult:
        check_entity_id(source_id, "source_id")
        check_entity_id(target_id, "target_id")
        rtype = normalise_relation_type(relation_type)
        request = [source_id, target_id, rtype, reason]
        edge_id = g.relation_edge_id(source_id, rtype, target_id)
        if (done := replayed(self.store, ctx, "remove-relation", request)) is not None:
            return msgspec.structs.replace(done, data={"edge_id": edge_id})  # the first answer's report, not the edge events' ids
        source = self._active(ctx.tenant, source_id, "source_id")
        if (target_id, rtype) not in source.relations:
            raise NotFound("relation", f"{source_id} -{rtype}-> {target_id}")
        event = g.RelationRemoved(source_id=source_id, target_id=target_id, relation_type=rtype, reason=reason)
        writes = [StreamAppend(g.entity_stream(ctx.tenant, source_id), [event], source.expected)]
        live = self.facts.relation_edge(ctx.tenant, source_id, rtype, target_id)
        if live is not None:
            edge_id = live.edge_id
            writes.append(StreamAppend(c.edges_stream(ctx.tenant), [c.EdgeUnlinked(edge=live, reason=reason or "relation removed")]))
        result = commit(self.store, ctx, "remove-relation", writes, request=request)
        return _with(result, edge_id=edge_id)


def _with(result: CommandResult, **data: Any) -> CommandResult:
    return msgspec.structs.replace(result, data={**result.data, **data})
