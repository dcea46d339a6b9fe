"""Document commands: import a parsed document; commit and undo entity-linker runs.

Import
    One document version is ONE atomic batch: a ``MemoryAdded`` per chunk
    (``RawFileMemory``, ``origin="import"``, on the chunk's own memory
    stream), ``MemoryArchived`` for the previous version's chunks (never
    deleted), ``DocumentImported`` on ``document-<tenant>/<doc_id>``, and the
    ``MENTIONS`` edges of the new chunks (the old chunks' mention edges are
    unlinked). Re-importing content with the same hash writes nothing, unless
    the current version's chunks are no longer active or a forget erased it. The current version is
    folded from the document's stream, so a revert (``DocumentRolledBack``,
    ``DocumentRemoved``) brings it back; version numbers are never used twice
    (the next import takes the number after the highest imported).

    Chunk content: the text; ``collection``, ``doc_type`` (the caller's, else
    the file format), ``doc_id``, ``doc_version`` (``"1"``, ``"2"``, …),
    ``lang``, ``source_url``, ``model``; properties ``chunk_index``,
    ``start``, ``end``, ``page`` (PDFs) and ``heading`` (when under one).

    Mentions come from a *linker* the read side injects (the write side never
    imports projections): ``linker(tenant, doc_node, run_id, [(chunk_id,
    text)])`` returns the edges, recorded as facts.

Relink
    :meth:`DocumentCommands.commit_relink` appends a planned run (see
    :mod:`mnemolog.projections.linking.relink`) as one batch: ``RelinkCommitted``, then one
    ``NamespaceUndone`` of the mentions that disappear, then an
    ``EdgeLinked`` per new mention under ``mention:<run_id>:``.
    :class:`LinkAwareEdgeCommands` makes ``undo-namespace mention:<run_id>:``
    exact for such a run: it removes the run's edges and links again the
    edges the run removed (``NamespaceRestored``), in one batch.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

import msgspec

from .. import catalogue as c
from .. import catalogue_graph as g
from ..aggregate import dropped_at, fold
from ..ids import new_id, new_ids
from ..model import Conflict, MemoryContent, MemoryType, Status, ValidationError, validate_content
from ..store import NO_STREAM, EventStore, StreamAppend
from .context import CommandContext, CommandResult, check_key, commit, now_iso, nothing_done, replayed
from .edges import EdgeCommands, check_edge
from .facts import GraphFacts
from .mentions import Linker  # ``linker(tenant, doc_node, run_id, [(chunk_id, text)])`` -> the chunks' mention edges

# A document id is a relative path: ``/``-separated parts of letters, digits and ``. _ -``, each
# starting with a letter or digit (so no ``..``, no absolute path), 255 characters at most.
DOC_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(?:/[A-Za-z0-9][A-Za-z0-9._-]*)*$")
DOC_ID_MAX = 255
RUN_PREFIX_RE = re.compile(r"^mention:([^:\s]+):$")
RAW_FILE = MemoryType.RAW_FILE.value
#: The most characters a document's title and each of its metadata values hold: every chunk carries them (a
#: title of 100,000 characters on a document of 100 chunks wrote 10 MB to the log).
DOCUMENT_FIELD_MAX = {"title": 1000, "collection": 200, "doc_type": 200, "lang": 200, "source_url": 2000, "model": 200}


class Chunk(msgspec.Struct, frozen=True):
    """One piece of a document as the import writes it (cut by the ingestion side)."""

    index: int  # 0-based, across the whole document
    text: str
    page: int | None  # 1-based for PDFs, None otherwise
    start: int  # offsets into the page text
    end: int
    heading: str | None


class DocumentImport(msgspec.Struct, frozen=True, kw_only=True):
    """What an import writes for one document: metadata and its chunks."""

    doc_id: str
    title: str
    content_hash: str
    format: str
    chunks: tuple[Chunk, ...]
    pages: int = 1
    collection: str | None = None
    doc_type: str | None = None
    lang: str | None = None
    source_url: str | None = None
    model: str | None = None
    path: str | None = None
    title_from_text: bool = False  # ``title`` was found in the text (its first heading, the PDF's own), not given



def check_doc_id(doc_id: object, field: str = "doc_id") -> str:
    """``doc_id`` when it is a valid document id, else a :class:`ValidationError` naming ``field``."""
    if not isinstance(doc_id, str) or len(doc_id) > DOC_ID_MAX or not DOC_ID_RE.fullmatch(doc_id):
        raise ValidationError(
            field, f"must be a relative path of at most {DOC_ID_MAX} characters: parts of letters, digits or . _ -, "
            "each starting with a letter or digit, separated by /"
        )
    return doc_id


def check_document_fields(values: Mapping[str, Any], *, names: Mapping[str, str] | None = None) -> None:
    """A :class:`ValidationError` naming the first of ``values`` (a title, the metadata) longer than
    :data:`DOCUMENT_FIELD_MAX` allows; ``names`` gives the field each is called by the caller."""
    for name, limit in DOCUMENT_FIELD_MAX.items():
        value = values.get(name)
        if isinstance(value, str) and len(value) > limit:
            field = (names or {}).get(name, name)
            raise ValidationError(field, f"at most {limit} characters (every chunk of the document carries it), got {len(value)}")


class DocumentState(msgspec.Struct):
    """A document's stream folded (after the tenant's last drop)."""

    current: g.DocumentImported | g.DocumentRolledBack | None = None  # None: never imported, or removed
    stream_version: int = 0  # the stream's last version, for the append's expected version
    highest: int = 0  # the highest version number imported: numbers are never used twice


def load_document(store: EventStore, tenant: str, doc_id: str, *, until_version: int | None = None) -> DocumentState:
    """The document's current version; with ``until_version``, the one its stream held at that version.

    For a tenant whose name holds ``/`` or ``%``, the versions it wrote to the stream it once shared with
    other tenants (:func:`~mnemolog.eventstore.catalogue_graph.shared_document_stream`) come first: its
    versions go on from them (``until_version`` counts in its own stream, written after them).
    """
    own = g.document_stream(tenant, doc_id)
    recorded = store.read_stream(own)
    state = DocumentState(stream_version=recorded[-1].stream_version if recorded else 0)
    shared = g.shared_document_stream(tenant, doc_id)
    if shared is not None:
        recorded = [r for r in store.read_stream(shared) if r.tenant == tenant] + recorded
    floor = dropped_at(store, tenant) if recorded else 0
    for r in recorded:
        if r.position < floor or r.tenant != tenant:
            continue
        if until_version is not None and r.stream_id == own and r.stream_version > until_version:
            break
        event = r.event
        if isinstance(event, g.DocumentImported):
            state.current, state.highest = event, max(state.highest, event.version)
        elif isinstance(event, g.DocumentRolledBack):
            state.current = event
        elif isinstance(event, g.DocumentRemoved):
            state.current = None
    return state


def _chunk_content(doc: DocumentImport, chunk: Chunk, version: int) -> MemoryContent:
    properties: dict[str, Any] = {"chunk_index": chunk.index, "start": chunk.start, "end": chunk.end, "title": doc.title}
    if chunk.page is not None:
        properties["page"] = chunk.page
    if chunk.heading:
        properties["heading"] = chunk.heading
    return validate_content(
        MemoryContent(
            memory=chunk.text,
            memory_type=RAW_FILE,
            collection=doc.collection,
            doc_type=doc.doc_type or doc.format,
            doc_id=doc.doc_id,
            doc_version=str(version),
            lang=doc.lang,
            source_url=doc.source_url,
            model=doc.model,
            properties=properties,
        )
    )


#: The metadata an import may give a document: a value not given (None) keeps the current version's.
KEPT_METADATA = ("collection", "doc_type", "lang", "source_url", "model")


def _as_asked(current: g.DocumentImported | g.DocumentRolledBack | None, doc: DocumentImport) -> DocumentImport:
    """``doc`` with what it leaves unsaid taken from the document's ``current`` version: each metadata value
    not given, and a title found in the text when the text is the same (a title given before stays). Nothing is
    taken from a version a forget erased: its title and source URL read as the erasure's marker."""
    if current is None or current.erased:
        return doc
    kept: dict[str, Any] = {name: getattr(current, name) for name in KEPT_METADATA if getattr(doc, name) is None and getattr(current, name) is not None}
    if doc.title_from_text and current.content_hash == doc.content_hash:
        kept["title"] = current.title
    return msgspec.structs.replace(doc, **kept) if kept else doc


