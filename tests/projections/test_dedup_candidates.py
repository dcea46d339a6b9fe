"""The organizer's candidate search equals a brute-force reading of its rule, whatever the corpus."""

from __future__ import annotations

from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mnemolog.eventstore.model import MemoryContent
from mnemolog.projections.policies import dedup
from mnemolog.projections.policies.dedup import Corpus, Item, candidates, slot
from mnemolog.projections.policies.judge import Verdict, normalize_text

TEXTS = ["Alice lives in Berlin", "alice lives in  berlin", "Bob plays chess", "tea at five"]
# Unit vectors whose cosines every way of computing them gives alike, ties included: every component and
# product is exact in binary (0.6 and 0.8 are not: a float32 product of (0.6, 0.8) with itself is 1.0 or
# 1.0000001 by the path the matrix product takes, and a tie broken by index turns on it).
UNITS = [(1.0, 0.0, 0.0, 0.0), (0.0, 1.0, 0.0, 0.0), (0.5, 0.5, 0.5, 0.5), (0.5, -0.5, 0.5, -0.5), (0.5, 0.5, -0.5, -0.5), (-1.0, 0.0, 0.0, 0.0)]

_memory = st.tuples(
    st.sampled_from(TEXTS),
    st.sampled_from([None, "home", "Home ", "pet"]),
    st.sampled_from([None, None, "u-1", "u-2"]),
    st.booleans(),  # erased
    st.sampled_from(UNITS),
)


def _corpus(memories) -> Corpus:
    items, vectors = [], []
    for n, (text, key, subject, erased, vector) in enumerate(memories):
        content = MemoryContent(memory=text, key=key, subject=subject, erased=erased)
        items.append(Item(f"m{n:03d}", 1, n + 1, "2026-01-01T00:00:00", content))
        vectors.append(vector)
    return Corpus("t", "LongTermMemory", items, np.asarray(vectors, dtype=np.float32).reshape(len(items), 4), [normalize_text(i.content.memory) for i in items])


def _brute(corpus: Corpus, triggers: list[int], min_cos: float, top_k: int) -> list[tuple[int, int, float]]:
    out = []
    X = corpus.vectors.astype(np.float64)
    for i in triggers:
        a = corpus.items[i].content
        if a.erased:
            continue
        cos = {j: float(X[i] @ X[j]) for j in range(len(corpus.items))
               if j != i and not corpus.items[j].content.erased and corpus.items[j].content.subject == a.subject}
        found = sorted((j for j, s in cos.items() if s >= min_cos), key=lambda j: (-cos[j], j))[:top_k]
        same = [j for j in cos if j not in found and (corpus.norms[j] == corpus.norms[i] or (slot(a.key) and slot(corpus.items[j].content.key) == slot(a.key)))]
        extra = sorted(same, key=lambda j: (-cos[j], j))[:top_k]
        out += [(i, j, round(max(cos[j], 0.0), 5)) for j in sorted({*found, *extra})]
    return out


@settings(max_examples=200, deadline=None)
@given(
    memories=st.lists(_memory, min_size=2, max_size=14), min_cos=st.sampled_from([0.3, 0.8, 0.99]), top_k=st.integers(1, 4),
    budget=st.sampled_from([1, 20, dedup.SIMILARITIES_PER_CHUNK]), data=st.data(),
)
def test_candidates_are_the_rule_read_by_brute_force(memories, min_cos, top_k, budget, data):
    corpus = _corpus(memories)
    triggers = sorted(data.draw(st.sets(st.integers(0, len(memories) - 1), min_size=1)))
    with patch.object(dedup, "SIMILARITIES_PER_CHUNK", budget):  # a corpus too large for many triggers a chunk: fewer, same answer
        found = [(i, j, round(cos, 5)) for i, j, cos, _ in candidates(corpus, [(i, None) for i in triggers], min_cos, top_k)]
    assert found == _brute(corpus, triggers, min_cos, top_k)
    for i, j, _ in found:  # never across subjects, never an erased memory
        assert corpus.items[i].content.subject == corpus.items[j].content.subject
        assert not corpus.items[i].content.erased and not corpus.items[j].content.erased


class _Reverted:
    """A stand-in for :class:`RevertedDecisions` holding the given pairs apart."""

    def __init__(self, pairs):
        self.pairs = {("t", *sorted(p)) for p in pairs}
        self._partners: dict = {}
        for a, b in pairs:
            self._partners.setdefault(("t", a), set()).add(b)
            self._partners.setdefault(("t", b), set()).add(a)

    apart = dedup.RevertedDecisions.apart
    separates = dedup.RevertedDecisions.separates


