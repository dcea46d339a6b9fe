"""The entity projection: entities, aliases, tags, relations and documents, with validity intervals.

Tables (in ``projections.db``), one row per state, ``valid_from``/``valid_to``
as everywhere (see :mod:`mnemolog.projections.memory_rows`):

- ``kg_entities``: an entity's state and ``created_position`` (the position
  that (re)created it: the linker's ambiguity rule uses it);
- ``kg_aliases`` (name and aliases, normalised) and ``kg_tags``;
- ``kg_relations``: one row per life of a ``(source, target, type)`` triple,
  with covering indexes by source and by target: BFS reads one index range
  per frontier node;
- ``kg_documents`` (versions), ``kg_relink_runs`` (committed linker runs);
- ``kg_tenant_state``: the last position that changed a tenant's entities
  (alias catalogue caches key on it).

Entities and documents are sealed with their tenant's own key. When a
``SubjectForgotten`` destroys that key (subject ``""``), every entity and
document row of the tenant reads as a replay reads it from then on: erased
(``erased`` true, the name or title the marker, description, aliases,
properties, path and source URL empty; ids, types, tags, positions and
versions kept), with no alias in the catalogue.

The projection keeps its own relation adjacency for :func:`get_related`;
the graph projection sees relations as ``rel:`` edges, appended by the
commands in the same batch, so the two never need each other.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Iterable, Sequence

import msgspec

from mnemolog.eventstore import RecordedEvent
from mnemolog.eventstore import catalogue_graph as g
from mnemolog.eventstore.commands.entities import normalise_tag
from mnemolog.eventstore.keystore import TENANT_SUBJECT
from mnemolog.eventstore.model import NotFound, ValidationError
from mnemolog.eventstore.sealing import ERASED_TEXT, erase
from mnemolog.eventstore.settings import setting

from ..filters import INLINE_VALUES, one_of
from ..graph.reads import type_filter
from ..linking.linker import normalise
from ..memory_rows import head_clause, known_end
from ..runner import execute_script

ENTITY_MAX_TAGS = setting("entity_max_tags", 8, "Tags kept per entity; extra tags are cut and the call reports them.", minimum=1)
DIRECTIONS = ("out", "in", "both")
_json = msgspec.json.Encoder()
_list = msgspec.json.Decoder(list)
_dict = msgspec.json.Decoder(dict)
_HANDLED = frozenset(g.KNOWLEDGE_EVENT_TYPES) | {"TenantDropped", "SubjectForgotten"}
_TABLES = ("kg_entities", "kg_aliases", "kg_tags", "kg_relations", "kg_documents", "kg_relink_runs", "kg_tenant_state")


class EntityView(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    name: str
    entity_type: str
    description: str
    aliases: list[str]
    tags: list[str]
    properties: dict[str, str]
    created_position: int
    valid_from: int
    valid_to: int | None
    erased: bool = False  # its tenant's key was forgotten


class RelationView(msgspec.Struct, frozen=True):
    source_id: str
    target_id: str
    relation_type: str
    weight: float


class Related(msgspec.Struct, frozen=True, kw_only=True):
    """An entity BFS reached: score = product of the weights along the strongest of its shortest paths."""

    id: str
    depth: int
    score: float
    path: tuple[RelationView, ...]


class EntityCard(msgspec.Struct, frozen=True, kw_only=True):
    """What a reader needs to recognise an entity: relation cards and recall's entity hits show it."""

    id: str
    name: str
    entity_type: str
    aliases: list[str]
    description: str


def entity_card(entity: EntityView) -> EntityCard:
    return EntityCard(id=entity.id, name=entity.name, entity_type=entity.entity_type, aliases=list(entity.aliases), description=entity.description)


class DocumentView(msgspec.Struct, frozen=True, kw_only=True):
    doc_id: str
    node: str
    version: int
    title: str
    format: str
    collection: str | None
    doc_type: str | None
    lang: str | None
    source_url: str | None
    model: str | None
    content_hash: str
    path: str | None
    pages: int
    chunk_ids: list[str]
    valid_from: int
    valid_to: int | None
    erased: bool = False  # its tenant's key was forgotten


