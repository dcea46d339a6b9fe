"""Query analysis for recall: what a natural-language query asks for.

:func:`analyze` turns a query into a :class:`QueryAnalysis`:

- ``terms``: the content terms, lowercased, in query order, without
  duplicates. Question words (who, what, when ...), auxiliaries, pronouns,
  articles, prepositions and a few words that only frame a question ("kind",
  "type", "likely" ...) are dropped; possessives lose their ``'s``. A query
  of such words only keeps them all (what else would it search for?).
- ``search_terms`` (property): ``terms`` without generic verbs
  (:data:`WEAK_WORDS`: say, tell, make, go ...) plus their variants
  (:data:`VARIANTS`: irregular forms and informal spellings). This is what
  the lexical channel matches.
- ``semantic_text`` (property): the terms joined by spaces; what the
  semantic channel embeds (it measured better than the whole question).
- ``stems``: ``terms`` reduced by :func:`stem`, a light suffix stripper. It is
  used for term-overlap checks on our side (the lexical index stems with its
  own tokenizer, so FTS5 queries are built from ``terms``).
- ``phrases``: quoted strings and runs of two or more capitalised words
  ("Grand Canyon").
- ``entities_like``: capitalised tokens that are not sentence-initial question
  or function words ("Caroline", "LGBTQ"), possessive removed.
- ``is_temporal``: the query asks for a time ("when", "what year", "how long
  ago", "since when" ...); ``temporal_kind`` says which kind
  ("point", "duration" or "").
- ``time_expressions``: the time expressions found in the query itself, as
  :class:`TimeExpression` (dates, month names, years, relative expressions
  such as "last week").

:func:`find_time_expressions` is the same detector for memory text: the
integrator runs it at ingest and stores whether a memory carries a time
reference (and which), so that temporal queries can prefer such memories.
:func:`parse_datetime` reads timestamps such as ``"1:56 pm on 8 May, 2023"``.
:func:`fts5_match` builds an FTS5 MATCH expression (an OR of quoted terms, so
no query syntax can leak from user text).

Everything here is pure, deterministic and model-free.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from datetime import datetime

from ..fts.script_marks import MARK

__all__ = [
    "QueryAnalysis",
    "TimeExpression",
    "analyze",
    "find_time_expressions",
    "fts5_match",
    "parse_datetime",
    "stem",
    "tokenize",
    "STOPWORDS",
    "QUESTION_WORDS",
    "VARIANTS",
    "WEAK_WORDS",
    "expand_terms",
]

QUESTION_WORDS = frozenset(
    "what when where which who whom whose why how whats".split()
)

# Function words plus words that only frame a question.
STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any are aren as at be
    because been before being below between both but by can cannot could couldn
    did didn do does doesn doing don down during each either else ever few for
    from further get gets got had hadn has hasn have haven having he her here
    hers herself him himself his i if in into is isn it its itself just let me
    more most much must my myself no nor not now of off on once one only or
    other ought our ours ourselves out over own per same shall she should so
    some such than that the their theirs them themselves then there these they
    this those through to too under until up upon us very was wasn we were
    weren whether while will with won would wouldn yet you your yours yourself
    yourselves s t ll ve re d m
    kind kinds type types sort sorts likely might may many
    thing things something anything someone anyone
    """.split()
) | QUESTION_WORDS

# Content words that are too generic to search for: verbs of saying and
# light verbs. They stay in ``terms`` but not in ``search_terms``.
WEAK_WORDS = frozenset(
    """
    say said says saying tell told tells telling think thought thinks
    describe described describes mention mentioned mentions talk talked talks
    make made makes making getting go goes went going gone
    take took takes taking give gave gives giving want wanted wants
    """.split()
)

