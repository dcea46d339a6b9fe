"""Settings of the organizer (dedup, conflicts, topics) and of its judges.

Every setting is read from ``MNEMOLOG_<NAME>`` (see :mod:`mnemolog.eventstore.settings`).
:func:`build_judge` turns them into the configured judge.
"""

from __future__ import annotations

from mnemolog.eventstore.settings import Settings, SettingError, setting

from .judge import RuleJudge, RuleJudgeConfig

ORGANIZER_ENABLED = setting("organizer_enabled", True, "Run the organizer (dedup, conflicts, topics); off: it does nothing.")
ORGANIZER_MIN_COSINE = setting("organizer_min_cosine", 0.80, "Candidates for a pair judgement: activated memories of the same type with at least this cosine.")
ORGANIZER_TOP_K = setting("organizer_top_k", 10, "At most this many vector candidates per new or updated memory.")
ORGANIZER_TYPES = setting(
    "organizer_types",
    "LongTermMemory,UserMemory,OuterMemory",
    "Memory types the organizer dedups and clusters (comma-separated); working memory and document chunks are left alone by default.",
)
ORGANIZER_BATCH = setting("organizer_batch", 1000, "Memory events the organizer reads per batch (one checkpoint move per batch).")
ORGANIZER_BUSY_SHARE = setting(
    "organizer_busy_share",
    0.25,
    "While other writes arrive, the background organizer rests between short slices of work so that its passes take about this share"
    " of the time (1: never rest); with the log otherwise quiet it runs at full speed.",
)
ORGANIZER_POLL_S = setting("organizer_poll_s", 1.0, "How often the background organizer looks for events written by other processes.")
CLUSTER_INTERVAL_S = setting("organizer_cluster_interval_s", 100.0, "Seconds between two topic clustering runs of the background organizer (0: never).")
MAX_CLUSTER_SIZE = setting("organizer_max_cluster_size", 20, "Topics are split until no cluster has more members than this.")
MIN_GROUP_SIZE = setting("organizer_min_group_size", 20, "Clustering is skipped for a tenant and type with fewer unparented memories.")
MIN_CLUSTER_SIZE = setting("organizer_min_cluster_size", 10, "A cluster becomes a topic only with more members than this.")
TIME_BUDGET_S = setting("organizer_time_budget_s", 600.0, "A clustering run stops cleanly (between clusters) after this many seconds.")

JUDGE = setting("judge", "rule", "Pair judge of the organizer: rule (default, no model) or llm (an OpenAI-compatible endpoint).")
LLM_URL = setting("llm_url", "", "Base URL of an OpenAI-compatible API (…/v1) for the llm judge and topic titles.")
LLM_MODEL = setting("llm_model", "", "Model name sent to the LLM endpoint.")
LLM_API_KEY = setting("llm_api_key", "", "Bearer key for the LLM endpoint (empty: none).")
LLM_TIMEOUT_S = setting("llm_timeout_s", 20.0, "Timeout of one LLM request.")
LLM_RETRIES = setting("llm_retries", 2, "Retries (with exponential backoff) of a failed LLM request before falling back to the rule judge.")
LLM_CONCURRENCY = setting("llm_concurrency", 4, "LLM requests in flight at once.")

_DEFAULT_RULES = RuleJudgeConfig()
RULE_SETTINGS = {
    "judge_redundant_cosine": ("redundant_cosine", "Rule judge: redundant without containment needs at least this cosine."),
    "judge_redundant_min_jaccard": ("redundant_min_jaccard", "Rule judge: … and at least this content-word Jaccard."),
    "judge_redundant_min_order": ("redundant_min_order", "Rule judge: … and at least this word-order similarity."),
    "judge_contradiction_similarity": ("contradiction_similarity", "Rule judge: texts differing in a value or negation contradict at this word similarity."),
    "judge_contradiction_cosine": ("contradiction_cosine", "Rule judge: … or at this cosine (with judge_contradiction_min_similarity)."),
    "judge_contradiction_min_similarity": ("contradiction_min_similarity", "Rule judge: word similarity needed with judge_contradiction_cosine."),
    "judge_containment_min_chars": ("containment_min_chars", "Rule judge: a contained text counts as redundant from this many characters."),
    "judge_containment_min_words": ("containment_min_words", "Rule judge: … and this many words."),
}
RULE_JUDGE_SETTINGS = tuple(setting(name, getattr(_DEFAULT_RULES, field), help) for name, (field, help) in RULE_SETTINGS.items())


def busy_share(settings: Settings) -> float:
    """``MNEMOLOG_ORGANIZER_BUSY_SHARE``, refused outside (0, 1]: at 0 a busy organizer would never work."""
    share = float(settings.organizer_busy_share)
    if not 0 < share <= 1:
        raise SettingError(f"{ORGANIZER_BUSY_SHARE.env} must be greater than 0 and at most 1, got {share:g}")
    return share


def type_list(settings: Settings) -> tuple[str, ...]:
    return tuple(t.strip() for t in str(settings.organizer_types).split(",") if t.strip())


def rule_config(settings: Settings) -> RuleJudgeConfig:
    values = {field: type(getattr(_DEFAULT_RULES, field))(settings.get(name)) for name, (field, _) in RULE_SETTINGS.items()}
    return RuleJudgeConfig(**values)


def build_judge(settings: Settings):
    """The configured judge: a :class:`RuleJudge`, or an :class:`LLMJudge` falling back to it."""
    rule = RuleJudge(rule_config(settings))
    kind = str(settings.judge).strip().lower()
    if kind == "rule":
        return rule
    if kind != "llm":
        raise SettingError(f"MNEMOLOG_JUDGE: expected rule or llm, got {settings.judge!r}")
    if not settings.llm_url or not settings.llm_model:
        raise SettingError("MNEMOLOG_JUDGE=llm needs MNEMOLOG_LLM_URL and MNEMOLOG_LLM_MODEL")
    from .llm_judge import LLMJudge

    return LLMJudge(
        settings.llm_url,
        settings.llm_model,
        settings.llm_api_key or None,
        timeout_s=float(settings.llm_timeout_s),
        retries=int(settings.llm_retries),
        concurrency=int(settings.llm_concurrency),
        fallback=rule,
    )
