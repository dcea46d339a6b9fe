"""The facts commands need from the graph projection (:class:`mnemolog.eventstore.commands.GraphFacts`): live edges,
nodes, merges, working memory, and the memories of a subject, read at the log's head."""

from __future__ import annotations

import itertools
import sqlite3
from typing import Any, Callable, Sequence

import msgspec

from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.catalogue_graph import MERGED_EDGE_PREFIX

from .projector import EDGE_COLUMNS as _EDGE_COLUMNS, edge_from_row
from .reads import working_memory


class ProjectionFacts:
    """:class:`mnemolog.eventstore.commands.GraphFacts` answered from the graph projection.

    ``sync`` is called first, so answers reflect the log's head (``sync(head=True)``: even inside a command
    that has appended nothing since its catch-up). Nodes that are not memories (entities, documents) are
    found by ``node_resolvers``.
    """

    def __init__(
        self,
        connect: Callable[[], sqlite3.Connection],
        sync: Callable[..., Any],
        node_resolvers: Sequence[Callable[[sqlite3.Connection, str, str], bool]] = (),
    ):
        self._connect = connect
        self._sync = sync
        self.node_resolvers: list[Callable[[sqlite3.Connection, str, str], bool]] = list(node_resolvers)

    def live_edges_of(self, tenant: str, node_ids: Sequence[str]) -> list[c.EdgeRecord]:
        self._sync()
        conn = self._connect()
        out: dict[str, c.EdgeRecord] = {}
        for node in node_ids:
            for side in ("source", "target"):
                for row in conn.execute(
                    f"SELECT {_EDGE_COLUMNS} FROM graph_edges WHERE tenant = ? AND {side} = ? AND valid_to IS NULL ORDER BY row_id",
                    (tenant, node),
                ):
                    out.setdefault(row[0], edge_from_row(row))
        return list(out.values())

    def live_edges_with_prefix(self, tenant: str, prefix: str) -> list[c.EdgeRecord]:
        self._sync()
        rows = self._connect().execute(
            f"SELECT {_EDGE_COLUMNS} FROM graph_edges WHERE tenant = ? AND edge_id >= ? AND edge_id < ?"
            " AND valid_to IS NULL ORDER BY row_id",
            (tenant, prefix, prefix + "\U0010ffff"),
        )
        return [edge_from_row(r) for r in rows]

    def quoting_memories(self, tenant: str, memory_ids: Sequence[str]) -> list[str]:
        """Ids of the memories whose text was made from any of ``memory_ids`` (or from such a memory), at any
        time: the organizer's topics over them (``parent:`` edges, through every level) and the memories
        merged from them (``MERGED_TO``). Their texts quote them."""
        self._sync()
        conn = self._connect()
        found: set[str] = set()
        frontier = set(memory_ids)
        while frontier:
            ids = msgspec.json.encode(sorted(frontier)).decode()
            rows = conn.execute(
                "SELECT e.source FROM json_each(?) AS j JOIN graph_edges AS e ON e.tenant = ? AND e.target = j.value"
                " WHERE e.edge_type = 'PARENT' AND e.edge_id LIKE 'parent:%'"
                " UNION SELECT e.target FROM json_each(?) AS j JOIN graph_edges AS e ON e.tenant = ? AND e.source = j.value"
                " WHERE e.edge_type = 'MERGED_TO'",
                (ids, tenant, ids, tenant),
            )
            frontier = {r[0] for r in rows} - found - set(memory_ids)
            found |= frontier
        return sorted(found)

    def subject_memories(self, tenant: str, subject: str) -> list[str]:
        """Ids of the memories any version of which names ``subject`` (``""``: names none, so the tenant's key sealed it),
        as of the log's head when called: a forget takes that position to look for later writes from."""
        self._sync(head=True)
        named = "IS NULL" if subject == "" else "= ?"
        rows = self._connect().execute(
            f"SELECT DISTINCT memory_id FROM graph_memories WHERE tenant = ? AND json_extract(content, '$.subject') {named}"
            " ORDER BY memory_id",
            (tenant,) if subject == "" else (tenant, subject),
        )
        return [r[0] for r in rows]

    def moved_away(self, tenant: str, subject: str, memory_ids: Sequence[str]) -> dict[str, int]:
        """Of ``memory_ids``, those whose latest version names another subject than ``subject`` (``""``: none), by
        the position of their first version after their last one of ``subject``: from there on they are another's."""
        rows = self._connect().execute(
            "SELECT g.memory_id, g.valid_from, ifnull(json_extract(g.content, '$.subject'), '') FROM json_each(?) AS j"
            " CROSS JOIN graph_memories AS g ON g.tenant = ? AND g.memory_id = j.value ORDER BY g.memory_id, g.valid_from",
            (msgspec.json.encode(list(memory_ids)).decode(), tenant),
        )
        found: dict[str, int] = {}
        for memory_id, group in itertools.groupby(rows, key=lambda r: r[0]):
            versions = list(group)
            named = [i for i, v in enumerate(versions) if v[2] == subject]
            if named and named[-1] < len(versions) - 1:
                found[memory_id] = versions[named[-1] + 1][1]
        return found

    def live_edge(self, tenant: str, edge_id: str) -> c.EdgeRecord | None:
        self._sync()
        row = self._connect().execute(
            f"SELECT {_EDGE_COLUMNS} FROM graph_edges WHERE tenant = ? AND edge_id = ? AND valid_to IS NULL",
            (tenant, edge_id),
        ).fetchone()
        return edge_from_row(row) if row else None

    def relation_edge(self, tenant: str, source: str, relation_type: str, target: str) -> c.EdgeRecord | None:
        self._sync()
        row = self._connect().execute(
            f"SELECT {_EDGE_COLUMNS} FROM graph_edges WHERE tenant = ? AND source = ? AND target = ? AND edge_type = ?"
            " AND valid_to IS NULL AND edge_id LIKE 'rel:%' ORDER BY row_id LIMIT 1",
            (tenant, source, target, relation_type),
        ).fetchone()
        return edge_from_row(row) if row else None

    def node_exists(self, tenant: str, node_id: str) -> bool:
        if self.memory_status(tenant, node_id) is not None:
            return True
        conn = self._connect()
        return any(resolver(conn, tenant, node_id) for resolver in self.node_resolvers)

    def memory_status(self, tenant: str, node_id: str) -> str | None:
        self._sync()
        row = self._connect().execute(
            "SELECT status FROM graph_memories WHERE tenant = ? AND memory_id = ? AND valid_to IS NULL", (tenant, node_id)
        ).fetchone()
        return row[0] if row else None

    def merged_into(self, tenant: str, node_id: str) -> tuple[str, int] | None:
        """The edge's row starts where a later merge of the merged memory re-pointed it (that merge did not take
        ``node_id`` in): the merge that did is where the memory's current run of archived versions starts."""
        self._sync()
        conn = self._connect()
        row = conn.execute(
            "SELECT target, valid_from FROM graph_edges WHERE tenant = ? AND source = ? AND edge_type = 'MERGED_TO'"
            " AND edge_id >= ? AND edge_id < ? AND valid_to IS NULL ORDER BY row_id LIMIT 1",
            (tenant, node_id, MERGED_EDGE_PREFIX, MERGED_EDGE_PREFIX[:-1] + ";"),
        ).fetchone()
        if row is None:
            return None
        [archived_at] = conn.execute(
            "SELECT min(valid_from) FROM graph_memories WHERE tenant = ? AND memory_id = ? AND status = 'archived' AND version >"
            " (SELECT coalesce(max(version), 0) FROM graph_memories WHERE tenant = ? AND memory_id = ? AND status != 'archived')",
            (tenant, node_id, tenant, node_id),
        ).fetchone()
        return (row[0], row[1] if archived_at is None else archived_at)

    def working_memory(self, tenant: str) -> list[tuple[str, str, str]]:
        return [(e.binding, e.memory_id, e.memory_type) for e in self.working_entries(tenant)]

    def working_entries(self, tenant: str) -> list[c.WorkingEntry]:
        self._sync()
        return [
            c.WorkingEntry(binding=e.binding, memory_id=e.memory_id, memory_type=e.memory_type, entered_at=e.entered_at)
            for e in working_memory(self._connect(), tenant)
        ]

    def working_stay(self, tenant: str, memory_id: str) -> tuple[c.WorkingEntry, int | None] | None:
        self._sync()
        row = self._connect().execute(
            "SELECT binding, memory_type, position, valid_to FROM graph_working WHERE tenant = ? AND memory_id = ?"
            " ORDER BY valid_to IS NULL DESC, valid_to DESC, row_id DESC LIMIT 1",
            (tenant, memory_id),
        ).fetchone()
        if row is None:
            return None
        binding, memory_type, position, valid_to = row
        return c.WorkingEntry(binding=binding, memory_id=memory_id, memory_type=memory_type, entered_at=position), valid_to
