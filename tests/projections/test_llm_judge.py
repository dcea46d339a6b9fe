"""LLM judge against a real fake OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Awaitable, Callable

import msgspec
import pytest
from aiohttp import web

from mnemolog.projections.policies.judge import JudgedMemory, RuleJudge
from mnemolog.projections.policies.llm_judge import LLMJudge, LLMUnavailable
from tests.projections.support import serve_chat_completions

A = JudgedMemory(id="a", memory="The user prefers dark mode", key=None, memory_type="preference",
                 updated_at="2024-01-01T00:00:00Z")
B = JudgedMemory(id="b", memory="Dark mode is what the user prefers", key=None, memory_type="preference",
                 updated_at="2024-03-01T00:00:00Z")

Behaviour = Callable[[int, dict], Awaitable[web.StreamResponse]]


def completion(content: str) -> web.Response:
    return web.json_response({
        "id": "chatcmpl-test", "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": "stop"}],
    })


def answer(label: str, reason: str = "because", fused: str | None = None) -> web.Response:
    return completion(json.dumps({"label": label, "reason": reason, "fused_text": fused}))


class FakeLLM:
    """Records requests and counts concurrent ones; ``behaviour(n, body)`` answers the n-th request."""

    def __init__(self) -> None:
        self.requests: list[tuple[dict[str, str], dict]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.url = ""
        self.behaviour: Behaviour = self._default

    @staticmethod
    async def _default(n: int, body: dict) -> web.StreamResponse:
        return answer("independent", "different facts")

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append((dict(request.headers), body))
        self.request = request  # the one being answered, for a behaviour that streams its answer
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self.behaviour(len(self.requests), body)
        finally:
            self.in_flight -= 1


@pytest.fixture
async def fake(aiohttp_server) -> FakeLLM:
    fake = FakeLLM()
    fake.url = await serve_chat_completions(aiohttp_server, fake.handle)
    return fake


@pytest.fixture
async def make_judge(fake: FakeLLM):
    judges: list[LLMJudge] = []

    def make(api_key: str | None = "sk-test", **kwargs) -> LLMJudge:
        options = {"timeout_s": 5.0, "retries": 2, "backoff_s": 0.01, "fallback": RuleJudge()} | kwargs
        judge = LLMJudge(fake.url, "test-model", api_key, **options)
        judges.append(judge)
        return judge

    yield make
    for judge in judges:
        await judge.close()


async def test_good_answer(fake: FakeLLM, make_judge) -> None:
    async def behaviour(n: int, body: dict) -> web.Response:
        return answer("redundant", "same preference", "The user prefers dark mode.")

    fake.behaviour = behaviour
    judge = make_judge()
    v = await judge.judge(A, B, 0.93)
    assert (v.label, v.reason, v.fused_text, v.fallback) == (
        "redundant", "same preference", "The user prefers dark mode.", None)
    assert (v.judge, v.similarity) == ("llm", 0.93)
    assert "test-model" in v.judge_version

    headers, body = fake.requests[0]
    assert body["model"] == "test-model"
    assert body["response_format"] == {"type": "json_object"}
    prompt = json.dumps(body["messages"])
    assert A.memory in prompt and B.memory in prompt and "fused_text" in prompt


async def test_api_key_is_sent_as_bearer(fake: FakeLLM, make_judge) -> None:
    await make_judge(api_key="sk-secret-123").judge(A, B, 0.9)
    assert fake.requests[-1][0]["Authorization"] == "Bearer sk-secret-123"
    judge = make_judge(api_key=None)
    await judge.judge(A, B, 0.9)
    assert "Authorization" not in fake.requests[-1][0]
    assert "sk-secret" not in repr(judge)


@pytest.mark.parametrize("content", [
    '```json\n{"label": "contradictory", "reason": "different modes", "fused_text": null}\n```',
    'Here you go:\n```\n{"label": "Contradictory", "reason": "different modes"}\n```\nDone.',
    'Sure! {"label": "contradiction", "reason": "different modes"} Hope that helps.',
])
async def test_fenced_or_wrapped_json_answer(fake: FakeLLM, make_judge, content: str) -> None:
    async def behaviour(n: int, body: dict) -> web.Response:
        return completion(content)

    fake.behaviour = behaviour
    v = await make_judge().judge(A, B, 0.9)
    assert (v.label, v.reason, v.fallback, v.fused_text) == ("contradictory", "different modes", None, None)
    assert len(fake.requests) == 1


async def test_500_then_success_is_retried(fake: FakeLLM, make_judge) -> None:
    async def behaviour(n: int, body: dict) -> web.Response:
        if n == 1:
            return web.Response(status=500, text="overloaded")
        return answer("independent", "different facts")

    fake.behaviour = behaviour
    judge = make_judge()
    v = await judge.judge(A, B, 0.9)
    assert (v.label, v.judge, v.fallback) == ("independent", "llm", None)
    assert len(fake.requests) == 2
    assert judge.stats["retries"] == 1


async def test_bad_json_then_success_is_retried(fake: FakeLLM, make_judge) -> None:
    async def behaviour(n: int, body: dict) -> web.Response:
        if n == 1:
            return completion('{"label": "redundant", "reason": ')  # truncated
        if n == 2:
            return completion('{"label": "maybe", "reason": "unsure"}')  # unknown label
        return answer("independent", "different facts")

    fake.behaviour = behaviour
    v = await make_judge().judge(A, B, 0.9)
    assert (v.label, v.fallback) == ("independent", None)
    assert len(fake.requests) == 3


async def test_an_answer_of_any_length_is_quoted_short_in_the_fallback_a_decision_records(fake: FakeLLM, make_judge) -> None:
    """An unknown label of 900,000 characters was quoted whole: one merge wrote 900 KB to the append-only log."""
    from mnemolog.projections.policies.dedup import DECISION_CHARS, _decision

    async def behaviour(n: int, body: dict) -> web.Response:
        return completion(json.dumps({"label": "x" * 900_000, "reason": "?"}))

    fake.behaviour = behaviour
    v = await make_judge(retries=0).judge(A, B, 0.9)
    assert v.fallback.startswith("llm failed: ") and len(v.fallback) < 1_000
    decision = _decision([msgspec.structs.replace(v, fallback="y" * 10_000)], 0.9)
    assert len(decision.fallback) == DECISION_CHARS and decision.fallback.endswith("\u2026")


async def test_always_500_falls_back_to_rule_judge(fake: FakeLLM, make_judge) -> None:
    async def behaviour(n: int, body: dict) -> web.Response:
        return web.Response(status=503, text="unavailable")

    fake.behaviour = behaviour
    judge = make_judge(retries=2)
    a = JudgedMemory(id="a", memory="Alice has 3 cats")
    b = JudgedMemory(id="b", memory="Alice has 4 cats")
    v = await judge.judge(a, b, 0.95)
    expected = RuleJudge().judge_sync(a, b, 0.95)
    assert v.fallback is not None and v.fallback.startswith("llm failed: ")
    assert "HTTP 503" in v.fallback and "3 attempts" in v.fallback
    assert (v.label, v.reason, v.judge) == (expected.label, expected.reason, "rule")
    assert len(fake.requests) == 3  # 1 + 2 retries
    assert judge.stats["fallbacks"] == 1


async def test_client_error_is_not_retried(fake: FakeLLM, make_judge) -> None:
    async def behaviour(n: int, body: dict) -> web.Response:
        return web.json_response({"error": {"message": "invalid api key"}}, status=401)

    fake.behaviour = behaviour
    v = await make_judge().judge(A, B, 0.9)
    assert v.fallback is not None and "HTTP 401" in v.fallback and "invalid api key" in v.fallback
    assert len(fake.requests) == 1


async def test_an_endpoint_without_json_mode_is_asked_again_without_it(fake: FakeLLM, make_judge) -> None:
    """Some OpenAI-compatible servers refuse ``response_format`` with a 400: every pair fell back to the rule judge."""

    async def behaviour(n: int, body: dict) -> web.Response:
        if "response_format" in body:
            return web.json_response({"error": {"message": "'response_format' is not supported by this model"}}, status=400)
        return answer("redundant", "same preference", "The user prefers dark mode.")

    fake.behaviour = behaviour
    judge = make_judge()
    for _ in range(2):
        v = await judge.judge(A, B, 0.93)
        assert (v.label, v.fallback) == ("redundant", None), v.fallback
    assert ["response_format" in body for _, body in fake.requests] == [True, False, False]  # asked without it from then on


async def test_a_400_about_something_else_is_final(fake: FakeLLM, make_judge) -> None:
    async def behaviour(n: int, body: dict) -> web.Response:
        return web.json_response({"error": {"message": "context length exceeded"}}, status=400)

    fake.behaviour = behaviour
    v = await make_judge().judge(A, B, 0.9)
    assert v.fallback is not None and "HTTP 400" in v.fallback and len(fake.requests) == 1


async def test_timeout_falls_back(fake: FakeLLM, make_judge) -> None:
    async def behaviour(n: int, body: dict) -> web.Response:
        await asyncio.sleep(1.0)
        return answer("redundant")

    fake.behaviour = behaviour
    judge = make_judge(timeout_s=0.1, retries=1)
    v = await judge.judge(A, B, 0.9)
    assert v.fallback is not None and "timeout after 0.1s" in v.fallback
    assert v.judge == "rule"
    assert len(fake.requests) == 2


async def test_connection_refused_falls_back(make_judge) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    judge = LLMJudge(f"http://127.0.0.1:{port}/v1", "m", "k", retries=1, backoff_s=0.01)
    try:
        v = await judge.judge(A, B, 0.9)
    finally:
        await judge.close()
    assert v.fallback is not None and "connection error" in v.fallback
    assert v.label in ("redundant", "contradictory", "independent")


async def test_concurrency_limit_is_respected(fake: FakeLLM, make_judge) -> None:
    async def behaviour(n: int, body: dict) -> web.Response:
        await asyncio.sleep(0.05)
        return answer("independent")

    fake.behaviour = behaviour
    judge = make_judge(concurrency=3)
    verdicts = await asyncio.gather(*(judge.judge(A, B, 0.9) for _ in range(12)))
    assert all(v.judge == "llm" for v in verdicts)
    assert len(fake.requests) == 12
    assert fake.max_in_flight == 3


async def test_redundant_answer_is_vetoed_on_a_number_conflict(fake: FakeLLM, make_judge) -> None:
    async def behaviour(n: int, body: dict) -> web.Response:
        return answer("redundant", "both about Alice's cats", "Alice has cats")

    fake.behaviour = behaviour
    judge = make_judge()
    v = await judge.judge(JudgedMemory(id="a", memory="Alice has 3 cats"),
                          JudgedMemory(id="b", memory="Alice has 4 cats"), 0.97)
    assert v.label == "contradictory"
    assert "vetoed" in v.reason and "numbers differ: 3 vs 4" in v.reason
    assert judge.stats["vetoes"] == 1
    # The label is the rule judge's, so is the verdict: a supersede on it names the judge that saw the conflict.
    assert (v.judge, v.judge_version) == ("rule", RuleJudge().version) and v.reason.startswith("llm said redundant (both about Alice's cats); vetoed")


async def test_implausible_fused_text_is_replaced(fake: FakeLLM, make_judge) -> None:
    async def behaviour(n: int, body: dict) -> web.Response:
        return answer("redundant", "same", "The user prefers dark mode since 2019")  # invented year

    fake.behaviour = behaviour
    v = await make_judge().judge(A, B, 0.95)
    assert v.label == "redundant"
    assert v.fused_text == B.memory  # the rule-based merge: the longer text


async def test_missing_fused_text_uses_rule_merge(fake: FakeLLM, make_judge) -> None:
    async def behaviour(n: int, body: dict) -> web.Response:
        return answer("redundant", "same", None)

    fake.behaviour = behaviour
    v = await make_judge().judge(A, B, 0.95)
    assert v.fused_text == B.memory


async def test_summarize_topic(fake: FakeLLM, make_judge) -> None:
    async def behaviour(n: int, body: dict) -> web.Response:
        return completion('```json\n{"title": "Editor  preferences", "summary": "Dark mode everywhere."}\n```')

    fake.behaviour = behaviour
    title, summary = await make_judge().summarize_topic(["Prefers dark mode", "", "Uses Neovim"])
    assert (title, summary) == ("Editor preferences", "Dark mode everywhere.")
    prompt = json.dumps(fake.requests[0][1]["messages"])
    assert "Prefers dark mode" in prompt and "Uses Neovim" in prompt


async def test_summarize_topic_failure_raises(fake: FakeLLM, make_judge) -> None:
    async def behaviour(n: int, body: dict) -> web.Response:
        return web.Response(status=500)

    fake.behaviour = behaviour
    judge = make_judge(retries=1)
    with pytest.raises(LLMUnavailable, match="HTTP 500"):
        await judge.summarize_topic(["Prefers dark mode"])
    assert len(fake.requests) == 2
    with pytest.raises(ValueError):
        await judge.summarize_topic(["", "  "])


async def test_session_is_lazy_and_closed(fake: FakeLLM) -> None:
    judge = LLMJudge(fake.url, "m", "k")
    assert judge._session is None
    await judge.judge(A, B, 0.9)
    session = judge._session
    assert session is not None and not session.closed
    await judge.close()
    assert session.closed
    async with LLMJudge(fake.url, "m", "k") as scoped:
        await scoped.judge(A, B, 0.9)
        inner = scoped._session
    assert inner is not None and inner.closed


@pytest.mark.parametrize(
    "a, b, why",
    [
        (JudgedMemory(id="a", memory="Home city: Berlin", key="home city"), JudgedMemory(id="b", memory="Work city: Paris", key="work city"), "different keys"),
        (JudgedMemory(id="a", memory="Invoice 1001 is paid"), JudgedMemory(id="b", memory="Invoice 1002 is unpaid"), "different things: identifiers"),
    ],
)
@pytest.mark.parametrize("label", ["contradictory", "redundant"])
async def test_an_answer_about_two_slots_or_two_things_is_vetoed(fake: FakeLLM, make_judge, a, b, why, label) -> None:
    async def behaviour(n: int, body: dict) -> web.Response:
        return answer(label, "they disagree")

    fake.behaviour = behaviour
    judge = make_judge()
    v = await judge.judge(a, b, 0.9)
    assert v.label == "independent" and v.judge == "llm" and v.fused_text is None
    assert f"llm said {label} (they disagree); vetoed" in v.reason and why in v.reason
    assert judge.stats["vetoes"] == 1
    if label == "redundant":
        return
    same_slot = await judge.judge(JudgedMemory(id="a", memory="Home city: Berlin", key="home city"), JudgedMemory(id="b", memory="Home city: Paris", key="home city"), 0.9)
    assert same_slot.label == "contradictory"  # one slot, two values: the answer stands


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: web.Response(body=b'{"choices": [\xff\xfe]}', content_type="application/json", charset="utf-8"), id="not-utf8"),
        pytest.param(lambda: web.Response(body=b"{}", content_type="application/json", charset="no-such-charset"), id="unknown-charset"),
        pytest.param(lambda: web.Response(text="[" * 100_000, content_type="application/json"), id="deep-body"),
        pytest.param(lambda: completion("[" * 100_000), id="deep-answer"),
        pytest.param(lambda: completion('{"label": ' + "[" * 100_000 + "}"), id="deep-object"),
    ],
)
async def test_an_undecodable_answer_falls_back_with_its_reason(fake: FakeLLM, make_judge, make) -> None:
    async def behaviour(n: int, body: dict) -> web.Response:
        return make()

    fake.behaviour = behaviour
    judge = make_judge(retries=1)
    v = await judge.judge(A, B, 0.9)  # never raises: the rule judge's verdict, saying why
    assert v.judge == "rule" and v.fallback is not None
    assert v.fallback.startswith("llm failed: bad answer") and "(after 2 attempts)" in v.fallback
    assert len(fake.requests) == 2 and judge.stats["fallbacks"] == 1


def _chat_bytes(fused: str) -> bytes:
    content = json.dumps({"label": "redundant", "reason": "same preference", "fused_text": fused})
    return json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}).encode()


@pytest.mark.parametrize(
    "content_type, charset",
    [("text/plain", None), ("application/octet-stream", None), ("text/plain", "utf-8"), ("text/html", "no-such-charset")],
)
async def test_an_answer_sent_as_another_type_than_json_is_read(fake: FakeLLM, make_judge, content_type, charset) -> None:
    """An answer whose type names no charset and is not JSON made the body's charset a guess that aiohttp refuses
    once the body was read as a stream: the judge raised, and the organizer retried its pass for good."""
    async def behaviour(n: int, body: dict) -> web.Response:
        return web.Response(body=_chat_bytes("The user prefers dark mode."), content_type=content_type, charset=charset)

    fake.behaviour = behaviour
    v = await make_judge().judge(A, B, 0.93)
    assert (v.label, v.judge, v.fused_text, v.fallback) == ("redundant", "llm", "The user prefers dark mode.", None)


@pytest.mark.parametrize(
    "fused",
    [
        "Bob works at Google",  # about something else: it would replace both memories
        "The user prefers dark mode\x00\x01",  # a control character neither memory holds
    ],
)
async def test_a_fused_text_that_does_not_restate_both_memories_is_replaced(fake: FakeLLM, make_judge, fused) -> None:
    async def behaviour(n: int, body: dict) -> web.Response:
        return answer("redundant", "same preference", fused)

    fake.behaviour = behaviour
    v = await make_judge().judge(A, B, 0.93)
    assert (v.label, v.judge, v.fused_text) == ("redundant", "llm", B.memory)  # the rule-based merge


@pytest.mark.parametrize(
    "a, b, fused",
    [
        # a detail of one memory left out: the time, the flight number
        ("Alice's flight to Paris leaves at 9:30", "Alice flies to Paris at 9:30 on flight 402", "Alice flies to Paris on flight 402"),
        ("Alice's flight to Paris leaves at 9:30", "Alice flies to Paris at 9:30 on flight 402", "Alice flies to Paris at 9:30"),
        # the negation turned over, a detail dropped, words of its own: each passed when half the words were kept
        ("Bob never eats meat or fish at dinner", "Bob never eats meat or fish at dinner parties", "Bob eats red meat at dinner parties with his friends"),
        ("Alice keeps her passport in a drawer", "Alice keeps her passport in the blue drawer of the bedroom desk", "Alice keeps her passport in a drawer"),
        ("Bob does not drink coffee at work", "Bob does not drink coffee at work on Mondays", "Bob drinks coffee at work on Mondays"),
    ],
)
async def test_a_fused_text_that_drops_a_detail_or_turns_a_negation_over_is_replaced(fake: FakeLLM, make_judge, a, b, fused) -> None:
    async def behaviour(n: int, body: dict) -> web.Response:
        return answer("redundant", "same flight", fused)

    fake.behaviour = behaviour
    v = await make_judge(veto_conflicts=False).judge(JudgedMemory(id="a", memory=a), JudgedMemory(id="b", memory=b), 0.95)
    assert v.label == "redundant" and v.fused_text == b  # the rule-based merge keeps the more informative text


async def test_a_fused_text_longer_than_a_memory_can_be_is_replaced(fake: FakeLLM, make_judge) -> None:
    from mnemolog.eventstore.model import MAX_TEXT_CHARS

    a = JudgedMemory(id="a", memory="note " * 11_000 + "The user prefers dark mode")
    b = JudgedMemory(id="b", memory="note " * 11_000 + "The user prefers dark mode.")

    async def behaviour(n: int, body: dict) -> web.Response:
        return answer("redundant", "same", "y " * (MAX_TEXT_CHARS // 2 + 5))

    fake.behaviour = behaviour
    v = await make_judge().judge(a, b, 0.99)
    assert v.label == "redundant" and len(v.fused_text) <= MAX_TEXT_CHARS
    assert v.fused_text.rstrip(".") == a.memory


async def _endless(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(request)
    await response.write(b'{"choices": [{"message": {"role": "assistant", "content": "')
    try:
        while True:  # until the client hangs up
            await response.write(b"x" * 65536)
    except (ConnectionResetError, RuntimeError):
        pass
    return response


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda request: completion("x" * 3_000_000), id="content-length"),
        pytest.param(_endless, id="chunked-without-end"),
    ],
)
async def test_a_huge_answer_is_not_read_whole_and_falls_back(fake: FakeLLM, make_judge, make) -> None:
    """A body of megabytes was read whole into memory before parsing (and one without end until the timeout):
    now reading stops at MAX_ANSWER_BYTES, and the answer is a bad one, retried, then the rule judge's verdict."""
    async def behaviour(n: int, body: dict) -> web.StreamResponse:
        return await make(fake.request) if make is _endless else make(fake.request)

    fake.behaviour = behaviour
    judge = make_judge(retries=1, timeout_s=20.0)
    began = asyncio.get_running_loop().time()
    v = await judge.judge(A, B, 0.9)
    assert asyncio.get_running_loop().time() - began < 10  # not waiting for the timeout
    assert v.judge == "rule" and v.fallback is not None
    assert v.fallback.startswith("llm failed: bad answer: ") and "bytes" in v.fallback and "(after 2 attempts)" in v.fallback


