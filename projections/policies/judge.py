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
  return", "Hana's first car") or a list item's number ("1. buy milk"), when
  it comes before the copula.  After it ("the app is on version 2.3") a
  number is the value stated;
* two values conflict only in the same place of the sentence ("Alice has [3]
  cats" / "owns [four] cats", not "Zoe is [30]" / "Zoe has [3] cats");
* past events that differ only in their date are two occasions ("paid the
  bill on March 3" / "on April 3"), unless the event happens once (born,
  married, started) or both name the same thing ("order 5531").

Keys are slots: different keys are independent; the same key names subject
and attribute, so a value conflict or a different value in an otherwise shared
sentence ("Works at Acme" / "Works at Globex") is a contradiction, but texts
in different scripts ("我的家乡是柏林" / "Home city: Berlin") or that share no
value slot are not compared.  Without keys, only single-valued relations
("lives in", "works at/as", "was born in", "favourite X is", "prefers X
<shared>") make different values a contradiction; different objects of other
relations ("Alice likes tea" / "Alice likes coffee") are independent: people
like several things.

Pure module (no I/O); :meth:`RuleJudge.judge_sync` serves hot loops and text
analysis is cached per text.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
import unicodedata
from difflib import SequenceMatcher
from typing import Literal, NamedTuple, Protocol, runtime_checkable

import msgspec

__all__ = ["LABELS", "Judge", "JudgedMemory", "Label", "RuleJudge", "RuleJudgeConfig", "Verdict",
           "merged_text", "normalize_text"]

Label = Literal["redundant", "contradictory", "independent"]
LABELS: tuple[str, ...] = ("redundant", "contradictory", "independent")
RULE_JUDGE_VERSION = "2"


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


# --------------------------------------------------------------------------
# text analysis

_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'", "\u00b4": "'"})
_KEEP_PUNCT = frozenset("%#@")


def _prepare(text: str) -> str:
    return unicodedata.normalize("NFKC", text or "").translate(_APOSTROPHES).casefold()


class _PunctuationToSpace(dict):
    """A ``str.translate`` table: punctuation (but ``%#@``) to a space, filled in as characters are met."""

    def __missing__(self, code: int) -> str:
        ch = chr(code)
        self[code] = out = " " if unicodedata.category(ch)[0] == "P" and ch not in _KEEP_PUNCT else ch
        return out


_PUNCTUATION_TO_SPACE = _PunctuationToSpace()


def normalize_text(text: str) -> str:
    """NFKC, casefold, drop apostrophes, punctuation to spaces, collapse whitespace."""
    t = _prepare(text).replace("'", "").translate(_PUNCTUATION_TO_SPACE)
    return " ".join(t.split())


_TOKEN_RE = re.compile(
    r"""
    (?P<iso>\b\d{4}-\d{1,2}-\d{1,2}\b)
  | (?P<sdate>\b\d{1,2}[/.]\d{1,2}[/.]\d{2,4}\b)
  | (?P<time>\b(?P<th>\d{1,2})(?::(?P<tm>\d{2}))?\s*(?P<ap>[ap])\.?m\b\.?)
  | (?P<clock>\b\d{1,2}:\d{2}\b)
  | (?P<code>\b[^\W\d_]+-?\d+(?:[.-]\w+)*\b|\b\d+[^\W\d_]\b)
  | (?P<sep>:)
  | (?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)*)(?:(?:st|nd|rd|th)(?![^\W\d_]))?
  | (?P<word>[^\W\d_]+(?:'[^\W\d_]+)*)
    """,
    re.X,
)


def _table(spec: str) -> dict[str, str]:
    """``"a=x b c=y"`` -> ``{"a": "x", "b": "b", "c": "y"}``."""
    return {w: v or w for w, _, v in (item.partition("=") for item in spec.split())}


_UNITS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven "
                                     "twelve thirteen fourteen fifteen sixteen seventeen eighteen "
                                     "nineteen".split())}
_TENS = {w: 10 * i for i, w in enumerate("_ _ twenty thirty forty fifty sixty seventy eighty "
                                         "ninety".split()) if w != "_"}
