"""Settings: defaults, values as people write them, validation naming the variable, secrets
that never print, and the log lines dropped as noise."""

from __future__ import annotations

import io
import logging
import os
import re
from pathlib import Path
from typing import get_origin

import pytest

from cli.main import _configured_adapters
from config.logging import setup_logging
from config.removed import REMOVED_SETTINGS, warn_of_removed_settings
from config.settings import (
    REPLY_TIMEOUT_MARGIN_S,
    ConfigError,
    Settings,
    default_model_path,
    load_settings,
)
from config.urls import masked_url

ROOT = Path(__file__).resolve().parent.parent


def test_the_default_model_is_smollm2_from_its_wheel() -> None:
    path = default_model_path()
    assert path is not None
    assert path.name.endswith(".gguf")
    assert "SmolLM2" in path.name


def test_invalid_values_name_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONCIERGE_REQUEST_TTL_S", "soon")
    with pytest.raises(ConfigError, match="request_ttl_s"):
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
    assert "broker-pw-XYZ" not in masked_url(settings.broker_url.get_secret_value())


def test_a_bad_secret_is_not_echoed_in_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONCIERGE_BROKER_URL", "http://user:leaked-pw@host/")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert "broker_url" in str(caught.value)
    assert "leaked-pw" not in str(caught.value)


def test_the_broker_url_may_list_a_clusters_nodes_each_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CONCIERGE_BROKER_URL", "amqp://u:pw-1@a:5672/, amqps://u:pw-2@b:5671/")
    assert load_settings().broker_urls == ["amqp://u:pw-1@a:5672/", "amqps://u:pw-2@b:5671/"]
    monkeypatch.setenv("CONCIERGE_BROKER_URL", '["amqp://u:pw@a/", "amqp://u:pw@b/"]')
    assert load_settings().broker_urls == ["amqp://u:pw@a/", "amqp://u:pw@b/"]
    monkeypatch.setenv("CONCIERGE_BROKER_URL", "amqp://u:pw-1@a/,http://u:leaked-pw@b/")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value) == (
        "invalid configuration: broker_url (CONCIERGE_BROKER_URL): must start with amqp:// or "
        "amqps:// (address 2 of 2)"
    )
    monkeypatch.setenv("CONCIERGE_BROKER_URL", " , ")
    with pytest.raises(ConfigError, match=r"CONCIERGE_BROKER_URL\): no address given"):
        load_settings()


def test_the_queue_type_is_classic_unless_set_to_quorum(monkeypatch: pytest.MonkeyPatch) -> None:
    _clear_concierge_environment(monkeypatch)
    assert Settings(_env_file=None).queue_type == "classic"  # type: ignore[call-arg]
    monkeypatch.setenv("CONCIERGE_QUEUE_TYPE", "quorum")
    assert load_settings().queue_type == "quorum"
    monkeypatch.setenv("CONCIERGE_QUEUE_TYPE", "mirrored")
    with pytest.raises(ConfigError, match=r"CONCIERGE_QUEUE_TYPE\): Input should be 'classic'"):
        load_settings()


# --- values as people write them --------------------------------------------------------

LIST_FIELDS = [
    name for name, field in Settings.model_fields.items() if get_origin(field.annotation) is list
]


def test_the_list_fields_are_the_eight_known_ones() -> None:
    """A new list field must be added to the validator (and here) or it reads JSON only."""
    assert sorted(LIST_FIELDS) == [
        "admin_role_ids",
        "admin_user_ids",
        "allowed_channel_ids",
        "allowed_guild_ids",
        "model_languages",
        "site_allowed_hosts",
        "site_start_url",
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


# --- which settings there are -------------------------------------------------------------

# Issue #25: what an operator of a small VPS might change, no more (55); then the settings
# later issues asked for by name or need: the site's start page, its depth, a docs folder
# and its address, the rescrape's schedule (#29), the queues' type (#27), the spaces file (#30),
# flash attention (#28: a trade of prompt speed against token speed that depends on the model).
MAX_SETTINGS = 55 + 8
SETTING_LINE = re.compile(r"^# (CONCIERGE_[A-Z_]+)=", re.MULTILINE)
README_ROW = re.compile(r"^\| `(CONCIERGE_[A-Z_]+)` \|", re.MULTILINE)


def test_env_example_the_model_and_the_readme_list_the_same_settings_in_the_same_groups() -> None:
    in_model = [f"CONCIERGE_{name.upper()}" for name in Settings.model_fields]
    in_example = SETTING_LINE.findall((ROOT / ".env.example").read_text())
    readme = (ROOT / "README.md").read_text()
    in_readme = README_ROW.findall(readme[readme.index("## Configuration") :])

    assert len(in_model) <= MAX_SETTINGS
    assert sorted(in_example) == sorted(in_model)  # each once
    assert in_readme == in_example  # grouped the same way, in the same order
    assert in_example[:11] == [  # the essentials first
        "CONCIERGE_BROKER_URL",
        "CONCIERGE_DISCORD_TOKEN",
        "CONCIERGE_SLACK_BOT_TOKEN",
        "CONCIERGE_SLACK_APP_TOKEN",
        "CONCIERGE_SITE_START_URL",
        "CONCIERGE_SITE_SITEMAP_URL",
        "CONCIERGE_SITE_FEED_URL",
        "CONCIERGE_SITE_URLS",
        "CONCIERGE_SITE_DIR",
        "CONCIERGE_SITE_DIR_URL",
        "CONCIERGE_MODEL_PATH",
    ]


def test_a_removed_setting_still_given_is_named_in_a_warning_not_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _clear_concierge_environment(monkeypatch)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CONCIERGE_TOP_P", "0.5")
    (tmp_path / ".env").write_text("CONCIERGE_REPLY_TIMEOUT_S=60\nCONCIERGE_SEED=\n")

    settings = load_settings()  # not an error
    with caplog.at_level(logging.WARNING, logger="config.removed"):
        warn_of_removed_settings()

    assert settings == Settings(_env_file=None)  # type: ignore[call-arg]
    assert [record.getMessage() for record in caplog.records] == [
        "CONCIERGE_TOP_P is set but no longer read (its value is now built in)",
        "CONCIERGE_REPLY_TIMEOUT_S is set but no longer read (derived from "
        "CONCIERGE_REQUEST_TTL_S and CONCIERGE_ANSWER_TIME_LIMIT_S)",
    ]  # an empty one (CONCIERGE_SEED=) is unset, as for every setting
    assert not set(REMOVED_SETTINGS) & set(Settings.model_fields)


def test_a_bot_waits_for_the_engine_to_say_how_a_request_ended() -> None:
    """The reply timeouts are derived: a request may wait out its TTL, then run to its limit."""
    settings = Settings(request_ttl_s=60, answer_time_limit_s=100, rescrape_time_limit_s=1000)

    assert settings.reply_timeout_s == 60 + 100 + REPLY_TIMEOUT_MARGIN_S
    assert settings.rescrape_reply_timeout_s == 60 + 1000 + REPLY_TIMEOUT_MARGIN_S
