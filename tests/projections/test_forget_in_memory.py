"""A forget leaves no text of the subject in the memory of a process that goes on running.

The caches a process keeps of what it computed from texts (the rule judge's
analyses and stems, whether a text names a time, the organizer's corpora and
embeddings by text, entity names' normal forms, recall's held rows, the
writer's hand-over of its latest append, the states folded from long streams) are emptied by the process that
applies the forget, and by every other process once it sees the forget in the
log (a server's follower, every round).
"""

from __future__ import annotations

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings
from mnemolog.eventstore.stream_folds import folds_of
from mnemolog.projections import text_caches
from mnemolog.projections.fts.postings import PostingsIndex
from mnemolog.projections.linking import linker
from mnemolog.projections.policies import judge, judge_text
from mnemolog.projections.policies.organizer import Organizer
from mnemolog.projections.recall import candidate_reads
from mnemolog.projections.recall.searcher import RecallOptions
from mnemolog.projections.service import MemoryService

CTX = CommandContext(tenant="t", actor="privacy-officer")
SECRET = "Quillbert Vandermoot"

_FUNCTION_CACHES = {
    "judge analyses": judge_text._analyse,
    "judge stems": judge_text._stem,
    "judge key stems": judge._key_stems,
    "time mentions": candidate_reads._mentions_time,
    "stated times": candidate_reads._when,
    "entity name forms": linker._surface_verdict,
}


def _settings() -> Settings:
    return Settings({"organizer_cluster_interval_s": 0.0}, env={})


def _fill(svc: MemoryService) -> Organizer:
    """Write the subject's memories, an entity, recall them and run the organizer: every cache gets their text."""
    ids = svc.run(
        svc.memories.add,
        CTX,
        [
            MemoryContent(memory=f"{SECRET} played the {what} yesterday", subject="u-9", key=f"{SECRET} instrument", properties={"time": f"2026-05-0{i + 1}"})
            for i, what in enumerate(("oboe", "flute"))
        ]
        + [MemoryContent(memory=f"{SECRET} played the oboe yesterday", subject="u-9")],
    ).memory_ids
    folds_of(svc.store).min_events = 1  # every stream's folded state held, short ones too
    svc.history("t", ids[0])
    svc.run(svc.entities.upsert, CTX, "person:q", name=SECRET, entity_type="person")
    svc.searcher.recall("t", "when did Quillbert play the oboe yesterday?", RecallOptions(limit=10))
    organizer = Organizer(svc, _settings())
    organizer.run_once()
    return organizer


def _held(svc: MemoryService, organizer: Organizer) -> dict[str, int]:
    sizes = {name: fn.cache_info().currsize for name, fn in _FUNCTION_CACHES.items()}
    sizes["organizer embeddings by text"] = len(organizer.vectors.cache) + len(organizer.vectors.norms)
    sizes["recall's held rows"] = len(svc.searcher.graph_memo._held)
    sizes["lexical index rows"] = PostingsIndex.for_connection(svc.read_conn()).cols.n
    sizes["folded streams"] = len(folds_of(svc.store))
    return sizes


def test_the_forgetting_process_empties_every_cache_of_text(tmp_path):
    with MemoryService.open(tmp_path / "data", settings=_settings()) as svc:
        organizer = _fill(svc)
        before = _held(svc, organizer)
        assert all(before.values()), before  # each cache holds something of the subject's text
        drops = text_caches.drops()
        svc.forget(CTX, "u-9", reason="erasure request")
        assert text_caches.drops() > drops
        assert not any(_held(svc, organizer).values()), _held(svc, organizer)
        # They fill again from the projections, which hold the erased memory only.
        hits = svc.searcher.recall("t", "Quillbert oboe", RecallOptions(limit=10)).hits
        assert all(SECRET not in (h.memory or "") for h in hits)


def test_another_process_drops_them_once_it_sees_the_forget_in_the_log(tmp_path):
    with MemoryService.open(tmp_path / "data", settings=_settings()) as other, MemoryService.open(tmp_path / "data", settings=_settings()) as forgetter:
        other.run(other.memories.add, CTX, [MemoryContent(memory=f"{SECRET} hums in the lift", subject="u-9"), MemoryContent(memory="the lift hums all night")])
        assert other.drop_forgotten_text() is False  # nothing forgotten yet

        forgetter.forget(CTX, "u-9", reason="erasure request")
        other.searcher.recall("t", "Quillbert lift", RecallOptions(limit=10))  # what it holds now, as a cache it filled meanwhile
        assert len(other.searcher.graph_memo._held)
        drops = text_caches.drops()
        assert other.drop_forgotten_text() is True
        assert text_caches.drops() == drops + 1 and not len(other.searcher.graph_memo._held)
        assert other.drop_forgotten_text() is False  # once per forget


def test_forgetting_the_tenants_key_drops_the_alias_catalogues_holding_its_entity_names(tmp_path):
    """The alias catalogues a process builds of a tenant's entity names (for linking and recall) stayed held after a
    forget of the tenant's key, until that tenant's next catalogue: a closed tenant's names stayed in memory."""
    with MemoryService.open(tmp_path / "data", settings=_settings()) as svc:
        svc.run(svc.entities.upsert, CTX, "person:q", name=SECRET, entity_type="person", aliases=["Quillbertina"])
        svc.run(svc.memories.add, CTX, [MemoryContent(memory=f"{SECRET} hums in the lift")])
        svc.searcher.recall("t", "where does Quillbert Vandermoot hum?", RecallOptions(limit=10))
        catalogues = svc.linking.catalogues
        assert catalogues._items and "quillbertina" in repr(vars(next(iter(catalogues._items.values()))[0]))
        svc.forget(CTX, "@tenant", reason="tenant closed")
        assert not catalogues._items
        assert svc.linking.catalogues.get(svc.read_conn(), "t")[0] is not None  # built again from the erased rows
