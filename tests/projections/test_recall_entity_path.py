"""Recall's entity path at its cost: held adjacency, graph-only memories read only when they can reach the answer.

What recall returns must not change: the first k hits never depend on the
limit asked for, answers read from the held adjacency equal those read from
SQL (as of the head position), and a change to the graph or the entities is
seen by the next question.
"""

from __future__ import annotations

import msgspec
import pytest

from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.projections.filters import SearchFilters
from mnemolog.projections.graph import reads as graph_reads
from mnemolog.projections.graph.newest_edges import NewestEdges
from mnemolog.projections.recall.searcher import RecallOptions
from mnemolog.projections.state_memo import StateMemo

NAMES = ["Alice", "Bob", "Chen"]
OBJECTS = ["the garden shed", "a pottery class", "the quarterly report", "a jazz concert", "the roof leak", "a charity run"]
WHEN = ["last week", "in May", "on Monday", "after work", ""]
QUESTIONS = [
    "When did Alice fix the roof leak?",
    "What did Bob say about the pottery class?",
    "Who works at Acme?",
    "Where is Acme?",
    "Alice and Chen at the jazz concert",
    "the quarterly report",
    "What happened on 2023-05-04?",
    "Which team does Chen belong to?",
    "charity run in May",
]


def ctx() -> CommandContext:
    return CommandContext(tenant="t", actor="test")


@pytest.fixture
def world(svc):
    """People, an organisation and a city with relations; 36 memories linked to the people they name, a conversation of 8 turns."""
    for entity_id, name, kind in [("alice", "Alice", "person"), ("bob", "Bob", "person"), ("chen", "Chen", "person"),
                                  ("acme", "Acme Corp", "organization"), ("lisbon", "Lisbon", "city"), ("blue", "Blue Team", "team")]:
        svc.run(svc.entities.upsert, ctx(), entity_id, name=name, entity_type=kind, aliases=["Acme"] if entity_id == "acme" else [])
    for source, target, kind, weight in [("alice", "acme", "WORKS_AT", 0.9), ("chen", "acme", "WORKS_AT", 0.7), ("acme", "lisbon", "LOCATED_IN", 0.8),
                                         ("bob", "alice", "KNOWS", 0.6), ("chen", "blue", "MEMBER_OF", 0.9)]:
        svc.run(svc.entities.set_relation, ctx(), source, target, kind, weight=weight)
    contents = []
    for i in range(36):
        name, thing, when = NAMES[i % 3], OBJECTS[i % 6], WHEN[i % 5]
        props = {}
        if i % 4 == 0:
            props["speaker"] = NAMES[(i + 1) % 3]
        if i % 5 == 1:
            props["occurred_at"] = f"2023-05-0{i % 9 + 1}"
        tags = ("work",) if i % 3 == 0 else ()
        contents.append(MemoryContent(memory=f"{name} fixed {thing} {when} (note {i})".replace("  ", " "), properties=props, tags=tags))
    ids = svc.run(svc.memories.add, ctx(), contents).memory_ids
    turns = ids[:8]
    svc.run(svc.edges.link_many, ctx(), [
        c.EdgeRecord(edge_id=f"follows:conv-1:{n}", edge_type="FOLLOWS", source=a, target=b) for n, (a, b) in enumerate(zip(turns, turns[1:]), 1)
    ])
    svc.sync()
    return svc


def hits(result) -> list:
    return msgspec.to_builtins(result.hits)


@pytest.mark.parametrize("strategy", ["hybrid", "graph-only", "knowledge-only"])
@pytest.mark.parametrize("filters", [SearchFilters(), SearchFilters(tags=("work",))])
def test_the_first_hits_never_depend_on_the_limit(world, strategy, filters):
    for question in QUESTIONS:
        everything = hits(world.searcher.recall("t", question, RecallOptions(limit=50, strategy=strategy, filters=filters)))
        for k in (1, 2, 3, 5, 10):
            assert hits(world.searcher.recall("t", question, RecallOptions(limit=k, strategy=strategy, filters=filters))) == everything[:k], (question, k)


def test_graph_only_memories_that_cannot_reach_the_answer_are_not_read(world, monkeypatch):
    read: list[int] = []
    rows = graph_reads.memory_rows

    def counting(conn, tenant, ids, *, as_of=None):
        ids = list(ids)
        read.append(len(ids))
        return rows(conn, tenant, ids, as_of=as_of)

    monkeypatch.setattr(graph_reads, "memory_rows", counting)
    head = world.store.last_position()  # as of a position: nothing is held, every row recall needs is read
    whole = world.searcher.recall("t", "Where is Acme?", RecallOptions(limit=50, as_of=head))
    graph_only = [h for h in whole.hits if h.kind == "memory" and set(h.channels) == {"graph"}]
    assert len(graph_only) > 2  # the memories about the people who work at Acme: found through the graph alone
    read.clear()
    world.searcher.recall("t", "Where is Acme?", RecallOptions(limit=2, as_of=head))
    assert sum(read) < len(graph_only)


