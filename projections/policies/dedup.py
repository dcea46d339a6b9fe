"""Dedup planning, free of I/O except reads: candidates for a pair judgement and the decisions.

- :func:`load_items` reads the activated memories at the head of the graph
  projection; :class:`Vectors` gives them unit vectors, from the vectors
  projection (``vec_docs``) when it holds the memory's current version, else
  from the configured embedder (cached by text).
- :func:`candidates` finds, for the memories of a batch, the activated memories
  of the same tenant, type and subject (never an erased one) with cosine >= ``min_cosine`` (the ``top_k``
  best), plus the lexical near-duplicates the vectors miss (the same
  normalised text: casefold, punctuation, whitespace, through a hash lookup)
  and the memories with the same ``key`` (a key is a slot with one value).
- :func:`decide` turns judged pairs into decisions. Redundant pairs are
  grouped (never across a pair judged contradictory) and each group is one
  ``merge`` of the newest-first members, with the judge's fused text or, by
  rule, the most informative text. A merge loses nothing: every two members
  of a group were judged redundant (or share their normalised text and key),
  and their tags, properties and other fields hold no two different values
  (nor more than 8 tags together), nor do they stand at two places of a
  conversation (two turns saying the same); otherwise they stay apart. A contradictory pair is a ``supersede`` of
  the older memory by the newer (by when each was stated, :class:`~mnemolog.projections.policies.stated.StatedTimes`), unless either is merged
  or already superseded in the same batch (the merged memory is judged again
  as a trigger of the next batch).
- :class:`RevertedDecisions` remembers the pairs of memories that a merge or
  supersede joined and a revert undid: such a pair is never judged again, and
  never ends up in one merge group, so a revert sticks even when the log is
  organized again from position 0; until the text or key of either is
  updated (new inputs, judged afresh).
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from bisect import insort
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Callable, Iterator, NamedTuple

import msgspec
import numpy as np

from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.model import MemoryContent, merge_union

from .. import text_caches
from ..vectors.embedders import embed_rows, get_embedder
from .conversation import conversation_place
from .judge import JudgedMemory, Verdict, clipped, merged_text, normalize_text

if TYPE_CHECKING:
    from ..service import MemoryService

ACTOR = "organizer"
DECISION_CHARS = 500  # what a decision records at most of its reason, and of why a judge fell back to another
_content = msgspec.json.Decoder(MemoryContent)


class Item(NamedTuple):
    id: str
    version: int
    valid_from: int
    updated_at: str
    content: MemoryContent

    def judged(self) -> JudgedMemory:
        c_ = self.content
        return JudgedMemory(self.id, c_.memory, c_.key, c_.memory_type, self.updated_at, c_.tags, c_.sources)


class Corpus:
    """The activated memories of one tenant and memory type at the head, with unit vectors.

    ``position`` is the last graph position it reflects; :meth:`refresh`
    brings it to the head by reloading only the memories whose rows changed.
    It does so in place, so that a refresh costs what changed, not the
    corpus's size (it runs before every batch while ingest goes on): a
    changed memory's row is retired (its vector zeroed, its text and key
    lookups dropped, its id unmapped), a memory still activated takes its
    new state in its own row, and a new memory is appended (its id, time
    ordered, sorts after every row's); the matrix grows by doubling. So the
    rows stay in id order, the order a fresh load gives, and candidates come
    in the same order; a refresh that would break it (a memory restored
    among older ones) reloads instead. Once a quarter of the rows are retired
    they are compacted away.
    """

    def __init__(
        self, tenant: str, memory_type: str, items: list[Item], vectors: np.ndarray, norms: list[str], position: int = 0, through: int = 0
    ):
        self.tenant, self.memory_type, self.position = tenant, memory_type, position
        self.through = through  # the graph projection's checkpoint when the corpus last read it (see refresh)
        self._set(items, vectors, norms)

    def _set(self, items: list[Item], vectors: np.ndarray, norms: list[str]) -> None:
        self.items, self.norms = list(items), list(norms)
        self._matrix = np.ascontiguousarray(vectors, dtype=np.float32)
        self.row = {item.id: i for i, item in enumerate(self.items)}
        self.retired: list[int] = []  # rows of memories no longer in the corpus
        self.by_norm: dict[str, list[int]] = defaultdict(list)
        self.by_key: dict[str, list[int]] = defaultdict(list)
        # Whose data each row is (a code per subject; 0: the tenant's) and the rows erased: kept row by row (see owners).
        self._codes: dict[str | None, int] = {None: 0}
        self._owner_codes = np.zeros(len(self._matrix), dtype=np.int64)
        self.erased: set[int] = set()
        for n, (item, norm) in enumerate(zip(self.items, self.norms)):
            self.by_norm[norm].append(n)
            if key := slot(item.content.key):
                self.by_key[key].append(n)
            self._own(n, item)

    def _own(self, n: int, item: Item) -> None:
        """Row ``n``'s owner code and erased mark, from ``item``."""
        self._owner_codes[n] = self._codes.setdefault(item.content.subject, len(self._codes))
        if item.content.erased:
            self.erased.add(n)
        else:
            self.erased.discard(n)

    @property
    def owners(self) -> np.ndarray | None:
        """Per row, a code for whose data the memory is; None when no memory named a subject (all the tenant's).

        Two memories of different subjects are facts about different people:
        never redundant nor contradictory, and a merge would seal one subject's
        text under the other's key. Kept as rows change, so that a batch costs
        what changed, not the corpus's size.
        """
        return self._owner_codes[: len(self.items)] if len(self._codes) > 1 else None

    @property
    def vectors(self) -> np.ndarray:
        """One unit vector per row (zero for a retired row)."""
        return self._matrix[: len(self.items)]

    @property
    def live(self) -> int:
        """The memories the corpus holds (rows not retired)."""
        return len(self.row)

    def _retire(self, memory_id: str) -> None:
        n = self.row.pop(memory_id, None)
        if n is None:
            return
        self._matrix[n] = 0.0
        self.by_norm[self.norms[n]].remove(n)
        if key := slot(self.items[n].content.key):
            self.by_key[key].remove(n)
        self.retired.append(n)

    def _replace(self, n: int, item: Item, vector: np.ndarray, norm: str) -> None:
        """A memory's new state in its own row (lookups kept in row order)."""
        self.by_norm[self.norms[n]].remove(n)
        insort(self.by_norm[norm], n)
        if key := slot(self.items[n].content.key):
            self.by_key[key].remove(n)
        if key := slot(item.content.key):
            insort(self.by_key[key], n)
        self.items[n], self.norms[n], self._matrix[n] = item, norm, vector
        self._own(n, item)

    def _append(self, fresh: list[Item], matrix: np.ndarray, norms: list[str]) -> None:
        first, need = len(self.items), len(self.items) + len(fresh)
        if need > len(self._matrix):
            grown = np.zeros((max(need, 2 * len(self._matrix), 64), matrix.shape[1]), dtype=np.float32)
            grown[:first] = self.vectors
            self._matrix = grown
            codes = np.zeros(len(grown), dtype=np.int64)
            codes[:first] = self._owner_codes[:first]
            self._owner_codes = codes
        self._matrix[first:need] = matrix
        for n, (item, norm) in enumerate(zip(fresh, norms), start=first):
            self.items.append(item)
            self.norms.append(norm)
            self.row[item.id] = n
            self.by_norm[norm].append(n)
            if key := slot(item.content.key):
                self.by_key[key].append(n)
            self._own(n, item)

    @classmethod
    def load(cls, conn, tenant: str, memory_type: str, vectors: "Vectors") -> "Corpus":
        conn.execute("BEGIN")
        try:
            mark = conn.execute(
                "SELECT max(max(valid_from), coalesce(max(valid_to), 0)) FROM graph_memories WHERE tenant = ? AND memory_type = ?", (tenant, memory_type)
            ).fetchone()[0]
            items = load_items(conn, tenant, memory_type)
            through = _graph_checkpoint(conn)
        finally:
            conn.execute("COMMIT")
        return cls(tenant, memory_type, items, vectors.matrix(tenant, items), [vectors.norm_key(i.content.memory) for i in items], mark or 0, through)

    def refresh(self, conn, vectors: "Vectors") -> bool:
        """Catch up with the graph projection; False when a full reload is needed instead.

        A forget erases its memories' rows in place (their versions and times
        stay), so the changed rows do not show it: a ``SubjectForgotten`` of
        the tenant that the projection applied since the corpus last read it
        asks for a reload (the log is asked, between the two checkpoints).
        """
        conn.execute("BEGIN")
        try:
            through = _graph_checkpoint(conn)
            changed = conn.execute(
                "SELECT memory_id, valid_from, valid_to FROM graph_memories WHERE tenant = ? AND memory_type = ? AND (valid_from > ? OR valid_to > ?)",
                (self.tenant, self.memory_type, self.position, self.position),
            ).fetchall()
            ids = sorted({r[0] for r in changed})
            fresh = load_items(conn, self.tenant, self.memory_type, ids=ids) if ids else []
            count = conn.execute(
                "SELECT count(*) FROM graph_memories WHERE tenant = ? AND memory_type = ? AND status = 'activated' AND valid_to IS NULL",
                (self.tenant, self.memory_type),
            ).fetchone()[0]
        finally:
            conn.execute("COMMIT")
        if through > self.through and vectors.service.store.read_all(self.through, 1, tenant=self.tenant, types=["SubjectForgotten"], until=through):
            return False
        if not ids:
            self.through = through
            return count == self.live
        if self.live - sum(1 for i in ids if i in self.row) + len(fresh) != count:
            return False
        kept = [k for k, item in enumerate(fresh) if item.id in self.row]
        new = [k for k, item in enumerate(fresh) if item.id not in self.row]
        if new and self.items and fresh[new[0]].id <= self.items[-1].id:
            return False  # a memory back among older ones (``fresh`` is in id order): a reload keeps the rows in id order
        matrix = vectors.matrix(self.tenant, fresh)
        norms = [vectors.norm_key(i.content.memory) for i in fresh]
        staying = {item.id for item in fresh}
        for memory_id in ids:
            if memory_id not in staying:
                self._retire(memory_id)
        for k in kept:
            self._replace(self.row[fresh[k].id], fresh[k], matrix[k], norms[k])
        self._append([fresh[k] for k in new], matrix[new], [norms[k] for k in new])
        if len(self.retired) > max(64, len(self.items) // 4):
            keep = sorted(self.row.values())
            self._set([self.items[n] for n in keep], self.vectors[keep], [self.norms[n] for n in keep])
        self.position = max(self.position, *(r[1] for r in changed), *(r[2] or 0 for r in changed))
        self.through = through
        return True


_NO_ROWS = np.empty(0, dtype=np.int64)


def _graph_checkpoint(conn) -> int:
    """The graph projection's checkpoint (0 before its first batch)."""
    row = conn.execute("SELECT position FROM checkpoints WHERE name = 'graph'").fetchone()
    return row[0] if row else 0


class CorpusCache:
    """Corpora kept between batches and passes (a few, most recently used)."""

    def __init__(self, vectors: "Vectors", size: int = 8):
        self.vectors, self.size = vectors, size
        self.entries: dict[tuple[str, str], Corpus] = {}
        self._lock = threading.Lock()
        text_caches.register(self)

    def drop_text(self) -> None:
        with self._lock:
            self.entries.clear()

    def get(self, conn, tenant: str, memory_type: str) -> Corpus:
        with self._lock:
            key = (tenant, memory_type)
            corpus = self.entries.pop(key, None)
            if corpus is None or not corpus.refresh(conn, self.vectors):
                corpus = Corpus.load(conn, tenant, memory_type, self.vectors)
            self.entries[key] = corpus
            while len(self.entries) > self.size:
                self.entries.pop(next(iter(self.entries)))
            return corpus


def slot(key: str | None) -> str:
    """A key as a slot: casefolded, whitespace collapsed ('' for none)."""
    return " ".join(key.casefold().split()) if key else ""


class Vectors:
    """Unit vectors for memories: ``vec_docs`` rows of the current version, else the embedder."""

    def __init__(self, service: MemoryService, embedder_name: str, cache_limit: int = 200_000):
        self.service = service
        self.embedder = get_embedder(embedder_name)
        self.cache: dict[str, np.ndarray] = {}
        self.norms: dict[str, str] = {}
        self.cache_limit = cache_limit
        self._lock = threading.Lock()
        text_caches.register(self)

    def drop_text(self) -> None:
        with self._lock:
            self.cache, self.norms = {}, {}

    def _from_projection(self, conn, tenant: str, items: list[Item]) -> dict[str, np.ndarray]:
        cols = {r[1] for r in conn.execute("PRAGMA table_info(vec_docs)")}
        if not {"tenant", "memory_id", "version", "valid_to", "vector"} <= cols:
            return {}
        wanted = {i.id: i.version for i in items}
        found: dict[str, np.ndarray] = {}
        ids = list(wanted)
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            rows = conn.execute(
                f"SELECT memory_id, version, vector FROM vec_docs WHERE tenant = ? AND valid_to IS NULL"
                f" AND memory_id IN ({','.join('?' * len(chunk))})",
                (tenant, *chunk),
            )
            for memory_id, version, blob in rows:
                vec = np.frombuffer(blob, dtype=np.float32) if blob else None
                if vec is not None and version == wanted[memory_id] and vec.shape[0] == self.embedder.dim:
                    found[memory_id] = vec
        return found

    def matrix(self, tenant: str, items: list[Item]) -> np.ndarray:
        out = np.zeros((len(items), self.embedder.dim), dtype=np.float32)
        if not items:
            return out
        try:
            projected = self._from_projection(self.service.read_conn(), tenant, items)
        except sqlite3.Error:  # no readable vectors projection here: embed
            projected = {}
        with self._lock:
            if len(self.cache) > self.cache_limit:
                self.cache.clear()
            missing = sorted({i.content.memory for i in items if i.id not in projected and i.content.memory not in self.cache})
            if missing:  # a text the embedder raises on (the projection left it without a vector) gets a zero one
                for text, vec in zip(missing, embed_rows(self.embedder, missing)[0]):
                    self.cache[text] = vec
            for n, item in enumerate(items):
                out[n] = projected.get(item.id, self.cache.get(item.content.memory))
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def norm_key(self, text: str) -> str:
        key = self.norms.get(text)
        if key is None:
            if len(self.norms) > self.cache_limit:
                self.norms.clear()
            key = self.norms[text] = hashlib.blake2b(normalize_text(text).encode(), digest_size=12).hexdigest()
        return key


def load_items(conn, tenant: str, memory_type: str | None = None, ids: list[str] | None = None) -> list[Item]:
    """Activated memories at the head (of one type, or the given ids), ordered by id."""
    sql = "SELECT memory_id, version, valid_from, updated_at, content FROM graph_memories WHERE tenant = ? AND status = 'activated' AND valid_to IS NULL"
    params: list[Any] = [tenant]
    if memory_type is not None:
        sql += " AND memory_type = ?"
        params.append(memory_type)
    if ids is not None:
        out: list[Item] = []
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            q = sql + f" AND memory_id IN ({','.join('?' * len(chunk))})"
            out += [Item(r[0], r[1], r[2], r[3], _content.decode(r[4])) for r in conn.execute(q, (*params, *chunk))]
        return sorted(out)
    rows = conn.execute(sql + " ORDER BY memory_id", params)
    return [Item(r[0], r[1], r[2], r[3], _content.decode(r[4])) for r in rows]



class RevertedDecisions:
    """Pairs of memories once merged or superseded together by a correlation that was reverted.

    Read from the log (never from a projection), incrementally: :meth:`refresh`
    reads the merges, supersedes, reverts and updates appended since the last
    call. A pair is held apart while its inputs stay as the revert left them:
    an update of either memory's text or key after the revert lets the pair be
    judged again (the operator reverted a decision on other texts).
    """

    TYPES = ("MemoriesMerged", "MemorySuperseded", "CorrelationReverted", "MemoryUpdated")

    def __init__(self, store):
        self.store = store
        self.position = 0
        self._by_correlation: dict[tuple[str, str], list[tuple[str, ...]]] = defaultdict(list)
        self.pairs: set[tuple[str, str, str]] = set()  # (tenant, lower id, higher id)
        self._partners: dict[tuple[str, str], set[str]] = defaultdict(set)  # (tenant, id) -> the ids it is held apart from
        self._lock = threading.Lock()

    def refresh(self) -> "RevertedDecisions":
        with self._lock:
            head = self.store.last_position()
            if head > self.position:
                for batch in self.store.iter_all(after=self.position, until=head, types=self.TYPES):
                    for r in batch:
                        self._take(r)
                self.position = head  # the next refresh reads only what came after
        return self

    def _take(self, r) -> None:
        e = r.event
        if isinstance(e, c.CorrelationReverted):
            for ids in self._by_correlation.pop((r.tenant, e.correlation_id), ()):
                for n, a in enumerate(ids):
                    for b in ids[n + 1 :]:
                        self.pairs.add((r.tenant, a, b))
                        self._partners[(r.tenant, a)].add(b)
                        self._partners[(r.tenant, b)].add(a)
            return
        if isinstance(e, c.MemoryUpdated):
            if {"memory", "key"} & set(e.changed):
                for other in self._partners.pop((r.tenant, e.memory_id), ()):
                    self.pairs.discard((r.tenant, *sorted((e.memory_id, other))))
                    self._partners[(r.tenant, other)].discard(e.memory_id)
            return
        ids = e.source_ids if isinstance(e, c.MemoriesMerged) else (e.memory_id, e.superseded_by)
        correlation = r.metadata.correlation_id
        if correlation:
            self._by_correlation[(r.tenant, correlation)].append(tuple(sorted(ids)))

    def apart(self, tenant: str, a: str, b: str) -> bool:
        """Whether a revert undid a decision that joined ``a`` and ``b``."""
        return (tenant, *sorted((a, b))) in self.pairs

    def separates(self, a: set[tuple[str, str]], b: set[tuple[str, str]]) -> bool:
        """Whether a revert holds some ``(tenant, id)`` of ``a`` apart from one of ``b`` (at a cost of the smaller group, not of their product)."""
        if not self.pairs:
            return False
        small, large = (a, b) if len(a) <= len(b) else (b, a)
        return any((t, other) in large for t, m in small for other in tuple(self._partners.get((t, m), ())))

    def any_apart(self, tenant: str, ids) -> str | None:
        """The first reverted pair among ``ids``, described, or None."""
        ordered = sorted(ids)
        for n, a in enumerate(ordered):
            for b in ordered[n + 1 :]:
                if (tenant, a, b) in self.pairs:
                    return f"{a} and {b} were decided together before and that was reverted"
        return None


class Pair(NamedTuple):
    tenant: str
    memory_type: str
    a: Item
    b: Item
    cosine: float
    position: int  # the triggering event
    event_id: str


class Planned(msgspec.Struct, kw_only=True):
    """One decision the organizer will append (or, in a dry run, would)."""

    action: str  # merge | supersede
    tenant: str
    memory_type: str
    memory_ids: list[str]  # merge: the group; supersede: [older, newer]
    versions: dict[str, int]
    texts: dict[str, str]
    text: str | None
    decision: c.Decision
    position: int
    causation_id: str
    idempotency_key: str

    def describe(self) -> dict[str, Any]:
        out = msgspec.to_builtins(self)
        out.pop("versions")
        return out


#: Similarities computed at once (a chunk of triggers against the whole corpus): about 64 MB of float32, whatever
#: the corpus's size (a million memories: 16 triggers a chunk, not 256 and a gigabyte).
SIMILARITIES_PER_CHUNK = 1 << 24


def candidates(
    corpus: Corpus, rows: list[tuple[int, Any]], min_cos: float, top_k: int, pace: Callable[[], None] | None = None
) -> Iterator[tuple[int, int, float, Any]]:
    """``(i, j, cosine, trigger)`` for each trigger row ``i`` of ``rows`` and each of its candidates ``j``.

    ``pace`` is called before each chunk of triggers (see :class:`~.pacing.Pacer`)."""
    X = corpus.vectors
    if not rows or corpus.live < 2:
        return
    owners, erased = corpus.owners, corpus.erased
    rows = [(i, r) for i, r in rows if i not in erased]
    blocked = np.zeros(len(corpus.items), dtype=bool)  # rows never a candidate, whatever the threshold
    blocked[list({*corpus.retired, *erased})] = True
    taken = np.zeros(len(corpus.items), dtype=bool)  # a trigger's own row and its vector candidates, marked while its extras are chosen
    step = max(1, min(256, SIMILARITIES_PER_CHUNK // max(1, len(corpus.items))))
    for start in range(0, len(rows), step):
        if pace is not None:
            pace()
        chunk = rows[start : start + step]
        idx = np.fromiter((i for i, _ in chunk), dtype=np.int64, count=len(chunk))
        sims = X[idx] @ X.T
        sims[np.arange(len(chunk)), idx] = -1.0
        sims[:, blocked] = -1.0
        if owners is not None:
            sims[owners[idx][:, None] != owners[None, :]] = -1.0  # another subject's memory: never a candidate either
        hit_rows, hit_cols = np.nonzero(sims >= min_cos)
        found_by_row = np.split(hit_cols, np.cumsum(np.bincount(hit_rows, minlength=len(chunk)))[:-1])
        for n, (i, r) in enumerate(chunk):
            s, found = sims[n], found_by_row[n]
            same_text, key = corpus.by_norm[corpus.norms[i]], slot(corpus.items[i].content.key)
            if not len(found) and len(same_text) < 2 and not key:
                continue
            if len(found) > top_k:
                found = found[np.argsort(-s[found], kind="stable")[:top_k]]
            # The same normalised text or key: kept whatever the cosine, the top_k of them by cosine then row. Done
            # on arrays: thousands of copies of one text cost each trigger a sort in C, not a Python loop over them.
            extra = _NO_ROWS
            if len(same_text) > 1 or key:  # others than the trigger itself
                extra = np.asarray(same_text, dtype=np.int64)  # in row order, each row once
                if key:
                    extra = np.union1d(extra, np.asarray(corpus.by_key[key], dtype=np.int64))
                taken[found] = taken[i] = True
                keep = ~(blocked[extra] | taken[extra])
                taken[found] = taken[i] = False
                if owners is not None:
                    keep &= owners[extra] == owners[i]
                extra = extra[keep]
                if len(extra) > top_k:
                    extra = extra[np.lexsort((extra, -s[extra]))[:top_k]]
            for j in sorted({*found.tolist(), *extra.tolist()}):
                yield i, j, float(max(s[j], 0.0)), r


def decide(
    pairs: list[Pair], verdicts: list[Verdict], reverted: RevertedDecisions | None = None, stated: Callable[[Item], str] | None = None
) -> list[Planned]:
    """The decisions for judged pairs, ordered by triggering position.

    A pair that ``reverted`` holds apart never ends up in one merge group.
    Of a contradictory pair, the memory stated last (``stated``, see
    :class:`~mnemolog.projections.policies.stated.StatedTimes`; by default its ``updated_at``) supersedes the other.
    """
    when = stated or (lambda it: it.updated_at)
    parent: dict[tuple[str, str], tuple[str, str]] = {}
    members: dict[tuple[str, str], set] = {}

    def find(x):
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    against: dict[tuple[str, str], set] = defaultdict(set)
    for p, v in zip(pairs, verdicts):
        if v.label == "contradictory":
            against[(p.tenant, p.a.id)].add((p.tenant, p.b.id))
            against[(p.tenant, p.b.id)].add((p.tenant, p.a.id))
    redundant = sorted(((p, v) for p, v in zip(pairs, verdicts) if v.label == "redundant"), key=lambda pv: (-pv[0].cosine, pv[0].position, pv[0].a.id, pv[0].b.id))
    items = {(p.tenant, it.id): it for p in pairs for it in (p.a, p.b)}
    # What one judgement on a memory stands for: the memories of its tenant with the same normalised text and key.
    kind_of = {x: (x[0], normalize_text(it.content.memory), slot(it.content.key)) for x, it in items.items()}
    kind = kind_of.__getitem__
    alike = {frozenset((kind((p.tenant, p.a.id)), kind((p.tenant, p.b.id)))) for p, _ in redundant}  # kinds judged redundant
    kinds: dict[tuple[str, str], set] = {}  # a group's kinds, by its root
    unions: dict[tuple[str, str], MemoryContent] = {}  # a group's contents joined (see merge_union), by its root
    places: dict[tuple[str, str], frozenset] = {}  # a group's places in conversations (see conversation_place), by its root

    def place(x: tuple[str, str]) -> frozenset:
        at = conversation_place(items[x].content)
        return frozenset() if at is None else frozenset([at])
    used: dict[tuple[str, str], list[tuple[Pair, Verdict]]] = defaultdict(list)
    for p, v in redundant:
        ra, rb = find((p.tenant, p.a.id)), find((p.tenant, p.b.id))
        if ra == rb:
            used[ra].append((p, v))
            continue
        ga, gb = members.get(ra, {ra}), members.get(rb, {rb})
        small, large = (ga, gb) if len(ga) <= len(gb) else (gb, ga)  # "against" is symmetric: the smaller group's side says it
        if against and any(against[x] & large for x in small if x in against):
            continue
        if reverted is not None and reverted.separates(ga, gb):
            continue
        # One text is kept: every two kinds of a group were judged redundant, or a member's other details
        # ("... and two cats" beside "... and works at Acme", each redundant with "...") would be lost.
        ka, kb = kinds.get(ra) or {kind(ra)}, kinds.get(rb) or {kind(rb)}
        if any(x != y and frozenset((x, y)) not in alike for x in ka for y in kb):
            continue
        joined, lost = merge_union(unions.get(ra) or items[ra].content, unions.get(rb) or items[rb].content)
        if lost:  # a merge keeps every value of its sources (tags, properties, background, confidence, ...)
            continue
        pa, pb = places.get(ra, place(ra)), places.get(rb, place(rb))
        if len(pa | pb) > 1:  # two turns of a conversation: the merged memory would stand at one place, the other's lost
            continue
        parent[rb] = ra
        members[ra] = ga | gb
        members.pop(rb, None)
        kinds[ra], unions[ra], places[ra] = ka | kb, joined, pa | pb
        kinds.pop(rb, None), unions.pop(rb, None), places.pop(rb, None)
        used[ra] += used.pop(rb, []) + [(p, v)]
    planned: list[Planned] = []
    merged: set = set()
    for root, group in members.items():
        planned.append(_merge_plan(used[root]))
        merged |= group
    archived: set = set()
    contradictions = [(p, v) for p, v in zip(pairs, verdicts) if v.label == "contradictory"]
    ordered = []
    for p, v in contradictions:
        older, newer = sorted((p.a, p.b), key=lambda it: (when(it), it.valid_from, it.id))
        ordered.append((older, newer, p, v))
    for older, newer, p, v in sorted(ordered, key=lambda t: (when(t[0]), t[0].valid_from, when(t[1]), t[1].valid_from)):
        keys = {(p.tenant, older.id), (p.tenant, newer.id)}
        if keys & merged or keys & archived:
            continue
        archived.add((p.tenant, older.id))
        planned.append(_plan("supersede", p, [older, newer], None, _decision([v], p.cosine)))
    return sorted(planned, key=lambda x: (x.position, x.action, x.memory_ids))


def _merge_plan(used: list[tuple[Pair, Verdict]]) -> Planned:
    best_pair, best = max(used, key=lambda pv: pv[0].cosine)
    items = {it.id: it for p, _ in used for it in (p.a, p.b)}
    ordered = sorted(items.values(), key=lambda it: (it.updated_at, it.valid_from, it.id), reverse=True)  # newest first
    text = best.fused_text or merged_text(best_pair.a.judged(), best_pair.b.judged())
    for it in ordered:
        if it.id not in (best_pair.a.id, best_pair.b.id):
            text = merged_text(text, it.content.memory)
    first = min(used, key=lambda pv: pv[0].position)[0]
    return _plan("merge", first, ordered, text, _decision([v for _, v in used], best_pair.cosine))


def _plan(action: str, trigger: Pair, items: list[Item], text: str | None, decision: c.Decision) -> Planned:
    ids = [it.id for it in items]
    raw = f"{ACTOR}|{trigger.position}|{action}|{','.join(sorted(ids))}"
    return Planned(
        action=action,
        tenant=trigger.tenant,
        memory_type=trigger.memory_type,
        memory_ids=ids,
        versions={it.id: it.version for it in items},
        texts={it.id: it.content.memory for it in items},
        text=text,
        decision=decision,
        position=trigger.position,
        causation_id=trigger.event_id,
        idempotency_key=hashlib.sha256(raw.encode()).hexdigest()[:40],
    )


def _decision(verdicts: list[Verdict], similarity: float) -> c.Decision:
    """One decision from the verdicts on its pairs. When judges differ (an LLM's verdicts, and the rule judge's
    where the LLM failed), the decision names them all and each reason says whose it is."""
    judges = list(dict.fromkeys(v.judge for v in verdicts))
    if len(judges) > 1:
        reasons = list(dict.fromkeys(f"{v.judge}: {v.reason}" for v in verdicts))
    else:
        reasons = list(dict.fromkeys(v.reason for v in verdicts))
    fallbacks = [v.fallback for v in verdicts if v.fallback]
    return c.Decision(
        judge="+".join(judges),
        judge_version="+".join(dict.fromkeys(v.judge_version for v in verdicts)),
        similarity=round(float(similarity), 4),
        reason=clipped("; ".join(reasons), DECISION_CHARS),
        fallback=clipped(fallbacks[0], DECISION_CHARS) if fallbacks else None,  # an endpoint's answer quoted in it may be of any length
    )
