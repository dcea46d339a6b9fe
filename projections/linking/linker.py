"""Deterministic, model-free entity linking.

Known entities are found in free text by their surface forms: names, aliases
and (optionally) tags. Nothing is learned, so the same entities and chunks
always give the same mentions in the same order and projections built from
them rebuild bit-for-bit from the event log.

Normalisation
    Surfaces and text both go through :func:`normalise`: NFKC, casefold, NFKC
    again, and each whitespace character becomes one space. Surfaces also get
    whitespace runs collapsed, so alias ``"New  York"`` matches ``"new york"``
    and ``"new\\nyork"`` in text, but not ``"new  york"`` (two spaces).

Matching
    One ``ahocorasick_rs`` automaton holds every surface; each chunk is scanned
    once, with overlapping matches, which are then filtered by word boundaries
    and resolved: where matches overlap the longest surface wins, then the
    leftmost. A surface starting with a word character needs a non-word
    character (or the text start) before it; one ending with a word character
    needs a non-word character (or the text end) after it. Word characters are
    letters, digits, ``_`` and combining marks of scripts written with spaces; ideographs, kana,
    hangul and Thai are not. So ``"rust"`` matches neither ``"trust"`` nor
    ``"rusty"``, ``"北京"`` matches inside ``"我住在北京市"`` and ``"rust"`` matches
    in ``"我用rust写代码"``.

Ambiguity rule (one surface claimed by several entities)
    1. the entity whose *name* it is beats one whose alias it is, which beats
       one whose tag it is;
    2. then the lowest ``created_position`` (created first);
    3. then the lowest ``id`` (plain string order).
    The winner takes every match of the surface; losers are listed in
    :attr:`AliasCatalogue.ambiguous`; confidence drops by :data:`AMBIGUITY_PENALTY`.

Offsets
    :meth:`AliasCatalogue.query_entities` returns offsets into the *original*
    text: normalisation runs per segment (a starter plus its combining marks),
    so every normalised character maps back to the segment it came from.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable

import ahocorasick_rs
import msgspec

from mnemolog.eventstore.catalogue_graph import fold_text

from .. import text_caches

__all__ = [
    "AMBIGUITY_PENALTY", "CONFIDENCE", "AliasCatalogue", "AmbiguousAlias", "DocumentMention",
    "DroppedAlias", "LinkChunk", "LinkEntity", "LinkResult", "Mention", "RejectedSurface",
    "normalise", "normalise_with_offsets",
]

#: Mention confidence by the kind of surface that matched.
CONFIDENCE: dict[str, float] = {"name": 1.0, "alias": 0.9, "tag": 0.7}
#: Subtracted from the confidence when the surface is shared with other entities.
AMBIGUITY_PENALTY = 0.05
_KINDS = ("name", "alias", "tag")  # index = precedence in the ambiguity rule

# Extensions that make a surface look like a file name. "js" is deliberately
# absent: "Node.js", "Vue.js" and friends are common product names.
_FILE_EXTENSIONS = frozenset(
    "py pyi pyc ipynb json jsonl ndjson md markdown rst txt yml yaml toml ini cfg conf "
    "env lock log csv tsv xml html htm css scss ts tsx jsx mjs cjs sh bash zsh ps1 bat "
    "exe dll so dylib rs go java kt c h cc cpp hpp cs rb php sql db sqlite pdf doc docx "
    "xls xlsx ppt pptx png jpg jpeg gif svg webp zip tar gz tgz bz2 xz whl".split()
)
_FILE_LIKE = re.compile(r"[^\s.]\.([a-z0-9]{1,8})$")
_SNAKE_CASE = re.compile(r"^[a-z0-9]+(?:_[a-z0-9]+)+$")
_DOTTED_PATH = re.compile(r"^[a-z_][a-z0-9_]+(?:\.[a-z_][a-z0-9_]+){2,}$")
_NUMBER_LIKE = re.compile(r"^[\d\s.,:+\-/%]+$")
_WHITESPACE_RUN = re.compile(r"\s+")
_ASCII_SPACE = str.maketrans("\t\n\r\x0b\x0c\x1c\x1d\x1e\x1f", " " * 9)


# ---------------------------------------------------------------- normalisation


def _is_unspaced_script(ch: str) -> bool:
    """True for characters of scripts written without spaces between words."""
    o = ord(ch)
    return (
        0x2E80 <= o <= 0x9FFF  # CJK radicals, kana, CJK ideographs (+ ext. A)
        or 0xAC00 <= o <= 0xD7AF  # hangul syllables
        or 0xF900 <= o <= 0xFAFF  # CJK compatibility ideographs
        or 0xFF66 <= o <= 0xFF9F  # half-width katakana
        or 0x20000 <= o <= 0x3FFFF  # CJK extensions B and later
        or 0x0E00 <= o <= 0x0EFF  # Thai, Lao
    )


def _is_word_char(ch: str) -> bool:
    """A letter, digit, ``_`` or combining mark (an Indic vowel sign continues its word) of a script written with spaces."""
    return ch == "_" or ((ch.isalnum() or unicodedata.category(ch)[0] == "M") and not _is_unspaced_script(ch))


def _is_hangul_jamo(ch: str) -> bool:
    o = ord(ch)
    return 0x1100 <= o <= 0x11FF or 0xA960 <= o <= 0xA97F or 0xD7B0 <= o <= 0xD7FF


_fold = fold_text  # one segment at a time (see normalise_with_offsets)


# char -> (is combining mark, is hangul jamo, folded on its own). Bounded by the
# number of distinct code points seen; avoids re-normalising every character.
_CHAR_CACHE: dict[str, tuple[bool, bool, str]] = {}


def normalise_with_offsets(text: str) -> tuple[str, list[int] | None]:
    """Normalise ``text``; return it with a map from normalised to original offsets.

    The map has ``len(normalised) + 1`` entries; ``None`` means identity (ASCII
    input, the fast path). Each segment (a starter plus its combining marks;
    conjoining hangul jamo stay together) is normalised on its own, and every
    character it produces maps to the segment start, so ``"ß"`` -> ``"ss"`` maps
    both ``s`` to the ``ß``. An end offset inside a segment should be moved to
    the segment's end before mapping (see :meth:`AliasCatalogue.query_entities`).
    """
    if text.isascii():
        return text.lower().translate(_ASCII_SPACE), None
    cache = _CHAR_CACHE
    parts: list[str] = []
    offsets: list[int] = []
    bounds = []
    seg_jamo = False
    for i, ch in enumerate(text):
        info = cache.get(ch)
        if info is None:
            info = cache[ch] = (bool(unicodedata.combining(ch)), _is_hangul_jamo(ch), _fold(ch))
        if i and (info[0] or (info[1] and seg_jamo)):
            continue  # extends the current segment
        bounds.append(i)
        seg_jamo = info[1]
    bounds.append(len(text))
    for start, end in zip(bounds, bounds[1:]):
        folded = cache[text[start]][2] if end - start == 1 else _fold(text[start:end])
        parts.append(folded)
        offsets.extend([start] * len(folded))
    offsets.append(len(text))
    return "".join(parts), offsets


def normalise(text: str) -> str:
    """NFKC + casefold + whitespace-to-space; the same for surfaces and text."""
    return normalise_with_offsets(text)[0]


def _normalise_surface(raw: str) -> str:
    return _WHITESPACE_RUN.sub(" ", normalise(raw)).strip()


def _reject_reason(surface: str, min_length: int) -> str | None:
    """Why a normalised surface is unusable for linking, or ``None``."""
    if not surface:
        return "empty"
    if not any(c.isalnum() for c in surface):
        return "no letters or digits"
    if _NUMBER_LIKE.match(surface):
        return "number"
    if "/" in surface or "\\" in surface:
        return "path-like"
    if surface.startswith("."):
        return "leading dot"
    if "::" in surface or "()" in surface or "->" in surface:
        return "symbol-like"
    ext = _FILE_LIKE.search(surface)
    if ext and ext.group(1) in _FILE_EXTENSIONS:
        return "file-like"
    if _SNAKE_CASE.match(surface) or _DOTTED_PATH.match(surface):
        return "symbol-like"
    # CJK words are often one or two characters; the length floor is for the rest.
    if len(surface) < min_length and not all(_is_unspaced_script(c) for c in surface):
        return "too short"
    return None


@text_caches.lru_cache(maxsize=1 << 16)
def _surface_verdict(raw: str, min_length: int) -> tuple[str, str | None]:
    """A raw surface normalised, and why it is unusable (or None).

    Cached: a catalogue is rebuilt whole after every entity change, and
    most of its surfaces are the same as last time.
    """
    surface = _normalise_surface(raw)
    return surface, _reject_reason(surface, min_length)


# ------------------------------------------------------------------------- data


class LinkEntity(msgspec.Struct, frozen=True):
    id: str
    name: str
    aliases: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    created_position: int = 0


class LinkChunk(msgspec.Struct, frozen=True):
    id: str
    document_id: str | None
    text: str


class Mention(msgspec.Struct, frozen=True):
    """One entity in one chunk.

    ``alias`` is the entity's best surface in the chunk (highest confidence,
    then most occurrences, then smallest text); ``occurrences`` counts all of
    the entity's surfaces; ``confidence`` is the best surface's.
    """

    chunk_id: str
    document_id: str | None
    entity_id: str
    alias: str
    occurrences: int
    confidence: float


class DocumentMention(msgspec.Struct, frozen=True):
    document_id: str
    entity_id: str
    aliases: tuple[str, ...]
    occurrences: int
    evidence_chunk_ids: tuple[str, ...]


class RejectedSurface(msgspec.Struct, frozen=True):
    entity_id: str
    surface: str  # as given, before normalisation
    kind: str  # "name" | "alias" | "tag"
    reason: str


class AmbiguousAlias(msgspec.Struct, frozen=True):
    surface: str
    winner: str
    losers: tuple[str, ...]  # in rule order


class DroppedAlias(msgspec.Struct, frozen=True):
    """A surface left out of one link run because too many chunks contain it."""

    alias: str
    entity_id: str
    chunk_count: int
    fraction: float


class LinkResult(msgspec.Struct, frozen=True):
    mentions: tuple[Mention, ...]
    document_mentions: tuple[DocumentMention, ...]
    dropped_aliases: tuple[DroppedAlias, ...]
    ambiguous_aliases: tuple[AmbiguousAlias, ...]
    chunk_count: int


class _Surface(msgspec.Struct, frozen=True):
    text: str
    entity_id: str
    kind: str
    confidence: float
    check_left: bool
    check_right: bool
    exact: str | None = None  # an acronym ("IT", "US", "WHO"): text matches only where it is written so


#: An alias written in capitals, 2 to 5 of them ("IT", "US", "WHO", "NASA"): case folded it is often a common word
#: ("it", "us", "who"), so it names its entity only where a text writes it in capitals too.
_ACRONYM = re.compile(r"[A-Z][A-Z0-9]{1,4}")


def _written_as(span: str, acronym: str) -> bool:
    """Whether a text's ``span`` writes ``acronym`` in capitals (full-width ones too: NFKC, not case folded)."""
    return span == acronym or (not span.isascii() and unicodedata.normalize("NFKC", span) == acronym)


