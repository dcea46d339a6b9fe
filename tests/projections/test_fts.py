"""The FTS projection and the lexical search: escaping, CJK, filters before the limit, as-of, drops."""

from __future__ import annotations

import random
import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemolog.eventstore import EventStore
from mnemolog.projections.fts import projector as fts_module
from mnemolog.projections.filters import SearchFilters
from mnemolog.projections.fts.projector import FtsProjector, fts_search, fts_search_sql
from mnemolog.projections.runner import ProjectionRunner
from tests.projections.support import Log



def project(store, path, until=None) -> ProjectionRunner:
    runner = ProjectionRunner(store, path, [FtsProjector()])
    runner.catch_up(until=until)
    return runner


@pytest.fixture
def searcher(store, tmp_path):
    runners = []

    def run(until=None):
        runner = project(store, tmp_path / f"projections-{len(runners)}.db", until)
        runners.append(runner)
        return runner.conn

    yield run
    for runner in runners:
        runner.close()


def ids(hits) -> list[str]:
    return [h.memory_id for h in hits]


def assert_plans_agree(conn, query: str) -> None:
    """The postings answer a word query exactly as the FTS5 statement does, scores included."""
    fast, exact = fts_search(conn, "t", query), fts_search(conn, "t", query, exact=True)
    assert [(h.row_id, pytest.approx(h.score, rel=1e-9)) for h in fast] == [(h.row_id, h.score) for h in exact]


# -- escaping ---------------------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.text(max_size=60))
def test_any_text_is_a_safe_query(tmp_path_factory, query):
    conn = _shared_conn(tmp_path_factory)
    hits = fts_search(conn, "t", query, limit=5)
    assert all(h.score >= 0 for h in hits)
    assert fts_search(conn, "t", query, limit=5, exact=True) is not None


_CONN: dict[str, sqlite3.Connection] = {}


def _shared_conn(tmp_path_factory) -> sqlite3.Connection:
    if "conn" not in _CONN:
        path = tmp_path_factory.mktemp("escaping")
        store = EventStore.open(path)
        log = Log(store)
        log.add("a", 'He said "NEAR(coffee tea)" AND -x: col:value * ^start (paren')
        log.add("b", "我喜欢喝咖啡 and café au lait")
        _CONN["conn"] = project(store, path / "projections.db").conn
    return _CONN["conn"]


@pytest.mark.parametrize(
    "query", ['"', 'coffee"', "NEAR(", "AND OR NOT", "col:value", "*", "^", "(", "a - b", "\x00", "'; DROP TABLE fts_docs; --"]
)
def test_fts_syntax_is_searched_literally(log, searcher, query):
    log.add("m1", "coffee and value with a col")
    conn = searcher()
    fts_search(conn, "t", query)  # never raises
    assert conn.execute("SELECT count(*) FROM fts_docs").fetchone()[0] == 1


def test_raw_is_an_explicit_opt_in(log, searcher):
    log.add("m1", "the coffee machine at work")
    log.add("m2", "coffee beans from the market")
    conn = searcher()
    assert ids(fts_search(conn, "t", "coffe*")) == []  # escaped: a literal word
    assert set(ids(fts_search(conn, "t", "coffe*", raw=True))) == {"m1", "m2"}
    assert ids(fts_search(conn, "t", "NEAR(coffee machine, 1)", raw=True)) == ["m1"]
    with pytest.raises(sqlite3.OperationalError):
        fts_search(conn, "t", 'coffee AND "', raw=True)


def test_stopwords_do_not_match_and_accents_fold(log, searcher):
    log.add("m1", "the the the of a")
    log.add("m2", "Une crème brûlée au café")
    conn = searcher()
    assert ids(fts_search(conn, "t", "what is the creme brulee?")) == ["m2"]
    assert ids(fts_search(conn, "t", "Cafe")) == ["m2"]


# -- CJK ----------------------------------------------------------------------------------


def test_cjk_two_characters_find_the_memory_containing_them(log, searcher):
    log.add("zh", "我今天早上在公司喝了一杯咖啡")
    log.add("other", "我喜欢喝茶")
    log.add("en", "coffee in the morning")
    conn = searcher()
    assert ids(fts_search(conn, "t", "咖啡")) == ["zh"]
    assert ids(fts_search(conn, "t", "公司")) == ["zh"]


