"""The graph projection: memory nodes, typed weighted edges, working memory.

Tables (in ``projections.db``):

- ``graph_memories``: one row per state of a memory, with validity positions;
- ``graph_edges``: one row per life of an edge id (linked … unlinked), with
  the ``subject`` whose key sealed its properties (a mention's memory's;
  NULL: the tenant's), so that a forget erases them, and ``merged_from``
  (a JSON list; NULL: none), the ids of the edges a merge folded into it;
- ``graph_working``: one row per stay of an entry in a tenant's working
  memory, ordered by ``position`` (where the entry entered the FIFO, kept
  when a revert restores it), with validity positions like every row.

Adjacency is indexed by ``(tenant, source)`` and ``(tenant, target)`` so
that BFS touches only the edges it follows.
"""

from __future__ import annotations

import sqlite3
from typing import Sequence

import msgspec

from mnemolog.eventstore import RecordedEvent
from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore import catalogue_graph as g
from mnemolog.eventstore.sealing import erase

from ..runner import execute_script
from ..memory_rows import Previous, close_rows, decode_content, encode_content, erased_rows, transitions

_edge_props = msgspec.json.Encoder()
_dict_decoder = msgspec.json.Decoder(dict)
_ids_decoder = msgspec.json.Decoder(list[str])


def folded_key(key: str | None) -> str | None:
    """A memory's key as ``graph_memories`` holds it and a query's spelling of it is looked up: folded as entity
    names are (:func:`~mnemolog.eventstore.catalogue_graph.fold_text`). SQLite's ``lower`` folds ASCII only
    ("Москва" never matched itself), and "café" is written in two forms."""
    return None if key is None else g.fold_text(key)


MEMORY_COLUMNS = (
    "tenant, memory_id, version, valid_from, valid_to, status, memory_type, key, collection, doc_type, doc_id,"
    " model, created_at, updated_at, working_binding, content"
)