def _search_text(name: str, aliases: Sequence[str], tags: Sequence[str], description: str) -> str:
    """What :func:`find_by_keywords` searches in: normalised as the linker reads text (NFKC, case folded), so that
    ``Ａｃｍｅ`` and ``acme``, or ``Café`` composed and decomposed, are one spelling."""
    return normalise("\n".join([name, *aliases, *tags, description]))


def surface_key(text: str) -> str:
    return " ".join(normalise(text).split())


class EntityProjector:
    name = "entities"
    schema_version = 3  # 3: search_text normalised as the linker reads text, tags as the commands store them

    def create(self, conn: sqlite3.Connection) -> None:
        execute_script(
            conn,
            """
            CREATE TABLE IF NOT EXISTS kg_entities (
                row_id INTEGER PRIMARY KEY, tenant TEXT NOT NULL, entity_id TEXT NOT NULL,
                name TEXT NOT NULL, entity_type TEXT NOT NULL, description TEXT NOT NULL,
                aliases TEXT NOT NULL, tags TEXT NOT NULL, properties TEXT NOT NULL, search_text TEXT NOT NULL,
                created_position INTEGER NOT NULL, valid_from INTEGER NOT NULL, valid_to INTEGER, erased INTEGER NOT NULL DEFAULT 0
            );
            CREATE INDEX IF NOT EXISTS ix_kg_entities_id ON kg_entities (tenant, entity_id, valid_to);
            CREATE INDEX IF NOT EXISTS ix_kg_entities_head ON kg_entities (tenant, valid_to, name);
            CREATE TABLE IF NOT EXISTS kg_aliases (
                row_id INTEGER PRIMARY KEY, tenant TEXT NOT NULL, entity_id TEXT NOT NULL,
                alias TEXT NOT NULL, alias_key TEXT NOT NULL, kind TEXT NOT NULL,
                valid_from INTEGER NOT NULL, valid_to INTEGER
            );
            CREATE INDEX IF NOT EXISTS ix_kg_aliases_key ON kg_aliases (tenant, alias_key, valid_to);
            CREATE INDEX IF NOT EXISTS ix_kg_aliases_entity ON kg_aliases (tenant, entity_id, valid_to);
            CREATE TABLE IF NOT EXISTS kg_tags (
                row_id INTEGER PRIMARY KEY, tenant TEXT NOT NULL, entity_id TEXT NOT NULL, tag TEXT NOT NULL,
                valid_from INTEGER NOT NULL, valid_to INTEGER
            );
            CREATE INDEX IF NOT EXISTS ix_kg_tags_tag ON kg_tags (tenant, tag, valid_to);
            CREATE INDEX IF NOT EXISTS ix_kg_tags_entity ON kg_tags (tenant, entity_id, valid_to);
            CREATE TABLE IF NOT EXISTS kg_relations (
                row_id INTEGER PRIMARY KEY, tenant TEXT NOT NULL, source_id TEXT NOT NULL, target_id TEXT NOT NULL,
                relation_type TEXT NOT NULL, weight REAL NOT NULL, valid_from INTEGER NOT NULL, valid_to INTEGER
            );
            CREATE INDEX IF NOT EXISTS ix_kg_relations_out
                ON kg_relations (tenant, source_id, valid_to, target_id, relation_type, weight, valid_from);
            CREATE INDEX IF NOT EXISTS ix_kg_relations_in
                ON kg_relations (tenant, target_id, valid_to, source_id, relation_type, weight, valid_from);
            CREATE TABLE IF NOT EXISTS kg_documents (
                row_id INTEGER PRIMARY KEY, tenant TEXT NOT NULL, doc_id TEXT NOT NULL, version INTEGER NOT NULL,
                title TEXT NOT NULL, format TEXT NOT NULL, collection TEXT, doc_type TEXT, lang TEXT, source_url TEXT,
                model TEXT, content_hash TEXT NOT NULL, path TEXT, pages INTEGER NOT NULL, chunk_ids TEXT NOT NULL,
                valid_from INTEGER NOT NULL, valid_to INTEGER, erased INTEGER NOT NULL DEFAULT 0
            );
            CREATE INDEX IF NOT EXISTS ix_kg_documents_id ON kg_documents (tenant, doc_id, valid_to);
            CREATE TABLE IF NOT EXISTS kg_relink_runs (
                tenant TEXT NOT NULL, run_id TEXT NOT NULL, position INTEGER NOT NULL, correlation_id TEXT,
                summary TEXT NOT NULL, recorded_at TEXT NOT NULL, PRIMARY KEY (tenant, run_id)
            );
            CREATE TABLE IF NOT EXISTS kg_tenant_state (tenant TEXT PRIMARY KEY, entities_changed_at INTEGER NOT NULL)
            """,
        )

    def drop(self, conn: sqlite3.Connection) -> None:
        execute_script(conn, ";".join(f"DROP TABLE IF EXISTS {t}" for t in _TABLES))

    def size(self, conn: sqlite3.Connection) -> int:
        return sum(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("kg_entities", "kg_relations", "kg_documents"))

    # -- applying ----------------------------------------------------------------------

    def apply(self, events: Sequence[RecordedEvent], conn: sqlite3.Connection) -> None:
        changed: dict[str, int] = {}
        for recorded in events:
            if recorded.type not in _HANDLED:
                continue
            event, tenant, pos = recorded.event, recorded.tenant, recorded.position
            if isinstance(event, (g.EntityUpserted, g.EntityRolledBack)):
                self._upsert(conn, tenant, pos, event)
            elif isinstance(event, g.EntityTagsSet):
                self._set_tags(conn, tenant, pos, event)
            elif isinstance(event, g.EntityRemoved):
                self._close_entity(conn, tenant, pos, event.entity_id)
                for side in ("source_id", "target_id"):
                    conn.execute(f"UPDATE kg_relations SET valid_to = ? WHERE tenant = ? AND {side} = ? AND valid_to IS NULL", (pos, tenant, event.entity_id))
            elif isinstance(event, (g.RelationSet, g.RelationRemoved)):
                conn.execute(
                    "UPDATE kg_relations SET valid_to = ? WHERE tenant = ? AND source_id = ? AND valid_to IS NULL"
                    " AND target_id = ? AND relation_type = ?",
                    (pos, tenant, event.source_id, event.target_id, event.relation_type),
                )
                if isinstance(event, g.RelationSet):
                    conn.execute(
                        "INSERT INTO kg_relations (tenant, source_id, target_id, relation_type, weight, valid_from) VALUES (?,?,?,?,?,?)",
                        (tenant, event.source_id, event.target_id, event.relation_type, event.weight, pos),
                    )
                continue
            elif isinstance(event, (g.DocumentImported, g.DocumentRolledBack)):
                self._document(conn, tenant, pos, event)
                continue
            elif isinstance(event, g.DocumentRemoved):
                conn.execute("UPDATE kg_documents SET valid_to = ? WHERE tenant = ? AND doc_id = ? AND valid_to IS NULL", (pos, tenant, event.doc_id))
                continue
            elif isinstance(event, g.RelinkCommitted):
                summary = msgspec.structs.asdict(event)
                conn.execute(
                    "INSERT OR IGNORE INTO kg_relink_runs (tenant, run_id, position, correlation_id, summary, recorded_at) VALUES (?,?,?,?,?,?)",
                    (tenant, event.run_id, pos, recorded.metadata.correlation_id, _json.encode(summary).decode(), recorded.recorded_at.isoformat()),
                )
                continue
            elif recorded.type == "SubjectForgotten":
                if event.subject != TENANT_SUBJECT:
                    continue  # a named subject's memories: entities and documents are the tenant's
                self._erase_tenant(conn, tenant)
            elif recorded.type == "TenantDropped":
                for table in _TABLES:
                    conn.execute(f"DELETE FROM {table} WHERE tenant = ?", (tenant,))
                changed.pop(tenant, None)
                continue
            changed[tenant] = pos
        conn.executemany(
            "INSERT INTO kg_tenant_state (tenant, entities_changed_at) VALUES (?, ?)"
            " ON CONFLICT (tenant) DO UPDATE SET entities_changed_at = excluded.entities_changed_at",
            list(changed.items()),
        )

    @staticmethod
    def _close_entity(conn: sqlite3.Connection, tenant: str, pos: int, entity_id: str, tables=("kg_entities", "kg_aliases", "kg_tags")) -> None:
        for table in tables:
            conn.execute(f"UPDATE {table} SET valid_to = ? WHERE tenant = ? AND entity_id = ? AND valid_to IS NULL", (pos, tenant, entity_id))

    def _insert_entity(self, conn, tenant, pos, entity_id, name, entity_type, description, aliases, tags, properties, created, erased=False) -> None:
        conn.execute(
            "INSERT INTO kg_entities (tenant, entity_id, name, entity_type, description, aliases, tags, properties, search_text,"
            " created_position, valid_from, erased) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (tenant, entity_id, name, entity_type, description, _json.encode(list(aliases)).decode(), _json.encode(list(tags)).decode(),
             _json.encode(properties).decode(), _search_text(name, aliases, tags, description), created, pos, int(erased)),
        )
        conn.executemany(
            "INSERT INTO kg_tags (tenant, entity_id, tag, valid_from) VALUES (?,?,?,?)",
            [(tenant, entity_id, t, pos) for t in dict.fromkeys(normalise_tag(t) for t in tags)],  # as looked up (events older than NFKC tags too)
        )

    def _upsert(self, conn: sqlite3.Connection, tenant: str, pos: int, e: g.EntityUpserted | g.EntityRolledBack) -> None:
        if isinstance(e, g.EntityRolledBack):
            created = e.created_position  # back to the state (and age) it had
        else:
            row = conn.execute("SELECT created_position FROM kg_entities WHERE tenant = ? AND entity_id = ? AND valid_to IS NULL", (tenant, e.entity_id)).fetchone()
            created = row[0] if row else pos
        self._close_entity(conn, tenant, pos, e.entity_id)
        self._insert_entity(conn, tenant, pos, e.entity_id, e.name, e.entity_type, e.description, e.aliases, e.tags, e.properties, created, e.erased)
        surfaces = [] if e.erased else [(e.name, "name")] + [(a, "alias") for a in e.aliases]  # an erased entity is found by no text
        conn.executemany(
            "INSERT INTO kg_aliases (tenant, entity_id, alias, alias_key, kind, valid_from) VALUES (?,?,?,?,?,?)",
            [(tenant, e.entity_id, text, surface_key(text), kind, pos) for text, kind in surfaces],
        )

    def _set_tags(self, conn: sqlite3.Connection, tenant: str, pos: int, e: g.EntityTagsSet) -> None:
        row = conn.execute(
            "SELECT name, entity_type, description, aliases, properties, created_position, erased FROM kg_entities"
            " WHERE tenant = ? AND entity_id = ? AND valid_to IS NULL",
            (tenant, e.entity_id),
        ).fetchone()
        if row is None:
            return
        self._close_entity(conn, tenant, pos, e.entity_id, ("kg_entities", "kg_tags"))
        name, etype, description, aliases, properties, created, erased = row
        self._insert_entity(conn, tenant, pos, e.entity_id, name, etype, description, _list.decode(aliases), e.tags, _dict.decode(properties), created, erased)

    @staticmethod
    def _document(conn: sqlite3.Connection, tenant: str, pos: int, e: g.DocumentImported | g.DocumentRolledBack) -> None:
        conn.execute("UPDATE kg_documents SET valid_to = ? WHERE tenant = ? AND doc_id = ? AND valid_to IS NULL", (pos, tenant, e.doc_id))
        conn.execute(
            "INSERT INTO kg_documents (tenant, doc_id, version, title, format, collection, doc_type, lang, source_url, model,"
            " content_hash, path, pages, chunk_ids, valid_from, erased) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (tenant, e.doc_id, e.version, e.title, e.format, e.collection, e.doc_type, e.lang, e.source_url, e.model,
             e.content_hash, e.path, e.pages, _json.encode(list(e.chunk_ids)).decode(), pos, int(e.erased)),
        )

    def _erase_tenant(self, conn: sqlite3.Connection, tenant: str) -> None:
        """Every entity and document row of the tenant as a replay reads it once the tenant's key is gone (see the module docstring)."""
        entity = erase(g.EntityUpserted(entity_id="", name=""))  # what the sealing module leaves of an entity
        rows = conn.execute("SELECT row_id, tags FROM kg_entities WHERE tenant = ? AND erased = 0", (tenant,)).fetchall()
        conn.executemany(
            "UPDATE kg_entities SET name = ?, description = ?, aliases = ?, properties = ?, search_text = ?, erased = 1 WHERE row_id = ?",
            [
                (entity.name, entity.description, _json.encode(list(entity.aliases)).decode(), _json.encode(entity.properties).decode(),
                 _search_text(entity.name, entity.aliases, _list.decode(tags), entity.description), row_id)
                for row_id, tags in rows
            ],
        )  # fmt: skip
        conn.execute("DELETE FROM kg_aliases WHERE tenant = ?", (tenant,))
        document = erase(g.DocumentImported(doc_id="", version=0, title="", content_hash="", chunk_ids=()))
        conn.execute(
            "UPDATE kg_documents SET title = ?, path = ?, source_url = ?, erased = 1 WHERE tenant = ? AND erased = 0",
            (document.title, document.path, document.source_url, tenant),
        )