def test_cjk_whole_sentence_query_ranks_the_best_match_first(log, searcher):
    log.add("zh", "我今天早上在公司喝了一杯咖啡")
    log.add("tea", "我喜欢喝茶")
    log.add("far", "明天下雨")
    conn = searcher()
    hits = fts_search(conn, "t", "今天早上我喝了什么咖啡？")
    assert hits[0].memory_id == "zh"
    assert "far" not in ids(hits)


@pytest.mark.parametrize("text, query", [
    ("ภาษาไทยเป็นภาษาที่สวยงาม", "ภาษาไทย"),  # Thai
    ("ພາສາລາວແມ່ນພາສາທີ່ສວຍງາມ", "ພາສາລາວ"),  # Lao
    ("ភាសាខ្មែរជាភាសាដ៏ស្រស់ស្អាត", "ភាសាខ្មែរ"),  # Khmer
    ("မြန်မာဘာသာစကားသည်လှပသည်", "ဘာသာစကား"),  # Myanmar
])
def test_a_word_of_a_script_written_without_spaces_finds_the_sentence_holding_it(log, searcher, text, query):
    """Thai, Lao, Khmer and Myanmar write a sentence without spaces, which unicode61 keeps as one token: a word
    of it found nothing, by any plan, unless it was the whole sentence. They are segmented as CJK text is."""
    log.add("it", text)
    log.add("other", "ภูเขา coffee กาแฟ")
    conn = searcher()
    assert ids(fts_search(conn, "t", query)) == ["it"]
    assert ids(fts_search(conn, "t", text)) == ["it"]


@pytest.mark.parametrize("text, query, near_miss", [
    ("मैं हिन्दी बोलता हूँ", "हिन्दी", "हंदी नदी किनारे"),  # Hindi: the miss shares the word's consonants
    ("আমি বাংলা বলি", "বাংলা", "বালি বল"),  # Bengali
    ("நான் தமிழ் பேசுகிறேன்", "தமிழ்", "தமிழகம் ழ"),  # Tamil
])
def test_an_indic_word_is_found_whole_and_not_by_its_consonants(log, searcher, text, query, near_miss):
    """The tokenizer cut an Indic word at each vowel sign and virama: "हिन्दी" was indexed as "ह", "न", "द", and
    found every memory holding those letters. Combining marks are now part of their word."""
    log.add("it", text)
    log.add("miss", near_miss)
    conn = searcher()
    for exact in (False, True):
        assert ids(fts_search(conn, "t", query, exact=exact)) == ["it"]
    assert_plans_agree(conn, f"{query} {text}")


@pytest.mark.parametrize("pointed, plain", [
    ("كَتَبَ الوَلَدُ الدَّرْسَ", "كتب الولد الدرس"),  # Arabic with its harakat and a shadda
    ("الـقـهـوة", "القهوة"),  # tatweel
    ("שָׁלוֹם עוֹלָם", "שלום עולם"),  # Hebrew with niqqud
])
def test_an_abjad_word_is_found_with_or_without_its_vowel_points(log, searcher, pointed, plain):
    """Arabic and Hebrew write their vowel points only sometimes: "كتب" found nothing in "كَتَبَ". Both forms
    now find both, by every plan, and another word does not."""
    log.add("pointed", pointed)
    log.add("plain", plain)
    log.add("other", "كتاب مكتبة ספר")
    conn = searcher()
    for exact in (False, True):
        for query in (plain.split()[0], pointed.split()[0]):
            assert set(ids(fts_search(conn, "t", query, exact=exact))) == {"pointed", "plain"}


