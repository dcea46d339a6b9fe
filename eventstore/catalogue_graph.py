"""The knowledge-graph side of the catalogue: entities, relations, documents, relink runs.

Streams (see :mod:`mnemolog.eventstore.catalogue` for the whole scheme):

- ``entity-<tenant>/<entity_id>``: one entity's life: upserts (the full
  state every time), tag changes, removal, and the relations that *start* at
  it (a relation's key is its ``(source_id, target_id, relation_type)``
  triple, so it lives on its source's stream);
- ``document-<tenant>/<doc_id>``: one imported document's versions (and the
  roll-backs and removal with which a revert undoes an import); the tenant
  as :func:`tenant_segment` writes it, so that a tenant holding ``/`` never
  shares another's streams;
- ``edges-<tenant>``: relink runs (:class:`RelinkCommitted`) sit beside the
  edge changes they describe.

Graph edges are not duplicated here. A relation is also a graph edge
(``rel:<source>:<type>:<target>``) and an entity mention is a ``MENTIONS``
edge (``mention:<run>:<n>``): the commands append ordinary ``EdgeLinked`` /
``EdgeUnlinked`` / ``NamespaceUndone`` events in the same atomic batch, so BFS
and recall walk one adjacency, and replay never calls the linker again.

This module only depends on :mod:`mnemolog.eventstore.events` (and the log's name bound); importing it registers
its event types.
"""

from __future__ import annotations

import unicodedata
from hashlib import sha256

from .events import DomainEvent
from .schema import MAX_NAME


def fold_text(text: str) -> str:
    """A name as entities' names and aliases are told apart: NFKC, case folded, NFKC again, each whitespace
    character one space (``ＡＣＭＥ`` is ``acme``, a decomposed ``Café`` the composed one). The entity
    commands compare aliases with it, the linker (:mod:`mnemolog.projections.linking.linker`) folds text with it."""
    out = unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())
    return "".join(" " if c.isspace() else c for c in out)

DOCUMENT_NODE_PREFIX = "document:"
RELATION_EDGE_PREFIX = "rel:"
MERGED_EDGE_PREFIX = "merged:"  # a merge's MERGED_TO edges: merged:<correlation>:<merged id>:<n>
SUPERSEDED_EDGE_PREFIX = "superseded:"  # a supersede's SUPERSEDED_BY edge: superseded:<correlation>:<older id>
MENTION_EDGE_PREFIX = "mention:"
#: The organizer's structure over memories (a topic's PARENT edges, a conversation's FOLLOWS): its clustering runs
#: write them again from the memories, so a revert removing a memory takes them along, no conflict.
ORGANIZER_STRUCTURE = (("parent:", "PARENT"), ("follows:", "FOLLOWS"))
MENTIONS = "MENTIONS"


def entity_stream(tenant: str, entity_id: str) -> str:
    return f"entity-{tenant}/{entity_id}"


def tenant_segment(tenant: str) -> str:
    """``tenant`` as the part of a name that a ``/`` ends (a document's stream, an idempotency key's scope).

    A tenant holding ``/`` or ``%`` has those two percent-encoded, so that
    no tenant's part holds a ``/`` and two tenants' parts never meet (tenant
    ``acme`` with document ``x/y`` and tenant ``acme/x`` with document ``y``
    would otherwise share one stream); every other tenant's part is its name,
    as stored before.
    """
    return tenant.replace("%", "%25").replace("/", "%2F")


def document_stream(tenant: str, doc_id: str) -> str:
    """``document-<tenant>/<doc_id>``, the tenant as :func:`tenant_segment` writes it; one whose part would be
    longer than a tenant may be (a tenant of many ``/``) is named by its digest, ``%sha256:HEX``, which no
    tenant's part starts with (only ``%25`` and ``%2F`` do), so that the id stays within the log's column."""
    part = tenant_segment(tenant)
    if len(part) > MAX_NAME:
        part = "%sha256:" + sha256(tenant.encode("utf-8", "surrogatepass")).hexdigest()
    return f"document-{part}/{doc_id}"


def shared_document_stream(tenant: str, doc_id: str) -> str | None:
    """The stream a document of ``tenant`` was written to before tenants' parts were encoded, when it is not
    :func:`document_stream` (a tenant holding ``/`` or ``%``); another tenant's documents may be there too."""
    stream = f"document-{tenant}/{doc_id}"
    return None if stream == document_stream(tenant, doc_id) else stream


def document_node(doc_id: str) -> str:
    """The graph node id of a document (``document:<doc_id>``)."""
    return DOCUMENT_NODE_PREFIX + doc_id