_ORDINALS = {w: i + 1 for i, w in enumerate("first second third fourth fifth sixth seventh eighth "
                                            "ninth tenth eleventh twelfth".split())}
_ORDINALS |= {"twentieth": 20, "thirtieth": 30, "hundredth": 100, "twice": 2}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9, "dozen": 12}
_NUMBER_WORDS = _UNITS.keys() | _TENS.keys() | _ORDINALS.keys() | _SCALES.keys()
_NOT_ONE_BEFORE = frozenset("the this that every any each some which another".split())

_MONTH_NAMES = "january february march april may june july august september october november december"
# kind -> words with their canonical value; values of one kind are compared as sets
_VALUE_SPECS = {
    "month": _MONTH_NAMES + " jan=january feb=february apr=april jun=june jul=july aug=august "
             "sep=september sept=september oct=october nov=november dec=december",
    "weekday": "monday tuesday wednesday thursday friday saturday sunday mon=monday tue=tuesday "
               "tues=tuesday thu=thursday thur=thursday thurs=thursday fri=friday",
    "day": "today tonight tomorrow yesterday",
    "time": "noon=12:00 midday=12:00 midnight=00:00",
    "frequency": "hourly daily nightly weekly biweekly fortnightly monthly quarterly yearly "
                 "annually=yearly",
    "daypart": "morning mornings=morning afternoon afternoons=afternoon evening evenings=evening",
}
_VALUE_WORDS = {w: (kind, v) for kind, spec in _VALUE_SPECS.items() for w, v in _table(spec).items()}
_KINDS = ("number", "code", *_VALUE_SPECS)
_AMBIGUOUS_MONTHS = frozenset({"may", "march"})
_MONTH_CONTEXT = frozenset("in of since until by early late mid next last this during before after "
                           "from till".split())

_NEGATIONS = frozenset("not never no none nobody nothing nowhere neither nor without least hardly "
                       "rarely seldom barely".split())
_CONTRACTED_NEG = _table(
    "dont=do doesnt=does didnt=did isnt=is arent=are wasnt=was werent=were cant=can cannot=can "
    "wont=will couldnt=could shouldnt=should wouldnt=would hasnt=has havent=have hadnt=had aint=is "
    "mustnt=must neednt=need")
_NT_BASE = _table("ca=can wo=will sha=shall ai=is")
_STOPWORDS = frozenset(
    "a an the is are was were be been being am do does did done has have had having of in on at "
    "by as and or that this these those it its there here so also very really just currently now "
    "still anymore any some will would shall about than then which who whom what when where "
    "while if per via longer more roughly approximately around nearly almost usually always "
    "generally typically definitely".split())
_CONTRAST = frozenset("but except although though unless however yet instead only excluding".split())
_PAST_AUX = frozenset("was were had did used formerly previously former".split())
_PRESENT_AUX = frozenset("is are am has have does currently now".split())
_PARTICIPLE_AUX = frozenset("is are was were be been being am has have had get gets got".split())
_SYNONYMS = _table("enjoy=lik lov=lik resid=liv purchas=buy automobil=car favourit=favorit "
                   "colour=color")
_IRREGULAR_PAST = _table(
    "bought=buy went=go got=get made=mak took=tak sold=sell began=begin became=becom came=com "
    "met=meet paid=pay sent=send spent=spend told=tell ate=eat drove=driv flew=fly gave=giv saw=see "
    "wrote=writ ran=run won=win held=hold")
_FILLER = "note notes fyi btw reminder remember update apparently actually user since as".split()
_OPPOSITES = [p.split("/") for p in (
    "like/dislike like/hate enable/disable enabled/disabled allow/forbid allow/deny allow/block "
    "accept/reject increase/decrease open/closed true/false north/south east/west left/right "
    "day/night senior/junior before/after above/below higher/lower maximum/minimum over/under "
    "include/exclude public/private online/offline married/divorced married/single pass/fail "
    "required/optional mandatory/optional visible/hidden light/dark add/remove start/stop "
    "win/lose hot/cold cheap/expensive fast/slow").split()]
_NEGATING_PREFIXES = ("un", "in", "im", "il", "ir", "dis", "non")


