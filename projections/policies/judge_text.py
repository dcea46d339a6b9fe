"""Text analysis for the rule judge: a memory's text as tokens, values, identifiers and the relation it states.

:func:`analyse` (cached) turns a text into the view :mod:`.judge` compares:
content stems, the values it states by kind (numbers, dates, codes …), the
identifiers that make it one thing among many ("invoice 1001"), negation,
tense, and the single-valued relation it asserts ("lives in", "works at").
Pure functions, no I/O; CJK text is split into characters.
"""

from __future__ import annotations

import re
import unicodedata
from typing import NamedTuple

from .. import text_caches
from ..fts.script_marks import MARK
from .judge_cjk import cjk_relation

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


# A minus sign: a dash right before a digit that follows no letter, digit, separator or closing bracket ("-18",
# "(-3)"), never the dash of a range, a code or a phone number ("5-10", "INV-17", "(555)-0100"); kept as U+2212, a
# symbol, where other punctuation becomes a space.
_SIGN = r"(?<![\w.,)\]])[-\u2212](?=\d)"
_SIGN_RE = re.compile(_SIGN)


def normalize_text(text: str) -> str:
    """NFKC, casefold, drop apostrophes, punctuation to spaces (a minus sign kept), collapse whitespace."""
    t = _SIGN_RE.sub("\u2212", _prepare(text)).replace("'", "").translate(_PUNCTUATION_TO_SPACE)
    return " ".join(t.split())


