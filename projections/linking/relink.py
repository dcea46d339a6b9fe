"""The entity linker wired to the stored graph: mention edges, relink runs, document links, relation cards.

Mention edges
    Every match of :class:`mnemolog.projections.linking.linker.AliasCatalogue` becomes a
    ``MENTIONS`` edge ``mention:<run>:<n>``: chunk -> entity (weight = the
    mention's confidence; properties ``alias``, ``occurrences``,
    ``confidence``, ``evidence`` = the chunk id) and document -> entity
    (weight = the best confidence in the document; the same properties plus
    ``aliases``, ``evidence`` = the chunk ids). Import links new chunks the
    same way, so a relink finds those edges unchanged.

Relink
    The catalogue is built from the tenant's active entities (names and
    aliases, tags with ``include_tags``); the chunks are its activated
    ``RawFileMemory`` memories. The wanted edges are compared with the live
    mention edges whose source is a chunk or a document, keyed by
    ``(source, target)``: equal edges are kept, the others are added or
    removed. A dry run (the default) reports the diff and the document pairs
    the new edges would newly connect; a committed run is one batch (see
    :meth:`mnemolog.eventstore.commands.documents.DocumentCommands.commit_relink`),
    undone exactly by ``undo-namespace mention:<run>:`` or by reverting its
    correlation.

Reads
    :func:`document_links` ranks document pairs by the distinctiveness of the
    entities they share (smoothed IDF over documents, ``ln(1 + N/df)``);
    :func:`relation_cards` gives one-hop relation cards for the entities a
    question names, or ``matched: false``.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, Sequence

import msgspec

from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore import catalogue_graph as g
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.commands.mentions import Linker, with_subjects
from mnemolog.eventstore.ids import new_id
from mnemolog.eventstore.model import MemoryType
from mnemolog.eventstore.settings import setting

from .. import text_caches
from ..entities import projector as ents
from ..graph.projector import EDGE_COLUMNS, edge_from_row
from .linker import AliasCatalogue, LinkChunk, LinkEntity, LinkResult
from ..memory_rows import decode_content, head_clause

if TYPE_CHECKING:
    from ..service import MemoryService

MAX_DF = setting(
    "linker_max_alias_document_frequency",
    0.0,
    "Drop aliases found in more than this share of a relink's chunks (0 = keep every alias).",
    minimum=0,
    maximum=1,
)
_roundtrip = msgspec.json.Decoder(dict)
_encode = msgspec.json.Encoder()


# -- the alias catalogue, cached per tenant -----------------------------------------------------


class CatalogueCache:
    """Alias catalogues keyed by (tenant, options, point in time, last entity change).

    A catalogue built before the tenant's last entity change is never asked
    for again: it is dropped when its successor is held (at a hundred
    thousand entities a catalogue weighs some 60 MB, and each of 32 stale
    ones would stay held until pushed out).
    """

    def __init__(self, size: int = 32):
        self._items: OrderedDict[tuple, tuple[AliasCatalogue, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.size = size
        text_caches.register(self)  # the catalogues hold entity names: a forget of the tenant's key drops them

    def drop_text(self) -> None:
        with self._lock:
            self._items.clear()

    def get(self, conn: sqlite3.Connection, tenant: str, *, include_tags: bool = False, max_df: float | None = None, as_of: int | None = None) -> tuple[AliasCatalogue, int]:
        row = conn.execute("SELECT entities_changed_at FROM kg_tenant_state WHERE tenant = ?", (tenant,)).fetchone()
        key = (tenant, include_tags, max_df, as_of, row[0] if row else 0)
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        entities = [  # an erased entity's name is the erasure's marker: nothing mentions it any more
            LinkEntity(e.id, e.name, tuple(e.aliases), tuple(e.tags), e.created_position)
            for e in ents.active_entities(conn, tenant, as_of=as_of)
            if not e.erased
        ]
        built = (AliasCatalogue.build(entities, include_tags=include_tags, max_alias_document_frequency=max_df), len(entities))
        with self._lock:
            kin = [k for k in self._items if k[:4] == key[:4]]
            if any(k[4] > key[4] for k in kin):  # a newer state is held already: this one is for a late reader only
                return built
            for k in kin:
                del self._items[k]
            self._items[key] = built
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return built

    def warm(self, conn: sqlite3.Connection, tenants: int = 4) -> list[str]:
        """Build now the head catalogues of the ``tenants`` tenants whose entities changed last (a
        server calls it at start, beside its first requests): otherwise the first write or recall
        of each tenant in each server process builds it (about 80 ms for 1,000 entities). The tenants warmed."""
        try:
            found = conn.execute("SELECT tenant FROM kg_tenant_state ORDER BY entities_changed_at DESC LIMIT ?", (tenants,)).fetchall()
        except sqlite3.OperationalError:  # the entity projection is not part of this service
            return []
        for (tenant,) in found:
            self.get(conn, tenant)
        return [tenant for (tenant,) in found]


def mention_edges(result: LinkResult, run_id: str, *, first: int = 1) -> list[c.EdgeRecord]:
    """The edges of a link result, numbered ``mention:<run_id>:<n>`` from ``first``, in result order."""
    edges: list[c.EdgeRecord] = []
    best: dict[tuple[str, str], tuple[float, str]] = {}
    for m in result.mentions:
        props = {"alias": m.alias, "occurrences": m.occurrences, "confidence": m.confidence, "evidence": [m.chunk_id]}
        edges.append(_edge(m.chunk_id, m.entity_id, m.confidence, props))
        if m.document_id is not None:
            key = (m.document_id, m.entity_id)
            if key not in best or (-m.confidence, m.alias) < (-best[key][0], best[key][1]):
                best[key] = (m.confidence, m.alias)
    for d in result.document_mentions:
        confidence, alias = best[(d.document_id, d.entity_id)]
        props = {"alias": alias, "aliases": list(d.aliases), "occurrences": d.occurrences, "confidence": confidence, "evidence": list(d.evidence_chunk_ids)}
        edges.append(_edge(d.document_id, d.entity_id, confidence, props))
    return [msgspec.structs.replace(e, edge_id=f"{g.MENTION_EDGE_PREFIX}{run_id}:{n}") for n, e in enumerate(edges, first)]


def _edge(source: str, target: str, weight: float, props: dict[str, Any]) -> c.EdgeRecord:
    return c.EdgeRecord(edge_id="", edge_type=g.MENTIONS, source=source, target=target, weight=weight, properties=props)


def _same(a: c.EdgeRecord, b: c.EdgeRecord) -> bool:
    return a.weight == b.weight and a.subject == b.subject and _roundtrip.decode(_encode.encode(a.properties)) == _roundtrip.decode(_encode.encode(b.properties))


def command_linker(connect: Callable[[], sqlite3.Connection], cache: CatalogueCache) -> Linker:
    """The linker the commands call: the current catalogue over new chunks (document import) or memory texts (``doc_node`` None).

    One pass of the catalogue's automaton over the batch; a tenant with no
    entity pays one cached lookup.
    """

    def link(tenant: str, doc_node: str | None, run_id: str, chunks: Sequence[tuple[str, str]]) -> list[c.EdgeRecord]:
        catalogue, _ = cache.get(connect(), tenant)
        if not len(catalogue):
            return []
        return mention_edges(catalogue.link(LinkChunk(cid, doc_node, text) for cid, text in chunks), run_id)

    return link


# -- relink ---------------------------------------------------------------------------------------------


#: ``progress(step, count)``: a relink's steps (``read`` texts, ``linked`` mentions, ``compared`` changes, ``committed`` events).
Progress = Callable[[str, int], None]


class RelinkPlan(msgspec.Struct, kw_only=True):
    run_id: str
    add: list[c.EdgeRecord]
    remove: list[c.EdgeRecord]
    summary: dict[str, Any]


class StoredTexts(msgspec.Struct, kw_only=True):
    """What a relink links: activated chunks and memories, and the id of every chunk and memory it owns the mentions of."""

    chunks: list[LinkChunk]
    memories: list[LinkChunk]
    chunk_ids: set[str]
    memory_ids: set[str]
    erased_documents: set[str] = set()  # the nodes of documents a forget erased: their mentions stay as they are
    subjects: dict[str, str] = {}  # memory id -> its subject, for those that name one: the key of their mentions' aliases


def stored_texts(conn: sqlite3.Connection, tenant: str) -> StoredTexts:
    """The tenant's activated chunks (with their document when it exists) and memories (topics aside), in one scan.

    Memories a forget erased are left out altogether: their text is the erasure's marker, which mentions
    nothing, and the mentions their real text made stay as they are (their aliases erased)."""
    documents = ents.list_documents(conn, tenant)
    docs = {d.node for d in documents}
    erased = {d.node for d in documents if d.erased}
    out = StoredTexts(chunks=[], memories=[], chunk_ids=set(), memory_ids=set(), erased_documents=erased, subjects={})
    rows = conn.execute(
        "SELECT memory_id, status, memory_type, content FROM graph_memories WHERE tenant = ? AND valid_to IS NULL AND memory_type != ?"
        " ORDER BY memory_id",
        (tenant, MemoryType.TOPIC.value),
    )
    for memory_id, status, memory_type, content in rows:
        body = decode_content(content)
        if body.erased:
            continue
        chunk = memory_type == MemoryType.RAW_FILE.value
        (out.chunk_ids if chunk else out.memory_ids).add(memory_id)
        if status != "activated":
            continue
        if body.subject:
            out.subjects[memory_id] = body.subject
        if chunk:
            node = g.document_node(body.doc_id) if body.doc_id else None
            out.chunks.append(LinkChunk(memory_id, node if node in docs else None, body.memory))
        else:
            out.memories.append(LinkChunk(memory_id, None, body.memory))
    return out


def live_mentions(conn: sqlite3.Connection, tenant: str, *, as_of: int | None = None) -> list[c.EdgeRecord]:
    valid, params = head_clause(as_of)
    rows = conn.execute(
        f"SELECT {EDGE_COLUMNS} FROM graph_edges"
        " WHERE tenant = ? AND edge_id >= ? AND edge_id < ?"
        f" AND edge_type = ? AND {valid} ORDER BY row_id",
        (tenant, g.MENTION_EDGE_PREFIX, g.MENTION_EDGE_PREFIX[:-1] + ";", g.MENTIONS, *params),
    )
    return [edge_from_row(r) for r in rows]


def plan_relink(
    conn: sqlite3.Connection,
    tenant: str,
    cache: CatalogueCache,
    *,
    include_tags: bool = False,
    max_df: float | None = None,
    preview: int = 20,
    progress: Progress | None = None,
) -> RelinkPlan:
    """The diff between the live mention edges of chunks, documents and memories and what the catalogue finds now.

    One scan of the stored texts, one linker pass over the chunks and one
    over the memories (each with its own alias frequency limit), one read of
    the live mention edges: no query per memory. ``progress(step, count)``
    hears about each step.
    """
    report = progress or (lambda step, count: None)
    catalogue, n_entities = cache.get(conn, tenant, include_tags=include_tags, max_df=max_df)
    texts = stored_texts(conn, tenant)
    report("read", len(texts.chunks) + len(texts.memories))
    chunk_result = catalogue.link(texts.chunks)
    memory_result = catalogue.link(texts.memories)
    report("linked", len(chunk_result.mentions) + len(memory_result.mentions))
    run_id = new_id()
    wanted = with_subjects(mention_edges(chunk_result, run_id) + mention_edges(memory_result, run_id), texts.subjects)
    owned_ids = texts.chunk_ids | texts.memory_ids
    owned = [
        e for e in live_mentions(conn, tenant)
        if e.source in owned_ids or (e.source.startswith(g.DOCUMENT_NODE_PREFIX) and e.source not in texts.erased_documents)
    ]
    live: dict[tuple[str, str], c.EdgeRecord] = {}
    remove: list[c.EdgeRecord] = []
    for edge in owned:
        if (edge.source, edge.target) in live:
            remove.append(edge)  # a duplicate: one mention per pair is kept
        else:
            live[(edge.source, edge.target)] = edge
    add: list[c.EdgeRecord] = []
    kept_edges: list[c.EdgeRecord] = []
    for edge in wanted:
        current = live.pop((edge.source, edge.target), None)
        if current is not None and _same(current, edge):
            kept_edges.append(edge)
            continue
        add.append(edge)
        if current is not None:
            remove.append(current)
    remove.extend(live.values())
    kept = len(kept_edges)
    report("compared", len(add) + len(remove))
    ids = texts.memory_ids
    memories = {"add": _from(add, ids), "remove": _from(remove, ids), "kept": _from(kept_edges, ids)}
    chunks = {"add": len(add) - memories["add"], "remove": len(remove) - memories["remove"], "kept": kept - memories["kept"]}  # documents' edges too
    by_kind = {"chunks": chunks, "memories": memories}
    add = [msgspec.structs.replace(e, edge_id=f"{g.MENTION_EDGE_PREFIX}{run_id}:{n}") for n, e in enumerate(add, 1)]
    before = _doc_entities(e for e in owned if e.source.startswith(g.DOCUMENT_NODE_PREFIX))
    after = _doc_entities(e for e in wanted if e.source.startswith(g.DOCUMENT_NODE_PREFIX))
    pairs, pair_count, new_pairs = _new_pairs(before, after, preview)
    summary = {
        "run_id": run_id,
        "prefix": f"{g.MENTION_EDGE_PREFIX}{run_id}:",
        "chunks": len(texts.chunks),
        "memories": len(texts.memories),
        "entities": n_entities,
        "catalogue_size": len(catalogue),
        "include_tags": include_tags,
        "max_alias_document_frequency": max_df,
        "mentions": len(chunk_result.mentions) + len(memory_result.mentions),
        "memory_mentions": len(memory_result.mentions),
        "document_mentions": len(chunk_result.document_mentions),
        "add": len(add),
        "remove": len(remove),
        "kept": kept,
        "by_kind": by_kind,
        "added_preview": [_show(e) for e in add[:preview]],
        "removed_preview": [_show(e) for e in remove[:preview]],
        "cross_document_pairs": pairs,
        "cross_document_pair_count": pair_count,
        "new_document_pair_count": new_pairs,
        "dropped_aliases": [msgspec.to_builtins(d) for d in chunk_result.dropped_aliases],
        "memory_dropped_aliases": [msgspec.to_builtins(d) for d in memory_result.dropped_aliases],
        "ambiguous_aliases": len(catalogue.ambiguous),
        "rejected_surfaces": len(catalogue.rejected),
    }
    return RelinkPlan(run_id=run_id, add=add, remove=remove, summary=summary)


def _from(edges: list[c.EdgeRecord], sources: set[str]) -> int:
    return sum(1 for e in edges if e.source in sources)


def _show(edge: c.EdgeRecord) -> dict[str, Any]:
    return {"edge_id": edge.edge_id, "source": edge.source, "target": edge.target, "weight": edge.weight, "alias": edge.properties.get("alias")}


def _doc_entities(edges) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for e in edges:
        out.setdefault(e.target, set()).add(e.source)
    return out


def _new_pairs(before: dict[str, set[str]], after: dict[str, set[str]], preview: int, cap: int = 200) -> tuple[list[dict], int, int]:
    """Document pairs that would share entities they did not share before (entities in more than ``cap`` documents skipped)."""
    gained: dict[tuple[str, str], list[str]] = {}
    for entity, docs in after.items():
        fresh = docs - before.get(entity, set())
        if not fresh or len(docs) > cap:
            continue
        for d in fresh:
            for other in docs:
                if other != d:
                    pair = (min(d, other), max(d, other))
                    if entity not in gained.setdefault(pair, []):
                        gained[pair].append(entity)
    shared_before = {}
    for pair in gained:
        a, b = pair
        shared_before[pair] = any(a in docs and b in docs for docs in before.values())
    ranked = sorted(gained.items(), key=lambda kv: (shared_before[kv[0]], -len(kv[1]), kv[0]))
    rows = [
        {"documents": [p[len(g.DOCUMENT_NODE_PREFIX) :] for p in pair], "new_shared_entities": sorted(found), "new_pair": not shared_before[pair]}
        for pair, found in ranked[:preview]
    ]
    return rows, len(gained), sum(1 for p in gained if not shared_before[p])


# -- reads ---------------------------------------------------------------------------------------------------


def document_links(
    conn: sqlite3.Connection,
    tenant: str,
    *,
    doc_id: str | None = None,
    collection: str | None = None,
    min_shared: int = 1,
    limit: int = 20,
    max_entity_documents: int = 200,
    as_of: int | None = None,
) -> dict[str, Any]:
    """Document pairs sharing entities, ranked by the summed IDF of the shared entities."""
    docs = {d.node: d for d in ents.list_documents(conn, tenant, collection=collection, as_of=as_of)}
    by_entity: dict[str, dict[str, list[str]]] = {}
    for edge in live_mentions(conn, tenant, as_of=as_of):
        if edge.source in docs:
            by_entity.setdefault(edge.target, {})[edge.source] = list(edge.properties.get("evidence", []))
    n = max(len(docs), 1)
    pairs: dict[tuple[str, str], list[tuple[str, float]]] = {}
    focus = g.document_node(doc_id) if doc_id else None
    for entity, holders in by_entity.items():
        if len(holders) < 2 or len(holders) > max_entity_documents:
            continue
        idf = math.log(1 + n / len(holders))
        members = sorted(holders)
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                if focus is None or focus in (a, b):
                    pairs.setdefault((a, b), []).append((entity, idf))
    names = {e: v.name for e, v in ents.get_entities(conn, tenant, {e for found in pairs.values() for e, _ in found}, as_of=as_of).items()}
    ranked = sorted(
        ((pair, found) for pair, found in pairs.items() if len(found) >= min_shared),
        key=lambda kv: (-sum(w for _, w in kv[1]), kv[0]),
    )
    out = []
    for (a, b), found in ranked[:limit]:
        found.sort(key=lambda ew: (-ew[1], ew[0]))
        out.append(
            {
                "documents": [docs[a].doc_id, docs[b].doc_id],
                "titles": [docs[a].title, docs[b].title],
                "score": round(sum(w for _, w in found), 6),
                "shared": [
                    {"entity_id": e, "name": names.get(e, ""), "idf": round(w, 6), "evidence": {docs[a].doc_id: by_entity[e][a], docs[b].doc_id: by_entity[e][b]}}
                    for e, w in found
                ],
            }
        )
    return {"documents": len(docs), "pairs": out}


def named_entities(conn: sqlite3.Connection, tenant: str, text: str, cache: CatalogueCache, *, as_of: int | None = None) -> dict[str, str]:
    """The entities ``text`` names, in text order, each with the first surface that named it.

    The same deterministic linker as document import (the tenant's alias
    catalogue as of ``as_of``): relation cards and recall both start here.
    """
    try:
        catalogue, _ = cache.get(conn, tenant, as_of=as_of)
    except sqlite3.OperationalError:  # the entity projection is not part of this service
        return {}
    named: dict[str, str] = {}
    for entity_id, alias, _, _ in catalogue.query_entities(text):
        named.setdefault(entity_id, alias)
    return named


def relation_rows(conn: sqlite3.Connection, tenant: str, entity_id: str, *, as_of: int | None = None, limit: int = 25) -> list[dict[str, Any]]:
    """An entity's relations, strongest first: direction, type, the entity at the other end (id and name), weight."""
    relations = ents.relations_of(conn, tenant, entity_id, direction="both", as_of=as_of)
    others = ents.get_entities(conn, tenant, [r.target_id if r.source_id == entity_id else r.source_id for r in relations], as_of=as_of)
    rows = []
    for r in sorted(relations, key=lambda r: (-r.weight, r.relation_type, r.source_id, r.target_id))[:limit]:
        outgoing = r.source_id == entity_id
        other = r.target_id if outgoing else r.source_id
        rows.append(
            {"direction": "out" if outgoing else "in", "relation_type": r.relation_type, "entity_id": other,
             "name": others[other].name if other in others else "", "weight": r.weight}
        )
    return rows


