"""The edges of merged memories: one edge per (source, target, type) on the merged memory, none to itself,
none left on or brought back to an original merged away, and a revert of the merge gives the edges back as before.

Real SQLite files through :class:`MemoryService` and its commands.
"""

from __future__ import annotations

from collections import Counter

import msgspec
import pytest

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.service import MemoryService

T = "t"


def ctx() -> CommandContext:
    return CommandContext(tenant=T)


@pytest.fixture
def svc(tmp_path):
    service = MemoryService.open(tmp_path, settings=Settings({"working_memory_capacity": 3, "synchronous": "NORMAL"}, env={}))
    yield service
    service.close()


def add(svc, *texts: str) -> list[str]:
    return list(svc.run(svc.memories.add, ctx(), [MemoryContent(memory=t) for t in texts]).memory_ids)


def link(svc, source, target, edge_id, *, weight=1.0, edge_type="RELATED", **properties):
    return svc.run(svc.edges.link, ctx(), source, target, edge_type, weight=weight, edge_id=edge_id, properties=properties or None)


def live(svc, *nodes) -> list[bytes]:
    """The live edges touching ``nodes``, every field, sorted."""
    return sorted(msgspec.json.encode(e) for e in svc.facts.live_edges_of(T, list(nodes)))


def keys(svc, node) -> Counter:
    """How many live edges of each (source, target, type) touch ``node``."""
    return Counter((e.source, e.target, e.edge_type) for e in svc.facts.live_edges_of(T, [node]))


def two_linked_to_one(svc):
    """``a`` and ``b`` each linked to ``x`` both ways with RELATED (weights differ) and ``a`` to ``x`` with FOLLOWS."""
    a, b, x = add(svc, "likes tea", "likes green tea", "the tea shop")
    link(svc, a, x, "user:r:1", weight=0.5, note="from a")
    link(svc, b, x, "user:r:2", weight=0.8, note="from b")
    link(svc, x, a, "user:r:3", weight=0.9)
    link(svc, x, b, "user:r:4", weight=0.3)
    link(svc, a, x, "user:f:1", edge_type="FOLLOWS", weight=0.4)
    return a, b, x


def test_a_merge_leaves_one_edge_per_pair_and_type_with_the_larger_weight(svc):
    a, b, x = two_linked_to_one(svc)
    merged = svc.run(svc.memories.merge, ctx(), [a, b]).data["merged_id"]
    assert keys(svc, merged) == Counter(
        {(merged, x, "RELATED"): 1, (x, merged, "RELATED"): 1, (merged, x, "FOLLOWS"): 1, (a, merged, "MERGED_TO"): 1, (b, merged, "MERGED_TO"): 1}
    )
    out = {e.edge_id: e for e in svc.edges_of(T, merged, direction="out", edge_types=["RELATED"])}
    into = {e.edge_id: e for e in svc.edges_of(T, merged, direction="in", edge_types=["RELATED"])}
    # The heavier edge stays (its id, weight and properties); the lighter one's id is kept as where it came from.
    assert list(out) == ["user:r:2"] and out["user:r:2"].weight == 0.8 and out["user:r:2"].properties == {"note": "from b"}
    assert list(into) == ["user:r:3"] and into["user:r:3"].weight == 0.9
    assert out["user:r:2"].merged_from == ("user:r:1",) and into["user:r:3"].merged_from == ("user:r:4",)
    assert svc.edges_of(T, merged, edge_types=["FOLLOWS"])[0].merged_from == ()
    # Nothing is left on the originals but the MERGED_TO edges; the lighter edges' lives end at the merge, kept as history.
    assert {e.edge_type for e in svc.edges_of(T, a)} == {e.edge_type for e in svc.edges_of(T, b)} == {"MERGED_TO"}
    lives = {e.edge_id: e for e in svc.graph.edge_lives(T, a, "RELATED")}
    assert lives["user:r:1"].valid_to is not None and lives["user:r:1"].weight == 0.5


