"""Walks of the graph and of the entities' relations, against an independent reading of the same random graph.

Each example writes a random graph (memories and typed, weighted edges; or
entities and relations) under a tenant of its own, then checks what a user
of the neighbourhood reads relies on:

- every reached node is at its shortest distance from the seed (along the
  direction and edge types asked for), no node further than ``depth``, none
  left out;
- every path is a chain of live edges from the seed that the walk may follow;
- a page of the walk in reach order, cut one node past it, is a slice of the
  whole walk: pages neither repeat nor skip a node;
- a walk ranked by score, of memories or of relations, scores each node by the
  strongest of its shortest paths.
"""

from __future__ import annotations

import itertools
import math
from collections import deque

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.projections.entities import projector as ents
from mnemolog.projections.recall import windows
from mnemolog.projections.recall.searcher import RecallOptions

NODES = 5
TYPES = ("RELATED", "KNOWS")
WEIGHTS = (0.2, 0.5, 0.9, 1.0)
EDGES = st.lists(
    st.tuples(st.integers(0, NODES - 1), st.integers(0, NODES - 1), st.sampled_from(TYPES), st.sampled_from(WEIGHTS)), min_size=3, max_size=14
).map(lambda edges: [e for e in edges if e[0] != e[1]])
WALK = st.tuples(
    st.integers(0, NODES - 1), st.sampled_from((1, 2, 2, 3, 4, 0)), st.sampled_from(("out", "in", "both")), st.sampled_from((None, None, ("RELATED",), ("KNOWS",)))
)
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
_tenants = itertools.count()


def steps(edges, node, direction, types):
    """``(other end, edge index)`` of the edges a walk may follow from ``node``."""
    for i, (source, target, kind, _) in enumerate(edges):
        if types is not None and kind not in types:
            continue
        if direction in ("out", "both") and source == node:
            yield target, i
        if direction in ("in", "both") and target == node:
            yield source, i


def distances(edges, seed, depth, direction, types) -> dict[int, int]:
    """Shortest distance of every node within ``depth`` of ``seed``, the seed left out."""
    found, queue = {seed: 0}, deque([seed])
    while queue:
        node = queue.popleft()
        if found[node] == depth:
            continue
        for other, _ in steps(edges, node, direction, types):
            if other not in found:
                found[other] = found[node] + 1
                queue.append(other)
    del found[seed]
    return found


def best_scores(edges, seed, depth, direction, types) -> dict[int, float]:
    """The strongest product of weights over each node's shortest paths."""
    near = distances(edges, seed, depth, direction, types)
    best = {seed: 1.0}
    for level in range(1, depth + 1):
        for node in [n for n, d in near.items() if d == level]:
            best[node] = max(
                best[prev] * edges[i][3]
                for prev in [seed, *near]
                if prev == seed and level == 1 or near.get(prev) == level - 1
                for other, i in steps(edges, prev, direction, types)
                if other == node
            )
    del best[seed]
    return best


@PROPERTY
@given(edges=EDGES, walk=WALK, page=st.integers(1, 4))
def test_a_memory_walk_reaches_each_node_at_its_distance_and_pages_are_slices_of_it(svc, edges, walk, page):
    tenant = f"walk-{next(_tenants)}"
    ctx = CommandContext(tenant=tenant)
    ids = svc.run(svc.memories.add, ctx, [MemoryContent(memory=f"node {n}") for n in range(NODES)]).memory_ids
    if edges:
        records = [c.EdgeRecord(edge_id=f"user:w:{i}", edge_type=t, source=ids[s], target=ids[d], weight=w) for i, (s, d, t, w) in enumerate(edges)]
        svc.run(svc.edges.link_many, ctx, records)
    seed, depth, direction, types = walk
    index = {memory_id: n for n, memory_id in enumerate(ids)}
    whole = svc.graph.bfs(tenant, [ids[seed]], depth=depth, direction=direction, edge_types=types, by_score=False)
    expected = distances(edges, seed, depth, direction, types)
    assert {index[r.node]: r.depth for r in whole} == expected
    for r in whole:  # a chain of edges the walk may follow, from the seed to the node
        at = seed
        for edge_id in r.path:
            at = next(o for o, i in steps(edges, at, direction, types) if f"user:w:{i}" == edge_id)
        assert at == index[r.node] and len(r.path) == r.depth
        assert math.isclose(r.score, math.prod(edges[int(e.rsplit(":", 1)[1])][3] for e in r.path))
    ranked = svc.graph.bfs(tenant, [ids[seed]], depth=depth, direction=direction, edge_types=types)
    assert {index[r.node]: r.score for r in ranked} == pytest.approx(best_scores(edges, seed, depth, direction, types))
    assert [r.node for r in ranked] == [r.node for r in sorted(ranked, key=lambda r: (-r.score, r.depth, r.node))]
    pages = []
    for offset in range(0, len(whole) + page, page):
        cut = svc.graph.bfs(tenant, [ids[seed]], depth=depth, direction=direction, edge_types=types, max_nodes=offset + page + 1, by_score=False)
        pages += cut[offset : offset + page]
    assert pages == whole