@functools.lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    """A tiny, consistent suffix stripper (likes/liked/liking -> lik)."""
    w = word
    if len(w) > 4 and w.endswith("ies"):
        w = w[:-3] + "y"
    elif len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    for suffix in ("ing", "ed"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: -len(suffix)]
            if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "lsz":
                w = w[:-1]
            break
    if len(w) > 3 and w.endswith("e"):
        w = w[:-1]
    return _SYNONYMS.get(w, w)


_FILLER_STEMS = frozenset(map(_stem, _FILLER))
_OPPOSITE_STEMS = frozenset(frozenset(map(_stem, pair)) for pair in _OPPOSITES)
_OPPOSITE_OF: dict[str, frozenset[str]] = {}  # stem -> the stems listed as its opposites
for _pair in _OPPOSITE_STEMS:
    for _x in _pair:
        _OPPOSITE_OF[_x] = _OPPOSITE_OF.get(_x, frozenset()) | (_pair - {_x})
_CONTRAST_STEMS = frozenset(map(_stem, _CONTRAST))

# Identifiers: a number after one of these nouns names which thing it is.
_ID_NOUNS = frozenset(
    "invoice invoices order orders ticket tickets issue issues bug bugs pr prs case cases recipe "
    "recipes item items step steps version release build builds sprint episode chapter lesson room "
    "gate table bus flight patient apartment apt unit task tasks question exercise slide tip rule point "
    "section page week day season part phase milestone batch test story epic account customer "
    "contract claim shipment parcel package floor line level module lecture ward bed platform "
    "locker route tram train incident request job run quarter".split())
_ID_MARKERS = frozenset("number no nr num id ref".split())
_FUNCTION_WORDS = frozenset("for to from with per via and or nor not but".split())
_COPULAS = frozenset("is are am was were be been being".split())
_LIST_ITEM_RE = re.compile(r"\s*\d+[.)]\s")
# events that happen once: their dates conflict even in the past tense
_ONCE_STEMS = frozenset(_IRREGULAR_PAST.get(w) or _stem(w) for w in (
    "born died started began joined founded graduated married divorced retired hired moved "
    "relocated emigrated resigned quit promoted").split())
# attribute nouns of one value each ("Leo's favourite food is ...", "Mei's manager is ...")
_ATTRIBUTE_STEMS = frozenset(map(_stem, (
    "age job role title profession occupation status manager boss timezone email address birthday "
    "salary favourite favorite hometown nationality employer password phone").split())) | {"<name>"}
_RELATION_SLOTS = frozenset("<residence> <employer> <job> <born> <spouse> <assignee>".split())


def _canon_number(raw: str) -> str:
    head, dot, tail = raw.replace(",", "").partition(".")
    return (head.lstrip("0") or "0") + dot + tail


class _Analysis(NamedTuple):
    norm: str
    n_words: int
    content: frozenset[str]  # stemmed content words; values masked as "<kind>"
    words: frozenset[str]  # content without the masked values
    seq: tuple[str, ...]  # the same, in order
    values: dict[str, frozenset[str]]  # kind -> canonical values (numbers, dates, ...)
    negated: frozenset[str]  # content words in the scope of a negation
    n_neg: int  # number of negation cues
    past: bool  # a past-tense auxiliary (was, had, formerly, ...)
    present: bool
    past_stems: frozenset[str]  # stems of simple-past verbs ("worked")
    plain_stems: frozenset[str]  # stems of the other content words
    idents: frozenset[str]  # identifiers naming what the text is about ("invoice 1001")
    date_numbers: frozenset[str]  # numbers written as part of a date
    frame: tuple[tuple[str, str], ...]  # see _frame
    scripts: frozenset[str]  # writing systems of its letters
    past_event: bool  # tells of something that happened (a simple past verb), not of a state
    once: bool  # ... that happens once in a life (born, married, started, moved)


_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RE = re.compile(f"[{_CJK}]")
_CJK_SPLIT_RE = re.compile(f"[{_CJK}]|[^{_CJK}]+")


