"""Pairwise judges for the organizer: is a pair of memories ``redundant`` (merge,
never destructively, into :func:`merged_text`), ``contradictory`` (the newer
supersedes the older) or ``independent``?

A wrong merge or supersede costs the user a fact; a missed one costs a
duplicate.  So :class:`RuleJudge` says ``independent`` whenever it is unsure,
calls a pair redundant only on strong lexical evidence, and never when the
texts differ in a number, time, date, negation or a pair of opposites
(enabled / disabled): those are contradiction signals.

A contradiction is one subject and attribute with incompatible values ("Zoe is
30" / "Zoe is 31"; "lives in Paris" / "moved to Berlin").  A differing value
alone is not one:

* identifiers make two memories different things: a number after an
  identifier noun ("invoice 1001", "recipe number 12", "ticket #57"), a code
  ("JIRA-1203", "v3.1"), a number modifying the subject ("the 2023 tax
  return", "Hana's first car"), a list item's number ("1. buy milk") or a
  number or a capital letter right after the word a text opens with ("bulk
  274 imported", "sensor 4 reports": the numbered records of a batch;
  "Server A has": not the pronoun I; not an attribute's value, "age 30", nor a
  measure, "weight 70 kg"), when it comes before the copula.  After it ("the app is on version 2.3") a
  number is the value stated;
* two values conflict only in the same place of the sentence ("Alice has [3]
  cats" / "owns [four] cats", not "Zoe is [30]" / "Zoe has [3] cats");
* past events that differ only in their date are two occasions ("paid the
  bill on March 3" / "on April 3"), and texts stating different times that
  differ in another value too are two observations of something that changes
  ("temperature at 9am: 21C" / "at 3pm: 23C"), unless the event happens once
  (born, married, started) or both name the same thing ("order 5531");
* without keys, a value stated in the past beside one stated now ("weighed
  85 kg" / "weighs 80 kg") is two times of one thing, not a state reversed.

Keys are slots: different keys are independent; the same key names subject
and attribute, so a value conflict or a different value in an otherwise shared
sentence ("Works at Acme" / "Works at Globex") is a contradiction, but texts
in different scripts ("我的家乡是柏林" / "Home city: Berlin") or that share no
value slot are not compared.  Without keys, only single-valued relations
("lives in", "works at/as", "was born in", "favourite X is", "prefers X
<shared>") make different values a contradiction; different objects of other
relations ("Alice likes tea" / "Alice likes coffee") are independent: people
like several things.  Chinese and Japanese state the same relations
(:mod:`.judge_cjk`: "我住在里斯本" / "我现在住在波尔图", "トヨタで働いています" /
"ソニーで働いています"), read only where a clause is one subject, relation and
value, not a wish, a past state, a list, a negation or a question.

Pure module (no I/O); :meth:`RuleJudge.judge_sync` serves hot loops and text
analysis is cached per text.
"""

from __future__ import annotations

import hashlib
import math
import re
from difflib import SequenceMatcher
from typing import Literal, Protocol, runtime_checkable

import msgspec

from .. import text_caches
from .judge_text import (  # noqa: F401 - normalize_text is part of this module's interface
    _ATTRIBUTE_STEMS,
    _Analysis,
    _CONTRAST,
    _CJK_RE,
    _CONTRAST_STEMS,
    _DENIAL_STEMS,
    _FILLER_STEMS,
    _KINDS,
    _NEGATING_PREFIXES,
    _OPPOSITE_OF,
    _RELATION_SLOTS,
    _analyse,
    _classify,
    _is_year,
    _frame,
    _lex,
    _prepare,
    _stem,
    normalize_text,
)

__all__ = ["LABELS", "Judge", "JudgedMemory", "Label", "RuleJudge", "RuleJudgeConfig", "Verdict",
           "about_different_things", "merged_text", "normalize_text"]

