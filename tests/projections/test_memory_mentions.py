"""Memories linked to the entities they mention: MENTIONS edges as events of every memory change.

Add, update, rollback, restore link; archive, delete, merge, supersede and
eviction unlink; revert, history and ``as_of`` apply; relink covers
memories; recall's graph channel walks memory -> entity -> memory.
"""

from __future__ import annotations

import pytest

from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore import catalogue_graph as g
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.recall.searcher import RecallOptions


def ctx(tenant: str = "t", **kw) -> CommandContext:
    return CommandContext(tenant=tenant, **kw)


def add(svc, *texts: str, tenant: str = "t", memory_type: str = "LongTermMemory"):
    return svc.run(svc.memories.add, ctx(tenant), [MemoryContent(memory=t, memory_type=memory_type) for t in texts])


def mentioned(svc, memory_id: str, tenant: str = "t", as_of=None) -> dict[str, tuple[float, str]]:
    """The entities a memory's live (or as-of) MENTIONS edges point at: entity -> (weight, alias)."""
    edges = svc.graph.edges_of(tenant, memory_id, direction="out", edge_types=["MENTIONS"], as_of=as_of)
    return {e.target: (e.weight, e.properties["alias"]) for e in edges}


def events_of(svc, result) -> list:
    return svc.store.read_all(after=result.first_position - 1, until=result.last_position)


@pytest.fixture
def kg(svc):
    """Alice (person) works at Acme Corp (alias Acme); Bob has no mention anywhere yet."""
    svc.run(svc.entities.upsert, ctx(), "alice", name="Alice", entity_type="person")
    svc.run(svc.entities.upsert, ctx(), "acme", name="Acme Corp", aliases=["Acme"], entity_type="org")
    svc.run(svc.entities.set_relation, ctx(), "alice", "acme", "WORKS_AT", weight=0.9)
    return svc


def test_an_add_links_the_entities_its_text_mentions_in_the_same_correlation(kg):
    result = add(kg, "Alice joined Acme Corp as an engineer in 2021", "Nothing to see here")
    linked, plain = result.memory_ids
    assert result.data["mentions"] == 2
    assert mentioned(kg, linked) == {"alice": (1.0, "alice"), "acme": (1.0, "acme corp")}
    assert mentioned(kg, plain) == {}
    written = events_of(kg, result)
    edges = [r for r in written if isinstance(r.event, c.EdgeLinked)]
    assert len(edges) == 2 and {r.metadata.correlation_id for r in written} == {result.correlation_id}
    edge = edges[0].event.edge
    assert edge.edge_id.startswith("mention:") and edge.edge_type == "MENTIONS" and edge.source == linked
    assert edge.properties == {"alias": "alice", "occurrences": 1, "confidence": 1.0, "evidence": [linked]}  # the linker's reason


def test_an_alias_links_with_its_confidence_and_a_tenant_without_entities_writes_no_edge(kg):
    [m] = add(kg, "We met at Acme yesterday").memory_ids
    assert mentioned(kg, m) == {"acme": (0.9, "acme")}
    plain = add(kg, "Alice joined Acme Corp", tenant="other")
    assert [r.type for r in events_of(kg, plain)] == ["MemoryAdded"] and plain.data["mentions"] == 0