def test_the_walks_and_reads_see_one_edge_per_pair_and_type(svc):
    a, b, x = two_linked_to_one(svc)
    merged = svc.run(svc.memories.merge, ctx(), [a, b]).data["merged_id"]
    between = svc.graph.edges_between(T, [merged, x], edge_types=["RELATED"])
    assert Counter((e.source, e.target) for e in between) == Counter({(merged, x): 1, (x, merged): 1})
    [reached] = svc.neighbors(T, merged, edge_types=["RELATED"], direction="out")
    assert (reached.node, reached.score) == (x, 0.8)


def test_a_merge_of_linked_memories_makes_no_edge_to_itself(svc):
    a, b, c = add(svc, "one", "two", "three")
    link(svc, a, b, "user:s:1")
    link(svc, b, a, "user:s:2", edge_type="FOLLOWS")
    link(svc, b, c, "user:s:3")
    merged = svc.run(svc.memories.merge, ctx(), [a, b]).data["merged_id"]
    assert not [e for e in svc.facts.live_edges_of(T, [merged]) if e.source == e.target]
    first = svc.run(svc.memories.merge, ctx(), [merged, c]).data["merged_id"]  # a merge of a merge: its MERGED_TO edges follow, none loops
    assert not [e for e in svc.facts.live_edges_of(T, [first, merged, a, b, c]) if e.source == e.target]


def test_reverting_the_merge_gives_back_every_edge_as_it_was(svc):
    a, b, x = two_linked_to_one(svc)
    before = live(svc, a, b, x)
    merge = svc.run(svc.memories.merge, ctx(), [a, b])
    after = live(svc, a, b, x, merge.data["merged_id"])
    undo = svc.run(svc.reverts.revert, ctx(), merge.correlation_id)
    assert undo.data["conflicts"] == []
    assert live(svc, a, b, x, merge.data["merged_id"]) == before
    svc.run(svc.reverts.revert, ctx(), undo.correlation_id)  # the merge again, as it was
    assert live(svc, a, b, x, merge.data["merged_id"]) == after


def test_merging_a_merge_folds_the_edges_it_had_folded(svc):
    a, b, x = two_linked_to_one(svc)
    c = add(svc, "tea again")[0]
    link(svc, c, x, "user:r:5", weight=0.95)
    first = svc.run(svc.memories.merge, ctx(), [a, b]).data["merged_id"]
    second = svc.run(svc.memories.merge, ctx(), [first, c]).data["merged_id"]
    [edge] = svc.edges_of(T, second, direction="out", edge_types=["RELATED"])
    assert (edge.edge_id, edge.weight, set(edge.merged_from)) == ("user:r:5", 0.95, {"user:r:1", "user:r:2"})


# -- edges brought back to an original merged away since ---------------------------------------------


def test_an_unlink_reverted_after_a_merge_links_the_merged_memory(svc):
    a, b, x = add(svc, "likes tea", "likes green tea", "the tea shop")
    link(svc, x, a, "user:u:1", weight=0.5)
    link(svc, x, b, "user:u:2", weight=0.7)
    unlinked = svc.run(svc.edges.unlink, ctx(), "user:u:1")
    merged = svc.run(svc.memories.merge, ctx(), [a, b]).data["merged_id"]
    before = live(svc, a, b, x, merged)
    undo = svc.run(svc.reverts.revert, ctx(), unlinked.correlation_id)
    assert {e.edge_type for e in svc.edges_of(T, a)} == {"MERGED_TO"}  # nothing to the archived original
    assert keys(svc, merged)[(x, merged, "RELATED")] == 1
    [edge] = svc.edges_of(T, merged, direction="in", edge_types=["RELATED"])
    assert (edge.edge_id, edge.weight, edge.merged_from) == ("user:u:2", 0.7, ("user:u:1",))
    svc.run(svc.reverts.revert, ctx(), undo.correlation_id)
    assert live(svc, a, b, x, merged) == before


def test_a_restored_memory_links_back_to_the_memory_its_neighbour_was_merged_into(svc):
    a, b, x = add(svc, "likes tea", "likes green tea", "the tea shop")
    link(svc, x, a, "user:d:1", weight=0.5)
    svc.run(svc.memories.soft_delete, ctx(), x)
    merged = svc.run(svc.memories.merge, ctx(), [a, b]).data["merged_id"]
    svc.run(svc.memories.restore, ctx(), x)
    assert [e.edge_type for e in svc.edges_of(T, a)] == ["MERGED_TO"]
    assert [(e.edge_id, e.source, e.target) for e in svc.edges_of(T, x)] == [("user:d:1", x, merged)]


