"""LLM judge: labels a memory pair through an OpenAI-compatible chat endpoint.

``POST {url}/chat/completions`` with ``response_format={"type": "json_object"}``
and a prompt asking for ``{"label", "reason", "fused_text"}``; an endpoint
that refuses ``response_format`` with a 400 naming it (some OpenAI-compatible
servers take no JSON mode) is asked again without it, as it is from then on.  Timeouts,
connection errors, HTTP 408/425/429/5xx and unusable answers are retried with
exponential backoff; a semaphore bounds concurrent requests.  When every
attempt fails, :meth:`LLMJudge.judge` returns the rule judge's verdict with
``fallback="llm failed: <why>"`` -- judging never raises because the endpoint
is down. The API key never appears in a reason, even where the endpoint's
error quotes it.

Guard rails, because a wrong merge costs more than a missed one:

* a ``redundant`` answer is vetoed when the rule judge finds the pair
  contradictory (a number, date, negation or opposite differs): the verdict
  is then the rule judge's (its name and version), its reason saying what the
  LLM had answered;
* a ``redundant`` or ``contradictory`` answer is vetoed (independent) when
  the memories hold two slots (different keys) or name two things (different
  identifiers: "invoice 1001" / "invoice 1002"): a merge or a supersede would
  lose a fact;
* a ``redundant`` answer on a text the prompt cut (at ``max_chars``) is
  independent unless the rule judge, reading both texts whole, finds them
  redundant too: the LLM never read what a merge keeping one text would lose
  (and its ``fused_text`` of what it read gives way to :func:`merged_text`);
* a ``fused_text`` that brings in a number found in neither memory, leaves out
  one of theirs, is implausibly long (or longer than a memory may be), or holds
  a lone surrogate (a character cut in half), is replaced by the rule-based
  :func:`merged_text`; a lone surrogate in a reason, title or summary becomes
  U+FFFD, so that the decision can be written.

The JSON object is read through a code fence, prose around it and a reasoning
model's ``<think>`` block before it, braces in them included (see
:func:`_extract_json`). An answer that cannot be read (not UTF-8, an unknown charset, JSON nested too
deeply, no JSON object, an unknown label, more than :data:`MAX_ANSWER_BYTES`,
which are not read) is a bad answer: retried, then the rule judge's verdict,
with the reason in ``fallback``.

:meth:`LLMJudge.summarize_topic` names a topic from its memories on the same
endpoint and raises :class:`LLMUnavailable` on failure, so the caller can fall
back to an extractive summary (so does a summary longer than
:data:`MAX_SUMMARY_CHARS`, which no topic should keep).
"""

from __future__ import annotations

import asyncio
import codecs
import email.utils
import json
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any, TypeVar

import aiohttp
import msgspec
import yarl

from mnemolog.eventstore.model import MAX_TEXT_CHARS

from .judge import JudgedMemory, RuleJudge, Verdict, about_different_things, clipped, merged_text, restates

__all__ = ["LLMJudge", "LLMUnavailable", "PROMPT_VERSION", "clean_api_key"]

PROMPT_VERSION = "1"
#: The largest answer read (decompressed): a pair's verdict or a topic's title is a few hundred bytes.
MAX_ANSWER_BYTES = 1 << 20
#: The longest topic summary taken from an answer (the prompt asks for at most 3 sentences); a longer one is a bad answer.
MAX_SUMMARY_CHARS = 2000
T = TypeVar("T")

_JUDGE_SYSTEM = """\
You compare two memories kept by an AI assistant about its user and the world, \
and decide how they relate. Reply with one JSON object and nothing else:
{"label": "redundant" | "contradictory" | "independent",
 "reason": "<one sentence naming the evidence>",
 "fused_text": "<only for redundant: one text keeping every detail of both; otherwise null>"}

- redundant: both state the same fact (duplicates, paraphrases, or one is a more \
detailed version of the other). Merging them must lose nothing.
- contradictory: both cannot be true at the same time about the same subject \
(a different value for the same attribute, a different number or date, one \
negates the other). The newer memory will replace the older one.
- independent: anything else, including related facts about different people, \
things, times or attributes.

A wrong merge is worse than a missed one: if unsure between redundant and \
independent, answer independent. Never call two memories redundant when they \
differ in a number, a date, a name or a negation."""

_TOPIC_SYSTEM = """\
You name a cluster of memories kept by an AI assistant. Reply with one JSON \
object and nothing else: {"title": "<at most 8 words>", "summary": "<at most 3 \
sentences covering what the memories say>"}. Use only facts from the memories."""

