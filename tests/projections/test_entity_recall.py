"""Recall over memories and entities: typed hits, entity paths, strategies, the answer subgraph, as_of."""

from __future__ import annotations

import msgspec
import pytest

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent, ValidationError
from mnemolog.projections.entities import projector as ents
from mnemolog.projections.recall.searcher import RecallOptions


def ctx(tenant: str = "t") -> CommandContext:
    return CommandContext(tenant=tenant, actor="test")


def mention(svc, memory_id: str, entity_id: str, n: int, *, tenant: str = "t", weight: float = 1.0):
    """A memory -> entity MENTIONS edge as the entity linker writes one (``mention:<run>:<n>``)."""
    return svc.run(svc.edges.link, ctx(tenant), memory_id, entity_id, "MENTIONS", weight=weight, edge_id=f"mention:test:{n}")


def issue_world(svc, tenant: str = "t"):
    """The issue's example: Alice WORKS_AT Acme (0.9), one memory that mentions both."""
    svc.run(svc.entities.upsert, ctx(tenant), "alice", name="Alice", entity_type="person", aliases=["Alice Wong"])
    svc.run(svc.entities.upsert, ctx(tenant), "acme", name="Acme Corp", entity_type="organization", description="makes anvils", aliases=["Acme"])
    svc.run(svc.entities.set_relation, ctx(tenant), "alice", "acme", "WORKS_AT", weight=0.9)
    [memory] = svc.run(svc.memories.add, ctx(tenant), [MemoryContent(memory="Alice joined Acme Corp as an engineer in 2021")]).memory_ids
    mention(svc, memory, "alice", 1, tenant=tenant)
    mention(svc, memory, "acme", 2, tenant=tenant)
    svc.sync()
    return memory


def recall(svc, query: str, tenant: str = "t", **options):
    return svc.searcher.recall(tenant, query, RecallOptions(**options))


def test_the_issue_example_returns_the_entity_with_its_path_and_the_memory(svc):
    memory = issue_world(svc)
    result = recall(svc, "Where does Alice work?")
    assert result.strategy == "hybrid"
    by_id = {h.id: h for h in result.hits}
    acme = by_id["acme"]
    assert acme.kind == "entity" and acme.memory is None
    assert acme.entity == ents.EntityCard(id="acme", name="Acme Corp", entity_type="organization", aliases=["Acme"], description="makes anvils")
    assert acme.path == [ents.RelationView("alice", "acme", "WORKS_AT", 0.9)] and acme.path_score == 0.9
    assert acme.channels["graph"].rank >= 1
    assert by_id[memory].kind == "memory" and by_id[memory].memory.id == memory and by_id[memory].entity is None
    named = by_id["alice"]
    assert named.kind == "entity" and named.path == [] and named.named_as == "alice"
    # The strongest lexical memory first, then the answer one relation away, then the card of the entity named.
    assert [h.id for h in result.hits] == [memory, "acme", "alice"]


def test_graph_channel_alone_now_finds_entities_and_memories(svc):
    memory = issue_world(svc)
    result = recall(svc, "Where does Alice work?", channels=("graph",))
    assert result.strategy == "graph-only"
    assert {h.id for h in result.hits} == {memory, "acme", "alice"}
    assert all(set(h.channels) == {"graph"} for h in result.hits)


def test_relationships_are_the_answer_subgraph(svc):
    memory = issue_world(svc)
    result = recall(svc, "Where does Alice work?")
    edges = {(r.a, r.b, r.detail["edge_type"]) for r in result.relationships if r.kind == "edge"}
    assert ("alice", "acme", "WORKS_AT") in edges
    assert (memory, "acme", "MENTIONS") in edges and (memory, "alice", "MENTIONS") in edges


def test_relation_cards_and_recall_show_the_same_card(svc):
    issue_world(svc)
    [card] = svc.linking.relation_cards("t", "What is Acme?")["cards"]
    hit = next(h for h in recall(svc, "What is Acme?").hits if h.id == "acme")
    assert card["entity"] == msgspec.to_builtins(hit.entity)