def test_an_update_adjusts_the_mentions_and_a_revert_of_either_undoes_them(kg):
    added = add(kg, "Alice joined Acme Corp")
    [m] = added.memory_ids
    acme_edge = next(e.edge_id for e in kg.graph.edges_of("t", m, direction="out") if e.target == "acme")
    kg.run(kg.entities.upsert, ctx(), "bob", name="Bob")
    updated = kg.run(kg.memories.update, ctx(), m, {"memory": "Bob left Acme Corp"})
    assert mentioned(kg, m) == {"acme": (1.0, "acme corp"), "bob": (1.0, "bob")}
    assert any(e.edge_id == acme_edge for e in kg.graph.edges_of("t", m, direction="out"))  # an unchanged mention is kept as it is
    kinds = [(r.type, r.metadata.correlation_id) for r in events_of(kg, updated)]
    assert kinds == [("MemoryUpdated", updated.correlation_id), ("EdgeUnlinked", updated.correlation_id), ("EdgeLinked", updated.correlation_id)]
    assert "no longer mentions 'alice'" in events_of(kg, updated)[1].event.reason
    # Metadata-only updates leave the mentions alone.
    tagged = kg.run(kg.memories.update, ctx(), m, {"tags": ("x",)})
    assert [r.type for r in events_of(kg, tagged)] == ["MemoryUpdated"]

    kg.run(kg.reverts.revert, ctx(), tagged.correlation_id)
    kg.run(kg.reverts.revert, ctx(), updated.correlation_id, force=True)  # the revert of the tags came after it
    assert mentioned(kg, m) == {"alice": (1.0, "alice"), "acme": (1.0, "acme corp")}
    kg.run(kg.reverts.revert, ctx(), added.correlation_id, force=True)
    assert mentioned(kg, m) == {} and kg.get("t", m).status == "deleted"


def test_archive_delete_supersede_unlink_restore_links_again_and_as_of_still_shows_them(kg):
    added = add(kg, "Alice joined Acme Corp", "Alice works at Acme Corp")
    [m, newer] = added.memory_ids
    linked_at = kg.store.last_position()
    archived = kg.run(kg.memories.archive, ctx(), m, reason="old")
    assert mentioned(kg, m) == {}
    assert {r.type for r in events_of(kg, archived)} == {"MemoryArchived", "EdgeUnlinked", "WorkingMemoryWithdrawn"}
    assert set(mentioned(kg, m, as_of=linked_at)) == {"alice", "acme"}  # as of before the archive
    kg.run(kg.memories.restore, ctx(), m)
    assert set(mentioned(kg, m)) == {"alice", "acme"}
    kg.run(kg.memories.soft_delete, ctx(), m)
    assert mentioned(kg, m) == {}
    kg.run(kg.memories.restore, ctx(), m)
    kg.run(kg.memories.supersede, ctx(), m, newer)
    assert mentioned(kg, m) == {} and set(mentioned(kg, newer)) == {"alice", "acme"}
    # The graph neighbourhood of an entity shows only the live memories; as of before, the old one too.
    reached = {r.node for r in kg.neighbors("t", "acme", depth=1)}
    assert newer in reached and m not in reached
    assert m in {r.node for r in kg.neighbors("t", "acme", depth=1, as_of=linked_at)}
    assert m not in {r.node for r in kg.neighbors("t", "acme", depth=1, as_of=added.first_position)}  # added, not linked yet


def test_a_merge_links_the_merged_text_and_unlinks_the_sources(kg):
    a, b = add(kg, "Alice joined Acme Corp", "Acme ships rockets").memory_ids
    kg.run(kg.edges.link, ctx(), a, b, "RELATED", edge_id="user:x:1")
    merged = kg.run(kg.memories.merge, ctx(), [a, b])
    new = merged.data["merged_id"]
    assert mentioned(kg, a) == mentioned(kg, b) == {}
    assert set(mentioned(kg, new)) == {"alice", "acme"}
    assert len(kg.graph.edges_of("t", new, direction="out", edge_types=["MENTIONS"])) == 2  # one edge per entity, not one per source
    kg.run(kg.reverts.revert, ctx(), merged.correlation_id)
    assert set(mentioned(kg, a)) == {"alice", "acme"} and set(mentioned(kg, b)) == {"acme"} and mentioned(kg, new) == {}


def test_eviction_from_working_memory_unlinks_the_archived_items(svc):
    svc.run(svc.entities.upsert, ctx(), "acme", name="Acme Corp")
    first = add(svc, "Acme Corp call at noon", memory_type="WorkingMemory").memory_ids[0]
    for i in range(int(svc.memories.working_capacity)):
        add(svc, f"item {i}", memory_type="WorkingMemory")
    assert svc.get("t", first).status == "archived" and mentioned(svc, first) == {}


def test_rollback_links_the_text_of_the_version_it_brings_back(kg):
    [m] = add(kg, "Alice joined Acme Corp").memory_ids
    kg.run(kg.memories.update, ctx(), m, {"memory": "nobody in particular"})
    assert mentioned(kg, m) == {}
    kg.run(kg.memories.rollback, ctx(), m, 1)
    assert set(mentioned(kg, m)) == {"alice", "acme"}


