"""Entities and relations: commands, the entity projection, BFS and the keyword/tag reads."""

from __future__ import annotations

import pytest

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent, NotFound, ValidationError
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.entities import projector as ents
from mnemolog.projections.service import MemoryService


@pytest.fixture
def svc(tmp_path):
    service = MemoryService.open(tmp_path)
    yield service
    service.close()


def ctx(tenant: str = "t") -> CommandContext:
    return CommandContext(tenant=tenant)


def upsert(svc, entity_id, name=None, tenant="t", **kw):
    return svc.run(svc.entities.upsert, ctx(tenant), entity_id, name=name or entity_id, **kw)


def relate(svc, source, target, rtype="KNOWS", weight=1.0, tenant="t"):
    return svc.run(svc.entities.set_relation, ctx(tenant), source, target, rtype, weight=weight)


def related(svc, entity_id, depth=3, direction="out", types=None, as_of=None, tenant="t"):
    return {r.id: r for r in ents.get_related(svc.read_conn(), tenant, entity_id, depth, direction, types, as_of)}


def rel_edges(svc, tenant="t"):
    rows = svc.read_conn().execute(
        "SELECT edge_id, source, target, weight FROM graph_edges WHERE tenant = ? AND edge_id LIKE 'rel:%' AND valid_to IS NULL ORDER BY edge_id",
        (tenant,),
    )
    return [tuple(r) for r in rows]


# -- BFS -------------------------------------------------------------------------------------------


def test_bfs_on_an_empty_graph_is_not_found(svc):
    with pytest.raises(NotFound):
        ents.get_related(svc.read_conn(), "t", "nobody", 2)


def test_bfs_single_entity_and_depth_zero(svc):
    upsert(svc, "solo")
    assert ents.get_related(svc.read_conn(), "t", "solo", 3, "both") == []
    upsert(svc, "other")
    relate(svc, "solo", "other")
    assert ents.get_related(svc.read_conn(), "t", "solo", 0) == []  # depth 0: nothing, but the entity exists
    with pytest.raises(NotFound):
        ents.get_related(svc.read_conn(), "t", "ghost", 0)
    with pytest.raises(ValidationError):
        ents.get_related(svc.read_conn(), "t", "solo", -1)


def test_bfs_is_cycle_safe_and_keeps_the_first_path(svc):
    for e in "abcd":
        upsert(svc, e)
    relate(svc, "a", "b", weight=0.5)
    relate(svc, "b", "c", weight=0.5)
    relate(svc, "c", "a", weight=0.5)  # a cycle back to the start
    relate(svc, "a", "d", weight=0.1)
    relate(svc, "c", "d", weight=1.0)  # a better but longer path to d
    found = related(svc, "a", depth=5)
    assert set(found) == {"b", "c", "d"}
    assert found["d"].depth == 1 and found["d"].score == pytest.approx(0.1)  # first path wins, not the best
    assert [h.target_id for h in found["c"].path] == ["b", "c"]
    assert found["c"].score == pytest.approx(0.25)
    ordered = ents.get_related(svc.read_conn(), "t", "a", 5)
    assert [r.id for r in ordered] == ["b", "c", "d"]  # sorted by score


def test_bfs_expands_the_strongest_paths_of_a_level_first(svc):
    """Two paths of the same length reach d: the one through the stronger relation is kept, whatever the type order."""
    for e in "abcd":
        upsert(svc, e)
    relate(svc, "a", "b", "ALPHA", weight=0.2)
    relate(svc, "a", "c", "BETA", weight=0.9)
    relate(svc, "b", "d", weight=1.0)
    relate(svc, "c", "d", weight=1.0)
    found = related(svc, "a", depth=2)
    assert found["d"].score == pytest.approx(0.9)
    assert [(r.source_id, r.target_id) for r in found["d"].path] == [("a", "c"), ("c", "d")]


