"""Edge commands: link, unlink, undo a namespace (and undo that undo)."""

from __future__ import annotations

import math
import re
from hashlib import sha256
from typing import Callable, Collection, Iterable, Sequence

import msgspec

from .. import catalogue as c
from ..catalogue_graph import MERGED_EDGE_PREFIX, RELATION_EDGE_PREFIX, SUPERSEDED_EDGE_PREFIX

MERGED_TO = "MERGED_TO"  # a merge's edge from each source to the merged memory
from ..model import Conflict, NotFound, Status, ValidationError
from ..store import EventStore, StreamAppend
from .context import CommandContext, CommandResult, commit, nothing_done, replayed
from .facts import GraphFacts
from .revert_chains import revert_chain

EDGE_ID_RE = re.compile(r"^[a-z][a-z0-9_-]*:[^\s]+$")
EDGE_TYPE_RE = re.compile(r"^[A-Z][A-Z0-9_]{0,63}$")
NAMESPACE_RE = re.compile(r"^[a-z][a-z0-9_-]*:[^\s]*$")


def under(prefix: str, edge_id: str) -> bool:
    """Whether ``edge_id`` is under ``prefix``, segment by segment: a prefix ending in ``:`` takes every id that
    starts with it; another one names whole segments (``user:notes`` takes ``user:notes`` and ``user:notes:…``,
    never ``user:notes-2:…``, which is another run)."""
    return edge_id.startswith(prefix) if prefix.endswith(":") else edge_id == prefix or edge_id.startswith(prefix + ":")


#: Edges that mirror another record and change only with it, never by a link, unlink or undo of their own.
DERIVED_EDGES = {
    # An edge unlinked alone would leave the relation in the entity graph and gone from the graph, and a
    # relation set again at the same weight would write nothing to bring it back.
    RELATION_EDGE_PREFIX: "edges mirror entity relations: set or remove the relation itself",
    # Removed alone, they would leave an archived memory with no trace of what replaced it.
    MERGED_EDGE_PREFIX: "edges record merges: revert the merge's correlation to take one back",
    SUPERSEDED_EDGE_PREFIX: "edges record supersedes: revert the supersede's correlation to take one back",
}


def not_derived(value: str, field: str) -> None:
    """Refuse an edge id or prefix under one of :data:`DERIVED_EDGES`."""
    for prefix, why in DERIVED_EDGES.items():
        if value.startswith(prefix):
            raise ValidationError(field, f"{prefix} {why}")


def check_edge(edge: c.EdgeRecord) -> None:
    if not EDGE_ID_RE.fullmatch(edge.edge_id) or len(edge.edge_id) > 255:
        raise ValidationError("edge_id", "must be namespaced as <namespace>:<run-or-source>:<n>, e.g. user:notes:1")
    if not EDGE_TYPE_RE.fullmatch(edge.edge_type):
        raise ValidationError("edge_type", "must be UPPER_SNAKE_CASE, e.g. RELATED or MENTIONS")
    if not isinstance(edge.weight, (int, float)) or not math.isfinite(edge.weight) or not 0.0 <= edge.weight <= 1.0:
        raise ValidationError("weight", "must be a number between 0 and 1")
    if edge.source == edge.target:
        raise ValidationError("target", "an edge cannot start and end at the same node")


def fold(edges: Iterable[c.EdgeRecord]) -> list[c.EdgeRecord]:
    """``edges`` with one edge per (source, target, type), none from a node to itself, in the order their keys come.

    A merge brings the edges of several memories onto one node, where two of
    them may join the same pair of nodes with the same type. Of those the
    heaviest stays (the first of equals), with its id, weight and
    properties: the larger weight wins, as a walk takes the strongest path
    and a document's mention the best of its chunks'. The others' ids (and
    those folded into them before) go to its ``merged_from``; their own
    records stay in the event that folds them, so a revert links them back.
    """
    groups: dict[tuple[str, str, str], list[c.EdgeRecord]] = {}
    for edge in edges:
        if edge.source != edge.target:
            groups.setdefault((edge.source, edge.target, edge.edge_type), []).append(edge)
    out = []
    for group in groups.values():
        kept = max(group, key=lambda e: e.weight)
        folded = [edge_id for e in group if e is not kept for edge_id in (e.edge_id, *e.merged_from)]
        if folded:
            kept = msgspec.structs.replace(kept, merged_from=tuple(dict.fromkeys((*kept.merged_from, *folded))))
        out.append(kept)
    return out


