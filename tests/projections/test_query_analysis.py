"""Unit tests for mnemolog.projections.recall.query_analysis (pure, model-free)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from datetime import datetime

import pytest

from mnemolog.projections.recall.query_analysis import (
    STOPWORDS,
    WEAK_WORDS,
    analyze,
    expand_terms,
    find_time_expressions,
    fts5_match,
    parse_datetime,
    stem,
    tokenize,
)


def test_terms_drop_question_and_function_words_and_possessives():
    a = analyze("What did Alice's brother research at the university?")
    assert a.terms == ["alice", "brother", "research", "university"]
    assert "what" not in a.terms and "did" not in a.terms


def test_a_query_of_function_words_only_keeps_them_all_as_its_terms():
    """Dropping every word left recall nothing to search: "To be or not to be" did not find the memory saying so."""
    assert analyze("To be or not to be").terms == ["to", "be", "or", "not"]
    assert analyze("Who is it?").search_terms == ["who", "is", "it"]
    assert analyze("how long ago").terms == ["how", "long", "ago"]
    assert analyze("What is the capital of it?").terms == ["capital"]  # a content word left: the function words go


def test_terms_are_lowercased_and_deduplicated_in_order():
    assert analyze("Paris, paris and PARIS trip").terms == ["paris", "trip"]


def test_frame_words_of_time_questions_are_not_terms():
    a = analyze("How long ago was Bob's 18th birthday?")
    assert a.terms == ["bob", "18th", "birthday"]
    assert analyze("What year did the team move to Lisbon?").terms == ["team", "move", "lisbon"]
    assert "many" not in analyze("How many cats does Bob have?").terms


def test_search_terms_drop_weak_verbs_and_add_variants():
    a = analyze("What did Bob say about his favorite photo?")
    assert "say" in a.terms
    assert "say" not in a.search_terms
    assert {"favorite", "fave", "photo", "pic"} <= set(a.search_terms)
    assert a.search_terms[0] == "bob"
    # a query of weak words only still searches for something
    assert analyze("What did they say?").search_terms == ["say", "said"]


def test_expand_terms_keeps_order_and_unknown_words():
    assert expand_terms(["zebra", "saw"]) == ["zebra", "saw", "see", "seen"]
    assert expand_terms([]) == []


def test_semantic_text_is_the_terms_or_the_query():
    assert analyze("What does Bob like to cook?").semantic_text == "bob like cook"
    assert analyze("What is it?").semantic_text == "what is it"  # function words only: they are its terms
    assert analyze("🍕?").semantic_text == "🍕?"  # no word at all


def test_entities_and_phrases():
    a = analyze("What did Ann think of the Grand Canyon trip with Bob?")
    assert a.entities_like == ["Ann", "Grand", "Canyon", "Bob"]
    assert a.entity_terms == ["ann", "grand", "canyon", "bob"]
    assert a.phrases == ["Grand Canyon"]
    assert a.topic_terms == ["think", "trip"]
    assert analyze('Did she read "the old man and the sea"?').phrases == ["the old man and the sea"]


def test_sentence_initial_question_word_is_not_an_entity():
    assert analyze("When did Ann leave?").entities_like == ["Ann"]
    assert analyze("Would Ann like jazz?").entities_like == ["Ann"]


@pytest.mark.parametrize(
    "query, kind",
    [
        ("When did Ann go to Rome?", "point"),
        ("what year did they marry", "point"),
        ("Which month was the concert in?", "point"),
        ("How long ago was the wedding?", "point"),
        ("Since when has Bob played chess?", "point"),
        ("How long has Ann been painting?", "duration"),
        ("How many years did Bob work there?", "duration"),
        ("What does Ann paint?", ""),
        ("Where does Bob live?", ""),
    ],
)
def test_temporal_questions(query, kind):
    a = analyze(query)
    assert a.temporal_kind == kind
    assert a.is_temporal == bool(kind)


def test_time_expressions_in_query():
    a = analyze("What did Ann share on October 13, 2023?")
    (te,) = a.time_expressions
    assert (te.kind, te.year, te.month, te.day) == ("date", 2023, 10, 13)
    assert te.text == "October 13, 2023"


def test_find_time_expressions_in_text():
    found = find_time_expressions(
        "Yesterday we met, two weeks ago we hiked, last Fri I painted; on 8 May, 2023 and in 2019 "
        "I lived there for 4 years. See you next summer!"
    )
    kinds = [(t.text.lower(), t.kind) for t in found]
    assert ("yesterday", "relative") in kinds
    assert ("two weeks ago", "relative") in kinds
    assert ("last fri", "relative") in kinds
    assert ("8 may, 2023", "date") in kinds
    assert ("2019", "date") in kinds
    assert ("for 4 years", "duration") in kinds
    assert ("next summer", "relative") in kinds
    # non-overlapping and in text order
    starts = [t.start for t in found]
    assert starts == sorted(starts)


def test_may_as_a_verb_is_not_a_month():
    assert find_time_expressions("You may like it.") == []
    (te,) = find_time_expressions("We went there in May.")
    assert te.month == 5


def test_text_without_time_has_no_expressions():
    assert find_time_expressions("I love painting flowers with my kids.") == []


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56)),
        ("12:09 am on 13 September, 2023", datetime(2023, 9, 13, 0, 9)),
        ("12:30 pm on 1 February, 2023", datetime(2023, 2, 1, 12, 30)),
        ("10:37 am on 27 June, 2023", datetime(2023, 6, 27, 10, 37)),
        ("May 8, 2023", datetime(2023, 5, 8)),
        ("8th of May 2023", None),
        ("2023-05-08T13:56:00", datetime(2023, 5, 8, 13, 56)),
        ("31 February, 2023", None),
        ("no date here", None),
    ],
)
def test_parse_datetime(text, expected):
    assert parse_datetime(text) == expected


def test_stem_conflates_common_inflections():
    assert stem("painting") == stem("paints") == stem("painted") == stem("paint")
    assert stem("camping") == stem("camped") == stem("camps")
    assert stem("running") == stem("run")
    assert stem("activities") == stem("activity")
    assert stem("Created") == stem("creates") == stem("create")
    assert stem("is") == "is"
    assert stem("2023") == "2023"


def test_tokenize_keeps_case_and_splits_contractions():
    assert tokenize("Ann's dog doesn't bark") == ["Ann", "dog", "doesn", "t", "bark"]
    assert tokenize("Ann\u2019s café") == ["Ann", "café"]


def test_stopword_lists_are_lowercase_and_disjoint_from_weak_words():
    assert all(w == w.lower() for w in STOPWORDS | WEAK_WORDS)
    assert not (STOPWORDS & WEAK_WORDS)


def test_fts5_match_quotes_terms_and_is_always_valid():
    assert fts5_match(["alice", "paint"]) == '"alice" OR "paint"'
    assert fts5_match([]) == ""
    assert fts5_match(['say "hi"']) == '"say ""hi"""'
    assert fts5_match(["run"], prefix=True) == '"run" *'
    assert fts5_match(["grand"], ["Grand Canyon"]) == '"grand" OR "Grand Canyon"'
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='porter unicode61 remove_diacritics 2')")
    db.execute("INSERT INTO t(body) VALUES ('We saw the Grand Canyon and painted it')")
    hostile = analyze('NEAR(a b) AND "x" OR body:* ^ - paintings?')
    expr = fts5_match(hostile.search_terms, hostile.phrases)
    rows = db.execute("SELECT count(*) FROM t WHERE t MATCH ?", (expr,)).fetchone()
    assert rows == (1,)  # "paintings" meets "painted" through the porter tokenizer


def test_analyze_is_deterministic_across_processes():
    """The same question gives the same analysis in every process, whatever the string-hash seed (no set order leaks)."""
    script = (
        "from mnemolog.projections.recall.query_analysis import analyze; "
        "print(repr(analyze('When did Ann and Bob visit the Grand Canyon last summer with Carol, Dave and Eve?')))"
    )
    runs = {
        subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env={**os.environ, "PYTHONHASHSEED": seed}).stdout
        for seed in ("1", "2", "3", "4")
    }
    assert len(runs) == 1 and "Grand Canyon" in runs.pop()


def test_non_latin_scripts_are_terms():
    assert analyze("Мария любит кофе").terms == ["мария", "любит", "кофе"]
    assert analyze("你好世界 test").terms == ["你好世界", "test"]
    assert analyze("").terms == [] and analyze("???").search_terms == []
    assert fts5_match(analyze("???").search_terms) == ""
