"""The OpenAI-compatible backend's start: an unreachable server, its key and its URL."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import pytest
from pydantic import SecretStr

from cli.main import main as concierge_main
from config.errors import EXIT_CONFIG, EXIT_UNAVAILABLE
from config.settings import ConfigError
from engine.backends.base import BackendUnavailable
from engine.backends.configured import load_backend
from engine.backends.openai.backend import OpenAIBackend
from engine.backends.openai.options import OpenAIOptions
from engine.backends.openai.sse import ModelServerError
from tests.openai_server_fixture import (
    QUESTION,
    ModelServer,
    connect,  # noqa: F401  # the fixture
    free_port,
    limits,
    server,  # noqa: F401  # the fixture
)

SECRET_KEY = "sk-test-4f9c2a-never-shown"


@pytest.fixture(scope="session")
def key_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelServer]:
    running = ModelServer(tmp_path_factory.mktemp("servers"), api_key=SECRET_KEY).start()
    yield running
    running.stop()


# --- failures ------------------------------------------------------------------------------


def test_an_unreachable_server_stops_the_start(unused_port_url: str) -> None:
    with pytest.raises(BackendUnavailable, match="cannot reach the model server"):
        load_backend(OpenAIOptions(unused_port_url))


@pytest.fixture
def unused_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}/v1"


def test_the_engine_exits_unavailable_when_the_server_is_not_there(
    unused_port_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CONCIERGE_BACKEND", "openai")
    monkeypatch.setenv("CONCIERGE_OPENAI_BASE_URL", unused_port_url)
    monkeypatch.setenv("CONCIERGE_OPENAI_API_KEY", SECRET_KEY)
    monkeypatch.setenv("CONCIERGE_METRICS_PORT", "0")
    assert concierge_main(["engine"]) == EXIT_UNAVAILABLE
    err = capsys.readouterr().err
    assert "cannot reach the model server" in err and "CONCIERGE_OPENAI_BASE_URL" in err
    assert "Traceback" not in err and SECRET_KEY not in err


def test_a_wrong_key_is_a_configuration_error_naming_the_variable(
    key_server: ModelServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(ConfigError, match="CONCIERGE_OPENAI_API_KEY"):
        OpenAIBackend.connect(OpenAIOptions(key_server.base_url, api_key=SecretStr("wrong")))
    monkeypatch.setenv("CONCIERGE_BACKEND", "openai")
    monkeypatch.setenv("CONCIERGE_OPENAI_BASE_URL", key_server.base_url)
    monkeypatch.setenv("CONCIERGE_OPENAI_API_KEY", "sk-wrong-" + SECRET_KEY[::-1])
    monkeypatch.setenv("CONCIERGE_METRICS_PORT", "0")
    assert concierge_main(["engine"]) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert "refused it (HTTP 401)" in err and "CONCIERGE_OPENAI_API_KEY" in err
    assert SECRET_KEY[::-1] not in err


def test_the_right_key_is_sent_and_never_shown(
    key_server: ModelServer,
    connect: Callable[[OpenAIOptions], OpenAIBackend],  # noqa: F811  # the fixture imported above
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    for library in ("httpx", "httpcore", "engine"):  # other tests may have quietened them
        caplog.set_level(logging.DEBUG, logger=library)
    options = OpenAIOptions(key_server.base_url, api_key=SecretStr(SECRET_KEY))
    backend = connect(options)
    assert list(backend.stream(QUESTION, lambda: False, limits(3)))
    assert backend.count_tokens(QUESTION) > 8  # the tokenizer endpoint takes the key too
    assert len(caplog.records) > 10  # DEBUG really was on: every request is in the log
    for shown in (repr(options), str(options), repr(backend), caplog.text):
        assert SECRET_KEY not in shown


def test_a_key_refused_mid_life_fails_the_answer_naming_the_variable(
    key_server: ModelServer,
) -> None:
    backend = OpenAIBackend(OpenAIOptions(key_server.base_url, api_key=SecretStr("revoked")))
    try:
        with pytest.raises(ModelServerError, match="CONCIERGE_OPENAI_API_KEY") as failure:
            list(backend.stream(QUESTION, lambda: False, limits(3)))
        assert "revoked" not in str(failure.value)
    finally:
        backend.close()


def test_a_base_url_without_v1_is_a_configuration_error(server: ModelServer) -> None:  # noqa: F811  # the fixture imported above
    with pytest.raises(ConfigError, match="CONCIERGE_OPENAI_BASE_URL"):
        OpenAIBackend.connect(OpenAIOptions(f"http://127.0.0.1:{server.port}"))
