"""The answer's subgraph: how the items a recall returns relate to one another.

Edges between them (entity relations and ``MENTIONS`` included), the sources
two memories share, and the memories that are chunks of one document.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

import msgspec

from ..graph import reads as graph_reads

if TYPE_CHECKING:
    from .searcher import RecallHit


class Relationship(msgspec.Struct, frozen=True):
    kind: str  # edge | shared_source | same_document
    a: str
    b: str
    detail: dict[str, Any] = {}


def relationships(conn: sqlite3.Connection, tenant: str, hits: list[RecallHit], as_of: int | None) -> list[Relationship]:
    """Edges between the results (entity relations and ``MENTIONS`` included: a small answer subgraph), shared sources, results from one document."""
    ids = [h.id for h in hits]
    views = [h.memory for h in hits if h.memory is not None]
    out = [
        Relationship("edge", e.source, e.target, {"edge_id": e.edge_id, "edge_type": e.edge_type, "weight": e.weight})
        for e in graph_reads.edges_between(conn, tenant, ids, as_of=as_of)
    ]
    by_source: dict[str, list[str]] = {}
    by_doc: dict[str, list[str]] = {}
    for v in views:
        for source in v.sources:
            by_source.setdefault(source, []).append(v.id)
        doc = v.metadata.get("doc_id")
        if doc:
            by_doc.setdefault(doc, []).append(v.id)
    for source, members in by_source.items():
        for a, b in zip(members, members[1:]):
            out.append(Relationship("shared_source", a, b, {"source": source}))
    for doc, members in by_doc.items():
        for a, b in zip(members, members[1:]):
            out.append(Relationship("same_document", a, b, {"doc_id": doc}))
    return out