def _unchanged(current: g.DocumentImported | g.DocumentRolledBack, doc: DocumentImport) -> bool:
    """Whether the current version is what ``doc`` (with :func:`_as_asked`) asks for: the same text, title and
    metadata. The path it was read from and the chunking are not asked for: a moved file is unchanged."""
    return current.content_hash == doc.content_hash and all(getattr(current, name) == getattr(doc, name) for name in ("title", *KEPT_METADATA))


class DocumentCommands:
    def __init__(self, store: EventStore, facts: GraphFacts, *, linker: Linker | None = None):
        self.store = store
        self.facts = facts
        self.linker = linker

    def import_document(self, ctx: CommandContext, doc: DocumentImport, *, idempotent_as: Any = None) -> CommandResult:
        """Import one version of ``doc`` (see the module docstring).

        ``idempotent_as`` is what ``ctx``'s idempotency key stands for: ``doc``
        itself by default; for a document of an import of several, the whole
        request (see :meth:`check_retry`), so that the key reused for other
        documents is refused.
        """
        asked = doc if idempotent_as is None else idempotent_as
        check_doc_id(doc.doc_id)
        check_document_fields({name: getattr(doc, name) for name in DOCUMENT_FIELD_MAX})
        if any(chunk.heading is not None and len(chunk.heading) > DOCUMENT_FIELD_MAX["title"] for chunk in doc.chunks):
            raise ValidationError("chunks", f"a chunk's heading holds at most {DOCUMENT_FIELD_MAX['title']} characters")
        if not doc.chunks:
            raise ValidationError("content", "the document has no text to import")
        node = g.document_node(doc.doc_id)
        document = load_document(self.store, ctx.tenant, doc.doc_id)
        latest = document.current
        doc = _as_asked(latest, doc)
        report = {"doc_id": doc.doc_id, "node": node, "title": doc.title}
        if (done := replayed(self.store, ctx, "import-document", asked)) is not None:
            return msgspec.structs.replace(done, data=self._replayed_report(done, report))
        old = self._chunk_states(latest.chunk_ids if latest else ())
        if latest is not None and not latest.erased and _unchanged(latest, doc) and all(s.status == Status.ACTIVATED.value and not (s.content and s.content.erased) for s in old):
            return nothing_done(ctx, status="unchanged", version=latest.version, chunks=0, archived=0, mentions=0, **report)
        version = document.highest + 1
        stamp = now_iso()
        chunk_ids = new_ids(len(doc.chunks))
        writes = [
            StreamAppend(
                c.memory_stream(memory_id),
                [c.MemoryAdded(memory_id=memory_id, content=_chunk_content(doc, chunk, version), created_at=stamp, origin="import")],
                NO_STREAM,
            )
            for memory_id, chunk in zip(chunk_ids, doc.chunks)
        ]
        archived = []
        for state in old:
            if state.status == Status.ACTIVATED.value:
                archived.append(state.memory_id)
                reason = f"replaced by version {version} of document {doc.doc_id}"
                writes.append(
                    StreamAppend(
                        c.memory_stream(state.memory_id),
                        [c.MemoryArchived(memory_id=state.memory_id, updated_at=stamp, reason=reason)],
                        state.version,
                    )
                )
        event = g.DocumentImported(
            doc_id=doc.doc_id,
            version=version,
            title=doc.title,
            content_hash=doc.content_hash,
            chunk_ids=tuple(chunk_ids),
            format=doc.format,
            collection=doc.collection,
            doc_type=doc.doc_type,
            lang=doc.lang,
            source_url=doc.source_url,
            model=doc.model,
            path=doc.path,
            pages=doc.pages,
            archived_chunk_ids=tuple(archived),
        )
        writes.append(StreamAppend(g.document_stream(ctx.tenant, doc.doc_id), [event], document.stream_version or NO_STREAM))
        edge_events: list = []
        replaced = {s.memory_id for s in old} | {node}
        if latest is not None:
            for edge in self.facts.live_edges_of(ctx.tenant, sorted(replaced)):
                if edge.edge_type == g.MENTIONS and edge.source in replaced:
                    edge_events.append(c.EdgeUnlinked(edge=edge, reason=f"document {doc.doc_id} re-imported"))
        run_id = new_id()
        mentions = []
        if self.linker is not None:
            mentions = self.linker(ctx.tenant, node, run_id, [(m, ch.text) for m, ch in zip(chunk_ids, doc.chunks)])
            for edge in mentions:
                check_edge(edge)
            edge_events.extend(c.EdgeLinked(edge=e) for e in mentions)
        if edge_events:
            writes.append(StreamAppend(c.edges_stream(ctx.tenant), edge_events))
        result = commit(self.store, ctx, "import-document", writes, request=asked, memory_ids=chunk_ids)
        data = {"status": "imported", "version": version, "chunks": len(chunk_ids), "archived": len(archived), "mentions": len(mentions), **report}
        if mentions:
            data["mention_prefix"] = f"{g.MENTION_EDGE_PREFIX}{run_id}:"
        return msgspec.structs.replace(result, data={**result.data, **data})

    def check_retry(self, contexts: Sequence[CommandContext], request: Any) -> None:
        """Before an import of several documents writes any: :class:`IdempotencyConflict` when a key of
        ``contexts`` (one per document, as :meth:`import_document` takes them) was used for another request."""
        for ctx in contexts:
            check_key(self.store, ctx, "import-document", request)

    def _replayed_report(self, done: CommandResult, report: dict[str, Any]) -> dict[str, Any]:
        """A retried import's answer, as the first one was: read back from the events that import wrote."""
        info: dict[str, Any] = {"status": "imported", "chunks": len(done.memory_ids), "archived": 0, "mentions": 0, **report}
        for recorded in self.store.read_all(after=done.first_position - 1, until=done.last_position):
            event = recorded.event
            if isinstance(event, g.DocumentImported):
                info.update(version=event.version, chunks=len(event.chunk_ids), archived=len(event.archived_chunk_ids))
            elif isinstance(event, c.EdgeLinked) and event.edge.edge_type == g.MENTIONS:
                info["mentions"] += 1
                info.setdefault("mention_prefix", event.edge.edge_id.rsplit(":", 1)[0] + ":")  # <prefix><run>:<n>
        return info

    def _chunk_states(self, chunk_ids: Sequence[str]):
        states = []
        for memory_id in chunk_ids:
            state = fold(memory_id, self.store.read_stream(c.memory_stream(memory_id)))
            if state is not None:
                states.append(state)
        return states

    # -- relink -------------------------------------------------------------------------

    def commit_relink(
        self,
        ctx: CommandContext,
        *,
        run_id: str,
        add: Sequence[c.EdgeRecord],
        remove: Sequence[c.EdgeRecord],
        summary: dict[str, Any],
    ) -> CommandResult:
        """Append a planned relink run; the plan must still match the live mention edges."""
        prefix = f"{g.MENTION_EDGE_PREFIX}{run_id}:"
        if not RUN_PREFIX_RE.fullmatch(prefix):
            raise ValidationError("run_id", "must not contain ':' or whitespace")
        # A retry under the same idempotency key asks for the same run options, whatever its new plan.
        request = ["relink", bool(summary.get("include_tags", False)), summary.get("max_alias_document_frequency")]
        if (done := replayed(self.store, ctx, "relink", request)) is not None:
            first = self.store.read_all(after=done.first_position - 1, limit=1)
            marker = first[0].event if first and isinstance(first[0].event, g.RelinkCommitted) else None
            if marker is None:
                return done
            data = {"committed": True, "run_id": marker.run_id, "prefix": marker.prefix, "added": marker.added, "removed": marker.removed}
            return msgspec.structs.replace(done, data={**done.data, **data})
        if not add and not remove:
            return nothing_done(ctx, committed=False, run_id=run_id, prefix=prefix, added=0, removed=0)
        live = {e.edge_id: e for e in self.facts.live_edges_with_prefix(ctx.tenant, g.MENTION_EDGE_PREFIX)}
        for edge in remove:
            if live.get(edge.edge_id) != edge:
                raise Conflict(f"edge {edge.edge_id!r} changed since the relink was planned; run it again")
        seen: set[str] = set()
        for edge in add:
            check_edge(edge)
            if not edge.edge_id.startswith(prefix) or edge.edge_type != g.MENTIONS:
                raise ValidationError("edges", f"relink edges are MENTIONS edges under {prefix}")
            if edge.edge_id in seen or edge.edge_id in live:
                raise Conflict(f"edge {edge.edge_id!r} already exists")
            seen.add(edge.edge_id)
        marker = g.RelinkCommitted(
            run_id=run_id,
            prefix=prefix,
            added=len(add),
            removed=len(remove),
            kept=int(summary.get("kept", 0)),
            chunks=int(summary.get("chunks", 0)),
            memories=int(summary.get("memories", 0)),
            catalogue_size=int(summary.get("catalogue_size", 0)),
            entities=int(summary.get("entities", 0)),
            include_tags=bool(summary.get("include_tags", False)),
            max_alias_document_frequency=summary.get("max_alias_document_frequency"),
        )
        events: list = [marker]
        if remove:
            events.append(c.NamespaceUndone(prefix=g.MENTION_EDGE_PREFIX, edges=tuple(remove), reason=f"relink {run_id}: mentions no longer found"))
        events.extend(c.EdgeLinked(edge=e) for e in add)
        result = commit(self.store, ctx, "relink", [StreamAppend(c.edges_stream(ctx.tenant), events)], request=request)
        data = {"committed": True, "run_id": run_id, "prefix": prefix, "added": len(add), "removed": len(remove)}
        return msgspec.structs.replace(result, data={**result.data, **data})