_Match = tuple[int, int, int]  # (surface index, start, end) in normalised text


# -------------------------------------------------------------------- catalogue


class AliasCatalogue:
    """Surface forms of a set of entities compiled into one automaton.

    Create with :meth:`build`. Immutable afterwards; safe to share between threads.
    """

    def __init__(
        self,
        surfaces: list[_Surface],
        rejected: list[RejectedSurface],
        ambiguous: list[AmbiguousAlias],
        max_df: float | None,
        min_chunks: int,
    ) -> None:
        self._surfaces = tuple(surfaces)
        self._index = {s.text: i for i, s in enumerate(surfaces)}
        self.rejected: tuple[RejectedSurface, ...] = tuple(rejected)
        self.ambiguous: tuple[AmbiguousAlias, ...] = tuple(ambiguous)
        self.max_alias_document_frequency = max_df
        self.min_chunks_for_frequency = min_chunks
        self._automaton = None
        if surfaces:
            self._automaton = ahocorasick_rs.AhoCorasick(
                [s.text for s in surfaces], matchkind=ahocorasick_rs.MatchKind.Standard
            )

    @classmethod
    def build(
        cls,
        entities: Iterable[LinkEntity],
        *,
        include_tags: bool = False,
        max_alias_document_frequency: float | None = None,
        min_alias_length: int = 2,
        min_chunks_for_frequency: int = 10,
    ) -> AliasCatalogue:
        """Collect, filter and disambiguate the surfaces of ``entities``.

        ``max_alias_document_frequency`` (a fraction in ``(0, 1]``) makes each
        :meth:`link` call drop surfaces found in more than that share of its
        chunks. It only applies to calls with at least
        ``min_chunks_for_frequency`` chunks: in a handful, everything is frequent.
        """
        max_df = max_alias_document_frequency
        if max_df is not None and not 0 < max_df <= 1:
            raise ValueError("max_alias_document_frequency must be in (0, 1]")
        seen: set[str] = set()
        # surface -> entity id -> (kind precedence, created_position), best kept
        claims: dict[str, dict[str, tuple[int, int]]] = defaultdict(dict)
        written: dict[str, set[str]] = defaultdict(set)  # surface -> its raw forms, None for any that is no acronym
        rejected: list[RejectedSurface] = []
        for entity in entities:
            if entity.id in seen:
                raise ValueError(f"duplicate entity id {entity.id!r}")
            seen.add(entity.id)
            sources = [(0, entity.name)] + [(1, a) for a in entity.aliases]
            if include_tags:
                sources += [(2, t) for t in entity.tags]
            for kind, raw in sources:
                surface, reason = _surface_verdict(raw, min_alias_length)
                if reason is not None:
                    rejected.append(RejectedSurface(entity.id, raw, _KINDS[kind], reason))
                    continue
                rank = (kind, entity.created_position)
                if rank < claims[surface].get(entity.id, (9, 0)):
                    claims[surface][entity.id] = rank
                raw = raw.strip()
                written[surface].add(raw if _ACRONYM.fullmatch(raw) else None)

        surfaces: list[_Surface] = []
        ambiguous: list[AmbiguousAlias] = []
        for surface in sorted(claims):
            ranked = sorted(claims[surface].items(), key=lambda kv: (kv[1], kv[0]))
            winner, (kind, _) = ranked[0]
            confidence = CONFIDENCE[_KINDS[kind]]
            if len(ranked) > 1:
                ambiguous.append(AmbiguousAlias(surface, winner, tuple(e for e, _ in ranked[1:])))
                confidence = round(confidence - AMBIGUITY_PENALTY, 6)
            left, right = _is_word_char(surface[0]), _is_word_char(surface[-1])
            forms = written[surface]
            exact = next(iter(forms)) if len(forms) == 1 else None  # every claim the same acronym
            surfaces.append(_Surface(surface, winner, _KINDS[kind], confidence, left, right, exact))
        rejected.sort(key=lambda r: (r.entity_id, r.kind, r.surface))
        return cls(surfaces, rejected, ambiguous, max_df, min_chunks_for_frequency)

    def __len__(self) -> int:
        return len(self._surfaces)

    def surfaces(self) -> dict[str, str]:
        """Normalised surface -> winning entity id."""
        return {s.text: s.entity_id for s in self._surfaces}

    # ---------------------------------------------------------------- matching

    def _candidates(self, text: str) -> tuple[list[_Match], str, list[int] | None]:
        """All boundary-valid matches in ``text`` normalised, overlaps included (an acronym only where ``text``
        writes it so); and the normalised text with its offsets into ``text`` (see :func:`normalise_with_offsets`)."""
        norm, offsets = normalise_with_offsets(text)
        if self._automaton is None or not norm:
            return [], norm, offsets
        out = []
        last, surfaces = len(norm), self._surfaces
        for pid, start, end in self._automaton.find_matches_as_indexes(norm, overlapping=True):
            s = surfaces[pid]
            if s.check_left and start > 0 and _is_word_char(norm[start - 1]):
                continue
            if s.check_right and end < last and _is_word_char(norm[end]):
                continue
            if s.exact is not None and not _written_as(text[start:end] if offsets is None else text[offsets[start] : offsets[end]], s.exact):
                continue
            out.append((pid, start, end))
        return out, norm, offsets

    @staticmethod
    def _resolve(candidates: list[_Match], excluded: set[int]) -> list[_Match]:
        """Non-overlapping matches, longest first then leftmost; returned by start."""
        pool = [c for c in candidates if c[0] not in excluded] if excluded else list(candidates)
        if len(pool) <= 1:
            return pool
        pool.sort(key=lambda c: (c[1] - c[2], c[1], c[0]))
        # ``taken`` stays sorted and disjoint, so only the two neighbours matter.
        taken: list[_Match] = []
        starts: list[int] = []
        for cand in pool:
            i = bisect_left(starts, cand[1])
            if (i < len(taken) and taken[i][1] < cand[2]) or (i and taken[i - 1][2] > cand[1]):
                continue
            taken.insert(i, cand)
            starts.insert(i, cand[1])
        return taken

    def query_entities(
        self, text: str, *, exclude_aliases: Iterable[str] = ()
    ) -> list[tuple[str, str, int, int]]:
        """Entities named in ``text`` as ``(entity_id, alias, start, end)``, in text order.

        ``start``/``end`` index the original ``text``; ``alias`` is the
        normalised surface. An entity named twice appears twice. Pass the
        aliases a corpus link run dropped as ``exclude_aliases`` to seed
        queries consistently with it.
        """
        candidates, norm, offsets = self._candidates(text)
        excluded = {self._index.get(_normalise_surface(a), -1) for a in exclude_aliases}
        out = []
        for pid, start, end in self._resolve(candidates, excluded):
            if offsets is not None:
                # A match may end inside a segment (e.g. before a combining mark
                # on its last character): widen it to the segment's end.
                while 0 < end < len(norm) and offsets[end] == offsets[end - 1]:
                    end += 1
                start, end = offsets[start], offsets[end]
            out.append((self._surfaces[pid].entity_id, self._surfaces[pid].text, start, end))
        return out

    def link(self, chunks: Iterable[LinkChunk]) -> LinkResult:
        """Find entity mentions in ``chunks``; see the module docstring for the rules.

        Mentions are ordered by chunk (input order), then by the entity's first
        match in the chunk. Document mentions cover chunks with a
        ``document_id``, ordered by (document_id, entity_id). The chunks are
        materialised: the frequency filter needs two passes.
        """
        chunk_list = list(chunks)
        per_chunk = [self._candidates(c.text)[0] for c in chunk_list]
        excluded, dropped = self._frequent_surfaces(per_chunk)
        surfaces = self._surfaces
        mentions: list[Mention] = []
        by_doc: dict[tuple[str, str], tuple[set[str], list[int], set[str]]] = {}
        for chunk, cands in zip(chunk_list, per_chunk):
            found: dict[str, dict[int, int]] = {}  # entity -> surface -> count, first-seen order
            for pid, _, _ in self._resolve(cands, excluded):
                counts = found.setdefault(surfaces[pid].entity_id, {})
                counts[pid] = counts.get(pid, 0) + 1
            for entity_id, counts in found.items():
                best = surfaces[min(
                    counts, key=lambda p: (-surfaces[p].confidence, -counts[p], surfaces[p].text)
                )]
                total = sum(counts.values())
                mentions.append(Mention(chunk.id, chunk.document_id, entity_id, best.text,
                                        total, best.confidence))
                if chunk.document_id is not None:
                    aliases, occ, evidence = by_doc.setdefault(
                        (chunk.document_id, entity_id), (set(), [0], set())
                    )
                    aliases.update(surfaces[p].text for p in counts)
                    occ[0] += total
                    evidence.add(chunk.id)
        document_mentions = tuple(
            DocumentMention(*key, tuple(sorted(by_doc[key][0])), by_doc[key][1][0],
                            tuple(sorted(by_doc[key][2])))
            for key in sorted(by_doc)
        )
        return LinkResult(tuple(mentions), document_mentions, dropped, self.ambiguous,
                          len(chunk_list))

    def _frequent_surfaces(self, per_chunk: list[list[_Match]]) -> tuple[set[int], tuple]:
        """Surfaces over the document-frequency limit and their report.

        Frequency counts boundary-valid matches before overlap resolution, so a
        surface inside a longer match still counts as present in that chunk.
        """
        limit, n = self.max_alias_document_frequency, len(per_chunk)
        if limit is None or n < max(1, self.min_chunks_for_frequency):
            return set(), ()
        freq: dict[int, int] = defaultdict(int)
        for cands in per_chunk:
            for pid in {c[0] for c in cands}:
                freq[pid] += 1
        over = sorted((self._surfaces[p].text, p) for p, k in freq.items() if k / n > limit)
        dropped = tuple(
            DroppedAlias(text, self._surfaces[p].entity_id, freq[p], round(freq[p] / n, 6))
            for text, p in over
        )
        return {p for _, p in over}, dropped