def _digest(text: str) -> str:
    return sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class EdgeCommands:
    def __init__(self, store: EventStore, facts: GraphFacts):
        self.store = store
        self.facts = facts

    def link(
        self,
        ctx: CommandContext,
        source: str,
        target: str,
        edge_type: str,
        *,
        weight: float = 1.0,
        edge_id: str | None = None,
        properties: dict | None = None,
    ) -> CommandResult:
        if not edge_id:
            edge_id = self._default_edge_id(ctx)
        edge = c.EdgeRecord(
            edge_id=edge_id,
            edge_type=edge_type,
            source=source,
            target=target,
            weight=float(weight) if isinstance(weight, (int, float)) and not isinstance(weight, bool) else weight,
            properties=properties or {},
        )
        return self.link_many(ctx, [edge])

    def _default_edge_id(self, ctx: CommandContext) -> str:
        """``user:<run>:<n>`` for a link that names no id.

        A retry under the same idempotency key must name the same edge, whatever its correlation: the
        key's digest is the run. Without a key the run is the correlation (its digest when it is no id's
        run, holding whitespace), and ``n`` the first number no live edge of the run holds, so that
        every link of one correlation gets its own id.
        """
        key = ctx.scoped_key("link")
        if key:
            return f"user:{_digest(key)}:1"
        run = ctx.correlation_id
        if not EDGE_ID_RE.fullmatch(f"user:{run}:1") or len(run) > 200:
            run = _digest(run)
        taken = {e.edge_id for e in self.facts.live_edges_with_prefix(ctx.tenant, f"user:{run}:")}
        n = 1
        while f"user:{run}:{n}" in taken:
            n += 1
        return f"user:{run}:{n}"

    def link_many(self, ctx: CommandContext, edges: list[c.EdgeRecord]) -> CommandResult:
        """Link edges atomically; every endpoint must exist and every id be new among live edges."""
        if not edges:
            raise ValidationError("edges", "at least one edge is needed")
        for edge in edges:
            check_edge(edge)
            not_derived(edge.edge_id, "edge_id")
        if (done := replayed(self.store, ctx, "link", edges)) is not None:
            return done
        seen: set[str] = set()
        for edge in edges:
            if edge.edge_id in seen:
                raise ValidationError("edge_id", f"{edge.edge_id!r} appears twice")
            seen.add(edge.edge_id)
            ends = (("source", edge.source), ("target", edge.target))
            for field, node in ends:
                if not self.facts.node_exists(ctx.tenant, node):
                    raise NotFound("node", node)
            for field, node in ends:
                if self.facts.memory_status(ctx.tenant, node) == Status.DELETED.value:  # gone from every read: the edge would dangle
                    raise Conflict(f"memory {node} is deleted; restore it before linking it", field=field)
            if self.facts.live_edge(ctx.tenant, edge.edge_id) is not None:
                raise Conflict(f"edge {edge.edge_id!r} already exists; unlink it first")
        events = [c.EdgeLinked(edge=e) for e in edges]
        return commit(
            self.store,
            ctx,
            "link",
            [StreamAppend(c.edges_stream(ctx.tenant), events)],
            request=edges,
            data={"edge_ids": [e.edge_id for e in edges]},
        )

    def unlink(self, ctx: CommandContext, edge_id: str, *, reason: str = "") -> CommandResult:
        not_derived(edge_id, "edge_id")
        if (done := replayed(self.store, ctx, "unlink", [edge_id, reason])) is not None:
            return done
        edge = self.facts.live_edge(ctx.tenant, edge_id)
        if edge is None:
            raise NotFound("edge", edge_id)
        return commit(
            self.store,
            ctx,
            "unlink",
            [StreamAppend(c.edges_stream(ctx.tenant), [c.EdgeUnlinked(edge=edge, reason=reason)])],
            request=[edge_id, reason],
            data={"edge_ids": [edge_id]},
        )

    def live_edges_under(self, tenant: str, prefix: str) -> list[c.EdgeRecord]:
        """The live edges whose ids are under ``prefix`` (see :func:`under`)."""
        return [e for e in self.facts.live_edges_with_prefix(tenant, prefix) if under(prefix, e.edge_id)]

    def undo_namespace(self, ctx: CommandContext, prefix: str, *, reason: str = "") -> CommandResult:
        """Remove every live edge under ``prefix`` (a namespace, a run, whole segments: see :func:`under`), in one event."""
        if not isinstance(prefix, str) or not NAMESPACE_RE.fullmatch(prefix):
            raise ValidationError("prefix", "must start with a namespace and a colon, e.g. mention: or mention:run-7:")
        not_derived(prefix, "prefix")
        if (done := replayed(self.store, ctx, "undo-namespace", [prefix, reason])) is not None:
            return done
        edges = self.live_edges_under(ctx.tenant, prefix)
        if not edges:
            return nothing_done(ctx, removed=0, prefix=prefix)
        event = c.NamespaceUndone(prefix=prefix, edges=tuple(edges), reason=reason)
        result = commit(
            self.store,
            ctx,
            "undo-namespace",
            [StreamAppend(c.edges_stream(ctx.tenant), [event])],
            request=[prefix, reason],
        )
        result.data.update(removed=len(edges), prefix=prefix)
        return result


