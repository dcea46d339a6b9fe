"""The in-memory postings index answers exactly what the exact FTS5 statement answers (as of a position: over the rows indexed by then)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mnemolog.eventstore import EventStore
from mnemolog.projections.filters import SearchFilters
from mnemolog.projections.fts import projector as fts_module
from mnemolog.projections.fts import postings_scoring as scoring_module
from mnemolog.projections.fts.postings import PostingsIndex
from mnemolog.projections.fts.projector import FtsProjector, fts_search
from mnemolog.projections.runner import ProjectionRunner
from tests.projections.support import Log, exact_as_of, fts_log

WORDS = "coffee tea milk sugar bread jam honey lemon running runs ran water juice café".split() + ["\u0301"]  # an accent alone: an empty term

_op = st.one_of(
    st.tuples(st.just("add"), st.integers(0, 11), st.lists(st.sampled_from(WORDS), min_size=1, max_size=7), st.sampled_from(["t", "u"]),
              st.sampled_from([(), ("red",), ("blue", "red")]), st.sampled_from([None, "coffee", "jam"])),
    st.tuples(st.just("update"), st.integers(0, 11), st.lists(st.sampled_from(WORDS), min_size=1, max_size=7)),
    st.tuples(st.just("archive"), st.integers(0, 11)),
    st.tuples(st.just("catch_up")),
    st.tuples(st.just("drop"), st.sampled_from(["t", "u"])),
)  # fmt: skip

_filters = st.sampled_from(
    [
        None,
        SearchFilters(status=None),
        SearchFilters(status=("archived",)),
        SearchFilters(tags=("red",)),
        SearchFilters(status=None, tags=("blue",)),
        SearchFilters(memory_types=("UserMemory",)),
    ]
)


def _write(log, op, live: dict[str, str], used: set[str]) -> int | None:
    """Write one generated operation (add, update, archive, drop) and return its position; None where it does not apply.

    ``live`` (memory id -> tenant, for memories not dropped) and ``used`` (every memory id written) follow the writes.
    """
    kind = op[0]
    if kind == "add":
        _, n, words, tenant, tags, key = op
        mid = f"m{n}-{len(used)}" if f"m{n}" in used else f"m{n}"
        used.add(mid)
        live[mid] = tenant
        memory_type = "UserMemory" if n % 3 == 0 else "OuterMemory"
        return log.add(mid, " ".join(words), tenant=tenant, tags=tags, key=key, memory_type=memory_type)
    if kind == "update" and f"m{op[1]}" in live:
        return log.update(f"m{op[1]}", " ".join(op[2]), tenant=live[f"m{op[1]}"])
    if kind == "archive" and f"m{op[1]}" in live:
        return log.archive(f"m{op[1]}", tenant=live[f"m{op[1]}"])
    if kind == "drop" and op[1] in live.values():
        for mid in [m for m, t in live.items() if t == op[1]]:
            del live[mid]
        return log.drop(op[1])
    return None


def _key(hits):
    return [(h.memory_id, h.row_id, h.version) for h in hits]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    ops=st.lists(_op, min_size=1, max_size=40),
    queries=st.lists(
        st.tuples(st.lists(st.sampled_from(WORDS + ["absent", "e-mail"]), min_size=1, max_size=4), st.integers(1, 12), _filters, st.booleans()),
        min_size=1,
        max_size=6,
    ),
)
def test_postings_equal_the_exact_statement_under_writes_filters_and_as_of(tmp_path_factory, ops, queries):
    live: dict[str, str] = {}  # memory id -> tenant, for memories not dropped
    used: set[str] = set()  # every stream written (a dropped memory's stream stays)
    positions = [0]
    with fts_log(tmp_path_factory.mktemp("postings")) as (runner, log):
        def check():
            runner.catch_up()
            for words, limit, filters, past in queries:
                query = " ".join(words)
                as_of = positions[len(positions) // 2] if past else None
                for tenant in ("t", "u"):
                    fast = fts_search(runner.conn, tenant, query, limit=limit, as_of=as_of, filters=filters)
                    exact = exact_as_of(runner.conn, tenant, query, limit, as_of, filters)
                    assert _key(fast) == _key(exact)
                    assert [h.score for h in fast] == pytest.approx([h.score for h in exact], rel=1e-9, abs=1e-12)

        for op in ops:
            if op[0] == "catch_up":
                check()  # the index then follows the next writes incrementally
            elif (position := _write(log, op, live, used)) is not None:
                positions.append(position)
        check()


@pytest.fixture
def runner(store, tmp_path):
    runner = ProjectionRunner(store, tmp_path / "projections.db", [FtsProjector()])
    yield runner
    runner.close()


def test_searches_come_from_the_postings_not_from_fts5(log, runner, monkeypatch):
    log.add("m1", "we adopted a dog named Rex")
    log.add("m2", "the animal shelter called about the dog")
    runner.catch_up()

    def refuse(*args, **kwargs):
        raise AssertionError("FTS5 was asked")

    monkeypatch.setattr(fts_module, "_tiered", refuse)
    monkeypatch.setattr(fts_module, "_run", refuse)
    hits = fts_search(runner.conn, "t", "when did they adopt the dog?")
    assert [h.memory_id for h in hits] == ["m1", "m2"]


def test_an_accent_standing_alone_is_the_empty_term_fts5_holds(log, runner):
    """The tokenizer removes the mark and keeps an empty token, which fts5vocab reports as NULL: the index took
    the NULL for a term and every word search of every tenant failed, for good, rebuilt or not."""
    log.add("m1", "accent \u0301 alone")
    log.add("m2", "hello world")
    runner.catch_up()
    assert [h.memory_id for h in fts_search(runner.conn, "t", "hello")] == ["m2"]
    assert [h.memory_id for h in fts_search(runner.conn, "t", "accent \u0301")] == [h.memory_id for h in exact_as_of(runner.conn, "t", "accent \u0301", 10, None, None)] == ["m1"]


def test_phrases_and_cjk_are_left_to_fts5(log, runner):
    log.add("m1", "send the e-mail today")
    log.add("m2", "mail the letter by email")
    log.add("zh", "我今天早上在公司喝了一杯咖啡")
    runner.catch_up()
    index = PostingsIndex.for_connection(runner.conn)
    assert index.search(runner.conn, "t", ["e-mail"], limit=5) is None  # two tokens: a phrase
    assert [h.memory_id for h in fts_search(runner.conn, "t", "e-mail", terms=["e-mail"])] == ["m1"]
    assert [h.memory_id for h in fts_search(runner.conn, "t", "咖啡")] == ["zh"]


def test_a_search_as_of_a_position_scores_as_the_search_at_that_position_did(log, runner):
    """bm25's statistics as of a position are those of the rows indexed by then: writes since (another tenant's
    too, and new versions) change neither the order nor the scores a search as of it gives."""
    log.add("m1", "coffee with milk and sugar")
    log.add("m2", "coffee coffee and a long walk along the river in the rain")
    at = log.add("m3", "tea with honey, never coffee")
    runner.catch_up()
    then = fts_search(runner.conn, "t", "coffee milk honey", limit=10)
    for i in range(30):  # coffee grows common, milk stays rare: without the statistics of then, the order changes
        log.add(f"u{i}", f"coffee number {i}", tenant="u")
    log.update("m1", "coffee with milk, sugar and a croissant from the bakery round the corner")
    runner.catch_up()
    assert fts_search(runner.conn, "t", "coffee milk honey", limit=10, as_of=at) == then
    now = fts_search(runner.conn, "t", "coffee milk honey", limit=10)
    assert [h.memory_id for h in now] == ["m3", "m1", "m2"] and [h.memory_id for h in then] == ["m1", "m3", "m2"]  # today's statistics


def test_the_length_of_the_first_rows_counts_whole_blocks_and_the_rest_as_rows_come(log, runner, monkeypatch):
    """Searches as of a position take the rows' total length from running sums of whole blocks, kept as rows are added."""
    monkeypatch.setattr(scoring_module, "LENGTH_BLOCK", 4)
    index = PostingsIndex.for_connection(runner.conn)
    for round in range(3):
        for i in range(7):
            log.add(f"m{round}-{i}", " ".join(["word"] * (i + round + 1)) + " coffee")
        runner.catch_up()
        fts_search(runner.conn, "t", "coffee", limit=5, as_of=1)  # syncs the index and extends the sums
        lengths = index.cols.length[: index.cols.n]
        assert [index._length_of_first(k) for k in range(index.cols.n + 1)] == [float(lengths[:k].sum()) for k in range(index.cols.n + 1)]
    assert len(index._block_sums) == index.cols.n // 4 + 1