def relation_edge_id(source_id: str, relation_type: str, target_id: str, *, escaped: bool = False) -> str:
    """The id of the graph edge that mirrors a relation, ``rel:<source>:<TYPE>:<target>``.

    Entity ids may hold ``:``, so two relations can spell one id (``p:Q:q -R-> s`` and ``p -Q-> q:R:s``): the
    one set second takes the ``escaped`` id, its entity ids' ``:`` written ``%3A``, which no entity id holds,
    so no other relation spells it. The commands find a relation's edge by its triple, whatever its id.
    """
    if escaped:
        source_id, target_id = source_id.replace(":", "%3A"), target_id.replace(":", "%3A")
    return f"{RELATION_EDGE_PREFIX}{source_id}:{relation_type}:{target_id}"


# -- entities -------------------------------------------------------------------------


class EntityUpserted(DomainEvent, frozen=True):
    """An entity created or replaced: the whole state, so no projector needs the previous one."""

    personal = ("name", "description", "aliases", "properties")

    entity_id: str
    name: str
    entity_type: str = ""
    description: str = ""
    aliases: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    properties: dict[str, str] = {}
    erased: bool = False  # read true once the tenant's key was forgotten (see sealing); never written


class EntityRolledBack(DomainEvent, frozen=True):
    """A revert brought an entity back to an earlier state: the whole state, as :class:`EntityUpserted` holds it.

    ``created_position`` is the position that had (re)created the entity, so
    that the linker's ambiguity rule (the oldest entity wins) reads as before.
    """

    personal = ("name", "description", "aliases", "properties")

    entity_id: str
    name: str
    entity_type: str = ""
    description: str = ""
    aliases: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    properties: dict[str, str] = {}
    created_position: int = 0
    reason: str = ""
    erased: bool = False


class EntityTagsSet(DomainEvent, frozen=True):
    entity_id: str
    tags: tuple[str, ...]


class EntityRemoved(DomainEvent, frozen=True):
    """The entity is gone; its relations were removed by events before this one."""

    entity_id: str
    reason: str = ""


class RelationSet(DomainEvent, frozen=True):
    """A relation created, or its weight overwritten (the triple is the key)."""

    source_id: str
    target_id: str
    relation_type: str
    weight: float


class RelationRemoved(DomainEvent, frozen=True):
    source_id: str
    target_id: str
    relation_type: str
    reason: str = ""


# -- documents ----------------------------------------------------------------------------


class DocumentImported(DomainEvent, frozen=True):
    """A new version of a document; its chunks are ``RawFileMemory`` memories added in the same batch.

    ``archived_chunk_ids`` are the previous version's chunks, archived in the
    same batch (never deleted).
    """

    personal = ("title", "path", "source_url")

    doc_id: str
    version: int
    title: str
    content_hash: str
    chunk_ids: tuple[str, ...]
    format: str = ""  # text | markdown | pdf
    collection: str | None = None
    doc_type: str | None = None
    lang: str | None = None
    source_url: str | None = None
    model: str | None = None
    path: str | None = None
    pages: int = 1
    archived_chunk_ids: tuple[str, ...] = ()
    erased: bool = False  # read true once the tenant's key was forgotten (see sealing); never written


class DocumentRolledBack(DomainEvent, frozen=True):
    """A revert brought a document back to an earlier version: that version's whole record, as it was imported.

    The chunks' own changes (archived, restored, deleted) are memory events of
    the same revert.
    """

    personal = ("title", "path", "source_url")

    doc_id: str
    version: int
    title: str
    content_hash: str
    chunk_ids: tuple[str, ...]
    format: str = ""
    collection: str | None = None
    doc_type: str | None = None
    lang: str | None = None
    source_url: str | None = None
    model: str | None = None
    path: str | None = None
    pages: int = 1
    archived_chunk_ids: tuple[str, ...] = ()
    reason: str = ""
    erased: bool = False


class DocumentRemoved(DomainEvent, frozen=True):
    """The document has no current version any more (a revert of its first import); its stream stays."""

    doc_id: str
    reason: str = ""


# -- linking ------------------------------------------------------------------------------------


class RelinkCommitted(DomainEvent, frozen=True):
    """Marks a committed relink run; its edge changes follow it in the same batch.

    The run's new ``MENTIONS`` edges are linked under ``prefix``
    (``mention:<run_id>:``); the mentions that are no longer found are
    removed by one ``NamespaceUndone`` right after this marker.
    """

    run_id: str
    prefix: str
    added: int
    removed: int
    kept: int
    chunks: int
    catalogue_size: int
    entities: int
    include_tags: bool = False
    max_alias_document_frequency: float | None = None
    memories: int = 0  # the memories linked besides the chunks


EntityEvent = EntityUpserted | EntityRolledBack | EntityTagsSet | EntityRemoved | RelationSet | RelationRemoved
DocumentEvent = DocumentImported | DocumentRolledBack | DocumentRemoved
KnowledgeEvent = EntityEvent | DocumentEvent | RelinkCommitted
KNOWLEDGE_EVENT_TYPES = tuple(cls.__name__ for cls in KnowledgeEvent.__args__)