@pytest.mark.parametrize("text, query", [
    ("أحمد يعمل في المدرسة", "احمد"),  # alef with hamza, typed without
    ("احمد يعمل في المدرسة", "أحمد"),
    ("أحمد يعمل في المدرسة", "المدرسه"),  # ta marbuta typed as heh
    ("ذهب إلى المستشفى", "المستشفي"),  # alef maqsura typed as yeh
    ("كتاب جديد", "کتاب"),  # Persian keheh for Arabic kaf
    ("این کتاب را می‌خواهم", "میخواهم"),  # a Persian prefix joined by a ZWNJ, or not
    ("این کتاب را میخواهم", "می‌خواهم"),
    ("Die Straße in München", "strasse"),  # German ß typed as ss
    ("die Strasse in Zürich", "Straße"),
    ("Ελληνικά γράμματα", "ελληνικα"),  # Greek typed without its tonos
    ("ελληνικα γραμματα", "Ελληνικά"),
    ("зелёная ёлка", "елка"),  # Russian ё typed as е
])
def test_letters_written_for_one_another_find_each_other(log, searcher, text, query):
    """Writers of Arabic and Persian often leave out the hamza on an alef, write ta marbuta as heh, and type
    Persian or Arabic forms of yeh and kaf; German ß is typed as ss, Russian ё as е, Greek without its accents
    (which unicode61 does not fold, as it folds Latin ones): each form now finds the other."""
    log.add("it", text)
    log.add("other", "كتب الطالب درسا في البيت")
    conn = searcher()
    for exact in (False, True):
        assert ids(fts_search(conn, "t", query, exact=exact)) == ["it"]


def test_a_decomposed_accent_is_found_as_the_composed_one(log, searcher):
    log.add("decomposed", "a cafe\u0301 in Lisbon")
    log.add("composed", "the café on the corner")
    log.add("other", "a cafeteria")
    conn = searcher()
    for exact in (False, True):
        for query in ("café", "cafe", "cafe\u0301"):
            assert set(ids(fts_search(conn, "t", query, exact=exact))) == {"decomposed", "composed"}


def test_a_word_written_against_cjk_text_is_found_by_the_word(log, searcher):
    """unicode61 keeps "我喜欢Python编程" as one token: the word in it is indexed apart, and found by every plan."""
    log.add("py", "我喜欢Python编程")
    log.add("wide", "ＡＢＣ全角文字のテスト")
    log.add("mixed", "Acme公司的总部在北京 and a report")
    log.add("lisbon", "Alice lives in Lisbon")
    log.add("spaced", "我喜欢 Python 和咖啡")
    conn = searcher()
    for exact in (False, True):
        assert set(ids(fts_search(conn, "t", "Python", exact=exact))) == {"py", "spaced"}
        assert ids(fts_search(conn, "t", "ＡＢＣ", exact=exact)) == ["wide"]
        assert set(ids(fts_search(conn, "t", "acme report", exact=exact))) == {"mixed"}
    # A query that writes a word against CJK text searches the word too, beside the CJK bigrams.
    assert ids(fts_search(conn, "t", "Lisbon在哪里")) == ["lisbon"]
    assert ids(fts_search(conn, "t", "python编程"))[0] == "py"
    assert_plans_agree(conn, "python report acme")


def test_emoji_and_other_symbols_are_found_by_every_plan(log, searcher):
    """unicode61 takes a symbol for a separator: a memory's "🍕" was found by no query. Each symbol is a word of
    the ``cjk`` column now, a flag one word of both its letters; a query's symbols are searched as those words."""
    written = {
        "pizza": "Dinner plan: 🍕 on Friday",
        "pt": "Holidays in 🇵🇹 this summer",
        "pl": "Holidays in 🇵🇱 last summer",
        "thumbs": "Nice work 👍🏽",
        "heart": "I ❤️ green tea",
        "scientist": "She is a 👩‍🔬 at the lab",
        "plain": "the weather is grey",
    }
    for memory_id, text in written.items():
        log.add(memory_id, text)
    conn = searcher()
    found = {"🍕": "pizza", "🇵🇹": "pt", "👍": "thumbs", "❤": "heart", "🔬": "scientist", "friday 🍕": "pizza"}
    assert {(query, exact): ids(fts_search(conn, "t", query, exact=exact)) for query in found for exact in (False, True)} == {
        (query, exact): [memory_id] for query, memory_id in found.items() for exact in (False, True)
    }
    # Recall's lexical channel gives the question's terms, which hold no symbol: the query's symbols are searched beside them.
    assert ids(fts_search(conn, "t", "where is 🍕?", terms=[])) == ["pizza"]
    assert ids(fts_search(conn, "t", "tea ❤️", terms=["tea"])) == ["heart"]
    assert_plans_agree(conn, "🍕 summer 🇵🇹")