Label = Literal["redundant", "contradictory", "independent"]
LABELS: tuple[str, ...] = ("redundant", "contradictory", "independent")
# 3: negation in Chinese and Japanese text; 4: the same verdict whichever text comes first; 5: single-valued
# relations in Chinese and Japanese (住在, 在…工作, 最喜欢的…是; に住んでいます, で働いています, 好きな…は), Japanese with
# and without katakana one script, Latin names in CJK text part of it, 3号楼 / 501室 identifiers; 6: a place and a
# time of one relation ("born in Paris" / "born in 1990") and homes and employers stated in the past ("lived in")
# are no contradiction; 7: an Indic word read whole, with its vowel signs
# 8: a minus sign part of its number ("-18" / "18"), and a text calling the other false, cancelling it or putting it in
# the past, or asking what it states ("X?"), no repeat of it; 9: a number right after the word a text opens with labels it
# ("bulk 274 ...", "sensor 4 reports ..."), unless that word is an attribute or a unit follows the number; 10: texts
# stating different times that differ in another value too are two observations ("at 9am: 21C" / "at 3pm: 23C");
# 11: a capital letter after the word a text opens with labels it ("Server A" / "Server B"); 12: without keys, a value
# stated in the past beside one stated now is no contradiction ("weighed 85 kg" / "weighs 80 kg"); 13: observations at
# different times that differ in polarity ("not available on Monday" / "available on Tuesday") both hold; 14: times said
# relative to the writing ("last year", "this week", "two days ago") are times
RULE_JUDGE_VERSION = "14"


class JudgedMemory(msgspec.Struct, frozen=True):
    """The view of a memory a judge needs."""

    id: str
    memory: str
    key: str | None = None
    memory_type: str = "fact"
    updated_at: str = ""  # ISO-8601
    tags: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()


class Verdict(msgspec.Struct, frozen=True):
    """A decision on one pair.  ``similarity``: the cosine it was judged with;
    ``fused_text``: merged text (redundant only); ``fallback``: why an LLM judge
    failed when this verdict comes from the rule judge instead."""

    label: Label
    reason: str
    judge: str
    judge_version: str
    similarity: float
    fused_text: str | None = None
    fallback: str | None = None


@runtime_checkable
class Judge(Protocol):
    name: str
    version: str

    async def judge(self, a: JudgedMemory, b: JudgedMemory, cosine: float) -> Verdict: ...


class RuleJudgeConfig(msgspec.Struct, frozen=True):
    """Thresholds of the rule judge (similarities are in [0, 1])."""

    # redundant without containment: cosine >= this, content words nested (extras
    # only appended), Jaccard >= min_jaccard, word order ratio >= min_order
    redundant_cosine: float = 0.95
    redundant_min_jaccard: float = 0.5
    redundant_min_order: float = 0.75
    # a pair differing in a value, negation or opposite is contradictory when the
    # content-word Jaccard (values masked) reaches contradiction_similarity, or
    # the cosine reaches contradiction_cosine with Jaccard >= min_similarity
    contradiction_similarity: float = 0.5
    contradiction_cosine: float = 0.9
    contradiction_min_similarity: float = 0.4
    # containment: the contained text must be this substantial; what precedes
    # it in the other text may only be filler ("Note:", "Since 2020,")
    containment_min_chars: int = 16
    containment_min_words: int = 3


def _jaccard(a: frozenset[str] | set[str], b: frozenset[str] | set[str]) -> float:
    union = a | b
    return len(a & b) / len(union) if union else 0.0


def _show(values) -> str:
    number = re.compile(r"\d+(?:\.\d+)?")
    return ", ".join(sorted(values, key=lambda v: (0, float(v)) if number.fullmatch(v) else (1, v)))


def _aligned(a: _Analysis, b: _Analysis, kind: str, only_a: frozenset[str], only_b: frozenset[str]) -> bool:
    """A value of ``a`` and one of ``b`` sit in the same place: the same word
    before or after them ("Alice has [3] cats" / "Alice now owns [four] cats"),
    so they are values of one attribute, not of two ("Zoe is [30]" / "Zoe has
    [3] cats")."""
    slot = f"<{kind}>"

    def places(t: _Analysis, only: frozenset[str]) -> list[tuple[str, str]]:
        f = t.frame
        return [(f[i - 1][0] if i else "^", f[i + 1][0] if i + 1 < len(f) else "$")
                for i, (s, v) in enumerate(f) if s == slot and v in only]

    pb = places(b, only_b)
    return any(left == lb or right == rb for left, right in places(a, only_a) for lb, rb in pb)


