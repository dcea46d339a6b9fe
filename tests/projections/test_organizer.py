"""The organizer: dedup and conflicts as auditable, revertable events, crash-safe and waitable."""

from __future__ import annotations

import asyncio
import inspect
import json
import sys

import pytest

import mnemolog.api.settings  # noqa: F401 - declares the server settings used below

from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import Conflict, MemoryContent
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.policies.judge import RuleJudge, normalize_text
from mnemolog.projections.policies.organizer import TRIGGERS, Organizer
from mnemolog.projections.service import MemoryService

TENANT = "t1"


def make_settings(**overrides) -> Settings:
    base = {"organizer_cluster_interval_s": 0.0, "auth": False}
    return Settings({**base, **overrides}, env={})


@pytest.fixture
def settings() -> Settings:
    return make_settings()


def add(svc, *items, tenant: str = TENANT) -> list[str]:
    contents = [MemoryContent(memory=i) if isinstance(i, str) else i for i in items]
    return list(svc.run(svc.memories.add, CommandContext(tenant=tenant), contents).memory_ids)


def view(svc, memory_id: str, tenant: str = TENANT):
    return svc.get(tenant, memory_id)


def events(svc, type_: str, tenant: str = TENANT):
    return svc.store.read_all(tenant=tenant, types=[type_])


def activated(svc, tenant: str = TENANT) -> dict[str, str]:
    rows = svc.read_conn().execute(
        "SELECT memory_id, json_extract(content, '$.memory') FROM graph_memories WHERE tenant = ? AND valid_to IS NULL AND status = 'activated'",
        (tenant,),
    )
    return dict(rows.fetchall())


# -- dedup -------------------------------------------------------------------------------------


def test_exact_duplicate_in_a_batch_is_merged_with_its_decision(svc, settings):
    a, b, other = add(svc, "Alice lives in Berlin.", "alice lives in  berlin", "Bob plays chess on Sundays")
    organizer = Organizer(svc, settings)
    report = organizer.run_once()
    assert report["applied"] == 1
    merged = events(svc, "MemoriesMerged")
    assert len(merged) == 1
    event = merged[0]
    assert set(event.event.source_ids) == {a, b}
    decision = c.decision_of(event.event)
    assert decision.judge == "rule" and decision.judge_version == RuleJudge().version
    assert decision.similarity > 0.8 and "normalised texts equal" in decision.reason
    assert decision.fallback is None
    assert event.metadata.correlation_id == report["correlation_id"]
    assert event.metadata.actor == "organizer"
    added = events(svc, "MemoryAdded")[0]
    assert event.metadata.causation_id == added.event_id  # the triggering event
    assert view(svc, a).status == "archived" and view(svc, b).status == "archived"
    new = view(svc, event.event.memory_id)
    assert new.status == "activated" and new.memory == "Alice lives in Berlin."
    assert view(svc, other).status == "activated"
    history = svc.history(TENANT, event.event.memory_id)
    assert "rule: normalised texts equal" in history[0]["reason"]


def test_paraphrase_of_an_existing_memory_is_merged_into_the_more_informative(svc, settings):
    organizer = Organizer(svc, settings)
    [first] = add(svc, MemoryContent(memory="The user prefers dark mode in the code editor", tags=("ui",), sources=("chat-1",)))
    assert organizer.run_once()["applied"] == 0
    [second] = add(svc, MemoryContent(memory="Note: the user prefers dark mode in the code editor and the terminal", sources=("chat-2",)))
    report = organizer.run_once()
    assert report["applied"] == 1
    [merged] = events(svc, "MemoriesMerged")
    assert set(merged.event.source_ids) == {first, second}
    assert "containment" in c.decision_of(merged.event).reason
    content = merged.event.content
    assert content.memory == "Note: the user prefers dark mode in the code editor and the terminal"
    assert set(content.sources) == {"chat-1", "chat-2"} and content.tags == ("ui",)


