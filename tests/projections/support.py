"""Helpers shared by the projector tests: writers of real catalogue events, and dumps of projection tables."""

from __future__ import annotations

import random
import sqlite3
from contextlib import contextmanager
from pathlib import Path

from mnemolog.eventstore import ANY, NO_STREAM, EventStore, StreamAppend
from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.model import MemoryContent
from mnemolog.projections.fts.projector import DOC_COLUMNS, INDEXED, FtsProjector, fts_search
from mnemolog.projections.runner import ProjectionRunner

STAMP = "2024-01-01T00:00:00Z"
TENANTS = ("t1", "t2")


class Log:
    """Real catalogue events appended to a real store; positions returned."""

    def __init__(self, store: EventStore):
        self.store = store

    def add(self, memory_id: str, text: str, *, tenant: str = "t", created_at: str = STAMP, **content) -> int:
        event = c.MemoryAdded(memory_id=memory_id, content=MemoryContent(memory=text, **content), created_at=created_at)
        return self._append(memory_id, event, tenant, NO_STREAM)

    def update(self, memory_id: str, text: str, *, tenant: str = "t", updated_at: str = STAMP, **content) -> int:
        event = c.MemoryUpdated(
            memory_id=memory_id, content=MemoryContent(memory=text, **content), changed=("memory",), updated_at=updated_at
        )
        return self._append(memory_id, event, tenant)

    def archive(self, memory_id: str, *, tenant: str = "t") -> int:
        return self._append(memory_id, c.MemoryArchived(memory_id=memory_id, updated_at=STAMP), tenant)

    def drop(self, tenant: str) -> int:
        event = c.TenantDropped(backup="none", events_backed_up=0)
        return self.store.append_batch([StreamAppend(c.tenant_stream(tenant), [event])], tenant=tenant).last_position

    def _append(self, memory_id, event, tenant, expected=ANY) -> int:
        write = StreamAppend(c.memory_stream(memory_id), [event], expected)
        return self.store.append_batch([write], tenant=tenant).last_position


# -- table dumps ------------------------------------------------------------------------


def owned_tables(projector) -> list[str]:
    """The plain tables a projector creates (virtual tables and their shadow tables left out).

    An external-content FTS5 index is compared through its content table.
    """
    scratch = sqlite3.connect(":memory:", isolation_level=None)
    try:
        projector.create(scratch)
        rows = scratch.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'").fetchall()
    finally:
        scratch.close()
    virtual = [name for name, sql in rows if (sql or "").upper().startswith("CREATE VIRTUAL TABLE")]
    return sorted(
        name
        for name, _ in rows
        if name != "checkpoints" and name not in virtual and not any(name.startswith(v + "_") for v in virtual)
    )


def dump_table(conn: sqlite3.Connection, table: str) -> list[tuple]:
    """Every row, sorted, without the rowid-alias key (its values depend on insert history)."""
    info = conn.execute(f'PRAGMA table_info("{table}")').fetchall()
    keys = [r for r in info if r[5]]
    rowid_alias = keys[0][1] if len(keys) == 1 and keys[0][2].upper() == "INTEGER" else None
    columns = [r[1] for r in info if r[1] != rowid_alias]
    selected = ", ".join(f'"{col}"' for col in columns)
    rows = conn.execute(f'SELECT {selected} FROM "{table}"').fetchall()
    return sorted(rows, key=repr)


def check_fts_indexes(conn: sqlite3.Connection) -> None:
    """Every FTS5 index agrees with its content (raises when it does not)."""
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%USING fts5%'"):
        conn.execute(f'INSERT INTO "{name}"("{name}", rank) VALUES (\'integrity-check\', 1)')


def dump(runner: ProjectionRunner) -> dict[str, dict[str, list[tuple]]]:
    check_fts_indexes(runner.conn)
    return {p.name: {t: dump_table(runner.conn, t) for t in owned_tables(p)} for p in runner.projectors}


# -- a log written straight to the store ----------------------------------------------------------