# -- reads -------------------------------------------------------------------------------------

_ENTITY_SELECT = (
    "SELECT entity_id, name, entity_type, description, aliases, tags, properties, created_position, valid_from, valid_to, erased FROM kg_entities"
)


def _entity(row: Sequence, as_of: int | None = None) -> EntityView:
    return EntityView(
        id=row[0], name=row[1], entity_type=row[2], description=row[3], aliases=_list.decode(row[4]), tags=_list.decode(row[5]),
        properties=_dict.decode(row[6]), created_position=row[7], valid_from=row[8], valid_to=known_end(row[9], as_of), erased=bool(row[10]),
    )


def get_entity(conn: sqlite3.Connection, tenant: str, entity_id: str, *, as_of: int | None = None) -> EntityView | None:
    valid, params = head_clause(as_of)
    row = conn.execute(f"{_ENTITY_SELECT} WHERE tenant = ? AND entity_id = ? AND {valid}", (tenant, entity_id, *params)).fetchone()
    return _entity(row, as_of) if row else None


def get_entities(conn: sqlite3.Connection, tenant: str, entity_ids: Iterable[str], *, as_of: int | None = None) -> dict[str, EntityView]:
    ids = list(dict.fromkeys(entity_ids))
    valid, params = head_clause(as_of)
    out: dict[str, EntityView] = {}
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        marks = ",".join("?" * len(part))
        for row in conn.execute(f"{_ENTITY_SELECT} WHERE tenant = ? AND entity_id IN ({marks}) AND {valid}", (tenant, *part, *params)):
            out[row[0]] = _entity(row, as_of)
    return out


