"""Tests for the deterministic entity linker."""

from __future__ import annotations

import random

import pytest

from mnemolog.projections.linking.linker import (
    AMBIGUITY_PENALTY,
    CONFIDENCE,
    AliasCatalogue,
    LinkChunk,
    LinkEntity,
    normalise_with_offsets,
)


def ent(id, name, aliases=(), tags=(), pos=0):
    return LinkEntity(id=id, name=name, aliases=tuple(aliases), tags=tuple(tags),
                      created_position=pos)


def entity_ids(catalogue, text):
    return [e for e, *_ in catalogue.query_entities(text)]


# ------------------------------------------------------------------ matching


@pytest.mark.parametrize("text", ["I trust you", "a rusty nail", "rust_belt", "rust2", "crust"])
def test_ascii_alias_needs_word_boundaries(text):
    cat = AliasCatalogue.build([ent("e1", "Rust")])
    assert cat.query_entities(text) == []


@pytest.mark.parametrize(
    "text", ["Rust", "I like rust.", "(rust)", "RUST, go", "rust-lang", "我用rust写代码"]
)
def test_ascii_alias_matches_at_boundaries(text):
    cat = AliasCatalogue.build([ent("e1", "Rust")])
    assert entity_ids(cat, text) == ["e1"]


def test_an_acronym_names_its_entity_only_where_written_in_capitals():
    """"IT", "US" and "WHO" case folded are "it", "us" and "who": every sentence would mention them."""
    cat = AliasCatalogue.build([ent("it", "IT department", ["IT"]), ent("who", "World Health Organization", ["WHO"]), ent("us", "United States", ["US"])])
    text = "I think it is broken, so ask IT about it. Who knows? Let us see what the WHO says about the US."
    assert [(e, text[start:end]) for e, _, start, end in cat.query_entities(text)] == [("it", "IT"), ("who", "WHO"), ("us", "US")]
    assert cat.query_entities("ｉｔ and Ｉt and it") == []  # full width, mixed case: not written in capitals
    assert entity_ids(cat, "ＩＴ signed off") == ["it"]  # full-width capitals are capitals
    [mention] = cat.link([LinkChunk("c1", None, "It works. The IT team agrees, and it ships.")]).mentions
    assert (mention.entity_id, mention.occurrences) == ("it", 1)
    # An alias written otherwise, by this entity or another, matches in any case, as every alias does.
    loose = AliasCatalogue.build([ent("aws", "Amazon Web Services", ["AWS", "aws"]), ent("nasa", "NASA"), ent("x", "X Corp", ["Nasa"])])
    assert entity_ids(loose, "we moved to aws; AWS bills monthly") == ["aws", "aws"]
    assert entity_ids(loose, "nasa launched it") == ["nasa"]


def test_cjk_alias_matches_as_substring():
    cat = AliasCatalogue.build([ent("bj", "北京")])
    assert cat.query_entities("我住在北京市") == [("bj", "北京", 3, 5)]


def test_single_cjk_character_is_not_too_short():
    cat = AliasCatalogue.build([ent("k", "京")])
    assert entity_ids(cat, "北京") == ["k"]


def test_longest_overlapping_surface_wins():
    cat = AliasCatalogue.build([ent("ny", "New York"), ent("nyc", "New York City"),
                                ent("york", "York")])
    assert entity_ids(cat, "I moved to New York City in May") == ["nyc"]
    assert entity_ids(cat, "I moved to New York in May") == ["ny"]
    assert entity_ids(cat, "York and new york") == ["york", "ny"]


def test_leftmost_wins_between_equal_length_overlaps():
    cat = AliasCatalogue.build([ent("a", "alpha beta"), ent("b", "beta gamma")])
    assert entity_ids(cat, "alpha beta gamma") == ["a"]


def test_boundary_failure_does_not_hide_a_valid_overlapping_match():
    # "ab cd" matches at offset 1 but fails the left boundary; "cd ef" is valid.
    cat = AliasCatalogue.build([ent("x", "ab cd"), ent("y", "cd ef")])
    assert entity_ids(cat, "xab cd ef") == ["y"]