def test_history_shows_the_mention_links_and_their_versions(kg):
    [m] = add(kg, "Alice joined Acme Corp").memory_ids
    kg.run(kg.memories.update, ctx(), m, {"memory": "Alice retired"})
    versions = kg.history("t", m)
    assert [v["mentions"] for v in versions] == [["alice", "acme"], ["alice"]]
    links = kg.mention_links("t", m)
    assert [(x["entity_id"], x["unlinked_at"] is None) for x in links] == [("alice", True), ("acme", False)]
    acme = links[1]
    assert acme["alias"] == "acme corp" and acme["linked_at"] < acme["unlinked_at"]
    assert kg.mention_links("t", m, as_of=acme["unlinked_at"] - 1)[1]["unlinked_at"] is None  # still live then
    assert [v["mentions"] for v in kg.history("t", m, as_of=acme["unlinked_at"] - 1)][0] == ["alice", "acme"]


def test_relink_covers_memories_dry_run_first_then_one_undoable_run(kg):
    [m] = add(kg, "Carol met Alice at Initech").memory_ids
    kg.run(kg.entities.upsert, ctx(), "initech", name="Initech")  # the catalogue grew after the add
    kg.run(kg.entities.upsert, ctx(), "alice", name="Alice", aliases=["Carol"])  # and an alias
    before = mentioned(kg, m)
    head = kg.store.last_position()
    dry = kg.linking.relink(ctx())
    assert dry["dry_run"] and kg.store.last_position() == head
    assert dry["memories"] == 1 and dry["chunks"] == 0 and dry["memory_mentions"] == 2
    # Initech is new; Alice is now found twice (name and alias): that edge is replaced.
    assert dry["by_kind"]["memories"] == {"add": 2, "remove": 1, "kept": 0} and dry["by_kind"]["chunks"] == {"add": 0, "remove": 0, "kept": 0}
    steps = []
    done = kg.linking.relink(ctx(), commit=True, progress=lambda step, count: steps.append(step))
    assert done["committed"] and set(mentioned(kg, m)) == {"alice", "initech"}
    assert steps == ["read", "linked", "compared", "committed"]
    marker = kg.store.read_all(after=done["positions"][0] - 1, limit=1)[0].event
    assert isinstance(marker, g.RelinkCommitted) and marker.memories == 1 and marker.added == 2
    kg.run(kg.edges.undo_namespace, ctx(), done["prefix"])
    assert mentioned(kg, m) == before
    kg.run(kg.memories.archive, ctx(), m)
    assert kg.linking.relink(ctx())["by_kind"]["memories"] == {"add": 0, "remove": 0, "kept": 0}  # an archived memory is not linked


def test_relink_removes_mentions_the_catalogue_no_longer_finds(kg):
    [m] = add(kg, "Alice joined Acme Corp").memory_ids
    kg.run(kg.entities.upsert, ctx(), "alice", name="Alicia", entity_type="person")  # renamed: "Alice" names nobody now
    report = kg.linking.relink(ctx(), commit=True)
    assert report["by_kind"]["memories"] == {"add": 0, "remove": 1, "kept": 1}
    assert set(mentioned(kg, m)) == {"acme"}


def test_a_memorys_subject_rides_on_its_mentions_and_a_relink_finds_them_as_they_are(kg):
    """The commands and a relink put the same subject on a mention edge, so a relink of unchanged texts changes nothing."""
    added = kg.run(kg.memories.add, ctx(), [MemoryContent(memory="Alice joined Acme Corp", subject="u-7"), MemoryContent(memory="Alice left Acme")])
    own, tenants = added.memory_ids
    subjects = {(r.event.edge.source, r.event.edge.target): r.event.edge.subject for r in events_of(kg, added) if isinstance(r.event, c.EdgeLinked)}
    assert subjects == {(own, "alice"): "u-7", (own, "acme"): "u-7", (tenants, "alice"): None, (tenants, "acme"): None}
    assert kg.linking.relink(ctx())["by_kind"]["memories"] == {"add": 0, "remove": 0, "kept": 4}


