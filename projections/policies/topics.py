"""The topic hierarchy and conversation order: derived structure, written as events.

**Topics.** Per tenant and memory type, the candidates are the activated
memories without a PARENT edge of their own (edges outside the ``parent:``
namespace, e.g. a user's); memories under the organizer's own topics are
candidates again, so every run sees the whole picture. Fewer than
``organizer_min_group_size`` candidates: nothing happens. Otherwise they
are grouped (:mod:`.topic_partition`): re-partitioned by recursive
``MiniBatchKMeans`` until no cluster has more than
``organizer_max_cluster_size`` members when more than
``organizer_refit_share`` of them are in no live topic (the first run, a
large import), or when they are more than twice as many as at the last
re-partition (its count is kept in every topic's ``partitioned_at``), so that
the topics follow what the tenant has become; else placed into the live
topics, which keep their members while new ones join the nearest, and only a
cluster grown past the maximum is split again. The top-level groups become
topics; one that had to be split becomes two levels (topic → sub-topics →
memories), its leaves with too few members hanging from the topic directly.
Only groups with more than ``organizer_min_cluster_size`` members are kept.
Memories without a projected vector are embedded from their text.

A topic's key and text are extractive: its most distinctive terms (TF-IDF
across sibling clusters) and the member nearest its centroid; with an LLM
judge configured, ``LLMJudge.summarize_topic`` names it, falling back to the
extractive summary. Its properties hold a membership fingerprint: a cluster
equal to a live topic's is left alone, so re-running writes nothing. A
changed cluster is written as ONE atomic batch. One that shares a strict
majority of both memberships with a live topic (a few memories added, gone
or moved) revises that topic in place: its text and properties updated, its
sub-topics revised likewise where a new one keeps most of an old one's
members (others added, the old ones left over retired), PARENT edges linked
to the members each gains and unlinked from those each loses
(:func:`revised_topic`, :meth:`TopicBuilder.revise`), so the log grows with
the change, not with the topic's size. Any other adds new topic nodes and
PARENT edges (``parent:<run>:<n>``); either retires (archives, unlinking their
edges) the other earlier topics it overlaps, and unlinks the edges to its
members from topics another cluster revises; topics left over are retired at
the end. Before clustering, each run retires the topics with no activated
memory left under them (their members reverted or deleted), even when too
few candidates remain to cluster. The time budget is checked between
clusters, so a run that stops leaves no cluster half-written. A run has one
correlation id: ``revert`` undoes it, and the revert sticks (:class:`RevertedRuns`):
a later run leaves out the clusters it undid, and keeps the topics it brought
back, until their membership changes.

**FOLLOWS.** Memories of one conversation are chained in order when their
data says so: a ``conv`` / ``conversation`` / ``session`` property with a
numeric ``turn`` property, or a source such as ``conv-26:D1:3``
(conversation, session, turn). Edges are ``follows:<first turn>:<n>`` (the
chain's first memory's id: the conversation id is the memories' sealed data)
with weight 1.0; only differences from the live chain are written, so
re-running is a no-op. A chain a revert unlinked is linked again only once the conversation
changes.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Callable

import msgspec
import numpy as np

from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.commands.topics import TopicCommands
from mnemolog.eventstore.ids import new_id, new_ids
from mnemolog.eventstore.model import Conflict, MemoryContent, MemoryType, NotFound, ValidationError

from ..fts.script_marks import MARK
from .conversation import conversation_place
from .dedup import ACTOR, Item, Vectors, load_items
from .llm_judge import LLMUnavailable
from .settings import type_list
from .topic_partition import partitioned, placed

if TYPE_CHECKING:
    from ..service import MemoryService

TOPIC = MemoryType.TOPIC.value
RETIRED_STALE = "no longer a cluster"  # why a run archives a topic (the reason its event records)
RETIRED_ORPHAN = "no activated member left"
RETIRED_REPLACED = "replaced by a new clustering"
REPARTITION_GROWTH = 2  # a run re-partitions once the candidates are more than this many times those of the last re-partition
TENANT_COUNTS = ("created", "revised", "retired", "kept", "held", "follows_linked", "follows_unlinked")  # a run's counts, also kept per tenant  # ... when a new cluster takes its members
# A word of three letters or more, each letter with the marks written on it (an Indic word is one word, not its consonants).
_WORD = re.compile(f"(?:[^\\W\\d_]{MARK}*){{3,}}")
_STOP = frozenset(
    "the and for are was were with that this have has had not but you your they them their there from what when "
    "where which who will would should could about into over than then also just very more most some such only "
    "other its it's his her him she he our out all any can did does doing done been being user users".split()
)
_props = msgspec.json.Decoder(dict)


class Cluster(msgspec.Struct, kw_only=True):
    """A planned topic: its direct members, its sub-topics and its summary."""

    members: list[str]
    subs: list["Cluster"] = []
    fingerprint: str = ""
    key: str = ""
    text: str = ""
    terms: list[str] = []
    representative: str = ""
    summarizer: str = "extractive"
    sample: list[str] = []
    partitioned_at: int = 0  # the candidates of its type when they were last re-partitioned (see topic_partition)

    @property
    def all_members(self) -> set[str]:
        return set(self.members).union(*(s.members for s in self.subs)) if self.subs else set(self.members)


def fingerprint(memory_type: str, members: list[str], subs: list[Cluster]) -> str:
    canon = [memory_type, sorted(members), sorted(s.fingerprint for s in subs)]
    return hashlib.sha256(msgspec.json.encode(canon)).hexdigest()[:32]


def majority_match(members: set[str], candidates: dict[str, set[str]]) -> str | None:
    """The candidate (id -> members) sharing with ``members`` a strict majority of both memberships, the most shared
    (ties to the lower id); None when none does."""
    best, most = None, 0
    for candidate, held in sorted(candidates.items()):
        shared = len(held & members)
        if 2 * shared > len(members) and 2 * shared > len(held) and shared > most:
            best, most = candidate, shared
    return best


def revised_topic(cluster: Cluster, overlapping: dict[str, dict[str, Any]]) -> str | None:
    """The live topic among ``overlapping`` (id -> its members) that ``cluster`` revises in place (a few memories
    added, gone or moved: :func:`majority_match` of all the members, sub-topics' included); None: the cluster is a
    new topic, and the topics it overlaps are retired."""
    return majority_match(cluster.all_members, {topic_id: info["members"] for topic_id, info in overlapping.items()})


class Terms:
    """Counts of distinctive words per memory, for TF-IDF across sibling clusters."""

    def __init__(self, texts: list[str]):
        from sklearn.feature_extraction.text import CountVectorizer

        self.matrix = None
        try:
            vec = CountVectorizer(token_pattern=_WORD.pattern, lowercase=True, stop_words=sorted(_STOP), max_features=50_000)
            self.matrix = vec.fit_transform(texts).tocsr()
            self.vocab = np.array(vec.get_feature_names_out())
        except ValueError:  # no word at all
            pass

    def top(self, groups: list[list[int]], n: int = 3) -> list[list[str]]:
        if self.matrix is None or not groups:
            return [[] for _ in groups]
        tf = np.vstack([np.asarray(self.matrix[g].sum(axis=0)).ravel() for g in groups]).astype(np.float64)
        df = (tf > 0).sum(axis=0)
        idf = np.log((1 + len(groups)) / (1 + df)) + 1.0
        scores = tf / np.maximum(tf.sum(axis=1, keepdims=True), 1.0) * idf
        out = []
        for row in scores:
            order = np.lexsort((self.vocab, -row))
            out.append([str(self.vocab[j]) for j in order[:n] if row[j] > 0])
        return out


class RevertedRuns:
    """What reverted clustering runs had written, read from the log, so that a revert of a run sticks.

    A run leaves out a cluster whose membership (its fingerprint) a reverted
    run had made a topic, and keeps the topics that revert brought back (a
    topic it had retired as no longer a cluster stays; one it had retired for
    want of an activated member stays while that is so); and it does not link
    again a ``FOLLOWS`` edge (by id and ends) that a reverted run had linked.
    A cluster whose membership changed since, or a conversation whose order
    changed, is new input and is written. Read incrementally: each reverted
    correlation's events once.
    """

    def __init__(self, store):
        self.store = store
        self.position = 0
        self.fingerprints: set[tuple[str, str]] = set()  # (tenant, fingerprint)
        self.follows: set[tuple[str, str, str, str]] = set()  # (tenant, edge id, source, target)
        self.kept: set[tuple[str, str]] = set()  # (tenant, topic id) whose retirement as no longer a cluster was undone
        self.kept_orphans: set[tuple[str, str]] = set()  # ... as one with no activated member left

    def refresh(self) -> "RevertedRuns":
        head = self.store.last_position()
        if head > self.position:
            for batch in self.store.iter_all(after=self.position, until=head, types=["CorrelationReverted"]):
                for r in batch:
                    self._take(r.tenant, r.event.correlation_id)
            self.position = head
        return self

    def _take(self, tenant: str, correlation_id: str) -> None:
        for r in self.store.read_all(tenant=tenant, correlation_id=correlation_id, types=["MemoryAdded", "MemoryUpdated", "EdgeLinked", "MemoryArchived"]):
            e = r.event
            if isinstance(e, c.MemoryArchived):
                if r.metadata.actor == ACTOR and e.reason in (RETIRED_STALE, RETIRED_REPLACED):
                    self.kept.add((tenant, e.memory_id))
                elif r.metadata.actor == ACTOR and e.reason == RETIRED_ORPHAN:
                    self.kept_orphans.add((tenant, e.memory_id))
                continue
            written = isinstance(e, c.MemoryAdded) and e.origin == "topic" or isinstance(e, c.MemoryUpdated) and r.metadata.actor == ACTOR
            if written and e.content.properties.get("organizer") == "topics":  # a topic added, or revised in place
                if (fp := e.content.properties.get("fingerprint")) and e.content.properties.get("level", 1) == 1:
                    self.fingerprints.add((tenant, fp))
            elif isinstance(e, c.EdgeLinked) and e.edge.edge_type == "FOLLOWS" and e.edge.edge_id.startswith("follows:"):
                self.follows.add((tenant, e.edge.edge_id, e.edge.source, e.edge.target))


class TopicBuilder:
    def __init__(self, service: MemoryService, settings, vectors: Vectors, summarizer=None, reverted: RevertedRuns | None = None):
        self.service = service
        self.settings = settings
        self.vectors = vectors
        self.summarizer = summarizer
        self.reverted = reverted or RevertedRuns(service.store)
        self.commands = TopicCommands(service.store, service.facts, existing=self._existing)
        self.types = [t for t in type_list(settings) if t != TOPIC]
        self.max_size = max(2, int(settings.organizer_max_cluster_size))
        self.min_group = int(settings.organizer_min_group_size)
        self.min_cluster = int(settings.organizer_min_cluster_size)
        self.refit_share = float(settings.organizer_refit_share)
        self.clock = time.monotonic  # the time budget's clock

    def _existing(self, tenant: str, node_ids) -> set[str]:
        """The memory nodes among ``node_ids`` at the head, in a few queries (the writer calls this)."""
        self.service.sync()
        ids, found = sorted(node_ids), set()
        conn = self.service.read_conn()
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            found |= {r[0] for r in conn.execute(
                f"SELECT memory_id FROM graph_memories WHERE tenant = ? AND valid_to IS NULL AND memory_id IN ({','.join('?' * len(chunk))})", (tenant, *chunk))}
        return found

    # -- planning ------------------------------------------------------------------------

    def tenants(self) -> list[str]:
        rows = self.service.read_conn().execute("SELECT DISTINCT tenant FROM graph_memories WHERE valid_to IS NULL AND status = 'activated'")
        return sorted(r[0] for r in rows)

    def existing(self, tenant: str, memory_type: str) -> dict[str, dict[str, Any]]:
        """Live organizer topics of a type: top-level id -> fingerprint, members (all), sub-topic ids, direct members,
        and each sub-topic's members."""
        conn = self.service.read_conn()
        topics: dict[str, dict] = {}
        for item in load_items(conn, tenant, TOPIC):
            p = item.content.properties
            if p.get("organizer") == "topics" and p.get("of_type") == memory_type:
                topics[item.id] = {"fingerprint": p.get("fingerprint"), "level": p.get("level", 1), "members": set(), "subs": [], "direct": set(), "sub_members": {},
                                   "partitioned_at": p.get("partitioned_at")}
        children: dict[str, list[str]] = defaultdict(list)
        for source, target in conn.execute(
            "SELECT source, target FROM graph_edges WHERE tenant = ? AND edge_type = 'PARENT' AND valid_to IS NULL AND edge_id LIKE 'parent:%'", (tenant,)
        ):
            if source in topics:
                children[source].append(target)
        top = {}
        for topic_id, info in topics.items():
            if info["level"] != 1:
                continue
            for child in children[topic_id]:
                if child in topics:
                    info["subs"].append(child)
                    info["members"].update(children[child])
                    info["sub_members"][child] = set(children[child])
                else:
                    info["members"].add(child)
                    info["direct"].add(child)
            top[topic_id] = info
        return top

    def plan(self, tenant: str, memory_type: str, deadline: float) -> dict[str, Any]:
        conn = self.service.read_conn()
        user_parented = {
            r[0]
            for r in conn.execute(
                "SELECT target FROM graph_edges WHERE tenant = ? AND edge_type = 'PARENT' AND valid_to IS NULL AND edge_id NOT LIKE 'parent:%'", (tenant,)
            )
        }
        # A topic quotes and summarises its members under the tenant's key: a memory of a named
        # subject stays out, so that forgetting the subject leaves none of its text in a topic.
        items = [i for i in load_items(conn, tenant, memory_type) if i.id not in user_parented and i.content.subject is None and not i.content.erased]
        out: dict[str, Any] = {"memory_type": memory_type, "candidates": len(items), "new": [], "kept": [], "stale": {}}
        if len(items) < self.min_group:
            out["skipped"] = f"{len(items)} candidates < organizer_min_group_size {self.min_group}"
            return out
        X = self.vectors.matrix(tenant, items)
        existing = self.existing(tenant, memory_type)
        live = [(info["direct"], [members for _, members in sorted(info["sub_members"].items())]) for _, info in sorted(existing.items())]
        # The candidates at the last re-partition (topics written before it was recorded: the members they hold).
        basis = max((info["partitioned_at"] or 0 for info in existing.values()), default=0) or sum(len(info["members"]) for info in existing.values())
        groups = None
        if len(items) <= REPARTITION_GROWTH * basis:  # else the tenant has outgrown the partition its topics came from
            groups = placed(X, {item.id: r for r, item in enumerate(items)}, live, self.max_size, self.min_cluster, self.refit_share)
        if groups is None:
            groups, basis = partitioned(X, np.arange(len(items)), self.max_size, self.min_cluster), len(items)
        if self.clock() > deadline:
            out["skipped"] = "time budget"
            return out
        groups = [g for g in groups if len(g.rows) > self.min_cluster]
        terms = Terms([i.content.memory for i in items])
        clusters: list[Cluster] = []
        top_rows = [g.rows for g in groups]
        for group, rows, words in zip(groups, top_rows, terms.top(top_rows)):
            subs = [self._cluster(memory_type, items, X, sub_rows, [], sub_words) for sub_rows, sub_words in zip(group.subs, terms.top(group.subs))]
            clusters.append(self._cluster(memory_type, items, X, group.direct, subs, words, all_rows=rows))
        for cluster in clusters:
            for planned in (cluster, *cluster.subs):
                planned.partitioned_at = basis
        known = {info["fingerprint"]: topic_id for topic_id, info in existing.items()}
        reverted = self.reverted.refresh().fingerprints
        held: set[str] = set()  # members of the clusters a revert undid: the topics it brought back stay
        for cluster in clusters:
            if cluster.fingerprint in known:
                out["kept"].append(cluster)
            elif (tenant, cluster.fingerprint) in reverted:
                out["held"] = out.get("held", 0) + 1
                held |= cluster.all_members
            else:
                out["new"].append(cluster)
        wanted = {cl.fingerprint for cl in clusters}
        kept = self.reverted.kept | self.reverted.kept_orphans
        out["stale"] = {
            tid: info for tid, info in existing.items()
            if info["fingerprint"] not in wanted and not info["members"] & held and (tenant, tid) not in kept
        }
        return out

    def _cluster(self, memory_type, items: list[Item], X, direct: list[int], subs: list[Cluster], words: list[str], all_rows=None) -> Cluster:
        rows = all_rows if all_rows is not None else direct
        centroid = X[rows].mean(axis=0)
        rep = items[rows[int(np.argmax(X[rows] @ centroid))]]
        members = [items[r].id for r in direct]
        words = words or rep.content.memory.split()[:3]
        key = ", ".join(words)[:200]
        example = " ".join(rep.content.memory.split())
        example = example if len(example) <= 300 else example[:299] + "\u2026"
        text = f"Topic: {key} ({len(rows)} memories). Example: {example}"
        sample = [items[r].content.memory for r in rows[:40]]
        return Cluster(members=members, subs=subs, fingerprint=fingerprint(memory_type, members, subs), key=key, text=text,
                       terms=list(words), representative=rep.id, sample=sample)

    async def summarize(self, clusters: list[Cluster]) -> None:
        """LLM titles and summaries for new clusters; the extractive ones stay on failure."""
        if self.summarizer is None:
            return

        async def one(cluster: Cluster) -> None:
            try:
                title, summary = await self.summarizer.summarize_topic(cluster.sample)
                cluster.key, cluster.text, cluster.summarizer = title[:200], summary, "llm"
            except (LLMUnavailable, ValueError) as exc:  # the endpoint failed or answered badly: keep the extractive summary
                cluster.summarizer = f"extractive (llm failed: {str(exc)[:200]})"

        await asyncio.gather(*(one(cl) for top in clusters for cl in (top, *top.subs)))

    # -- writing ----------------------------------------------------------------------------

    def _content(self, cluster: Cluster, memory_type: str, level: int, run: str) -> MemoryContent:
        props = {
            "organizer": "topics", "of_type": memory_type, "level": level, "run": run, "fingerprint": cluster.fingerprint,
            "size": len(cluster.all_members), "partitioned_at": cluster.partitioned_at, "terms": cluster.terms, "representative": cluster.representative, "summarizer": cluster.summarizer,
        }
        return MemoryContent(memory=cluster.text, memory_type=TOPIC, key=cluster.key or None, tags=("topic",), properties=props)

    @staticmethod
    def _parent_edges(run: str, counter: list[int]) -> tuple[list[c.EdgeRecord], Callable[[str, str, int], None]]:
        """A run's new PARENT edges, and how one is added to them (``parent:<run>:<n>``, numbered across the run)."""
        edges: list[c.EdgeRecord] = []

        def edge(source: str, target: str, level: int) -> None:
            counter[0] += 1
            edges.append(c.EdgeRecord(edge_id=f"parent:{run}:{counter[0]}", edge_type="PARENT", source=source, target=target, properties={"level": level}))

        return edges, edge

    def write(self, tenant: str, memory_type: str, cluster: Cluster, retire: list[str], run: str, counter: list[int]):
        ids = new_ids(1 + len(cluster.subs))
        add = [(ids[0], self._content(cluster, memory_type, 1, run))]
        edges, edge = self._parent_edges(run, counter)
        for sub_id, sub in zip(ids[1:], cluster.subs):
            add.append((sub_id, self._content(sub, memory_type, 2, run)))
            edge(ids[0], sub_id, 1)
            for member in sub.members:
                edge(sub_id, member, 2)
        for member in cluster.members:
            edge(ids[0], member, 1)
        ctx = CommandContext(tenant=tenant, correlation_id=run, actor=ACTOR)
        unlink = self._other_parents(tenant, cluster, set(), retire)
        return self.service.run(self._organize_unerased, ctx, cluster.all_members, add=add, link=edges, retire=retire, unlink=unlink, reason=RETIRED_REPLACED)

    @staticmethod
    def revisions(clusters: list[Cluster], stale: dict[str, dict[str, Any]]) -> list[str | None]:
        """For each of a run's changed ``clusters``, the live topic it revises in place (:func:`revised_topic`; each
        topic at most once, to the first cluster that claims it), else None."""
        claimed: list[str | None] = []
        for cluster in clusters:
            free = {tid: info for tid, info in stale.items() if tid not in claimed and info["members"] & cluster.all_members}
            claimed.append(revised_topic(cluster, free))
        return claimed

    def _other_parents(self, tenant: str, cluster: Cluster, keep: set[str], retire: list[str]) -> list[str]:
        """The organizer's live PARENT edges to ``cluster``'s members from topics other than ``keep`` (those the write
        revises, which see to their own edges) and those retired with it (which take their edges with them): a member
        moving from a topic another cluster revises."""
        members = cluster.all_members
        return sorted({
            e.edge_id for e in self.service.facts.live_edges_of(tenant, sorted(members))
            if e.edge_type == "PARENT" and e.edge_id.startswith("parent:") and e.target in members and e.source not in keep and e.source not in retire
        })

    def revise(self, tenant: str, memory_type: str, cluster: Cluster, topic_id: str, info: dict[str, Any], retire: list[str], run: str, counter: list[int]):
        """``cluster`` written as the revision of the live topic ``topic_id`` (``info``: its direct members, sub-topics and
        theirs), in one batch with the retirement of ``retire``: its text and properties updated; each new sub-topic
        that keeps a majority of an old one's members (:func:`majority_match`) revises it, the others are added and the
        old ones left over retired; PARENT edges are linked to the members each topic gains and unlinked from those it
        loses. A run after a few adds changes a few edges, where replacing the topic unlinked and linked again every
        one of its members."""
        revised = [(topic_id, self._content(cluster, memory_type, 1, run))]
        added: list[tuple[str, MemoryContent]] = []
        edges, edge = self._parent_edges(run, counter)
        held: dict[str, set[str]] = {topic_id: info["direct"]}  # each kept topic -> the members it holds now
        wanted: dict[str, set[str]] = {topic_id: set(cluster.members)}  # ... and those it is to hold
        free = dict(info["sub_members"])
        for sub in cluster.subs:
            old = majority_match(set(sub.members), free)
            if old is None:
                sub_id = new_id()
                added.append((sub_id, self._content(sub, memory_type, 2, run)))
                edge(topic_id, sub_id, 1)
                for member in sub.members:
                    edge(sub_id, member, 2)
                continue
            held[old], wanted[old] = free.pop(old), set(sub.members)
            if wanted[old] != held[old]:  # a sub-topic whose members stay is left as it is
                revised.append((old, self._content(sub, memory_type, 2, run)))
        retire = [*retire, *free]  # the old sub-topics no new one revises (their edges go with them)
        for kept, members in wanted.items():
            level = 1 if kept == topic_id else 2
            for member in sorted(members - held[kept]):
                edge(kept, member, level)
        unlink = [
            e.edge_id for e in self.service.facts.live_edges_of(tenant, sorted(held))
            if e.edge_type == "PARENT" and e.edge_id.startswith("parent:") and e.source in held and e.target in held[e.source] and e.target not in wanted[e.source]
        ]
        unlink += self._other_parents(tenant, cluster, set(held), retire)
        ctx = CommandContext(tenant=tenant, correlation_id=run, actor=ACTOR)
        return self.service.run(
            self._organize_unerased, ctx, cluster.all_members, add=added, update=revised, link=edges, unlink=unlink, retire=retire, reason=RETIRED_REPLACED
        )

    def _organize_unerased(self, ctx: CommandContext, members: set[str], **changes):
        """Write a planned cluster or conversation order (as the writer) unless a member was erased since it was
        read: a topic's text and key quote the members, and a forget between planning and writing must not see
        them written again (nor a chain link its erased turns); nor when one left (deleted, archived, merged
        away): the topic would hold it and quote it, the chain link it."""
        self.service.sync()
        items = load_items(self.service.read_conn(), ctx.tenant, ids=sorted(members))
        erased = sorted(i.id for i in items if i.content.erased)
        if erased:
            raise Conflict(f"memory {erased[0]} was erased (its subject was forgotten) since the cluster was planned")
        if gone := sorted(members - {i.id for i in items}):
            raise Conflict(f"memory {gone[0]} is no longer activated since the cluster was planned")
        return self.commands.organize(ctx, **changes)

    def retire(self, tenant: str, topic_ids: list[str], run: str, reason: str = RETIRED_STALE):
        ctx = CommandContext(tenant=tenant, correlation_id=run, actor=ACTOR)
        return self.service.run(self.commands.organize, ctx, retire=topic_ids, reason=reason)

    def orphaned(self, tenant: str) -> list[str]:
        """Live organizer topics with no activated memory left under them (e.g. after a revert deleted them all).

        A topic is kept while any memory below it (directly or through its
        sub-topics) is activated; a dead topic goes with its sub-topics.
        """
        conn = self.service.read_conn()
        topics = {i.id for i in load_items(conn, tenant, TOPIC) if i.content.properties.get("organizer") == "topics"}
        if not topics:
            return []
        children: dict[str, list[str]] = defaultdict(list)
        for source, target in conn.execute(
            "SELECT source, target FROM graph_edges WHERE tenant = ? AND edge_type = 'PARENT' AND valid_to IS NULL AND edge_id LIKE 'parent:%'", (tenant,)
        ):
            if source in topics:
                children[source].append(target)
        members = sorted({m for kids in children.values() for m in kids if m not in topics})
        active = {i.id for i in load_items(conn, tenant, ids=members)}

        def alive(topic: str, seen: frozenset = frozenset()) -> bool:
            return any(alive(k, seen | {topic}) if k in topics else k in active for k in children[topic] if k not in seen)

        kept = self.reverted.refresh().kept_orphans  # a revert brought it back as it was: it stays
        return sorted(t for t in topics if not alive(t) and (tenant, t) not in kept)

    def retire_orphaned(self, tenant: str, run: str) -> int:
        """Retire (archive, as events) the topics :meth:`orphaned` finds; how many."""
        orphans = self.orphaned(tenant)
        if orphans:
            self.retire(tenant, orphans, run, reason=RETIRED_ORPHAN)
        return len(orphans)

    # -- conversation order -------------------------------------------------------------------

    def follows_plan(self, tenant: str) -> list[tuple[str, list[str], list[c.EdgeRecord]]]:
        """Per conversation: (its chain's name, edge ids to unlink, edges to link) to reach the wanted chain.

        A chain is named by its first turn's memory id, never by the conversation id, which comes from
        the memories' sealed properties or sources: forgetting their subject must leave none of it in an
        edge (ids and properties are not sealed). Once erased, the turns place themselves in no
        conversation, and the chain is unlinked.
        """
        chains: dict[str, list[tuple]] = defaultdict(list)
        for item in load_items(self.service.read_conn(), tenant):
            if item.content.memory_type == TOPIC:
                continue
            place = conversation_place(item.content)
            if place is not None:
                chains[place[0]].append((place[1], item.valid_from, item.id))
        wanted: dict[str, dict[str, tuple[str, str]]] = {}
        for members in chains.values():
            ordered = [m[2] for m in sorted(members)]
            run = ordered[0]  # the chain's first turn names it: the conversation id is the memories' own (sealed) data
            wanted[run] = {f"follows:{run}:{n}": (a, b) for n, (a, b) in enumerate(zip(ordered, ordered[1:]), 1)}
        live: dict[str, dict[str, c.EdgeRecord]] = defaultdict(dict)
        for edge in self.service.facts.live_edges_with_prefix(tenant, "follows:"):
            live[edge.edge_id.rsplit(":", 1)[0][len("follows:"):]][edge.edge_id] = edge
        out = []
        reverted = self.reverted.refresh().follows  # read once for every conversation of the tenant
        for conv in sorted(set(wanted) | set(live)):
            want, have = wanted.get(conv, {}), live.get(conv, {})
            same = {eid for eid, e in have.items() if want.get(eid) == (e.source, e.target) and e.edge_type == "FOLLOWS"}
            if want and all((tenant, eid, a, b) in reverted for eid, (a, b) in want.items()):
                continue  # a revert undid this very order: linked again once the conversation changes
            unlink = sorted(set(have) - same)
            link = [
                c.EdgeRecord(edge_id=eid, edge_type="FOLLOWS", source=a, target=b, weight=1.0)
                for eid, (a, b) in sorted(want.items(), key=lambda kv: int(kv[0].rsplit(":", 1)[1]))
                if eid not in same
            ]
            if unlink or link:
                out.append((conv, unlink, link))
        return out

    def write_follows(self, tenant: str, unlink: list[str], link: list[c.EdgeRecord], run: str):
        ctx = CommandContext(tenant=tenant, correlation_id=run, actor=ACTOR)
        turns = {node for e in link for node in (e.source, e.target)}
        return self.service.run(self._organize_unerased, ctx, turns, link=link, unlink=unlink, reason="conversation order changed")

    # -- a run -----------------------------------------------------------------------------------

    async def arun(self, tenant: str | None = None, *, read_executor=None, write_executor=None, inline: bool = False, dry_run: bool = False) -> dict[str, Any]:
        loop = asyncio.get_running_loop()

        async def call(executor, fn: Callable, *args):
            return fn(*args) if inline else await loop.run_in_executor(executor, fn, *args)

        t0 = time.monotonic()
        deadline = self.clock() + float(self.settings.organizer_time_budget_s)
        run = new_id()
        counter = [0]
        report: dict[str, Any] = {"correlation_id": run, "created": 0, "revised": 0, "retired": 0, "kept": 0, "held": 0, "follows_linked": 0, "follows_unlinked": 0,
                                  "stopped": None, "clusters": [], "skipped": [], "errors": [], "by_tenant": {}}
        await call(write_executor, self.service.sync)
        tenants = [tenant] if tenant else await call(read_executor, self.tenants)
        for t in tenants:
            before, marks = {k: report[k] for k in TENANT_COUNTS}, (len(report["skipped"]), len(report["errors"]))
            try:
                try:
                    if dry_run:
                        report["retired"] += len(await call(read_executor, self.orphaned, t))
                    else:
                        report["retired"] += await call(write_executor, self.retire_orphaned, t, run)
                except (Conflict, NotFound, ValidationError) as exc:  # the graph moved on meanwhile: the next run sees it
                    report["errors"].append(f"{t}/orphaned topics: {exc}")
                for memory_type in self.types:
                    if self.clock() > deadline:
                        report["stopped"] = "time budget"
                        break
                    planned = await call(read_executor, self.plan, t, memory_type, deadline)
                    if "skipped" in planned:
                        if planned["candidates"]:
                            report["skipped"].append({"tenant": t, "memory_type": memory_type, "reason": planned["skipped"]})
                        if planned["skipped"] == "time budget":
                            report["stopped"] = "time budget"
                        continue
                    report["kept"] += len(planned["kept"])
                    report["held"] += planned.get("held", 0)
                    new: list[Cluster] = planned["new"]
                    if not dry_run:
                        await self.summarize(new)
                    stale = planned["stale"]
                    revising = self.revisions(new, stale)
                    for cluster, revised in zip(new, revising):
                        report["clusters"].append({"tenant": t, "memory_type": memory_type, "key": cluster.key, "size": len(cluster.all_members),
                                                   "subtopics": len(cluster.subs), "fingerprint": cluster.fingerprint})
                        if dry_run:
                            continue
                        if self.clock() > deadline:
                            report["stopped"] = "time budget"
                            break
                        # The topics it overlaps are retired, but those another cluster revises: that one's edges to the members
                        # this one takes are unlinked here.
                        overlap = [tid for tid, info in stale.items() if info["members"] & cluster.all_members and (tid == revised or tid not in revising)]
                        retire = [x for tid in overlap if tid != revised for x in (tid, *stale[tid]["subs"])]
                        try:
                            if revised is not None:
                                done = await call(write_executor, self.revise, t, memory_type, cluster, revised, stale[revised], retire, run, counter)
                            else:
                                await call(write_executor, self.write, t, memory_type, cluster, retire, run, counter)
                        except (Conflict, NotFound, ValidationError) as exc:  # the graph moved on meanwhile: the next run sees it
                            report["errors"].append(f"{t}/{memory_type}: {exc}")
                            continue
                        for tid in overlap:
                            stale.pop(tid)
                        if revised is not None:
                            report["revised"] += done.data["revised"]
                            report["created"] += done.data["added"]
                            report["retired"] += done.data["retired"]
                        else:
                            report["created"] += 1 + len(cluster.subs)
                            report["retired"] += len(retire)
                    if stale and not dry_run and report["stopped"] is None:
                        retire = [x for tid, info in stale.items() for x in (tid, *info["subs"])]
                        try:
                            await call(write_executor, self.retire, t, retire, run)
                            report["retired"] += len(retire)
                        except (Conflict, NotFound, ValidationError) as exc:
                            report["errors"].append(f"{t}/{memory_type}: {exc}")
                if report["stopped"]:
                    break
                for conv, unlink, link in await call(read_executor, self.follows_plan, t):
                    if dry_run:
                        report["follows_linked"] += len(link)
                        report["follows_unlinked"] += len(unlink)
                        continue
                    if self.clock() > deadline:
                        report["stopped"] = "time budget"
                        break
                    try:
                        await call(write_executor, self.write_follows, t, unlink, link, run)
                    except (Conflict, NotFound, ValidationError) as exc:
                        report["errors"].append(f"{t}/follows:{conv}: {exc}")
                        continue
                    report["follows_linked"] += len(link)
                    report["follows_unlinked"] += len(unlink)
            finally:  # what the run did in this tenant, for its own status (never another tenant's names or errors)
                report["by_tenant"][t] = {**{k: report[k] - before[k] for k in TENANT_COUNTS},
                                          "skipped": report["skipped"][marks[0]:], "errors": report["errors"][marks[1]:]}
        report["seconds"] = round(time.monotonic() - t0, 3)
        return report