def test_entities_interleave_with_memories(svc):
    """A strong lexical memory ranks above an entity one relation away, which ranks above a weak lexical match."""
    issue_world(svc)
    written = svc.run(svc.memories.add, ctx(), [
        MemoryContent(memory="Alice works remotely on Fridays and works late on Mondays"),
        MemoryContent(memory="Where to park: the work garage"),
    ])
    svc.sync()
    strong, weak = written.memory_ids
    order = [h.id for h in recall(svc, "Where does Alice work?").hits]
    assert order.index(strong) < order.index("acme") < order.index(weak)


def test_knowledge_only_returns_memories_only(svc):
    memory = issue_world(svc)
    result = recall(svc, "Where does Alice work?", strategy="knowledge-only")
    assert result.strategy == "knowledge-only" and result.strategy_reason is None
    assert [h.id for h in result.hits] == [memory] and result.hits[0].kind == "memory"


def test_graph_only_runs_the_graph_channel_alone(svc):
    memory = issue_world(svc)
    result = recall(svc, "Where does Alice work?", strategy="graph-only")
    assert result.strategy == "graph-only" and not result.degraded
    assert result.channels["lexical"].status == "off" and result.channels["lexical"].reason == "strategy graph-only"
    assert {h.id for h in result.hits} == {memory, "acme", "alice"}


def test_graph_only_over_a_tenant_without_entities_degrades_and_says_why(svc):
    [memory] = svc.run(svc.memories.add, ctx("u"), [MemoryContent(memory="Bob likes tea")]).memory_ids
    svc.sync()
    result = recall(svc, "what does Bob like?", tenant="u", strategy="graph-only")
    assert result.strategy == "knowledge-only" and result.degraded
    assert "has none" in result.strategy_reason
    assert [h.id for h in result.hits] == [memory]


@pytest.mark.parametrize(
    "options, field",
    [
        ({"strategy": "graph-only", "channels": ("lexical", "graph")}, "channels"),
        ({"strategy": "graph-only", "weights": {"graph": 0.0}}, "weights"),
        ({"strategy": "everything"}, "strategy"),
    ],
)
def test_strategies_refuse_contradicting_options(svc, options, field):
    issue_world(svc)
    with pytest.raises(ValidationError) as caught:
        recall(svc, "Where does Alice work?", **options)
    assert caught.value.field == field


def test_hints_and_depth_rank_the_answer_the_question_asks_for(svc):
    """"Which team": the team one relation away beats the employer reached the same way and the colleagues two away."""
    for entity_id, name, kind in [("bob", "Bob", "person"), ("carol", "Carol", "person"), ("acme", "Acme", "organization"), ("platform", "Platform Team", "team")]:
        svc.run(svc.entities.upsert, ctx(), entity_id, name=name, entity_type=kind)
    svc.run(svc.entities.set_relation, ctx(), "bob", "acme", "WORKS_AT", weight=0.9)
    svc.run(svc.entities.set_relation, ctx(), "carol", "acme", "WORKS_AT", weight=0.9)
    svc.run(svc.entities.set_relation, ctx(), "bob", "platform", "MEMBER_OF", weight=0.8)
    svc.sync()
    hits = [h for h in recall(svc, "Which team is Bob on?", strategy="graph-only").hits]
    assert hits[0].id == "platform"
    carol = next(h for h in hits if h.id == "carol")
    assert [r.relation_type for r in carol.path] == ["WORKS_AT", "WORKS_AT"] and carol.path_score == pytest.approx(0.81)
    assert carol.channels["graph"].score < 0.81  # a second relation costs more than its weight