def test_bfs_keeps_the_strongest_of_the_shortest_paths_whatever_the_type_or_parent_order(svc):
    """Two relations between the same entities, or two parents of one level: the entity scores by its strongest shortest path."""
    for e in "abcxyz":
        upsert(svc, e)
    relate(svc, "a", "b", "KNOWS", weight=0.2)
    relate(svc, "a", "b", "WORKS_WITH", weight=0.9)  # sorts after KNOWS, and is stronger
    found = related(svc, "a", depth=1)
    assert found["b"].score == pytest.approx(0.9) and [r.relation_type for r in found["b"].path] == ["WORKS_WITH"]
    relate(svc, "c", "a", "KNOWS", weight=0.8)  # both directions: the stronger one, whichever way it points
    assert related(svc, "c", depth=1, direction="both")["a"].score == pytest.approx(0.8)
    relate(svc, "x", "y", "KNOWS", weight=0.8)
    relate(svc, "x", "z", "KNOWS", weight=0.9)  # the stronger parent expands first ...
    relate(svc, "z", "c", "KNOWS", weight=0.1)  # ... but its path to c is weaker
    relate(svc, "y", "c", "KNOWS", weight=1.0)
    found = related(svc, "x", depth=2)
    assert found["c"].depth == 2 and found["c"].score == pytest.approx(0.8)
    assert [(r.source_id, r.target_id) for r in found["c"].path] == [("x", "y"), ("y", "c")]


def test_bfs_directions_and_type_filter(svc):
    for e in ("hub", "in1", "out1", "out2"):
        upsert(svc, e)
    relate(svc, "in1", "hub", "USES", 0.9)
    relate(svc, "hub", "out1", "USES", 0.8)
    relate(svc, "hub", "out2", "part-of", 0.7)
    assert set(related(svc, "hub", direction="out")) == {"out1", "out2"}
    assert set(related(svc, "hub", direction="in")) == {"in1"}
    assert set(related(svc, "hub", direction="both")) == {"in1", "out1", "out2"}
    assert set(related(svc, "hub", direction="both", types=["uses"])) == {"in1", "out1"}
    assert set(related(svc, "hub", direction="out", types=["PART_OF"])) == {"out2"}
    with pytest.raises(ValidationError):
        ents.get_related(svc.read_conn(), "t", "hub", 1, "sideways")


def test_bfs_weight_decay_along_a_chain(svc):
    for e in "vwxyz":
        upsert(svc, e)
    for a, b in zip("vwxy", "wxyz"):
        relate(svc, a, b, weight=0.5)
    found = related(svc, "v", depth=4)
    assert [round(found[n].score, 6) for n in "wxyz"] == [0.5, 0.25, 0.125, 0.0625]
    assert set(related(svc, "v", depth=2)) == {"w", "x"}


# -- commands -------------------------------------------------------------------------------------------


def test_tags_cut_at_eight_with_a_report(svc):
    tags = [f"Tag{i}" for i in range(11)] + ["tag0", "Two Words"]
    result = upsert(svc, "e1", tags=tags)
    assert (result.data["tags_kept"], result.data["tags_dropped"]) == (8, 4)
    assert result.data["dropped_tags"] == ["tag8", "tag9", "tag10", "two-words"]
    assert ents.get_entity(svc.read_conn(), "t", "e1").tags == [f"tag{i}" for i in range(8)]
    again = svc.run(svc.entities.set_tags, ctx(), "e1", "Red, blue,RED")
    assert again.data["tags_kept"] == 2 and ents.get_entity(svc.read_conn(), "t", "e1").tags == ["red", "blue"]


def test_max_tags_is_configurable(tmp_path):
    with MemoryService.open(tmp_path, settings=Settings({"entity_max_tags": 3})) as service:
        result = service.run(service.entities.upsert, ctx(), "e", name="E", tags="a,b,c,d,e")
        assert (result.data["tags_kept"], result.data["tags_dropped"], result.data["max_tags"]) == (3, 2, 3)


def test_unknown_entity_and_bad_weight_are_refused(svc):
    upsert(svc, "a")
    with pytest.raises(NotFound):
        relate(svc, "a", "missing")
    with pytest.raises(NotFound):
        relate(svc, "missing", "a")
    upsert(svc, "b")
    for bad in (1.5, -0.1, float("nan"), True, "0.5"):
        with pytest.raises(ValidationError) as err:
            relate(svc, "a", "b", weight=bad)
        assert err.value.field == "weight"
    with pytest.raises(ValidationError):
        relate(svc, "a", "a")
    with pytest.raises(ValidationError):
        relate(svc, "a", "b", rtype="MENTIONS")
    with pytest.raises(ValidationError):
        upsert(svc, "bad id with spaces")
    with pytest.raises(ValidationError):
        upsert(svc, "document:x")
    assert rel_edges(svc) == []


