"""A segment's compact vocabulary maps terms to ids exactly as the dict it replaces."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mnemolog.projections.fts.postings_vocabulary import Vocabulary

_terms = st.dictionaries(st.text(max_size=12), st.integers(0, 2**40), max_size=60)


@given(terms=_terms, probes=st.lists(st.text(max_size=12), max_size=20))
def test_a_vocabulary_answers_as_its_dict(terms, probes):
    vocabulary = Vocabulary.of(terms)
    assert len(vocabulary) == len(terms)
    assert dict(vocabulary.items()) == terms
    assert sorted(vocabulary) == sorted(terms)
    for term in [*terms, *probes]:
        assert vocabulary.get(term) == terms.get(term)
        assert (term in vocabulary) == (term in terms)


def test_lone_surrogates_and_prefixes_are_terms_of_their_own():
    terms = {"caf": 0, "café": 1, "cafe": 2, "\ud800": 3, "": 4}
    vocabulary = Vocabulary.of(terms)
    assert {t: vocabulary.get(t) for t in terms} == terms
    assert vocabulary.get("ca") is None and vocabulary.get("cafés") is None


def test_a_million_terms_take_a_small_part_of_a_dicts_memory():
    terms = {f"n{i}": i for i in range(1_000_000)}
    vocabulary = Vocabulary.of(terms)
    held = len(vocabulary.blob) + vocabulary.offsets.nbytes + vocabulary.ids.nbytes
    assert held < 20 * 2**20  # the dict and its strings: about 120 MB
    assert vocabulary.get("n999999") == 999_999 and vocabulary.get("n1000000") is None


def test_offsets_that_do_not_bound_the_blob_are_refused():
    with pytest.raises(ValueError):
        Vocabulary(b"abc", np.array([0, 2], np.int64), np.array([0], np.int32))