def test_a_rebuild_reloads_the_index(log, runner):
    for i in range(20):
        log.add(f"m{i}", f"note {i} about coffee and tea number{i % 5}")
    runner.catch_up()
    before = fts_search(runner.conn, "t", "coffee number3")
    runner.rebuild(["fts"])
    log.update("m3", "only tea now")
    runner.catch_up()
    after = fts_search(runner.conn, "t", "coffee number3")
    assert after == fts_search(runner.conn, "t", "coffee number3", exact=True)
    assert [h.memory_id for h in after] != [h.memory_id for h in before]
    assert "m3" not in [h.memory_id for h in after]


def test_postings_are_held_as_float16_where_exact_and_long_rows_still_rank_as_fts5_does(log, runner):
    """Frequencies and row lengths take float16 while it holds them exactly; a row past its range keeps float32."""
    import numpy as np

    for i in range(10):
        log.add(f"m{i}", f"coffee tea note {i}")
    runner.catch_up()
    index = PostingsIndex.for_connection(runner.conn)
    index.load(runner.conn)
    assert {(seg.freqs.dtype, seg.lengths.dtype) for seg in index.segments} == {(np.dtype(np.float16), np.dtype(np.float16))}
    log.add("long", " ".join(["coffee"] * 1500 + [f"w{k}" for k in range(1501)]))  # 3,001 tokens: no float16 holds that
    log.add("short", "coffee")
    runner.catch_up()
    index.load(runner.conn)
    assert np.dtype(np.float32) in {seg.lengths.dtype for seg in index.segments} | {seg.freqs.dtype for seg in index.segments}
    for query in ("coffee", "coffee tea", "tea w7"):
        assert _key(fts_search(runner.conn, "t", query, limit=12)) == _key(fts_search(runner.conn, "t", query, limit=12, exact=True))