def test_as_of_holds_for_entities_relations_and_mentions(svc):
    svc.run(svc.entities.upsert, ctx(), "alice", name="Alice", entity_type="person")
    svc.run(svc.entities.upsert, ctx(), "acme", name="Acme Corp", entity_type="organization")
    [memory] = svc.run(svc.memories.add, ctx(), [MemoryContent(memory="Joined as an engineer in 2021")]).memory_ids
    before_relation = svc.store.last_position()
    svc.run(svc.entities.set_relation, ctx(), "alice", "acme", "WORKS_AT", weight=0.9)
    with_relation = svc.store.last_position()
    mention(svc, memory, "acme", 1)
    with_mention = svc.store.last_position()
    svc.run(svc.entities.set_relation, ctx(), "alice", "acme", "WORKS_AT", weight=0.5)
    svc.run(svc.entities.upsert, ctx(), "globex", name="Globex", entity_type="organization")
    svc.run(svc.entities.set_relation, ctx(), "alice", "globex", "WORKS_AT", weight=0.7)
    svc.run(svc.entities.remove, ctx(), "acme")
    svc.sync()

    def hits(as_of):
        return {h.id: h for h in recall(svc, "Where does Alice work?", strategy="graph-only", as_of=as_of).hits}

    assert set(hits(before_relation)) == {"alice"}
    then = hits(with_relation)
    assert set(then) == {"alice", "acme"} and then["acme"].path_score == 0.9
    # The mention arrives: the memory is reached through Acme, one step below it (x mention weight 1 x 0.9).
    reached = hits(with_mention)
    assert set(reached) == {"alice", "acme", memory}
    assert reached[memory].channels["graph"].score == pytest.approx(reached["acme"].channels["graph"].score * 0.9)
    assert reached[memory].graph_path == ["mention:test:1"]
    now = hits(None)
    assert set(now) == {"alice", "globex"} and now["globex"].path_score == 0.7
    # Relationships as of then hold the relation and the mention as they were.
    result = recall(svc, "Where does Alice work?", as_of=with_mention)
    details = {(r.a, r.b): r.detail for r in result.relationships}
    assert details[("alice", "acme")]["weight"] == 0.9 and details[(memory, "acme")]["edge_type"] == "MENTIONS"
    # A tenant's entities as of a position before the first one: graph-only degrades.
    first = svc.store.read_all(0, 1, tenant="t")[0].position
    early = recall(svc, "Where does Alice work?", strategy="graph-only", as_of=first - 1 if first > 1 else 0)
    assert early.strategy == "knowledge-only" and "as of position" in early.strategy_reason


def test_a_query_naming_no_entity_does_not_walk(svc, monkeypatch):
    issue_world(svc)
    walked = []
    monkeypatch.setattr(ents, "get_related", lambda *a, **k: walked.append(a) or [])
    recall(svc, "engineer in 2021")
    assert walked == []
    recall(svc, "Where does Alice work?")
    assert len(walked) == 1


def test_tenants_do_not_see_each_others_entities(svc):
    issue_world(svc, tenant="t")
    svc.run(svc.memories.add, ctx("u"), [MemoryContent(memory="Where does Alice work? Nobody knows")])
    svc.sync()
    assert all(h.kind == "memory" for h in recall(svc, "Where does Alice work?", tenant="u").hits)


def test_a_chunk_hit_carries_its_document_and_leads_to_its_entity(svc, tmp_path):
    from mnemolog.projections.ingest.documents import document_import, read_document

    svc.run(svc.entities.upsert, ctx(), "babbage", name="Charles Babbage", entity_type="person")
    svc.run(svc.entities.upsert, ctx(), "engine", name="Analytical Engine", entity_type="machine")
    svc.run(svc.entities.set_relation, ctx(), "babbage", "engine", "DESIGNED", weight=0.9)
    path = tmp_path / "bio.md"
    path.write_text("# Bio\n\nCharles Babbage liked trains.\n", encoding="utf-8")
    imported = svc.run(svc.documents.import_document, ctx(), document_import(read_document(path), root=tmp_path))
    svc.sync()
    hits = {h.id: h for h in recall(svc, "What did Charles Babbage design?").hits}
    [chunk] = imported.memory_ids
    assert hits[chunk].kind == "memory" and hits[chunk].document.doc_id == "bio.md" and hits[chunk].document.title
    assert hits["engine"].kind == "entity" and [r.relation_type for r in hits["engine"].path] == ["DESIGNED"]


