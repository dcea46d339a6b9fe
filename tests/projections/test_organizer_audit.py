"""The organizer's decisions as an auditor reads them: whose data they judge, what their reasons
keep after a forget, how they revert, and that nothing is redone or written twice."""

from __future__ import annotations

import asyncio
import json

from aiohttp import web
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

import mnemolog.api.settings  # noqa: F401 - declares the server settings used below

from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import Conflict, MemoryContent
from mnemolog.eventstore.sealing import ERASED_TEXT
from mnemolog.projections.policies.judge import RuleJudge
from mnemolog.projections.policies.llm_judge import LLMJudge
from mnemolog.projections.policies.organizer import Organizer
from mnemolog.projections.policies.topics import TopicBuilder
from mnemolog.projections.service import MemoryService

import pytest

from tests.projections import test_topics as topics
from tests.projections.support import choke_on
from tests.projections.test_organizer import TENANT, activated, add, events, make_settings

SECRET = "Zanzibarville"


@pytest.fixture
def settings():
    return make_settings()


def keyed(text: str, key: str, subject: str | None = None) -> MemoryContent:
    return MemoryContent(memory=text, key=key, subject=subject)


# -- whose data a decision judges ------------------------------------------------------------------


def test_memories_of_two_subjects_are_never_judged_together(svc, settings):
    # One slot ("home city") of two people: different facts, neither contradicts the other.
    [u1] = add(svc, keyed(f"Home city: {SECRET}", "home city", "u-1"))
    [u2] = add(svc, keyed("Home city: Quillbertown", "home city", "u-2"))
    same = add(svc, MemoryContent(memory="Plays the xylophone daily", subject="u-1"), MemoryContent(memory="plays the xylophone daily!", subject="u-2"))
    report = Organizer(svc, settings).run_once()
    assert report["planned"] == []  # not even tried (a merge across subjects would only be refused)
    assert set(activated(svc)) == {u1, u2, *same}


def test_the_same_subject_is_still_organized_among_others(svc, settings):
    [older] = add(svc, keyed(f"Home city: {SECRET}", "home city", "u-1"))
    add(svc, *(keyed(f"Home city: Town {n}", "home city", f"u-{n}") for n in range(2, 30)))  # many other people, same slot
    [newer] = add(svc, keyed("Home city: Quillbertown", "home city", "u-1"))
    report = Organizer(svc, settings).run_once()
    assert [(p["action"], p["memory_ids"], p["outcome"]) for p in report["planned"]] == [("supersede", [older, newer], "applied")]


def test_erased_memories_are_never_candidates(svc, settings):
    add(svc, MemoryContent(memory=f"{SECRET} is where I grew up", subject="u-1"), MemoryContent(memory=f"{SECRET.lower()} is where i grew up", subject="u-1"))
    add(svc, MemoryContent(memory="Bob plays chess", subject="u-2"), MemoryContent(memory="Carol plays chess", subject="u-3"))
    forget = CommandContext(tenant=TENANT, actor="privacy-officer")
    for subject in ("u-1", "u-2", "u-3"):
        svc.forget(forget, subject)  # every memory now reads as the same marker, with no subject: nothing left to judge
    assert Organizer(svc, settings).run_once()["planned"] == []


def test_an_automatic_supersede_across_subjects_is_refused(svc):
    [a] = add(svc, keyed("Home city: Paris", "home city", "u-1"))
    [b] = add(svc, keyed("Home city: Rome", "home city", "u-2"))
    decision = c.Decision(judge="rule", reason="Paris vs Rome")
    with pytest.raises(Conflict, match="subject"):
        svc.run(svc.memories.supersede, CommandContext(tenant=TENANT), a, b, decision=decision)


# -- what a decision's reason keeps after a forget ---------------------------------------------------


