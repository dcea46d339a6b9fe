"""The organizer: a log follower that dedups memories and resolves conflicts, as events.

It reads ``MemoryAdded`` / ``MemoriesMerged`` / ``MemoryUpdated`` (of any field: the
text and key are the judge's inputs, the subject picks the candidates, and the
tags, properties and other fields decide whether a merge would lose a value)
after its own checkpoint, in batches. For every memory of a batch
that is still activated it gathers candidates among the activated memories of
the same tenant, memory type and subject (the batch's other items included,
since they are projected already; memories of two subjects are facts about
two people, and an erased memory has no text left to judge):

- vectors: cosine >= ``organizer_min_cosine``, the ``organizer_top_k`` best;
- lexical near-duplicates the vectors miss: the same normalised text
  (casefold, punctuation, whitespace), found through a hash lookup;
- the same ``key`` (a key is a slot with one value: a prime contradiction).

A judge labels each pair. Redundant pairs are grouped (never across a pair
judged contradictory, nor where the merge would lose a text or a value, see
:func:`~mnemolog.projections.policies.dedup.decide`) and each group becomes one ``merge``; a contradictory
pair becomes a ``supersede`` of the older memory by the newer (by when its text
was stated: a merge's product as old as its newest source, see
:class:`~mnemolog.projections.policies.stated.StatedTimes`). Every event carries a :class:`~mnemolog.eventstore.catalogue.Decision`; a pass
has one correlation id (``revert`` undoes it) and each decision's causation
id is the triggering event's id. Decisions are appended with an idempotency
key derived from (organizer, triggering position, members), and the
checkpoint (table ``organizer_checkpoint`` in ``projections.db``) moves only
after a batch's decisions are appended: after a crash a batch is processed
again, and its decisions are either replayed no-ops or skipped because their
memories are no longer activated.

Its progress also lives in the log: a batch that decided anything is followed
by an ``OrganizerPassRecorded`` on ``organizer-<tenant>`` (for each tenant it
decided in) naming the position it covered, and the organizer resumes from
the later of that record and its local checkpoint. Deleting
``projections.db`` therefore never makes it judge the log again, and a
rebuild appends nothing.

A revert sticks. Reverted memories come back through ``MemoryRolledBack``,
which is not a trigger; and the pairs of memories a reverted merge or
supersede joined (:class:`~mnemolog.projections.policies.dedup.RevertedDecisions`,
read from the log) are never judged or grouped again, and :meth:`Organizer.apply`
skips a decision that holds one, even when the log is organized from position 0;
until the text or key of either memory is updated: new inputs are judged afresh.

Beside ingest it steps aside: decisions are appended a short slice of the
single writer at a time (``APPLY_SLICE_S``), and a background pass
(:meth:`Organizer.follow`) rests after each slice of work in which others
wrote, keeping to ``organizer_busy_share`` of the time
(:class:`~mnemolog.projections.policies.pacing.Pacer`); it catches up once
the writes stop.

Finding candidates and deciding is :mod:`mnemolog.projections.policies.dedup`; the
topic hierarchy is :mod:`mnemolog.projections.policies.topics` (``cluster``).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
import time
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Any, Callable

from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.commands.context import commit
from mnemolog.eventstore.store import StreamAppend
from mnemolog.eventstore.errors import ConcurrencyError, IdempotencyConflict, log_failure
from mnemolog.eventstore.ids import new_id
from mnemolog.eventstore.model import Conflict, NotFound
from mnemolog.eventstore.settings import Settings
from mnemolog.eventstore.sqlite_tx import immediate

from .dedup import ACTOR, CorpusCache, Pair, Planned, RevertedDecisions, Vectors, candidates, decide, load_items
from .judge import Verdict
from .pacing import Pacer
from .settings import build_judge, type_list
from .stated import StatedTimes

if TYPE_CHECKING:
    from ..service import MemoryService

log = logging.getLogger("mnemolog.organizer")
TRIGGERS = ("MemoryAdded", "MemoriesMerged", "MemoryUpdated")
MAX_ROUNDS = 3  # a pass follows the head this many times (its own merges are memories to check too)
APPLY_SLICE_S = 0.02  # a turn of the writer applies decisions for about this long (at least one): other writes wait no longer


class Organizer:
    """The log follower; see the module docstring. ``judge`` defaults to the configured one."""

    def __init__(self, service: MemoryService, settings: Settings | None = None, judge=None):
        self.service = service
        self.settings = settings or service.settings
        self._own_judge = judge is None
        self.judge = judge if judge is not None else build_judge(self.settings)
        self.enabled = bool(self.settings.organizer_enabled)
        self.busy_share = float(self.settings.organizer_busy_share)
        self.types = set(type_list(self.settings)) - {"TopicMemory"}
        self.vectors = Vectors(service, str(self.settings.embedder))
        self.corpora = CorpusCache(self.vectors)
        self._conn = service.runner.connection()
        self._conn_lock = threading.Lock()
        with self._conn_lock:
            self._conn.execute("CREATE TABLE IF NOT EXISTS organizer_checkpoint (name TEXT PRIMARY KEY, position INTEGER NOT NULL)")
        self.reverted = RevertedDecisions(service.store)
        self.stated = StatedTimes(service.store)
        self.reverted_runs = None  # what reverted clustering runs wrote (see topics.RevertedRuns), read at the first run
        self._records: dict[str, int] = {}  # checkpoint name -> the last position a pass recorded in this log
        self._records_scanned = 0
        self._records_lock = threading.Lock()
        self._position = max(self.checkpoint(), self.recorded())
        self.lease = None  # taken by follow(): one organizer at a time across servers on a shared log
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._waiters_lock = threading.Lock()
        self.decisions: dict[str, dict[str, int]] = defaultdict(lambda: {"merge": 0, "supersede": 0})
        self.last_run: dict[str, Any] | None = None
        self.last_cluster: dict[str, Any] | None = None
        self.stopped = False
        self._mark = 0  # the log's head after this organizer's last write: a higher head means others wrote

    # -- checkpoint and waiting ----------------------------------------------------------

    def checkpoint(self, name: str = "organizer") -> int:
        with self._conn_lock:
            return stored_checkpoint(self._conn, name)

    def recorded(self, name: str = "organizer") -> int:
        """The last position a pass over ``name`` recorded in the log (0 when none did).

        A record whose position does not hold its event in this log (a copy
        imported with other positions) is ignored.
        """
        store = self.service.store
        with self._records_lock:
            head = store.last_position()
            for batch in store.iter_all(after=self._records_scanned, until=head, types=["OrganizerPassRecorded"]):
                for r in batch:
                    e = r.event
                    if e.position <= self._records.get(e.checkpoint, 0):
                        continue
                    at = store.read_all(after=e.position - 1, limit=1)
                    if at and at[0].position == e.position and at[0].event_id == e.event_id:
                        self._records[e.checkpoint] = e.position
            self._records_scanned = max(self._records_scanned, head)
            return self._records.get(name, 0)

    def _record(self, name: str, position: int, decisions: Counter, correlation_id: str) -> None:
        """Append, for each tenant decided in, that the pass covered the log up to ``position`` (the caller holds the writer)."""
        [at] = self.service.store.read_all(after=position - 1, limit=1)
        for tenant, count in sorted(decisions.items()):
            ctx = CommandContext(tenant=tenant, correlation_id=correlation_id, actor=ACTOR)
            event = c.OrganizerPassRecorded(checkpoint=name, position=position, event_id=at.event_id, decisions=count)
            commit(self.service.store, ctx, "organizer-pass", [StreamAppend(c.organizer_stream(tenant), [event])], request=None)
        self._mark = self.service.store.last_position()

    def _save(self, name: str, position: int) -> None:
        with self._conn_lock:
            with immediate(self._conn):
                self._conn.execute(
                    "INSERT INTO organizer_checkpoint (name, position) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET position = excluded.position",
                    (name, position),
                )
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
        """What ``tenant`` may read: the position (the log's), and its own share of the last pass and clustering run."""
        from .topics import TENANT_COUNTS

        target = self.service.store.last_position() if min_position is None else min_position
        counts = self.decisions.get(tenant, {"merge": 0, "supersede": 0})
        run, cluster = self.last_run, self.last_cluster
        if run is not None:  # a pass covers every tenant: the caller's share of it
            run = {k: v for k, v in run.items() if k != "by_tenant"} | run["by_tenant"].get(tenant, {"events": 0, "applied": 0})
        if cluster is not None:
            mine = cluster["by_tenant"].get(tenant) or {**{k: 0 for k in TENANT_COUNTS}, "skipped": [], "errors": []}
            cluster = {k: v for k, v in cluster.items() if k not in ("by_tenant", "skipped", "errors", *TENANT_COUNTS)} | mine
        return {
            "position": self._position,
            "enabled": self.enabled,
            "last_run": run,
            "last_cluster": cluster,
            "decisions": sum(counts.values()),
            "decisions_by_action": dict(counts),
            "caught_up": self._position >= target,
        }

    # -- finding pairs ---------------------------------------------------------------------

    def _batch(self, tenant: str | None, after: int, head: int) -> tuple[list, int]:
        limit = int(self.settings.organizer_batch)
        events = self.service.store.read_all(after=after, limit=limit, until=head, tenant=tenant, types=TRIGGERS)
        return events, (events[-1].position if len(events) == limit else head)

    def _pairs(self, events, exclude: frozenset = frozenset(), pacer: Pacer | None = None) -> list[Pair]:
        triggers: dict[tuple[str, str], Any] = {}
        for r in events:
            e = r.event
            if isinstance(e, c.MemoryAdded) and e.origin == "topic":
                continue
            if e.content.memory_type in self.types:
                triggers.setdefault((r.tenant, e.memory_id), r)
        groups: dict[tuple[str, str], list] = defaultdict(list)
        for (tenant, memory_id), r in triggers.items():
            groups[(tenant, r.event.content.memory_type)].append((memory_id, r))
        pairs: dict[tuple[str, str, str], Pair] = {}
        reverted = self.reverted.refresh()
        conn = self.service.read_conn()
        min_cos, top_k = float(self.settings.organizer_min_cosine), int(self.settings.organizer_top_k)
        for (tenant, memory_type), members in sorted(groups.items()):
            corpus = self.corpora.get(conn, tenant, memory_type)
            rows = [(corpus.row[m], r) for m, r in members if m in corpus.row]  # skip the no longer activated
            for i, j, cos, r in candidates(corpus, rows, min_cos, top_k, pace=pacer.step if pacer else None):
                a, b = sorted((corpus.items[i], corpus.items[j]))
                if (tenant, a.id) in exclude or (tenant, b.id) in exclude or reverted.apart(tenant, a.id, b.id):
                    continue
                key = (tenant, a.id, b.id)
                if key not in pairs or r.position < pairs[key].position:
                    pairs[key] = Pair(tenant, memory_type, a, b, cos, r.position, r.event_id)
        return sorted(pairs.values(), key=lambda p: (p.position, -p.cosine, p.a.id, p.b.id))

    # -- judging and deciding -----------------------------------------------------------------

    def _sync_judge(self) -> bool:
        return hasattr(self.judge, "judge_sync")

    def _judge_all(self, pairs: list[Pair], pacer: Pacer | None = None) -> list[Verdict]:
        if pacer is None:
            return [self.judge.judge_sync(p.a.judged(), p.b.judged(), p.cosine) for p in pairs]
        verdicts = []
        for p in pairs:
            pacer.step()
            verdicts.append(self.judge.judge_sync(p.a.judged(), p.b.judged(), p.cosine))
        return verdicts

    async def _ajudge_all(self, pairs: list[Pair]) -> list[Verdict]:
        return list(await asyncio.gather(*(self.judge.judge(p.a.judged(), p.b.judged(), p.cosine) for p in pairs)))

    def plan(self, events, exclude: frozenset = frozenset(), pacer: Pacer | None = None) -> list[Planned]:
        """The decisions for a batch; ``exclude`` holds (tenant, id) already decided in a dry run."""
        pairs = self._pairs(events, exclude, pacer)
        return decide(pairs, self._judge_all(pairs, pacer), self.reverted, self.stated) if pairs else []

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
        if (why := self.reverted.refresh().any_apart(planned.tenant, planned.memory_ids)) is not None:
            return f"skipped: {why}"
        try:
            if planned.action == "merge":
                result = memories.merge(ctx, planned.memory_ids, text=planned.text, decision=planned.decision, expected_versions=planned.versions)
            else:
                self.service.sync()
                current = load_items(self.service.read_conn(), planned.tenant, ids=planned.memory_ids)
                if {(i.id, i.version) for i in current} != set(planned.versions.items()):
                    return "skipped: changed or no longer activated"
                older, newer = planned.memory_ids
                versions = planned.versions  # another process may write between the check above and the command's read
                result = memories.supersede(ctx, older, newer, decision=planned.decision, expected_version=versions[older], expected_newer_version=versions[newer])
        except (Conflict, NotFound, ConcurrencyError) as exc:  # ConcurrencyError: another process wrote after the command's read
            return f"skipped: {exc}"
        except IdempotencyConflict:
            return "replayed"
        if result.replayed:
            return "replayed"
        self.decisions[planned.tenant][planned.action] += 1
        return "applied"

    def apply_many(self, planned: list[Planned], correlation_id: str, slice_s: float | None = None) -> list[str]:
        """Apply decisions in order (the caller holds the writer); with ``slice_s``, stop after about
        that long (at least one is applied): the outcomes say how many were."""
        began, outcomes = time.perf_counter(), []
        for p in planned:
            outcomes.append(self.apply(p, correlation_id))
            if slice_s is not None and time.perf_counter() - began >= slice_s:
                break
        self._mark = self.service.store.last_position()  # still the writer: what is after it, others wrote
        return outcomes

    def _others_wrote(self) -> bool:
        """Whether anyone else appended since this organizer last wrote or asked (see :class:`Pacer`)."""
        head = self.service.store.last_position()
        wrote, self._mark = head > self._mark, max(self._mark, head)
        return wrote

    def pacer(self) -> Pacer | None:
        """The background passes' :class:`Pacer` (``organizer_busy_share``), or None when it never rests."""
        return Pacer(self.busy_share, self._others_wrote) if self.busy_share < 1 else None

    # -- passes ------------------------------------------------------------------------------

    async def arun_once(
        self, tenant: str | None = None, *, read_executor=None, write_executor=None, inline: bool = False, dry_run: bool = False, pacer: Pacer | None = None
    ) -> dict[str, Any]:
        """Process the log up to the projections' head; one correlation id for the whole pass.

        With a ``pacer`` the pass works in short slices and rests after those in
        which others wrote; decisions are applied a slice of the writer at a time
        (``APPLY_SLICE_S``) either way.
        """
        if not self.enabled:
            return {"enabled": False, "planned": [], "applied": 0}
        loop = asyncio.get_running_loop()

        async def call(executor, fn: Callable, *args):
            return fn(*args) if inline else await loop.run_in_executor(executor, fn, *args)

        name = "organizer" if tenant is None else f"organizer@{tenant}"
        await call(write_executor, self.service.sync)
        head = self.service.runner.position()
        position = max(self.checkpoint(), self.recorded())
        if tenant:
            position = max(position, self.checkpoint(name), self.recorded(name))
        correlation = new_id()
        started, t0 = time.time(), time.perf_counter()
        report: dict[str, Any] = {"enabled": True, "correlation_id": correlation, "from": position, "events": 0, "planned": [], "outcomes": {}}
        planning = applying = 0.0  # seconds finding and judging pairs, and appending decisions (rests included)
        if pacer is not None:
            pacer.restart()
        decided: set[tuple[str, str]] = set()  # a dry run's would-be archived memories
        events_by_tenant: Counter = Counter()  # a tenant's share of the pass (its status shows no other's)
        applied_by_tenant: Counter = Counter()
        rounds = 0
        while not self.stopped:
            if position >= head:  # caught up: take in what arrived meanwhile (our own merges too), a few rounds at most
                rounds += 1
                if dry_run or rounds > MAX_ROUNDS:
                    break
                await call(write_executor, self.service.sync)
                head = self.service.runner.position()
                if position >= head:
                    break
                continue
            events, end = await call(read_executor, self._batch, tenant, position, head)
            began = time.perf_counter()
            if self._sync_judge():
                planned = await call(read_executor, self.plan, events, frozenset(decided), pacer)
            else:
                pairs = await call(read_executor, self._pairs, events, frozenset(decided), pacer)
                planned = decide(pairs, await self._ajudge_all(pairs), self.reverted, self.stated) if pairs else []
            report["events"] += len(events)
            events_by_tenant.update(r.tenant for r in events)
            planning += time.perf_counter() - began
            began = time.perf_counter()
            if dry_run:
                report["planned"] += [p.describe() for p in planned]
                for p in planned:
                    decided.update((p.tenant, m) for m in (p.memory_ids if p.action == "merge" else p.memory_ids[:1]))
                position = end
                continue
            applied: Counter = Counter()
            start = 0
            while start < len(planned):
                if pacer is not None:
                    await pacer.astep()
                outcomes = await call(write_executor, self.service.run, self.apply_many, planned[start:], correlation, APPLY_SLICE_S)
                for p, outcome in zip(planned[start:], outcomes):
                    kind = outcome.split(":")[0]
                    report["outcomes"][kind] = report["outcomes"].get(kind, 0) + 1
                    report["planned"].append({**p.describe(), "outcome": outcome})
                    if outcome == "applied":
                        applied[p.tenant] += 1
                        applied_by_tenant[p.tenant] += 1
                start += len(outcomes)
            if applied:
                await call(write_executor, self.service.run, self._record, name, end, applied, correlation)
            await call(write_executor, self._save, name, end)
            applying += time.perf_counter() - began
            position = end
        report.update(
            to=position,
            applied=report["outcomes"].get("applied", 0),
            seconds=round(time.perf_counter() - t0, 3),
            plan_seconds=round(planning, 3),
            apply_seconds=round(applying, 3),
        )
        if not dry_run and report["events"]:
            self.last_run = {"started_at": started, "finished_at": time.time(), **{k: report[k] for k in ("correlation_id", "from", "to", "events", "applied", "seconds")},
                             "by_tenant": {t: {"events": n, "applied": applied_by_tenant[t]} for t, n in events_by_tenant.items()}}
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
                if not self._sync_judge():  # an HTTP session belongs to one event loop
                    await self.judge.close()
                    if self._own_judge:
                        self.judge = build_judge(self.settings)

        return asyncio.run(main())

    # -- topics ---------------------------------------------------------------------------------

    def cluster(self, tenant: str | None = None, *, dry_run: bool = False) -> dict[str, Any]:
        """A topic clustering run (see :mod:`mnemolog.projections.policies.topics`) from synchronous code."""
        return self._blocking(lambda: self.acluster(tenant, inline=True, dry_run=dry_run))

    async def acluster(self, tenant: str | None = None, *, read_executor=None, write_executor=None, inline: bool = False, dry_run: bool = False) -> dict[str, Any]:
        from .topics import RevertedRuns, TopicBuilder

        if not self.enabled:
            return {"enabled": False}
        if self.reverted_runs is None:
            self.reverted_runs = RevertedRuns(self.service.store)
        builder = TopicBuilder(
            self.service, self.settings, self.vectors, summarizer=None if self._sync_judge() else self.judge, reverted=self.reverted_runs
        )
        report = await builder.arun(tenant, read_executor=read_executor, write_executor=write_executor, inline=inline, dry_run=dry_run)
        if not dry_run:
            self.last_cluster = {k: v for k, v in report.items() if k != "clusters"}
        return report

    # -- background -------------------------------------------------------------------------------

    async def follow(self, tenant: str | None = None, *, read_executor=None, write_executor=None) -> None:
        """Run passes as the log grows and clustering runs every ``organizer_cluster_interval_s`` (of ``tenant``
        only, when given: its passes keep their own checkpoint, see :meth:`arun_once`)."""
        if not self.enabled:
            return
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()
        # Every projection commit calls the hook (several per write): one call into the loop until it wakes, not one each.
        woken = threading.Event()

        def hook(_name: str, _position: int) -> None:
            if not self.stopped and not woken.is_set() and not loop.is_closed():
                woken.set()
                try:
                    loop.call_soon_threadsafe(wake.set)
                except RuntimeError:
                    pass

        self.service.add_after_commit(hook)
        # Several servers on one shared log: one organizer runs, the others stand by.
        self.lease = self.service.store.lease("organizer")
        poll = float(self.settings.organizer_poll_s)
        interval = float(self.settings.organizer_cluster_interval_s)
        next_cluster = loop.time() + interval if interval > 0 else float("inf")
        failures = 0
        pacer = self.pacer()
        standby = False
        wake.set()
        while not self.stopped:
            try:
                await asyncio.wait_for(wake.wait(), timeout=max(0.01, min(poll, next_cluster - loop.time())))
            except asyncio.TimeoutError:
                pass
            wake.clear()
            woken.clear()  # a commit from now on wakes the loop again (this round reads the head after it)
            try:
                if not await loop.run_in_executor(read_executor, self.lease.held):
                    standby = True
                    continue
                if standby:  # taking over: start from the progress the last holder recorded in the log
                    standby = False
                    self._position = max(self._position, await loop.run_in_executor(read_executor, self.recorded))
                head = await loop.run_in_executor(read_executor, self.service.store.last_position)
                done = self._position if tenant is None else max(self._position, await loop.run_in_executor(read_executor, self.checkpoint, f"organizer@{tenant}"))
                if head > done:
                    await self.arun_once(tenant, read_executor=read_executor, write_executor=write_executor, pacer=pacer)
                if loop.time() >= next_cluster:
                    next_cluster = loop.time() + interval
                    await self.acluster(tenant, read_executor=read_executor, write_executor=write_executor)
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception:
                failures += 1
                log_failure(log, "organizer pass failed (attempt %d); retrying", failures)
                await asyncio.sleep(min(60.0, 0.5 * 2**failures))

    async def aclose(self) -> None:
        self.stopped = True
        if self.lease is not None:
            self.lease.release()
        if not self._sync_judge() and hasattr(self.judge, "close"):
            await self.judge.close()
        with self._conn_lock:
            self._conn.close()


# -- without an organizer ------------------------------------------------------------------------


def stored_checkpoint(conn, name: str = "organizer") -> int:
    """The position an organizer stored under ``name`` in ``projections.db`` (0: none yet)."""
    row = conn.execute("SELECT position FROM organizer_checkpoint WHERE name = ?", (name,)).fetchone()
    return row[0] if row else 0


def stored_position(service: MemoryService) -> int:
    """How far the organizer of ``service``'s data directory has come, as it stored it (0: it never ran)."""
    try:
        return stored_checkpoint(service.read_conn())
    except sqlite3.OperationalError:  # never ran: no table yet
        return 0


def stored_status(service: MemoryService, min_position: int | None = None, *, enabled: bool = False) -> dict[str, Any]:
    """The status when no organizer runs in this process: its stored checkpoint, if any (``enabled``: another
    process of this server runs it, which alone knows its last runs and decisions)."""
    position = stored_position(service)
    target = service.store.last_position() if min_position is None else min_position
    return {"position": position, "enabled": enabled, "last_run": None, "decisions": 0, "caught_up": position >= target} | (
        {"runs_here": False} if enabled else {}
    )


class OrganizerElsewhere:
    """The organizer as a worker of ``serve`` that does not run it sees it: worker 0 runs it over the same
    ``projections.db``, whose stored checkpoint tells how far it has come; a wait polls that checkpoint."""

    enabled = True
    #: How often a wait looks at the stored checkpoint.
    POLL_S = 0.05

    def __init__(self, service: MemoryService, executor=None) -> None:
        self.service = service
        self.executor = executor

    async def wait_for(self, position: int, timeout: float) -> bool:
        """Wait until the organizer has stored a checkpoint at ``position`` or past it; False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, float(timeout))
        while (await loop.run_in_executor(self.executor, stored_position, self.service)) < position:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            await asyncio.sleep(min(self.POLL_S, remaining))
        return True

    def status(self, tenant: str, min_position: int | None = None) -> dict[str, Any]:
        return stored_status(self.service, min_position, enabled=True)