def _daypart_stated(t: _Analysis) -> bool:
    """The part of the day is the value stated ("the call is in the morning",
    "prefers meetings in the morning"), not when a habit happens."""
    for slot, _ in t.frame:
        if slot == "<daypart>":
            return False
        if slot in ("be", "prefer"):
            return True
    return False


def _conflicts(a: _Analysis, b: _Analysis) -> list[str]:
    """Evidence that the texts disagree on a value or on polarity.  Values of a
    kind conflict when neither set contains the other (adding one is
    elaboration) and two of the differing ones are in the same place."""
    found = []
    for kind in _KINDS:
        va, vb = a.values[kind], b.values[kind]
        if kind == "daypart" and not (_daypart_stated(a) and _daypart_stated(b)):
            continue  # "likes running in the morning" / "in the evening": habits, both can hold
        if va and vb and not (va <= vb or vb <= va) and _aligned(a, b, kind, va - vb, vb - va):
            found.append(f"{kind}s differ: {_show(va - vb)} vs {_show(vb - va)}")
    flip_a = sorted(w for w in a.negated - b.negated if w in b.content)
    flip_b = sorted(w for w in b.negated - a.negated if w in a.content)
    if flip_a or flip_b:
        parts = [f"{side} negates '{', '.join(ws)}'" for side, ws in (("A", flip_a), ("B", flip_b)) if ws]
        found.append("negation differs: " + "; ".join(parts))
    return found


def _opposites(only_a: set[str], only_b: set[str]) -> list[tuple[str, str]]:
    """Word pairs of opposite meaning: listed ones, or x / un-x, dis-x, in-x, ..."""
    out: list[tuple[str, str]] = []
    if not only_a or not only_b:
        return out
    for x in sorted(only_a):  # each x's possible opposites, looked up rather than tried against every y
        partners = set(_OPPOSITE_OF.get(x, ()))
        for p in _NEGATING_PREFIXES:
            partners.add(p + x)
            if x.startswith(p):
                partners.add(x[len(p) :])
        out += [(x, y) for y in sorted(partners & only_b)]
    return out


def _tense_differs(a: _Analysis, b: _Analysis) -> bool:
    """One text speaks of the past (was, formerly, worked), the other of the present."""
    if (a.past and not b.past and b.present) or (b.past and not a.past and a.present):
        return True
    return bool(a.past_stems & (b.plain_stems - b.past_stems) or b.past_stems & (a.plain_stems - a.past_stems))


_DATE_KINDS = frozenset("month weekday day time daypart".split())


def _occasions(a: _Analysis, b: _Analysis) -> bool:
    """Both texts tell of a past event and differ only in when: two occasions
    ("paid the bill on March 3" / "on April 3"), unless the event happens once
    (born, married, started) or both name the same thing ("order 5531");
* without keys, a value stated in the past beside one stated now ("weighed
  85 kg" / "weighs 80 kg") is two times of one thing, not a state reversed."""
    if not (a.past_event and b.past_event) or a.once or b.once or a.idents & b.idents:
        return False
    differing = [k for k in _KINDS if a.values[k] != b.values[k]]
    dates = a.date_numbers | b.date_numbers
    return bool(differing) and all(
        k in _DATE_KINDS or (k == "number" and a.values[k] ^ b.values[k] <= dates) for k in differing)


def _dates(t: _Analysis) -> frozenset[str]:
    """The numbers of a text's dates: beside a month, and years ("September 19, 2024")."""
    return t.date_numbers | {n for n in t.values["number"] if _is_year(n)}


def _when(t: _Analysis) -> frozenset[tuple[str, str]]:
    """The times, days and dates a text states."""
    return frozenset({(k, v) for k in _DATE_KINDS for v in t.values[k]} | {("date", n) for n in _dates(t)})