def test_overwrite_is_a_new_relation_set_and_mirrors_the_graph_edge(svc):
    upsert(svc, "a")
    upsert(svc, "b")
    first = relate(svc, "a", "b", "works_on", 0.4)
    assert first.data["created"] and rel_edges(svc) == [("rel:a:WORKS_ON:b", "a", "b", 0.4)]
    second = relate(svc, "a", "b", "WORKS-ON", 0.9)
    assert not second.data["created"] and second.data["previous_weight"] == 0.4
    assert rel_edges(svc) == [("rel:a:WORKS_ON:b", "a", "b", 0.9)]
    assert ents.relations_of(svc.read_conn(), "t", "a") == [ents.RelationView("a", "b", "WORKS_ON", 0.9)]
    same = relate(svc, "a", "b", "works_on", 0.9)
    assert same.first_position is None  # nothing changed, nothing written
    assert ents.get_related(svc.read_conn(), "t", "a", 1, as_of=first.last_position)[0].score == 0.4
    svc.run(svc.entities.remove_relation, ctx(), "a", "b", "works_on")
    assert rel_edges(svc) == [] and related(svc, "a") == {}
    with pytest.raises(NotFound):
        svc.run(svc.entities.remove_relation, ctx(), "a", "b", "works_on")


def test_setting_a_relation_again_brings_back_a_graph_edge_unlinked_alone(svc):
    """A log written before rel: edges were kept to their relations may hold one unlinked alone: setting the relation again heals it."""
    from mnemolog.eventstore import StreamAppend
    from mnemolog.eventstore import catalogue as c

    upsert(svc, "a")
    upsert(svc, "b")
    relate(svc, "a", "b", weight=0.4)
    [edge] = svc.facts.live_edges_with_prefix("t", "rel:")
    svc.store.append_batch([StreamAppend(c.edges_stream("t"), [c.EdgeUnlinked(edge=edge)])], tenant="t")  # as an unlink through /v1/edges once did
    svc.sync()
    assert rel_edges(svc) == []
    again = relate(svc, "a", "b", weight=0.4)
    assert again.data["changed"] and not again.data["created"] and again.data["previous_weight"] == 0.4
    assert rel_edges(svc) == [("rel:a:KNOWS:b", "a", "b", 0.4)]
    assert not relate(svc, "a", "b", weight=0.4).data["changed"]  # and then, as ever, nothing to do


def test_two_relations_whose_ids_spell_one_edge_id_are_both_set_and_removed(svc):
    """Entity ids hold ':': (p:Q:q -R-> s) and (p -Q-> q:R:s) both spell rel:p:Q:q:R:s, and the second was a 409
    ("unlink it first") that nothing could get past."""
    for entity_id in ("p", "q:R:s", "p:Q:q", "s"):
        upsert(svc, entity_id)
    assert relate(svc, "p:Q:q", "s", "R").data["edge_id"] == "rel:p:Q:q:R:s"
    second = relate(svc, "p", "q:R:s", "Q", 0.5)
    assert second.data["created"] and second.data["edge_id"] == "rel:p:Q:q%3AR%3As"
    assert sorted(rel_edges(svc)) == [("rel:p:Q:q%3AR%3As", "p", "q:R:s", 0.5), ("rel:p:Q:q:R:s", "p:Q:q", "s", 1.0)]
    assert relate(svc, "p", "q:R:s", "Q", 0.7).data["previous_weight"] == 0.5  # found by its triple, whatever its id
    assert sorted(rel_edges(svc)) == [("rel:p:Q:q%3AR%3As", "p", "q:R:s", 0.7), ("rel:p:Q:q:R:s", "p:Q:q", "s", 1.0)]
    assert svc.run(svc.entities.remove_relation, ctx(), "p", "q:R:s", "Q").data["edge_id"] == "rel:p:Q:q%3AR%3As"
    assert rel_edges(svc) == [("rel:p:Q:q:R:s", "p:Q:q", "s", 1.0)]
    svc.run(svc.entities.remove_relation, ctx(), "p:Q:q", "s", "R")
    assert rel_edges(svc) == [] and related(svc, "p") == {} and related(svc, "p:Q:q") == {}


def test_a_weight_of_minus_zero_is_zero(svc):
    import math

    upsert(svc, "a")
    upsert(svc, "b")
    relate(svc, "a", "b", weight=-0.0)
    [(_, _, _, weight)] = rel_edges(svc)
    assert weight == 0.0 and math.copysign(1.0, weight) == 1.0  # stored and shown as -0.0 before