def test_same_key_contradiction_newer_supersedes_older(svc, settings):
    [older] = add(svc, MemoryContent(memory="Home city: Berlin", key="home city"))
    [newer] = add(svc, MemoryContent(memory="Home city: Munich", key="Home City"))
    Organizer(svc, settings).run_once()
    [superseded] = events(svc, "MemorySuperseded")
    assert superseded.event.memory_id == older and superseded.event.superseded_by == newer
    assert "same key" in c.decision_of(superseded.event).reason and c.decision_of(superseded.event).judge == "rule"
    assert view(svc, older).status == "archived" and view(svc, newer).status == "activated"
    edges = svc.edges_of(TENANT, older)
    assert [(e.edge_type, e.target) for e in edges] == [("SUPERSEDED_BY", newer)]


def test_newer_is_decided_by_updated_at_not_by_arrival(svc, settings):
    [first] = add(svc, MemoryContent(memory="Preferred editor: Vim", key="editor"))
    [second] = add(svc, MemoryContent(memory="Preferred editor: Emacs", key="editor"))
    svc.run(svc.memories.update, CommandContext(tenant=TENANT), first, {"tags": ("tools",)})  # first is now the newer
    Organizer(svc, settings).run_once()
    [superseded] = events(svc, "MemorySuperseded")
    assert superseded.event.memory_id == second and superseded.event.superseded_by == first


def test_independent_memories_are_left_alone(svc, settings):
    add(svc, "Alice likes tea", "Alice likes coffee", "Alice visited Paris in 2019", "Alice visited Rome in 2021",
        MemoryContent(memory="Berlin", key="home city"), MemoryContent(memory="Berlin", key="birth city"))
    before = svc.store.last_position()
    report = Organizer(svc, settings).run_once()
    assert report["applied"] == 0 and report["events"] == 6
    assert svc.store.last_position() == before


def test_batch_items_are_compared_with_each_other_and_with_existing(svc, settings):
    [old] = add(svc, "Deploys happen via GitHub Actions")
    batch = add(svc, "deploys happen via github actions!", "DEPLOYS HAPPEN VIA GITHUB ACTIONS", "The staging database is PostgreSQL 15",
                "the staging database is postgresql 15.")
    report = Organizer(svc, settings).run_once()
    merged = sorted((sorted(e.event.source_ids) for e in events(svc, "MemoriesMerged")), key=len)
    assert merged == [sorted(batch[2:]), sorted([old, *batch[:2]])]  # three-way group: one merge
    assert report["applied"] == 2
    texts = sorted(normalize_text(t) for t in activated(svc).values())
    assert texts == ["deploys happen via github actions", "the staging database is postgresql 15"]


def test_memories_no_longer_activated_are_skipped(svc, settings):
    a, b = add(svc, "The wifi password is on the fridge", "the wifi password is on the fridge.")
    svc.run(svc.memories.archive, CommandContext(tenant=TENANT), b)
    assert Organizer(svc, settings).run_once()["applied"] == 0
    assert view(svc, a).status == "activated"


def test_organized_types_only(svc, settings):
    add(svc, MemoryContent(memory="Scratch note one", memory_type="WorkingMemory"), MemoryContent(memory="scratch note one", memory_type="WorkingMemory"))
    assert Organizer(svc, settings).run_once()["applied"] == 0


def test_tenants_are_never_mixed(svc, settings):
    add(svc, "Alice lives in Berlin", tenant="a")
    add(svc, "Alice lives in Berlin", tenant="b")
    assert Organizer(svc, settings).run_once()["applied"] == 0



# -- distinct facts are never merged or superseded ------------------------------------------------


def test_invoices_that_differ_only_in_their_number_are_left_alone(svc, settings):
    a, b = add(svc, "Invoice 1001 from Acme was paid in full", "Invoice 1002 from Acme was paid in full")
    organizer = Organizer(svc, settings)
    assert organizer.dry_run() == []
    before = svc.store.last_position()
    report = organizer.run_once()
    assert report["events"] == 2 and report["applied"] == 0 and svc.store.last_position() == before
    assert view(svc, a).status == view(svc, b).status == "activated"


def test_a_numbered_list_is_left_alone(svc, settings):
    dishes = ["a lemon cake", "pancakes", "a tomato soup"]
    add(svc, *(f"Recipe number {n} is {dishes[n % 3]} and serves {n % 4 + 2} people" for n in range(1, 41)))
    assert Organizer(svc, settings).dry_run() == []