def _observations(a: _Analysis, b: _Analysis, opposed: bool) -> bool:
    """Both texts say when, at times neither of which holds the other, and differ in another value, or in
    polarity (``opposed``: opposites, or a negation on one side), too: two observations of something that
    changes ("temperature at 9am: 21C" / "at 3pm: 23C", "blood pressure was 120/80 on Monday" / "130/85 on
    Friday", "not available on Monday" / "available on Tuesday"); both hold. Not for an event that happens
    once, nor for one thing both name ("order 5531"); a text differing only in when states the time itself
    ("departs at 9:40")."""
    if a.once or b.once or a.idents & b.idents:
        return False
    when_a, when_b = _when(a), _when(b)
    if not when_a or not when_b or when_a <= when_b or when_b <= when_a:
        return False
    return opposed or a.n_neg != b.n_neg or any(
        a.values[k] - _dates(a) != b.values[k] - _dates(b) if k == "number" else a.values[k] != b.values[k]
        for k in _KINDS if k not in _DATE_KINDS
    )


_STRUCTURE = frozenset({"be", "have", "<not>", "<ident>"}) | _RELATION_SLOTS


def _value_slot(a: _Analysis, b: _Analysis, key_stems: frozenset[str] | None) -> str:
    """The values of one attribute of one subject, when the texts state two:
    they share everything but one span each (the value), and what they share
    names the attribute.  With a key (``key_stems``: the stems of its words)
    the key names it; without one, only a single-valued relation does ("lives
    in", "works at", "was born in", "favourite food is", "prefers ... seats").
    Returns ``"<value a> vs <value b>"``, or '' (unsure: no slot)."""
    fa, fb = a.frame, b.frame
    limit = min(len(fa), len(fb))
    p = 0
    while p < limit and fa[p] == fb[p]:
        p += 1
    s = 0
    while s < limit - p and fa[-1 - s] == fb[-1 - s]:
        s += 1
    mid_a, mid_b = fa[p:len(fa) - s], fb[p:len(fb) - s]
    if not mid_a or not mid_b:
        return ""
    slots_a, slots_b = [x for x, _ in mid_a], [x for x, _ in mid_b]
    shared = [x for x, _ in fa[:p]]
    if key_stems is not None:
        def states_a_value(mid: list[str]) -> bool:
            return any(x not in _STRUCTURE and x not in key_stems for x in mid) and "<ident>" not in mid
        if not (states_a_value(slots_a) and states_a_value(slots_b)):
            return ""
        if not (p or s or (len(fa) <= 2 and len(fb) <= 2)):  # bare values: "Vegan" / "Pescatarian"
            return ""
    else:
        if any(x in _STRUCTURE for x in slots_a + slots_b) or max(_width(mid_a), _width(mid_b)) > 5:
            return ""
        relations = _RELATION_SLOTS.intersection(shared)
        if relations & _HOME_AND_WORK and (a.past or b.past or (a.past_stems | b.past_stems) & _HELD_THEN):
            return ""  # "lived in Paris" / "lived in Rome": two past homes are both true, and a past one beside today's
        if _names_a_time(mid_a) != _names_a_time(mid_b):
            return ""  # "born in Paris" / "born in 1990": a place and a time, both true
        relation = bool(relations)
        attribute = any(x in _ATTRIBUTE_STEMS and "be" in shared[i + 1:] for i, x in enumerate(shared))
        preference = "prefer" in shared and s > 0
        if not (relation or attribute or preference):
            return ""

    def show(mid: tuple[tuple[str, str], ...]) -> str:
        words = [v or x for x, v in mid]
        return "".join(w if not i or (_CJK_RE.match(w) and _CJK_RE.match(words[i - 1])) else " " + w
                       for i, w in enumerate(words))

    return f"{show(mid_a)} vs {show(mid_b)}"


_HOME_AND_WORK = frozenset({"<residence>", "<employer>", "<job>"})  # single-valued now, not over a life
_HELD_THEN = frozenset(map(_stem, "lived resided worked employed".split()))  # their verbs in the past ("moved" is today's home)