async def test_a_summary_longer_than_a_topic_should_keep_falls_back(fake: FakeLLM, make_judge) -> None:
    """A summary of 200,000 characters was taken as the topic's text, and the topic was then refused at its write
    (longer than a memory may be): the cluster got no topic at all. It is a bad answer: the extractive summary stays."""
    async def behaviour(n: int, body: dict) -> web.Response:
        return completion(json.dumps({"title": "Editor", "summary": "Dark mode. " * 20_000}))

    fake.behaviour = behaviour
    with pytest.raises(LLMUnavailable, match="bad answer: a summary of 219,999 characters"):
        await make_judge(retries=0).summarize_topic(["The user prefers dark mode"])


@pytest.mark.parametrize("status", [400, 401, 403])
async def test_an_error_quoting_the_api_key_never_puts_it_in_a_reason(fake: FakeLLM, make_judge, status) -> None:
    """An endpoint's 4xx answer is quoted in the fallback reason, which the organizer writes into its events and
    prints; one that echoed the key it was sent ("Incorrect API key provided: sk-...") put the key there too."""
    async def behaviour(n: int, body: dict) -> web.Response:
        key = fake.request.headers["Authorization"].removeprefix("Bearer ")
        error = {"type": "invalid_request_error", "message": f"Incorrect API key provided: {key}."}
        if n % 2 == 0:  # the key where the quote is clipped (200 characters): cut in two
            error = {"padding": "p" * 93} | error
        return web.json_response({"error": error}, status=status)

    fake.behaviour = behaviour
    judge = make_judge(api_key="sk-live-0123456789abcdef", retries=0)
    v = await judge.judge(A, B, 0.9)
    assert v.fallback is not None and v.judge == "rule"
    assert "sk-live" not in msgspec.json.encode(v).decode()
    assert f"HTTP {status}" in v.fallback and "Incorrect API key provided: [the API key]." in v.fallback
    with pytest.raises(LLMUnavailable) as caught:
        await judge.summarize_topic(["The user prefers dark mode"])
    assert "sk-live" not in str(caught.value) and "pppp" in str(caught.value)