def test_the_same_key_in_chinese_and_english_is_not_superseded(svc, settings):
    [zh] = add(svc, MemoryContent(memory="我的家乡是柏林", key="home city"))
    [en] = add(svc, MemoryContent(memory="Home city: Berlin", key="home city"))
    organizer = Organizer(svc, settings)
    assert organizer.dry_run() == []
    assert organizer.run_once()["applied"] == 0
    assert view(svc, zh).status == view(svc, en).status == "activated"


def test_one_identified_thing_with_a_new_value_is_still_superseded(svc, settings):
    [older] = add(svc, "Ticket 4521 is assigned to Bob")
    [newer] = add(svc, "Ticket 4521 is assigned to Carol")
    [planned] = Organizer(svc, settings).dry_run()
    assert planned["action"] == "supersede" and planned["memory_ids"] == [older, newer]
    assert "bob vs carol" in planned["decision"]["reason"]


def test_organize_dry_run_on_the_cli_plans_nothing_for_distinct_invoices(tmp_path, capsys):
    from mnemolog.tools.cli import main

    def run(*argv) -> tuple[int, str]:
        code = main(["--data-dir", str(tmp_path / "data"), *argv])
        return code, capsys.readouterr().out

    for text in ("Invoice 1001 from Acme was paid in full", "Invoice 1002 from Acme was paid in full"):
        assert run("add", text)[0] == 0
    code, out = run("organize", "--once", "--dry-run", "--no-topics")
    assert code == 0 and "supersede" not in out and "merge" not in out
    assert "dry run: 0 decision(s)" in out


# -- crash safety, disabled, dry run, revert ----------------------------------------------------


def test_restart_after_a_crash_neither_reapplies_nor_skips(tmp_path):
    settings = make_settings(organizer_batch=2)
    svc = MemoryService.open(tmp_path, settings=settings)
    pairs = [add(svc, f"Fact number {word} is stored here", f"fact number {word} is stored here!") for word in ("one", "two", "three")]
    first = Organizer(svc, settings)
    saved = []
    real_save = first._save

    def crashing_save(name, position):
        if saved:
            raise RuntimeError("simulated crash before the checkpoint")
        saved.append(position)
        real_save(name, position)

    first._save = crashing_save
    with pytest.raises(RuntimeError, match="simulated crash"):
        first.run_once()
    assert len(events(svc, "MemoriesMerged")) == 2  # batch 2 was appended, its checkpoint was not
    assert first.checkpoint() == saved[0]
    assert first.recorded() > saved[0]  # the log holds how far batch 2 got, the local checkpoint does not
    covered = first.recorded()
    svc.close()

    svc = MemoryService.open(tmp_path, settings=settings)
    add(svc, "Fact number four is stored here", "fact number four is stored here.")
    second = Organizer(svc, settings)
    assert second.position == covered
    second.run_once()
    merged = events(svc, "MemoriesMerged")
    sources = sorted(sorted(e.event.source_ids) for e in merged)
    assert len(merged) == 4 and len({tuple(s) for s in sources}) == 4  # each pair once, the new one too
    assert all(sorted(p) in sources for p in pairs)
    assert second.checkpoint() == svc.store.last_position()  # its own merges were checked in the same pass
    assert second.run_once()["events"] == 0
    svc.close()


def test_a_decision_appended_twice_is_replayed_not_reapplied(svc, settings):
    add(svc, "Meeting notes are stored in Notion", "MEETING NOTES ARE STORED IN NOTION")
    organizer = Organizer(svc, settings)
    [planned] = organizer.plan(svc.store.read_all())
    assert svc.run(organizer.apply, planned, "pass-1") == "applied"
    assert svc.run(organizer.apply, planned, "pass-2") == "replayed"  # same idempotency key
    assert len(events(svc, "MemoriesMerged")) == 1


def test_disabled_organizer_does_nothing(tmp_path):
    settings = make_settings(organizer_enabled=False)
    with MemoryService.open(tmp_path, settings=settings) as svc:
        add(svc, "Alice lives in Berlin.", "alice lives in berlin")
        before = svc.store.last_position()
        organizer = Organizer(svc, settings)
        assert organizer.run_once()["enabled"] is False
        assert organizer.cluster() == {"enabled": False}
        assert organizer.dry_run() == []
        assert svc.store.last_position() == before and organizer.position == 0
        assert asyncio.run(organizer.wait_for(before, 5)) is False  # returns at once


