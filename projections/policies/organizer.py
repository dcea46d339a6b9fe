"""The organizer: a log follower that dedups memories and resolves conflicts, as events.

It reads ``MemoryAdded`` / ``MemoriesMerged`` / ``MemoryUpdated`` (text or key
changed) after its own checkpoint, in batches. For every memory of a batch
that is still activated it gathers candidates among the activated memories of
the same tenant and memory type (the batch's other items included, since
they are projected already):

- vectors: cosine >= ``organizer_min_cosine``, the ``organizer_top_k`` best;
- lexical near-duplicates the vectors miss: the same normalised text
  (casefold, punctuation, whitespace), found through a hash lookup;
- the same ``key`` (a key is a slot with one value: a prime contradiction).

A judge labels each pair. Redundant pairs are grouped (never across a pair
judged contradictory) and each group becomes one ``merge``; a contradictory
pair becomes a ``supersede`` of the older memory (by ``updated_at``) by the
newer. Every event carries a :class:`~eventstore.catalogue.Decision`; a pass
has one correlation id (``revert`` undoes it) and each decision's causation
id is the triggering event's id. Decisions are appended with an idempotency
key derived from (organizer, triggering position, members), and the
checkpoint (table ``organizer_checkpoint`` in ``projections.db``) moves only
after a batch's decisions are appended: after a crash a batch is processed
again, and its decisions are either replayed no-ops or skipped because their
memories are no longer activated. Reverted memories come back through
``MemoryRolledBack``, which is not a trigger, so a revert sticks.

Vectors come from the vectors projection (``vec_docs``) when it holds the
memory's current version, else from the configured embedder (cached by text).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import time
from collections import defaultdict
from typing import Any, Callable, NamedTuple

import msgspec
import numpy as np

from eventstore import catalogue as c
from eventstore.commands import CommandContext
from eventstore.errors import IdempotencyConflict
from eventstore.ids import new_id
from eventstore.model import Conflict, MemoryContent, NotFound
from eventstore.settings import Settings

from ..embedders import get_embedder
from ..runner import connect
from .judge import JudgedMemory, Verdict, merged_text, normalize_text
from .settings import build_judge, type_list

log = logging.getLogger("memledger.organizer")
TRIGGERS = ("MemoryAdded", "MemoriesMerged", "MemoryUpdated")
ACTOR = "organizer"
_content = msgspec.json.Decoder(MemoryContent)


class Item(NamedTuple):
    id: str
    version: int
    valid_from: int
    updated_at: str
    content: MemoryContent

    def judged(self) -> JudgedMemory:
        c_ = self.content
        return JudgedMemory(self.id, c_.memory, c_.key, c_.memory_type, self.updated_at, c_.tags, c_.sources)


class Corpus:
    """The activated memories of one tenant and memory type at the head, with unit vectors."""

    def __init__(self, tenant: str, memory_type: str, items: list[Item], vectors: np.ndarray):
        self.tenant, self.memory_type, self.items, self.vectors = tenant, memory_type, items, vectors
        self.row = {item.id: i for i, item in enumerate(items)}


class Vectors:
    """Unit vectors for memories: ``vec_docs`` rows of the current version, else the embedder."""

    def __init__(self, service, embedder_name: str, cache_limit: int = 200_000):
        self.service = service
        self.embedder = get_embedder(embedder_name)
        self.cache: dict[str, np.ndarray] = {}
        self.norms: dict[str, str] = {}
        self.cache_limit = cache_limit
        self._lock = threading.Lock()

    def _from_projection(self, conn, tenant: str, items: list[Item]) -> dict[str, np.ndarray]:
        cols = {r[1] for r in conn.execute("PRAGMA table_info(vec_docs)")}
        if not {"tenant", "memory_id", "version", "valid_to", "vector"} <= cols:
            return {}
        wanted = {i.id: i.version for i in items}
        found: dict[str, np.ndarray] = {}
        ids = list(wanted)
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            rows = conn.execute(
                f"SELECT memory_id, version, vector FROM vec_docs WHERE tenant = ? AND valid_to IS NULL"
                f" AND memory_id IN ({','.join('?' * len(chunk))})",
                (tenant, *chunk),
            )
            for memory_id, version, blob in rows:
                vec = np.frombuffer(blob, dtype=np.float32) if blob else None
                if vec is not None and version == wanted[memory_id] and vec.shape[0] == self.embedder.dim:
                    found[memory_id] = vec
        return found

    def matrix(self, tenant: str, items: list[Item]) -> np.ndarray:
        out = np.zeros((len(items), self.embedder.dim), dtype=np.float32)
        if not items:
            return out
        try:
            projected = self._from_projection(self.service.read_conn(), tenant, items)
        except Exception:  # no vectors projection here: embed
            projected = {}
        with self._lock:
            if len(self.cache) > self.cache_limit:
                self.cache.clear()
            missing = sorted({i.content.memory for i in items if i.id not in projected and i.content.memory not in self.cache})
            if missing:
                for text, vec in zip(missing, self.embedder.embed(missing)):
                    self.cache[text] = vec
            for n, item in enumerate(items):
                out[n] = projected.get(item.id, self.cache.get(item.content.memory))
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def norm_key(self, text: str) -> str:
        key = self.norms.get(text)
        if key is None:
            if len(self.norms) > self.cache_limit:
                self.norms.clear()
            key = self.norms[text] = hashlib.blake2b(normalize_text(text).encode(), digest_size=12).hexdigest()
        return key


def load_items(conn, tenant: str, memory_type: str | None = None, ids: list[str] | None = None) -> list[Item]:
    """Activated memories at the head (of one type, or the given ids), ordered by id."""
    sql = "SELECT memory_id, version, valid_from, updated_at, content FROM graph_memories WHERE tenant = ? AND status = 'activated' AND valid_to IS NULL"
    params: list[Any] = [tenant]
    if memory_type is not None:
        sql += " AND memory_type = ?"
        params.append(memory_type)
    if ids is not None:
        out: list[Item] = []
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            q = sql + f" AND memory_id IN ({','.join('?' * len(chunk))})"
            out += [Item(r[0], r[1], r[2], r[3], _content.decode(r[4])) for r in conn.execute(q, (*params, *chunk))]
        return sorted(out)
    rows = conn.execute(sql + " ORDER BY memory_id", params)
    return [Item(r[0], r[1], r[2], r[3], _content.decode(r[4])) for r in rows]


class Pair(NamedTuple):
    tenant: str
    memory_type: str
    a: Item
    b: Item
    cosine: float
    position: int  # the triggering event
    event_id: str


class Planned(msgspec.Struct, kw_only=True):
    """One decision the organizer will append (or, in a dry run, would)."""

    action: str  # merge | supersede
    tenant: str
    memory_type: str
    memory_ids: list[str]  # merge: the group; supersede: [older, newer]
    versions: dict[str, int]
    texts: dict[str, str]
    text: str | None
    decision: c.Decision
    position: int
    causation_id: str
    idempotency_key: str

    def describe(self) -> dict[str, Any]:
        out = msgspec.to_builtins(self)
        out.pop("versions")
        return out


class Organizer:
    def __init__(self, service, settings: Settings | None = None, judge=None):
        self.service = service
        self.settings = settings or service.settings
        self._own_judge = judge is None
        self.judge = judge if judge is not None else build_judge(self.settings)
        self.enabled = bool(self.settings.organizer_enabled)
        self.types = set(type_list(self.settings))
        self.vectors = Vectors(service, str(self.settings.embedder))
        self._conn = connect(service.runner.path)
        self._conn_lock = threading.Lock()
        with self._conn_lock:
            self._conn.execute("CREATE TABLE IF NOT EXISTS organizer_checkpoint (name TEXT PRIMARY KEY, position INTEGER NOT NULL)")
        self._position = self.checkpoint()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._waiters_lock = threading.Lock()
        self.decisions: dict[str, dict[str, int]] = defaultdict(lambda: {"merge": 0, "supersede": 0})
        self.last_run: dict[str, Any] | None = None
        self.last_cluster: dict[str, Any] | None = None
        self.stopped = False

    # -- checkpoint and waiting ----------------------------------------------------------

    def checkpoint(self, name: str = "organizer") -> int:
        with self._conn_lock:
            row = self._conn.execute("SELECT position FROM organizer_checkpoint WHERE name = ?", (name,)).fetchone()
        return row[0] if row else 0

    def _save(self, name: str, position: int) -> None:
        with self._conn_lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.execute("INSERT OR REPLACE INTO organizer_checkpoint (name, position) VALUES (?, ?)", (name, position))
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        if name == "organizer":
            self._position = position
            with self._waiters_lock:
                for loop, event in self._waiters:
                    try:
                        loop.call_soon_threadsafe(event.set)
                    except RuntimeError:  # that loop is closed
                        pass

    @property
    def position(self) -> int:
        return self._position

    async def wait_for(self, position: int, timeout: float) -> bool:
        """Wait until the organizer has processed the log up to ``position``; False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, float(timeout))
        while self._position < position and self.enabled:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            event = asyncio.Event()
            entry = (loop, event)
            with self._waiters_lock:
                self._waiters.append(entry)
            try:
                if self._position < position:
                    await asyncio.wait_for(event.wait(), remaining)
            except asyncio.TimeoutError:
                pass
            finally:
                with self._waiters_lock:
                    self._waiters.remove(entry)
        return self._position >= position

    def status(self, tenant: str, min_position: int | None = None) -> dict[str, Any]:
        target = self.service.store.last_position() if min_position is None else min_position
        counts = self.decisions.get(tenant, {"merge": 0, "supersede": 0})
        return {
            "position": self._position,
            "enabled": self.enabled,
            "last_run": self.last_run,
            "last_cluster": self.last_cluster,
            "decisions": sum(counts.values()),
            "decisions_by_action": dict(counts),
            "caught_up": self._position >= target,
        }

    # -- finding pairs ---------------------------------------------------------------------

    def _batch(self, tenant: str | None, after: int, head: int) -> tuple[list, int]:
        limit = int(self.settings.organizer_batch)
        events = self.service.store.read_all(after=after, limit=limit, until=head, tenant=tenant, types=TRIGGERS)
        return events, (events[-1].position if len(events) == limit else head)

    def _pairs(self, events) -> list[Pair]:
        triggers: dict[tuple[str, str], Any] = {}
        for r in events:
            e = r.event
            if isinstance(e, c.MemoryAdded) and e.origin == "topic":
                continue
            if isinstance(e, c.MemoryUpdated) and not {"memory", "key"} & set(e.changed):
                continue
            if e.content.memory_type in self.types:
                triggers.setdefault((r.tenant, e.memory_id), r)
        groups: dict[tuple[str, str], list] = defaultdict(list)
        for (tenant, memory_id), r in triggers.items():
            groups[(tenant, r.event.content.memory_type)].append((memory_id, r))
        pairs: dict[tuple[str, str, str], Pair] = {}
        conn = self.service.read_conn()
        for (tenant, memory_type), members in sorted(groups.items()):
            corpus = self.corpus(conn, tenant, memory_type)
            rows = [(corpus.row[m], r) for m, r in members if m in corpus.row]  # skip the no longer activated
            for i, j, cos, r in self._candidates(corpus, rows):
                a, b = sorted((corpus.items[i], corpus.items[j]))
                key = (tenant, a.id, b.id)
                if key not in pairs or r.position < pairs[key].position:
                    pairs[key] = Pair(tenant, memory_type, a, b, cos, r.position, r.event_id)
        return sorted(pairs.values(), key=lambda p: (p.position, -p.cosine, p.a.id, p.b.id))

    def corpus(self, conn, tenant: str, memory_type: str) -> Corpus:
        items = load_items(conn, tenant, memory_type)
        return Corpus(tenant, memory_type, items, self.vectors.matrix(tenant, items))

    def _candidates(self, corpus: Corpus, rows: list[tuple[int, Any]]):
        if not rows:
            return
        min_cos, top_k = float(self.settings.organizer_min_cosine), int(self.settings.organizer_top_k)
        X = corpus.vectors
        by_norm: dict[str, list[int]] = defaultdict(list)
        by_key: dict[str, list[int]] = defaultdict(list)
        for n, item in enumerate(corpus.items):
            by_norm[self.vectors.norm_key(item.content.memory)].append(n)
            if item.content.key and item.content.key.strip():
                by_key[" ".join(item.content.key.casefold().split())].append(n)
        for start in range(0, len(rows), 256):
            chunk = rows[start : start + 256]
            idx = np.fromiter((i for i, _ in chunk), dtype=np.int64, count=len(chunk))
            sims = X[idx] @ X.T
            sims[np.arange(len(chunk)), idx] = -1.0
            for n, (i, r) in enumerate(chunk):
                s = sims[n]
                found = np.flatnonzero(s >= min_cos)
                if len(found) > top_k:
                    found = found[np.argsort(-s[found], kind="stable")[:top_k]]
                chosen = {int(j) for j in found}
                item = corpus.items[i]
                extra = by_norm[self.vectors.norm_key(item.content.memory)]
                if item.content.key and item.content.key.strip():
                    extra = extra + by_key[" ".join(item.content.key.casefold().split())]
                extra = sorted((j for j in set(extra) if j != i and j not in chosen), key=lambda j: -s[j])[:top_k]
                for j in sorted(chosen | set(extra)):
                    yield i, j, float(max(s[j], 0.0)), r

    # -- judging and deciding -----------------------------------------------------------------

    def _sync_judge(self) -> bool:
        return hasattr(self.judge, "judge_sync")

    def _judge_all(self, pairs: list[Pair]) -> list[Verdict]:
        return [self.judge.judge_sync(p.a.judged(), p.b.judged(), p.cosine) for p in pairs]

    async def _ajudge_all(self, pairs: list[Pair]) -> list[Verdict]:
        return list(await asyncio.gather(*(self.judge.judge(p.a.judged(), p.b.judged(), p.cosine) for p in pairs)))

    def _decide(self, pairs: list[Pair], verdicts: list[Verdict]) -> list[Planned]:
        parent: dict[tuple[str, str], tuple[str, str]] = {}
        members: dict[tuple[str, str], set] = {}

        def find(x):
            while parent.get(x, x) != x:
                x = parent[x]
            return x

        against = {((p.tenant, p.a.id), (p.tenant, p.b.id)) for p, v in zip(pairs, verdicts) if v.label == "contradictory"}
        against |= {(y, x) for x, y in against}
        redundant = sorted(((p, v) for p, v in zip(pairs, verdicts) if v.label == "redundant"), key=lambda pv: (-pv[0].cosine, pv[0].position, pv[0].a.id, pv[0].b.id))
        used: dict[tuple[str, str], list[tuple[Pair, Verdict]]] = defaultdict(list)
        for p, v in redundant:
            ra, rb = find((p.tenant, p.a.id)), find((p.tenant, p.b.id))
            if ra == rb:
                used[ra].append((p, v))
                continue
            ga, gb = members.get(ra, {ra}), members.get(rb, {rb})
            if any((x, y) in against for x in ga for y in gb):
                continue
            parent[rb] = ra
            members[ra] = ga | gb
            members.pop(rb, None)
            used[ra] += used.pop(rb, []) + [(p, v)]
        planned: list[Planned] = []
        merged: set = set()
        for root, group in members.items():
            planned.append(self._merge_plan(used[root]))
            merged |= group
        archived: set = set()
        contradictions = [(p, v) for p, v in zip(pairs, verdicts) if v.label == "contradictory"]
        ordered = []
        for p, v in contradictions:
            older, newer = sorted((p.a, p.b), key=lambda it: (it.updated_at, it.valid_from, it.id))
            ordered.append((older, newer, p, v))
        for older, newer, p, v in sorted(ordered, key=lambda t: (t[0].updated_at, t[0].valid_from, t[1].updated_at, t[1].valid_from)):
            keys = {(p.tenant, older.id), (p.tenant, newer.id)}
            if keys & merged or keys & archived:
                continue
            archived.add((p.tenant, older.id))
            planned.append(self._plan("supersede", p, [older, newer], None, _decision([v], p.cosine)))
        return sorted(planned, key=lambda x: (x.position, x.action, x.memory_ids))

    def _merge_plan(self, used: list[tuple[Pair, Verdict]]) -> Planned:
        best_pair, best = used[0]
        items = {it.id: it for p, _ in used for it in (p.a, p.b)}
        ordered = sorted(items.values(), key=lambda it: (it.updated_at, it.valid_from, it.id), reverse=True)  # newest first
        text = best.fused_text or merged_text(best_pair.a.judged(), best_pair.b.judged())
        for it in ordered:
            if it.id not in (best_pair.a.id, best_pair.b.id):
                text = merged_text(text, it.content.memory)
        first = min(used, key=lambda pv: pv[0].position)[0]
        return self._plan("merge", first, ordered, text, _decision([v for _, v in used], best_pair.cosine))

    @staticmethod
    def _plan(action: str, trigger: Pair, items: list[Item], text: str | None, decision: c.Decision) -> Planned:
        ids = [it.id for it in items]
        raw = f"{ACTOR}|{trigger.position}|{action}|{','.join(sorted(ids))}"
        return Planned(
            action=action,
            tenant=trigger.tenant,
            memory_type=trigger.memory_type,
            memory_ids=ids,
            versions={it.id: it.version for it in items},
            texts={it.id: it.content.memory for it in items},
            text=text,
            decision=decision,
            position=trigger.position,
            causation_id=trigger.event_id,
            idempotency_key=hashlib.sha256(raw.encode()).hexdigest()[:40],
        )

    def plan(self, events) -> list[Planned]:
        pairs = self._pairs(events)
        return self._decide(pairs, self._judge_all(pairs)) if pairs else []

    # -- applying ---------------------------------------------------------------------------

    def apply(self, planned: Planned, correlation_id: str) -> str:
        """Append one decision (the caller holds the writer); returns applied, replayed or skipped: why."""
        ctx = CommandContext(
            tenant=planned.tenant,
            correlation_id=correlation_id,
            actor=ACTOR,
            causation_id=planned.causation_id,
            idempotency_key=planned.idempotency_key,
        )
        memories = self.service.memories
        try:
            if planned.action == "merge":
                result = memories.merge(ctx, planned.memory_ids, text=planned.text, decision=planned.decision, expected_versions=planned.versions)
            else:
                self.service.sync()
                current = load_items(self.service.read_conn(), planned.tenant, ids=planned.memory_ids)
                if {(i.id, i.version) for i in current} != set(planned.versions.items()):
                    return "skipped: changed or no longer activated"
                older, newer = planned.memory_ids
                result = memories.supersede(ctx, older, newer, decision=planned.decision)
        except (Conflict, NotFound) as exc:
            return f"skipped: {exc}"
        except IdempotencyConflict:
            return "replayed"
        if result.replayed:
            return "replayed"
        self.decisions[planned.tenant][planned.action] += 1
        return "applied"

    # -- passes ------------------------------------------------------------------------------

    async def arun_once(self, tenant: str | None = None, *, read_executor=None, write_executor=None, inline: bool = False, dry_run: bool = False) -> dict[str, Any]:
        """Process the log up to the projections' head; one correlation id for the whole pass."""
        if not self.enabled:
            return {"enabled": False, "planned": [], "applied": 0}
        loop = asyncio.get_running_loop()

        async def call(executor, fn: Callable, *args):
            return fn(*args) if inline else await loop.run_in_executor(executor, fn, *args)

        name = "organizer" if tenant is None else f"organizer@{tenant}"
        await call(write_executor, self.service.sync)
        head = self.service.runner.position()
        position = max(self.checkpoint(name), self.checkpoint()) if tenant else self.checkpoint()
        correlation = new_id()
        started, t0 = time.time(), time.perf_counter()
        report: dict[str, Any] = {"enabled": True, "correlation_id": correlation, "from": position, "events": 0, "planned": [], "outcomes": {}}
        while position < head and not self.stopped:
            events, end = await call(read_executor, self._batch, tenant, position, head)
            if self._sync_judge():
                planned = await call(read_executor, self.plan, events)
            else:
                pairs = await call(read_executor, self._pairs, events)
                planned = self._decide(pairs, await self._ajudge_all(pairs)) if pairs else []
            report["events"] += len(events)
            if dry_run:
                report["planned"] += [p.describe() for p in planned]
                position = end
                continue
            for p in planned:
                outcome = await call(write_executor, self.service.run, self.apply, p, correlation)
                kind = outcome.split(":")[0]
                report["outcomes"][kind] = report["outcomes"].get(kind, 0) + 1
                report["planned"].append({**p.describe(), "outcome": outcome})
            await call(write_executor, self._save, name, end)
            position = end
        report.update(to=position, applied=report["outcomes"].get("applied", 0), seconds=round(time.perf_counter() - t0, 3))
        if not dry_run and report["events"]:
            self.last_run = {"started_at": started, "finished_at": time.time(), **{k: report[k] for k in ("correlation_id", "from", "to", "events", "applied", "seconds")}}
        return report

    def run_once(self, tenant: str | None = None) -> dict[str, Any]:
        """One pass up to the head, from synchronous code (the CLI); see :meth:`arun_once`."""
        return self._blocking(lambda: self.arun_once(tenant, inline=True))

    def dry_run(self, tenant: str | None = None) -> list[dict[str, Any]]:
        """The decisions a pass would make now, without writing anything."""
        return self._blocking(lambda: self.arun_once(tenant, inline=True, dry_run=True))["planned"]

    def _blocking(self, make):
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError("called inside an event loop: await arun_once / acluster instead")

        async def main():
            try:
                return await make()
            finally:
                if not self._sync_judge() and self._own_judge:
                    await self.judge.close()
                    self.judge = build_judge(self.settings)  # a judge's session belongs to one loop

        return asyncio.run(main())

    # -- topics ---------------------------------------------------------------------------------

    def cluster(self, tenant: str | None = None, *, dry_run: bool = False) -> dict[str, Any]:
        """A topic clustering run (see :mod:`projections.policies.topics`) from synchronous code."""
        return self._blocking(lambda: self.acluster(tenant, inline=True, dry_run=dry_run))

    async def acluster(self, tenant: str | None = None, *, read_executor=None, write_executor=None, inline: bool = False, dry_run: bool = False) -> dict[str, Any]:
        from .topics import TopicBuilder

        if not self.enabled:
            return {"enabled": False}
        builder = TopicBuilder(self.service, self.settings, self.vectors, summarizer=None if self._sync_judge() else self.judge)
        report = await builder.arun(tenant, read_executor=read_executor, write_executor=write_executor, inline=inline, dry_run=dry_run)
        if not dry_run:
            self.last_cluster = {k: v for k, v in report.items() if k != "clusters"}
        return report

    # -- background -------------------------------------------------------------------------------

    async def follow(self, *, read_executor=None, write_executor=None) -> None:
        """Run passes as the log grows and clustering runs every ``organizer_cluster_interval_s``."""
        if not self.enabled:
            return
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()

        def hook(_name: str, _position: int) -> None:
            if not self.stopped and not loop.is_closed():
                try:
                    loop.call_soon_threadsafe(wake.set)
                except RuntimeError:
                    pass

        self.service.add_after_commit(hook)
        poll = float(self.settings.organizer_poll_s)
        interval = float(self.settings.organizer_cluster_interval_s)
        next_cluster = loop.time() + interval if interval > 0 else float("inf")
        failures = 0
        wake.set()
        while not self.stopped:
            try:
                await asyncio.wait_for(wake.wait(), timeout=max(0.01, min(poll, next_cluster - loop.time())))
            except asyncio.TimeoutError:
                pass
            wake.clear()
            try:
                head = await loop.run_in_executor(read_executor, self.service.store.last_position)
                if head > self._position:
                    await self.arun_once(read_executor=read_executor, write_executor=write_executor)
                if loop.time() >= next_cluster:
                    next_cluster = loop.time() + interval
                    await self.acluster(read_executor=read_executor, write_executor=write_executor)
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception:
                failures += 1
                log.exception("organizer pass failed (attempt %d); retrying", failures)
                await asyncio.sleep(min(60.0, 0.5 * 2**failures))

    async def aclose(self) -> None:
        self.stopped = True
        if not self._sync_judge() and hasattr(self.judge, "close"):
            await self.judge.close()
        with self._conn_lock:
            self._conn.close()


def _decision(verdicts: list[Verdict], similarity: float) -> c.Decision:
    first = verdicts[0]
    reasons = list(dict.fromkeys(v.reason for v in verdicts))
    reason = "; ".join(reasons)
    fallbacks = [v.fallback for v in verdicts if v.fallback]
    return c.Decision(
        judge=first.judge,
        judge_version=first.judge_version,
        similarity=round(float(similarity), 4),
        reason=reason if len(reason) <= 500 else reason[:499] + "\u2026",
        fallback=fallbacks[0] if fallbacks else None,
    )
