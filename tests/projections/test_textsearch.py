"""Tests for the FTS5 text helpers, including against a real SQLite FTS5 table."""

from __future__ import annotations

import re
import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mnemolog.projections.fts.textsearch import (
    STOPWORDS,
    TOKENIZE_SQL,
    WORD_RE,
    build_match,
    cjk_match_expression,
    cjk_query_terms,
    cjk_runs,
    cjk_segment,
    content_terms,
    escape_fts_term,
    folded,
    fts_match_expression,
    has_cjk,
    is_cjk,
    word_tokens,
)

COLUMNS = ("memory", "key", "tags", "background", "cjk")

DOCS = [
    ("The user drinks dark roast coffee every morning", "drink", "food", "", ""),
    ("Alice's sister lives in Berlin and is a nurse", "family", "people", "", ""),
    ("我每天早上喝咖啡", "", "", "", ""),
    ("其中", "", "", "", ""),
    ("茶", "", "", "", ""),
    ("コーヒーが好きです", "", "", "", ""),
    ("커피를 좋아해요", "", "", "", ""),
    ("Running a marathon in São Paulo", "sport", "", "", ""),
]


@pytest.fixture(scope="module")
def fts() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    cols = ", ".join(COLUMNS)
    conn.execute(f"CREATE VIRTUAL TABLE mem USING fts5({cols}, tokenize={TOKENIZE_SQL})")
    for memory, key, tags, background, _ in DOCS:
        conn.execute(
            "INSERT INTO mem (memory, key, tags, background, cjk) VALUES (?, ?, ?, ?, ?)",
            (memory, key, tags, background, cjk_segment(memory)),
        )
    yield conn
    conn.close()


def search(conn: sqlite3.Connection, expr: str) -> list[str]:
    rows = conn.execute(
        "SELECT memory FROM mem WHERE mem MATCH ? ORDER BY bm25(mem)", (expr,)
    ).fetchall()
    return [r[0] for r in rows]


# --------------------------------------------------------------------------- CJK


@pytest.mark.parametrize(
    "ch,expected",
    [
        ("中", True),
        ("㐀", True),  # Extension A
        ("あ", True),
        ("カ", True),
        ("ー", True),
        ("한", True),
        ("a", False),
        ("é", False),
        ("1", False),
        ("，", False),  # full-width punctuation is not a word character
        (" ", False),
        ("\U00020000", True),  # Extension B
    ],
)
def test_is_cjk(ch: str, expected: bool) -> None:
    assert is_cjk(ch) is expected


def test_is_cjk_requires_single_character() -> None:
    with pytest.raises(ValueError):
        is_cjk("中文")


def test_has_cjk_and_runs() -> None:
    assert has_cjk("hello 世界")
    assert not has_cjk("hello world, naïve café")
    assert cjk_runs("ab中文cd字，한국어") == ["中文", "字", "한국어"]


def test_cjk_segment_bigrams_and_single_characters() -> None:
    assert cjk_segment("中文字") == "中文 文字 字"
    assert cjk_segment("字") == "字"
    assert cjk_segment("I like 咖啡 and 茶!") == "咖啡 啡 茶"
    assert cjk_segment("no cjk here") == ""
    assert cjk_segment("") == ""


def test_cjk_query_terms() -> None:
    assert cjk_query_terms("我喜欢咖啡") == ["我喜", "喜欢", "欢咖", "咖啡"]
    assert cjk_query_terms("茶") == ["茶"]
    assert cjk_query_terms("咖啡，咖啡") == ["咖啡"]
    assert cjk_query_terms("coffee") == []


def test_unicode61_alone_misses_cjk_words(fts: sqlite3.Connection) -> None:
    # The reason for the segmented column: the whole run is one token.
    assert search(fts, 'memory : "咖啡"') == []


def test_two_character_query_finds_containing_memory(fts: sqlite3.Connection) -> None:
    assert search(fts, build_match("咖啡")) == ["我每天早上喝咖啡"]


def test_sentence_query_matches_shared_words(fts: sqlite3.Connection) -> None:
    expr = build_match("你早上喝什么？")
    assert "我每天早上喝咖啡" in search(fts, expr)


