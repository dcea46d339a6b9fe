"""The organizer's corpus, refreshed in place batch after batch, equals one loaded afresh."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.policies.dedup import Corpus, CorpusCache, Vectors, candidates
from mnemolog.projections.service import MemoryService

TYPE = "LongTermMemory"
TEXTS = ["Alice lives in Berlin", "alice lives in  berlin", "Bob plays chess", "Bob plays chess on Sundays", "the cat is called Miso", "tea at five"]

_op = st.one_of(
    st.tuples(
        st.just("add"),
        st.lists(st.tuples(st.sampled_from(TEXTS), st.sampled_from([None, "home", "pet"]), st.sampled_from([None, None, "u-1", "u-2"])), min_size=1, max_size=4),
    ),
    st.tuples(st.just("forget"), st.sampled_from(["u-1", "u-2"])),
    st.tuples(st.just("update"), st.integers(0, 30), st.sampled_from(TEXTS)),
    st.tuples(st.just("archive"), st.integers(0, 30)),
    st.tuples(st.just("merge"), st.integers(0, 30), st.integers(0, 30)),
    st.tuples(st.just("refresh")),
)


def _shape(corpus: Corpus) -> tuple:
    """A corpus by memory ids: its live items in row order, their vectors, the text and key lookups, which
    memories share an owner, and which are erased."""
    live = sorted(corpus.row.values())
    ids = [corpus.items[n].id for n in live]
    by_norm = sorted((k, [corpus.items[n].id for n in v]) for k, v in corpus.by_norm.items() if v)
    by_key = sorted((k, [corpus.items[n].id for n in v]) for k, v in corpus.by_key.items() if v)
    owners = corpus.owners
    groups: dict[int, list[str]] = {}
    for n in live:
        groups.setdefault(0 if owners is None else int(owners[n]), []).append(corpus.items[n].id)
    erased = sorted(corpus.items[n].id for n in live if n in corpus.erased)
    return ids, [corpus.items[n] for n in live], corpus.vectors[live].round(6).tolist(), by_norm, by_key, sorted(groups.values()), erased


def _found(corpus: Corpus) -> list:
    rows = [(n, corpus.items[n].id) for n in sorted(corpus.row.values())]
    return [(corpus.items[i].id, corpus.items[j].id, round(cos, 6)) for i, j, cos, _ in candidates(corpus, rows, 0.5, 3)]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=st.lists(_op, min_size=1, max_size=25))
def test_a_corpus_refreshed_in_place_equals_a_fresh_load(tmp_path_factory, ops):
    svc = MemoryService.open(tmp_path_factory.mktemp("corpus"), settings=Settings({}, env={}))
    try:
        ctx = CommandContext(tenant="t")
        vectors = Vectors(svc, "hashing")
        cache = CorpusCache(vectors)
        ids: list[str] = []

        def check():
            svc.sync()
            conn = svc.read_conn()
            kept = cache.get(conn, "t", TYPE)
            fresh = Corpus.load(conn, "t", TYPE, vectors)
            assert _shape(kept) == _shape(fresh)
            assert _found(kept) == _found(fresh)

        for op in ops:
            try:
                if op[0] == "add":
                    ids += svc.run(svc.memories.add, ctx, [MemoryContent(memory=t, key=k, subject=u) for t, k, u in op[1]]).memory_ids
                elif op[0] == "forget":
                    svc.forget(ctx, op[1], reason="test")
                elif op[0] == "update" and ids:
                    svc.run(svc.memories.update, ctx, ids[op[1] % len(ids)], {"memory": op[2]})
                elif op[0] == "archive" and ids:
                    svc.run(svc.memories.archive, ctx, ids[op[1] % len(ids)])
                elif op[0] == "merge" and len(ids) > 1 and ids[op[1] % len(ids)] != ids[op[2] % len(ids)]:
                    ids += svc.run(svc.memories.merge, ctx, [ids[op[1] % len(ids)], ids[op[2] % len(ids)]]).memory_ids
                elif op[0] == "refresh":
                    check()
            except Exception as exc:  # a refused command (archived, merged away) changes nothing
                if type(exc).__name__ not in {"Conflict", "ValidationError", "NotFound"}:
                    raise
        check()
    finally:
        svc.close()


def test_retired_rows_are_compacted_away(tmp_path):
    with MemoryService.open(tmp_path / "data", settings=Settings({}, env={})) as svc:
        ctx = CommandContext(tenant="t")
        vectors = Vectors(svc, "hashing")
        cache = CorpusCache(vectors)
        ids = svc.run(svc.memories.add, ctx, [MemoryContent(memory=f"note number {i}") for i in range(300)]).memory_ids
        corpus = cache.get(svc.read_conn(), "t", TYPE)
        for memory_id in ids[:100]:
            svc.run(svc.memories.archive, ctx, memory_id)
        assert cache.get(svc.read_conn(), "t", TYPE) is corpus and len(corpus.items) == 300 - 100 and not corpus.retired
        assert _shape(corpus) == _shape(Corpus.load(svc.read_conn(), "t", TYPE, vectors))
