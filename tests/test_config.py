"""Settings: defaults, validation naming the field, secrets that never print."""

from __future__ import annotations

import logging

import pytest

from broker.amqp import safe_url
from config.settings import ConfigError, default_model_path, load_settings


def test_the_default_model_is_smollm2_from_its_wheel() -> None:
    path = default_model_path()
    assert path is not None
    assert path.name.endswith(".gguf")
    assert "SmolLM2" in path.name


def test_invalid_values_name_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONCIERGE_EDIT_INTERVAL_S", "soon")
    with pytest.raises(ConfigError, match="edit_interval_s"):
        load_settings()


def test_secrets_never_appear_in_reprs_or_errors(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("CONCIERGE_DISCORD_TOKEN", "discord-token-XYZ")
    monkeypatch.setenv("CONCIERGE_BROKER_URL", "amqp://admin:broker-pw-XYZ@localhost/")
    settings = load_settings()
    with caplog.at_level(logging.DEBUG):
        logging.getLogger("test").debug("settings: %r / %s", settings, settings)
    shown = repr(settings) + str(settings) + caplog.text
    assert "discord-token-XYZ" not in shown
    assert "broker-pw-XYZ" not in shown
    assert "broker-pw-XYZ" not in safe_url(settings.broker_url.get_secret_value())


def test_a_bad_secret_is_not_echoed_in_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONCIERGE_BROKER_URL", "http://user:leaked-pw@host/")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert "broker_url" in str(caught.value)
    assert "leaked-pw" not in str(caught.value)