def test_full_width_and_compatibility_forms_find_their_plain_forms(log, searcher):
    """Full-width letters and digits (typed on CJK keyboards), ligatures and half-width kana are found by their NFKC forms, both ways."""
    log.add("wide", "ＡＢＣ全角文字のテスト")
    log.add("spaced", "会議は ２０２４ 年 Ｒｏｏｍ ７ で")
    log.add("plain", "the abc room 7 in 2024")
    log.add("liga", "the ﬁle was signed")
    log.add("kana", "ｶﾀｶﾅの本")
    conn = searcher()
    for exact in (False, True):
        assert set(ids(fts_search(conn, "t", "abc", exact=exact))) == {"wide", "plain"}
        assert set(ids(fts_search(conn, "t", "ＡＢＣ", exact=exact))) == {"wide", "plain"}
        assert set(ids(fts_search(conn, "t", "room 2024", exact=exact))) == {"spaced", "plain"}
        assert ids(fts_search(conn, "t", "file signed", exact=exact))[0] == "liga"
    assert ids(fts_search(conn, "t", "カタカナ")) == ["kana"]
    assert ids(fts_search(conn, "t", "ｶﾀｶﾅ")) == ["kana"]
    assert_plans_agree(conn, "abc room 2024 file")


def test_a_word_holding_an_invisible_character_is_found_by_the_word_as_it_reads(log, searcher):
    """A zero-width space, a word joiner, a zero-width no-break space or a soft hyphen inside a word (pasted from a web
    page or a PDF) split it in two for the index: "co\u200bffee" reads "coffee", and "coffee" found nothing."""
    log.add("zwsp", "fresh co\u200bffee beans")
    log.add("shy", "a hyphen\u00adation example")
    log.add("wj", "the word\u2060joiner and bom\ufeffword")
    log.add("plain", "tea leaves")
    conn = searcher()
    for exact in (False, True):
        assert ids(fts_search(conn, "t", "coffee", exact=exact)) == ["zwsp"]
        assert ids(fts_search(conn, "t", "hyphenation", exact=exact)) == ["shy"]
        assert ids(fts_search(conn, "t", "wordjoiner bomword", exact=exact)) == ["wj"]
        assert ids(fts_search(conn, "t", "co\u200bffee", exact=exact)) == ["zwsp"]  # the query as pasted, too
        assert ids(fts_search(conn, "t", "fresh", exact=exact)) == ["zwsp"]


# -- filters before the limit ----------------------------------------------------------------


def test_status_filter_applies_before_the_limit(log, searcher, store):
    for i in range(60):
        log.add(f"old{i}", "coffee coffee coffee notes")
        log.archive(f"old{i}")
    log.add("live", "a note about coffee")
    conn = searcher()
    assert ids(fts_search(conn, "t", "coffee", limit=10)) == ["live"]
    archived = fts_search(conn, "t", "coffee", limit=10, filters=SearchFilters(status=("archived",)))
    assert len(archived) == 10 and "live" not in ids(archived)
    assert len(fts_search(conn, "t", "coffee", limit=100, filters=SearchFilters(status=None))) == 61


@pytest.mark.parametrize(
    "filters, expected",
    [
        (SearchFilters(memory_types=("UserMemory",)), "typed"),
        (SearchFilters(tags=("Rare",)), "tagged"),
        (SearchFilters(collection="books"), "collected"),
        (SearchFilters(doc_type="pdf", doc_ids=("d9",)), "document"),
        (SearchFilters(model="m-2"), "modelled"),
        (SearchFilters(created_from="2025-01-01T00:00:00Z"), "recent"),
        (SearchFilters(created_to="2000-01-01T00:00:00Z"), "ancient"),
    ],
)
def test_metadata_filters_apply_before_the_limit(log, searcher, filters, expected):
    for i in range(60):
        log.add(f"bulk{i}", "coffee coffee coffee", tags=("common",), collection="notes", created_at="2024-06-01T00:00:00Z")
    log.add("typed", "coffee", memory_type="UserMemory", created_at="2024-06-01T00:00:00Z")
    log.add("tagged", "coffee", tags=("x", "rare"), created_at="2024-06-01T00:00:00Z")
    log.add("collected", "coffee", collection="books", created_at="2024-06-01T00:00:00Z")
    log.add("document", "coffee", doc_type="pdf", doc_id="d9", created_at="2024-06-01T00:00:00Z")
    log.add("modelled", "coffee", model="m-2", created_at="2024-06-01T00:00:00Z")
    log.add("recent", "coffee", created_at="2025-03-01T00:00:00Z")
    log.add("ancient", "coffee", created_at="1999-03-01T00:00:00Z")
    conn = searcher()
    assert ids(fts_search(conn, "t", "coffee", limit=5, filters=filters)) == [expected]
    assert ids(fts_search(conn, "t", "coffee", limit=5, filters=filters, exact=True)) == [expected]


