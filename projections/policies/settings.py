"""Settings of the organizer (dedup, conflicts, topics) and of its judges.

Every setting is read from ``MNEMOLOG_<NAME>`` (see :mod:`mnemolog.eventstore.settings`).
:func:`build_judge` turns them into the configured judge.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from mnemolog.eventstore.model import MemoryType
from mnemolog.eventstore.settings import Settings, SettingError, setting

from .judge import RuleJudge, RuleJudgeConfig

ORGANIZER_ENABLED = setting("organizer_enabled", True, "Run the organizer (dedup, conflicts, topics); off: it does nothing.")
ORGANIZER_MIN_COSINE = setting(
    "organizer_min_cosine", 0.80, "Candidates for a pair judgement: activated memories of the same type with at least this cosine.", minimum=-1, maximum=1
)
ORGANIZER_TOP_K = setting("organizer_top_k", 10, "At most this many vector candidates per new or updated memory.", minimum=1)
ORGANIZER_TYPES = setting(
    "organizer_types",
    "LongTermMemory,UserMemory,OuterMemory",
    "Memory types the organizer dedups and clusters (comma-separated); working memory and document chunks are left alone by default.",
)
ORGANIZER_BATCH = setting("organizer_batch", 1000, "Memory events the organizer reads per batch (one checkpoint move per batch).", minimum=1)
ORGANIZER_BUSY_SHARE = setting(
    "organizer_busy_share",
    0.25,
    "While other writes arrive, the background organizer rests between short slices of work so that its passes take about this share"
    " of the time (1: never rest); with the log otherwise quiet it runs at full speed.",
    above=0,  # at 0 a busy organizer would never work
    maximum=1,
)
ORGANIZER_POLL_S = setting("organizer_poll_s", 1.0, "How often the background organizer looks for events written by other processes.", above=0)
CLUSTER_INTERVAL_S = setting(
    "organizer_cluster_interval_s", 100.0, "Seconds between two topic clustering runs of the background organizer (0: never).", minimum=0
)
MAX_CLUSTER_SIZE = setting("organizer_max_cluster_size", 20, "Topics are split until no cluster has more members than this.", minimum=2)
MIN_GROUP_SIZE = setting("organizer_min_group_size", 20, "Clustering is skipped for a tenant and type with fewer unparented memories.", minimum=1)
MIN_CLUSTER_SIZE = setting("organizer_min_cluster_size", 10, "A cluster becomes a topic only with more members than this.", minimum=0)
REFIT_SHARE = setting(
    "organizer_refit_share",
    0.25,
    "A clustering run re-partitions a type's memories from scratch when more than this share of them is in no live topic;"
    " otherwise the topics keep their members, the others join the nearest topic, and only a part grown past"
    " organizer_max_cluster_size is split again (0: re-partition every run).",
    minimum=0,
    maximum=1,
)
TIME_BUDGET_S = setting("organizer_time_budget_s", 600.0, "A clustering run stops cleanly (between clusters) after this many seconds.", above=0)

JUDGE = setting(
    "judge", "rule", "Pair judge of the organizer: rule (default, no model) or llm (an OpenAI-compatible endpoint).", choices=("rule", "llm")
)
LLM_URL = setting("llm_url", "", "Base URL of an OpenAI-compatible API (…/v1) for the llm judge and topic titles.")
LLM_MODEL = setting("llm_model", "", "Model name sent to the LLM endpoint.")
LLM_API_KEY = setting("llm_api_key", "", "Bearer key for the LLM endpoint (empty: none).")
LLM_TIMEOUT_S = setting("llm_timeout_s", 20.0, "Timeout of one LLM request.", above=0)
LLM_RETRIES = setting("llm_retries", 2, "Retries (with exponential backoff) of a failed LLM request before falling back to the rule judge.", minimum=0)
LLM_CONCURRENCY = setting("llm_concurrency", 4, "LLM requests in flight at once.", minimum=1)

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


def _rule_bounds(name: str, default: float) -> dict[str, float]:
    """A rule judge threshold's range: a cosine's [-1, 1], a count's 0 and up, a similarity's [0, 1]."""
    if name.endswith("_cosine"):
        return {"minimum": -1, "maximum": 1}
    return {"minimum": 0} if isinstance(default, int) else {"minimum": 0, "maximum": 1}


RULE_JUDGE_SETTINGS = tuple(
    setting(name, getattr(_DEFAULT_RULES, field), help, **_rule_bounds(name, getattr(_DEFAULT_RULES, field))) for name, (field, help) in RULE_SETTINGS.items()
)


def type_list(settings: Settings) -> tuple[str, ...]:
    return tuple(t.strip() for t in str(settings.organizer_types).split(",") if t.strip())


def rule_config(settings: Settings) -> RuleJudgeConfig:
    values = {field: type(getattr(_DEFAULT_RULES, field))(settings.get(name)) for name, (field, _) in RULE_SETTINGS.items()}
    return RuleJudgeConfig(**values)


def llm_options(settings: Settings) -> dict | None:
    """The LLM judge's options when ``MNEMOLOG_JUDGE=llm`` (None under the rule judge), each checked.

    A server and ``mnemolog organize`` call it before they open anything, so a URL without a scheme or
    host, or a timeout that is not a positive number of seconds, stops them at start in one line naming
    the setting, rather than every judgement failing later and falling back unseen.
    """
    if str(settings.judge).strip().lower() == "rule":  # else llm: JUDGE takes no other
        return None
    url, model = str(settings.llm_url).strip(), str(settings.llm_model).strip()
    if not url or not model:
        raise SettingError(f"{JUDGE.env}=llm needs {LLM_URL.env} and {LLM_MODEL.env}")
    try:
        parts = urlsplit(url)
        host, _ = parts.hostname, parts.port  # a port that is not a number raises here
    except ValueError as exc:
        raise SettingError(f"{LLM_URL.env} is not a URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not host or any(ch.isspace() or not ch.isprintable() for ch in host):  # the value is not repeated: it may hold a password
        raise SettingError(f"{LLM_URL.env} must be an http:// or https:// URL naming a host (such as https://host/v1)")
    if parts.query or parts.fragment:
        raise SettingError(f"{LLM_URL.env} must not hold a query or fragment: the judge adds /chat/completions to it")
    timeout, retries, concurrency = float(settings.llm_timeout_s), int(settings.llm_retries), int(settings.llm_concurrency)  # in range, as declared
    from .llm_judge import clean_api_key

    try:
        api_key = clean_api_key(str(settings.llm_api_key))
    except ValueError:
        raise SettingError(f"{LLM_API_KEY.env} holds a control character (a line break?) inside it") from None
    return {"url": url, "model": model, "api_key": api_key, "timeout_s": timeout,
            "retries": retries, "concurrency": concurrency}


def check_types(settings: Settings) -> None:
    """Refuse memory types that name none (the organizer would organize nothing) or one that does not exist; the other
    settings' ranges (a batch of 0 failed every pass, a poll interval of 0 spun the background loop, a judge threshold
    of NaN passed every comparison it is meant to fail) are refused as they are read (see their declarations)."""
    types = type_list(settings)
    known = [t.value for t in MemoryType]
    for name in types:
        if name not in known:
            expected = ", ".join(t for t in known if t != MemoryType.TOPIC.value)
            raise SettingError(f"{ORGANIZER_TYPES.env}: unknown memory type {name!r} (expected some of {expected})")
    if not set(types) - {MemoryType.TOPIC.value}:
        raise SettingError(f"{ORGANIZER_TYPES.env} names no memory type ({ORGANIZER_ENABLED.env}=off turns the organizer off)")


def check_settings(settings: Settings) -> None:
    """Refuse (:class:`SettingError`, one line naming the setting) what would stop the organizer later:
    called at the start of a server or ``mnemolog organize``, before anything is opened or printed. Every
    declared setting is read once first, so that a value of the wrong type (``MNEMOLOG_ORGANIZER_BATCH=abc``)
    stops the start rather than every pass of the background loop that reads it."""
    settings.as_dict()
    if settings.organizer_enabled:
        check_types(settings)
        llm_options(settings)


def build_judge(settings: Settings):
    """The configured judge: a :class:`RuleJudge`, or an :class:`LLMJudge` falling back to it."""
    rule = RuleJudge(rule_config(settings))
    options = llm_options(settings)
    if options is None:
        return rule
    from .llm_judge import LLMJudge

    return LLMJudge(**options, fallback=rule)
