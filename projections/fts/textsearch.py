"""Text helpers for the SQLite FTS5 full-text projection.

The full-text projection indexes memories in an external-content FTS5 table
tokenised with :data:`TOKENIZER`.  Two problems are solved here rather than
in SQL, and the folding of letters written for one another (:func:`folded`):

* **CJK text.**  ``unicode61`` treats an unbroken run of Chinese or Japanese
  characters as a single token, so a two-character query never matches a
  memory that merely *contains* those two characters.  The projection
  therefore keeps an extra ``cjk`` column filled by :func:`cjk_segment`
  (overlapping character bigrams), and queries it with the bigrams produced by
  :func:`cjk_query_terms`.

* **Untrusted queries.**  FTS5 has its own query language (``AND``, ``NEAR``,
  ``*``, ``:``, parentheses, quotes...).  Passing user text straight into
  ``MATCH`` raises syntax errors or silently changes meaning.
  :func:`build_match` turns arbitrary text into an expression made only of
  double-quoted strings joined by ``OR``/``AND``, which FTS5 always accepts.
  Raw FTS syntax is available only through an explicit ``raw=True``.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from typing import Literal

from .script_marks import MARK, POINTS

__all__ = [
    "CJK_RANGES",
    "SEGMENTED_RANGES",
    "STOPWORDS",
    "TOKENIZER",
    "TOKENIZE_SQL",
    "WORD_RE",
    "build_match",
    "cjk_match_expression",
    "cjk_query_terms",
    "cjk_runs",
    "cjk_segment",
    "content_terms",
    "escape_fts_term",
    "folded",
    "fts_match_expression",
    "glued_words",
    "indexed_words",
    "has_cjk",
    "is_cjk",
    "symbol_words",
    "word_tokens",
]

# ---------------------------------------------------------------------------
# CJK detection and segmentation
# ---------------------------------------------------------------------------

#: Code point ranges (inclusive) treated as CJK "word characters": scripts that
#: do not separate words with spaces (Han, kana) plus Hangul syllables.
CJK_RANGES: tuple[tuple[int, int], ...] = (
    (0x3005, 0x3005),    # 々 ideographic iteration mark
    (0x3007, 0x3007),    # 〇 ideographic number zero
    (0x3040, 0x309F),    # Hiragana
    (0x30A0, 0x30FF),    # Katakana (includes the ー prolonged sound mark)
    (0x31F0, 0x31FF),    # Katakana phonetic extensions
    (0x3400, 0x4DBF),    # CJK Unified Ideographs Extension A
    (0x4E00, 0x9FFF),    # CJK Unified Ideographs
    (0xAC00, 0xD7AF),    # Hangul syllables
    (0xF900, 0xFAFF),    # CJK Compatibility Ideographs
    (0xFF66, 0xFF9F),    # Half-width Katakana
    (0x20000, 0x2FA1F),  # Supplementary ideographs (Ext B onwards, compat supplement)
)

#: The scripts segmented as CJK is (into character bigrams): CJK itself, and the scripts of South-East Asia that
#: write a sentence without spaces (Thai, Lao, Khmer, Myanmar), which ``unicode61`` keeps as one token, so that
#: a word of one was found only as the whole sentence.
SEGMENTED_RANGES: tuple[tuple[int, int], ...] = tuple(sorted(CJK_RANGES + (
    (0x0E00, 0x0E7F),    # Thai
    (0x0E80, 0x0EFF),    # Lao
    (0x1000, 0x109F),    # Myanmar
    (0x1780, 0x17FF),    # Khmer
)))

_CJK_CLASS = "".join(
    f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in SEGMENTED_RANGES
)
_CJK_RUN_RE = re.compile(f"[{_CJK_CLASS}]+")
_CJK_CHAR_RE = re.compile(f"[{_CJK_CLASS}]")

#: The index's tokenizer: ``unicode61`` folds case and Latin diacritics, ``porter`` stems English, and the
#: combining marks (:mod:`.script_marks`) are part of words, as letters are: without ``M*`` an Indic word was
#: cut at each vowel sign ("हिन्दी" indexed as "ह", "न", "द", so that "हंदी नदी" matched it).
TOKENIZER = "porter unicode61 remove_diacritics 2 categories 'L* N* Co M*'"
#: :data:`TOKENIZER` as an SQL string literal, for ``CREATE VIRTUAL TABLE ... USING fts5(..., tokenize=...)``.
TOKENIZE_SQL = "'" + TOKENIZER.replace("'", "''") + "'"

# A letter or digit that is not CJK (underscore excluded: ``unicode61`` treats it as a separator too), and the
# same followed by the marks written on it: a word's pieces, cut as the tokenizer cuts them.
_LETTER = f"[^\\W_{_CJK_CLASS}]"
_MARKED = f"{_LETTER}+(?:{MARK}+{_LETTER}*)*"
#: A word: a maximal run of letters, digits and combining marks that is not CJK, starting with a letter or digit.
WORD_RE = re.compile(_MARKED)
#: Words and CJK runs, in document order.
_TOKEN_RE = re.compile(f"{_MARKED}|[{_CJK_CLASS}]+")


def is_cjk(ch: str) -> bool:
    """True if the single character ``ch`` is a CJK ideograph, kana or Hangul syllable."""
    if len(ch) != 1:
        raise ValueError(f"is_cjk expects exactly one character, got {len(ch)}")
    cp = ord(ch)
    for lo, hi in CJK_RANGES:
        if cp < lo:
            return False  # ranges are sorted, no later range can match
        if cp <= hi:
            return True
    return False


def has_cjk(text: str) -> bool:
    """True if ``text`` contains at least one CJK character."""
    return _CJK_CHAR_RE.search(text) is not None


def cjk_runs(text: str) -> list[str]:
    """The maximal runs of consecutive CJK characters in ``text``, in order."""
    return _CJK_RUN_RE.findall(text)


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


def cjk_segment(text: str) -> str:
    """Segment the CJK parts of ``text`` for the ``cjk`` index column.

    Every run of CJK characters contributes its overlapping character bigrams
    (a run of one character contributes that character).  Runs longer than one
    character additionally contribute their final character as a unigram:
    together with the bigrams this means every character of the document is
    the first character of some indexed token, so a single-character prefix
    query (``"中" *``, see :func:`cjk_match_expression`) finds every memory
    containing that character.  Non-CJK text is dropped; the result is
    space-separated and empty when ``text`` has no CJK.

    >>> cjk_segment("我喜欢 Python 和咖啡")
    '我喜 喜欢 欢 和咖 咖啡 啡'
    """
    out: list[str] = []
    for run in _CJK_RUN_RE.findall(text):
        out.extend(_bigrams(run))
        if len(run) > 1:
            out.append(run[-1])
    return " ".join(out)


#: unicode61's tokens: runs of letters, digits and marks, CJK characters included.
_U61_TOKEN_RE = re.compile(f"[^\\W_]+(?:{MARK}+[^\\W_]*)*")

#: A GLOB pattern (SQLite compares code points in ``[...]``) true of a term holding a CJK character.
CJK_GLOB = "*[" + "".join(chr(lo) if lo == hi else f"{chr(lo)}-{chr(hi)}" for lo, hi in SEGMENTED_RANGES) + "]*"


def glued_words(text: str) -> list[str]:
    """The words written against CJK characters, which ``unicode61`` keeps inside one token with them.

    The projection indexes them apart (in the ``cjk`` column, beside the
    bigrams), so that a word query finds the memory; words between spaces
    are in the word columns already.

    >>> glued_words("我喜欢Python编程, ＡＢＣ全角 and 我喜欢 Python")
    ['Python', 'ＡＢＣ']
    """
    out: list[str] = []
    for token in _U61_TOKEN_RE.findall(text):
        if has_cjk(token) and not _CJK_RUN_RE.fullmatch(token):
            out.extend(WORD_RE.findall(token))
    return out


@functools.cache
def _symbol_set() -> frozenset[str]:
    """Every character Unicode calls "Symbol, other" (emoji, dingbats, ©, ♥, ...; none is ASCII, none is past U+1FFFF).
    Made at the first text that is not ASCII: it takes a scan (some 30 ms)."""
    return frozenset(ch for ch in map(chr, range(0x80, 0x20000)) if unicodedata.category(ch) == "So")


_FLAG_LETTERS = frozenset(map(chr, range(0x1F1E6, 0x1F200)))  # the regional indicators, which a flag writes in pairs


def _symbols(text: str, symbols: frozenset[str]) -> Iterator[str]:
    """The symbols of ``text``: pairs of regional indicators (a flag, "🇵🇹"), and each other character of ``symbols``."""
    i, end = 0, len(text)
    while i < end:
        ch = text[i]
        if ch in symbols:
            if ch in _FLAG_LETTERS and i + 1 < end and text[i + 1] in _FLAG_LETTERS:
                yield text[i : i + 2]
                i += 1
            else:
                yield ch
        i += 1


#: What a symbol's word starts with: each code point follows in hex, closed by an ``x`` ("🍕" is ``sym1f355x``), which
#: keeps the word as it is through the porter stemmer (it stems a trailing ``e`` or ``ed`` away, never an ``x``).
SYMBOL_PREFIX = "sym"


def symbol_words(text: str) -> list[str]:
    """The symbols written in ``text`` (emoji, dingbats, ©, ♥: Unicode's "Symbol, other"), each as a word, each once.

    ``unicode61`` takes a symbol for a separator, so a memory's "🍕" could not
    be searched for at all. The ``cjk`` column holds each symbol as the word
    :data:`SYMBOL_PREFIX` + its code point in hex + ``x``, which the tokenizer
    keeps whole, and a query's symbols are searched as those words. A flag
    (a pair of regional indicators) is one word of both code points, so that
    "🇵🇹" does not find "🇵🇱". Skin tones, variation selectors and joiners
    are not symbols: "👍🏽" and "👍" find each other, and a joined emoji
    ("👩‍🔬") is its symbols.

    >>> symbol_words("Dinner: 🍕🍕 on Friday ❤️ in 🇵🇹")
    ['sym1f355x', 'sym2764x', 'sym1f1f5x1f1f9x']
    """
    if text.isascii() or _symbol_set().isdisjoint(text):
        return []
    return list(dict.fromkeys(SYMBOL_PREFIX + "".join(f"{ord(ch):x}x" for ch in found) for found in _symbols(text, _symbol_set())))


def folded(text: str) -> str:
    """``text`` in NFKC: full-width letters and digits, ligatures and half-width kana in their plain forms.

    ``unicode61`` folds case and diacritics but not these, so both the
    ``cjk`` column and the queries of the lexical channel are folded.

    The invisible characters of :data:`_INVISIBLE` are dropped: inside a word
    they split it for ``unicode61``, though it reads as one word. So are the
    vowel points of Arabic, Hebrew and Syriac and the tatweel
    (:data:`~.script_marks.POINTS`), which a writer adds or leaves out:
    vocalized "كَتَبَ" and plain "كتب" fold alike. Letters that writers put
    for one another fold to one form (:data:`_WRITTEN_ALIKE`), as search
    engines for these languages fold them: in the Arabic script alef with
    hamza or madda, alef maqsura, ta marbuta, Persian yeh and keheh ("احمد"
    finds "أحمد", "مدرسه" finds "مدرسة", Persian "کتاب" finds Arabic "كتاب");
    German ß as ss; Russian ё as е; Greek vowels without their tonos or
    dialytika ("ελληνικα" finds "Ελληνικά"; ``unicode61`` folds the accents of
    Latin letters only).

    >>> folded("ＡＢＣ ２０２４ ﬁle ｶﾀｶﾅ co\u200bffee كَتَبَ أحمد")
    'ABC 2024 file カタカナ coffee كتب احمد'
    """
    return unicodedata.normalize("NFKC", text).translate(_FOLDED)


#: Characters no reader sees inside a word: zero-width space, soft hyphen, word joiner, zero-width no-break space,
#: and the joiners (U+200C, U+200D): they shape the letters around them (a Persian prefix written apart from its
#: verb, "می‌خواهم", and typed as often without, "میخواهم"), and a search reads the letters.
_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u00ad\u2060\ufeff\u200c\u200d"))


def _greek_unaccented() -> dict[int, str]:
    """Each accented Greek letter (tonos, dialytika, the polytonic marks) to its letter alone."""
    out = {}
    for cp in [*range(0x0370, 0x0400), *range(0x1F00, 0x2000)]:
        bare = "".join(ch for ch in unicodedata.normalize("NFD", chr(cp)) if not unicodedata.combining(ch))
        if bare and bare != chr(cp) and all("GREEK" in unicodedata.name(ch, "") for ch in bare):
            out[cp] = bare
    return out


#: Letters written for one another, each to the form it folds to.
_WRITTEN_ALIKE = {
    **dict.fromkeys(map(ord, "\u0622\u0623\u0625\u0671"), "\u0627"),  # alef with madda, hamza above or below, wasla: alef
    ord("\u0649"): "\u064a",  # alef maqsura: yeh
    ord("\u06cc"): "\u064a",  # Persian yeh: yeh
    ord("\u06a9"): "\u0643",  # keheh (Persian kaf): kaf
    ord("\u0629"): "\u0647",  # ta marbuta: heh
    ord("\u06c0"): "\u0647",  # heh with yeh above (Persian ezafe): heh
    ord("ß"): "ss",
    ord("ẞ"): "SS",
    ord("ё"): "е",
    ord("Ё"): "Е",
    **_greek_unaccented(),
}
_FOLDED = {**_INVISIBLE, **POINTS, **_WRITTEN_ALIKE}


def indexed_words(text: str, plain: str | None = None) -> list[str]:
    """The words the ``cjk`` column holds beside the bigrams of ``folded(text)``, lowercased, each once
    (``plain``: ``folded(text)``, when the caller has it already).

    Those :func:`glued_words` finds in the folded text, every word whose
    folded form differs from the word written ("Ｒｏｏｍ" as "room"): the
    word columns hold them only as written; and the words of its symbols
    (:func:`symbol_words`), which no word column holds.

    >>> indexed_words("我喜欢Python编程 in Ｒｏｏｍ ７ 🍕")
    ['python', 'room', '7', 'sym1f355x']
    """
    plain = folded(text) if plain is None else plain
    written = set(WORD_RE.findall(text.lower()))
    changed = [w for w in WORD_RE.findall(plain.lower()) if w not in written]
    return list(dict.fromkeys([w.lower() for w in glued_words(plain)] + changed + symbol_words(plain)))


def cjk_query_terms(query: str) -> list[str]:
    """Bigrams of the CJK runs in ``query`` (the character itself for one-character runs).

    A whole Chinese sentence used as a query thus matches (with ``OR``) every
    memory sharing one of its two-character words, and bm25 ranks memories
    sharing more of them higher.  Duplicates are removed, order is kept.
    """
    seen: dict[str, None] = {}
    for run in _CJK_RUN_RE.findall(query):
        for gram in _bigrams(run):
            seen.setdefault(gram, None)
    return list(seen)


def cjk_match_expression(
    query: str, *, column: str | None = "cjk", mode: Literal["or", "and"] = "or"
) -> str | None:
    """MATCH expression over the segmented CJK column for the CJK parts of ``query``.

    Bigram terms are matched exactly; single-character terms are matched as
    prefixes so they hit any bigram starting with that character (see
    :func:`cjk_segment`).  Returns None when ``query`` contains no CJK.
    """
    terms = cjk_query_terms(query)
    if not terms:
        return None
    parts = [escape_fts_term(t) + (" *" if len(t) == 1 else "") for t in terms]
    return _join(parts, mode=mode, column=column)


# ---------------------------------------------------------------------------
# Word tokens and stopwords
# ---------------------------------------------------------------------------

#: Common English function words, question words and contraction fragments.
#: Used to pick the content-bearing words of a natural-language question.
STOPWORDS: frozenset[str] = frozenset(
    """
    a about above after again against all also am an and any are aren as at
    be because been before being below between both but by
    can cannot could couldn
    d did didn do does doesn doing don down during
    each either else ever every
    few for from further
    get gets got had hadn has hasn have haven having he her here hers herself
    him himself his how however
    i if in into is isn it its itself
    just let ll m me might mine more most much must mustn my myself
    neither no nor not now
    o of off on once only or other ought our ours ourselves out over own
    re s same shall shan she should shouldn so some such
    t than that the their theirs them themselves then there these they this
    those though through to too
    under until up upon us
    ve very
    was wasn we were weren what whatever when whenever where whereas wherever
    whether which whichever while who whoever whom whomever whose why will
    with within without won would wouldn
    y yes yet you your yours yourself yourselves
    tell know please
    """.split()
)


def word_tokens(text: str) -> list[str]:
    """Lowercased tokens of ``text``: non-CJK letter/digit words and whole CJK runs.

    Words follow the same boundaries as the ``unicode61`` tokenizer (anything
    that is not a letter or digit separates words, including ``_`` and ``'``).
    """
    return _TOKEN_RE.findall(text.lower())


def content_terms(query: str) -> list[str]:
    """Content-bearing words of ``query``: tokens minus :data:`STOPWORDS`.

    Tokens are lowercased and de-duplicated keeping first occurrence.  If every
    token is a stopword (e.g. "who is it?"), the de-duplicated tokens are
    returned unfiltered so the caller still has something to search for.
    """
    tokens = list(dict.fromkeys(word_tokens(query)))
    kept = [t for t in tokens if t not in STOPWORDS]
    return kept if kept else tokens


# ---------------------------------------------------------------------------
# MATCH expression building
# ---------------------------------------------------------------------------

_COLUMN_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

#: Upper bound on terms per expression; longer queries keep their first terms.
MAX_TERMS = 64


def escape_fts_term(term: str) -> str:
    """Quote ``term`` as an FTS5 string: ``"`` + term (inner ``"`` doubled) + ``"``.

    Inside a string FTS5 applies only the tokenizer, never query syntax, so any
    text becomes a (possibly multi-token) phrase.  NUL characters are replaced
    by spaces because FTS5 would otherwise report an unterminated string.
    """
    return '"' + term.replace("\x00", " ").replace('"', '""') + '"'


def _column_spec(column: str | Sequence[str]) -> str:
    cols = [column] if isinstance(column, str) else list(column)
    if not cols:
        raise ValueError("column filter must name at least one column")
    for c in cols:
        if not _COLUMN_RE.match(c):
            raise ValueError(f"invalid FTS5 column name: {c!r}")
    return cols[0] if len(cols) == 1 else "{" + " ".join(cols) + "}"


def _join(parts: list[str], *, mode: str, column: str | Sequence[str] | None) -> str:
    if mode not in ("or", "and"):
        raise ValueError(f"mode must be 'or' or 'and', got {mode!r}")
    body = f" {mode.upper()} ".join(parts)
    if column is None:
        return body if len(parts) == 1 else f"({body})"
    return f"{_column_spec(column)} : ({body})"


def fts_match_expression(
    terms: Iterable[str],
    *,
    mode: Literal["or", "and"] = "or",
    column: str | Sequence[str] | None = None,
) -> str | None:
    """Combine ``terms`` into a safe MATCH string, or None when there are none.

    Each term is quoted with :func:`escape_fts_term`; empty/blank terms and
    duplicates are skipped and at most :data:`MAX_TERMS` are used.  ``column``
    restricts the match to one column (``"memory"``) or several
    (``["memory", "tags"]``); column names must be plain identifiers.

    >>> fts_match_expression(["coffee", "tea"], column="memory")
    'memory : ("coffee" OR "tea")'
    """
    unique = [t for t in dict.fromkeys(terms) if t and not t.isspace()]
    if not unique:
        return None
    return _join([escape_fts_term(t) for t in unique[:MAX_TERMS]], mode=mode, column=column)


def build_match(
    query: str,
    *,
    raw: bool = False,
    mode: Literal["or", "and"] = "or",
    column: str | Sequence[str] | None = None,
    cjk_column: str | None = "cjk",
    drop_stopwords: bool = False,
) -> str | None:
    """Turn a user query into an FTS5 MATCH expression (None: nothing to search).

    ``raw=True`` is the explicit opt-in for callers that want FTS5 query syntax
    (``NEAR``, prefixes, column filters): the query is returned untouched
    (None only if it is blank), and FTS5 may reject it.

    Otherwise the query is split into lowercased unicode words (see
    :func:`word_tokens`), each is quoted, and the result can never raise an FTS5
    syntax error.  Words are combined with ``mode`` (``"or"`` for recall with
    bm25 ranking, ``"and"`` to require all).  ``column`` restricts the word
    terms to some columns.  CJK parts of the query are matched against
    ``cjk_column`` using bigrams (:func:`cjk_match_expression`) and combined
    with the word clause using ``mode``; pass ``cjk_column=None`` for tables
    without that column (CJK runs are then searched as whole terms).
    ``drop_stopwords=True`` searches only :func:`content_terms`.
    """
    if raw:
        return query if query and not query.isspace() else None
    if drop_stopwords:
        words = [t for t in content_terms(query) if not _CJK_CHAR_RE.match(t)]
    else:
        words = WORD_RE.findall(query.lower())
    clauses: list[str] = []
    word_expr = fts_match_expression(words, mode=mode, column=column)
    if word_expr is not None:
        clauses.append(word_expr)
    if cjk_column is not None:
        cjk_expr = cjk_match_expression(query, column=cjk_column, mode=mode)
        if cjk_expr is not None:
            clauses.append(cjk_expr)
    elif has_cjk(query):
        # Without a segmented column, fall back to whole runs as plain terms.
        runs = fts_match_expression(cjk_runs(query), mode=mode, column=column)
        if runs is not None:
            clauses.append(runs)
    if not clauses:
        return None
    if len(clauses) == 1:
        return clauses[0]
    # Words and CJK bigrams live in different columns; combine the two
    # clauses with the same operator as the terms inside them.
    wrapped = [c if c.startswith("(") and c.endswith(")") else f"({c})" for c in clauses]
    return f" {mode.upper()} ".join(wrapped)