def relation_cards(conn: sqlite3.Connection, tenant: str, question: str, cache: CatalogueCache, *, as_of: int | None = None, limit: int = 10, max_relations: int = 25) -> dict[str, Any]:
    """One-hop relation cards for the entities ``question`` names; ``matched: false`` when it names none."""
    named = dict(list(named_entities(conn, tenant, question, cache, as_of=as_of).items())[:limit])
    found = ents.get_entities(conn, tenant, list(named), as_of=as_of)
    cards = [
        {"entity": msgspec.to_builtins(ents.entity_card(found[entity_id])), "matched_alias": alias,
         "relations": relation_rows(conn, tenant, entity_id, as_of=as_of, limit=max_relations)}
        for entity_id, alias in named.items()
        if entity_id in found
    ]
    return {"matched": bool(cards), "question": question, "cards": cards}


# -- wiring ---------------------------------------------------------------------------------------------------


class Linking:
    """The entity linker bound to one service: relink runs, document links, relation cards.

    It owns the service's alias catalogues (:attr:`catalogues`), which the
    import linker, relation cards and recall share.
    """

    def __init__(self, service: MemoryService):
        self.service = service
        self.catalogues = CatalogueCache()

    def relink(
        self,
        ctx: CommandContext,
        *,
        commit: bool = False,
        include_tags: bool = False,
        max_alias_document_frequency: float | None = None,
        preview: int = 20,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """Plan a relink of ``ctx.tenant`` (chunks, documents and memories) and, with ``commit``, append it (planned again as the single writer)."""
        service = self.service
        if max_alias_document_frequency is None:
            max_alias_document_frequency = float(service.settings.linker_max_alias_document_frequency) or None
        options = {"include_tags": include_tags, "max_df": max_alias_document_frequency, "preview": preview, "progress": progress}
        if not commit:
            service.sync()
            plan = plan_relink(service.read_conn(), ctx.tenant, self.catalogues, **options)
            return {"dry_run": True, "committed": False, **{k: v for k, v in plan.summary.items() if k not in ("run_id", "prefix")}}

        def run() -> Any:
            plan = plan_relink(service.read_conn(), ctx.tenant, self.catalogues, **options)
            result = service.documents.commit_relink(ctx, run_id=plan.run_id, add=plan.add, remove=plan.remove, summary=plan.summary)
            if progress is not None:
                progress("committed", len(result.positions))
            return plan, result

        plan, result = service.run(run)
        report = {"dry_run": False, **plan.summary, **result.data, "correlation_id": result.correlation_id, "positions": list(result.positions), "replayed": result.replayed}
        if result.replayed and result.data.get("committed"):  # a retry: the first run's figures, not the new plan's
            report.update(add=result.data["added"], remove=result.data["removed"], added_preview=[], removed_preview=[], cross_document_pairs=[])
        if not result.data.get("committed"):
            report.pop("run_id", None)
            report.pop("prefix", None)
        return report

    def document_links(
        self,
        tenant: str,
        *,
        doc_id: str | None = None,
        collection: str | None = None,
        min_shared: int = 1,
        limit: int = 20,
        max_entity_documents: int = 200,
        as_of: Any = None,
    ) -> dict[str, Any]:
        """:func:`document_links` over the service's projections; ``as_of`` is a position or a time."""
        return document_links(
            self.service.read_conn(), tenant, doc_id=doc_id, collection=collection, min_shared=min_shared, limit=limit,
            max_entity_documents=max_entity_documents, as_of=self.service.resolve_as_of(as_of),
        )

    def relation_cards(self, tenant: str, question: str, *, as_of: Any = None, limit: int = 10, max_relations: int = 25) -> dict[str, Any]:
        """:func:`relation_cards` over the service's projections; ``as_of`` is a position or a time."""
        return relation_cards(
            self.service.read_conn(), tenant, question, self.catalogues, as_of=self.service.resolve_as_of(as_of), limit=limit, max_relations=max_relations
        )

    def memory_mentions(self, tenant: str, items: Sequence[tuple[str, str]], run_id: str) -> list[c.EdgeRecord]:
        """The ``MENTIONS`` edges (item -> entity, ``mention:<run_id>:<n>``) the linker finds in ``(memory_id, text)`` items, unwritten."""
        catalogue, _ = self.catalogues.get(self.service.read_conn(), tenant)
        if not len(catalogue):
            return []
        return mention_edges(catalogue.link(LinkChunk(memory_id, None, text) for memory_id, text in items), run_id)

    def live_mentions(self, tenant: str, *, as_of: Any = None) -> list[c.EdgeRecord]:
        """:func:`live_mentions` over the service's projections."""
        return live_mentions(self.service.read_conn(), tenant, as_of=self.service.resolve_as_of(as_of))