def test_recall_reads_its_own_writes_through_the_loaded_index(svc):
    from mnemolog.eventstore.commands import CommandContext
    from mnemolog.eventstore.model import MemoryContent
    from mnemolog.projections.recall.searcher import RecallOptions

    ctx = CommandContext(tenant="t", actor="test")
    svc.run(svc.memories.add, ctx, [MemoryContent(memory=f"note {i} about the garden") for i in range(20)])
    svc.warm()  # the index holds the first twenty
    added = svc.run(svc.memories.add, ctx, [MemoryContent(memory="the saxophone lesson moved to Friday")])
    found = svc.searcher.recall("t", "when is the saxophone lesson?", RecallOptions(channels=("lexical",)))
    assert [h.id for h in found.hits] == list(added.memory_ids)
    archived = svc.run(svc.memories.archive, ctx, added.memory_ids[0])
    assert svc.searcher.recall("t", "saxophone lesson", RecallOptions(channels=("lexical",))).hits == []
    past = svc.searcher.recall("t", "saxophone lesson", RecallOptions(channels=("lexical",), as_of=archived.first_position - 1))
    assert [h.id for h in past.hits] == list(added.memory_ids)


def test_merged_segments_rank_as_fts5_does(log, runner, monkeypatch):
    monkeypatch.setattr(PostingsIndex, "MAX_SEGMENTS", 2)
    index = PostingsIndex.for_connection(runner.conn)
    words = "coffee tea milk sugar bread jam honey".split()
    for step in range(12):  # one segment per catch-up: merged along the way
        for i in range(5):
            log.add(f"m{step}-{i}", " ".join(words[(step + i + k) % 7] for k in range(1 + i % 4)))
        if step % 3 == 2:
            log.update(f"m{step}-0", "jam and honey only")
        runner.catch_up()
        for query in ("coffee honey", "jam", "tea sugar milk"):
            fast = fts_search(runner.conn, "t", query, limit=7)
            assert _key(fast) == _key(fts_search(runner.conn, "t", query, limit=7, exact=True))
        assert len(index.segments) <= 3