def write_log(store: EventStore, rng: random.Random, target: int) -> None:
    """A log of memory, edge and working-memory events, written straight to the store."""
    stamp = "2026-01-01T00:00:00.000000Z"
    alive: dict[str, list[str]] = {t: [] for t in TENANTS}
    bindings: dict[str, list[str]] = {t: [] for t in TENANTS}
    edges: dict[str, list[c.EdgeRecord]] = {t: [] for t in TENANTS}
    n = 0
    while store.last_position() < target:
        tenant = rng.choice(TENANTS)
        writes: list[StreamAppend] = []
        for _ in range(40):
            n += 1
            roll = rng.random()
            mems = alive[tenant]
            if roll < 0.35 or len(mems) < 2:
                memory_id, binding = f"m{n}", f"b{n}"
                content = MemoryContent(memory=f"memory number {n} about topic {n % 17}", tags=(f"x{n % 5}",))
                writes.append(StreamAppend(c.memory_stream(memory_id), [c.MemoryAdded(memory_id=memory_id, content=content, created_at=stamp, working_binding=binding)], NO_STREAM))
                mems.append(memory_id)
                bindings[tenant].append(binding)
            elif roll < 0.6:
                memory_id = rng.choice(mems)
                content = MemoryContent(memory=f"memory {memory_id} edited at {n}", key=f"k{n % 3}")
                writes.append(StreamAppend(c.memory_stream(memory_id), [c.MemoryUpdated(memory_id=memory_id, content=content, changed=("memory",), updated_at=stamp)]))
            elif roll < 0.72:
                memory_id = rng.choice(mems)
                event = rng.choice([c.MemoryArchived, c.MemorySoftDeleted, c.MemoryRestored])(memory_id=memory_id, updated_at=stamp)
                writes.append(StreamAppend(c.memory_stream(memory_id), [event]))
            elif roll < 0.9:
                source, target_id = rng.sample(mems, 2)
                edge = c.EdgeRecord(edge_id=f"{rng.choice(['user', 'mention'])}:r{n % 3}:{n}", edge_type="RELATED", source=source, target=target_id, weight=rng.choice([0.5, 1.0]))
                edges[tenant].append(edge)
                writes.append(StreamAppend(c.edges_stream(tenant), [c.EdgeLinked(edge=edge)]))
            elif roll < 0.97 and edges[tenant]:
                edge = edges[tenant].pop(rng.randrange(len(edges[tenant])))
                writes.append(StreamAppend(c.edges_stream(tenant), [c.EdgeUnlinked(edge=edge)]))
            elif len(bindings[tenant]) > 3:
                leaving = bindings[tenant][:2]
                del bindings[tenant][:2]
                writes.append(StreamAppend(c.working_stream(tenant), [c.WorkingMemoryEvicted(bindings=tuple(leaving), memory_ids=(), capacity=4)]))
        store.append_batch(writes, tenant=tenant)




def choke_on(monkeypatch, word: str, *, queries: bool = True) -> None:
    """Make the default (hashing) embedder raise on every text holding ``word`` (and query, unless ``queries`` is
    False), as a model that chokes on one input does; every other text is embedded as ever."""
    from mnemolog.projections.vectors import embedders

    inner = embedders.HashingEmbedder()

    class Choking:
        name, dim = inner.name, inner.dim

        def embed(self, texts):
            if any(word in t for t in texts):
                raise RuntimeError("the model choked")
            return inner.embed(texts)

        def embed_query(self, text):
            if queries and word in text:
                raise RuntimeError("the model choked")
            return inner.embed_query(text)

    monkeypatch.setitem(embedders._instances, "hashing", Choking())


async def serve_chat_completions(aiohttp_server, handle) -> str:
    """An OpenAI-compatible ``POST /v1/chat/completions`` on loopback, answered by ``handle``: its base URL (``…/v1``)."""
    from aiohttp import web

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    server = await aiohttp_server(app, host="127.0.0.1")
    return str(server.make_url("/v1"))


def exact_as_of(conn, tenant: str, query: str, limit: int, as_of: int | None, filters, terms=None) -> list:
    """The exact FTS5 statement's answer over the rows indexed by ``as_of`` (all of them at the head): an index
    holding only those, as the projection held them then, less what a tenant drop took out since."""
    if as_of is None:
        return fts_search(conn, tenant, query, limit=limit, filters=filters, exact=True, terms=terms)
    copy = sqlite3.connect(":memory:")
    try:
        FtsProjector().create(copy)
        rows = conn.execute(f"SELECT row_id, {DOC_COLUMNS} FROM fts_docs WHERE valid_from <= ? ORDER BY row_id", (as_of,)).fetchall()
        copy.executemany(f"INSERT INTO fts_docs (row_id, {DOC_COLUMNS}) VALUES ({', '.join('?' * (DOC_COLUMNS.count(',') + 2))})", rows)
        copy.execute(f"INSERT INTO fts_index (rowid, {INDEXED}) SELECT row_id, {INDEXED} FROM fts_docs")
        return fts_search(copy, tenant, query, limit=limit, as_of=as_of, filters=filters, exact=True, terms=terms)
    finally:
        copy.close()


@contextmanager
def fts_log(path: Path):
    """A store in ``path`` with the full-text projection's runner and a :class:`Log` writing to it, closed after."""
    store = EventStore.open(path)
    runner = ProjectionRunner(store, path / "projections.db", [FtsProjector()])
    try:
        yield runner, Log(store)
    finally:
        runner.close()
        store.close()