def test_exclude_collection_keeps_memories_without_one(log, searcher):
    log.add("a", "coffee", collection="spam")
    log.add("b", "coffee")
    log.add("c", "coffee", collection="books")
    conn = searcher()
    assert set(ids(fts_search(conn, "t", "coffee", filters=SearchFilters(exclude_collection="spam")))) == {"b", "c"}


def test_tags_are_searchable_text(log, searcher):
    log.add("m1", "a plain note", tags=("gardening",))
    conn = searcher()
    assert ids(fts_search(conn, "t", "gardening")) == ["m1"]


# -- tenants, versions, as-of, drops ------------------------------------------------------------


def test_tenants_never_see_each_other(log, searcher):
    log.add("a1", "secret coffee recipe", tenant="alice")
    log.add("b1", "coffee for bob", tenant="bob")
    conn = searcher()
    assert ids(fts_search(conn, "alice", "coffee")) == ["a1"]
    assert ids(fts_search(conn, "bob", "secret coffee recipe")) == ["b1"]
    assert fts_search(conn, "carol", "coffee") == []
    with pytest.raises(ValueError):
        fts_search(conn, "", "coffee")


def test_update_opens_a_new_row_and_the_old_text_is_found_only_as_of(log, searcher):
    before = log.add("m1", "I drive a red bicycle")
    log.update("m1", "I drive a blue car")
    conn = searcher()
    rows = conn.execute("SELECT version, valid_from, valid_to FROM fts_docs ORDER BY row_id").fetchall()
    assert rows == [(1, before, before + 1), (2, before + 1, None)]
    assert fts_search(conn, "t", "bicycle") == []
    old = fts_search(conn, "t", "bicycle", as_of=before)
    assert ids(old) == ["m1"] and old[0].version == 1
    assert [h.version for h in fts_search(conn, "t", "car")] == [2]
    assert fts_search(conn, "t", "car", as_of=before) == []


def test_as_of_equals_a_store_replayed_up_to_that_position(log, searcher):
    rng = random.Random(7)
    words = "coffee tea milk sugar bread jam honey lemon water juice".split()
    positions = []
    for step in range(120):
        mid = f"m{rng.randrange(40)}"
        text = " ".join(rng.choices(words, k=4))
        try:
            if step < 40 or rng.random() < 0.3:
                positions.append(log.add(mid, text))
            elif rng.random() < 0.5:
                positions.append(log.update(mid, text))
            else:
                positions.append(log.archive(mid))
        except Exception:  # adding an existing id: the stream exists
            positions.append(log.update(mid, text))
    head = searcher()
    for cut in (positions[30], positions[70], positions[100]):
        replayed = searcher(until=cut)
        for query in ("coffee", "honey lemon", "bread"):
            for status in (("activated",), ("archived",), None):
                f = SearchFilters(status=status)
                past = {(h.memory_id, h.version) for h in fts_search(head, "t", query, limit=500, as_of=cut, filters=f)}
                fresh = {(h.memory_id, h.version) for h in fts_search(replayed, "t", query, limit=500, filters=f)}
                assert past == fresh