def _lex(text: str) -> list[tuple[str, str]]:
    """Typed tokens ``(kind, value)``: word, poss, neg, number, dnum (a number
    written as part of a date), code (letters with digits: ``INV-17``, ``v3.1``),
    sep (a colon) or time."""
    out: list[tuple[str, str]] = []
    for m in _TOKEN_RE.finditer(_prepare(text)):
        if m.group("iso"):
            y, mo, d = (int(x) for x in m.group("iso").split("-"))
            if 1 <= mo <= 12:
                out.append(("month", _MONTH_NAMES.split()[mo - 1]))
            out += [("dnum", str(d)), ("dnum", str(y))]
        elif m.group("sdate"):
            out += [("dnum", _canon_number(x)) for x in re.split(r"[/.]", m.group("sdate"))]
        elif m.group("time"):
            hour = int(m.group("th")) % 12 + (12 if m.group("ap") == "p" else 0)
            out.append(("time", f"{hour:02d}:{int(m.group('tm') or 0):02d}"))
        elif m.group("clock"):
            h, mi = m.group("clock").split(":")
            out.append(("time", f"{int(h):02d}:{mi}"))
        elif m.group("code"):
            out.append(("code", m.group("code")))
        elif m.group("sep"):
            out.append(("sep", ":"))
        elif m.group("num"):
            out.append(("number", _canon_number(m.group("num"))))
        else:
            word = m.group("word")
            if _CJK_RE.search(word):  # no spaces between words: each character is a token
                out += [("word", w) for w in _CJK_SPLIT_RE.findall(word)]
            elif word.endswith("n't"):
                out += [("word", _NT_BASE.get(word[:-3], word[:-3])), ("neg", "n't")]
            elif word in _CONTRACTED_NEG:
                out += [("word", _CONTRACTED_NEG[word]), ("neg", word)]
            elif word.endswith("'s"):  # a possessor: "Jack's son" is not about Jack
                out.append(("poss", word[:-2].replace("'", "")))
            else:
                out.append(("word", word.replace("'", "")))
    return out


def _number_run(tokens: list[tuple[str, str]], i: int) -> tuple[int, int]:
    """Parse written numbers ("twenty-five", "a dozen", "two hundred and five") at ``i``."""
    total = current = 0
    if tokens[i][1] in _SCALES and i and tokens[i - 1][1] in ("a", "an"):
        current = 1
    j, n = i, len(tokens)
    while j < n and tokens[j][0] == "word":
        t = tokens[j][1]
        if t == "and" and current >= 100 and j + 1 < n and tokens[j + 1][1] in _UNITS.keys() | _TENS.keys():
            j += 1
            continue
        if t not in _NUMBER_WORDS:
            break
        if t in _SCALES and _SCALES[t] < 1000:
            current = max(current, 1) * _SCALES[t]
        elif t in _SCALES:
            total, current = total + max(current, 1) * _SCALES[t], 0
        else:
            current += _UNITS.get(t, 0) + _TENS.get(t, 0) + _ORDINALS.get(t, 0)
        j += 1
        if t in _ORDINALS:
            break
    return total + current, j


