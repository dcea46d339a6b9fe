"""The topic hierarchy and FOLLOWS edges: derived structure written as revertable events."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter, defaultdict

import pytest
from aiohttp import web

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.policies.dedup import Vectors
from mnemolog.projections.policies.llm_judge import LLMJudge
from mnemolog.projections.policies.organizer import Organizer
from mnemolog.projections.policies.topics import TopicBuilder, conversation_place
from mnemolog.projections.service import MemoryService

TENANT = "t1"
THEMES = {
    "kitchen": "recipe oven flour butter garlic simmer basil sauce roast dough pepper onion",
    "space": "orbit telescope galaxy nebula comet planet rocket astronaut lunar crater stellar eclipse",
    "money": "budget invoice savings mortgage interest pension taxes payroll dividend ledger expense refund",
    "garden": "tulip compost hedge seedling mulch watering lawn orchard pruning shovel greenhouse fern",
    "music": "guitar chord melody drummer concert violin chorus tempo rhythm album lyrics piano",
    "travel": "airport luggage passport hotel itinerary train ferry visa hostel boarding souvenir map",
}


def make_settings(**overrides) -> Settings:
    return Settings({"organizer_cluster_interval_s": 0.0, **overrides}, env={})


@pytest.fixture
def settings() -> Settings:
    return make_settings()


def themed(theme: str, n: int, seed: int = 1) -> list[MemoryContent]:
    rng = random.Random(f"{theme}-{seed}")
    words = THEMES[theme].split()
    out = []
    for i in range(n):
        picked = rng.sample(words, 6)
        out.append(MemoryContent(memory=f"{picked[0].title()} {' '.join(picked[1:])} note {theme} {seed}-{i}", properties={"theme": theme}))
    return out


def add(svc, items, tenant: str = TENANT) -> list[str]:
    return list(svc.run(svc.memories.add, CommandContext(tenant=tenant), items).memory_ids)


def live_topics(svc, tenant: str = TENANT) -> dict[str, dict]:
    rows = svc.read_conn().execute(
        "SELECT memory_id, content FROM graph_memories WHERE tenant = ? AND memory_type = 'TopicMemory' AND status = 'activated' AND valid_to IS NULL",
        (tenant,),
    )
    return {m: json.loads(content) for m, content in rows}


def parent_edges(svc, tenant: str = TENANT) -> list[tuple[str, str, str]]:
    rows = svc.read_conn().execute(
        "SELECT edge_id, source, target FROM graph_edges WHERE tenant = ? AND edge_type = 'PARENT' AND valid_to IS NULL ORDER BY row_id", (tenant,)
    )
    return rows.fetchall()


def themes_of(svc, ids, tenant: str = TENANT) -> Counter:
    return Counter(v.properties.get("theme") for v in (svc.get(tenant, m) for m in ids))


# -- topics ----------------------------------------------------------------------------------------


def test_clustering_creates_topics_with_parent_edges(svc, settings):
    for theme in ("kitchen", "space", "money"):
        add(svc, themed(theme, 14))
    add(svc, [MemoryContent(memory=f"scratch {i}", memory_type="WorkingMemory") for i in range(3)])
    report = Organizer(svc, settings).cluster()
    topics = live_topics(svc)
    assert report["created"] == 3 and len(topics) == 3 and report["stopped"] is None
    children = defaultdict(list)
    for edge_id, source, target in parent_edges(svc):
        assert edge_id.startswith(f"parent:{report['correlation_id']}:")
        children[source].append(target)
    assert set(children) == set(topics)
    for topic_id, content in topics.items():
        members = children[topic_id]
        assert len(members) == 14
        [(theme, count)] = themes_of(svc, members).items()  # one theme per topic
        assert content["memory_type"] == "TopicMemory" and content["properties"]["level"] == 1
        assert content["properties"]["fingerprint"] and content["properties"]["representative"] in members
        assert set(content["key"].split(", ")) <= set(THEMES[theme].split()) | {theme}
        assert "Example:" in content["memory"]
    events = svc.store.read_all(correlation_id=report["correlation_id"])
    assert {e.event.origin for e in events if e.type == "MemoryAdded"} == {"topic"}


def test_a_big_cluster_becomes_two_levels(tmp_path):
    settings = make_settings(organizer_max_cluster_size=4, organizer_min_cluster_size=1, organizer_min_group_size=10)
    with MemoryService.open(tmp_path, settings=settings) as svc:
        for theme in THEMES:
            add(svc, themed(theme, 10))
        Organizer(svc, settings).cluster()
        topics = live_topics(svc)
        edges = parent_edges(svc)
        subtopics = {t for _, s, t in edges if t in topics}
        assert subtopics, "a cluster over max_cluster_size must get sub-topics"
        for sub in subtopics:
            assert topics[sub]["properties"]["level"] == 2
            members = [t for _, s, t in edges if s == sub]
            assert members and all(m not in topics for m in members) and len(members) <= 4
        parented = [t for _, s, t in edges if t not in topics]
        assert len(parented) == len(set(parented))  # one parent per memory


def test_rerun_is_idempotent(svc, settings):
    for theme in ("kitchen", "space", "money"):
        add(svc, themed(theme, 14))
    organizer = Organizer(svc, settings)
    first = organizer.cluster()
    head = svc.store.last_position()
    second = organizer.cluster()
    assert second["created"] == 0 and second["retired"] == 0 and second["kept"] == first["created"]
    assert svc.store.last_position() == head


def test_changed_clustering_replaces_topics_through_events_and_reverts(svc, settings):
    for theme in ("kitchen", "space", "money"):
        add(svc, themed(theme, 14))
    organizer = Organizer(svc, settings)
    organizer.cluster()
    before = live_topics(svc)
    before_edges = set(parent_edges(svc))
    new_ids = add(svc, themed("kitchen", 14, seed=2))
    report = organizer.cluster()
    assert report["created"] >= 1 and report["retired"] >= 1
    after = live_topics(svc)
    retired = set(before) - set(after)
    assert retired and all(svc.get(TENANT, t).status == "archived" for t in retired)
    edges = parent_edges(svc)
    targets = [t for _, _, t in edges]
    assert len(targets) == len(set(targets))  # no memory under two topics
    assert set(new_ids) <= set(targets)
    assert not any(s in retired or t in retired for _, s, t in edges)

    revert = svc.run(svc.reverts.revert, CommandContext(tenant=TENANT, actor="operator"), report["correlation_id"])
    assert not revert.data["conflicts"]
    assert set(live_topics(svc)) == set(before)
    assert set(parent_edges(svc)) == before_edges
    assert all(svc.get(TENANT, t).status == "deleted" for t in set(after) - set(before))


def test_small_groups_are_skipped(svc, settings):
    add(svc, themed("garden", 15))
    head = svc.store.last_position()
    report = Organizer(svc, settings).cluster()
    assert report["created"] == 0 and svc.store.last_position() == head
    assert any("organizer_min_group_size" in s["reason"] for s in report["skipped"] if s["memory_type"] == "LongTermMemory")


def test_time_budget_stops_cleanly_between_clusters(svc, settings):
    for theme in ("kitchen", "space", "money"):
        add(svc, themed(theme, 14))
    builder = TopicBuilder(svc, settings, Vectors(svc, "hashing"))
    now = [0.0]
    builder.clock = lambda: now[0]
    real_write = builder.write

    def write(*args):
        result = real_write(*args)
        now[0] += 10_000.0  # the budget runs out after the first cluster
        return result

    builder.write = write
    report = asyncio.run(builder.arun(TENANT, inline=True))
    assert report["stopped"] == "time budget" and report["created"] == 1
    [(topic_id, _)] = live_topics(svc).items()
    assert len([1 for _, s, _ in parent_edges(svc) if s == topic_id]) == 14  # the cluster written is whole


# -- FOLLOWS ------------------------------------------------------------------------------------------


def test_conversation_place_from_sources_and_properties():
    assert conversation_place(MemoryContent(memory="x", sources=("conv-26:D1:3",))) == ("conv-26", (1, 3.0))
    assert conversation_place(MemoryContent(memory="x", properties={"conv": "c 2", "session": "S3", "turn": "4"})) == ("c_2", (3, 4.0))
    assert conversation_place(MemoryContent(memory="x", properties={"session": "s9", "turn": 2})) == ("s9", (0, 2.0))
    assert conversation_place(MemoryContent(memory="x", properties={"conv": "c2"})) is None  # no order given
    assert conversation_place(MemoryContent(memory="x", sources=("notes.md",))) is None


def test_follows_edges_link_a_conversation_in_order_and_are_idempotent(svc, settings):
    turns = ["conv-7:D2:1", "conv-7:D1:2", "conv-7:D1:10", "conv-7:D1:1"]
    ids = dict(zip(turns, add(svc, [MemoryContent(memory=f"turn {t}", sources=(t,)) for t in turns])))
    chat = add(svc, [MemoryContent(memory=f"chat line {n}", properties={"conv": "chat-9", "turn": n}) for n in (3, 1, 2)])
    organizer = Organizer(svc, settings)
    report = organizer.cluster()
    assert report["follows_linked"] == 5

    def chain(first: str) -> list[tuple[str, str, str]]:
        """The chain named by its first turn."""
        return [(e.edge_id, e.source, e.target) for e in svc.facts.live_edges_with_prefix(TENANT, f"follows:{first}:")]

    order = [ids[t] for t in ("conv-7:D1:1", "conv-7:D1:2", "conv-7:D1:10", "conv-7:D2:1")]
    assert sorted(chain(order[0])) == [(f"follows:{order[0]}:{n}", a, b) for n, (a, b) in enumerate(zip(order, order[1:]), 1)]
    assert sorted(chain(chat[1])) == [(f"follows:{chat[1]}:1", chat[1], chat[2]), (f"follows:{chat[1]}:2", chat[2], chat[0])]
    edge = svc.facts.live_edge(TENANT, f"follows:{order[0]}:1")
    assert edge.edge_type == "FOLLOWS" and edge.weight == 1.0 and edge.properties == {}

    head = svc.store.last_position()
    assert organizer.cluster()["follows_linked"] == 0 and svc.store.last_position() == head

    [late] = add(svc, [MemoryContent(memory="turn conv-7:D1:5", sources=("conv-7:D1:5",))])
    report = organizer.cluster()
    order.insert(2, late)
    assert sorted(chain(order[0])) == [(f"follows:{order[0]}:{n}", a, b) for n, (a, b) in enumerate(zip(order, order[1:]), 1)]
    assert report["follows_unlinked"] == 2 and report["follows_linked"] == 3  # only the changed links


def test_follows_edges_hold_no_part_of_a_forgotten_conversation(tmp_path, settings):
    """The conversation id is the memories' own (sealed) data: a forgotten subject leaves none of it in an edge's id or properties, in any read or file."""
    svc = MemoryService.open(tmp_path / "data", settings=settings)
    try:
        ctx = CommandContext(tenant=TENANT)
        lines = [MemoryContent(memory=f"chat line {n}", subject="u-1", properties={"conv": "ZqxSecretConversation", "turn": n}) for n in (1, 2, 3)]
        ids = add(svc, lines)
        organizer = Organizer(svc, settings)
        assert organizer.cluster()["follows_linked"] == 2
        edges = svc.facts.live_edges_with_prefix(TENANT, "follows:")
        assert sorted((e.source, e.target) for e in edges) == [(ids[0], ids[1]), (ids[1], ids[2])]
        assert all("ZqxSecret" not in e.edge_id and "ZqxSecret" not in json.dumps(e.properties) for e in edges)
        svc.forget(ctx, "u-1", reason="erasure")
        organizer.cluster()  # the erased turns place themselves in no conversation: their chain goes
        assert svc.facts.live_edges_with_prefix(TENANT, "follows:") == []
        assert all("ZqxSecret" not in e.edge_id for e in svc.graph.edge_lives(TENANT, ids[0], "FOLLOWS"))
    finally:
        svc.close()
    leaked = [p.name for p in (tmp_path / "data").rglob("*") if p.is_file() and b"ZqxSecret" in p.read_bytes()]
    assert leaked == []


# -- topic titles from an LLM --------------------------------------------------------------------------


@pytest.fixture
async def fake_llm(aiohttp_server):
    state = {"fail": False, "calls": 0}

    async def handle(request: web.Request) -> web.Response:
        state["calls"] += 1
        if state["fail"]:
            return web.Response(status=500, text="down")
        answer = {"title": "Cooking at home", "summary": "Recipes and kitchen habits."}
        return web.json_response({"choices": [{"index": 0, "message": {"role": "assistant", "content": json.dumps(answer)}}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    server = await aiohttp_server(app, host="127.0.0.1")
    state["url"] = str(server.make_url("/v1"))
    return state


async def test_llm_names_topics_and_extractive_is_the_fallback(tmp_path, fake_llm):
    settings = make_settings()
    svc = MemoryService.open(tmp_path, settings=settings)
    judge = LLMJudge(fake_llm["url"], "test-model", None, timeout_s=5, retries=0, backoff_s=0.01)
    organizer = Organizer(svc, settings, judge=judge)
    loop = asyncio.get_running_loop()
    try:
        await loop.run_in_executor(None, add, svc, themed("kitchen", 22))
        await organizer.acluster(TENANT)
        [topic] = live_topics(svc).values()
        assert topic["key"] == "Cooking at home" and topic["memory"] == "Recipes and kitchen habits."
        assert topic["properties"]["summarizer"] == "llm" and fake_llm["calls"] >= 1

        fake_llm["fail"] = True
        await loop.run_in_executor(None, add, svc, themed("space", 22))
        await organizer.acluster(TENANT)
        extractive = [t for t in live_topics(svc).values() if t["properties"]["summarizer"] != "llm"]
        assert extractive and all(t["properties"]["summarizer"].startswith("extractive (llm failed") for t in extractive)
        assert all(t["memory"].startswith("Topic: ") for t in extractive)
    finally:
        await organizer.aclose()
        svc.close()


# -- summaries ----------------------------------------------------------------------------------------


class _Summarizer:
    def __init__(self, error: Exception):
        self.error = error

    async def summarize_topic(self, texts):
        raise self.error


def test_an_unavailable_endpoint_keeps_the_extractive_summary_and_a_bug_is_not_hidden(svc, settings):
    from mnemolog.projections.policies.llm_judge import LLMUnavailable
    from mnemolog.projections.policies.topics import Cluster

    down = TopicBuilder(svc, settings, Vectors(svc, "hashing"), summarizer=_Summarizer(LLMUnavailable("timeout after 5s")))
    cluster = Cluster(members=["a"], sample=["a text"])
    asyncio.run(down.summarize([cluster]))
    assert cluster.summarizer == "extractive (llm failed: timeout after 5s)"
    broken = TopicBuilder(svc, settings, Vectors(svc, "hashing"), summarizer=_Summarizer(TypeError("a bug in the summarizer")))
    with pytest.raises(TypeError):
        asyncio.run(broken.summarize([Cluster(members=["a"], sample=["a text"])]))


def test_memories_of_a_named_subject_stay_out_of_topics(svc, settings):
    for theme in ("kitchen", "money"):
        add(svc, themed(theme, 14))
    private = [MemoryContent(memory=c.memory, properties=c.properties, subject="u-9") for c in themed("space", 14)]
    private_ids = set(add(svc, private))
    report = Organizer(svc, settings).cluster()
    topics = live_topics(svc)
    assert report["created"] == 2 and len(topics) == 2
    assert not private_ids & {target for _, _, target in parent_edges(svc)}
    assert not any(word in json.dumps(content) for content in topics.values() for word in ("telescope", "nebula", "astronaut"))


def test_a_topic_quoting_a_memory_given_to_a_subject_later_is_erased_with_the_subject(svc, settings):
    """Topics quote members without a subject (the tenant's key seals them). A member given a subject afterwards,
    then forgotten: the topic kept quoting its text ("Example: …") in every read, its history and the log."""
    from mnemolog.eventstore.model import Conflict
    from mnemolog.eventstore.sealing import ERASED_TEXT

    for theme in ("kitchen", "space"):
        add(svc, themed(theme, 14))
    Organizer(svc, settings).cluster()
    topic_id, content = next(iter(live_topics(svc).items()))
    member = content["properties"]["representative"]
    quoted = svc.get(TENANT, member).memory
    assert quoted in content["memory"]
    ctx = CommandContext(tenant=TENANT)
    svc.run(svc.memories.update, ctx, member, {"subject": "u-1"})
    result = svc.forget(ctx, "u-1", reason="request 7")
    assert result.data["memories_erased"] == 2  # the member and the topic that quotes it
    assert svc.get(TENANT, topic_id).erased and svc.get(TENANT, topic_id).memory == ERASED_TEXT
    assert all(v["memory"] == ERASED_TEXT for v in svc.history(TENANT, topic_id))
    with pytest.raises(Conflict, match="erased"):  # nor can a rollback or update write its text back
        svc.run(svc.memories.update, ctx, topic_id, {"tags": ["again"]})
    other_topics = [t for t in live_topics(svc) if t != topic_id]
    assert other_topics and not any(svc.get(TENANT, t).erased for t in other_topics)
    Organizer(svc, settings).cluster()  # the next run goes on (it replaces the erased topic)
    assert all(quoted not in svc.get(TENANT, t).memory for t in live_topics(svc))


def test_the_words_of_a_topic_keep_their_marks():
    """An Indic word was read as its consonants, none three letters long: a cluster of Hindi memories had no
    distinctive word at all."""
    from mnemolog.projections.policies.topics import Terms

    terms = Terms(["हिन्दी भाषा सीखना", "हिन्दी भाषा बोलना", "हिन्दी कविता पढ़ना", "coffee beans roasted", "coffee shop opened"])
    hindi, english = terms.top([[0, 1, 2], [3, 4]])
    assert "हिन्दी" in hindi and "coffee" in english


def test_a_cluster_that_keeps_most_of_its_members_revises_its_topic_in_place(svc, settings):
    """A few memories added to a theme changed its cluster's fingerprint, and the run retired the topic and wrote a
    new one, unlinking and linking again every member: the log grew by twice the topic's size on each run. The
    topic is now revised: one update, an edge for each new member; the rest of its edges stay, and a revert of the
    run brings back its text and members, and sticks."""
    for theme in ("kitchen", "space", "money"):
        add(svc, themed(theme, 14))
    organizer = Organizer(svc, settings)
    organizer.cluster()
    before, before_edges = live_topics(svc), set(parent_edges(svc))
    newcomers = add(svc, themed("kitchen", 3, seed=3))
    head = svc.store.last_position()
    report = organizer.cluster()
    assert (report["created"], report["revised"], report["retired"], report["kept"]) == (0, 1, 0, 2), report
    events = svc.store.read_all(after=head, correlation_id=report["correlation_id"])
    assert sorted(e.type for e in events) == ["EdgeLinked"] * 3 + ["MemoryUpdated"], [e.type for e in events]
    after, edges = live_topics(svc), set(parent_edges(svc))
    assert set(after) == set(before) and before_edges < edges
    (kitchen,) = {s for _, s, t in edges if t in newcomers}
    assert after[kitchen]["properties"]["size"] == 17 and after[kitchen]["properties"]["fingerprint"] != before[kitchen]["properties"]["fingerprint"]
    assert after[kitchen]["properties"]["run"] == report["correlation_id"]
    assert organizer.cluster()["revised"] == 0 and svc.store.last_position() == events[-1].position  # settled: nothing more to write

    svc.run(svc.reverts.revert, CommandContext(tenant=TENANT, actor="operator"), report["correlation_id"])
    assert live_topics(svc) == before and set(parent_edges(svc)) == before_edges
    held = organizer.cluster()
    assert (held["revised"], held["created"], held["held"]) == (0, 0, 1) and live_topics(svc) == before
    # Once the theme changes again, the cluster is new input: revised again.
    add(svc, themed("kitchen", 1, seed=4))
    assert organizer.cluster()["revised"] == 1 and set(live_topics(svc)) == set(before)


def test_a_member_that_moves_leaves_one_topic_and_joins_another_by_single_edges(svc, settings):
    ids = {theme: add(svc, themed(theme, 14)) for theme in ("kitchen", "space")}
    organizer = Organizer(svc, settings)
    organizer.cluster()
    topic_of = {t: s for _, s, t in parent_edges(svc)}
    moved = ids["kitchen"][0]
    svc.run(svc.memories.update, CommandContext(tenant=TENANT), moved, {"memory": "Orbit telescope galaxy nebula comet planet rocket"})
    head = svc.store.last_position()
    report = organizer.cluster()
    assert (report["created"], report["revised"], report["retired"]) == (0, 2, 0), report
    events = svc.store.read_all(after=head, correlation_id=report["correlation_id"])
    assert sorted(e.type for e in events) == ["EdgeLinked", "EdgeUnlinked", "MemoryUpdated", "MemoryUpdated"]
    now = {t: s for _, s, t in parent_edges(svc)}
    assert now[moved] == topic_of[ids["space"][0]] and now[moved] != topic_of[moved]
    assert len(parent_edges(svc)) == 28  # one parent per memory


def test_two_level_topics_revised_run_after_run_keep_one_parent_per_memory_and_revert_whole(tmp_path):
    """Topics with sub-topics are revised too (each new sub-topic revises the old one it keeps most of, the others
    added or retired): after every run each memory has one parent and every topic a child, a rebuild gives the same
    graph, and a revert of the last run gives back the one before."""
    settings = make_settings(organizer_max_cluster_size=12, organizer_min_cluster_size=3, organizer_min_group_size=10)
    rng = random.Random(3)
    with MemoryService.open(tmp_path, settings=settings) as svc:
        for theme in ("kitchen", "space", "money"):
            add(svc, themed(theme, 30))
        organizer = Organizer(svc, settings)
        organizer.cluster()
        revised = 0
        for round_ in range(4):
            before = (live_topics(svc), set(parent_edges(svc)))
            add(svc, themed(rng.choice(["kitchen", "space", "money"]), 2, seed=10 + round_))
            report = organizer.cluster()
            revised += report["revised"]
            topics, edges = live_topics(svc), parent_edges(svc)
            parents = Counter(t for _, _, t in edges if t not in topics)
            assert set(parents.values()) == {1}, report
            assert all(any(s == t for _, s, _ in edges) for t in topics), report
        assert revised and any(c["properties"]["level"] == 2 for c in topics.values())
        revisions = [r.event.content.properties["level"] for r in svc.store.read_all(tenant=TENANT, types=["MemoryUpdated"])]
        assert 2 in revisions and 1 in revisions  # sub-topics revised in place too
        svc.run(svc.reverts.revert, CommandContext(tenant=TENANT, actor="operator"), report["correlation_id"])
        assert (live_topics(svc), set(parent_edges(svc))) == before
        graph = set(parent_edges(svc))
        svc.runner.rebuild(["graph"])
        assert set(parent_edges(svc)) == graph


def _growth(tmp_path, refit_share: float) -> tuple[dict, list, list[str], MemoryService]:
    """Three themes of 40 clustered into topics with sub-topics; then 3 more memories of one theme, clustered again."""
    settings = make_settings(organizer_max_cluster_size=12, organizer_min_cluster_size=3, organizer_min_group_size=10, organizer_refit_share=refit_share)
    svc = MemoryService.open(tmp_path / str(refit_share), settings=settings)
    for theme in ("kitchen", "space", "money"):
        add(svc, themed(theme, 40))
    organizer = Organizer(svc, settings)
    organizer.cluster()
    newcomers = add(svc, themed("space", 3, seed=7))
    head = svc.store.last_position()
    report = organizer.cluster()
    return report, svc.store.read_all(after=head), newcomers, svc


def test_a_few_new_memories_join_the_live_topics_and_the_rest_stay_put(tmp_path):
    """Re-partitioned from scratch on every run, 3 new memories among 120 moved dozens of others between
    sub-topics (each move two edge events): k-means has many near-equal optima. Placed into the live topics,
    they join the nearest, and only a sub-topic grown past the maximum is split again."""
    report, written, newcomers, svc = _growth(tmp_path, 0.25)
    with svc:
        assert report["created"] == report["retired"] == 0 and not report["errors"], report
        unlinked = [r for r in written if r.type == "EdgeUnlinked"]
        linked = {r.event.edge.target for r in written if r.type == "EdgeLinked"}
        assert set(newcomers) <= linked and len(unlinked) <= 12, [r.type for r in written]  # at most one split sub-topic's share
        topics, edges = live_topics(svc), parent_edges(svc)
        parents = Counter(t for _, _, t in edges if t not in topics)
        assert set(parents.values()) == {1} and len(parents) == 123
        parent = {t: s for _, s, t in edges}
        for newcomer in newcomers:  # each joined a topic of its theme
            top = parent[newcomer] if topics[parent[newcomer]]["properties"]["level"] == 1 else parent[parent[newcomer]]
            under = [m for m in parents if top in (parent[m], parent.get(parent[m]))]
            assert themes_of(svc, under).most_common(1)[0][0] == "space"
        head = svc.store.last_position()
        assert Organizer(svc, svc.settings).cluster()["revised"] == 0 and svc.store.last_position() == head  # settled


def test_re_partitioning_every_run_moves_more(tmp_path):
    placed = _growth(tmp_path, 0.25)
    refit = _growth(tmp_path, 0.0)
    for *_, svc in (placed, refit):
        svc.close()
    moved = [sum(r.type == "EdgeUnlinked" for r in written) for _, written, _, _ in (placed, refit)]
    assert moved[0] < moved[1], moved


def test_more_new_memories_than_the_refit_share_re_partition(tmp_path):
    settings = make_settings(organizer_max_cluster_size=12, organizer_min_cluster_size=3, organizer_min_group_size=10)
    with MemoryService.open(tmp_path, settings=settings) as svc:
        add(svc, themed("kitchen", 20) + themed("space", 20))
        organizer = Organizer(svc, settings)
        organizer.cluster()
        add(svc, themed("music", 20) + themed("travel", 20))  # half the memories in no topic
        report = organizer.cluster()
        topics, edges = live_topics(svc), parent_edges(svc)
        tops = {s for _, s, t in edges if s in topics and topics[s]["properties"]["level"] == 1}
        parent = {t: s for _, s, t in edges}
        by_top = defaultdict(list)
        for member in (t for t in parent if t not in topics):
            by_top[parent[member] if parent[member] in tops else parent[parent[member]]].append(member)
        assert report["created"] >= 1 and len(tops) >= 4, report
        assert all(len(themes_of(svc, ids)) == 1 for ids in by_top.values())  # music and travel got topics of their own


def test_memories_of_a_new_theme_get_a_topic_of_their_own_rather_than_joining_the_nearest(tmp_path, settings):
    """Fewer than organizer_refit_share of the memories, all of a theme no topic holds: placed into the nearest
    topics, they were split between the kitchen and the space topics, and never got a topic of their own."""
    with MemoryService.open(tmp_path, settings=settings) as svc:
        add(svc, themed("kitchen", 30) + themed("space", 30))
        organizer = Organizer(svc, settings)
        organizer.cluster()
        before = live_topics(svc)
        music = add(svc, themed("music", 14))
        report = organizer.cluster()
        topics, edges = live_topics(svc), parent_edges(svc)
        assert set(before) < set(topics) and report["created"] == 1 and report["revised"] == report["retired"] == 0, report
        parent = {t: s for _, s, t in edges}
        assert len({parent[m] for m in music}) == 1 and set(themes_of(svc, [t for t, s in parent.items() if s == parent[music[0]]])) == {"music"}


def test_topics_are_re_partitioned_once_the_tenant_has_doubled_since_the_last_partition(tmp_path):
    """Placed run after run, topics would keep the shape of the tenant's first few memories for good: a run
    re-partitions once the candidates are more than twice those of the last re-partition (kept in the topics)."""
    settings = make_settings(organizer_max_cluster_size=12, organizer_min_cluster_size=3, organizer_min_group_size=10)
    with MemoryService.open(tmp_path, settings=settings) as svc:
        add(svc, themed("kitchen", 12) + themed("space", 12))
        organizer = Organizer(svc, settings)
        organizer.cluster()
        assert {c["properties"]["partitioned_at"] for c in live_topics(svc).values()} == {24}
        for round_ in range(4):  # 5 more a round, under the refit share each time: placed, the count kept
            add(svc, themed(("kitchen", "space")[round_ % 2], 5, seed=20 + round_))
            organizer.cluster()
            assert {c["properties"]["partitioned_at"] for c in live_topics(svc).values()} == {24}
        add(svc, themed("kitchen", 5, seed=30))  # 49 candidates: more than twice 24
        organizer.cluster()
        assert {c["properties"]["partitioned_at"] for c in live_topics(svc).values()} == {49}
