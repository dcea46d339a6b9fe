"""The organizer with the LLM judge, against a fake OpenAI-compatible server on loopback: its merges carry the
LLM's fused text and reason, a failing endpoint falls back to the rule judge (and says so), and a supersede the
rules decided against the LLM's label names the rule judge."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from mnemolog.eventstore import catalogue as c
from mnemolog.projections.policies.judge import RuleJudge
from mnemolog.projections.policies.llm_judge import LLMJudge
from mnemolog.projections.policies.organizer import Organizer
from tests.projections.support import serve_chat_completions
from tests.projections.test_organizer import add, events, settings  # noqa: F401  (settings: a fixture)


class FakeLLM:
    def __init__(self) -> None:
        self.fail = False
        self.requests: list[dict] = []

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        if self.fail:
            return web.Response(status=503, text="overloaded")
        user = body["messages"][1]["content"]
        if "Memories:" in user:
            answer = {"title": "Travel plans", "summary": "Trips the user is planning."}
        elif "Lisbon" in user:
            answer = {"label": "redundant", "reason": "same move, one more detailed", "fused_text": "The user moved to Lisbon in May 2023"}
        else:
            answer = {"label": "independent", "reason": "different facts", "fused_text": None}
        return web.json_response({"choices": [{"index": 0, "message": {"role": "assistant", "content": json.dumps(answer)}}]})


@pytest.fixture
async def fake_llm(aiohttp_server):
    fake = FakeLLM()
    fake.url = await serve_chat_completions(aiohttp_server, fake.handle)
    return fake


async def test_llm_judge_merges_with_fused_text_and_falls_back_to_rules(svc, settings, fake_llm):
    judge = LLMJudge(fake_llm.url, "test-model", "sk-test", timeout_s=5, retries=1, backoff_s=0.01, fallback=RuleJudge())
    organizer = Organizer(svc, settings, judge=judge)
    loop = asyncio.get_running_loop()
    try:
        a, b = await loop.run_in_executor(None, add, svc, "The user moved to Lisbon in May 2023", "The user moved to Lisbon in May")
        report = await organizer.arun_once()
        assert report["applied"] == 1 and fake_llm.requests
        [merged] = events(svc, "MemoriesMerged")
        assert merged.event.content.memory == "The user moved to Lisbon in May 2023"
        decision = c.decision_of(merged.event)
        assert decision.judge == "llm" and decision.judge_version.endswith("test-model") and decision.fallback is None
        assert decision.reason == "same move, one more detailed"

        fake_llm.fail = True
        await loop.run_in_executor(None, add, svc, "Bob's birthday is on 12 May.", "bob's birthday is on 12 may")
        report = await organizer.arun_once()
        assert report["applied"] == 1
        fallback = c.decision_of(events(svc, "MemoriesMerged")[-1].event)
        assert fallback.judge == "rule" and fallback.fallback.startswith("llm failed: HTTP 503")
    finally:
        await organizer.aclose()


async def test_a_supersede_where_the_rules_vetoed_an_llms_redundant_names_the_rule_judge(svc, settings, fake_llm):
    """The LLM said redundant, the rules saw two values: the supersede event said judge "llm", which had said otherwise."""
    judge = LLMJudge(fake_llm.url, "test-model", "sk-test", timeout_s=5, retries=1, backoff_s=0.01, fallback=RuleJudge())
    organizer = Organizer(svc, settings, judge=judge)
    try:
        older, newer = await asyncio.get_running_loop().run_in_executor(None, add, svc, "The Lisbon office has 3 desks", "The Lisbon office has 4 desks")
        report = await organizer.arun_once()
        assert report["applied"] == 1
        [superseded] = events(svc, "MemorySuperseded")
        assert (superseded.event.memory_id, superseded.event.superseded_by) == (older, newer)
        decision = c.decision_of(superseded.event)
        assert (decision.judge, decision.judge_version, decision.fallback) == ("rule", RuleJudge().version, None)
        assert decision.reason.startswith("llm said redundant (same move, one more detailed); vetoed") and "numbers differ: 3 vs 4" in decision.reason
    finally:
        await organizer.aclose()