# -- recall's graph channel ---------------------------------------------------------------------------


def graph_hits(svc, query: str, kind: str = "memory", **kw) -> list[str]:
    """The graph channel's hits of one kind (memories by default; the entities the query names are hits too)."""
    result = svc.searcher.recall("t", query, RecallOptions(channels=("graph",), limit=10, **kw))
    return [h.id for h in result.hits if h.kind == kind]


def test_the_graph_channel_reaches_the_memories_that_mention_an_entity_the_query_names(kg):
    joined, rockets, other = add(kg, "Alice joined Acme Corp as an engineer in 2021", "Acme ships rockets", "The weather is fine").memory_ids
    assert set(graph_hits(kg, "what else do we know about Acme?")) == {joined, rockets}
    assert "acme" in graph_hits(kg, "what else do we know about Acme?", kind="entity")
    assert graph_hits(kg, "what else do we know about Acme?", as_of=kg.store.last_position() - 3) == []  # before the links


def test_the_graph_channel_walks_from_a_hit_memory_through_its_entities_to_other_memories(kg):
    joined, rockets, other = add(kg, "Alice joined Acme Corp as an engineer in 2021", "Acme ships rockets", "The weather is fine").memory_ids
    result = kg.searcher.recall("t", "rockets", RecallOptions(channels=("lexical", "graph"), limit=10))
    by_id = {h.id: h for h in result.hits}
    assert by_id[rockets].channels["lexical"].rank == 1
    walked = by_id[joined]
    assert "graph" in walked.channels and len(walked.graph_path) == 2  # rockets -> acme -> joined
    assert other not in by_id
    # A deleted memory is no longer walked to.
    kg.run(kg.memories.soft_delete, ctx(), joined)
    assert joined not in {h.id for h in kg.searcher.recall("t", "rockets", RecallOptions(channels=("lexical", "graph"))).hits}


def test_the_mention_walk_follows_mentions_only_when_the_request_lets_the_graph_do_so(kg):
    joined, rockets = add(kg, "Alice joined Acme Corp", "Acme ships rockets").memory_ids
    only_follows = kg.searcher.recall("t", "rockets", RecallOptions(channels=("lexical", "graph"), graph_edge_types=("FOLLOWS",)))
    assert joined not in {h.id for h in only_follows.hits}


@pytest.fixture
def settings():
    return Settings({"working_memory_capacity": 3}, env={})


def test_an_update_leaves_one_mention_per_entity(kg):
    [m] = add(kg, "Alice joined Acme Corp").memory_ids
    kg.run(kg.edges.link, ctx(), m, "acme", "MENTIONS", edge_id="mention:byhand:1", weight=0.5)  # a second one, by hand
    kg.run(kg.memories.update, ctx(), m, {"memory": "Acme Corp hired Alice"})
    assert len(kg.graph.edges_of("t", m, direction="out", edge_types=["MENTIONS"])) == 2  # alice, acme
    assert set(mentioned(kg, m)) == {"alice", "acme"}


def test_a_forced_revert_of_an_archive_after_a_restore_leaves_one_mention_and_reverting_the_restore_leaves_none(kg):
    """The restore linked the memory's mentions again under new ids; reverting the archive after it linked the old
    ones back beside them (two edges to one entity), and reverting the restore then left the archived memory
    mentioning it."""
    [memory_id] = add(kg, "Alice joined Acme Corp").memory_ids
    archive = kg.run(kg.memories.archive, ctx(), memory_id)
    restore = kg.run(kg.memories.restore, ctx(), memory_id)
    kg.run(kg.reverts.revert, ctx(), archive.correlation_id, force=True)
    live = kg.graph.edges_of("t", memory_id, direction="out", edge_types=["MENTIONS"])
    assert sorted(e.target for e in live) == ["acme", "alice"], [e.edge_id for e in live]
    kg.run(kg.reverts.revert, ctx(), restore.correlation_id, force=True)
    assert kg.graph.memory("t", memory_id).status == "archived"
    assert mentioned(kg, memory_id) == {}
