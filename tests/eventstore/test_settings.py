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