def test_a_decisions_reason_is_erased_with_its_subject(tmp_path, settings):
    data = tmp_path / "data"
    svc = MemoryService.open(data, settings=settings)
    try:
        [older] = add(svc, keyed(f"Home city: {SECRET}", "home city", "u-1"))
        add(svc, keyed("Home city: Quillbertown", "home city", "u-1"))
        add(svc, MemoryContent(memory=f"{SECRET} plays the xylophone", subject="u-1"), MemoryContent(memory=f"{SECRET.lower()} plays the xylophone!", subject="u-1"))
        report = Organizer(svc, settings).run_once()
        assert sorted(p["action"] for p in report["planned"]) == ["merge", "supersede"]
        decided = {r.type: c.decision_of(r.event) for r in svc.store.read_all(types=["MemorySuperseded", "MemoriesMerged"])}
        assert SECRET.lower() in decided["MemorySuperseded"].reason.lower()  # the auditor reads why, while the subject exists
        assert decided["MemorySuperseded"].judge == "rule" and decided["MemorySuperseded"].similarity is not None
        assert any(SECRET.lower() in v["reason"].lower() for v in svc.history(TENANT, older))
        svc.forget(CommandContext(tenant=TENANT, actor="privacy-officer"), "u-1")
        after = {r.type: c.decision_of(r.event) for r in svc.store.read_all(types=["MemorySuperseded", "MemoriesMerged"])}
        assert {d.reason for d in after.values()} == {ERASED_TEXT}
        assert after["MemorySuperseded"].judge == "rule"  # who decided, and how similar, stay readable
        assert not any(SECRET.lower() in v["reason"].lower() for v in svc.history(TENANT, older))
        assert svc.store.verify().ok
    finally:
        svc.close()
    leaked = [p.name for p in data.rglob("*") if p.is_file() and any(n in p.read_bytes() for n in (SECRET.encode(), SECRET.lower()[:-1].encode()))]
    assert leaked == []


# -- which of a contradictory pair is newer --------------------------------------------------------


def test_a_merge_of_older_statements_never_supersedes_a_newer_one(svc, settings):
    add(svc, keyed("Editor: Vim", "editor"))
    add(svc, keyed("editor: vim", "editor"))
    [emacs] = add(svc, keyed("Editor: Emacs", "editor"))  # stated after both
    report = Organizer(svc, settings).run_once()
    assert [p["action"] for p in report["planned"]] == ["merge", "supersede"]
    [merged] = events(svc, "MemoriesMerged")
    [superseded] = events(svc, "MemorySuperseded")  # the merge's product is as old as its sources: the newer value stays
    assert (superseded.event.memory_id, superseded.event.superseded_by) == (merged.event.memory_id, emacs)
    assert list(activated(svc).values()) == ["Editor: Emacs"]


def test_a_merge_restated_by_an_update_is_newer(svc, settings):
    add(svc, keyed("Editor: Vim", "editor"), keyed("editor: vim", "editor"))
    organizer = Organizer(svc, settings)
    organizer.run_once()
    [merged] = events(svc, "MemoriesMerged")
    [emacs] = add(svc, keyed("Editor: Emacs", "editor"))
    svc.run(svc.memories.update, CommandContext(tenant=TENANT), merged.event.memory_id, {"memory": "Editor: Neovim"})
    organizer.run_once()
    [superseded] = events(svc, "MemorySuperseded")
    assert (superseded.event.memory_id, superseded.event.superseded_by) == (emacs, merged.event.memory_id)


# -- reverts ---------------------------------------------------------------------------------------


def test_a_reverted_decision_is_judged_again_once_its_inputs_change(svc, settings):
    [vim] = add(svc, keyed("Editor: Vim", "editor"))
    [emacs] = add(svc, keyed("Editor: Emacs", "editor"))
    organizer = Organizer(svc, settings)
    reverted = organizer.run_once()["correlation_id"]
    svc.run(svc.reverts.revert, CommandContext(tenant=TENANT, actor="operator"), reverted)
    svc.run(svc.memories.update, CommandContext(tenant=TENANT), emacs, {"tags": ("tools",)})  # not its text: still the reverted inputs
    assert organizer.run_once()["planned"] == []
    svc.run(svc.memories.update, CommandContext(tenant=TENANT), vim, {"memory": "Editor: Helix"})  # a new statement
    report = organizer.run_once()
    assert [(p["action"], p["memory_ids"], p["outcome"]) for p in report["planned"]] == [("supersede", [emacs, vim], "applied")]
    assert list(activated(svc).values()) == ["Editor: Helix"]


