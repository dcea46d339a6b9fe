"""The organizer beside other writers: a memory another process edits between a pass's read and its write."""

from __future__ import annotations

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.projections.policies.organizer import Organizer

import pytest

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