@pytest.mark.parametrize("form", ["seconds", "http-date"])
async def test_a_429_is_retried_after_the_time_its_retry_after_says(fake: FakeLLM, make_judge, form) -> None:
    """Retry-After as an HTTP date (as RFC 9110 allows, and some gateways send) was ignored: the judge retried
    after its own short backoff, into the same 429, and fell back to the rule judge."""
    from email.utils import format_datetime
    from datetime import datetime, timedelta, timezone

    seen: list[float] = []

    async def behaviour(n: int, body: dict) -> web.Response:
        seen.append(asyncio.get_running_loop().time())
        if n == 1:
            later = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=3), usegmt=True)
            return web.json_response({"error": "slow down"}, status=429, headers={"Retry-After": "1.2" if form == "seconds" else later})
        if seen[-1] - seen[0] < 1.0:
            return web.json_response({"error": "slow down"}, status=429)
        return answer("independent", "different facts")

    fake.behaviour = behaviour
    v = await make_judge(retries=2, backoff_s=0.01).judge(A, B, 0.9)
    assert (v.judge, v.fallback) == ("llm", None) and len(seen) == 2


@pytest.mark.parametrize("content", [
    '<think>A says {dark mode}; B says the same. Any {conflict}? No.</think>\n{"label": "redundant", "reason": "same preference"}',
    '<think>Both {A} and {B} prefer dark mode.</think>```json\n{"label": "redundant", "reason": "same preference"}\n```',
    'Comparing {A} with {B}: {"label": "redundant", "reason": "same preference"}',
    '<think>Unfinished thoughts about {A}\n{"label": "redundant", "reason": "same preference"}',
])
async def test_an_answer_after_a_reasoning_models_thoughts_is_read(fake: FakeLLM, make_judge, content) -> None:
    """A reasoning model behind an OpenAI-compatible server (ollama, vLLM) writes its thoughts in <think> before the
    JSON; a brace in them made every answer "invalid JSON": retried, then always the rule judge's verdict."""
    async def behaviour(n: int, body: dict) -> web.Response:
        return completion(content)

    fake.behaviour = behaviour
    v = await make_judge().judge(A, B, 0.9)
    assert (v.judge, v.label, v.reason, v.fallback) == ("llm", "redundant", "same preference", None)
    assert len(fake.requests) == 1