def test_held_answers_equal_those_read_as_of_the_head(world):
    head = world.store.last_position()
    for question in QUESTIONS:
        world.searcher.recall("t", question, RecallOptions())  # fills what is held
        held = world.searcher.recall("t", question, RecallOptions())
        from_sql = world.searcher.recall("t", question, RecallOptions(as_of=head))
        assert hits(held) == hits(from_sql), question
        assert msgspec.to_builtins(held.relationships) == msgspec.to_builtins(from_sql.relationships)


def test_a_repeated_question_reads_no_adjacency_again(world):
    question = "Who works at Acme?"
    world.searcher.recall("t", question, RecallOptions())
    statements: list[str] = []
    conn = world.searcher.conn()
    conn.set_trace_callback(statements.append)
    try:
        world.searcher.recall("t", question, RecallOptions())
    finally:
        conn.set_trace_callback(None)
    assert not [s for s in statements if "kg_relations" in s]  # the walk from the entity named
    assert not [s for s in statements if "FROM graph_edges" in s and "target = " in s]  # each entity's newest mentions
    assert not [s for s in statements if "edge_type = 'FOLLOWS'" in s]  # the turns' neighbours
    assert not [s for s in statements if s.startswith(graph_reads._MEMORY_SELECT)]  # the memories' rows


def test_the_next_question_sees_a_new_mention_and_a_new_relation(world):
    question = "Where is Acme?"
    before = {h.id for h in world.searcher.recall("t", question, RecallOptions(limit=50)).hits}
    [dana] = world.run(world.memories.add, ctx(), [MemoryContent(memory="Alice painted a sunrise (note new)")]).memory_ids
    world.sync()
    after = {h.id: h for h in world.searcher.recall("t", question, RecallOptions(limit=50)).hits}
    assert dana not in before and set(after[dana].channels) == {"graph"}  # Acme -> Alice -> the new memory
    world.run(world.entities.upsert, ctx(), "dana", name="Dana", entity_type="person")
    world.run(world.entities.set_relation, ctx(), "dana", "acme", "WORKS_AT", weight=0.95)
    world.sync()
    reached = {h.id: h for h in world.searcher.recall("t", question, RecallOptions(limit=50)).hits}
    assert "dana" not in before and reached["dana"].kind == "entity"


def test_newest_edges_answer_as_the_sql_read_does_for_any_sequence_of_limits(world):
    memo = NewestEdges(StateMemo("graph"))
    conn = world.searcher.conn()
    targets = ["alice", "lisbon", "bob", "alice", "nobody"]
    for per_target in (3, 1, 5, 2, 14, 20, 4):
        expected = graph_reads.edges_into(conn, "t", targets, "MENTIONS", per_target=per_target)
        assert memo.edges_into(conn, "t", targets, "MENTIONS", per_target=per_target) == expected, per_target
    assert memo.edges_into(conn, "other", targets, "MENTIONS", per_target=5) == []  # held per tenant


def test_a_memo_starts_afresh_when_its_projection_moves_and_holds_nothing_without_a_checkpoint(world):
    import sqlite3

    memo = StateMemo("graph")
    conn = world.searcher.conn()
    first = memo.held(conn)
    first.put("k", 1)
    assert memo.held(conn) is first
    world.run(world.memories.add, ctx(), [MemoryContent(memory="Bob fixed the garden shed again")])
    world.sync()
    assert "k" not in memo.held(conn)
    assert StateMemo("graph").held(sqlite3.connect(":memory:")) is None
    small = StateMemo("graph", max_weight=2)
    small.held(conn).put("a", 1, weight=3)
    assert "a" not in small.held(conn)  # past its weight, it starts afresh


def test_filters_built_with_lists_are_answered_and_held_as_with_tuples(world, monkeypatch):
    from mnemolog.projections.recall import candidate_reads

    as_list = SearchFilters(status=["activated"], tags=["work"], memory_types={"UserMemory"}, doc_ids=iter(["d1"]))
    assert as_list == SearchFilters(status=("activated",), tags=("work",), memory_types=("UserMemory",), doc_ids=("d1",))
    assert hash(as_list) and msgspec.structs.replace(as_list, tags=["home"]).tags == ("home",)
    as_tuple = world.searcher.recall("t", "Who works at Acme?", RecallOptions(filters=SearchFilters(tags=("work",))))
    reads = []
    real = candidate_reads._read_allowed
    monkeypatch.setattr(candidate_reads, "_read_allowed", lambda *args: reads.append(args) or real(*args))
    as_list = world.searcher.recall("t", "Who works at Acme?", RecallOptions(filters=SearchFilters(tags=["work"])))
    assert hits(as_list) == hits(as_tuple) and as_tuple.hits
    assert reads == []  # what passed the filters, held for them as tuples, answers them given as lists
