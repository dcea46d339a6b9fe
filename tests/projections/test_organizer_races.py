"""The organizer beside other writers: a memory another process edits between a pass's read and its write."""

from __future__ import annotations

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import Conflict, MemoryContent
from mnemolog.projections.policies.organizer import Organizer
from mnemolog.projections.policies.topics import TopicBuilder

import pytest

from tests.projections import test_topics as topics
from tests.projections.test_organizer import TENANT, activated, add, make_settings


@pytest.fixture
def settings():
    return make_settings()


def test_a_merge_skipped_because_a_tag_was_edited_meanwhile_is_made_by_the_next_pass(svc, settings):
    a, b = add(svc, "Alice lives in Berlin.", "alice lives in  berlin")
    organizer = Organizer(svc, settings)
    plan = organizer.plan

    def plan_then_edit(*args, **kwargs):
        planned = plan(*args, **kwargs)
        if planned:  # another process tags the memory after the pass read it, before it writes
            svc.run(svc.memories.update, CommandContext(tenant=TENANT, actor="someone"), a, {"tags": ["home"]})
        return planned

    organizer.plan = plan_then_edit
    first = organizer.run_once()
    assert [p["outcome"].split(":")[0] for p in first["planned"]][:1] == ["skipped"]
    organizer.plan = plan
    organizer.run_once()
    merged = [m for m in activated(svc) if m not in (a, b)]
    assert set(activated(svc)) == set(merged) and len(merged) == 1, activated(svc)
    assert "home" in svc.get(TENANT, merged[0]).tags


def test_duplicates_kept_apart_by_a_value_are_merged_once_an_update_makes_it_the_same(svc, settings):
    a, b = add(svc, MemoryContent(memory="Alice lives in Berlin.", properties={"source": "chat"}), MemoryContent(memory="alice lives in berlin", properties={"source": "email"}))
    organizer = Organizer(svc, settings)
    assert organizer.run_once()["planned"] == []  # a merge would lose one of the two sources
    svc.run(svc.memories.update, CommandContext(tenant=TENANT, actor="someone"), b, {"properties": {"source": "chat"}})
    report = organizer.run_once()
    assert [(p["action"], sorted(p["memory_ids"]), p["outcome"]) for p in report["planned"]] == [("merge", sorted([a, b]), "applied")]


@pytest.mark.parametrize("edited", ["older", "newer"])
def test_a_supersede_is_skipped_when_a_memory_changed_after_the_pass_checked_it(svc, settings, monkeypatch, edited):
    """The pass checks a contradictory pair's versions on the projection, then supersedes: another process's
    edit in between was superseded (or stood as the newer value) though the judge never read it."""
    older, newer = add(svc, MemoryContent(memory="Home city: Paris", key="home city"), MemoryContent(memory="Home city: Rome", key="home city"))
    changed = {"older": older, "newer": newer}[edited]
    supersede = svc.memories.supersede

    def edited_meanwhile(ctx, *args, **kwargs):
        svc.memories.update(CommandContext(tenant=TENANT, actor="someone"), changed, {"memory": "Home city: Rome, since May"})
        return supersede(ctx, *args, **kwargs)

    monkeypatch.setattr(svc.memories, "supersede", edited_meanwhile)
    report = Organizer(svc, settings).run_once()
    outcomes = [(p["action"], p["memory_ids"], p["outcome"].split(":")[0]) for p in report["planned"]]
    assert outcomes[:1] == [("supersede", [older, newer], "skipped")], outcomes  # the edit is judged afresh, in the next round


@pytest.mark.parametrize("how", ["soft_delete", "archive"])
def test_a_topic_planned_before_a_member_left_is_not_written(svc, settings, how):
    """A member deleted or archived between a clustering run's read and its write was linked under the new topic
    anyway: a live PARENT edge on a deleted memory, its words in the topic's title, shown among its members."""
    for theme in ("kitchen", "space"):
        topics.add(svc, topics.themed(theme, 14))
    builder = TopicBuilder(svc, settings, Organizer(svc, settings).vectors)
    planned = builder.plan(TENANT, "LongTermMemory", deadline=float("inf"))
    cluster = planned["new"][0]
    gone = sorted(cluster.all_members)[0]
    getattr(svc.memories, how)(CommandContext(tenant=TENANT, actor="someone"), gone)
    with pytest.raises(Conflict, match=f"{gone} is no longer activated"):
        builder.write(TENANT, "LongTermMemory", cluster, [], "run-1", [0])
    assert topics.live_topics(svc) == {} and svc.facts.live_edges_of(TENANT, [gone]) == []
    report = Organizer(svc, settings).cluster()  # the next run clusters the memories as they are now
    assert report["created"] >= 1 and all(target != gone for _, _, target in topics.parent_edges(svc))


@pytest.mark.parametrize("how", ["soft_delete", "archive"])
def test_a_conversation_order_planned_before_a_turn_left_is_not_linked(svc, settings, how):
    """A turn deleted or archived between a run's read of the conversation and its write got FOLLOWS edges anyway."""
    turns = add(svc, *(MemoryContent(memory=f"chat line {n}", properties={"conv": "chat-9", "turn": n}) for n in (1, 2, 3)))
    builder = TopicBuilder(svc, settings, Organizer(svc, settings).vectors)
    [(conv, unlink, link)] = builder.follows_plan(TENANT)
    getattr(svc.memories, how)(CommandContext(tenant=TENANT, actor="someone"), turns[1])
    with pytest.raises(Conflict, match=f"{turns[1]} is no longer activated"):
        builder.write_follows(TENANT, unlink, link, "run-1")
    assert svc.facts.live_edges_with_prefix(TENANT, "follows:") == []
    Organizer(svc, settings).cluster()  # the next run links the turns that are left
    assert [(e.source, e.target) for e in svc.facts.live_edges_with_prefix(TENANT, "follows:")] == [(turns[0], turns[2])]


def test_a_merge_whose_source_another_process_edits_between_its_read_and_its_append_is_skipped(svc, settings, monkeypatch):
    """The merge reads its sources' versions from the log, then appends expecting them: another process's edit in
    between refuses the append, and the pass skips the pair (judged afresh next round) rather than fail and retry whole."""
    a, b = add(svc, "Alice lives in Berlin.", "alice lives in  berlin")
    append = svc.store.append_batch
    edits = [lambda: svc.memories.update(CommandContext(tenant=TENANT, actor="someone"), a, {"tags": ["home"]})]

    def edited_then_append(*args, **kwargs):
        while edits:
            edits.pop()()
        return append(*args, **kwargs)

    monkeypatch.setattr(svc.store, "append_batch", edited_then_append)
    first = Organizer(svc, settings).run_once()
    assert [p["outcome"].split(":")[0] for p in first["planned"]][:1] == ["skipped"], first
    monkeypatch.undo()
    Organizer(svc, settings).run_once()
    merged = [m for m in activated(svc) if m not in (a, b)]
    assert len(merged) == 1 and "home" in svc.get(TENANT, merged[0]).tags, activated(svc)