def entity_types(conn: sqlite3.Connection, tenant: str, entity_ids: Sequence[str], *, as_of: int | None = None) -> dict[str, str]:
    """Entity id -> type, without decoding the rest of each entity (recall's hints read many)."""
    valid, params = head_clause(as_of)
    out: dict[str, str] = {}
    for start in range(0, len(entity_ids), 500):
        part = entity_ids[start : start + 500]
        rows = conn.execute(
            f"SELECT entity_id, entity_type FROM kg_entities WHERE tenant = ? AND entity_id IN ({','.join('?' * len(part))}) AND {valid}",
            (tenant, *part, *params),
        )
        out.update(rows)
    return out


def active_entities(conn: sqlite3.Connection, tenant: str, *, as_of: int | None = None) -> list[EntityView]:
    valid, params = head_clause(as_of)
    return [_entity(r, as_of) for r in conn.execute(f"{_ENTITY_SELECT} WHERE tenant = ? AND {valid} ORDER BY entity_id", (tenant, *params))]


def has_entities(conn: sqlite3.Connection, tenant: str, *, as_of: int | None = None) -> bool:
    """Whether the tenant has at least one entity (at the head or as of a position)."""
    valid, params = head_clause(as_of)
    try:
        return conn.execute(f"SELECT 1 FROM kg_entities WHERE tenant = ? AND {valid} LIMIT 1", (tenant, *params)).fetchone() is not None
    except sqlite3.OperationalError:  # the projection is not part of this service
        return False