def test_tenant_drop_removes_rows_and_keeps_the_index_consistent(log, searcher):
    log.add("a1", "coffee with alice", tenant="alice")
    log.add("b1", "coffee with bob", tenant="bob")
    log.update("a1", "more coffee with alice", tenant="alice")
    log.drop("alice")
    log.add("b2", "bob again, coffee", tenant="bob")
    conn = searcher()
    assert fts_search(conn, "alice", "coffee") == []
    assert set(ids(fts_search(conn, "bob", "coffee"))) == {"b1", "b2"}
    assert conn.execute("SELECT count(*) FROM fts_docs WHERE tenant = 'alice'").fetchone()[0] == 0
    conn.execute("INSERT INTO fts_index (fts_index, rank) VALUES ('integrity-check', 1)")
    # the dropped rows are gone from the index itself, not only from the join
    assert conn.execute("SELECT count(*) FROM fts_index WHERE fts_index MATCH 'alice'").fetchone()[0] == 0


def test_rebuild_gives_the_same_answers(log, store, tmp_path):
    for i in range(30):
        log.add(f"m{i}", f"note {i} about coffee and tea number{i % 5}")
    runner = project(store, tmp_path / "p.db")
    before = fts_search(runner.conn, "t", "coffee number3")
    runner.rebuild(["fts"])
    assert fts_search(runner.conn, "t", "coffee number3") == before
    runner.close()


# -- the plan ---------------------------------------------------------------------------------------


def test_tiered_plan_equals_the_exact_plan(log, searcher, monkeypatch):
    rng = random.Random(3)
    vocabulary = [f"w{i}" for i in range(60)]
    weights = [1 / (i + 1) ** 0.5 for i in range(60)]  # no word in half of the rows (those are left out)
    for i in range(400):
        log.add(f"m{i}", " ".join(rng.choices(vocabulary, weights=weights, k=rng.randint(3, 9))), tenant="t" if i % 4 else "u")
    conn = searcher()
    # A tiny first tier and no cap: every query goes through the tiers and must still be exact.
    monkeypatch.setattr(fts_module, "TIER_BUDGET", 5)
    monkeypatch.setattr(fts_module, "TIER_CAP", 10**9)
    monkeypatch.setattr(fts_module, "SMALL_TENANT_SHARE", 0.0)
    for _ in range(60):
        query = " ".join(rng.sample(vocabulary[:40], rng.randint(2, 5)))
        for limit in (3, 10):
            tiered = fts_search(conn, "t", query, limit=limit)
            exact = fts_search(conn, "t", query, limit=limit, exact=True)
            assert [h.row_id for h in tiered] == [h.row_id for h in exact]
            assert [h.score for h in tiered] == pytest.approx([h.score for h in exact], rel=1e-9)


def test_search_sql_is_the_exact_statement(log, searcher):
    for i in range(20):
        log.add(f"m{i}", f"coffee {'tea ' * (i % 4)}number")
    conn = searcher()
    sql, params = fts_search_sql("t", "coffee tea", limit=7, filters=SearchFilters(tags=None))
    rows = conn.execute(sql, params).fetchall()
    assert [r[0] for r in rows] == ids(fts_search(conn, "t", "coffee tea", limit=7, exact=True))
    assert "d.tenant = ?" in sql and "LIMIT ?" in sql
    assert conn.execute(*fts_search_sql("t", "???")).fetchall() == []


def test_terms_from_a_query_analysis_replace_the_content_terms(log, searcher):
    log.add("m1", "we adopted a dog named Rex")
    log.add("m2", "the animal shelter called")
    conn = searcher()
    assert ids(fts_search(conn, "t", "when did they adopt?")) == ["m1"]  # porter: adopt, adopted
    assert set(ids(fts_search(conn, "t", "when did they adopt?", terms=["adopt", "shelter"]))) == {"m1", "m2"}
    assert ids(fts_search(conn, "t", "when did they adopt?", terms=["shelter"])) == ["m2"]


def test_words_in_most_rows_still_match_in_a_small_store(log, searcher):
    # Two rows: "near" and "bridge" are in half of them, so FTS5 floors their idf; "sleep" is in none.
    log.add("m1", "The river was high.")
    log.add("m2", "We slept near the bridge.")
    conn = searcher()
    assert ids(fts_search(conn, "t", "where did we sleep near the bridge")) == ["m2"]
    assert ids(fts_search(conn, "t", "where did we sleep near the bridge", exact=True)) == ["m2"]