def test_single_character_query_finds_every_occurrence(fts: sqlite3.Connection) -> None:
    # "中" ends its run, "茶" is a run of one, "喝" is inside a run.
    assert search(fts, cjk_match_expression("中")) == ["其中"]
    assert search(fts, cjk_match_expression("茶")) == ["茶"]
    assert search(fts, cjk_match_expression("喝")) == ["我每天早上喝咖啡"]
    assert search(fts, cjk_match_expression("天")) == ["我每天早上喝咖啡"]


def test_japanese_and_korean(fts: sqlite3.Connection) -> None:
    assert search(fts, build_match("コーヒー")) == ["コーヒーが好きです"]
    assert search(fts, build_match("커피")) == ["커피를 좋아해요"]


def test_cjk_match_expression_none_without_cjk() -> None:
    assert cjk_match_expression("coffee") is None


# ----------------------------------------------------------------- escaping


def test_escape_fts_term() -> None:
    assert escape_fts_term("coffee") == '"coffee"'
    assert escape_fts_term('say "hi"') == '"say ""hi"""'
    assert escape_fts_term("a\x00b") == '"a b"'


def test_fts_match_expression_shapes() -> None:
    assert fts_match_expression([]) is None
    assert fts_match_expression(["", "  "]) is None
    assert fts_match_expression(["coffee"]) == '"coffee"'
    assert fts_match_expression(["a", "b", "a"]) == '("a" OR "b")'
    assert fts_match_expression(["a", "b"], mode="and") == '("a" AND "b")'
    assert fts_match_expression(["a"], column="memory") == 'memory : ("a")'
    assert fts_match_expression(["a"], column=["memory", "tags"]) == '{memory tags} : ("a")'


def test_fts_match_expression_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        fts_match_expression(["a"], mode="near")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        fts_match_expression(["a"], column="memory) OR (x")
    with pytest.raises(ValueError):
        fts_match_expression(["a"], column=[])


def test_build_match_words(fts: sqlite3.Connection) -> None:
    assert build_match("Coffee, morning!") == '("coffee" OR "morning")'
    assert build_match("   ") is None
    assert build_match("?!... ---") is None
    assert search(fts, build_match("coffee")) == [DOCS[0][0]]
    # porter stemming and diacritic folding still apply inside quoted terms
    assert search(fts, build_match("drinking")) == [DOCS[0][0]]
    assert search(fts, build_match("sao paulo")) == [DOCS[7][0]]


def test_build_match_modes(fts: sqlite3.Connection) -> None:
    assert search(fts, build_match("coffee berlin")) != []
    assert search(fts, build_match("coffee berlin", mode="and")) == []
    assert search(fts, build_match("coffee morning", mode="and")) == [DOCS[0][0]]


def test_build_match_column_and_stopwords(fts: sqlite3.Connection) -> None:
    assert search(fts, build_match("family", column="key")) == [DOCS[1][0]]
    assert search(fts, build_match("family", column="memory")) == []
    expr = build_match("what does the user drink?", drop_stopwords=True, mode="and")
    assert expr == '("user" AND "drink")'
    assert search(fts, expr) == [DOCS[0][0]]


def test_build_match_mixed_scripts(fts: sqlite3.Connection) -> None:
    expr = build_match("coffee 咖啡")
    assert expr == '("coffee") OR (cjk : ("咖啡"))'
    assert set(search(fts, expr)) == {DOCS[0][0], "我每天早上喝咖啡"}
    no_cjk_col = build_match("coffee 咖啡", cjk_column=None)
    assert "cjk" not in no_cjk_col


def test_build_match_raw_passthrough(fts: sqlite3.Connection) -> None:
    assert build_match("coff*", raw=True) == "coff*"
    assert build_match("  ", raw=True) is None
    assert search(fts, build_match("coff*", raw=True)) == [DOCS[0][0]]
    with pytest.raises(sqlite3.OperationalError):
        search(fts, build_match("AND (", raw=True))