_ERASED_SEARCH_TEXT = normalise(ERASED_TEXT)


def find_by_keywords(
    conn: sqlite3.Connection,
    tenant: str,
    keywords: str | Sequence[str] = (),
    *,
    tag: str | None = None,
    entity_type: str | None = None,
    limit: int = 50,
    as_of: int | None = None,
) -> list[EntityView]:
    """Entities containing every keyword (case-insensitive substring of name, aliases, tags or description).

    Ranked: a keyword equal to the name counts 4, inside the name 3, inside
    an alias 2, a tag 1, the description 0.5; then by name and id. Keywords
    and entities are compared as the linker compares them (:func:`normalise`:
    NFKC, case folded), whatever Unicode form either is written in.
    """
    words = normalise(keywords).split() if isinstance(keywords, str) else [normalise(k).strip() for k in keywords if k and k.strip()]
    wanted = list(dict.fromkeys(words))
    valid, params = head_clause(as_of)
    sql = f"{_ENTITY_SELECT} WHERE tenant = ? AND {valid}"
    args: list[Any] = [tenant, *params]
    if len(wanted) <= INLINE_VALUES:  # one AND each, the fastest form
        for word in wanted:
            sql += " AND instr(search_text, ?) > 0"
            args.append(word)
    else:  # one JSON parameter: a chain of ANDs deeper than SQLite's expression depth (1,000) is refused
        sql += " AND NOT EXISTS (SELECT 1 FROM json_each(?) AS w WHERE instr(search_text, w.value) = 0)"
        args.append(msgspec.json.encode(wanted).decode())
    if any(word in _ERASED_SEARCH_TEXT for word in wanted):  # the marker an erased entity's name reads is no name of it
        sql += " AND erased = 0"
    if entity_type:
        sql += " AND entity_type = ?"
        args.append(entity_type)
    if tag:
        tvalid, tparams = head_clause(as_of)
        sql += f" AND entity_id IN (SELECT entity_id FROM kg_tags WHERE tenant = ? AND tag = ? AND {tvalid})"
        args += [tenant, normalise_tag(tag), *tparams]
    found = [_entity(r, as_of) for r in conn.execute(sql, args)]

    def score(word: str, e: EntityView) -> float:
        name = normalise(e.name)
        if word in name:
            return 4 if word == name else 3
        return 2 if any(word in normalise(a) for a in e.aliases) else 1 if any(word in normalise(t) for t in e.tags) else 0.5

    def rank(e: EntityView) -> float:
        return sum(score(w, e) for w in words)

    found.sort(key=lambda e: (-rank(e), normalise(e.name), e.id))
    return found[: max(0, limit)]


