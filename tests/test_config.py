"""Settings: defaults, values as people write them, validation naming the variable, secrets
that never print, and the log lines dropped as noise."""

from __future__ import annotations

import io
import logging
import os
from pathlib import Path
from typing import get_origin

import pytest

from broker.amqp import safe_url
from cli.main import _configured_adapters
from config.logging import setup_logging
from config.settings import ConfigError, Settings, default_model_path, load_settings

ROOT = Path(__file__).resolve().parent.parent


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


# --- values as people write them --------------------------------------------------------

LIST_FIELDS = [
    name for name, field in Settings.model_fields.items() if get_origin(field.annotation) is list
]


def test_the_list_fields_are_the_seven_known_ones() -> None:
    """A new list field must be added to the validator (and here) or it reads JSON only."""
    assert sorted(LIST_FIELDS) == [
        "admin_role_ids",
        "admin_user_ids",
        "allowed_channel_ids",
        "allowed_guild_ids",
        "model_languages",
        "site_allowed_hosts",
        "site_urls",
    ]


@pytest.mark.parametrize("field", [field for field in LIST_FIELDS if field != "model_languages"])
@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("example.com", ["example.com"]),
        ("123,456", ["123", "456"]),
        (" a , b ,", ["a", "b"]),
        ('["a", "b"]', ["a", "b"]),
        ("[123, 456]", ["123", "456"]),  # Discord ids written as JSON numbers
    ],
)
def test_every_list_setting_reads_commas_and_json(  # values valid for every list, hosts too
    monkeypatch: pytest.MonkeyPatch, field: str, written: str, read: list[str]
) -> None:
    monkeypatch.setenv(f"CONCIERGE_{field.upper()}", written)
    assert getattr(load_settings(), field) == read


@pytest.mark.parametrize("field", LIST_FIELDS)
@pytest.mark.parametrize("written", ['["a", "b"', "[[1]]", '[{"a": 1}]'])
def test_an_invalid_list_is_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, field: str, written: str
) -> None:
    monkeypatch.setenv(f"CONCIERGE_{field.upper()}", written)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert f"CONCIERGE_{field.upper()}" in str(caught.value)
    assert "\n" not in str(caught.value)


EMPTY_MEANS_UNSET = {
    "CONCIERGE_THREADS": "threads",
    "CONCIERGE_MODEL_PATH": "model_path",
    "CONCIERGE_DISCORD_TOKEN": "discord_token",
    "CONCIERGE_SLACK_BOT_TOKEN": "slack_bot_token",
    "CONCIERGE_SITE_SITEMAP_URL": "site_sitemap_url",
}


def test_an_empty_variable_means_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in EMPTY_MEANS_UNSET:
        monkeypatch.setenv(variable, "")
    settings = load_settings()
    for field in EMPTY_MEANS_UNSET.values():
        assert getattr(settings, field) is None, field
    assert _configured_adapters(settings) == []  # an empty token switches no platform on


def test_an_empty_line_in_dot_env_means_unset(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _clear_concierge_environment(monkeypatch)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("".join(f"{name}=\n" for name in EMPTY_MEANS_UNSET))
    settings = load_settings()
    for field in EMPTY_MEANS_UNSET.values():
        assert getattr(settings, field) is None, field
    assert _configured_adapters(settings) == []


def test_env_example_uncommented_line_for_line_gives_the_defaults(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """What a new user does: copy .env.example and remove the ``# `` of every setting, empty
    values (``CONCIERGE_THREADS=``) included."""
    _clear_concierge_environment(monkeypatch)
    example = (ROOT / ".env.example").read_text().splitlines()
    settings_lines = [line[2:] for line in example if line.startswith("# CONCIERGE_")]
    assert any(line.endswith("=") for line in settings_lines)  # the empty ones are there
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("\n".join(settings_lines) + "\n")
    assert load_settings() == Settings(_env_file=None)  # type: ignore[call-arg]


def _clear_concierge_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in os.environ if name.startswith("CONCIERGE_")]:
        monkeypatch.delenv(name)


def test_model_languages_are_a_list_of_known_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONCIERGE_MODEL_LANGUAGES", "en, ja")
    assert load_settings().model_languages == ["en", "ja"]
    monkeypatch.setenv("CONCIERGE_MODEL_LANGUAGES", '["fr"]')
    with pytest.raises(ConfigError, match=r"CONCIERGE_MODEL_LANGUAGES\): unknown language fr"):
        load_settings()


# --- the model file -----------------------------------------------------------------------


def test_a_model_that_is_not_gguf_is_refused_naming_variable_and_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    not_gguf = tmp_path / "model.bin"
    not_gguf.write_bytes(b"PK\x03\x04 a zip, not a model")
    monkeypatch.setenv("CONCIERGE_MODEL_PATH", str(not_gguf))
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert "CONCIERGE_MODEL_PATH" in str(caught.value)
    assert f"{not_gguf} is not a GGUF model file" in str(caught.value)


def test_a_real_gguf_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    model = default_model_path()
    assert model is not None
    monkeypatch.setenv("CONCIERGE_MODEL_PATH", str(model))
    assert load_settings().model_path == model


# --- log lines that say nothing ----------------------------------------------------------


def test_discord_voice_warnings_and_the_duplicate_aiormq_line_are_dropped() -> None:
    import discord

    stream = io.StringIO()
    handler = setup_logging("INFO", stream=stream)
    try:
        discord.Client(intents=discord.Intents.default())  # warns about PyNaCl at every start
        logging.getLogger("aiormq.connection").error(
            "error when creating transport: %r", ConnectionRefusedError(111, "refused")
        )
        logging.getLogger("discord.client").warning("a warning worth seeing")
    finally:
        logging.getLogger().removeHandler(handler)
    shown = stream.getvalue()
    assert "voice will NOT be supported" not in shown
    assert "error when creating transport" not in shown
    assert "a warning worth seeing" in shown  # other lines of the same loggers still show