def test_a_terms_common_frequency_is_its_most_common_one_and_scores_stay_bm25(log, runner):
    """``odd`` leaves out the rows of the most common frequency (not the first row's); exact scores are plain bm25."""
    import math

    import numpy as np

    from mnemolog.projections.fts.postings_scoring import B, K1

    texts = {"m0": "coffee coffee bread", **{f"m{i}": "coffee jam" for i in range(1, 6)}, "m6": "coffee coffee coffee jam"}
    texts |= {f"m{i}": "honey milk tea" for i in range(7, 17)}
    for mid, text in texts.items():
        log.add(mid, text)
    runner.catch_up()
    index = PostingsIndex.for_connection(runner.conn)
    index.load(runner.conn)
    postings = index._postings_of([index.tokenizer.stems(w)[0] for w in ("coffee", "jam")])  # "coffe": the index holds stems
    coffee = postings[0]
    common, others, their = coffee.odd()
    assert coffee.freqs[0] == 2 and common == 1
    assert len(others) == 2 and their.tolist() == [2, 3]

    avgdl = sum(len(t.split()) for t in texts.values()) / len(texts)

    def bm25(text: str) -> float:
        tokens, score = text.split(), 0.0
        for word in ("coffee", "jam"):
            if f := tokens.count(word):
                hits = sum(word in t.split() for t in texts.values())
                idf = math.log((len(texts) - hits + 0.5) / (hits + 0.5))
                score += idf * (f * (K1 + 1)) / (f + K1 * (1 - B + B * len(tokens) / avgdl))
        return score

    expected = {mid: bm25(text) for mid, text in texts.items() if "coffee" in text or "jam" in text}
    names = dict(runner.conn.execute("SELECT row_id, memory_id FROM fts_docs").fetchall())
    rows = np.sort(index._score(postings)[0])
    exact = index._exact(postings, rows)  # the scoring that reads the term's common frequency and its odd rows
    assert {names[int(index.cols.row_id[r])]: s for r, s in zip(rows.tolist(), exact.tolist())} == pytest.approx(expected, rel=1e-12)
    hits = index.search(runner.conn, "t", ["coffee", "jam"], limit=3)
    best = sorted(expected, key=lambda mid: (-round(expected[mid], 9), list(texts).index(mid)))[:3]
    assert [mid for mid, *_ in hits] == best
    assert [-score for *_, score in hits] == pytest.approx([expected[mid] for mid in best], rel=1e-12)


# -- the saved file ------------------------------------------------------------------------------


def _fresh_process(monkeypatch):
    """Forget every loaded index, as a new process starts with none."""
    monkeypatch.setattr(PostingsIndex, "_indexes", {})


def _contents(index: PostingsIndex) -> tuple:
    """What an index holds, independent of how its segments are cut: per-row columns and per-term postings."""
    cols = index.cols
    rows = tuple(getattr(cols, name)[: cols.n].tolist() for name in ("row_id", "version", "valid_from", "valid_to", "length"))
    tenants = {i: t for t, i in index.tenants.items()}
    statuses = {i: s for s, i in index.statuses.items()}
    named = ([tenants[i] for i in cols.tenant[: cols.n].tolist()], [statuses[i] for i in cols.status[: cols.n].tolist()])
    postings: dict[str, list] = {}
    for seg in index.segments:
        for term in seg.terms:
            found, freqs, lengths = seg.postings(term)
            postings.setdefault(term, []).extend(zip(cols.row_id[found].tolist(), freqs.tolist(), lengths.tolist()))
    return rows, named, {t: sorted(p) for t, p in postings.items()}, index.total_length


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=st.lists(st.one_of(_op, st.tuples(st.just("restart")), st.tuples(st.just("restart")), st.tuples(st.just("rebuild"))), min_size=1, max_size=40))
@example(ops=[("add", 1, ["coffee"], "t", (), None), ("restart",), ("update", 1, ["tea"]), ("add", 2, ["jam"], "u", (), None)])
def test_a_saved_index_loads_and_catches_up_to_what_a_build_from_fts_docs_holds(tmp_path_factory, ops):
    """Restarts at any point (save, then a new process loads the file and catches up): every row exactly once."""
    path = tmp_path_factory.mktemp("saved")
    store = EventStore.open(path)
    runner = ProjectionRunner(store, path / "projections.db", [FtsProjector()])
    log = Log(store)
    live: dict[str, str] = {}
    used: set[str] = set()
    saved = dict(PostingsIndex._indexes)
    try:
        for op in ops:
            kind = op[0]
            if kind == "catch_up":
                runner.catch_up()
                PostingsIndex.for_connection(runner.conn).load(runner.conn)
            elif kind == "restart":
                runner.catch_up()
                PostingsIndex.for_connection(runner.conn).load(runner.conn, save=True)
                PostingsIndex._indexes.clear()  # a new process: the next load starts from the file
            elif kind == "rebuild":
                runner.rebuild(["fts"])
            else:
                _write(log, op, live, used)
        runner.catch_up()
        loaded = PostingsIndex.for_connection(runner.conn)
        loaded.load(runner.conn)
        PostingsIndex._indexes.clear()
        (path / "fts.postings").unlink(missing_ok=True)
        built = PostingsIndex.for_connection(runner.conn)
        built.load(runner.conn)
        assert not built.restored
        assert _contents(loaded) == _contents(built)
        for words in (["coffee", "tea"], ["jam"], ["running", "water", "café"]):
            for tenant in ("t", "u"):
                assert loaded.search(runner.conn, tenant, words, limit=5) == built.search(runner.conn, tenant, words, limit=5)
    finally:
        PostingsIndex._indexes.clear()
        PostingsIndex._indexes.update(saved)
        runner.close()
        store.close()