_LABEL_ALIASES = {
    "redundant": "redundant", "duplicate": "redundant", "duplicates": "redundant", "same": "redundant",
    "contradictory": "contradictory", "contradiction": "contradictory", "conflict": "contradictory",
    "contradicts": "contradictory", "independent": "independent", "unrelated": "independent",
    "distinct": "independent", "different": "independent",
}
_FENCE_RE = re.compile(r"```[a-zA-Z]*\s*(.*?)```", re.S)
_THINK_RE = re.compile(r"<think>.*?</think>", re.S | re.I)  # a reasoning model's thoughts (ollama, vLLM)
_MAX_OBJECT_STARTS = 64
#: Client errors that say "later", not "never": request timeout (a gateway's), too early, too many requests.
_RETRIED_STATUSES = frozenset({408, 425, 429})
_DIGITS_RE = re.compile(r"\d+(?:[.,]\d+)*")
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


class LLMUnavailable(RuntimeError):
    """The LLM endpoint gave no usable answer (after retries); ``str()`` says why."""


class _Retry(Exception):
    def __init__(self, why: str, wait_s: float | None = None) -> None:
        super().__init__(why)
        self.wait_s = wait_s


class _Fatal(Exception):
    pass


class _NoJsonMode(Exception):
    """The endpoint refused ``response_format`` (a 400 naming it)."""


def _extract_json(content: str, wanted: frozenset[str]) -> dict[str, Any]:
    """The JSON object in an answer, tolerating code fences, surrounding prose and a reasoning model's
    ``<think>`` block: the whole text, else from its first ``{`` to its last ``}``, else the first object
    holding one of the ``wanted`` keys (among the first :data:`_MAX_OBJECT_STARTS` braces), when prose
    around it holds braces of its own."""
    text = _THINK_RE.sub("", content).strip()
    fenced = _FENCE_RE.search(text)
    if fenced:
        text = fenced.group(1).strip()
    try:
        obj = json.loads(text)
    except RecursionError:
        raise _Retry("bad answer: JSON nested too deeply") from None
    except ValueError:
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end <= start:
            raise _Retry(f"bad answer: no JSON object in {_clip(content)!r}") from None
        try:
            obj = json.loads(text[start: end + 1])
        except RecursionError:
            raise _Retry("bad answer: JSON nested too deeply") from None
        except ValueError as exc:
            obj = _object_among(text, wanted)
            if obj is None:
                raise _Retry(f"bad answer: invalid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise _Retry(f"bad answer: expected a JSON object, got {type(obj).__name__}")
    return obj


def _object_among(text: str, wanted: frozenset[str]) -> dict[str, Any] | None:
    decoder = json.JSONDecoder()
    for n, brace in enumerate(re.finditer(r"\{", text)):
        if n == _MAX_OBJECT_STARTS:
            break
        try:
            obj, _ = decoder.raw_decode(text, brace.start())
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict) and not wanted.isdisjoint(obj):
            return obj
    return None


def _text(value: str) -> str:
    """``value`` as Unicode text: JSON may hold a lone surrogate (half an emoji, ``"\\ud83d"``), which no event,
    file or response can encode; it becomes U+FFFD (a pair written as two escapes stays the character it names)."""
    return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _parse_verdict(content: str) -> tuple[str, str, str | None]:
    obj = _extract_json(content, frozenset({"label"}))
    raw = str(obj.get("label") or "").strip().casefold()
    label = _LABEL_ALIASES.get(raw)
    if label is None:
        raise _Retry(f"bad answer: unknown label {_clip(_text(raw))!r}")
    reason = _text(str(obj.get("reason") or "")).strip() or "no reason given"
    fused = obj.get("fused_text")
    fused = fused.strip() if isinstance(fused, str) and fused.strip() else None
    if fused is not None and _text(fused) != fused:  # a character cut in half: not the memories' words
        fused = None
    return label, reason, fused


def _parse_topic(content: str) -> tuple[str, str]:
    obj = _extract_json(content, frozenset({"title", "summary"}))
    title, summary = obj.get("title"), obj.get("summary")
    if not isinstance(title, str) or not title.strip() or not isinstance(summary, str) or not summary.strip():
        raise _Retry("bad answer: title and summary must be non-empty strings")
    title, summary = _text(title), _text(summary)
    if len(summary.strip()) > MAX_SUMMARY_CHARS:
        raise _Retry(f"bad answer: a summary of {len(summary.strip()):,} characters, more than {MAX_SUMMARY_CHARS:,}")
    return " ".join(title.split())[:120], summary.strip()