_MONTHS = {
    name: i + 1
    for i, names in enumerate(
        [
            ("january", "jan"), ("february", "feb"), ("march", "mar"),
            ("april", "apr"), ("may",), ("june", "jun"), ("july", "jul"),
            ("august", "aug"), ("september", "sep", "sept"),
            ("october", "oct"), ("november", "nov"), ("december", "dec"),
        ]
    )
    for name in names
}
# Runs of letters/digits of any script and the combining marks written on them (a CJK run is one token, and
# an Indic word one, as in the index's tokenizer), with an optional apostrophe suffix.
_RUN = f"[^\\W_]+(?:{MARK}+[^\\W_]*)*"
_TOKEN = re.compile(f"{_RUN}(?:['\u2019]{_RUN})?")


def tokenize(text: str) -> list[str]:
    """Word tokens of ``text`` with case kept and possessive ``'s`` removed.

    Contractions other than ``'s`` are split at the apostrophe ("don't" ->
    "don", "t"), like the lexical index does.
    """
    out: list[str] = []
    for raw in _TOKEN.findall(text):
        word = raw.replace("\u2019", "'")
        if "'" in word:
            head, tail = word.split("'", 1)
            out.append(head)
            if tail.lower() != "s":
                out.append(tail)
        else:
            out.append(word)
    return [w for w in out if w]


# -- stemming -----------------------------------------------------------------

_VOWELS = set("aeiou")


def _has_vowel(s: str) -> bool:
    return any(c in _VOWELS for c in s) or ("y" in s[1:])


def stem(word: str) -> str:
    """A light, deterministic English suffix stripper (lowercases first).

    It conflates the common inflections (plural, -ing, -ed, -ly, -ies) so
    that "paints", "painting" and "painted" meet "paint". It is not meant to
    equal the index's Porter stemmer, only to be consistent with itself.
    """
    w = word.lower()
    if len(w) <= 3 or not w.isalpha():
        return w
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    for suffix in ("ingly", "edly", "ing", "ed"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3 and _has_vowel(w[: -len(suffix)]):
            w = w[: -len(suffix)]
            if len(w) >= 2 and w[-1] == w[-2] and w[-1] not in "lsz":
                w = w[:-1]  # running -> run
            elif w.endswith(("at", "bl", "iz")):
                w += "e"  # created -> create
            break
    if w.endswith("ly") and len(w) > 5:
        w = w[:-2]
    if w.endswith("y") and len(w) > 3 and w[-2] not in _VOWELS:
        w = w[:-1] + "i"
    if w.endswith("e") and len(w) > 4:
        w = w[:-1]
    return w


# -- time expressions ---------------------------------------------------------


@dataclass(frozen=True)
class TimeExpression:
    """A time expression found in text.

    ``kind`` is one of ``"date"`` (a calendar date, possibly partial),
    ``"relative"`` ("yesterday", "last week", "two years ago"),
    ``"weekday"``, ``"season"`` or ``"duration"`` ("for 4 years").
    ``year``/``month``/``day`` are filled where the text says them.
    """

    text: str
    kind: str
    start: int
    year: int | None = None
    month: int | None = None
    day: int | None = None


_MONTH_RE = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|"
    r"aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_NUM_WORD = (
    r"(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|"
    r"twelve|a few|a couple(?: of)?|several|few)"
)
_UNIT = r"(?:day|week|weekend|month|year|decade|hour|minute)s?"