async def test_an_api_key_read_with_its_final_line_break_is_sent_without_it(fake: FakeLLM, make_judge) -> None:
    """A key read from a file or a secret keeps its final line break: every request then failed as it was built
    ("Forbidden control character detected in headers"), a ValueError out of judge(), which must never raise:
    the organizer's pass failed, and was retried forever. The key is sent stripped; one with a break inside is refused."""
    v = await make_judge(api_key="sk-from-a-file\n").judge(A, B, 0.9)
    assert (v.judge, v.fallback) == ("llm", None)
    assert fake.requests[-1][0]["Authorization"] == "Bearer sk-from-a-file"
    with pytest.raises(ValueError, match="control character") as refused:
        make_judge(api_key="sk-one\r\nX-Injected: 1")
    assert "sk-one" not in str(refused.value)


async def test_an_endpoint_that_keeps_failing_is_not_asked_for_a_while(fake: FakeLLM, make_judge) -> None:
    """An endpoint down or hanging was asked for every pair, each with its timeouts and retries: a pass over
    1,000 pairs took hours, the organizer wedged. After a few questions in a row without an answer the judge
    falls back at once, saying why, and asks again after a pause; an answer closes the breaker."""
    down = True

    async def behaviour(n: int, body: dict) -> web.Response:
        return web.Response(status=503, text="down") if down else answer("independent", "different facts")

    fake.behaviour = behaviour
    judge = make_judge(retries=1, breaker_failures=3, breaker_cooldown_s=0.5)
    verdicts = [await judge.judge(A, B, 0.9) for _ in range(10)]
    assert len(fake.requests) == 3  # 3 attempts: a question's 2, the next question's first (its retry is not asked)
    assert all(v.judge == "rule" for v in verdicts)
    assert verdicts[0].fallback == "llm failed: HTTP 503 (after 2 attempts)"
    assert verdicts[1].fallback.startswith("llm failed: not asked: 3 attempts in a row got no usable answer (the last: HTTP 503")
    await asyncio.sleep(0.6)
    assert (await judge.judge(A, B, 0.9)).fallback.startswith("llm failed: not asked: 4 attempts")  # asked again once: paused again
    assert (await judge.judge(A, B, 0.9)).fallback.startswith("llm failed: not asked")
    assert len(fake.requests) == 4
    await asyncio.sleep(0.6)
    down = False
    assert [(await judge.judge(A, B, 0.9)).judge for _ in range(2)] == ["llm", "llm"]
    down = True
    assert (await judge.judge(A, B, 0.9)).fallback == "llm failed: HTTP 503 (after 2 attempts)"  # two failed attempts: no pause