FTS_SYNTAX = st.sampled_from(
    ["AND", "OR", "NOT", "NEAR", "NEAR(", "(", ")", '"', "'", "*", ":", "^", "+", "-",
     "{", "}", ",", "memory:", "cjk :", "\x00", "咖啡", "中", "coffee", " ", "_", "ß", "İ"]
)
QUERY_TEXT = st.one_of(st.text(), st.lists(FTS_SYNTAX | st.text(max_size=3)).map("".join))


@settings(max_examples=300, deadline=None)
@given(
    query=QUERY_TEXT,
    mode=st.sampled_from(["or", "and"]),
    stop=st.booleans(),
    column=st.sampled_from([None, "memory", ("memory", "key", "tags", "background")]),
)
def test_build_match_never_produces_syntax_errors(
    fts: sqlite3.Connection, query: str, mode: str, stop: bool, column: object
) -> None:
    expr = build_match(query, mode=mode, drop_stopwords=stop, column=column)  # type: ignore[arg-type]
    if expr is None:
        assert not [t for t in word_tokens(query)]
        return
    fts.execute("SELECT count(*) FROM mem WHERE mem MATCH ?", (expr,)).fetchone()


@settings(max_examples=200, deadline=None)
@given(terms=st.lists(st.text(), max_size=8), column=st.sampled_from([None, "memory", "cjk"]))
def test_any_terms_are_safe(fts: sqlite3.Connection, terms: list[str], column: str | None) -> None:
    expr = fts_match_expression(terms, column=column)
    if expr is not None:
        fts.execute("SELECT count(*) FROM mem WHERE mem MATCH ?", (expr,)).fetchone()


# ---------------------------------------------------------------- stopwords


def test_stopwords_cover_question_words() -> None:
    for w in ("what", "when", "where", "who", "whom", "which", "why", "how",
              "did", "does", "do", "is", "are", "was", "were", "the", "a", "of"):
        assert w in STOPWORDS
    assert "coffee" not in STOPWORDS
    assert all(w == w.lower() for w in STOPWORDS)


def test_content_terms() -> None:
    assert content_terms("What did Alice's sister buy?") == ["alice", "sister", "buy"]
    assert content_terms("Coffee, coffee and COFFEE") == ["coffee"]
    # everything is a stopword: fall back to the (de-duplicated) tokens
    assert content_terms("Who is it? Who?") == ["who", "is", "it"]
    assert content_terms("") == []


def test_word_tokens_follow_unicode61_boundaries() -> None:
    assert word_tokens("snake_case don't Naïve 2024") == ["snake", "case", "don", "t", "naïve", "2024"]
    assert word_tokens("我喜欢coffee") == ["我喜欢", "coffee"]
    # Combining marks belong to their word: Indic vowel signs and viramas, Arabic points, decomposed accents.
    assert word_tokens("मैं हिन्दी बोलता हूँ") == ["मैं", "हिन्दी", "बोलता", "हूँ"]
    assert word_tokens("நான் தமிழ் பேசுகிறேன்") == ["நான்", "தமிழ்", "பேசுகிறேன்"]
    assert word_tokens("كَتَبَ الدَّرْسَ cafe\u0301") == ["كَتَبَ", "الدَّرْسَ", "cafe\u0301"]


@pytest.mark.parametrize("text", [
    "मैं हिन्दी बोलता हूँ", "নমস্কার বাংলা", "நான் தமிழ் பேசுகிறேன்", "كَتَبَ الوَلَدُ الدَّرْسَ", "שָׁלוֹם עוֹלָם",
    "cafe\u0301 crème", "snake_case don't 2024", "Привет мир", "x\u0301\u0302y \u0301lead",
])
def test_the_words_of_the_python_side_are_the_tokens_of_the_index(text: str) -> None:
    """What the index holds for a text (FTS5's own tokenizer) is what :data:`WORD_RE` reads from it, word for word:
    the queries, the ``cjk`` column's extra words and the postings are all built from Python's words."""
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, tokenize={TOKENIZE_SQL})")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    probe = sqlite3.connect(":memory:")
    probe.execute(f"CREATE VIRTUAL TABLE w USING fts5(x, tokenize={TOKENIZE_SQL})")
    probe.execute("CREATE VIRTUAL TABLE wv USING fts5vocab(w, 'instance')")
    conn.execute("INSERT INTO t VALUES (?)", (text,))
    indexed = [term for (term,) in conn.execute("SELECT term FROM v ORDER BY offset")]
    words = []
    for word in WORD_RE.findall(text):  # each Python word is one token of the index
        probe.execute("DELETE FROM w")
        probe.execute("INSERT INTO w VALUES (?)", (word,))
        words.extend(term for (term,) in probe.execute("SELECT term FROM wv ORDER BY offset"))
    assert words == indexed


