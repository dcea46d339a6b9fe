"""The organizer's decisions on texts that only look alike, and reverts of its merges once its structure took them in."""

from __future__ import annotations

import pytest

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.policies.organizer import Organizer
from tests.projections.test_organizer import TENANT, activated, add, events, make_settings, view


@pytest.fixture
def settings() -> Settings:
    return make_settings()


def test_texts_differing_in_a_sign_or_a_denial_are_never_merged(svc, settings):
    """A minus sign was read as punctuation: "-5 degrees" and "5 degrees" had one normalised text and were merged,
    the archived one's value lost; "X" and "'X' is false" were merged by containment into the denial."""
    cold, warm, balance, credit = add(svc, "The freezer is set to -18 degrees", "The freezer is set to 18 degrees",
                                      "My account balance is -250 euros", "my account balance is 250 euros.")
    stated, denied = add(svc, "The office alarm code is written on the whiteboard",
                         '"The office alarm code is written on the whiteboard" is false')
    report = Organizer(svc, settings).run_once()
    assert not [p for p in report["planned"] if p["action"] == "merge"]
    assert not events(svc, "MemoriesMerged")
    assert {stated, denied} <= set(activated(svc))
    for older, newer in ((cold, warm), (balance, credit)):  # two values: either both stay, or the newer supersedes
        assert newer in activated(svc) and (older in activated(svc) or view(svc, older).status == "archived")



def test_a_question_is_never_merged_into_the_statement_it_asks_about(svc, settings):
    """The question mark was punctuation: "Alice lives in Berlin?" merged with "Alice lives in Berlin", and the
    merged memory kept the newer text, the question."""
    stated, asked = add(svc, "Alice lives in Berlin", "alice lives in berlin?")
    assert Organizer(svc, settings).run_once()["applied"] == 0
    assert activated(svc) == {stated: "Alice lives in Berlin", asked: "alice lives in berlin?"}


def test_two_turns_of_a_conversation_saying_the_same_are_never_merged(svc, settings):
    """Turns placed in a conversation by their sources ("c1:D1:2", "c1:D1:4") were merged when they said the same
    ("Okay, sounds good"): sources join, so nothing looked lost, but one turn's place went, and the organizer's own
    conversation order then read the merged turn at the other's place. The same turn written twice still merges."""
    texts = ["I just adopted a cat named Milo", "Okay, sounds good to me", "What food does Milo like?", "okay, sounds good to me!", "He likes tuna"]
    turns = add(svc, *[MemoryContent(memory=t, sources=(f"c1:D1:{i}",)) for i, t in enumerate(texts, 1)])
    [again] = add(svc, MemoryContent(memory="He likes tuna.", sources=("c1:D1:5",)))
    organizer = Organizer(svc, settings)
    organizer.run_once()
    merged = events(svc, "MemoriesMerged")
    assert [sorted(e.event.source_ids) for e in merged] == [sorted([turns[4], again])]
    assert {turns[1], turns[3]} <= set(activated(svc))
    organizer.cluster(TENANT)
    chain = {e.source: e.target for e in svc.graph.edges_between(TENANT, list(activated(svc)), edge_types=["FOLLOWS"])}
    assert [chain.get(t) for t in turns[:3]] == turns[1:4]  # 1 -> 2 -> 3 -> 4, then 4 -> the merged fifth turn


def test_a_merge_the_topics_and_conversation_order_took_in_since_is_still_reverted_without_force(svc):
    """Once a clustering run had put the merged memory under a topic or in a conversation's order (a server runs one
    every 100 s), the revert of the merge was refused: the organizer's own PARENT and FOLLOWS edges on the memory
    it deletes were conflicts, and forcing it also dropped any edge a user had linked there. They now go with it,
    and the next run derives them again from the memories the revert brought back."""
    settings = make_settings(organizer_min_group_size=5, organizer_min_cluster_size=2)
    cats = add(svc, *[f"My cat number {i} likes fish and sleeping on the sofa" for i in range(6)])
    a, b = add(svc, "My cat number 7 likes fish and sleeping on the sofa!", "my cat number 7 likes fish and sleeping on the sofa")
    places = [("Do you have pets?", 1), ("Yes, a cat", 2), ("yes, a cat!", 2), ("What is its name?", 3)]  # one turn written twice
    turns = add(svc, *[MemoryContent(memory=t, sources=(f"c1:D1:{i}",)) for t, i in places])
    organizer = Organizer(svc, settings)
    report = organizer.run_once()
    merged = {tuple(sorted(e.event.source_ids)): e.event.memory_id for e in events(svc, "MemoriesMerged")}
    assert set(merged) == {tuple(sorted((a, b))), tuple(sorted(turns[1:3]))}
    run = organizer.cluster(TENANT)
    assert run["created"] >= 1 and run["follows_linked"] == 2
    merged_id, merged_turn = merged[tuple(sorted((a, b)))], merged[tuple(sorted(turns[1:3]))]
    assert [e for e in svc.edges_of(TENANT, merged_id) if e.edge_type == "PARENT"]
    assert {e.edge_type for e in svc.edges_of(TENANT, merged_turn)} >= {"FOLLOWS"}
    [mine] = add(svc, "A note of mine about the cat")
    svc.run(svc.edges.link, CommandContext(tenant=TENANT), mine, merged_id, "RELATED", edge_id="user:notes:1")
    refused = svc.run(svc.reverts.revert, CommandContext(tenant=TENANT), report["correlation_id"], dry_run=True)
    assert refused.data["conflicts"] == [f"edge user:notes:1 touches {merged_id}, which the revert removes"]  # a user's edge still is one
    svc.run(svc.edges.unlink, CommandContext(tenant=TENANT), "user:notes:1")
    result = svc.run(svc.reverts.revert, CommandContext(tenant=TENANT), report["correlation_id"])
    assert not result.data["conflicts"] and not result.data["forced"]
    for gone in (merged_id, merged_turn):
        assert view(svc, gone).status == "deleted" and not svc.edges_of(TENANT, gone)
    assert {view(svc, m).status for m in (a, b, *cats, *turns)} == {"activated"}
    organizer.cluster(TENANT)
    assert {a, b} & {e.target for e in svc.facts.live_edges_with_prefix(TENANT, "parent:")}
    assert {e.source for e in svc.facts.live_edges_with_prefix(TENANT, "follows:")} & set(turns[1:3])