def find_tags(conn: sqlite3.Connection, tenant: str, prefix: str = "", *, limit: int = 100, as_of: int | None = None) -> list[tuple[str, int]]:
    """Tags starting with ``prefix`` and how many entities carry each, in tag order."""
    prefix = normalise_tag(prefix or "")
    valid, params = head_clause(as_of)
    rows = conn.execute(
        f"SELECT tag, count(DISTINCT entity_id) FROM kg_tags WHERE tenant = ? AND tag >= ? AND tag < ? AND {valid}"
        " GROUP BY tag ORDER BY tag LIMIT ?",
        (tenant, prefix, prefix + "\U0010ffff", *params, limit),
    )
    return [(r[0], r[1]) for r in rows]


def entity_count_by_tag(conn: sqlite3.Connection, tenant: str, tag: str, *, as_of: int | None = None) -> int:
    valid, params = head_clause(as_of)
    return conn.execute(
        f"SELECT count(DISTINCT entity_id) FROM kg_tags WHERE tenant = ? AND tag = ? AND {valid}", (tenant, normalise_tag(tag), *params)
    ).fetchone()[0]


def _adjacent(conn, tenant, nodes, direction, types, as_of) -> dict[str, list[tuple]]:
    """Each node's relations as ``(relation_type, other end, source, target, weight)``, sorted.

    One indexed query per side and 500 nodes: BFS reads a frontier at once.
    """
    valid, params = head_clause(as_of)
    type_sql, type_params = one_of("relation_type", types) if types else ("", ())
    type_sql = type_sql and f" AND {type_sql}"
    out: dict[str, list[tuple]] = {}
    sides = {"out": ("source_id",), "in": ("target_id",), "both": ("source_id", "target_id")}[direction]
    for side in sides:
        outgoing = side == "source_id"
        for start in range(0, len(nodes), 500):
            part = nodes[start : start + 500]
            rows = conn.execute(
                f"SELECT source_id, target_id, relation_type, weight FROM kg_relations WHERE tenant = ?"
                f" AND {side} IN ({','.join('?' * len(part))}) AND {valid}{type_sql}",
                (tenant, *part, *params, *type_params),
            )
            for source, target, rtype, weight in rows:
                if outgoing:
                    out.setdefault(source, []).append((rtype, target, source, target, weight))
                else:
                    out.setdefault(target, []).append((rtype, source, source, target, weight))
    for edges in out.values():
        edges.sort()
    return out