def _clip(text: str, limit: int = 200) -> str:
    return clipped(" ".join(text.split()), limit)


def _describe(label: str, m: JudgedMemory, max_chars: int) -> str:
    meta = [f"type: {m.memory_type}"]
    if m.key:
        meta.append(f"key: {m.key}")
    if m.updated_at:
        meta.append(f"updated_at: {m.updated_at}")
    text = m.memory if len(m.memory) <= max_chars else m.memory[:max_chars] + " [truncated]"
    return f"Memory {label} ({', '.join(meta)}):\n{text}"


class LLMJudge:
    """Judge pairs with an LLM; falls back to ``fallback`` (a :class:`RuleJudge`)."""

    name = "llm"

    def __init__(
        self,
        url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout_s: float = 20.0,
        retries: int = 2,
        backoff_s: float = 0.5,
        concurrency: int = 4,
        fallback: RuleJudge | None = None,
        max_chars: int = 4000,
        max_wait_s: float = 30.0,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
        veto_conflicts: bool = True,
        breaker_failures: int = 5,
        breaker_cooldown_s: float = 60.0,
    ) -> None:
        if concurrency < 1 or retries < 0:
            raise ValueError("concurrency must be >= 1 and retries >= 0")
        self.url = url.rstrip("/")
        self.endpoint = f"{self.url}/chat/completions"
        self.model = model
        self.timeout_s = float(timeout_s)
        self.retries = int(retries)
        self.backoff_s = float(backoff_s)
        self.max_chars = max_chars
        self.max_wait_s = max_wait_s
        self.max_answer_bytes = max_answer_bytes
        self.veto_conflicts = veto_conflicts
        self.fallback = fallback or RuleJudge()
        self.version = f"{PROMPT_VERSION}+{model}"
        self.stats: Counter[str] = Counter()  # requests, retries, failures, fallbacks, vetoes
        self._api_key = clean_api_key(api_key)
        # What no reason may quote: the key, and a password in the URL (sent as basic auth), escaped or not.
        password = yarl.URL(self.url).password
        self._secrets = tuple(dict.fromkeys(x for x in (self._api_key, password, yarl.URL(self.url).raw_password) if x))
        self._semaphore = asyncio.Semaphore(concurrency)
        self._session: aiohttp.ClientSession | None = None
        # The circuit breaker: after this many failed requests in a row, none for a while (see _chat).
        self.breaker_failures = int(breaker_failures)
        self.breaker_cooldown_s = float(breaker_cooldown_s)
        self._failed_in_row = 0
        self.json_mode = True  # False once the endpoint refused response_format
        self._open_until = 0.0
        self._last_failure = ""

    def __repr__(self) -> str:  # never shows the API key, nor the URL's password
        return f"LLMJudge(url={str(yarl.URL(self.url).with_password(None))!r}, model={self.model!r})"

    async def __aenter__(self) -> LLMJudge:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else None
            self._session = aiohttp.ClientSession(headers=headers)
        return self._session

    # ------------------------------------------------------------------ transport

    async def _post(self, payload: dict[str, Any]) -> str:
        """One request; returns the assistant message content."""
        self.stats["requests"] += 1
        try:
            async with self._get_session().post(
                self.endpoint, json=payload, timeout=aiohttp.ClientTimeout(total=self.timeout_s)
            ) as resp:
                raw = await _read_capped(resp, self.max_answer_bytes)
                if resp.status in _RETRIED_STATUSES or resp.status >= 500:
                    raise _Retry(f"HTTP {resp.status}", _retry_after(resp.headers.get("Retry-After")))
                try:
                    body = raw.decode(_charset(resp), errors="replace" if resp.status >= 400 else "strict")
                except UnicodeError as exc:  # bytes not in the charset it names
                    raise _Retry(f"bad answer: undecodable body ({exc})") from None
                if resp.status == 400 and "response_format" in payload and "response_format" in body.lower():
                    raise _NoJsonMode()
                if resp.status >= 400:
                    raise _Fatal(f"HTTP {resp.status}: {_clip(self._redact(body))}")
        except _NoJsonMode:  # the answer's JSON is found in plain chat all the same (see _extract_json)
            self.json_mode = False
            return await self._post({k: v for k, v in payload.items() if k != "response_format"})
        except TimeoutError:
            raise _Retry(f"timeout after {self.timeout_s:g}s") from None
        except aiohttp.ClientError as exc:
            raise _Retry(f"connection error: {type(exc).__name__}: {exc}") from None
        try:
            content = json.loads(body)["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError, RecursionError):
            raise _Retry(f"bad answer: not a chat completion: {_clip(self._redact(body))!r}") from None
        if not isinstance(content, str):
            raise _Retry("bad answer: message content is not a string")
        return content

    async def _chat(self, system: str, user: str, parse: Callable[[str], T]) -> T:
        """Ask, parse, retry with exponential backoff; raise :class:`LLMUnavailable`.

        After ``breaker_failures`` attempts in a row got no usable answer (a question's retries count, whichever
        question they were for), none is asked for ``breaker_cooldown_s`` (each fails at once, saying why): an
        endpoint that is down or hangs would otherwise hold a pass for its every pair's timeouts and retries
        (1,000 pairs, 3 attempts of 20 s, 4 at a time: four hours). Counted by question, the breaker opened only
        once a question had spent all its retries, behind the first attempts of every pair of the pass queued
        before them. After the pause, one failure more pauses again; an answer closes it.
        """
        payload = {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "temperature": 0,
        }
        if self.json_mode:
            payload["response_format"] = {"type": "json_object"}
        why = "no attempt made"
        for attempt in range(self.retries + 1):
            try:
                async with self._semaphore:
                    if (left := self._open_until - time.monotonic()) > 0:  # checked in turn: others may have failed meanwhile
                        self.stats["paused"] += 1
                        raise LLMUnavailable(f"not asked: {self._failed_in_row} attempts in a row got no usable answer"
                                             f" (the last: {self._last_failure}); asking again in {left:.0f}s")
                    content = await self._post(payload)
                result = parse(content)
                self._failed_in_row = 0
                return result
            except _Fatal as exc:
                self._attempt_failed(str(exc))
                raise self._failed(str(exc)) from None
            except _Retry as exc:
                why = str(exc)
                self._attempt_failed(why)
                if attempt == self.retries:
                    break
                self.stats["retries"] += 1
                delay = self.backoff_s * 2**attempt
                if exc.wait_s is not None:
                    delay = max(delay, exc.wait_s)
                await asyncio.sleep(min(delay, self.max_wait_s))
        attempts = self.retries + 1
        raise self._failed(f"{why} (after {attempts} attempt{'s' if attempts > 1 else ''})")

    def _attempt_failed(self, why: str) -> None:
        """An attempt that got no usable answer: counted (the breaker opens at ``breaker_failures`` in a row)."""
        self._failed_in_row += 1
        self._last_failure = _clip(self._redact(why), 160)
        if self._failed_in_row >= self.breaker_failures:
            self._open_until = time.monotonic() + self.breaker_cooldown_s

    def _failed(self, why: str) -> LLMUnavailable:
        """A question that got no usable answer."""
        self.stats["failures"] += 1
        return LLMUnavailable(self._redact(why))

    def _redact(self, why: str) -> str:
        """``why`` without the API key or the URL's password: an endpoint's error may quote the key it was sent
        ("Incorrect API key provided: sk-..."), aiohttp's errors the URL, and a failure's reason is written into
        the organizer's events and shown."""
        for secret in self._secrets:
            why = why.replace(secret, "[the API key]" if secret == self._api_key else "[the URL's password]")
        return why

    # ------------------------------------------------------------------ judging

    async def judge(self, a: JudgedMemory, b: JudgedMemory, cosine: float) -> Verdict:
        cos = float(cosine) if cosine is not None and math.isfinite(cosine) else 0.0
        user = (f"{_describe('A', a, self.max_chars)}\n\n{_describe('B', b, self.max_chars)}\n\n"
                f"Embedding cosine similarity: {cos:.3f}")
        try:
            label, reason, fused = await self._chat(_JUDGE_SYSTEM, user, _parse_verdict)
        except LLMUnavailable as exc:
            self.stats["fallbacks"] += 1
            return msgspec.structs.replace(self.fallback.judge_sync(a, b, cos), fallback=f"llm failed: {exc}")
        if label != "independent" and self.veto_conflicts and (apart := about_different_things(a, b)):
            self.stats["vetoes"] += 1
            return Verdict("independent", f"llm said {label} ({reason}); vetoed: {apart}", self.name, self.version, cos)
        if label != "redundant":
            return Verdict(label, reason, self.name, self.version, cos)  # type: ignore[arg-type]
        cut = max(len(a.memory), len(b.memory)) > self.max_chars  # the LLM never read what follows the cut
        if self.veto_conflicts or cut:
            rule = self.fallback.judge_sync(a, b, cos)
            if self.veto_conflicts and rule.label == "contradictory":  # the rule judge's label, so its verdict: the decision names who saw the conflict
                self.stats["vetoes"] += 1
                return msgspec.structs.replace(rule, reason=f"llm said redundant ({reason}); vetoed: {rule.reason}")
            if cut and rule.label != "redundant":  # a merge keeps one text: the unread rest may hold what it would lose
                self.stats["vetoes"] += 1
                return Verdict("independent", f"llm said redundant ({reason}) on the first {self.max_chars} characters of each text;"
                               f" the rule judge on the whole texts: {rule.label} ({rule.reason})", self.name, self.version, cos)
        if fused is None or cut or not _plausible_fusion(fused, a.memory, b.memory):  # cut: it fused what it read
            fused = merged_text(a, b)
        return Verdict("redundant", reason, self.name, self.version, cos, fused_text=fused)

    async def summarize_topic(self, texts: Sequence[str], *, max_texts: int = 40,
                              max_chars_per_text: int = 500) -> tuple[str, str]:
        """``(title, summary)`` for a cluster of memory texts.

        Raises :class:`LLMUnavailable` when the endpoint gives no usable
        answer after retries, and ``ValueError`` when ``texts`` is empty.
        """
        items = [" ".join(t.split())[:max_chars_per_text] for t in texts if t and t.strip()][:max_texts]
        if not items:
            raise ValueError("summarize_topic needs at least one non-empty text")
        user = "Memories:\n" + "\n".join(f"- {t}" for t in items)
        return await self._chat(_TOPIC_SYSTEM, user, _parse_topic)


def _charset(resp: aiohttp.ClientResponse) -> str:
    """The charset the answer names, else UTF-8 (JSON's own), as for one it names that Python does not know.

    Not ``resp.get_encoding()``: with no charset named on a type other than JSON it guesses from the body,
    which it raises on once the body was read as a stream (as :func:`_read_capped` reads it)."""
    try:
        return codecs.lookup(resp.charset).name if resp.charset else "utf-8"
    except LookupError:
        return "utf-8"


async def _read_capped(resp: aiohttp.ClientResponse, cap: int) -> bytes:
    """The body, refused (a bad answer) once it passes ``cap`` bytes, without reading the rest: a chat
    completion for a pair is a few hundred bytes, and an endpoint that answers megabytes (or without end)
    must not fill the server's memory."""
    if resp.content_length is not None and resp.content_length > cap:
        raise _Retry(f"bad answer: {resp.content_length:,} bytes, more than the {cap:,} an answer may have")
    chunks, size = [], 0
    async for chunk in resp.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > cap:
            raise _Retry(f"bad answer: more than the {cap:,} bytes an answer may have")
        chunks.append(chunk)
    return b"".join(chunks)


def clean_api_key(key: str | None) -> str | None:
    """The API key without the whitespace around it (a key read from a file or a secret keeps its final line
    break); ``ValueError`` when one is left inside it. No header may hold a control character, and the request
    would fail as it is built, every time: not a failure to fall back from, a setting to fix."""
    key = (key or "").strip()
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in key):
        raise ValueError("the LLM API key holds a control character (a line break?)")  # the key itself is never shown
    return key or None


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: a number of seconds or an HTTP date (RFC 9110); None if neither."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # "-0000": UTC, as HTTP dates are
            when = when.replace(tzinfo=timezone.utc)
        seconds = (when - datetime.now(timezone.utc)).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


#: The share of each memory's content words a fused text must say.
FUSION_WORDS_KEPT = 0.8


def _plausible_fusion(fused: str, a: str, b: str) -> bool:
    """A fused text keeps every number of both memories and brings in none of its own (a number is a detail a
    merge must not lose nor invent), nor a control character of its own; says at least
    :data:`FUSION_WORDS_KEPT` of each memory's content words and brings in few of its own (a fusion restates
    both: "in the blue drawer of the bedroom desk" is not "in a drawer"); negates what they negate and nothing
    else ("never eats meat" is not "eats meat"); does not balloon in size, and is no longer than a memory may
    be. A fusion refused is no merge refused: the merge keeps the more informative text as written."""
    known = set(_DIGITS_RE.findall(a)) | set(_DIGITS_RE.findall(b))
    return (
        set(_DIGITS_RE.findall(fused)) == known
        and set(_CONTROL_RE.findall(fused)) <= set(_CONTROL_RE.findall(a + b))
        and len(fused) <= min(len(a) + len(b) + 40, MAX_TEXT_CHARS)
        and restates(fused, a, b, FUSION_WORDS_KEPT)
    )