@pytest.mark.parametrize("retries, pairs", [(0, 40), (2, 80)])
async def test_a_hanging_endpoint_holds_a_batch_of_pairs_for_a_few_timeouts_only(fake: FakeLLM, make_judge, retries, pairs) -> None:
    """With retries, every pair's first attempt was queued before any question had spent its retries: the breaker,
    counting questions, opened after about pairs x timeout / concurrency (80 pairs: 168 requests, 21 s)."""
    async def behaviour(n: int, body: dict) -> web.Response:
        await asyncio.sleep(5)
        return answer("independent")

    fake.behaviour = behaviour
    judge = make_judge(timeout_s=0.2, retries=retries, concurrency=4, breaker_failures=4, breaker_cooldown_s=60)
    began = asyncio.get_running_loop().time()
    verdicts = await asyncio.gather(*(judge.judge(A, B, 0.9) for _ in range(pairs)))
    assert asyncio.get_running_loop().time() - began < 2  # 10 rounds of 4 timeouts would take 2 s at least
    assert all(v.judge == "rule" and v.fallback for v in verdicts)
    assert len(fake.requests) <= 8


async def test_a_password_in_the_url_is_never_quoted(fake: FakeLLM) -> None:
    """A URL with a password (sent as basic auth) is shown by the judge's repr, and an error quoting the
    credentials it was sent put the password into the fallback reason the organizer records."""
    import base64

    async def behaviour(n: int, body: dict) -> web.Response:
        sent = base64.b64decode(fake.request.headers["Authorization"].removeprefix("Basic ")).decode()
        return web.json_response({"error": f"bad credentials {sent}"}, status=403)

    fake.behaviour = behaviour
    judge = LLMJudge(fake.url.replace("http://", "http://user:s3cret%21pw@"), "m", None, retries=0, fallback=RuleJudge())
    try:
        v = await judge.judge(A, B, 0.9)
    finally:
        await judge.close()
    assert v.fallback is not None and "HTTP 403" in v.fallback and "user:[the URL's password]" in v.fallback
    assert "s3cret" not in v.fallback and "s3cret" not in repr(judge)


