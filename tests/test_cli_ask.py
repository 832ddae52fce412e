"""The ``concierge`` command: ask, chat, broker and config errors, rescrape, up and engine."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path

import pytest
from yarl import URL

from broker.amqp import Broker
from config.settings import Settings
from engine.backends.base import Backend
from tests.cli_fixture import (
    cli_env,
    closed_port,  # noqa: F401  # the fixture
    concierge,
)
from tests.conftest import LONG_QUESTION, RunningEngine, start_engine
from tests.helpers import WireTap


async def test_ask_streams_the_answer_and_exits_zero(
    engine: RunningEngine, settings: Settings
) -> None:
    process = await concierge("ask", "What is the capital of France?", env=cli_env(settings))
    stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, stderr.decode()
    assert stdout.decode().strip()
    assert "done" in stderr.decode()


async def test_ask_json_prints_every_event_as_one_line(
    engine: RunningEngine, settings: Settings
) -> None:
    process = await concierge("ask", "Say hello.", "--json", env=cli_env(settings))
    stdout, _ = await asyncio.wait_for(process.communicate(), 60)
    events = [json.loads(line) for line in stdout.decode().splitlines()]
    assert process.returncode == 0
    assert events[0]["type"] == "started"
    assert events[-1]["type"] == "done"
    tokens = "".join(event["text"] for event in events if event["type"] == "token")
    assert tokens == events[-1]["text"]


async def test_ctrl_c_during_an_answer_cancels_it_and_exits_130(
    settings: Settings, backend: Backend, broker: Broker
) -> None:
    engine = await start_engine(settings.model_copy(update={"max_tokens": 400}), backend)
    process = await concierge("ask", LONG_QUESTION, "--json", env=cli_env(settings))
    assert process.stdout is not None
    seen_types: list[str] = []
    while "token" not in seen_types:
        line = await asyncio.wait_for(process.stdout.readline(), 60)
        assert line, "the answer ended before any token"
        seen_types.append(json.loads(line)["type"])
    process.send_signal(signal.SIGINT)
    rest, stderr = await asyncio.wait_for(process.communicate(), 60)
    last = json.loads(rest.decode().splitlines()[-1])
    await engine.stop()
    assert process.returncode == 130
    assert last["type"] == "cancelled"
    assert last["tokens"] < 400
    assert "stopped" in stderr.decode()


async def test_chat_answers_each_line_and_leaves_on_end_of_input(
    engine: RunningEngine, settings: Settings
) -> None:
    process = await concierge("chat", env=cli_env(settings))
    stdout, stderr = await asyncio.wait_for(
        process.communicate(b"What is two plus two?\nName a colour.\n"), 90
    )
    assert process.returncode == 0, stderr.decode()
    assert stderr.decode().count("done ·") == 2
    assert stdout.decode().strip()


async def test_no_broker_is_one_line_saying_what_to_do_without_the_password(
    settings: Settings,
    closed_port: int,  # noqa: F811  # the fixture imported above
) -> None:
    env = cli_env(settings, CONCIERGE_BROKER_URL=f"amqp://guest:s3cret-pw@127.0.0.1:{closed_port}/")
    process = await concierge("ask", "hello?", env=env)
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 69
    assert stderr.decode().splitlines() == [  # once: aiormq's own ERROR line is dropped
        f"concierge: cannot reach RabbitMQ at amqp://***@127.0.0.1:{closed_port}/ "
        "(ConnectionRefusedError); is it running? start it with 'rabbitmq-server -detached' "
        "(or 'docker compose up -d rabbitmq')"
    ]


async def test_a_refused_broker_login_says_to_check_the_password(settings: Settings) -> None:
    url = settings.broker_url.get_secret_value()
    wrong = URL(url).with_password("not-the-password-XYZ")
    process = await concierge(
        "ask", "hello?", env=cli_env(settings, CONCIERGE_BROKER_URL=str(wrong))
    )
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 69
    [line] = stderr.decode().splitlines()
    assert "(login refused); check the user and password in CONCIERGE_BROKER_URL" in line
    assert "not-the-password-XYZ" not in line


@pytest.mark.parametrize(
    ("variable", "value", "field"),
    [
        ("CONCIERGE_REQUEST_TTL_S", "-1", "request_ttl_s"),
        ("CONCIERGE_BROKER_URL", "http://nope", "broker_url"),
        ("CONCIERGE_MODEL_PATH", "/no/such/model.gguf", "model_path"),
    ],
)
async def test_bad_config_fails_at_start_naming_the_field(
    settings: Settings, variable: str, value: str, field: str
) -> None:
    process = await concierge("ask", "hello?", env=cli_env(settings, **{variable: value}))
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 78
    [line] = stderr.decode().splitlines()
    assert field in line
    assert f"CONCIERGE_{field.upper()}" in line


async def test_rescrape_from_the_terminal_then_kb_stats_and_search(
    site_settings: Settings, backend: Backend, broker: Broker
) -> None:
    engine = await start_engine(site_settings, backend)
    env = cli_env(site_settings, CONCIERGE_SITE_SITEMAP_URL=str(site_settings.site_sitemap_url))
    env["CONCIERGE_SITE_ALLOWED_HOSTS"] = json.dumps(site_settings.site_allowed_hosts)
    process = await concierge("rescrape", env=env)
    stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    await engine.stop()
    assert process.returncode == 0, stderr.decode()
    assert stdout.decode().startswith("Rescrape done: 3 articles")  # its own summary...
    assert "tokens" not in stderr.decode()  # ...not an answer's "done · 0 tokens"
    assert "Rescrape:" in stderr.decode()  # progress lines

    stats = await concierge("kb", "stats", env=env)
    stats_out, _ = await asyncio.wait_for(stats.communicate(), 30)
    assert "3 articles" in stats_out.decode()  # the sitemap lists three
    search = await concierge("kb", "search", "widget warranty", env=env)
    search_out, _ = await asyncio.wait_for(search.communicate(), 30)
    assert search.returncode == 0
    assert "/articles/widgets" in search_out.decode()
    assert "higher" in search_out.decode()  # the header says which way the score goes


async def test_rescrape_in_the_chat_then_its_articles_answer(
    site_settings: Settings, backend: Backend, broker: Broker
) -> None:
    """The first hour: the empty knowledge base's note says to run a rescrape, and the chat
    runs one (progress and summary as ``concierge rescrape`` shows them), then answers from it."""
    engine = await start_engine(site_settings.model_copy(update={"max_tokens": 16}), backend)
    env = cli_env(site_settings, CONCIERGE_SITE_SITEMAP_URL=str(site_settings.site_sitemap_url))
    env["CONCIERGE_SITE_ALLOWED_HOSTS"] = json.dumps(site_settings.site_allowed_hosts)
    tap = await WireTap.open(broker, "nobody")
    process = await concierge("chat", env=env)
    typed = b"/rescrape\nHow long is the widget warranty?\nAnd what does it cover?\n"
    stdout, stderr = await asyncio.wait_for(process.communicate(typed), 120)
    await engine.stop()
    assert process.returncode == 0, stderr.decode()
    assert "Rescrape:" in stderr.decode()  # its progress
    summary, answer = stdout.decode().split("Rescrape done: 3 articles", 1)
    assert summary.strip() == ""  # nothing before the rescrape's own summary
    assert "/articles/widgets" in answer  # the answer stands on the article just read
    assert "no command" not in stderr.decode()
    # The follow-up carries the answer as a bot sends it back: its quote, not its sources.
    [_, answered] = tap.requests[-1].history
    assert "From the site: \u201c" in answered.text and "Sources:" not in answered.text


async def test_up_without_platforms_runs_the_engine_with_the_terminal_client(
    settings: Settings, broker: Broker, tmp_path: Path
) -> None:
    env = cli_env(settings, CONCIERGE_MAX_TOKENS="16")
    process = await concierge("up", env=env, cwd=tmp_path)
    stdout, stderr = await asyncio.wait_for(process.communicate(b"Say hi.\n"), 90)
    assert process.returncode == 0, stderr.decode()
    assert "done ·" in stderr.decode()
    assert " INFO " not in stderr.decode()  # the engine's log goes to a file, not the chat
    assert "engine engine ready" in (tmp_path / "concierge.log").read_text()
    assert stdout.decode().strip()


async def test_the_engine_command_stops_cleanly_on_sigterm(
    settings: Settings, broker: Broker
) -> None:
    process = await concierge("engine", env=cli_env(settings))
    assert process.stderr is not None
    while b"ready" not in (line := await asyncio.wait_for(process.stderr.readline(), 60)):
        assert line, "the engine exited before it was ready"
    process.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(process.wait(), 30) == 0