# A run of letters and the combining marks written on them: an Indic word whole, so that "रहता" and "रहती"
# (or "सीता" and "सुनीता") are two words, not the same consonants.
_LETTERS = f"[^\\W\\d_]+(?:{MARK}+[^\\W\\d_]*)*"
_TOKEN_RE = re.compile(
    r"""
    (?P<iso>\b\d{4}-\d{1,2}-\d{1,2}\b)
  | (?P<sdate>\b\d{1,2}[/.]\d{1,2}[/.]\d{2,4}\b)
  | (?P<time>\b(?P<th>\d{1,2})(?::(?P<tm>\d{2}))?\s*(?P<ap>[ap])\.?m\b\.?)
  | (?P<clock>\b\d{1,2}:\d{2}\b)
  | (?P<code>\b[^\W\d_]+-?\d+(?:[.-]\w+)*\b|\b\d+[^\W\d_]\b)
  | (?P<sep>:)
  | (?P<num>(?:SIGN)?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)*))(?:(?:st|nd|rd|th)(?![^\W\d_]))?
  | (?P<word>LETTERS(?:'LETTERS)*)
    """.replace("LETTERS", _LETTERS).replace("SIGN", _SIGN),
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
# A time said relative to the writing ("last year", "next week", "this monday", "two days ago"): one "day" value
_RELATIVE_TO = frozenset("last next this past coming previous following".split())
_PERIODS = frozenset("week weekend month year summer winter spring autumn fall season quarter semester".split())
_AGO_UNITS = frozenset("day days week weeks month months year years".split())
_AFTER_MODAL = frozenset("be not have also still never well only even just need".split())  # "this may be true"
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
# Words that take back the text they follow ("X" / "X is false", "X (cancelled)"): never a repeat of it.
_DENIALS = frozenset("false wrong untrue incorrect lie lies mistaken mistake inaccurate outdated obsolete cancelled canceled "
                     "postponed rumor rumour hoax myth fake retracted revoked deprecated joke".split())
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


@text_caches.lru_cache(maxsize=65536)
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
_DENIAL_STEMS = frozenset(map(_stem, _DENIALS))

# Identifiers: a number after one of these nouns names which thing it is.
_ID_NOUNS = frozenset(
    "invoice invoices order orders ticket tickets issue issues bug bugs pr prs case cases recipe "
    "recipes item items step steps version release build builds sprint episode chapter lesson room "
    "gate table bus flight patient apartment apt unit task tasks question exercise slide tip rule point "
    "section page week day season part phase milestone batch test story epic account customer "
    "contract claim shipment parcel package floor line level module lecture ward bed platform "
    "locker route tram train incident request job run quarter".split())
_ID_MARKERS = frozenset("number no nr num id ref".split())
# what follows a number that measures ("70 kg", "10 km", "8 hours"): never a label's number (see _label)
_MEASURES = frozenset(
    "% percent kg kgs kilo kilos kilogram kilograms g gram grams lb lbs pound pounds oz km kms kilometre kilometres "
    "kilometer kilometers m metre metres meter meters cm mm mi mile miles ft foot feet in inch inches mph kmh kph "
    "l litre litres liter liters ml c f degree degrees celsius fahrenheit kcal calories cal bpm steps reps "
    "sec secs second seconds min mins minute minutes hour hours hr hrs day days week weeks month months year years "
    "yr yrs old x times usd eur gbp dollars euros pounds bucks k".split())
_FUNCTION_WORDS = frozenset("for to from with per via and or nor not but".split())
_COPULAS = frozenset("is are am was were be been being".split())
_LIST_ITEM_RE = re.compile(r"\s*\d+[.)]\s")
# a text opening with a word and a capital letter as its label ("Server A has ...", "Plan B is ..."); not "I"
_LETTER_LABEL_RE = re.compile(r"\s*[^\W\d_]+ ([A-HJ-Z])(?![\w'])")
# events that happen once: their dates conflict even in the past tense
_ONCE_STEMS = frozenset(_IRREGULAR_PAST.get(w) or _stem(w) for w in (
    "born died started began joined founded graduated married divorced retired hired moved "
    "relocated emigrated resigned quit promoted").split())
# attribute nouns of one value each ("Leo's favourite food is ...", "Mei's manager is ...")
_ATTRIBUTE_STEMS = frozenset(map(_stem, (
    "age job role title profession occupation status manager boss timezone email address birthday "
    "salary favourite favorite hometown nationality employer password phone").split())) | {"<name>"}
_RELATION_SLOTS = frozenset("<residence> <employer> <job> <born> <spouse> <assignee> <named> <attr>".split())


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
    question: bool  # ends with a question mark: asks what a statement says


_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RE = re.compile(f"[{_CJK}]")
_CJK_SPLIT_RE = re.compile(f"[{_CJK}]|[^{_CJK}]+")
# Negation where no space marks a word. Chinese writes its cue before what it negates (不喜欢, 没有去, 看不见),
# Japanese after it (好きではありません, 行きません, 行かなかった), and Japanese polite endings (です, ます) state
# nothing. Words that hold 不 or 未 without negating stay words: 不过 however, 不错 good, 不同 different, 不但
# and 不仅 not only, 不断 continually, 不久 soon, 不少 many, 不管 and 不论 whatever, 不如 rather, 不禁, 不然
# otherwise, 不止 more than, 不得不 must, 差不多 about, 未来 future, 未必 not necessarily. A bare ない is left
# alone (少ない few, 危ない dangerous).
_CJK_CUES_RE = re.compile(
    "(?P<word>不得不|差不多|未来|未來|未必|不[过過错錯同但仅僅断斷久少管论論如禁然止])"
    "|(?P<before>没有|沒有|不再|从不|從不|从没|從沒|并不|並不|绝不|絕不|决不|決不|不|没|沒|未)"
    "|(?P<after>ではありません|じゃありません|ませんでした|ではない|じゃない|なかった|ません)"
    "|(?P<polite>でした|ました|です|ます)"
)


def _cjk_tokens(word: str) -> list[tuple[str, str]]:
    """A run holding CJK text as tokens: each character a word, and a negation cue a ``neg`` before what it
    negates (a Japanese one moved before the character it follows); polite endings dropped.  A run stating a
    single-valued relation (:func:`.judge_cjk.cjk_relation`) is read twice: its characters as ``cjk`` words,
    for all but the frame, and for the frame alone, its subject's characters (``framed``; present-tense
    adverbs left out), a ``rel`` token and its value's characters."""
    chars = _cjk_characters(word)
    if (stated := cjk_relation(word)) is None:
        return chars
    return [*((("cjk", w) if k == "word" else (k, w)) for k, w in chars),
            *(("framed", w) for w in _CJK_SPLIT_RE.findall(stated.subject)), ("rel", stated.relation),
            *(("framed", w) for w in _CJK_SPLIT_RE.findall(stated.value))]


def _cjk_characters(word: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    at = 0
    for m in _CJK_CUES_RE.finditer(word):
        out += [("word", w) for w in _CJK_SPLIT_RE.findall(word[at : m.start()])]
        at = m.end()
        if m.group("word"):
            out += [("word", w) for w in m.group()]
        elif m.group("before"):
            out.append(("neg", m.group()))
        elif m.group("after"):
            out.insert(len(out) - 1 if out and out[-1][0] == "word" else len(out), ("neg", m.group()))
    out += [("word", w) for w in _CJK_SPLIT_RE.findall(word[at:])]
    return out


def _lex(text: str) -> list[tuple[str, str]]:
    """Typed tokens ``(kind, value)``: word, poss, neg, number, dnum (a number
    written as part of a date), code (letters with digits: ``INV-17``, ``v3.1``),
    sep (a colon), time, or the two readings of a CJK clause stating a relation
    (see :func:`_cjk_tokens`): cjk, and framed with rel (``<residence>``)."""
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
            raw = m.group("num")
            sign = "-" if raw[0] in "-\u2212" else ""
            out.append(("number", sign + _canon_number(raw.lstrip("-\u2212"))))
        else:
            word = m.group("word")
            if _CJK_RE.search(word):  # no spaces between words: each character is a token
                out += _cjk_tokens(word)
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
        if kind == "number":
            out.append(_ago(tokens, i, w))
            i += out[-1][0] == "day" and 2
        elif kind != "word":
            out.append((kind, w))
        elif w == "no" and nxt == "one":
            out.append(("neg", "nobody"))
            i += 1
        elif w in _NEGATIONS and not (w == "no" and nxt_kind == "number"):  # "no. 5"
            out.append(("neg", w))
            i += w == "no" and nxt in ("longer", "more")
        elif w in _RELATIVE_TO and nxt_kind == "word" and (nxt in _PERIODS or (
                _VALUE_WORDS.get(nxt, ("",))[0] in ("weekday", "month", "daypart") and not (w == "this" and nxt in _AMBIGUOUS_MONTHS))):
            out.append(("day", f"{w} {_VALUE_WORDS[nxt][1] if nxt in _VALUE_WORDS else nxt}"))  # "last monday"
            i += 1
        elif w in _NUMBER_WORDS and not (w == "one" and (prev in _NOT_ONE_BEFORE or nxt == "of")):
            value, i = _number_run(tokens, i - 1)
            out.append(_ago(tokens, i, str(value)))
            i += out[-1][0] == "day" and 2
        elif w in _VALUE_WORDS and (w not in _AMBIGUOUS_MONTHS or (prev in _MONTH_CONTEXT and nxt not in _AFTER_MODAL)
                                    or {"number", "dnum"} & {nxt_kind, prev_kind}):
            out.append(_VALUE_WORDS[w])
        elif len(w) > 6 and w[:-1] in _VALUE_WORDS and _VALUE_WORDS[w[:-1]][0] == "weekday":
            out.append(("weekday", w[:-1]))  # "mondays"
        else:
            out.append(("word", w))
    return out


def _ago(tokens: list[tuple[str, str]], i: int, value: str) -> tuple[str, str]:
    """The number ``value`` (its tokens end before ``i``), or a time relative to the writing when a unit and
    "ago" follow it ("3 years ago", "two days ago"): the caller skips those two tokens."""
    if i + 1 < len(tokens) and tokens[i + 1][1] == "ago" and tokens[i][1] in _AGO_UNITS:
        return ("day", f"{value} {tokens[i][1]} ago")
    return ("number", value)


def _mark(tokens: list[tuple[str, str]], list_item: bool, letter_label: bool = False) -> list[tuple[str, str]]:
    """Tell identifiers from values: a number naming *which* thing a memory is
    about ("invoice 1001", "recipe number 12", "#57", "JIRA-1203", "the 2023 tax
    return", "1. buy milk") becomes ``("ident", ...)``; so does a code.  Only
    before the first copula ("is", "was", a colon): after it a number or code
    is the value the memory states ("the app is on version 2.3").  So does a
    capital letter right after the word a text opens with (``letter_label``:
    "Server A has ...", read from the text as written).  Numbers that are part
    of a date become ``dnum``."""
    out: list[tuple[str, str]] = []
    stated = False  # a copula was seen: what follows is a value
    n = len(tokens)
    for i, (kind, value) in enumerate(tokens):
        if kind == "sep" or (kind == "word" and value in _COPULAS):
            stated = True
        elif kind == "code":
            kind, value = ("code", value) if stated else ("ident", value)
        elif letter_label and i == 1 and kind == "word" and (noun := _label(tokens, i, ("", ""))):
            kind, value = "ident", f"{noun} {value}"
        elif kind == "number" and _cjk_numbered(tokens, i):
            kind = "ident"
        elif kind == "number" and not stated:
            before = tokens[i - 1] if i else ("", "")
            after = tokens[i + 1] if i + 1 < n else ("", "")
            noun = _id_noun(tokens, i) or _label(tokens, i, after)
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


# CJK writes which one after the number (3号楼 building 3, 501室 room 501, 12路 bus 12, 3番 number 3) or 第
# before it (第3章 chapter 3); 3月5号 is a date
_CJK_COUNTERS = frozenset("号 號 室 栋 棟 楼 樓 层 層 路 番 番地 丁目 号室".split())


def _cjk_numbered(tokens: list[tuple[str, str]], i: int) -> bool:
    before = tokens[i - 1][1] if i else ""
    after = tokens[i + 1][1] if i + 1 < len(tokens) else ""
    return before == "第" or (after in _CJK_COUNTERS and before != "月")


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


def _label(tokens: list[tuple[str, str]], i: int, after: tuple[str, str]) -> str:
    """The word a number at ``i`` labels when the text opens with that word and the number ("bulk 274 ...",
    "record 12 of the import", "sensor 4 reports ..."), or ''. Numbered items of a batch read so. A number that
    counts comes after a subject and its verb ("Alice owns 3 cats"), one that measures is followed by its unit
    ("weight 70 kg"), and an attribute's value ("age 30") is no label. A note opening with a verb ("bought 3
    apples") reads as a label too: two such notes are kept side by side, never one superseding the other."""
    if i != 1 or tokens[0][0] != "word" or after[1] in _MEASURES:
        return ""
    word = tokens[0][1]
    if word in _STOPWORDS or word in _FUNCTION_WORDS or word in _NEGATIONS or word in _NUMBER_WORDS or _stem(word) in _ATTRIBUTE_STEMS:
        return ""
    return word


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
        elif kind == "rel":
            out.append((_SAME_RELATION.get(value, value), ""))
        elif kind == "cjk":
            continue  # read as framed and rel
        elif kind == "framed":
            out.append((_stem(value), value))  # the value as written, for a reason to show
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


@text_caches.lru_cache(maxsize=8192)
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
    tokens = _mark(_classify(_lex(text)), bool(_LIST_ITEM_RE.match(prepared)), bool(_LETTER_LABEL_RE.match(text)))
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
        elif kind in ("framed", "rel"):
            continue  # the frame's reading of a clause, read here as cjk words
        elif kind in ("word", "cjk"):
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
        question=prepared.rstrip().endswith(("?", "\uff1f")),
    )


_LATIN = frozenset({"LATIN"})
_KANA = frozenset({"HIRAGANA", "KATAKANA", "KATAKANA-HIRAGANA"})  # the last: the long vowel mark of ソニー
_HAN = frozenset({"CJK", "IDEOGRAPHIC"})  # the second: 々 (人々), read as CJK
_LATIN_WORD_RE = re.compile("[a-z\u00c0-\u024f]+")


def _scripts(text: str) -> frozenset[str]:
    """The writing systems of the letters of ``text``: the first word of their
    Unicode names (LATIN, CJK, CYRILLIC, ...). Kana and the kanji beside them
    are one, JAPANESE (トヨタ and 東京 write one language); Latin names in
    CJK text ("我在Google工作") are words of that text, not another language."""
    if text.isascii():
        return _LATIN if any(c.isalpha() for c in text) else frozenset()
    names = [unicodedata.name(c, "OTHER").split(" ", 1)[0] for c in text if c.isalpha()]
    scripts = {"CJK" if name in _HAN else name for name in names}
    if scripts & _KANA:
        scripts = (scripts - _KANA - _HAN) | {"JAPANESE"}
    if "LATIN" in scripts and scripts & {"CJK", "JAPANESE"}:
        n_cjk = sum(name in _KANA or name in _HAN for name in names)
        if len(_LATIN_WORD_RE.findall(text)) < n_cjk:
            scripts.discard("LATIN")
    return frozenset(scripts)
