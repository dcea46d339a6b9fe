"""Settings: overrides, then the environment, then defaults; each name resolved once per instance."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from mnemolog.eventstore.settings import Setting, SettingError, Settings


class CountingEnv(Mapping):
    """An environment that counts its lookups."""

    def __init__(self, values: dict[str, str]):
        self.values = values
        self.lookups = 0

    def __getitem__(self, key: str) -> str:
        self.lookups += 1
        return self.values[key]

    def __iter__(self):
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)


def test_overrides_then_the_environment_then_defaults():
    env = {"MNEMOLOG_SYNCHRONOUS": "NORMAL", "MNEMOLOG_SUBSCRIBE_POLL_SECONDS": "2.5"}
    settings = Settings({"synchronous": "OFF"}, env=env)
    assert settings.synchronous == "OFF"
    assert settings.subscribe_poll_seconds == 2.5
    assert settings.log_url == ""
    with pytest.raises(AttributeError):
        settings.no_such_setting


def test_each_name_is_read_from_the_environment_once_and_kept():
    env = CountingEnv({"MNEMOLOG_SUBSCRIBE_POLL_SECONDS": "2.5"})
    settings = Settings(env=env)
    assert [settings.subscribe_poll_seconds for _ in range(100)] == [2.5] * 100
    assert env.lookups == 1  # a hot path reads settings on every request: the environment is asked once
    env.values["MNEMOLOG_SUBSCRIBE_POLL_SECONDS"] = "7"
    assert settings.subscribe_poll_seconds == 2.5
    assert Settings(env=env).subscribe_poll_seconds == 7.0  # a new instance sees the change


def test_a_bad_value_is_refused_at_every_read():
    settings = Settings(env={"MNEMOLOG_SUBSCRIBE_POLL_SECONDS": "soon"})
    for _ in range(2):
        with pytest.raises(SettingError, match="MNEMOLOG_SUBSCRIBE_POLL_SECONDS"):
            settings.subscribe_poll_seconds



@pytest.mark.parametrize("raw", ["", "  ", "maybe"])
def test_a_blank_or_unknown_boolean_is_refused_not_read_as_false(raw):
    """``MNEMOLOG_AUTH=`` read as false turned authentication off without a word."""
    flag = Setting("auth", True, "Require API keys.")
    with pytest.raises(SettingError, match="MNEMOLOG_AUTH: expected a boolean .* unset it for the default"):
        flag.parse(raw)
    assert [flag.parse(v) for v in (" Off ", "0", "YES", "on")] == [False, False, True, True]


@pytest.mark.parametrize(
    "declared, raw, message",
    [
        (Setting("recall_candidates", 50, "h", minimum=1, maximum=10_000), "0", "expected a whole number from 1 to 10000, got 0"),  # recall looped forever
        (Setting("projection_follow_seconds", 1.0, "h", above=0), "0", "expected a number above 0, got 0.0"),  # an idle server spun a core
        (Setting("busy_timeout", 30.0, "h", minimum=0), "nan", "expected a number at least 0, got nan"),
        (Setting("recall_weight_lexical", 1.0, "h", minimum=0, maximum=10), "inf", "expected a number from 0 to 10, got inf"),
        (Setting("recall_fusion", "score", "h", choices=("score", "rrf")), "bogus", "expected one of score, rrf, got 'bogus'"),  # every recall was a 500
        (Setting("data_dir", "./data", "h"), "caf\udce9", "not valid UTF-8 text"),  # the server's index file could not be named
    ],
)
def test_a_value_outside_what_a_setting_takes_is_refused_naming_it(declared, raw, message):
    with pytest.raises(SettingError) as refused:
        declared.parse(raw)
    assert str(refused.value) == f"{declared.env}: {message}"
    assert Setting("recall_fusion", "score", "h", choices=("score", "rrf")).parse(" RRF") == " RRF"  # compared without case


def test_every_declared_setting_takes_its_own_default():
    import mnemolog.tools.docs  # noqa: F401 - declares every setting
    from mnemolog.eventstore.settings import REGISTRY

    for declared in REGISTRY.values():
        assert declared._checked(declared.default) == declared.default, declared.env