def _names_a_time(mid: tuple[tuple[str, str], ...]) -> bool:
    """Whether a value span holds a number, a date or a part of one ("1990", "May 3"), not only words ("Paris")."""
    return any(x.startswith("<") for x, _ in mid)


def _width(mid: tuple[tuple[str, str], ...]) -> float:
    """How many words a span of a frame holds: a CJK character is half of one (a word of CJK text is mostly
    two characters: 波尔图 is one value, as "Porto" is)."""
    return sum(0.5 if len(x) == 1 and _CJK_RE.match(x) else 1 for x, _ in mid)


def _only_appended(short: tuple[str, ...], long_: tuple[str, ...]) -> bool:
    """The longer word sequence adds words only after the last shared one."""
    shared = set(short)
    last = max((i for i, w in enumerate(long_) if w in shared), default=-1)
    return all(w in shared for w in long_[: last + 1])


@text_caches.lru_cache(maxsize=4096)
def _key_stems(key: str) -> frozenset[str]:
    return frozenset(w for w, _ in _frame(_classify(_lex(key))))


def _norm_key(key: str | None) -> str:
    return " ".join(_prepare(key).split()) if key else ""


def _short(text: str, limit: int = 60) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


# --------------------------------------------------------------------------
# judging


class RuleJudge:
    """Deterministic lexical judge; see the module docstring for the policy."""

    name = "rule"

    def __init__(self, config: RuleJudgeConfig | None = None) -> None:
        self.config = config or RuleJudgeConfig()
        self.version = RULE_JUDGE_VERSION
        if self.config != RuleJudgeConfig():
            self.version += "+" + hashlib.sha256(msgspec.json.encode(self.config)).hexdigest()[:8]

    def __repr__(self) -> str:
        return f"RuleJudge(version={self.version!r})"

    async def judge(self, a: JudgedMemory, b: JudgedMemory, cosine: float) -> Verdict:
        return self.judge_sync(a, b, cosine)

    def judge_sync(self, a: JudgedMemory, b: JudgedMemory, cosine: float | None) -> Verdict:
        cfg = self.config
        cos = float(cosine) if cosine is not None and math.isfinite(cosine) else 0.0

        def verdict(label: Label, reason: str) -> Verdict:
            fused = merged_text(a, b) if label == "redundant" else None
            return Verdict(label, reason, self.name, self.version, cos, fused_text=fused)

        ka, kb = _norm_key(a.key), _norm_key(b.key)
        ta, tb = _analyse(a.memory or ""), _analyse(b.memory or "")
        if why := _different_keys(a, b):
            return verdict("independent", why)
        keyed = f"same key {a.key!r}" if ka and kb else ""
        if not ta.norm or not tb.norm:
            return verdict("independent", "empty text")
        if ta.norm == tb.norm and ta.question == tb.question:
            return verdict("redundant", f"{keyed} and normalised texts equal" if keyed else "normalised texts equal")
        if ta.scripts != tb.scripts:  # a shared key does not make them comparable
            return verdict("independent", f"written in different scripts ({_show(ta.scripts) or 'none'} vs "
                                          f"{_show(tb.scripts) or 'none'}): not comparable")
        if why := _different_things(ta, tb):
            return verdict("independent", why)

        words_a, words_b = set(ta.words), set(tb.words)
        opposites = _opposites(words_a - words_b, words_b - words_a)
        conflicts = _conflicts(ta, tb)
        if opposites:
            conflicts.append("opposites: " + ", ".join(f"{x} vs {y}" for x, y in opposites))
            words_a -= {x for x, _ in opposites}
            words_b -= {y for _, y in opposites}
        if keyed:  # the key names subject and attribute: a differing value contradicts
            if conflicts:
                return verdict("contradictory", f"{keyed} with incompatible values: {'; '.join(conflicts)}")
            key_stems = _key_stems(ka)
            if (values := _value_slot(ta, tb, key_stems)) and not _tense_differs(ta, tb):
                return verdict("contradictory", f"{keyed} with different values: {values} "
                                                f"({_short(a.memory)!r} vs {_short(b.memory)!r})")
        elif conflicts:
            evidence = "; ".join(conflicts)
            if words_a - words_b and words_b - words_a:  # "visited Paris in 2019" / "Rome in 2021"
                return verdict("independent", f"{evidence}, but about different things: "
                                              f"{_show(words_a - words_b)} vs {_show(words_b - words_a)}")
            if _occasions(ta, tb):
                return verdict("independent", f"{evidence}, but of different occasions (past events)")
            if _observations(ta, tb, bool(opposites)):
                return verdict("independent", f"{evidence}, but observed at different times")
            if not opposites and ta.n_neg == tb.n_neg and _tense_differs(ta, tb) and not (ta.once or tb.once):
                # "weighs 80 kg" / "weighed 85 kg": a value of then beside one of now (not a state reversed)
                return verdict("independent", f"{evidence}, but one of them in the past")
            masked = {"<opposite>"} if opposites else set()  # values and opposites count as shared
            sim = _jaccard(words_a | (ta.content - ta.words) | masked, words_b | (tb.content - tb.words) | masked)
            if sim >= cfg.contradiction_similarity:
                return verdict("contradictory", f"{evidence} (word similarity {sim:.2f})")
            if cos >= cfg.contradiction_cosine and sim >= cfg.contradiction_min_similarity:
                return verdict("contradictory", f"{evidence} (cosine {cos:.2f}, word similarity {sim:.2f})")
            return verdict("independent", f"{evidence}, but texts not similar enough "
                                          f"(word similarity {sim:.2f}, cosine {cos:.2f})")
        elif ta.n_neg == tb.n_neg and not _tense_differs(ta, tb) and (values := _value_slot(ta, tb, None)):
            return verdict("contradictory", f"one subject, a single-valued attribute, different values: {values} "
                                            f"({_short(a.memory)!r} vs {_short(b.memory)!r})")

        differing = [f"{k}s {_show(ta.values[k] - tb.values[k])} vs {_show(tb.values[k] - ta.values[k])}"
                     for k in _KINDS if ta.values[k] - tb.values[k] and tb.values[k] - ta.values[k]]
        if differing:  # never redundant; not a contradiction either unless shown above
            return verdict("independent", f"values differ ({'; '.join(differing)}) but not as values of "
                                          f"one attribute")

        sim = _jaccard(ta.content, tb.content)
        short, long_ = (ta, tb) if len(ta.norm) <= len(tb.norm) else (tb, ta)
        at = f" {long_.norm} ".find(f" {short.norm} ")
        if (at >= 0 and len(short.norm) >= cfg.containment_min_chars and ta.n_neg == tb.n_neg
                and short.n_words >= cfg.containment_min_words):
            lead = _analyse(long_.norm[:at]).seq
            extra = (long_.norm[:at] + " " + long_.norm[at + len(short.norm):]).split()
            if (all(w.startswith("<") or w in _FILLER_STEMS for w in lead) and not _CONTRAST & set(extra)
                    and not _DENIAL_STEMS & {_stem(w) for w in extra} and not _tense_differs(ta, tb) and ta.question == tb.question):
                which = "A" if short is ta else "B"
                return verdict("redundant", f"containment: {which} ({len(short.norm)} chars) is contained "
                                            f"in the other ({len(long_.norm)} chars)")

        if cos < cfg.redundant_cosine:
            return verdict("independent", f"no rule fired (cosine {cos:.2f}, word similarity {sim:.2f})")
        only_a, only_b = ta.content - tb.content, tb.content - ta.content
        # Both measured on the pair in one canonical order: SequenceMatcher's ratio, and which text is the shorter
        # where neither has content words of its own, depend on the order, and a verdict must not.
        first, second = sorted((ta.seq, tb.seq), key=lambda seq: (len(seq), seq))
        order = SequenceMatcher(None, first, second, autojunk=False).ratio()
        short_seq, long_seq = (tb.seq, ta.seq) if only_a else (ta.seq, tb.seq) if only_b else (first, second)
        why = (f"different content words: {_show(only_a)} vs {_show(only_b)}" if only_a and only_b
               else "one text has more negations" if ta.n_neg != tb.n_neg
               else "one text asks what the other states" if ta.question != tb.question
               else f"qualifier {_show((only_a | only_b) & _CONTRAST_STEMS)}" if (only_a | only_b) & _CONTRAST_STEMS
               else f"one text calls the other {_show((only_a | only_b) & _DENIAL_STEMS)}" if (only_a | only_b) & _DENIAL_STEMS
               else f"low word overlap {sim:.2f}" if sim < cfg.redundant_min_jaccard
               else f"word order differs ({order:.2f})" if order < cfg.redundant_min_order
               else "extra words inside the shared text" if not _only_appended(short_seq, long_seq)
               else "tense differs (past vs present)" if _tense_differs(ta, tb)
               else "")
        if why:
            return verdict("independent", f"cosine {cos:.2f} but {why}")
        return verdict("redundant", f"cosine {cos:.2f} >= {cfg.redundant_cosine} and content words "
                                    f"nested (word similarity {sim:.2f}, order {order:.2f})")