def _notes(log, first: int, count: int) -> None:
    for i in range(first, first + count):
        log.add(f"m{i}", f"note {i} about coffee and tea number{i % 5}")


def test_a_new_process_loads_the_saved_file_and_adds_only_the_rows_after_it(log, runner, tmp_path, monkeypatch):
    _notes(log, 0, 30)
    runner.catch_up()
    first = PostingsIndex.for_connection(runner.conn)
    assert first.load(runner.conn, save=True) == 30 and (tmp_path / "fts.postings").exists()
    _notes(log, 30, 5)
    log.update("m3", "only tea now")
    runner.catch_up()

    _fresh_process(monkeypatch)
    tokenized = []
    index = PostingsIndex.for_connection(runner.conn)
    real = index.tokenizer.tokens
    monkeypatch.setattr(index.tokenizer, "tokens", lambda rows: tokenized.append(len(rows)) or real(rows))
    assert index.load(runner.conn) == 36
    assert index.restored and tokenized == [6]  # the five new notes and m3's new version; the rest came from the file
    for query in ("coffee number3", "tea", "note 33"):
        assert fts_search(runner.conn, "t", query, limit=10) == fts_search(runner.conn, "t", query, limit=10, exact=True)
    assert "m3" not in [h.memory_id for h in fts_search(runner.conn, "t", "coffee number3")]