_label = st.sampled_from(["redundant", "redundant", "contradictory", "independent"])


@settings(max_examples=300, deadline=None)
@given(
    judged=st.dictionaries(st.tuples(st.integers(0, 7), st.integers(0, 7)).filter(lambda p: p[0] < p[1]), _label, max_size=20),
    apart=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)).filter(lambda p: p[0] < p[1]), max_size=3),
)
def test_decisions_never_join_what_was_judged_contradictory_or_reverted(judged, apart):
    items = [Item(f"m{n}", 1, n + 1, f"2026-01-0{n + 1}T00:00:00", MemoryContent(memory=f"text {n}")) for n in range(8)]
    pairs = [dedup.Pair("t", "LongTermMemory", items[a], items[b], 0.9, n + 1, f"e{n}") for n, (a, b) in enumerate(judged)]
    verdicts = [Verdict(label, "why", "rule", "2", 0.9) for label in judged.values()]
    planned = dedup.decide(pairs, verdicts, _Reverted([(f"m{a}", f"m{b}") for a, b in apart]))
    contradictory = {frozenset((f"m{a}", f"m{b}")) for (a, b), label in judged.items() if label == "contradictory"}
    held = {frozenset((f"m{a}", f"m{b}")) for a, b in apart}
    merged = [m for p in planned if p.action == "merge" for m in p.memory_ids]
    assert len(merged) == len(set(merged))  # a memory is in one merge at most
    for p in planned:
        if p.action == "merge":
            together = {frozenset((x, y)) for x in p.memory_ids for y in p.memory_ids if x != y}
            assert not together & contradictory and not together & held
        else:
            older, newer = p.memory_ids
            assert frozenset((older, newer)) in contradictory and not {older, newer} & set(merged)
            assert items[int(older[1:])].updated_at <= items[int(newer[1:])].updated_at  # the newer supersedes


_text = st.sampled_from(["Alice lives in Berlin", "alice lives in berlin.", "Alice lives in Berlin with two cats", "Alice lives in Berlin and works at Acme"])
_extras = st.fixed_dictionaries(
    {},
    optional={
        "tags": st.lists(st.sampled_from([f"t{n}" for n in range(12)]), max_size=6, unique=True).map(tuple),
        "properties": st.dictionaries(st.sampled_from(["page", "chat"]), st.integers(1, 2), max_size=2),
        "confidence": st.sampled_from([0.5, 0.9]),
        "background": st.sampled_from(["chat 1", "chat 2"]),
    },
)


@settings(max_examples=300, deadline=None)
@given(
    memories=st.lists(st.tuples(_text, _extras), min_size=2, max_size=7),
    judged=st.dictionaries(st.tuples(st.integers(0, 6), st.integers(0, 6)).filter(lambda p: p[0] < p[1]), _label, max_size=21),
)
def test_a_merge_keeps_every_text_and_value_of_its_members(memories, judged):
    """Every two members of a merge were judged redundant (the memories that share their normalised texts, at
    least), and no tag,
    property or other value of one is left out: an automatic merge loses nothing."""
    from mnemolog.eventstore.model import merge_losses
    from mnemolog.projections.policies.judge import normalize_text

    items = [Item(f"m{n}", 1, n + 1, f"2026-01-0{n + 1}T00:00:00", MemoryContent(memory=text, **extra)) for n, (text, extra) in enumerate(memories)]
    judged = {(a, b): label for (a, b), label in judged.items() if b < len(items)}
    pairs = [dedup.Pair("t", "LongTermMemory", items[a], items[b], 0.9, n + 1, f"e{n}") for n, (a, b) in enumerate(judged)]
    verdicts = [Verdict(label, "why", "rule", "2", 0.9) for label in judged.values()]
    def kind(n: int) -> str:  # what a judgement on a memory stands for: the memories with its normalised text
        return normalize_text(items[n].content.memory)

    alike = {frozenset((kind(a), kind(b))) for (a, b), label in judged.items() if label == "redundant"}
    by_id = {it.id: it for it in items}
    for p in dedup.decide(pairs, verdicts):
        if p.action != "merge":
            continue
        members = [by_id[m] for m in p.memory_ids]
        assert merge_losses([m.content for m in members]) == []
        for x in p.memory_ids:
            for y in p.memory_ids:
                assert kind(int(x[1:])) == kind(int(y[1:])) or frozenset((kind(int(x[1:])), kind(int(y[1:])))) in alike
        assert normalize_text(p.text) in {normalize_text(m.content.memory) for m in members}