def relations_of(conn, tenant: str, entity_id: str, *, direction: str = "both", relation_types=None, as_of: int | None = None) -> list[RelationView]:
    if direction not in DIRECTIONS:
        raise ValidationError("direction", "must be out, in or both")
    rows = _adjacent(conn, tenant, [entity_id], direction, type_filter(relation_types), as_of).get(entity_id, [])
    return [RelationView(source, target, rtype, weight) for rtype, _, source, target, weight in rows]


def get_related(
    conn: sqlite3.Connection,
    tenant: str,
    entity_id: str,
    depth: int = 1,
    direction: str = "out",
    relation_types: Sequence[str] | None = None,
    as_of: int | None = None,
    *,
    max_nodes: int | None = None,
) -> list[Related]:
    """:func:`related_walk`'s entities, without saying whether it stopped at ``max_nodes``."""
    return related_walk(conn, tenant, entity_id, depth, direction, relation_types, as_of, max_nodes=max_nodes)[0]


#: The most entities one walk of relations reaches; a walk that stops there says so.
RELATED_MAX_NODES = 1000


def related_walk(
    conn: sqlite3.Connection,
    tenant: str,
    entity_id: str,
    depth: int = 1,
    direction: str = "out",
    relation_types: Sequence[str] | None = None,
    as_of: int | None = None,
    *,
    max_nodes: int | None = None,
    by_score: bool = True,
) -> tuple[list[Related], bool]:
    """Entities reached from ``entity_id`` by BFS over relations, and whether the walk stopped at
    ``max_nodes`` (default :data:`RELATED_MAX_NODES`) with more entities beyond.

    Cycle-safe; a node is reached at its shortest depth, by the strongest
    of the paths of that depth (score = the product of the weights on it),
    whatever the order of relation types or of the nodes that lead to it;
    among equally strong paths, the first found (the stronger parent first,
    then relation type, then id).
    Sorted by score, then depth, then id. With ``by_score`` false, in walk
    order instead: depth by depth, each depth by score then id, so that the
    walk cut at ``max_nodes`` is the first part of the whole walk (pages of
    a neighbourhood). ``depth=0`` returns nothing but still raises
    :class:`NotFound` for an unknown entity.
    """
    if direction not in DIRECTIONS:
        raise ValidationError("direction", "must be out, in or both")
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
        raise ValidationError("depth", "must be an integer >= 0")
    if get_entity(conn, tenant, entity_id, as_of=as_of) is None:
        raise NotFound("entity", entity_id)
    max_nodes = RELATED_MAX_NODES if max_nodes is None else max_nodes
    types = type_filter(relation_types)
    visited = {entity_id}
    frontier: list[tuple[str, float, tuple[RelationView, ...]]] = [(entity_id, 1.0, ())]
    reached: list[Related] = []
    for level in range(1, depth + 1):
        if not frontier or len(reached) > max_nodes:  # one node past the limit tells a cut walk from one that fits
            break
        adjacency = _adjacent(conn, tenant, [n for n, _, _ in frontier], direction, types, as_of)
        best: dict[str, tuple[float, tuple[RelationView, ...]]] = {}  # this level's nodes, in the order first found
        for node, score, path in frontier:
            for rtype, other, source, target, weight in adjacency.get(node, ()):
                if other in visited or (other in best and best[other][0] >= score * weight):
                    continue
                best[other] = (score * weight, path + (RelationView(source, target, rtype, weight),))
        visited.update(best)
        following = [(other, score, path) for other, (score, path) in best.items()]
        following.sort(key=lambda step: (-step[1], step[0]))  # the strongest paths expand first
        reached.extend(Related(id=other, depth=level, score=score, path=path) for other, score, path in following)
        frontier = following
    truncated = len(reached) > max_nodes
    reached = reached[:max_nodes]
    if by_score:
        reached.sort(key=lambda r: (-r.score, r.depth, r.id))
    return reached, truncated