def test_a_reverted_clustering_run_is_not_redone_until_its_members_change(svc, settings):
    for theme in ("kitchen", "space", "money"):
        topics.add(svc, topics.themed(theme, 14))
    organizer = Organizer(svc, settings)
    first = organizer.cluster()
    assert first["created"] == 3
    svc.run(svc.reverts.revert, CommandContext(tenant=TENANT, actor="operator"), first["correlation_id"])
    head = svc.store.last_position()
    again = Organizer(svc, settings).cluster()  # a fresh organizer too: what was reverted is read from the log
    assert (again["created"], again["held"]) == (0, 3) and topics.live_topics(svc) == {}
    assert svc.store.last_position() == head
    topics.add(svc, topics.themed("kitchen", 14, seed=2))  # new members: new input
    changed = organizer.cluster()
    assert changed["created"] >= 1 and topics.live_topics(svc)


def test_a_reverted_replacement_of_topics_keeps_the_topics_it_brought_back(svc, settings):
    for theme in ("kitchen", "space", "money"):
        topics.add(svc, topics.themed(theme, 14))
    organizer = Organizer(svc, settings)
    organizer.cluster()
    before = set(topics.live_topics(svc))
    topics.add(svc, topics.themed("kitchen", 14, seed=2))
    replaced = organizer.cluster()
    assert replaced["retired"] >= 1
    svc.run(svc.reverts.revert, CommandContext(tenant=TENANT, actor="operator"), replaced["correlation_id"])
    assert set(topics.live_topics(svc)) == before
    after = organizer.cluster()
    assert after["created"] == 0 and after["retired"] == 0 and set(topics.live_topics(svc)) == before


def test_a_reverted_conversation_order_is_not_linked_again_until_it_changes(svc, settings):
    turns = [f"conv-7:D1:{n}" for n in (1, 2, 3)]
    ids = add(svc, *(MemoryContent(memory=f"turn {t}", sources=(t,)) for t in turns))
    organizer = Organizer(svc, settings)
    linked = organizer.cluster()
    assert linked["follows_linked"] == 2
    svc.run(svc.reverts.revert, CommandContext(tenant=TENANT, actor="operator"), linked["correlation_id"])
    assert organizer.cluster()["follows_linked"] == 0 and not svc.facts.live_edges_with_prefix(TENANT, "follows:")
    [late] = add(svc, MemoryContent(memory="turn conv-7:D1:4", sources=("conv-7:D1:4",)))
    assert organizer.cluster()["follows_linked"] == 3
    chain = sorted((e.source, e.target) for e in svc.facts.live_edges_with_prefix(TENANT, f"follows:{ids[0]}:"))
    assert chain == sorted(zip([*ids, late], [*ids, late][1:]))


def test_a_decision_planned_before_a_forget_is_not_applied_after_it(svc, settings):
    [older] = add(svc, keyed(f"Home city: {SECRET}", "home city", "u-1"))
    [newer] = add(svc, keyed("Home city: Quillbertown", "home city", "u-1"))
    organizer = Organizer(svc, settings)
    [planned] = organizer.plan(svc.store.read_all())
    assert planned.action == "supersede" and SECRET in planned.decision.reason
    svc.forget(CommandContext(tenant=TENANT, actor="privacy-officer"), "u-1")  # while the pass was judging
    outcome = svc.run(organizer.apply, planned, "pass-1")
    assert outcome.startswith("skipped") and "erased" in outcome
    assert events(svc, "MemorySuperseded") == [] and {svc.get(TENANT, m).status for m in (older, newer)} == {"activated"}


def test_a_topic_planned_before_a_forget_of_its_members_is_not_written(svc, settings):
    for theme in ("kitchen", "space"):
        topics.add(svc, topics.themed(theme, 14))
    builder = TopicBuilder(svc, settings, Organizer(svc, settings).vectors)
    planned = builder.plan(TENANT, "LongTermMemory", deadline=float("inf"))
    assert planned["new"]
    svc.forget(CommandContext(tenant=TENANT, actor="privacy-officer"), "@tenant")  # the tenant's key: every member erased
    with pytest.raises(Conflict, match="erased"):
        builder.write(TENANT, "LongTermMemory", planned["new"][0], [], "run-1", [0])
    assert topics.live_topics(svc) == {}