# -- a deleted memory's edges ---------------------------------------------------------------------
#
# A deleted memory is gone from every read, so its edges go with it: the delete removes them in one
# ``NamespaceUndone`` (reason ``memory <id> deleted``), written right after the memory's event, and its
# restore links back those whose other end is still there (``NamespaceRestored``), with the same ids,
# types, weights and properties. Its mentions are not among them: they follow its text (see .mentions).


def _deleted_reason(memory_id: str) -> str:
    return f"memory {memory_id} deleted"


def detached(facts: GraphFacts, tenant: str, memory_id: str, keep: Callable[[c.EdgeRecord], bool]) -> list:
    """The event that takes the memory's live edges (but those ``keep`` says) out of the graph with its delete."""
    edges = tuple(e for e in facts.live_edges_of(tenant, [memory_id]) if not keep(e))
    return [c.NamespaceUndone(prefix="", edges=edges, reason=_deleted_reason(memory_id))] if edges else []


def reattached(store: EventStore, facts: GraphFacts, tenant: str, memory_id: str, deleted_at: int, skip: Callable[[c.EdgeRecord], bool]) -> list:
    """The events that link back the edges the memory's delete (its event at ``deleted_at``) took out:
    those not linked again since, whose other end is still a node and no deleted memory (but those ``skip`` says),
    an other end merged away since moved to the memory it was merged into (see :func:`following_merges`)."""
    found = store.read_all(after=deleted_at, until=deleted_at + 1, tenant=tenant, types=["NamespaceUndone"])
    if not found or found[0].event.reason != _deleted_reason(memory_id):
        return []
    edges = []
    reverted = links_reverted_since(store, tenant, deleted_at)
    for edge in found[0].event.edges:
        other = edge.target if edge.source == memory_id else edge.source
        if skip(edge) or edge.edge_id in reverted or facts.live_edge(tenant, edge.edge_id) is not None or not facts.node_exists(tenant, other):
            continue
        if facts.memory_status(tenant, other) == Status.DELETED.value:
            continue
        edges.append(edge)
    edges, folds = following_merges(facts, tenant, edges, settled={memory_id}, since=deleted_at)
    return ([c.NamespaceRestored(prefix="", edges=tuple(edges), undo_position=found[0].position)] if edges else []) + folds


def links_reverted_since(store: EventStore, tenant: str, since: int) -> set[str]:
    """The ids of the edges linked before ``since`` by correlations a revert after it undid (and no later revert
    redid): a forced revert that found such an edge taken out with a deleted memory could not unlink it, and the
    memory's restore must not link it back (it did, and a revert of that correlation again did nothing)."""
    markers = store.read_all(tenant=tenant, types=["CorrelationReverted"])
    found: set[str] = set()
    for correlation_id in {m.event.correlation_id for m in markers if m.position > since}:
        if len(revert_chain(markers, correlation_id)) % 2:
            for r in store.read_all(tenant=tenant, correlation_id=correlation_id, until=since):
                if isinstance(r.event, c.EdgeEvent.__args__):
                    found.update(edge.edge_id for edge in c.edge_changes(r.event)[1])
    return found