def test_dry_run_writes_nothing(svc, settings):
    add(svc, "Alice lives in Berlin.", "alice lives in berlin", MemoryContent(memory="Editor: Vim", key="editor"))
    add(svc, MemoryContent(memory="Editor: Emacs", key="editor"))
    before = svc.store.last_position()
    organizer = Organizer(svc, settings)
    planned = organizer.dry_run()
    assert sorted(p["action"] for p in planned) == ["merge", "supersede"]
    assert svc.store.last_position() == before and organizer.position == 0
    report = organizer.run_once()
    assert sorted(p["action"] for p in report["planned"]) == ["merge", "supersede"]


def test_revert_of_a_pass_restores_and_sticks(svc, settings):
    a, b = add(svc, "Alice lives in Berlin.", "alice lives in berlin")
    [older] = add(svc, MemoryContent(memory="Editor: Vim", key="editor"))
    [newer] = add(svc, MemoryContent(memory="Editor: Emacs", key="editor"))
    organizer = Organizer(svc, settings)
    report = organizer.run_once()
    assert report["applied"] == 2
    merged_id = events(svc, "MemoriesMerged")[0].event.memory_id
    result = svc.run(svc.reverts.revert, CommandContext(tenant=TENANT, actor="operator"), report["correlation_id"])
    assert result.data["reverted"] > 0 and not result.data["conflicts"]
    assert {view(svc, m).status for m in (a, b, older, newer)} == {"activated"}
    assert view(svc, merged_id).status == "deleted"
    assert not [e for e in svc.edges_of(TENANT, older)]
    assert organizer.run_once()["applied"] == 0  # a revert is not undone by the next pass



# -- waiting -------------------------------------------------------------------------------------


async def test_wait_for_returns_once_the_organizer_processed_the_position(svc, settings):
    organizer = Organizer(svc, settings)
    task = asyncio.create_task(organizer.follow())
    loop = asyncio.get_running_loop()
    try:
        ids = await loop.run_in_executor(None, add, svc, "The API rate limit is 100 requests per minute", "the API rate-limit is 100 requests per minute")
        head = svc.store.last_position()
        assert await organizer.wait_for(head, 10) is True
        assert organizer.position >= head
        assert {view(svc, m).status for m in ids} == {"archived"}
        assert await organizer.wait_for(head + 1000, 0.2) is False
        status = organizer.status(TENANT)
        assert status["enabled"] and status["decisions"] == 1 and status["last_run"] is not None
    finally:
        organizer.stopped = True
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await organizer.aclose()


UNRELATED = [
    "The API rate limit is 100 requests per minute",
    "Bob plays chess on Sundays",
    "The office plants are watered on Fridays",
    "Carol drinks green tea every morning",
    "The ferry to Cacilhas leaves every twenty minutes",
    "Dave repairs old bicycles in his garage",
]