_TIME_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    # 8 May, 2023 / 8 May 2023 / 8th of May
    ("dmy", re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?(?: of)? ({_MONTH_RE})\b\.?,? ?(\d{{4}})?", re.I)),
    # May 8, 2023 / May 8th
    ("mdy", re.compile(rf"\b({_MONTH_RE})\.? (\d{{1,2}})(?:st|nd|rd|th)?\b,? ?(\d{{4}})?", re.I)),
    # May 2023 / in May
    ("my", re.compile(rf"\b({_MONTH_RE})\b,? ?(\d{{4}})?", re.I)),
    ("iso", re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")),
    ("year", re.compile(r"\b(19[5-9]\d|20\d\d)\b")),
    ("relative", re.compile(
        r"\b(?:yesterday|today|tonight|tomorrow|recently|lately|"
        r"(?:the )?(?:day|night) before|(?:this|last|next|past|previous|coming|"
        r"upcoming) (?:few )?(?:" + _UNIT[3:-4] + r"|mon|tue|wed|thu|fri|sat|sun|"
        r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|spring|summer|"
        r"fall|autumn|winter|time|night|morning|evening|" + _MONTH_RE + r")s?|"
        + _NUM_WORD + r" " + _UNIT + r" (?:ago|back|earlier|later|from now)|"
        r"ago|in a (?:few|couple of) " + _UNIT + r"|since)\b",
        re.I,
    )),
    ("duration", re.compile(r"\b(?:for|over|about|around|almost|nearly) " + _NUM_WORD + r" " + _UNIT + r"\b", re.I)),
    ("weekday", re.compile(r"\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?\b", re.I)),
    ("season", re.compile(r"\b(?:spring|summer|fall|autumn|winter)\b", re.I)),
]


def _month(name: str) -> int | None:
    return _MONTHS.get(name.lower().rstrip("."))


def find_time_expressions(text: str) -> list[TimeExpression]:
    """All time expressions in ``text``, non-overlapping, in text order.

    Earlier patterns win over later ones on overlap, so "8 May, 2023" is one
    date, not a date plus a year. "may" alone is only a month when followed by
    a day or a year or preceded by "in"/"of"/"early"/"late"/"mid".
    """
    found: list[TimeExpression] = []
    taken: list[tuple[int, int]] = []

    def free(a: int, b: int) -> bool:
        return all(b <= s or a >= e for s, e in taken)

    for kind, pattern in _TIME_PATTERNS:
        for m in pattern.finditer(text):
            a, b = m.span()
            if a == b or not free(a, b):
                continue
            te: TimeExpression | None
            if kind == "dmy":
                te = TimeExpression(m.group(0), "date", a, _int(m.group(3)), _month(m.group(2)), int(m.group(1)))
            elif kind == "mdy":
                te = TimeExpression(m.group(0), "date", a, _int(m.group(3)), _month(m.group(1)), int(m.group(2)))
            elif kind == "my":
                if m.group(1).lower() == "may" and not m.group(2):
                    before = text[max(0, a - 6):a].lower()
                    if not re.search(r"\b(in|of|early|late|mid|since|until)[ -]$", before):
                        continue
                if m.group(1).lower() in ("mar", "jun", "jul", "sep", "sept", "oct", "dec", "jan", "feb", "apr", "aug", "nov") and not m.group(2) and m.group(1)[0].islower():
                    continue  # bare lowercase abbreviation: too ambiguous
                te = TimeExpression(m.group(0).rstrip(", "), "date", a, _int(m.group(2)), _month(m.group(1)), None)
            elif kind == "iso":
                te = TimeExpression(m.group(0), "date", a, int(m.group(1)), int(m.group(2)), int(m.group(3)))
            elif kind == "year":
                te = TimeExpression(m.group(0), "date", a, int(m.group(1)), None, None)
            else:
                te = TimeExpression(m.group(0), kind, a)
            found.append(te)
            taken.append((a, a + len(te.text)))
    found.sort(key=lambda t: t.start)
    return found


def _int(s: str | None) -> int | None:
    return int(s) if s else None


_DT_RE = re.compile(
    rf"(?:(\d{{1,2}}):(\d{{2}})\s*([ap]\.?m\.?)?\s*(?:on\s+)?)?"
    rf"(\d{{1,2}})(?:st|nd|rd|th)?\s+({_MONTH_RE})\.?,?\s+(\d{{4}})",
    re.I,
)
_DT_RE_MDY = re.compile(
    rf"(?:(\d{{1,2}}):(\d{{2}})\s*([ap]\.?m\.?)?\s*(?:on\s+)?)?"
    rf"({_MONTH_RE})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})",
    re.I,
)


def parse_datetime(text: str) -> datetime | None:
    """Parse a conversational timestamp such as ``"1:56 pm on 8 May, 2023"``.

    Also accepts ``"May 8, 2023"``, ``"8 May 2023"`` and ISO 8601. Returns a
    naive :class:`datetime`, or ``None`` when nothing parses.
    """
    s = text.strip()
    try:
        return datetime.fromisoformat(s)
    except ValueError:
        pass
    m = _DT_RE.search(s)
    if m:
        hh, mm, ampm, day, mon, year = m.groups()
    else:
        m = _DT_RE_MDY.search(s)
        if not m:
            return None
        hh, mm, ampm, mon, day, year = m.groups()
    month = _month(mon)
    if month is None:
        return None
    hour = int(hh) if hh else 0
    minute = int(mm) if mm else 0
    if ampm:
        pm = ampm.lower().startswith("p")
        hour = hour % 12 + (12 if pm else 0)
    try:
        return datetime(int(year), month, int(day), hour, minute)
    except ValueError:
        return None


# -- the analysis -------------------------------------------------------------

_POINT_Q = re.compile(
    r"^\s*when\b|\bwhat (?:year|month|day|date|time|week|season)\b|"
    r"\bwhich (?:year|month|day|date|week|season)\b|\bsince when\b|"
    r"\bhow long ago\b|\bwhat time\b|\bon what date\b",
    re.I,
)
_DURATION_Q = re.compile(
    r"\bhow long\b|\bhow many (?:years|months|weeks|days|hours|times)\b|\bhow often\b",
    re.I,
)


# Words that frame a question about time or amount, not its topic.
_FRAME = re.compile(
    r"\bhow (?:long(?: ago)?|many|much|often|far|old)\b|"
    r"\b(?:what|which|on what) (?:year|month|day|date|time|week|season)s?\b|"
    r"\bsince when\b|\bago\b",
    re.I,
)


#: What is around a word as written rather than part of it (a question mark, quotes, brackets).
_AROUND_WORDS = string.punctuation + "“”‘’«»¿¡…"
#: What ends or opens a sentence or a quotation: around a word, never part of a key such as "C++", "#general" or ".NET".
_AROUND_SENTENCES = ",;:!?\"'()[]{}“”‘’«»¿¡…"


@dataclass(frozen=True)
class QueryAnalysis:
    """The result of :func:`analyze` (see the module docstring)."""

    query: str
    terms: list[str]
    stems: list[str]
    phrases: list[str] = field(default_factory=list)
    entities_like: list[str] = field(default_factory=list)
    is_temporal: bool = False
    temporal_kind: str = ""
    time_expressions: list[TimeExpression] = field(default_factory=list)

    @property
    def keys(self) -> list[str]:
        """What may name a memory's key (compared without case): a quoted or capitalised phrase, a word, two adjacent
        words or all of them ("home city"), of the terms and of the words as written, their inner punctuation kept
        (the terms split "project-x" and "travel_budget", which no key then matched), and their punctuation at either
        end kept too but for a sentence's ("C++", "#general", "50%", ".NET", "what?" as written; "C++" of "C++?")."""
        written = [[w for w in (word.strip(around) for word in self.query.split()) if w] for around in (_AROUND_WORDS, _AROUND_SENTENCES, "")]
        found = list(self.phrases)
        for words in (self.terms, *written):
            found += words + [" ".join(pair) for pair in zip(words, words[1:])] + [" ".join(words)]
        return list(dict.fromkeys(found))

    @property
    def search_terms(self) -> list[str]:
        """What the lexical channel searches for.

        ``terms`` without :data:`WEAK_WORDS` (unless that leaves nothing),
        each followed by its :data:`VARIANTS` (irregular forms, informal
        spellings: "favorite" also finds "fave").
        """
        strong = [t for t in self.terms if t not in WEAK_WORDS] or list(self.terms)
        return expand_terms(strong)

    @property
    def semantic_text(self) -> str:
        """What the semantic channel embeds: the terms, else (a query without a word) the query."""
        return " ".join(self.terms) if self.terms else self.query

    @property
    def entity_terms(self) -> list[str]:
        """``entities_like`` lowercased."""
        return [e.lower() for e in self.entities_like]

    @property
    def topic_terms(self) -> list[str]:
        """``terms`` without the entity-like ones: what is asked about."""
        ents = set(self.entity_terms)
        return [t for t in self.terms if t not in ents]


def analyze(query: str) -> QueryAnalysis:
    """Analyse ``query`` (see the module docstring). Pure and deterministic."""
    tokens = tokenize(_FRAME.sub(" ", query))
    terms = [low for low in dict.fromkeys(tok.lower() for tok in tokens) if low not in STOPWORDS and (len(low) >= 2 or low.isdigit())]
    if not terms:
        # Function words only ("to be or not to be", "who is it?"): they are what is asked for.
        terms = list(dict.fromkeys(tok.lower() for tok in tokenize(query)))

    entities: list[str] = []
    phrases: list[str] = []
    run: list[str] = []
    for raw in _TOKEN.finditer(query):
        word = tokenize(raw.group(0))[0]
        is_cap = word[:1].isupper() and len(word) > 1 and word.lower() not in STOPWORDS
        if is_cap:
            if word not in entities:
                entities.append(word)
            run.append(word)
        else:
            if len(run) >= 2:
                phrases.append(" ".join(run))
            run = []
    if len(run) >= 2:
        phrases.append(" ".join(run))
    for quoted in re.findall(r"\"([^\"]+)\"", query):
        if quoted.strip() and quoted not in phrases:
            phrases.append(quoted.strip())

    kind = "point" if _POINT_Q.search(query) else ("duration" if _DURATION_Q.search(query) else "")
    return QueryAnalysis(
        query=query,
        terms=terms,
        stems=list(dict.fromkeys(stem(t) for t in terms)),
        phrases=phrases,
        entities_like=entities,
        is_temporal=bool(kind),
        temporal_kind=kind,
        time_expressions=find_time_expressions(query),
    )


# Groups of words that chat text uses for one another: irregular verb forms
# (which a suffix stemmer cannot join) and common informal spellings.
_VARIANT_GROUPS = [
    "favorite favourite fave fav faves favs favorites favourites",
    "family fam families",
    "children child kids kid",
    "photo photos pic pics picture pictures",
    "birthday bday",
    "business biz",
    "mother mom mum",
    "father dad",
    "conversation convo",
    "see saw seen", "go went gone", "make made", "take took taken",
    "give gave given", "buy bought", "draw drew drawn", "run ran",
    "begin began begun", "write wrote written", "read", "find found",
    "feel felt", "meet met", "teach taught", "think thought", "bring brought",
    "tell told", "say said", "win won", "lose lost", "leave left", "get got gotten",
    "sing sang sung", "swim swam swum", "fly flew flown", "grow grew grown",
    "know knew known", "hold held", "keep kept", "build built", "choose chose chosen",
    "speak spoke spoken", "catch caught", "fall fell fallen", "sell sold",
    "send sent", "spend spent", "break broke broken", "ride rode ridden",
]
VARIANTS: dict[str, tuple[str, ...]] = {}
for _group in _VARIANT_GROUPS:
    _words = tuple(_group.split())
    for _w in _words:
        VARIANTS[_w] = _words


def expand_terms(terms: list[str]) -> list[str]:
    """``terms`` plus their variants (irregular forms, informal spellings), order kept."""
    out: list[str] = []
    for t in terms:
        out.append(t)
        out.extend(VARIANTS.get(t, ()))
    return list(dict.fromkeys(out))


def fts5_match(terms: list[str] | tuple[str, ...], phrases: list[str] | tuple[str, ...] = (), *, prefix: bool = False) -> str:
    """An FTS5 MATCH expression that ORs ``terms`` and ``phrases``.

    Each term is double-quoted (inner quotes doubled), so the expression is
    always valid FTS5 and user text cannot inject operators. With ``prefix``
    each single term becomes a prefix query (``"term" *``). Returns ``""``
    when there is nothing to match; callers then skip the lexical channel.
    """
    parts: list[str] = []
    for t in terms:
        t = t.strip()
        if not t:
            continue
        q = '"' + t.replace('"', '""') + '"'
        parts.append(q + " *" if prefix else q)
    for p in phrases:
        p = p.strip()
        if p:
            parts.append('"' + p.replace('"', '""') + '"')
    return " OR ".join(dict.fromkeys(parts))