def _different_keys(a: JudgedMemory, b: JudgedMemory) -> str:
    """Why two memories hold two slots (different keys), or ''."""
    ka, kb = _norm_key(a.key), _norm_key(b.key)
    return f"different keys: {a.key!r} vs {b.key!r}" if ka and kb and ka != kb else ""


def _different_things(ta: _Analysis, tb: _Analysis) -> str:
    """Why two texts are about two things (each names an identifier the other does not: "invoice 1001" / "1002"), or ''."""
    if ta.idents - tb.idents and tb.idents - ta.idents:
        return f"different things: identifiers {_show(ta.idents - tb.idents)} vs {_show(tb.idents - ta.idents)}"
    return ""


def about_different_things(a: JudgedMemory, b: JudgedMemory) -> str:
    """Why two memories can neither repeat nor contradict each other whatever a judge reads in their
    words: two slots (different keys), or two things (different identifiers); '' when neither."""
    return _different_keys(a, b) or _different_things(_analyse(a.memory or ""), _analyse(b.memory or ""))


def clipped(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the last an ellipsis: what a decision records of a reason, or an
    error of an endpoint's answer (which may be of any length)."""
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def restates(fused: str, a: str, b: str, kept: float) -> bool:
    """Whether ``fused`` says what ``a`` and ``b`` say: at least a share ``kept`` of each one's content words
    (stemmed, values apart), few of its own (one, or a fifth of its words), and the negations they hold, no other
    ("never eats meat" is not "eats meat")."""
    said, ta, tb = _analyse(fused), _analyse(a), _analyse(b)
    share = lambda words: len(words & said.words) / len(words) if words else 1.0  # noqa: E731
    return (
        min(share(ta.words), share(tb.words)) >= kept
        and len(said.words - ta.words - tb.words) <= max(1, len(said.words) // 5)
        and said.negated == ta.negated | tb.negated
        and (said.n_neg > 0) == (ta.n_neg + tb.n_neg > 0)
    )


def merged_text(a: JudgedMemory | str, b: JudgedMemory | str) -> str:
    """The more informative of two redundant texts, as written (stripped): the
    longer normalised text, then more content words, then the newer
    ``updated_at``, then the longer raw text, then the smaller string."""
    def rank(x: JudgedMemory | str) -> tuple[int, int, str, int]:
        text = (x.memory if isinstance(x, JudgedMemory) else x) or ""
        info = _analyse(text)
        when = x.updated_at if isinstance(x, JudgedMemory) else ""
        return (len(info.norm), len(info.content), when or "", len(" ".join(text.split())))

    ta = ((a.memory if isinstance(a, JudgedMemory) else a) or "").strip()
    tb = ((b.memory if isinstance(b, JudgedMemory) else b) or "").strip()
    ra, rb = rank(a), rank(b)
    if ra != rb:
        return ta if ra > rb else tb
    return min(ta, tb)