@pytest.mark.parametrize("change", ["rebuild", "drop", "older_database", "torn", "garbage"])
def test_a_stale_or_damaged_file_is_ignored_and_the_index_built_from_fts_docs(log, runner, tmp_path, monkeypatch, change):
    import shutil

    _notes(log, 0, 20)
    log.add("u1", "coffee for the other tenant", tenant="u")
    runner.catch_up()
    older = tmp_path / "older.db"
    if change == "older_database":  # a copy of projections.db from before the file was saved
        runner.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        shutil.copy(tmp_path / "projections.db", older)
    _notes(log, 20, 5)
    runner.catch_up()
    PostingsIndex.for_connection(runner.conn).load(runner.conn, save=True)
    saved = tmp_path / "fts.postings"
    if change == "rebuild":
        runner.rebuild(["fts"])
    elif change == "drop":
        log.drop("u")
        runner.catch_up()
    elif change == "older_database":
        runner.close()
        (tmp_path / "projections.db-wal").unlink(missing_ok=True)
        shutil.copy(older, tmp_path / "projections.db")
        runner = ProjectionRunner(log.store, tmp_path / "projections.db", [FtsProjector()], after_commit=None)
        runner.catch_up(until=21)
    elif change == "torn":
        saved.write_bytes(saved.read_bytes()[: saved.stat().st_size // 2])
    else:
        data = bytearray(saved.read_bytes())
        data[len(data) // 2 : len(data) // 2 + 64] = b"\xff" * 64
        saved.write_bytes(bytes(data))

    _fresh_process(monkeypatch)
    index = PostingsIndex.for_connection(runner.conn)
    index.load(runner.conn)
    assert not index.restored
    for tenant in ("t", "u"):
        for query in ("coffee number3", "coffee", "note 22"):
            assert fts_search(runner.conn, tenant, query, limit=30) == fts_search(runner.conn, tenant, query, limit=30, exact=True)
    if change == "older_database":
        runner.close()


def test_the_service_saves_the_index_at_warm_and_at_close(tmp_path, monkeypatch):
    from mnemolog.eventstore.commands import CommandContext
    from mnemolog.eventstore.model import MemoryContent
    from mnemolog.projections.recall.searcher import RecallOptions
    from mnemolog.projections.service import MemoryService

    _fresh_process(monkeypatch)
    data = tmp_path / "data"
    ctx = CommandContext(tenant="t", actor="test")
    with MemoryService.open(data) as svc:
        svc.run(svc.memories.add, ctx, [MemoryContent(memory=f"note {i} about the garden") for i in range(20)])
        svc.warm()
        assert (data / "fts.postings").exists()
        written = (data / "fts.postings").stat().st_mtime_ns
        svc.run(svc.memories.add, ctx, [MemoryContent(memory="the saxophone lesson moved to Friday")])
        svc.searcher.recall("t", "saxophone", RecallOptions(channels=("lexical",)))  # the index follows the write
    assert (data / "fts.postings").stat().st_mtime_ns != written  # saved again at close: it held one more row
    _fresh_process(monkeypatch)
    with MemoryService.open(data) as svc:
        svc.warm()
        index = PostingsIndex.for_connection(svc.read_conn())
        assert index.restored and index.cols.n == 21
        found = svc.searcher.recall("t", "when is the saxophone lesson?", RecallOptions(channels=("lexical",)))
        assert len(found.hits) == 1


def test_a_rebuild_saves_the_file_again_though_its_rows_keep_their_ids(log, runner, tmp_path, monkeypatch):
    import json

    import numpy as np

    _notes(log, 0, 10)
    runner.catch_up()
    index = PostingsIndex.for_connection(runner.conn)
    index.load(runner.conn, save=True)
    runner.rebuild(["fts"])  # the same log: the same row ids, another generation
    index.load(runner.conn, save=True)
    with np.load(tmp_path / "fts.postings") as saved:
        assert json.loads(saved["meta"].tobytes())["generation"] == runner.generation("fts")
    _fresh_process(monkeypatch)
    assert PostingsIndex.for_connection(runner.conn).load(runner.conn) == 10
    assert PostingsIndex.for_connection(runner.conn).restored


def test_a_process_that_never_searched_writes_no_file(tmp_path, monkeypatch):
    from mnemolog.eventstore.commands import CommandContext
    from mnemolog.eventstore.model import MemoryContent
    from mnemolog.projections.service import MemoryService

    _fresh_process(monkeypatch)
    with MemoryService.open(tmp_path / "data") as svc:
        svc.run(svc.memories.add, CommandContext(tenant="t", actor="test"), [MemoryContent(memory="a note about the garden")])
    assert not (tmp_path / "data" / "fts.postings").exists() and PostingsIndex._indexes == {}


# -- pruning -------------------------------------------------------------------------------------

_PRUNING_WORDS = "coffee tea milk sugar bread jam honey lemon".split()


@pytest.fixture(scope="module")
def crowded(tmp_path_factory):
    """About 1,500 rows over eight words: many rows hold two or three of them, some a word twice or in their key or tags,
    in two tenants, with updates and archives, so that thresholds are high and pruning decides a lot."""
    import random

    path = tmp_path_factory.mktemp("crowded")
    store = EventStore.open(path)
    runner = ProjectionRunner(store, path / "projections.db", [FtsProjector()])
    log = Log(store)
    rng = random.Random(7)
    positions = []
    for i in range(1400):
        words = rng.choices(_PRUNING_WORDS, k=rng.randint(1, 6)) + ["filler"] * rng.randint(0, 8)
        rng.shuffle(words)
        extra = {"key": rng.choice(_PRUNING_WORDS)} if i % 11 == 0 else {}
        extra |= {"tags": (rng.choice(_PRUNING_WORDS),)} if i % 13 == 0 else {}
        positions.append(log.add(f"m{i}", " ".join(words), tenant="t" if i % 5 else "u", **extra))
        if i % 9 == 0 and i:
            positions.append(log.update(f"m{i - 1}", " ".join(rng.choices(_PRUNING_WORDS, k=3)), tenant="t" if (i - 1) % 5 else "u"))
        if i % 17 == 0:
            positions.append(log.archive(f"m{i}", tenant="t" if i % 5 else "u"))
    runner.catch_up()
    yield runner, positions
    runner.close()
    store.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    words=st.lists(st.sampled_from(_PRUNING_WORDS + ["filler", "absent"]), min_size=2, max_size=5, unique=True),
    limit=st.integers(1, 60),
    tenant=st.sampled_from(["t", "u"]),
    past=st.sampled_from([None, 0.3, 0.7]),
    status=st.sampled_from([SearchFilters(), SearchFilters(status=None), SearchFilters(status=("archived",))]),
)
def test_pruned_scoring_ranks_as_scoring_every_row(crowded, monkeypatch, words, limit, tenant, past, status):
    runner, positions = crowded
    as_of = None if past is None else positions[int(past * len(positions))]
    index = PostingsIndex.for_connection(runner.conn)
    pruned = index.search(runner.conn, tenant, words, limit=limit, as_of=as_of, filters=status)
    with monkeypatch.context() as m:
        m.setattr(PostingsIndex, "_score_pruned", lambda *args: None)
        full = index.search(runner.conn, tenant, words, limit=limit, as_of=as_of, filters=status)
    assert pruned == full  # the same rows, in the same order, with bit-identical scores


def test_pruning_scores_a_fraction_of_the_rows_it_would_otherwise(crowded, monkeypatch):
    runner, _ = crowded
    index = PostingsIndex.for_connection(runner.conn)
    index.load(runner.conn)  # loaded here, whichever test of the module ran before (or none, on another worker), or a forget let go of it
    scored: list[int] = []
    real = PostingsIndex._score_pruned

    def counting(self, *args):
        found = real(self, *args)
        scored.append(-1 if found is None else len(found[0]))
        return found

    monkeypatch.setattr(PostingsIndex, "_score_pruned", counting)
    every = len(index._score(index._postings_of(["coffee", "tea", "milk"]))[0])
    hits = index.search(runner.conn, "t", ["coffee", "tea", "milk"], limit=5)
    assert len(hits) == 5 and scored and 0 < scored[0] < every / 2
    # A filter checked in SQL cannot bound the answer: nothing is pruned.
    scored.clear()
    index.search(runner.conn, "t", ["coffee", "tea", "milk"], limit=5, filters=SearchFilters(tags=("jam",)))
    assert scored == []


@pytest.mark.parametrize("filters", [None, SearchFilters(tags=("jam",))], ids=["pruned", "sql-filter"])
def test_one_search_builds_its_row_filter_once(crowded, monkeypatch, filters):
    runner, _ = crowded
    index = PostingsIndex.for_connection(runner.conn)
    built = []
    real = PostingsIndex._passing
    monkeypatch.setattr(PostingsIndex, "_passing", lambda self, *args: built.append(args) or real(self, *args))
    hits = index.search(runner.conn, "t", ["coffee", "tea", "milk"], limit=5, filters=filters)
    assert hits and len(built) == 1
    built.clear()
    assert index.search(runner.conn, "nobody", ["coffee", "tea"], limit=5, filters=filters) == [] and len(built) == 1


def test_a_build_from_fts_docs_hands_its_freed_memory_back_and_a_load_from_the_file_has_none_to(log, runner, monkeypatch):
    from mnemolog.projections.fts import postings as postings_module

    released = []
    monkeypatch.setattr(postings_module, "release_freed_memory", lambda: released.append(True) or True)
    _notes(log, 0, 20)
    runner.catch_up()
    PostingsIndex.for_connection(runner.conn).load(runner.conn, save=True)
    assert released == [True]
    _fresh_process(monkeypatch)
    restored = PostingsIndex.for_connection(runner.conn)
    restored.load(runner.conn)
    assert restored.restored and released == [True]


def test_discarding_the_saved_file_waits_for_a_save_under_way_in_another_process(tmp_path):
    """A forget removes ``fts.postings``; a save holding the file's lock (another process) finishes first,
    so that its file cannot land after the removal with the erased rows' terms."""
    import fcntl
    import sqlite3
    import threading

    conn = sqlite3.connect(tmp_path / "projections.db", check_same_thread=False)
    saved = tmp_path / "fts.postings"
    saved.write_bytes(b"terms of erased rows")
    with open(tmp_path / "fts.postings.lock", "a+b") as other:  # an open file of its own: flock treats it as another process
        fcntl.flock(other, fcntl.LOCK_EX)
        discard = threading.Thread(target=PostingsIndex.discard_file, args=(conn,))
        discard.start()
        discard.join(0.3)
        assert discard.is_alive() and saved.exists(), "the removal waits for the save"
        saved.write_bytes(b"the save's new file")  # what the save under way writes
        fcntl.flock(other, fcntl.LOCK_UN)
    discard.join(5)
    assert not discard.is_alive() and not saved.exists()
    conn.close()


def test_a_word_longer_than_fts5_keeps_whole_is_found_and_breaks_no_search(tmp_path, monkeypatch):
    """FTS5 cuts a token at 32,768 bytes, for most scripts inside a character: such a word, in the text or the
    background, is found by itself, and every tenant's searches, a rebuild and the next process go on as before."""
    from mnemolog.eventstore.commands import CommandContext
    from mnemolog.eventstore.model import MemoryContent
    from mnemolog.projections.recall.searcher import RecallOptions
    from mnemolog.projections.service import MemoryService

    long_cjk, long_latin = "日" * 11_000, "é" * 17_000  # 33,000 and 34,000 bytes
    data = tmp_path / "data"

    def found(svc, tenant, query):
        return [h.memory.id for h in svc.searcher.recall(tenant, query, RecallOptions(channels=("lexical",))).hits]

    def searches(svc):
        conn = svc.read_conn()
        for query in ("tide", long_latin, long_cjk):
            assert _key(fts_search(conn, "t", query)) == _key(fts_search(conn, "t", query, exact=True))
        return found(svc, "t", "tide tables"), found(svc, "t", long_latin), found(svc, "u", "when does the tide turn?")

    _fresh_process(monkeypatch)
    with MemoryService.open(data) as svc:
        svc.warm()  # the index is loaded before the long words come: they reach it as new rows
        added = svc.run(svc.memories.add, CommandContext(tenant="t", actor="test"), [MemoryContent(memory=f"{long_cjk} the tide tables", background=long_latin)])
        svc.run(svc.memories.add, CommandContext(tenant="u", actor="test"), [MemoryContent(memory="the tide turns at noon")])
        expected = searches(svc)
        assert expected[0] == expected[1] == list(added.memory_ids) and len(expected[2]) == 1
        svc.runner.rebuild(["fts"])
        assert searches(svc) == expected
    _fresh_process(monkeypatch)
    with MemoryService.open(data) as svc:  # the next process loads the file saved at close
        svc.warm()
        assert PostingsIndex.for_connection(svc.read_conn()).restored
        assert searches(svc) == expected


def test_an_index_that_fails_part_way_through_new_rows_holds_none_of_them(log, runner, monkeypatch):
    """A failure while the index takes new rows leaves it unread: the next search builds it whole, never from rows
    recorded without their postings."""
    from mnemolog.projections.fts.postings_tokens import Tokenizer

    log.add("m1", "coffee at the harbour")
    runner.catch_up()
    assert [h.memory_id for h in fts_search(runner.conn, "t", "coffee")] == ["m1"]
    log.add("m2", "coffee in the garden")
    runner.catch_up()

    def fail(self, rows):
        raise MemoryError("out of memory")

    with monkeypatch.context() as patch:
        patch.setattr(Tokenizer, "tokens", fail)
        with pytest.raises(MemoryError):
            fts_search(runner.conn, "t", "garden")
    assert [h.memory_id for h in fts_search(runner.conn, "t", "garden")] == ["m2"]
    assert _key(fts_search(runner.conn, "t", "coffee")) == _key(fts_search(runner.conn, "t", "coffee", exact=True))