async def test_commits_while_the_loop_is_busy_wake_the_organizer_once(svc, settings, monkeypatch):
    """Commits made while the loop is blocked call into it once; once woken and cleared, the next commit calls again.

    ``wait_for`` returns as soon as a pass saves its position, which may be before the follower loops
    round and clears its flag (and a pass already under way when the commits came leaves a wake-up
    pending): a commit made then rightly calls nothing. So the test waits, on the follower's own
    flags, until it has taken its wake-up and cleared them, rather than for a fixed time. The texts
    are unrelated: the organizer's own merges would commit too, and call into the loop themselves.
    """
    organizer = Organizer(svc, settings)
    loop = asyncio.get_running_loop()
    hooks = []
    hook_into = svc.add_after_commit
    monkeypatch.setattr(svc, "add_after_commit", lambda hook: (hooks.append(hook), hook_into(hook))[-1])
    task = asyncio.create_task(organizer.follow())

    async def until_cleared() -> None:
        """Until the follower has no wake-up pending and its next commit calls into the loop."""
        def cleared() -> bool:
            if not hooks:
                return False
            flags = inspect.getclosurevars(hooks[0]).nonlocals  # the follower's own: ``woken`` (its hook's) and ``wake`` (its loop's)
            return not flags["woken"].is_set() and not flags["wake"].is_set()

        deadline = loop.time() + 60
        while not cleared():
            assert loop.time() < deadline, "the follower never went back to its wait"
            await asyncio.sleep(0.01)

    try:
        await until_cleared()
        calls = []
        real = loop.call_soon_threadsafe

        def counted(*args, **kwargs):
            if sys._getframe(1).f_code.co_name == "hook":  # the commit hook's wake-ups, not the waiters' signals
                calls.append(args)
            return real(*args, **kwargs)

        monkeypatch.setattr(loop, "call_soon_threadsafe", counted)
        for text in UNRELATED[:5]:  # the loop is blocked meanwhile: every commit's hooks find it not yet woken
            add(svc, text)
        assert len(calls) == 1
        assert await organizer.wait_for(svc.store.last_position(), 60) is True
        await until_cleared()
        add(svc, UNRELATED[5])  # woken and cleared: the next commit wakes it again
        assert len(calls) == 2
        assert await organizer.wait_for(svc.store.last_position(), 60) is True
    finally:
        organizer.stopped = True
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await organizer.aclose()


async def test_status_over_http_waits_for_a_position(tmp_path, aiohttp_client):
    from mnemolog.api.app import create_app
    from mnemolog.api.routes_organizer import organizer_task

    settings = make_settings(data_dir=str(tmp_path))
    app = create_app(settings, background=[organizer_task])
    client = await aiohttp_client(app)
    resp = await client.post("/v1/memories", json={"memories": [{"memory": "Lives in São Paulo"}, {"memory": "lives in São Paulo."}]})
    assert resp.status in (200, 201), await resp.text()
    head = max((await resp.json())["positions"])
    resp = await client.get("/v1/organizer/status", params={"min_position": head, "wait": "10s"})
    body = await resp.json()
    assert resp.status == 200 and body["caught_up"] is True and body["enabled"] is True
    assert body["position"] >= head and body["decisions"] == 1 and set(body) >= {"position", "enabled", "last_run", "decisions", "caught_up"}
    resp = await client.get("/v1/organizer/status", params={"min_position": body["position"] + 10_000, "wait": "200ms"})
    assert resp.status == 409 and (await resp.json())["error"]["code"] == "beyond_head"  # not written yet: as recall answers
    for bad in ("abc", "31s", "-1s"):
        resp = await client.get("/v1/organizer/status", params={"wait": bad})
        assert resp.status == 422 and (await resp.json())["error"]["field"] == "wait"
    resp = await client.get("/v1/organizer/status", params={"min_position": "x"})
    assert resp.status == 422 and (await resp.json())["error"]["field"] == "min_position"


async def test_status_shows_a_tenant_its_own_share_of_the_last_pass_and_run_only(tmp_path, aiohttp_client):
    """``last_run`` counted every tenant's events and decisions, and ``last_cluster`` listed other tenants by
    name with their skipped types and errors: any tenant's read key saw them."""
    from mnemolog.api import keys
    from mnemolog.api.app import create_app
    from mnemolog.api.routes_organizer import organizer_task

    app = create_app(make_settings(data_dir=str(tmp_path)), background=[organizer_task])
    client = await aiohttp_client(app)
    other = {"X-Mnemolog-Tenant": "globex-private"}
    resp = await client.post("/v1/memories", json={"memories": [{"memory": "Lives in São Paulo"}, {"memory": "lives in São Paulo."}]}, headers=other)
    assert resp.status == 201, await resp.text()
    resp = await client.post("/v1/memories", json={"memories": [{"memory": "Bob plays chess on Sundays"}]}, headers={"X-Mnemolog-Tenant": "acme"})
    head = max((await resp.json())["positions"])
    organizer = app[keys.organizer_key]
    assert await organizer.wait_for(head, 10)
    for _ in range(200):  # the position moves as each batch is saved, the pass's report when the pass ends
        if organizer.last_run is not None and organizer.last_run["to"] >= head:
            break
        await asyncio.sleep(0.05)
    await organizer.acluster()
    mine = await (await client.get("/v1/organizer/status", headers={"X-Mnemolog-Tenant": "acme"})).json()
    assert "globex" not in json.dumps(mine)
    assert (mine["last_run"]["events"], mine["last_run"]["applied"], mine["decisions"]) == (1, 0, 0)
    assert [s["tenant"] for s in mine["last_cluster"]["skipped"]] == ["acme"] and mine["last_cluster"]["errors"] == []
    theirs = await (await client.get("/v1/organizer/status", headers=other)).json()
    assert theirs["decisions"] == 1 and theirs["last_run"]["applied"] in (0, 1)  # 0: its events were in an earlier pass
    assert {s["tenant"] for s in theirs["last_cluster"]["skipped"]} == {"globex-private"} and "acme" not in json.dumps(theirs)