def _classify(tokens: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Resolve number words, value words (months, weekdays, ...) and negation phrases."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(tokens)
    while i < n:
        kind, w = tokens[i]
        prev_kind, prev = tokens[i - 1] if i else ("", "")
        nxt_kind, nxt = tokens[i + 1] if i + 1 < n else ("", "")
        i += 1
        if kind != "word":
            out.append((kind, w))
        elif w == "no" and nxt == "one":
            out.append(("neg", "nobody"))
            i += 1
        elif w in _NEGATIONS and not (w == "no" and nxt_kind == "number"):  # "no. 5"
            out.append(("neg", w))
            i += w == "no" and nxt in ("longer", "more")
        elif w in _NUMBER_WORDS and not (w == "one" and (prev in _NOT_ONE_BEFORE or nxt == "of")):
            value, i = _number_run(tokens, i - 1)
            out.append(("number", str(value)))
        elif w in _VALUE_WORDS and (w not in _AMBIGUOUS_MONTHS or prev in _MONTH_CONTEXT
                                    or {"number", "dnum"} & {nxt_kind, prev_kind}):
            out.append(_VALUE_WORDS[w])
        elif len(w) > 6 and w[:-1] in _VALUE_WORDS and _VALUE_WORDS[w[:-1]][0] == "weekday":
            out.append(("weekday", w[:-1]))  # "mondays"
        else:
            out.append(("word", w))
    return out


def _mark(tokens: list[tuple[str, str]], list_item: bool) -> list[tuple[str, str]]:
    """Tell identifiers from values: a number naming *which* thing a memory is
    about ("invoice 1001", "recipe number 12", "#57", "JIRA-1203", "the 2023 tax
    return", "1. buy milk") becomes ``("ident", ...)``; so does a code.  Only
    before the first copula ("is", "was", a colon): after it a number or code
    is the value the memory states ("the app is on version 2.3").  Numbers that
    are part of a date become ``dnum``."""
    out: list[tuple[str, str]] = []
    stated = False  # a copula was seen: what follows is a value
    n = len(tokens)
    for i, (kind, value) in enumerate(tokens):
        if kind == "sep" or (kind == "word" and value in _COPULAS):
            stated = True
        elif kind == "code":
            kind, value = ("code", value) if stated else ("ident", value)
        elif kind == "number" and not stated:
            noun = _id_noun(tokens, i)
            before = tokens[i - 1] if i else ("", "")
            after = tokens[i + 1] if i + 1 < n else ("", "")
            modifier = (before[0] == "poss" or before[1] == "the" or (i == 0 and _is_year(value))) and (
                after[0] == "month" or (after[0] == "word" and after[1] not in _STOPWORDS))
            if noun or modifier or (list_item and i == 0):
                kind, value = "ident", f"{noun} {value}" if noun else value
        if kind == "number":
            near = {tokens[j][0] for j in (i - 1, i + 1) if 0 <= j < n}
            prev = tokens[i - 1][1] if i else ""
            if "month" in near or (_is_year(value) and prev in _MONTH_CONTEXT):
                kind = "dnum"
        out.append((kind, value))
    return out


def _is_year(value: str) -> bool:
    return len(value) == 4 and value.isdigit() and 1900 <= int(value) <= 2099


def _id_noun(tokens: list[tuple[str, str]], i: int) -> str:
    """The identifier noun a number at ``i`` follows ("invoice", "ticket no.",
    "flight LH"), or ''."""
    j = i - 1
    if j >= 0 and tokens[j][0] == "word" and tokens[j][1] in _ID_MARKERS:
        if j == 0 or tokens[j - 1][1] not in _ID_NOUNS:
            return tokens[j][1]
        j -= 1
    elif (j >= 1 and tokens[j][0] == "word" and len(tokens[j][1]) <= 3 and tokens[j][1].isascii()
          and tokens[j][1] not in _STOPWORDS and tokens[j][1] not in _FUNCTION_WORDS
          and tokens[j - 1][1] in _ID_NOUNS):
        j -= 1  # "flight LH 400"
    if j >= 0 and tokens[j][0] == "word" and tokens[j][1] in _ID_NOUNS:
        return tokens[j][1]
    return ""


_RELATIONS = {  # (verb forms, prepositions) -> the single-valued relation they state
    "<residence>": ("live lives lived living reside resides resided residing based", "in at"),
    "<moved>": ("move moves moved moving relocate relocates relocated relocating", "to"),
    "<employer>": ("work works worked working employed", "at for by"),
    "<job>": ("work works worked working employed", "as"),
    "<born>": ("born", "in on"),
    "<spouse>": ("married", "to"),
    "<assignee>": ("assigned", "to"),
}
_RELATION_OF = {(verb, prep): rel for rel, (verbs, preps) in _RELATIONS.items()
                for verb in verbs.split() for prep in preps.split()}
_SAME_RELATION = {"<moved>": "<residence>"}  # "lives in Paris" / "moved to Berlin": one home
_FRAME_SKIP = frozenset("a an the of and recently just finally now currently still already also "
                        "actually meanwhile nowadays".split())


def _frame(tokens: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """The text as ``(slot, value)`` pairs for comparing subject, attribute and
    value: content stems, ``<kind>`` for values (with the value), ``be`` for a
    copula or a colon, ``have``, ``<not>`` for a negation and ``<relation>``
    for a single-valued relation ("lives in", "works at", "was born in")."""
    out: list[tuple[str, str]] = []
    n, i = len(tokens), 0
    while i < n:
        kind, value = tokens[i]
        nxt = tokens[i + 1][1] if i + 1 < n else ""
        i += 1
        if kind == "sep" or (kind == "word" and value in _COPULAS):
            out.append(("be", ""))
        elif kind == "neg":
            out.append(("<not>", ""))
        elif kind == "poss":
            out.append((_stem(value) + "'s", ""))
        elif kind == "ident":
            out.append(("<ident>", value))
        elif kind != "word":
            out.append((f"<{'number' if kind == 'dnum' else kind}>", value))
        elif value in ("name", "names"):
            out.append(("<name>", ""))
        elif (relation := _RELATION_OF.get((value, nxt))) is not None:
            i += 1
            while out and out[-1][0] in ("have", "be"):
                out.pop()  # "has moved to", "is based in"
            out.append((_SAME_RELATION.get(relation, relation), ""))
        elif value in ("has", "have", "had"):
            out.append(("have", ""))
        elif value not in _STOPWORDS and value not in _FRAME_SKIP:
            out.append((_IRREGULAR_PAST.get(value) or _stem(value), ""))
    return tuple(out)


@functools.lru_cache(maxsize=8192)
def _analyse(text: str) -> _Analysis:
    seq: list[str] = []
    values: dict[str, set[str]] = {k: set() for k in _KINDS}
    negated: set[str] = set()
    words: set[str] = set()
    past_stems: set[str] = set()
    plain_stems: set[str] = set()
    scope = n_neg = 0  # scope: tokens left in which the next content word is negated
    prev = ""
    idents: set[str] = set()
    date_numbers: set[str] = set()
    prepared = _prepare(text)
    tokens = _mark(_classify(_lex(text)), bool(_LIST_ITEM_RE.match(prepared)))
    for kind, value in tokens:
        before, prev = prev, value
        if kind == "neg":
            scope, n_neg = 4, n_neg + 1
            continue
        if kind == "sep":
            continue
        if kind == "ident":
            idents.add(value)
            token = "<ident>"
        elif kind == "dnum":
            values["number"].add(value)
            date_numbers.add(value)
            token = "<number>"
        elif kind == "poss":
            token = _stem(value) + "'s"
        elif kind == "word":
            words.add(value)
            if value in _STOPWORDS:
                scope = max(scope - 1, 0)
                continue
            token = _IRREGULAR_PAST.get(value) or _stem(value)
            simple_past = before not in _PARTICIPLE_AUX and (value.endswith("ed") or value in _IRREGULAR_PAST)
            (past_stems if simple_past else plain_stems).add(token)
        else:
            values[kind].add(value)
            token = f"<{kind}>"
        seq.append(token)
        if scope:
            negated.add(token)
            scope = 0
    norm = normalize_text(text)
    return _Analysis(
        norm=norm, n_words=len(norm.split()), content=frozenset(seq), seq=tuple(seq),
        words=frozenset(w for w in seq if not w.startswith("<")),
        values={k: frozenset(v) for k, v in values.items()}, negated=frozenset(negated), n_neg=n_neg,
        past=bool(words & _PAST_AUX), present=bool(words & _PRESENT_AUX),
        past_stems=frozenset(past_stems), plain_stems=frozenset(plain_stems),
        idents=frozenset(idents), date_numbers=frozenset(date_numbers), frame=_frame(tokens),
        scripts=_scripts(prepared),
        past_event=bool(past_stems - _ONCE_STEMS or "had" in words) and not words & _PRESENT_AUX,
        once=bool((past_stems | plain_stems) & _ONCE_STEMS),
    )


_LATIN = frozenset({"LATIN"})


def _scripts(text: str) -> frozenset[str]:
    """The writing systems of the letters of ``text``: the first word of their
    Unicode names (LATIN, CJK, HIRAGANA, CYRILLIC, ...)."""
    if text.isascii():
        return _LATIN if any(c.isalpha() for c in text) else frozenset()
    return frozenset(unicodedata.name(c, "OTHER").split(" ", 1)[0] for c in text if c.isalpha())


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
    (born, married, started) or both name the same thing ("order 5531")."""
    if not (a.past_event and b.past_event) or a.once or b.once or a.idents & b.idents:
        return False
    differing = [k for k in _KINDS if a.values[k] != b.values[k]]
    dates = a.date_numbers | b.date_numbers
    return bool(differing) and all(
        k in _DATE_KINDS or (k == "number" and a.values[k] ^ b.values[k] <= dates) for k in differing)


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
        if any(x in _STRUCTURE for x in slots_a + slots_b) or max(len(mid_a), len(mid_b)) > 5:
            return ""
        relation = bool(_RELATION_SLOTS.intersection(shared))
        attribute = any(x in _ATTRIBUTE_STEMS and "be" in shared[i + 1:] for i, x in enumerate(shared))
        preference = "prefer" in shared and s > 0
        if not (relation or attribute or preference):
            return ""

    def show(mid: tuple[tuple[str, str], ...]) -> str:
        return " ".join(v or x for x, v in mid)

    return f"{show(mid_a)} vs {show(mid_b)}"


def _only_appended(short: tuple[str, ...], long_: tuple[str, ...]) -> bool:
    """The longer word sequence adds words only after the last shared one."""
    shared = set(short)
    last = max((i for i, w in enumerate(long_) if w in shared), default=-1)
    return all(w in shared for w in long_[: last + 1])


@functools.lru_cache(maxsize=4096)
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
        if ka and kb and ka != kb:
            return verdict("independent", f"different keys: {a.key!r} vs {b.key!r}")
        keyed = f"same key {a.key!r}" if ka and kb else ""
        if not ta.norm or not tb.norm:
            return verdict("independent", "empty text")
        if ta.norm == tb.norm:
            return verdict("redundant", f"{keyed} and normalised texts equal" if keyed else "normalised texts equal")
        if ta.scripts != tb.scripts:  # a shared key does not make them comparable
            return verdict("independent", f"written in different scripts ({_show(ta.scripts) or 'none'} vs "
                                          f"{_show(tb.scripts) or 'none'}): not comparable")
        if ta.idents - tb.idents and tb.idents - ta.idents:
            return verdict("independent", f"different things: identifiers {_show(ta.idents - tb.idents)} vs "
                                          f"{_show(tb.idents - ta.idents)}")

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
            if all(w.startswith("<") or w in _FILLER_STEMS for w in lead) and not _CONTRAST & set(extra):
                which = "A" if short is ta else "B"
                return verdict("redundant", f"containment: {which} ({len(short.norm)} chars) is contained "
                                            f"in the other ({len(long_.norm)} chars)")

        if cos < cfg.redundant_cosine:
            return verdict("independent", f"no rule fired (cosine {cos:.2f}, word similarity {sim:.2f})")
        only_a, only_b = ta.content - tb.content, tb.content - ta.content
        order = SequenceMatcher(None, ta.seq, tb.seq, autojunk=False).ratio()
        short_seq, long_seq = (ta.seq, tb.seq) if not only_a else (tb.seq, ta.seq)
        why = (f"different content words: {_show(only_a)} vs {_show(only_b)}" if only_a and only_b
               else "one text has more negations" if ta.n_neg != tb.n_neg
               else f"qualifier {_show((only_a | only_b) & _CONTRAST_STEMS)}" if (only_a | only_b) & _CONTRAST_STEMS
               else f"low word overlap {sim:.2f}" if sim < cfg.redundant_min_jaccard
               else f"word order differs ({order:.2f})" if order < cfg.redundant_min_order
               else "extra words inside the shared text" if not _only_appended(short_seq, long_seq)
               else "tense differs (past vs present)" if _tense_differs(ta, tb)
               else "")
        if why:
            return verdict("independent", f"cosine {cos:.2f} but {why}")
        return verdict("redundant", f"cosine {cos:.2f} >= {cfg.redundant_cosine} and content words "
                                    f"nested (word similarity {sim:.2f}, order {order:.2f})")


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
