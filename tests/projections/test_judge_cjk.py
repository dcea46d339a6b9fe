"""The rule judge on Chinese and Japanese: single-valued relations (home, employer, job, birthplace, spouse, name,
favourite) with two values contradict; their look-alikes (two subjects, the past, a wish, a list, a negation,
things liked, numbered rooms) stay independent."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings
from mnemolog.projections.policies.judge import JudgedMemory, RuleJudge
from mnemolog.projections.policies.judge_cjk import cjk_relation
from mnemolog.projections.policies.organizer import Organizer
from mnemolog.tools import judge_cases_cjk
from mnemolog.tools.judge_cases import CASES, evaluate

JUDGE = RuleJudge()


def judge(a: str, b: str, cosine: float = 0.9):
    return JUDGE.judge_sync(JudgedMemory("a", a, updated_at="2024-01-01T00:00:00+00:00"),
                            JudgedMemory("b", b, updated_at="2024-06-01T00:00:00+00:00"), cosine)


@pytest.mark.parametrize("a, b, cosine", judge_cases_cjk.RELATIONS)
def test_a_single_valued_relation_with_two_values_contradicts(a: str, b: str, cosine: float) -> None:
    for first, second in ((a, b), (b, a)):
        v = judge(first, second, cosine)
        assert v.label == "contradictory", v.reason
        assert "single-valued" in v.reason


@pytest.mark.parametrize("a, b, cosine", judge_cases_cjk.NOT_RELATIONS)
def test_look_alikes_of_a_relation_are_independent(a: str, b: str, cosine: float) -> None:
    for first, second in ((a, b), (b, a)):
        assert judge(first, second, cosine).label == "independent", (first, second)


@pytest.mark.parametrize("a, b, values", [
    ("我住在里斯本", "我现在住在波尔图", "里斯本 vs 波尔图"),
    ("トヨタで働いています", "ソニーで働いています", "トヨタ vs ソニー"),
    ("我在Google工作", "我在微软工作", "google vs 微软"),
])
def test_the_reason_names_the_two_values_as_written(a: str, b: str, values: str) -> None:
    assert values in judge(a, b).reason


@pytest.mark.parametrize("run, relation, subject, value", [
    ("我现在住在波尔图", "<residence>", "我", "波尔图"),
    ("我叫王刚", "<named>", "我", "王刚"),  # 刚 (just) is an adverb elsewhere, here part of a name
    ("私は今大阪に住んでいます", "<residence>", "私は", "大阪"),
    ("我当上了经理", "<job>", "我", "经理"),
    ("我女儿搬到北京了", "<moved>", "我女儿", "北京"),
    ("東京生まれです", "<born>", "", "東京"),
])
def test_a_clause_is_read_as_subject_relation_value(run: str, relation: str, subject: str, value: str) -> None:
    stated = cjk_relation(run)
    assert stated is not None and (stated.relation, stated.subject, stated.value) == (relation, subject, value)


@pytest.mark.parametrize("run", [
    "我想当医生", "我当时很忙", "我做饭", "他叫什么名字", "妈妈叫弟弟回家", "我在北京工作", "我在家工作",
    "我住在这里", "我住在北京和上海", "我不住在北京", "我以前住在北京", "我在谷歌工作过",
    "東京に住んでいました", "東京に住んでいません", "好きな色は青と緑です", "私の好きな色は緑でした",
])
def test_no_relation_is_read_where_unsure(run: str) -> None:
    assert cjk_relation(run) is None


_SUBJECTS = ("我", "我妹妹", "他", "我爸爸")
_CITIES = ("里斯本", "波尔图", "北京", "北海", "上海", "旧金山", "阿姆斯特丹")
_HOMES = ("{s}住在{v}", "{s}现在住在{v}", "{s}搬到了{v}", "{s}目前居住在{v}")


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(_SUBJECTS), st.sampled_from(_SUBJECTS), st.sampled_from(_CITIES), st.sampled_from(_CITIES),
       st.sampled_from(_HOMES), st.sampled_from(_HOMES))
def test_two_homes_contradict_only_for_one_subject_and_two_cities(sa, sb, va, vb, ta, tb) -> None:
    a, b = ta.format(s=sa, v=va), tb.format(s=sb, v=vb)
    label = judge(a, b, 0.9).label
    assert label == judge(b, a, 0.9).label
    assert (label == "contradictory") == (sa == sb and va != vb), (a, b)


def test_japanese_with_and_without_katakana_is_one_script_and_latin_names_stay_in_chinese() -> None:
    assert "scripts" not in judge("東京に住んでいます", "ニューヨークに住んでいます").reason
    assert judge("東京に住んでいます", "ニューヨークに住んでいます").label == "contradictory"
    assert judge("トヨタで働いています", "ソニーで働いています").label == "contradictory"  # ー (KATAKANA-HIRAGANA)
    assert judge("我在Google工作", "我在微软工作").label == "contradictory"
    assert "scripts" in judge("我住在上海", "I live in Shanghai").reason
    assert "scripts" in judge("東京に住んでいます", "我住在东京").reason  # Japanese and Chinese are not compared


@pytest.mark.parametrize("a, b, label", [
    ("我住在3号楼", "我住在5号楼", "independent"),  # building 3, building 5
    ("我住在501室", "我住在502室", "independent"),
    ("我在读第3章", "我在读第5章", "independent"),
    ("我的生日是3月5号", "我的生日是3月6号", "contradictory"),  # 号 after 月 is a day, not a number of a thing
])
def test_numbers_that_name_a_thing_in_cjk_are_identifiers(a: str, b: str, label: str) -> None:
    assert judge(a, b, 0.95).label == label


def test_the_labelled_set_holds_the_cjk_pairs_and_keeps_its_precision() -> None:
    labelled = {(case.a_text, case.b_text, case.expected) for case in CASES}
    cjk = [(a, b, "contradictory") for a, b, _ in judge_cases_cjk.RELATIONS]
    cjk += [(a, b, "independent") for a, b, _ in judge_cases_cjk.NOT_RELATIONS]
    assert len(cjk) >= 40 and set(cjk) <= labelled
    scores = evaluate(JUDGE)
    assert scores["contradiction_precision"] == 1.0 and scores["redundant_precision"] >= 0.95


@pytest.fixture
def settings() -> Settings:
    # the hashing embedder sees two short CJK clauses that share a few characters as far apart (cosine 0.17 here):
    # a semantic embedder or a key makes them candidates; here a low threshold does
    return Settings({"organizer_cluster_interval_s": 0.0, "organizer_min_cosine": 0.1}, env={})


def test_the_organizer_supersedes_the_older_home_written_in_chinese(svc, settings) -> None:
    ctx = CommandContext(tenant="t1")
    [older] = svc.run(svc.memories.add, ctx, [MemoryContent(memory="我住在里斯本")]).memory_ids
    [other] = svc.run(svc.memories.add, ctx, [MemoryContent(memory="我妹妹住在里斯本")]).memory_ids
    [newer] = svc.run(svc.memories.add, ctx, [MemoryContent(memory="我现在住在波尔图")]).memory_ids
    Organizer(svc, settings).run_once()
    [superseded] = svc.store.read_all(tenant="t1", types=["MemorySuperseded"])
    assert (superseded.event.memory_id, superseded.event.superseded_by) == (older, newer)
    assert "里斯本 vs 波尔图" in c.decision_of(superseded.event).reason
    assert svc.get("t1", older).status == "archived"
    assert svc.get("t1", newer).status == svc.get("t1", other).status == "activated"