class LinkAwareEdgeCommands(EdgeCommands):
    """Edge commands whose namespace undo of a relink run also restores what the run removed."""

    def undo_namespace(self, ctx: CommandContext, prefix: str, *, reason: str = "") -> CommandResult:
        found = RUN_PREFIX_RE.fullmatch(prefix if prefix.endswith(":") else prefix + ":") if isinstance(prefix, str) else None
        run = self._relink_run(ctx.tenant, found.group(1)) if found else None
        if run is None:
            return super().undo_namespace(ctx, prefix, reason=reason)
        if (done := replayed(self.store, ctx, "undo-namespace", [prefix, reason])) is not None:
            return done
        undone_position, removed_by_run = run
        current = self.live_edges_under(ctx.tenant, prefix)
        leaving = {e.edge_id for e in current}
        occupied = {
            (e.source, e.target)
            for e in self.facts.live_edges_with_prefix(ctx.tenant, g.MENTION_EDGE_PREFIX)
            if e.edge_id not in leaving
        }
        restore, skipped = [], 0
        for edge in removed_by_run:
            if (
                self.facts.live_edge(ctx.tenant, edge.edge_id) is not None
                or (edge.source, edge.target) in occupied
                or not (self.facts.node_exists(ctx.tenant, edge.source) and self.facts.node_exists(ctx.tenant, edge.target))
                or not self._still_said(ctx.tenant, edge)
            ):
                skipped += 1
                continue
            restore.append(edge)
        if not current and not restore:
            return nothing_done(ctx, removed=0, restored=0, skipped=skipped, prefix=prefix)
        events: list = []
        if current:
            events.append(c.NamespaceUndone(prefix=prefix, edges=tuple(current), reason=reason))
        if restore:
            events.append(c.NamespaceRestored(prefix=g.MENTION_EDGE_PREFIX, edges=tuple(restore), undo_position=undone_position))
        result = commit(self.store, ctx, "undo-namespace", [StreamAppend(c.edges_stream(ctx.tenant), events)], request=[prefix, reason])
        result.data.update(removed=len(current), restored=len(restore), skipped=skipped, prefix=prefix)
        return result

    def _still_said(self, tenant: str, edge: c.EdgeRecord) -> bool:
        """Whether the text a removed mention was found in is still current: its memory (a chunk) activated, or for a
        document's mention one of the chunks it names as evidence. A memory archived since (a re-import replaced the
        chunk) has no live mentions, and its document no longer says what the old chunk said."""
        status = self.facts.memory_status(tenant, edge.source)
        if status is not None:
            return status == Status.ACTIVATED.value
        evidence = edge.properties.get("evidence") if edge.source.startswith(g.DOCUMENT_NODE_PREFIX) else None
        if not isinstance(evidence, list):
            return True
        return any(isinstance(m, str) and self.facts.memory_status(tenant, m) == Status.ACTIVATED.value for m in evidence)

    def _relink_run(self, tenant: str, run_id: str) -> tuple[int, tuple[c.EdgeRecord, ...]] | None:
        """``(position of the run's NamespaceUndone, edges it removed)`` for a committed run, else None."""
        floor = dropped_at(self.store, tenant)
        for marker in self.store.read_all(tenant=tenant, types=["RelinkCommitted"]):
            if marker.event.run_id != run_id or marker.position < floor:
                continue
            if not marker.event.removed:
                return marker.position, ()
            for follower in self.store.read_all(after=marker.position, limit=1, tenant=tenant):
                same_run = follower.metadata.correlation_id == marker.metadata.correlation_id
                if isinstance(follower.event, c.NamespaceUndone) and same_run:
                    return follower.position, follower.event.edges
            return marker.position, ()
        return None