# -- the LLM judge ---------------------------------------------------------------------------------


@pytest.fixture
async def flaky_llm(aiohttp_server):
    """An OpenAI-compatible endpoint that says redundant, and fails (503) on any pair with a '!' in it."""

    async def handle(request: web.Request) -> web.Response:
        user = (await request.json())["messages"][1]["content"]
        if "!" in user:
            return web.Response(status=503, text="overloaded")
        answer = {"label": "redundant", "reason": "the same move", "fused_text": None}
        return web.json_response({"choices": [{"index": 0, "message": {"role": "assistant", "content": json.dumps(answer)}}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    server = await aiohttp_server(app, host="127.0.0.1")
    return str(server.make_url("/v1"))


async def test_a_decision_from_an_llm_and_its_fallback_names_both_judges(svc, settings, flaky_llm):
    judge = LLMJudge(flaky_llm, "test-model", None, timeout_s=5, retries=0, backoff_s=0.01, fallback=RuleJudge())
    organizer = Organizer(svc, settings, judge=judge)
    loop = asyncio.get_running_loop()
    try:
        await loop.run_in_executor(None, add, svc, "The user moved to Lisbon in May", "the user moved to lisbon in may", "The user moved to Lisbon in May!")
        report = await organizer.arun_once()
        assert report["applied"] == 1
        decision = c.decision_of(events(svc, "MemoriesMerged")[0].event)
        assert decision.judge == "llm+rule" and decision.judge_version == f"{judge.version}+{RuleJudge().version}"
        assert "llm: the same move" in decision.reason and "rule: normalised texts equal" in decision.reason
        assert decision.fallback.startswith("llm failed: HTTP 503")
    finally:
        await organizer.aclose()


@pytest.fixture
async def broken_unicode_llm(aiohttp_server):
    """An endpoint whose answers hold a lone surrogate (an emoji cut in half: "\\ud83d"), in the reason and the fused
    text of a verdict, and in a topic's title and summary."""

    async def handle(request: web.Request) -> web.Response:
        user = (await request.json())["messages"][1]["content"]
        if "Memories:" in user:
            content = '{"title": "Trips \\ud83d", "summary": "Where the user moved \\ud83d."}'
        else:
            content = '{"label": "redundant", "reason": "the same move \\ud83d", "fused_text": "The user moved to Lisbon in May \\ud83d"}'
        return web.json_response({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    server = await aiohttp_server(app, host="127.0.0.1")
    return str(server.make_url("/v1"))


async def test_an_answer_holding_a_lone_surrogate_is_recorded_without_it(svc, settings, broken_unicode_llm):
    """A verdict whose reason or fused text held a lone surrogate (valid JSON, not valid Unicode text) failed the
    merge's append, and with it the whole pass: the server's organizer retried the same pass forever, organizing
    nothing after it. The reason keeps a replacement character; the fused text, not faithful, gives way to the rule's merge."""
    judge = LLMJudge(broken_unicode_llm, "test-model", None, timeout_s=5, retries=0, backoff_s=0.01, fallback=RuleJudge())
    organizer = Organizer(svc, settings, judge=judge)
    try:
        await asyncio.get_running_loop().run_in_executor(None, add, svc, "The user moved to Lisbon in May", "the user moved to lisbon in may")
        report = await organizer.arun_once()
        assert report["applied"] == 1
        [merged] = events(svc, "MemoriesMerged")
        decision = c.decision_of(merged.event)
        assert decision.judge == "llm" and decision.reason == "the same move \ufffd"
        assert merged.event.content.memory in ("The user moved to Lisbon in May", "the user moved to lisbon in may")
        title, summary = await judge.summarize_topic(["The user moved to Lisbon in May"])
        assert (title, summary) == ("Trips \ufffd", "Where the user moved \ufffd.")
    finally:
        await organizer.aclose()


def _state(svc, tenant: str = TENANT) -> tuple:
    """What every read shows: the live memories (text, status, key, tags) and the live edges."""
    svc.sync()
    conn = svc.read_conn()
    memories = conn.execute(
        "SELECT memory_id, status, json_extract(content, '$.memory'), key, json_extract(content, '$.tags') FROM graph_memories"
        " WHERE tenant = ? AND valid_to IS NULL AND status != 'deleted' ORDER BY memory_id", (tenant,)).fetchall()
    edges = conn.execute(
        "SELECT edge_type, source, target, weight, properties FROM graph_edges WHERE tenant = ? AND valid_to IS NULL ORDER BY 1, 2, 3", (tenant,)).fetchall()
    return memories, edges


def test_a_reverted_pass_restores_every_read_and_a_revert_of_the_revert_restores_the_pass(svc, settings):
    [user_edge_end] = add(svc, "Carol keeps the harbour logbook")
    a, b = add(svc, "Alice lives in Berlin.", "alice lives in  berlin")
    add(svc, keyed("Editor: Vim", "editor"))
    add(svc, keyed("Editor: Emacs", "editor"))
    svc.run(svc.edges.link, CommandContext(tenant=TENANT), a, user_edge_end, "RELATED", weight=0.5)
    before = _state(svc)
    organizer = Organizer(svc, settings)
    report = organizer.run_once()
    assert report["applied"] == 2
    organized = _state(svc)
    revert = svc.run(svc.reverts.revert, CommandContext(tenant=TENANT, actor="operator"), report["correlation_id"])
    assert _state(svc) == before
    head = svc.store.last_position()
    assert organizer.run_once()["planned"] == [] and svc.store.last_position() == head
    svc.run(svc.reverts.revert, CommandContext(tenant=TENANT, actor="operator"), revert.correlation_id)
    again = _state(svc)
    assert again == organized  # the merge and the supersede are back, the user's edge on the merged memory
    assert organizer.run_once()["planned"] == [] and Organizer(svc, settings).run_once()["planned"] == []


# -- invariants over random memories -----------------------------------------------------------------

TEXTS = ["Editor: Vim", "editor: vim!", "Editor: Emacs", "Alice lives in Berlin.", "alice lives in berlin",
         "Alice moved to Paris", "我住在柏林", "我住在柏林。", "Invoice 1001 is paid", "Invoice 1002 is paid"]
_memories = st.lists(
    st.tuples(st.sampled_from(["t1", "t2"]), st.sampled_from([None, "u-1", "u-2"]), st.sampled_from(TEXTS), st.sampled_from([None, "editor", "home"])),
    min_size=2,
    max_size=12,
)


@hsettings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(batches=st.lists(_memories, min_size=1, max_size=3), updates=st.lists(st.tuples(st.integers(0, 40), st.sampled_from(TEXTS)), max_size=4))
def test_every_decision_is_explained_scoped_idempotent_and_revertable(tmp_path_factory, batches, updates):
    settings = make_settings()
    svc = MemoryService.open(tmp_path_factory.mktemp("organizer"), settings=settings)
    try:
        added: list[tuple[str, str]] = []
        for batch in batches:
            for tenant in ("t1", "t2"):
                contents = [MemoryContent(memory=text, key=key, subject=subject) for t, subject, text, key in batch if t == tenant]
                if contents:
                    added += [(tenant, m) for m in add(svc, *contents, tenant=tenant)]
        for n, text in updates:  # conflicting updates in the same batch of the organizer
            tenant, memory_id = added[n % len(added)]
            svc.run(svc.memories.update, CommandContext(tenant=tenant), memory_id, {"memory": text})
        before = {t: _state(svc, t) for t in ("t1", "t2")}
        organizer = Organizer(svc, settings)
        report = organizer.run_once()
        decided = [r for r in svc.store.read_all(types=["MemoriesMerged", "MemorySuperseded"])]
        assert len(decided) == report["applied"]
        for r in decided:
            decision = c.decision_of(r.event)
            assert decision is not None and decision.judge and decision.reason  # who decided, and why
            assert r.metadata.correlation_id == report["correlation_id"] and r.metadata.causation_id and r.metadata.actor == "organizer"
            ids = r.event.source_ids if r.type == "MemoriesMerged" else (r.event.memory_id, r.event.superseded_by)
            owners = {(svc.get(r.tenant, m).subject if not svc.get(r.tenant, m).erased else None) for m in ids}
            assert len(owners) == 1  # one subject, and (by the tenant-scoped reads) one tenant
        head = svc.store.last_position()
        assert organizer.run_once()["planned"] == [] and svc.store.last_position() == head  # nothing new: nothing appended
        if report["applied"]:
            for tenant in sorted({r.tenant for r in decided}):
                svc.run(svc.reverts.revert, CommandContext(tenant=tenant, actor="operator"), report["correlation_id"])
            assert {t: _state(svc, t) for t in ("t1", "t2")} == before
            head = svc.store.last_position()
            assert organizer.run_once()["planned"] == [] and svc.store.last_position() == head  # the revert sticks
    finally:
        svc.close()


def test_the_cli_says_which_clusters_a_revert_held_back(tmp_path, capsys, monkeypatch):
    from mnemolog.tools.cli import main

    monkeypatch.setenv("MNEMOLOG_ORGANIZER_CLUSTER_INTERVAL_S", "0")
    data = tmp_path / "data"
    with MemoryService.open(data) as svc:
        for theme in ("kitchen", "space", "money"):
            topics.add(svc, topics.themed(theme, 14))
    assert main(["--data-dir", str(data), "--tenant", TENANT, "organize", "--once"]) == 0
    first = capsys.readouterr().out
    run = next(line.split()[1].rstrip(":") for line in first.splitlines() if line.startswith("topics "))
    assert "3 created" in first
    assert main(["--data-dir", str(data), "--tenant", TENANT, "revert", run]) == 0
    capsys.readouterr()
    assert main(["--data-dir", str(data), "--tenant", TENANT, "organize", "--once"]) == 0
    assert "0 created, 0 revised, 0 retired, 0 kept, 3 held back (a revert undid them)" in capsys.readouterr().out


@pytest.mark.parametrize("gone", [14, 10], ids=["orphaned", "no-longer-a-cluster"])
def test_a_reverted_retirement_of_a_topic_is_not_redone(svc, settings, gone):
    kitchen = topics.add(svc, topics.themed("kitchen", 14))
    for theme in ("space", "money"):
        topics.add(svc, topics.themed(theme, 14))
    organizer = Organizer(svc, settings)
    organizer.cluster()
    before = set(topics.live_topics(svc))
    for memory_id in kitchen[:gone]:
        svc.run(svc.memories.soft_delete, CommandContext(tenant=TENANT), memory_id)
    retiring = organizer.cluster()
    assert retiring["retired"] >= 1
    svc.run(svc.reverts.revert, CommandContext(tenant=TENANT, actor="operator"), retiring["correlation_id"])
    assert set(topics.live_topics(svc)) == before
    head = svc.store.last_position()
    again = Organizer(svc, settings).cluster()
    assert (again["created"], again["retired"]) == (0, 0) and set(topics.live_topics(svc)) == before
    assert svc.store.last_position() == head


def test_a_text_the_embedder_raises_on_neither_stops_the_projection_nor_the_pass(tmp_path, settings, monkeypatch):
    """With an embedder that raised on one text, every write failed (the projection's catch-up did); and the
    organizer, embedding what the projection had no vector for, failed its pass, again at every retry."""
    choke_on(monkeypatch, "poison", queries=False)
    with MemoryService.open(tmp_path / "data", settings=settings) as svc:
        ids = add(svc, "The poison ivy grows by the gate", "the poison ivy grows by the gate", "The user moved to Lisbon")
        skipped = dict(svc.read_conn().execute("SELECT memory_id, reason FROM vec_skipped").fetchall())
        assert skipped == dict.fromkeys(ids[:2], "the embedder failed on this text: RuntimeError: the model choked")
        report = Organizer(svc, settings).run_once()
        assert report["applied"] == 1  # the equal texts merged, judged without a cosine
        assert len(events(svc, "MemoriesMerged")) == 1