# -- progress in the log, reverts that stick -------------------------------------------------------


def _organize_after_rebuild(tmp_path, settings) -> tuple[MemoryService, Organizer]:
    """Delete the disposable files, open the service again (it rebuilds) and a new organizer."""
    for name in ("projections.db", "projections.db-wal", "projections.db-shm", "vectors.usearch", "vectors.usearch.json"):
        (tmp_path / name).unlink(missing_ok=True)
    svc = MemoryService.open(tmp_path, settings=settings)
    return svc, Organizer(svc, settings)


def test_deleting_the_projections_never_makes_the_organizer_append(tmp_path, settings):
    svc = MemoryService.open(tmp_path, settings=settings)
    [a] = add(svc, "Alice lives in Berlin.")
    kept = add(svc, "Bob plays chess on Sundays.", "bob plays chess on sundays")
    organizer = Organizer(svc, settings)
    assert organizer.run_once()["applied"] == 1  # Bob's pair; Alice's memory has no pair yet
    [b] = add(svc, "alice lives in berlin")
    report = organizer.run_once()
    assert report["applied"] == 1
    svc.run(svc.reverts.revert, CommandContext(tenant=TENANT, actor="operator"), report["correlation_id"])
    assert {view(svc, m).status for m in (a, b)} == {"activated"}
    covered = organizer.recorded()
    assert covered > 0 and [r.event.checkpoint for r in events(svc, "OrganizerPassRecorded")] == ["organizer"] * 2
    head = svc.store.last_position()
    svc.close()

    svc, fresh = _organize_after_rebuild(tmp_path, settings)
    assert fresh.checkpoint() == 0 and fresh.position == covered  # resumes from the log's record
    again = fresh.run_once()
    assert again["applied"] == 0 and svc.store.last_position() == head
    assert {view(svc, m).status for m in (a, b)} == {"activated"} and {view(svc, m).status for m in kept} == {"archived"}
    svc.close()


def test_a_reverted_decision_is_not_redone_even_from_position_zero(tmp_path, settings):
    svc = MemoryService.open(tmp_path, settings=settings)
    [a] = add(svc, "Alice lives in Berlin.")
    organizer = Organizer(svc, settings)
    organizer.run_once()
    [b] = add(svc, "alice lives in berlin")
    [older] = add(svc, MemoryContent(memory="Editor: Vim", key="editor"))
    [newer] = add(svc, MemoryContent(memory="Editor: Emacs", key="editor"))
    report = organizer.run_once()
    assert sorted(p["action"] for p in report["planned"]) == ["merge", "supersede"]
    svc.run(svc.reverts.revert, CommandContext(tenant=TENANT, actor="operator"), report["correlation_id"])
    head = svc.store.last_position()
    # From position 0 the merge's trigger is a's MemoryAdded, not b's: a new idempotency key.
    fresh = Organizer(svc, settings)
    fresh.recorded = lambda name="organizer": 0
    fresh._save("organizer", 0)
    assert fresh.plan(svc.store.read_all(types=TRIGGERS)) == []
    assert fresh.run_once()["applied"] == 0 and svc.store.last_position() == head
    assert {view(svc, m).status for m in (a, b, older, newer)} == {"activated"}