class GraphProjector:
    name = "graph"
    # 6: graph_edges.merged_from (the edges a merge folded into one); 7: a forget erases its memories' mentions;
    # 8: graph_memories.key holds the key folded (see folded_key)
    schema_version = 8

    def create(self, conn: sqlite3.Connection) -> None:
        execute_script(conn, 
            """
            CREATE TABLE IF NOT EXISTS graph_memories (
                row_id INTEGER PRIMARY KEY,
                tenant TEXT NOT NULL, memory_id TEXT NOT NULL, version INTEGER NOT NULL,
                valid_from INTEGER NOT NULL, valid_to INTEGER,
                status TEXT NOT NULL, memory_type TEXT NOT NULL, key TEXT,
                collection TEXT, doc_type TEXT, doc_id TEXT, model TEXT,
                created_at TEXT NOT NULL, updated_at TEXT NOT NULL, working_binding TEXT,
                content TEXT NOT NULL
            );
            CREATE INDEX IF NOT EXISTS ix_graph_memories_id ON graph_memories (tenant, memory_id, valid_from);
            CREATE INDEX IF NOT EXISTS ix_graph_memories_folded_key ON graph_memories (tenant, key) WHERE key IS NOT NULL;
            CREATE TABLE IF NOT EXISTS graph_edges (
                row_id INTEGER PRIMARY KEY,
                tenant TEXT NOT NULL, edge_id TEXT NOT NULL, edge_type TEXT NOT NULL,
                source TEXT NOT NULL, target TEXT NOT NULL, weight REAL NOT NULL, properties TEXT NOT NULL,
                valid_from INTEGER NOT NULL, valid_to INTEGER, subject TEXT, merged_from TEXT
            );
            CREATE INDEX IF NOT EXISTS ix_graph_edges_id ON graph_edges (tenant, edge_id, valid_to);
            CREATE INDEX IF NOT EXISTS ix_graph_edges_source ON graph_edges (tenant, source, valid_to);
            CREATE INDEX IF NOT EXISTS ix_graph_edges_target ON graph_edges (tenant, target, valid_to);
            CREATE TABLE IF NOT EXISTS graph_working (
                row_id INTEGER PRIMARY KEY,
                tenant TEXT NOT NULL, binding TEXT NOT NULL, memory_id TEXT NOT NULL,
                memory_type TEXT NOT NULL, position INTEGER NOT NULL,
                valid_from INTEGER NOT NULL, valid_to INTEGER
            );
            CREATE INDEX IF NOT EXISTS ix_graph_working_order ON graph_working (tenant, valid_to, position);
            CREATE INDEX IF NOT EXISTS ix_graph_working_binding ON graph_working (tenant, binding, valid_to);
            CREATE INDEX IF NOT EXISTS ix_graph_working_memory ON graph_working (tenant, memory_id, valid_to);
            """
        )

    def drop(self, conn: sqlite3.Connection) -> None:
        execute_script(conn, 
            "DROP TABLE IF EXISTS graph_memories; DROP TABLE IF EXISTS graph_edges; DROP TABLE IF EXISTS graph_working;"
        )

    def size(self, conn: sqlite3.Connection) -> int:
        return conn.execute("SELECT count(*) FROM graph_memories").fetchone()[0] + conn.execute(
            "SELECT count(*) FROM graph_edges"
        ).fetchone()[0]

    # -- applying ------------------------------------------------------------------

    def apply(self, events: Sequence[RecordedEvent], conn: sqlite3.Connection) -> None:
        inserts: list[tuple] = []
        working: list[tuple] = []

        def previous(tenant: str, memory_id: str) -> Previous | None:
            flush()
            row = conn.execute(
                "SELECT content, created_at, working_binding, status FROM graph_memories"
                " WHERE tenant = ? AND memory_id = ? AND valid_to IS NULL",
                (tenant, memory_id),
            ).fetchone()
            return Previous(decode_content(row[0]), row[1], row[2], row[3]) if row else None

        def flush() -> None:
            if inserts:
                conn.executemany(
                    f"INSERT INTO graph_memories ({MEMORY_COLUMNS}) VALUES (?,?,?,?,NULL,?,?,?,?,?,?,?,?,?,?,?)",
                    inserts,
                )
                inserts.clear()
            if working:
                conn.executemany(
                    "INSERT INTO graph_working (tenant, binding, memory_id, memory_type, position, valid_from) VALUES (?,?,?,?,?,?)",
                    working,
                )
                working.clear()

        memory_events = []
        links: list[tuple[str, int, c.EdgeRecord]] = []  # a run of EdgeLinked (a batch's mentions), opened in one statement

        def flush_links() -> None:
            if links:
                self._open_rows(conn, links)
                links.clear()

        for recorded in events:
            event = recorded.event
            if isinstance(event, c.MemoryEvent.__args__):
                memory_events.append(recorded)
                continue
            # Other events may depend on rows opened earlier in the batch.
            self._memories(memory_events, conn, inserts, working, previous, flush)
            memory_events = []
            flush()
            if isinstance(event, c.EdgeLinked):
                links.append((recorded.tenant, recorded.position, event.edge))
                continue
            flush_links()
            if isinstance(event, c.EdgeEvent.__args__):
                self._edge(recorded, conn)
            elif isinstance(event, (c.WorkingMemoryEvicted, c.WorkingMemoryWithdrawn)):
                conn.executemany(
                    "UPDATE graph_working SET valid_to = ? WHERE tenant = ? AND binding = ? AND valid_to IS NULL",
                    [(recorded.position, recorded.tenant, b) for b in event.bindings],
                )
            elif isinstance(event, c.WorkingMemoryRestored):
                conn.executemany(
                    "INSERT INTO graph_working (tenant, binding, memory_id, memory_type, position, valid_from) VALUES (?,?,?,?,?,?)",
                    [(recorded.tenant, e.binding, e.memory_id, e.memory_type, e.entered_at, recorded.position) for e in event.entries],
                )
            elif isinstance(event, c.TenantDropped):
                for table in ("graph_memories", "graph_edges", "graph_working"):
                    conn.execute(f"DELETE FROM {table} WHERE tenant = ?", (recorded.tenant,))
            elif isinstance(event, c.SubjectForgotten):
                erased = erased_rows(conn, recorded)
                self._erase(conn, recorded.tenant, erased)
                self._erase_edges(conn, recorded.tenant, event.subject, erased)
        flush_links()
        self._memories(memory_events, conn, inserts, working, previous, flush)
        flush()

    def _memories(self, events, conn, inserts, working, previous, flush) -> None:
        if not events:
            return
        for row in transitions(events, previous):
            if row.version > 1:
                flush()
                close_rows(conn, "graph_memories", row.tenant, row.memory_id, row.position)
            content = row.content
            inserts.append(
                (
                    row.tenant,
                    row.memory_id,
                    row.version,
                    row.position,
                    row.status,
                    content.memory_type,
                    folded_key(content.key),
                    content.collection,
                    content.doc_type,
                    content.doc_id,
                    content.model,
                    row.created_at,
                    row.updated_at,
                    row.working_binding,
                    encode_content(content),
                )
            )
            if row.version == 1 and row.working_binding:
                working.append((row.tenant, row.working_binding, row.memory_id, content.memory_type, row.position, row.position))

    @staticmethod
    def _erase(conn: sqlite3.Connection, tenant: str, erased: str) -> None:
        """Every version of a forgotten subject's memories reads as erased (those written before the position the
        table ``erased`` gives each, see :func:`~mnemolog.projections.memory_rows.erased_rows`): ids, times and statuses stay."""
        rows = conn.execute(
            f"SELECT g.row_id, g.content FROM {erased} AS b CROSS JOIN graph_memories AS g"
            " ON g.tenant = ? AND g.memory_id = b.memory_id WHERE +g.valid_from < b.position",
            (tenant,),
        ).fetchall()
        conn.executemany(
            "UPDATE graph_memories SET content = ?, key = NULL WHERE row_id = ?",
            [(encode_content(erase(decode_content(content))), row_id) for row_id, content in rows],
        )

    @staticmethod
    def _erase_edges(conn: sqlite3.Connection, tenant: str, subject: str, erased: str) -> None:
        """The properties of the subject's mention edges and of the mentions of the memories ``erased`` names
        (recorded before its position for each; see :meth:`_erase`), their aliases and evidence, read as erased, as
        a replay reads them: a mention recorded before its memory had the subject (sealed with the tenant's key, or
        unsealed) is its memory's too."""
        conn.execute(
            "UPDATE graph_edges SET properties = '{}' WHERE tenant = ? AND edge_type = ? AND properties != '{}'"
            f" AND (ifnull(subject, '') = ? OR valid_from < (SELECT b.position FROM {erased} AS b WHERE b.memory_id = source))",
            (tenant, g.MENTIONS, subject),
        )

    def _edge(self, recorded: RecordedEvent, conn: sqlite3.Connection) -> None:
        closed, opened = c.edge_changes(recorded.event)
        if closed:
            self._close(conn, recorded.tenant, recorded.position, [e.edge_id for e in closed])
        if opened:
            self._open(conn, recorded.tenant, recorded.position, opened)

    @classmethod
    def _open(cls, conn: sqlite3.Connection, tenant: str, position: int, edges) -> None:
        cls._open_rows(conn, [(tenant, position, e) for e in edges])

    @staticmethod
    def _open_rows(conn: sqlite3.Connection, rows: list[tuple[str, int, c.EdgeRecord]]) -> None:
        """Open an edge row per ``(tenant, position, edge)``, in order."""
        conn.executemany(
            "INSERT INTO graph_edges (tenant, edge_id, edge_type, source, target, weight, properties, valid_from, valid_to, subject, merged_from)"
            " VALUES (?,?,?,?,?,?,?,?,NULL,?,?)",
            [
                (
                    tenant, e.edge_id, e.edge_type, e.source, e.target, e.weight, _edge_props.encode(e.properties).decode(), position, e.subject,
                    _edge_props.encode(e.merged_from).decode() if e.merged_from else None,
                )
                for tenant, position, e in rows
            ],
        )

    @staticmethod
    def _close(conn: sqlite3.Connection, tenant: str, position: int, edge_ids) -> None:
        conn.executemany(
            "UPDATE graph_edges SET valid_to = ? WHERE tenant = ? AND edge_id = ? AND valid_to IS NULL",
            [(position, tenant, edge_id) for edge_id in edge_ids],
        )


#: The columns :func:`edge_from_row` reads, in its order.
EDGE_COLUMNS = "edge_id, edge_type, source, target, weight, properties, valid_from, valid_to, subject, merged_from"


def edge_from_row(row: sqlite3.Row | tuple) -> c.EdgeRecord:
    """An edge from a row of :data:`EDGE_COLUMNS` (or of its first six columns)."""
    edge_id, edge_type, source, target, weight, properties = row[:6]
    return c.EdgeRecord(
        edge_id=edge_id,
        edge_type=edge_type,
        source=source,
        target=target,
        weight=weight,
        properties=_dict_decoder.decode(properties),
        subject=row[8] if len(row) > 8 else None,
        merged_from=merged_from(row[9] if len(row) > 9 else None),
    )


def merged_from(column: str | None) -> tuple[str, ...]:
    """The ids a ``merged_from`` column holds."""
    return tuple(_ids_decoder.decode(column)) if column else ()