def incoming_relations(conn: sqlite3.Connection, tenant: str, entity_id: str) -> list[tuple[str, str]]:
    rows = conn.execute(
        "SELECT source_id, relation_type FROM kg_relations WHERE tenant = ? AND target_id = ? AND valid_to IS NULL", (tenant, entity_id)
    )
    return [(r[0], r[1]) for r in rows]


# -- documents ---------------------------------------------------------------------------------

_DOC_SELECT = (
    "SELECT doc_id, version, title, format, collection, doc_type, lang, source_url, model, content_hash, path, pages, chunk_ids,"
    " valid_from, valid_to, erased FROM kg_documents"
)


def _document(row: Sequence, as_of: int | None = None) -> DocumentView:
    return DocumentView(
        doc_id=row[0], node=g.document_node(row[0]), version=row[1], title=row[2], format=row[3], collection=row[4], doc_type=row[5],
        lang=row[6], source_url=row[7], model=row[8], content_hash=row[9], path=row[10], pages=row[11],
        chunk_ids=_list.decode(row[12]), valid_from=row[13], valid_to=known_end(row[14], as_of), erased=bool(row[15]),
    )


def get_document(conn: sqlite3.Connection, tenant: str, doc_id: str, *, as_of: int | None = None) -> DocumentView | None:
    valid, params = head_clause(as_of)
    row = conn.execute(f"{_DOC_SELECT} WHERE tenant = ? AND doc_id = ? AND {valid}", (tenant, doc_id, *params)).fetchone()
    return _document(row, as_of) if row else None


def list_documents(conn: sqlite3.Connection, tenant: str, *, collection: str | None = None, as_of: int | None = None) -> list[DocumentView]:
    valid, params = head_clause(as_of)
    extra, args = ("", ()) if collection is None else (" AND collection = ?", (collection,))
    rows = conn.execute(f"{_DOC_SELECT} WHERE tenant = ? AND {valid}{extra} ORDER BY doc_id", (tenant, *params, *args))
    return [_document(r, as_of) for r in rows]


# -- graph node resolvers --------------------------------------------------------------------------


def entity_node_exists(conn: sqlite3.Connection, tenant: str, node_id: str) -> bool:
    try:
        return conn.execute(
            "SELECT 1 FROM kg_entities WHERE tenant = ? AND entity_id = ? AND valid_to IS NULL", (tenant, node_id)
        ).fetchone() is not None
    except sqlite3.OperationalError:  # the projection is not part of this service
        return False


def document_node_exists(conn: sqlite3.Connection, tenant: str, node_id: str) -> bool:
    if not node_id.startswith(g.DOCUMENT_NODE_PREFIX):
        return False
    try:
        return conn.execute(
            "SELECT 1 FROM kg_documents WHERE tenant = ? AND doc_id = ? AND valid_to IS NULL", (tenant, node_id[len(g.DOCUMENT_NODE_PREFIX) :])
        ).fetchone() is not None
    except sqlite3.OperationalError:
        return False