def test_a_decision_planned_again_after_its_revert_is_skipped(svc, settings):
    import msgspec

    add(svc, "Meeting notes are stored in Notion", "MEETING NOTES ARE STORED IN NOTION")
    organizer = Organizer(svc, settings)
    [planned] = organizer.plan(svc.store.read_all(types=TRIGGERS))
    assert svc.run(organizer.apply, planned, "pass-1") == "applied"
    svc.run(svc.reverts.revert, CommandContext(tenant=TENANT), "pass-1")
    head = svc.store.last_position()
    # The same pair, as another trigger would plan it: another idempotency key, the current versions.
    again = msgspec.structs.replace(planned, idempotency_key="another-trigger", versions={m: view(svc, m).version for m in planned.memory_ids})
    outcome = svc.run(organizer.apply, again, "pass-2")
    assert outcome.startswith("skipped:") and "reverted" in outcome
    assert svc.store.last_position() == head


def test_a_reverted_pair_is_never_grouped_through_a_third_memory(svc, settings):
    from mnemolog.projections.policies.dedup import Pair, RevertedDecisions, decide, load_items
    from mnemolog.projections.policies.judge import Verdict

    a, b = add(svc, "Alice lives in Berlin.", "alice lives in berlin")
    organizer = Organizer(svc, settings)
    report = organizer.run_once()
    svc.run(svc.reverts.revert, CommandContext(tenant=TENANT), report["correlation_id"])
    [c_] = add(svc, "ALICE LIVES IN BERLIN")
    items = {i.id: i for i in load_items(svc.read_conn(), TENANT)}
    verdict = Verdict("redundant", "test", "rule", "1", 1.0)
    pairs = [Pair(TENANT, "LongTermMemory", *sorted((items[x], items[c_])), 1.0, 1, "e") for x in (a, b)]
    reverted = RevertedDecisions(svc.store).refresh()
    planned = decide(pairs, [verdict, verdict], reverted)
    assert [sorted(p.memory_ids) for p in planned] == [sorted((a, c_))] or [sorted(p.memory_ids) for p in planned] == [sorted((b, c_))]
    assert len(decide(pairs, [verdict, verdict])) == 1 and len(decide(pairs, [verdict, verdict])[0].memory_ids) == 3
    result = organizer.run_once()
    assert not any({a, b} <= set(p["memory_ids"]) for p in result["planned"] if p["outcome"] == "applied")


def test_a_pass_record_from_another_log_is_ignored(tmp_path, settings):
    import io

    from mnemolog.eventstore import exchange

    source = MemoryService.open(tmp_path / "source", settings=settings)
    add(source, "Alice lives in Berlin.", "alice lives in berlin")
    Organizer(source, settings).run_once()
    out = io.BytesIO()
    exchange.export(source.store, out, tenant=TENANT)
    keys = source.store.sealer.keys.export_rows(TENANT)  # sealed memories travel with their keys, apart
    source.close()
    target = MemoryService.open(tmp_path / "target", settings=settings)
    add(target, *(f"other tenant memory {n}" for n in range(5)), tenant="other")
    out.seek(0)
    target.store.sealer.keys.import_rows(keys)
    exchange.import_(target.store, out)
    target.sync()
    assert events(target, "OrganizerPassRecorded")  # imported, at other positions
    assert Organizer(target, settings).recorded() == 0
    target.close()