def test_query_offsets_point_into_original_text():
    cat = AliasCatalogue.build([ent("m", "München"), ent("s", "Straße"), ent("f", "file")])
    text = "Die STRASSE in Mu\u0308nchen, ein ﬁle."
    hits = cat.query_entities(text)
    assert [h[0] for h in hits] == ["s", "m", "f"]
    assert [text[s:e] for _, _, s, e in hits] == ["STRASSE", "Mu\u0308nchen", "ﬁle"]


def test_match_ending_before_combining_mark_keeps_the_mark():
    cat = AliasCatalogue.build([ent("bj", "北京")])
    assert cat.query_entities("在北京\u0301呢") == [("bj", "北京", 1, 4)]


@pytest.mark.parametrize("name, text", [
    ("राम", "रामायण पढ़ी"),  # Ram inside Ramayana: the vowel sign after म continues the word
    ("सीता", "सीताराम आए"),  # a name ending in a vowel sign, inside a longer name
    ("கலா", "கலாவதி வந்தாள்"),  # Tamil
])
def test_an_indic_name_needs_word_boundaries_around_its_vowel_signs(name, text):
    """A combining mark was no word character: "राम" was found in "रामायण", and a name ending in a vowel sign
    had no right boundary at all."""
    cat = AliasCatalogue.build([ent("e", name)])
    assert cat.query_entities(text) == []
    assert entity_ids(cat, f"कल {name} आए") == ["e"] and entity_ids(cat, f"({name})") == ["e"]


def test_whitespace_in_text_matches_single_space_alias():
    cat = AliasCatalogue.build([ent("ny", "New   York")])
    assert entity_ids(cat, "new\nyork") == ["ny"]


def test_normalise_offsets_length_invariant():
    for text in ["", "ascii", "Straße", "ＡＢＣ", "e\u0301", "\u1100\u1161\u11a8", "İx"]:
        norm, offsets = normalise_with_offsets(text)
        assert offsets is None or len(offsets) == len(norm) + 1


# --------------------------------------------------------------- catalogue


def test_shared_alias_name_beats_alias():
    cat = AliasCatalogue.build(
        [ent("inc", "Apple Inc", ["apple"], pos=1), ent("fruit", "Apple", pos=9)]
    )
    assert cat.surfaces()["apple"] == "fruit"
    [amb] = cat.ambiguous
    assert (amb.surface, amb.winner, amb.losers) == ("apple", "fruit", ("inc",))
    [m] = cat.link([LinkChunk("c1", None, "an apple a day")]).mentions
    assert m.entity_id == "fruit"
    assert m.confidence == pytest.approx(CONFIDENCE["name"] - AMBIGUITY_PENALTY)


def test_shared_alias_lowest_created_position_then_lowest_id():
    cat = AliasCatalogue.build([
        ent("b", "Bee", ["shared"], pos=5),
        ent("a", "Ay", ["shared"], pos=7),
        ent("c", "Cee", ["shared"], pos=5),
    ])
    [amb] = cat.ambiguous
    assert (amb.winner, amb.losers) == ("b", ("c", "a"))


def test_rejected_surfaces():
    bad = ["tasks.json", ".github/workflows", "foo_bar()", "src\\main.c", "std::vec", "x",
           "42", "3.14", "README.md", ".env", "config.yaml", "my_module", "os.path.join",
           "--"]
    cat = AliasCatalogue.build([ent("e", "Good Name", bad + ["Node.js", "C++", "GPT-4"])])
    rejected = {r.surface for r in cat.rejected}
    assert rejected == set(bad)
    assert set(cat.surfaces()) == {"good name", "node.js", "c++", "gpt-4"}
    assert cat.query_entities("edit tasks.json now") == []
    assert entity_ids(cat, "written in C++ and Node.js") == ["e", "e"]


def test_min_alias_length_applies_to_ascii():
    cat = AliasCatalogue.build([ent("e", "Go", ["R"])], min_alias_length=3)
    assert len(cat) == 0
    assert {r.reason for r in cat.rejected} == {"too short"}


def test_duplicate_entity_ids_rejected():
    with pytest.raises(ValueError):
        AliasCatalogue.build([ent("e", "One"), ent("e", "Two")])