def test_a_request_scoped_by_filters_gets_memories_only(svc):
    memory = issue_world(svc)
    from mnemolog.projections.filters import SearchFilters

    kind = svc.graph.memory("t", memory).memory_type
    scoped = recall(svc, "Where does Alice work?", filters=SearchFilters(memory_types=(kind,)))
    assert [(h.kind, h.id) for h in scoped.hits] == [("memory", memory)]
    archived_too = recall(svc, "Where does Alice work?", filters=SearchFilters(status=("activated", "archived")))
    assert "acme" in {h.id for h in archived_too.hits} and memory in {h.id for h in archived_too.hits}


def test_graph_depth_zero_walks_nothing(svc):
    issue_world(svc)
    hits = recall(svc, "Where does Alice work?", strategy="graph-only", graph_depth=0).hits
    assert "acme" not in {h.id for h in hits} and "alice" in {h.id for h in hits}


def test_hybrid_narrowed_by_channels_names_what_ran(svc):
    issue_world(svc)
    assert recall(svc, "Where does Alice work?", strategy="hybrid", channels=("lexical",)).strategy == "lexical-only"
    assert recall(svc, "Where does Alice work?", strategy="hybrid", channels=("graph",)).strategy == "graph-only"
    assert recall(svc, "Where does Alice work?", strategy="hybrid").strategy == "hybrid"


# -- invariants over random graphs ---------------------------------------------------------------------

from hypothesis import HealthCheck, given, settings as hsettings, strategies as st  # noqa: E402

_NODES = ["e0", "e1", "e2", "e3", "e4", "e5"]
_relations = st.lists(
    st.tuples(st.sampled_from(_NODES), st.sampled_from(_NODES), st.sampled_from(["LIKES", "OWNS"]), st.sampled_from([0.2, 0.5, 0.9, 1.0])),
    max_size=10,
).map(lambda rels: {(a, b, t): w for a, b, t, w in rels if a != b})


@hsettings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(relations=_relations)
def test_entity_paths_are_relation_chains_from_the_named_entity(tmp_path_factory, relations):
    from mnemolog.projections.service import MemoryService

    svc = MemoryService.open(tmp_path_factory.mktemp("graph"))
    try:
        for node in _NODES:
            svc.run(svc.entities.upsert, ctx(), node, name=f"Zorblat {node[1]}")
        for (a, b, rtype), weight in relations.items():
            svc.run(svc.entities.set_relation, ctx(), a, b, rtype, weight=weight)
        svc.sync()
        result = recall(svc, "tell me about Zorblat 0", strategy="graph-only", limit=50)
        hits = {h.id: h for h in result.hits}
        assert hits["e0"].named_as == "zorblat 0" and hits["e0"].path == []
        reachable = {b for (a, b, _) in relations if a == "e0"} | {a for (a, b, _) in relations if b == "e0"}
        assert reachable <= set(hits)  # every neighbour is found
        for hit in result.hits:
            assert hit.kind == "entity"
            if hit.id == "e0":
                continue
            assert 1 <= len(hit.path) <= 2
            at = "e0"
            product = 1.0
            for step in hit.path:
                assert relations[(step.source_id, step.target_id, step.relation_type)] == step.weight
                assert at in (step.source_id, step.target_id)
                at = step.target_id if step.source_id == at else step.source_id
                product *= step.weight
            assert at == hit.id and hit.path_score == pytest.approx(product, abs=1e-6)
            assert hit.channels["graph"].score <= hit.path_score + 1e-6  # no hint in the question: depth only lowers it
    finally:
        svc.close()


def test_rrf_fusion_ranks_entities_by_their_graph_rank_too(svc):
    memory = issue_world(svc)
    result = recall(svc, "Where does Alice work?", fusion="rrf")
    by_id = {h.id: h for h in result.hits}
    assert by_id["acme"].kind == "entity" and by_id[memory].kind == "memory"
    assert by_id["acme"].score == pytest.approx(0.8 / (60 + by_id["acme"].channels["graph"].rank), abs=1e-6)