async def test_a_server_started_on_deleted_projections_appends_nothing(tmp_path, aiohttp_client):
    from mnemolog.api.app import create_app
    from mnemolog.api.background import default_background

    settings = make_settings(data_dir=str(tmp_path))

    async def caught_up(client, position: int) -> dict:
        resp = await client.get("/v1/organizer/status", params={"min_position": position, "wait": "10s"})
        body = await resp.json()
        assert resp.status == 200 and body["caught_up"] is True, body
        return body

    client = await aiohttp_client(create_app(settings, background=default_background(settings)))
    for text in ("Lives in São Paulo", "lives in São Paulo."):
        resp = await client.post("/v1/memories", json={"memory": {"memory": text}})
        assert resp.status in (200, 201), await resp.text()
        await caught_up(client, max((await resp.json())["positions"]))
    head = (await (await client.get("/v1/digest")).json())["position"]
    await caught_up(client, head)
    [merged] = [e for e in (await (await client.get("/v1/events", params={"type": "MemoriesMerged"})).json())["events"]]
    resp = await client.post("/v1/reverts", json={"correlation_id": merged["metadata"]["correlation_id"]})
    assert resp.status in (200, 201), await resp.text()
    digest = await (await client.get("/v1/digest")).json()
    await caught_up(client, digest["position"])
    await client.close()

    for name in ("projections.db", "projections.db-wal", "projections.db-shm", "vectors.usearch", "vectors.usearch.json"):
        (tmp_path / name).unlink(missing_ok=True)
    client = await aiohttp_client(create_app(settings, background=default_background(settings)))
    await caught_up(client, digest["position"])
    assert await (await client.get("/v1/digest")).json() == digest  # the rebuild and the organizer appended nothing
    resp = await client.post("/v1/recall", json={"query": "São Paulo"})
    assert len((await resp.json())["hits"]) == 2  # the reverted merge stays undone


# -- a merge loses nothing ---------------------------------------------------------------------------


def test_a_merge_never_joins_two_memories_through_a_third_when_their_details_differ(svc):
    """"... and two cats" and "... and works at Acme" each repeat "...", but a merge of the three keeps one text."""
    settings = make_settings(organizer_min_cosine=0.5)
    base, cats, acme = add(svc, "Alice lives in Berlin with her husband", "Alice lives in Berlin with her husband and two cats", "Alice lives in Berlin with her husband and works at Acme")
    report = Organizer(svc, settings).run_once()
    assert report["applied"] == 1
    [merged] = events(svc, "MemoriesMerged")
    assert len(merged.event.source_ids) == 2 and base in merged.event.source_ids
    texts = set(activated(svc).values())
    assert any("two cats" in t for t in texts) and any("Acme" in t for t in texts)  # neither detail lost


def test_a_merge_keeps_every_tag_property_and_value_of_its_sources(svc, settings):
    a, b = add(
        svc,
        MemoryContent(memory="Alice lives in Berlin.", tags=("home", "alice"), properties={"page": 3}, background="chat 1"),
        MemoryContent(memory="alice lives in berlin", tags=("city",), properties={"chat": 9}, confidence=0.8),
    )
    differ = add(
        svc,
        MemoryContent(memory="Bob plays chess on Sundays.", properties={"page": 3}, confidence=0.9),
        MemoryContent(memory="bob plays chess on sundays", properties={"page": 7}, confidence=0.2),
        MemoryContent(memory="Carol drinks green tea daily.", tags=tuple(f"a{n}" for n in range(5))),
        MemoryContent(memory="carol drinks green tea daily", tags=tuple(f"b{n}" for n in range(5))),
    )
    report = Organizer(svc, settings).run_once()
    assert report["applied"] == 1
    [merged] = events(svc, "MemoriesMerged")
    assert set(merged.event.source_ids) == {a, b}
    new = view(svc, merged.event.memory_id)
    assert set(new.tags) == {"home", "alice", "city"} and new.properties == {"page": 3, "chat": 9}
    assert new.background == "chat 1" and new.confidence == 0.8
    assert all(view(svc, m).status == "activated" for m in differ)  # two pages, two confidences, ten tags: kept apart


def test_an_automatic_merge_that_would_drop_a_value_is_refused_an_operators_is_not(svc):
    a, b = add(svc, MemoryContent(memory="Bob plays chess.", properties={"page": 3}), MemoryContent(memory="bob plays chess", properties={"page": 7}))
    decision = c.Decision(judge="rule", judge_version="3", similarity=1.0, reason="normalised texts equal")
    with pytest.raises(Conflict, match=r"never drops a value; these memories differ in properties\.page \(3 vs 7\)"):
        svc.run(svc.memories.merge, CommandContext(tenant=TENANT, actor="organizer"), [a, b], decision=decision)
    assert view(svc, a).status == "activated" and not events(svc, "MemoriesMerged")
    result = svc.run(svc.memories.merge, CommandContext(tenant=TENANT), [a, b])
    assert view(svc, result.data["merged_id"]).properties == {"page": 3}  # the operator's merge: the first source's value