@PROPERTY
@given(edges=EDGES, walk=WALK)
def test_a_relation_walk_scores_each_entity_by_its_strongest_shortest_path(svc, edges, walk):
    tenant = f"rel-{next(_tenants)}"
    ctx = CommandContext(tenant=tenant)
    for n in range(NODES):
        svc.run(svc.entities.upsert, ctx, f"e{n}", name=f"Entity {n}")
    kept: dict[tuple[int, int, str], float] = {}
    for source, target, kind, weight in edges:  # a triple is one relation: the last weight set holds
        kept[(source, target, kind)] = weight
        svc.run(svc.entities.set_relation, ctx, f"e{source}", f"e{target}", kind, weight=weight)
    relations = [(s, t, k, w) for (s, t, k), w in kept.items()]
    seed, depth, direction, types = walk
    found = ents.get_related(svc.read_conn(), tenant, f"e{seed}", depth, direction, list(types) if types else None)
    assert {int(r.id[1:]): r.depth for r in found} == distances(relations, seed, depth, direction, types)
    best = best_scores(relations, seed, depth, direction, types)
    assert {int(r.id[1:]): r.score for r in found} == pytest.approx(best)
    assert [r.id for r in found] == [r.id for r in sorted(found, key=lambda r: (-r.score, r.depth, r.id))]


def test_a_walk_reads_its_edge_types_once_however_many_nodes_it_visits(svc, monkeypatch):
    """A request may name hundreds of thousands of edge types (one JSON parameter, see ``filters.one_of``): the walk
    normalised and encoded the whole list again for every node it read the edges of, and a walk of a handful of
    nodes took tens of seconds on a busy machine (clients gave up on it)."""
    from mnemolog.projections.graph import reads

    tenant = "many-types"
    ctx = CommandContext(tenant=tenant)
    ids = svc.run(svc.memories.add, ctx, [MemoryContent(memory=f"node {n}") for n in range(NODES)]).memory_ids
    records = [c.EdgeRecord(edge_id=f"user:m:{n}", edge_type="RELATED", source=ids[0], target=ids[n], weight=1.0) for n in range(1, NODES)]
    svc.run(svc.edges.link_many, ctx, records)
    prepared = []
    prepare = reads.type_filter
    monkeypatch.setattr(reads, "type_filter", lambda types: (prepared.append(1), prepare(types))[-1])
    many = [f"type {i}" for i in range(1000)] + ["related"]
    reached = svc.graph.bfs(tenant, [ids[1]], depth=3, direction="both", edge_types=many)
    assert {r.node for r in reached} == set(ids) - {ids[1]}  # every node read for its edges
    assert len(prepared) == 1


def test_a_walk_hands_sqlite_a_long_list_of_edge_types_at_most_once(svc):
    """Past ``INLINE_VALUES`` the types go to SQLite as one JSON array that each statement reads again (``json_each``):
    a walk running two statements a node read the whole list that many times."""
    from mnemolog.projections.graph import reads

    tenant = "long-type-list"
    ctx = CommandContext(tenant=tenant)
    ids = svc.run(svc.memories.add, ctx, [MemoryContent(memory=f"node {n}") for n in range(NODES)]).memory_ids
    records = [c.EdgeRecord(edge_id=f"user:l:{n}", edge_type=TYPES[n % 2], source=ids[n - 1], target=ids[n], weight=1.0) for n in range(1, NODES)]
    svc.run(svc.edges.link_many, ctx, records)
    conn = svc.read_conn()
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        many = [f"type {i}" for i in range(1000)] + ["related"]
        reached = reads.bfs(conn, tenant, [ids[1]], depth=NODES, direction="both", edge_types=many)
    finally:
        conn.set_trace_callback(None)
    assert [r.node for r in reached] == [ids[2]]  # along RELATED only: 1-2 is, 0-1 and 2-3 are KNOWS
    assert sum("json_each" in s for s in statements) <= 1


@pytest.mark.parametrize("query", ["project-x", "what is project-x?", "travel_budget", "my travel_budget", "what is my home city", '"project-x"'])
def test_the_graph_channel_seeds_a_memory_named_by_its_key_as_written(svc, query):
    """A key holding '-' or '_' was never named unless quoted: the query's terms split it, and no term matched it."""
    ctx = CommandContext(tenant="keys")
    ids = svc.run(svc.memories.add, ctx, [
        MemoryContent(memory="Launch plan for the rocket", key="project-x"),
        MemoryContent(memory="Budget is 3000 euros", key="travel_budget"),
        MemoryContent(memory="I live in Lisbon", key="home city"),
    ]).memory_ids
    named = {"project": ids[0], "travel": ids[1], "home": ids[2]}[next(w for w in ("project", "travel", "home") if w in query)]
    options = RecallOptions(strategy="graph-only")
    graph = windows.channel_rankings(svc.searcher, "keys", query, options, svc.searcher.resolve_strategy("keys", options)[0])[0]["graph"]
    assert (named, 1.0) in graph, graph


@pytest.mark.parametrize(
    ("key", "query"),
    [
        ("Москва", "Москва"),
        ("Élan Vital", "what is élan vital"),
        ("café plans", "cafe\u0301 plans"),  # the same words, the accent written apart (as macOS writes names)
        ("Straße", "STRASSE"),
        ("C++", "C++"),
        ("C++", "do I like C++?"),
        ("#general", "#general"),
        ("50%", "the 50% plan"),
        (".NET", ".NET"),
        ("$HOME", "where is $HOME"),
    ],
)
def test_the_graph_channel_matches_a_key_without_case_in_either_unicode_form_with_its_own_punctuation(svc, key, query):
    """SQLite's lower() folds ASCII only, forms were compared as stored, and the punctuation at a word's ends was
    dropped from the query: none of these keys was matched by the query naming it."""
    ctx = CommandContext(tenant="folded-keys")
    [named] = svc.run(svc.memories.add, ctx, [MemoryContent(memory="a memory with a key", key=key)]).memory_ids
    svc.run(svc.memories.add, ctx, [MemoryContent(memory="another memory", key="other")])
    options = RecallOptions(strategy="graph-only")
    graph = windows.channel_rankings(svc.searcher, "folded-keys", query, options, svc.searcher.resolve_strategy("folded-keys", options)[0])[0]["graph"]
    assert (named, 1.0) in graph, graph