# -- edges linked back to a memory merged away since ------------------------------------------------
#
# A merge moves the edges of its sources to the merged memory. An edge that was not live then (unlinked,
# undone, or taken out with a deleted memory) and is linked back later, by a revert or a restore, would end
# at a source, archived: it follows the merge instead, as the merge would have moved it.


def following_merges(
    facts: GraphFacts,
    tenant: str,
    edges: Sequence[c.EdgeRecord],
    *,
    settled: Collection[str] = (),
    unlinking: Collection[str] = (),
    ended: Callable[[c.EdgeRecord], bool] = lambda edge: False,
    since: int = 0,
) -> tuple[list[c.EdgeRecord], list]:
    """``edges`` to link back, each end that a merge archived since (but those in ``settled``, whose status the
    caller's batch sets) moved to the memory it was merged into: the edges to link, and the events that fold
    some of them into the live edges of the same pair and type (see :func:`fold`; ``unlinking``: the ids of
    live edges the caller's batch unlinks, which take no fold). An edge whose two ends were merged into one
    memory is left out, and so is one the merge would have ended rather than moved (``ended``: a source's
    mentions, which its text made)."""
    found: dict[str, str] = {}

    def now(node: str) -> str:
        if node in settled:
            return node
        if node not in found:
            found[node] = _merged_into(facts, tenant, node, since, unlinking)
        return found[node]

    moved: dict[tuple[str, str, str], list[c.EdgeRecord]] = {}
    merged: dict[tuple[str, str, str], str] = {}  # the memory each key's edges follow (either end)
    for edge in edges:
        source, target = now(edge.source), now(edge.target)
        if (source, target) != (edge.source, edge.target) and not ended(edge):
            key = (source, target, edge.edge_type)
            moved.setdefault(key, []).append(msgspec.structs.replace(edge, source=source, target=target))
            merged.setdefault(key, source if source != edge.source else target)
    plain = [e for e in edges if (e.source, e.target) == (now(e.source), now(e.target)) and (e.source, e.target, e.edge_type) not in moved]
    if not moved:
        return plain, []
    link, folds = [], []
    for (source, target, edge_type), group in moved.items():
        if source == target:
            continue
        same = [e for e in edges if (e.source, e.target, e.edge_type) == (source, target, edge_type)]  # linked back as they are
        live = [e for e in facts.live_edges_of(tenant, [source]) if (e.target, e.edge_type) == (target, edge_type) and e.edge_id not in unlinking]
        [kept] = fold([*live, *same, *group])
        if live:
            folds.append(c.EdgesRepointed(previous=tuple(live), current=(kept,), merged_into=merged[(source, target, edge_type)]))
        else:
            link.append(kept)
    return plain + link, folds


def _merged_into(facts: GraphFacts, tenant: str, node: str, since: int, unlinking: Collection[str] = ()) -> str:
    """The memory ``node`` was merged into after position ``since``, through merges of merges (their live
    ``MERGED_TO`` edges), or ``node``. A merge before ``since`` was already made when the edge was live with this
    end: the edge was linked to the archived memory as it is (a merge would have moved it), and stays so. A merge
    whose ``MERGED_TO`` edge the caller's batch unlinks (``unlinking``) is not followed: a revert that redoes a
    merge of a merge undoes the first merge's re-pointing, and followed, it moved the edges onto the middle one."""
    seen = {node}
    while facts.memory_status(tenant, node) == Status.ARCHIVED.value:
        merge = facts.merged_into(tenant, node)
        if merge is None or merge[1] <= since or merge[0] in seen:
            break
        if unlinking and any(e.edge_id in unlinking for e in facts.live_edges_of(tenant, [node]) if e.source == node and e.edge_id.startswith(MERGED_EDGE_PREFIX)):
            break
        node = merge[0]
        seen.add(node)
    return node