def test_remove_cascades_relations_both_ways(svc):
    for e in ("x", "y", "z"):
        upsert(svc, e)
    relate(svc, "x", "y")
    relate(svc, "y", "z", "USES")
    relate(svc, "z", "y", "LIKES")
    svc.run(svc.edges.link, ctx(), "y", "z", "RELATED", edge_id="user:note:1")
    result = svc.run(svc.entities.remove, ctx(), "y")
    assert result.data["removed_relations"] == 3 and result.data["unlinked_edges"] == 4
    types = [r.type for r in svc.store.read_all(after=result.first_position - 1, until=result.last_position)]
    assert types.count("RelationRemoved") == 3 and "EntityRemoved" in types and types.count("EdgeUnlinked") == 4
    conn = svc.read_conn()
    assert ents.get_entity(conn, "t", "y") is None
    assert ents.relations_of(conn, "t", "x") == [] and ents.relations_of(conn, "t", "z") == []
    assert rel_edges(svc) == []
    with pytest.raises(NotFound):
        svc.run(svc.entities.remove, ctx(), "y")
    # Re-created, it starts without relations.
    upsert(svc, "y")
    assert related(svc, "y", direction="both") == {}


def test_as_of_reads(svc):
    created = upsert(svc, "p", "Grace Hopper", tags=["navy"], aliases=["Amazing Grace"])
    upsert(svc, "q", "COBOL")
    linked = relate(svc, "p", "q", "CREATED", 0.9)
    renamed = upsert(svc, "p", "Grace Brewster Hopper", tags=["navy", "compilers"])
    removed = svc.run(svc.entities.remove, ctx(), "q")
    conn = svc.read_conn()
    assert ents.get_entity(conn, "t", "p", as_of=created.last_position).name == "Grace Hopper"
    assert ents.get_entity(conn, "t", "p").name == "Grace Brewster Hopper"
    assert [e.id for e in ents.find_by_keywords(conn, "t", "amazing", as_of=created.last_position)] == ["p"]
    assert ents.find_by_keywords(conn, "t", "amazing") == []  # the alias is gone after the replace
    assert ents.find_tags(conn, "t", "", as_of=linked.last_position) == [("navy", 1)]
    assert ents.find_tags(conn, "t", "comp") == [("compilers", 1)]
    assert ents.entity_count_by_tag(conn, "t", "compilers", as_of=renamed.first_position - 1) == 0
    assert ents.entity_count_by_tag(conn, "t", "NAVY") == 1
    assert set(related(svc, "p", as_of=linked.last_position)) == {"q"}
    assert related(svc, "p") == {}
    with pytest.raises(NotFound):
        ents.get_related(conn, "t", "q", 1, as_of=removed.last_position)
    with pytest.raises(NotFound):
        ents.get_related(conn, "t", "p", 1, as_of=created.first_position - 1)


def test_find_by_keywords_ranks_and_filters(svc):
    upsert(svc, "lang:rust", "Rust", entity_type="language", tags=["systems"], description="memory safety")
    upsert(svc, "person:rustacean", "Ferris", aliases=["The Rustacean"], entity_type="mascot")
    upsert(svc, "lang:go", "Go", entity_type="language", tags=["systems"], description="trusted by many")
    conn = svc.read_conn()
    assert [e.id for e in ents.find_by_keywords(conn, "t", "RUST")] == ["lang:rust", "person:rustacean", "lang:go"]
    assert [e.id for e in ents.find_by_keywords(conn, "t", "rust", entity_type="mascot")] == ["person:rustacean"]
    assert [e.id for e in ents.find_by_keywords(conn, "t", "", tag="Systems")] == ["lang:go", "lang:rust"]
    assert [e.id for e in ents.find_by_keywords(conn, "t", "memory safety")] == ["lang:rust"]


def test_tenants_are_isolated(svc):
    upsert(svc, "e", "Shared Name", tenant="one")
    assert ents.get_entity(svc.read_conn(), "two", "e") is None
    with pytest.raises(NotFound):
        svc.run(svc.entities.set_relation, ctx("two"), "e", "e2", "KNOWS")
    assert ents.find_by_keywords(svc.read_conn(), "two", "shared") == []