def test_tags_only_with_include_tags():
    entities = [ent("e", "Postgres", ["pg"], tags=["database"])]
    chunk = [LinkChunk("c", None, "which database should we use")]
    assert AliasCatalogue.build(entities).link(chunk).mentions == ()
    [m] = AliasCatalogue.build(entities, include_tags=True).link(chunk).mentions
    assert (m.entity_id, m.alias, m.confidence) == ("e", "database", CONFIDENCE["tag"])


# ------------------------------------------------------------------- linking


def test_link_mentions_and_document_aggregation():
    cat = AliasCatalogue.build([ent("pg", "Postgres", ["pg"]), ent("rs", "Rust")])
    chunks = [
        LinkChunk("c2", "d1", "Rust talks to pg; Postgres is the store. pg again."),
        LinkChunk("c1", "d1", "postgres only"),
        LinkChunk("c3", None, "rust without a document"),
    ]
    result = cat.link(chunks)
    got = [(m.chunk_id, m.entity_id, m.alias, m.occurrences, m.confidence) for m in result.mentions]
    assert got == [
        ("c2", "rs", "rust", 1, 1.0),
        ("c2", "pg", "postgres", 3, 1.0),
        ("c1", "pg", "postgres", 1, 1.0),
        ("c3", "rs", "rust", 1, 1.0),
    ]
    docs = {(d.document_id, d.entity_id): d for d in result.document_mentions}
    assert set(docs) == {("d1", "pg"), ("d1", "rs")}
    assert docs["d1", "pg"].aliases == ("pg", "postgres")
    assert docs["d1", "pg"].occurrences == 4
    assert docs["d1", "pg"].evidence_chunk_ids == ("c1", "c2")
    assert result.chunk_count == 3


def test_alias_confidence_below_name():
    cat = AliasCatalogue.build([ent("pg", "Postgres", ["pg"])])
    [m] = cat.link([LinkChunk("c", None, "pg is fine")]).mentions
    assert (m.alias, m.confidence) == ("pg", CONFIDENCE["alias"])


def test_max_alias_document_frequency_drops_common_alias():
    cat = AliasCatalogue.build([ent("e", "Acme", ["the team"]), ent("r", "Rare Thing")],
                               max_alias_document_frequency=0.2)
    chunks = [LinkChunk(f"c{i:02d}", "d", "the team met" + (" about Acme" if i == 0 else ""))
              for i in range(10)]
    chunks.append(LinkChunk("c10", "d", "a Rare Thing"))
    result = cat.link(chunks)
    [dropped] = result.dropped_aliases
    assert (dropped.alias, dropped.entity_id, dropped.chunk_count) == ("the team", "e", 10)
    assert dropped.fraction == pytest.approx(10 / 11)
    got = [(m.chunk_id, m.alias) for m in result.mentions]
    assert got == [("c00", "acme"), ("c10", "rare thing")]
    assert entity_ids(cat, "the team") == ["e"]
    assert cat.query_entities("the team", exclude_aliases=["The Team"]) == []


def test_frequency_filter_skipped_for_small_runs():
    cat = AliasCatalogue.build([ent("e", "Acme")], max_alias_document_frequency=0.2)
    result = cat.link([LinkChunk("c", None, "Acme")])
    assert result.dropped_aliases == () and len(result.mentions) == 1


def test_determinism_independent_of_entity_order():
    entities = [ent(f"e{i}", f"Thing {i}", [f"alias{i % 7}", "shared one"], pos=i % 3)
                for i in range(40)]
    chunks = [LinkChunk(f"c{i}", f"d{i % 4}", " ".join(f"thing {j} alias{j % 7} shared one"
                                                         for j in range(i % 9, 40, 9)))
              for i in range(30)]
    first = AliasCatalogue.build(entities).link(chunks)
    shuffled = entities[:]
    random.Random(7).shuffle(shuffled)
    again = AliasCatalogue.build(shuffled).link(iter(chunks))
    assert first == again
    assert first.mentions and first.document_mentions


def test_empty_catalogue_and_empty_text():
    cat = AliasCatalogue.build([])
    assert cat.link([LinkChunk("c", None, "anything")]).mentions == ()
    assert AliasCatalogue.build([ent("e", "Thing")]).query_entities("") == []