def test_an_edge_between_two_originals_brought_back_after_their_merge_is_no_self_edge(svc):
    a, b = add(svc, "likes tea", "likes green tea")
    link(svc, a, b, "user:l:1")
    undone = svc.run(svc.edges.undo_namespace, ctx(), "user:l:")
    merged = svc.run(svc.memories.merge, ctx(), [a, b]).data["merged_id"]
    svc.run(svc.reverts.revert, ctx(), undone.correlation_id)
    assert [e.edge_type for e in svc.facts.live_edges_of(T, [a, b, merged])] == ["MERGED_TO", "MERGED_TO"]


def test_mentions_brought_back_after_a_merge_stay_with_the_merged_memorys_own(svc):
    """A merge ends its sources' mentions (the merged memory's come from its own text): a revert that would link a
    source's mention back leaves it out, as the merge would have, rather than end it at an archived memory."""
    svc.run(svc.entities.upsert, ctx(), "person:ana", name="Ana")
    a, b = add(svc, "tea with Ana", "green tea with Ana")
    undone = svc.run(svc.edges.undo_namespace, ctx(), "mention:")
    merged = svc.run(svc.memories.merge, ctx(), [a, b]).data["merged_id"]
    own = live(svc, merged)
    svc.run(svc.reverts.revert, ctx(), undone.correlation_id)
    assert {e.edge_type for e in svc.edges_of(T, a)} == {e.edge_type for e in svc.edges_of(T, b)} == {"MERGED_TO"}
    assert live(svc, merged) == own


def test_reverting_a_merge_of_a_merge_gives_each_source_its_own_merged_to_edge_back(svc):
    """The second merge moves the first one's ``MERGED_TO`` edges onto the new memory; its revert links them back
    from their own sources to the first merged memory, one each, none moved to another source nor folded."""
    a, b, c = add(svc, "likes tea", "likes green tea", "likes black tea")
    first = svc.run(svc.memories.merge, ctx(), [a, b]).data["merged_id"]
    before = live(svc, a, b, c, first)
    second = svc.run(svc.memories.merge, ctx(), [first, c])
    assert {(e.source, e.target) for e in svc.edges_of(T, second.data["merged_id"], edge_types=["MERGED_TO"])} == {
        (a, second.data["merged_id"]), (b, second.data["merged_id"]), (first, second.data["merged_id"]), (c, second.data["merged_id"])
    }
    undo = svc.run(svc.reverts.revert, ctx(), second.correlation_id)
    assert undo.data["conflicts"] == []
    assert live(svc, a, b, c, first) == before
    assert sorted((e.source, e.target, e.merged_from) for e in svc.edges_of(T, first, edge_types=["MERGED_TO"])) == sorted(
        [(a, first, ()), (b, first, ())]
    )


def test_an_edge_of_a_merged_away_memory_brought_back_stays_there_when_only_its_merged_memory_merged_since(svc):
    """Linked to ``a`` after ``a`` was merged, the edge was never the merge's to move; a later merge of the merged
    memory moves ``a``'s ``MERGED_TO`` edge, not ``a``'s other edges, so the edge comes back to ``a`` as it was."""
    a, b, c, x = add(svc, "likes tea", "likes green tea", "likes black tea", "the tea shop")
    first = svc.run(svc.memories.merge, ctx(), [a, b]).data["merged_id"]
    link(svc, x, a, "user:p:1")
    before = live(svc, a, x)
    unlinked = svc.run(svc.edges.unlink, ctx(), "user:p:1")
    svc.run(svc.memories.merge, ctx(), [first, c])
    svc.run(svc.reverts.revert, ctx(), unlinked.correlation_id)
    assert [(e.edge_id, e.source, e.target) for e in svc.edges_of(T, x)] == [("user:p:1", x, a)]
    assert [e for e in live(svc, a, x) if b"user:p:1" in e] == [e for e in before if b"user:p:1" in e]