def test_entities_are_graph_nodes(svc):
    upsert(svc, "ent:a")
    [memory] = svc.run(svc.memories.add, ctx(), [MemoryContent(memory="note")]).memory_ids
    svc.run(svc.edges.link, ctx(), memory, "ent:a", "RELATED")
    assert svc.facts.node_exists("t", "ent:a") and not svc.facts.node_exists("t", "ent:b")


def test_projection_rebuilds_identically(svc):
    upsert(svc, "a", tags=["x"])
    upsert(svc, "b")
    relate(svc, "a", "b", weight=0.3)
    svc.run(svc.entities.set_tags, ctx(), "a", ["y"])
    dump = lambda: [svc.read_conn().execute(f"SELECT * FROM {t} ORDER BY row_id").fetchall() for t in ("kg_entities", "kg_tags", "kg_relations", "kg_aliases")]  # noqa: E731
    before = dump()
    svc.runner.rebuild(["entities"])
    assert dump() == before


def test_tenant_drop_clears_the_entity_projection(svc):
    upsert(svc, "a", tenant="gone", tags=["x"])
    upsert(svc, "b", tenant="gone")
    relate(svc, "a", "b", tenant="gone")
    upsert(svc, "a", tenant="kept")
    svc.drop_tenant(ctx("gone"))
    conn = svc.read_conn()
    for table in ("kg_entities", "kg_aliases", "kg_tags", "kg_relations", "kg_tenant_state"):
        assert conn.execute(f"SELECT count(*) FROM {table} WHERE tenant = 'gone'").fetchone()[0] == 0
    assert ents.get_entity(conn, "kept", "a") is not None
    with pytest.raises(NotFound):
        relate(svc, "a", "b", tenant="gone")  # the streams' old events are ignored after the drop
    upsert(svc, "a", tenant="gone")
    assert related(svc, "a", tenant="gone") == {}


def test_a_keyword_of_the_erasure_marker_does_not_find_every_erased_entity(svc):
    """Once the tenant's key was forgotten, each entity's name read as ``[erased: subject forgotten]``, so a search
    for "subject" or "forgotten" listed every erased entity before the one named so; a tag still finds them."""
    upsert(svc, "p:a", "Alice Smithers", tags=["staff"])
    svc.forget(CommandContext(tenant="t", actor="privacy-officer"), "@tenant", reason="tenant closed")
    upsert(svc, "p:c", "Forgotten Realms")
    conn = svc.read_conn()
    assert [e.id for e in ents.find_by_keywords(conn, "t", "forgotten")] == ["p:c"]
    assert ents.find_by_keywords(conn, "t", "erased subject") == []
    assert [e.id for e in ents.find_by_keywords(conn, "t", "staff")] == ["p:a"]


def test_names_aliases_and_tags_holding_control_characters_are_refused(svc):
    """A name of a NUL alone passed as not blank, and a tag or an alias holding NUL was stored as given: each is
    refused naming its field, and nothing is written. Whitespace inside a name still collapses to one space."""
    head = svc.store.last_position()
    for fields, field in (
        ({"name": "\x00"}, "name"), ({"name": "Ada\x00"}, "name"), ({"name": "Ada", "aliases": ["a\x00"]}, "aliases"),
        ({"name": "Ada", "tags": ["x\x00y"]}, "tags"), ({"name": "Ada", "description": "a\x00b"}, "description"),
        ({"name": "Ada", "entity_type": "per\x07son"}, "entity_type"),
    ):  # fmt: skip
        with pytest.raises(ValidationError) as err:
            svc.run(svc.entities.upsert, ctx(), "person:ada", **fields)
        assert err.value.field == field and "control characters" in str(err.value)
    for tags in (("a\x00",), ("ok", "b\x07")):
        with pytest.raises(ValidationError) as err:
            svc.run(svc.memories.add, ctx(), [MemoryContent(memory="tagged", tags=tags)])
        assert err.value.field.endswith("tags")
    assert svc.store.last_position() == head
    svc.run(svc.entities.upsert, ctx(), "person:ada", name="Ada\n  Lovelace", aliases=["Countess\tof Lovelace"], description="Mathematician.\n\tWrote the first program.")
    card = ents.get_entity(svc.read_conn(), "t", "person:ada")
    assert card.name == "Ada Lovelace" and list(card.aliases) == ["Countess of Lovelace"] and "\n\t" in card.description