def test_folding_drops_the_vowel_points_of_abjads_and_keeps_other_marks() -> None:
    assert folded("كَتَبَ الدَّرْسَ") == "كتب الدرس"
    assert folded("ـكـتـب") == "كتب"  # tatweel stretches the line, it is no letter
    assert folded("שָׁלוֹם") == "שלום"
    assert folded("हिन्दी தமிழ்") == "हिन्दी தமிழ்"  # an Indic vowel sign is part of the letter
    assert folded("e\u0301") == "é"  # composed, not dropped: unicode61 folds the accent
    assert folded("أحمد إلى آمن المدرسة على کتاب ی") == "احمد الي امن المدرسه علي كتاب ي"  # letters written for one another
    assert folded("می\u200cخواهم") == "میخواهم".replace("\u06cc", "\u064a")  # the joiner goes; Persian yeh folds
    assert folded("Straße ẞ ёлка Ελληνικά ΐ ᾅ") == "Strasse SS елка Ελληνικα ι α"


def test_the_table_of_marks_is_unicodes() -> None:
    """:data:`~.script_marks.MARK_RANGES` was generated from :mod:`unicodedata`: every mark of the running
    Python's Unicode is in it (when that is the table's version), and nothing else."""
    import unicodedata

    from mnemolog.projections.fts.script_marks import MARK, MARK_RANGES, UNICODE_VERSION

    listed = {cp for lo, hi in MARK_RANGES for cp in range(lo, hi + 1)}
    assert all(unicodedata.category(chr(cp)).startswith("M") for cp in listed)
    assert [lo for lo, _ in MARK_RANGES] == sorted(lo for lo, _ in MARK_RANGES)
    if unicodedata.unidata_version == UNICODE_VERSION:
        assert listed == {cp for cp in range(0x110000) if unicodedata.category(chr(cp)).startswith("M")}
    one_mark = re.compile(MARK)
    for cp in [*range(0x30000), *range(0xE0000, 0xE0200), 0x10FFFF]:
        assert bool(one_mark.fullmatch(chr(cp))) == (cp in listed), hex(cp)


# -- symbols --------------------------------------------------------------------------------------


def test_symbols_are_words_each_once_a_flag_whole_and_modifiers_left_out():
    from mnemolog.projections.fts.textsearch import indexed_words, symbol_words

    assert symbol_words("Dinner: 🍕🍕 on Friday ❤️ in 🇵🇹") == ["sym1f355x", "sym2764x", "sym1f1f5x1f1f9x"]
    assert symbol_words("👍🏽 👩‍🔬 © ® ♥") == ["sym1f44dx", "sym1f469x", "sym1f52cx", "syma9x", "symaex", "sym2665x"]
    assert symbol_words("plain ascii text, $5 + 3 = 8 ^_^ |") == []
    assert symbol_words("我喜欢 Python ÅÄÖ — “quoted” 2024年") == []  # letters, digits and punctuation are no symbols
    assert indexed_words("Nice 🎉") == ["sym1f389x"]


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(categories=("So", "Sk", "Mn", "Ll", "Nd")), max_size=20) | st.text(max_size=40))
def test_a_symbol_word_is_one_token_for_the_index_tokenizer(text):
    """The tokenizer keeps each symbol's word as it is (the porter stemmer would cut ``symae``, for ®, to ``syma``)."""
    from mnemolog.projections.fts.textsearch import symbol_words

    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE v USING fts5(x, tokenize={TOKENIZE_SQL})")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5vocab(v, 'instance')")
    for word in symbol_words(text):
        conn.execute("DELETE FROM v")
        conn.execute("INSERT INTO v (x) VALUES (?)", (word,))
        assert [r[0] for r in conn.execute("SELECT term FROM t")] == [word]