@pytest.mark.parametrize("status", [408, 425, 429])
async def test_a_client_error_that_says_later_is_retried(fake: FakeLLM, make_judge, status) -> None:
    """A gateway's 408 (request timeout) was taken as final: no retry, the rule judge's verdict at once."""
    async def behaviour(n: int, body: dict) -> web.Response:
        return web.Response(status=status, text="later") if n == 1 else answer("independent", "different facts")

    fake.behaviour = behaviour
    v = await make_judge().judge(A, B, 0.9)
    assert (v.judge, v.fallback) == ("llm", None) and len(fake.requests) == 2


async def test_a_redundant_answer_on_texts_cut_for_the_prompt_stands_only_where_the_rules_agree(fake: FakeLLM, make_judge) -> None:
    """The prompt cuts a text at max_chars: two long memories alike up to there and apart after (another
    project lead) were judged redundant on their shared start, and the merge kept one lead and lost the other."""
    async def behaviour(n: int, body: dict) -> web.Response:
        return answer("redundant", "the same report")

    fake.behaviour = behaviour
    judge = make_judge(max_chars=400)
    start = " ".join(f"Paragraph {i} of the quarterly report says the team met its goals." for i in range(20))
    a = JudgedMemory(id="a", memory=start + " The project was led by Alice Martin.")
    b = JudgedMemory(id="b", memory=start + " The project was led by Bruno Keller.")
    v = await judge.judge(a, b, 0.99)
    assert v.label == "independent" and v.fused_text is None
    assert v.reason.startswith("llm said redundant (the same report) on the first 400 characters of each text;") and "rule judge" in v.reason
    # where the rules see the whole texts as one (one holds the other), the LLM's answer stands
    v = await judge.judge(JudgedMemory(id="a", memory=start), JudgedMemory(id="b", memory=start + " It also covers the Lisbon office."), 0.99)
    assert (v.label, v.judge) == ("redundant", "llm") and v.fused_text.endswith("Lisbon office.")
    # texts the prompt holds whole are the LLM's to judge, as before
    v = await judge.judge(A, B, 0.95)
    assert (v.label, v.judge) == ("redundant", "llm")


async def test_a_fused_text_written_from_texts_cut_for_the_prompt_is_replaced(fake: FakeLLM, make_judge) -> None:
    """The LLM fuses what it read: of a memory cut for the prompt, its fused text kept the start only, and the
    merge dropped the rest (a number in it would have been noticed, words were not)."""
    areas = "sales support hiring travel security training design research legal finance logistics marketing".split()
    start = " ".join(f"The quarterly report says the team met its goals in {area}." for area in areas)

    async def behaviour(n: int, body: dict) -> web.Response:
        return answer("redundant", "the same report", start[:380])

    fake.behaviour = behaviour
    longer = JudgedMemory(id="b", memory=start + " It also covers the Lisbon office.")
    v = await make_judge(max_chars=400).judge(JudgedMemory(id="a", memory=start), longer, 0.99)
    assert (v.label, v.judge) == ("redundant", "llm") and v.fused_text == longer.memory
