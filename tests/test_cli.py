"""The ``concierge`` command as a user runs it: ask, chat, Ctrl+C, no broker, bad config."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

import pytest
from yarl import URL

from broker.amqp import Broker
from cli.kb import kb_stats
from config.settings import ConfigError, Settings
from engine.backends.base import Backend
from engine.feedback.store import AnswerRecord, FeedbackStore, Vote
from engine.knowledge.scrape.builder import build_kb
from tests.conftest import LONG_QUESTION, RunningEngine, start_engine
from tests.helpers import WireTap
from tests.test_grounded import site_articles

ROOT = Path(__file__).resolve().parent.parent


def cli_env(settings: Settings, **extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("CONCIERGE_")}
    env.update(CONCIERGE_PREFIX=settings.prefix, CONCIERGE_KB_PATH=str(settings.kb_path))
    env["CONCIERGE_FEEDBACK_PATH"] = str(settings.feedback_path)
    env["CONCIERGE_METRICS_PORT"] = "0"  # engines started here must not clash over a port
    env["COLUMNS"] = "250"  # rich wraps tables to the terminal width
    env.update(extra)
    return env


async def concierge(
    *args: str, env: dict[str, str], cwd: Path = ROOT
) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cli.main",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env | {"PYTHONPATH": str(ROOT)},  # importable from any working directory
        cwd=cwd,
    )


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
    settings: Settings, closed_port: int
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


async def test_ctrl_c_in_chat_stops_the_answer_and_the_prompt_returns(
    settings: Settings, backend: Backend, broker: Broker
) -> None:
    engine = await start_engine(settings.model_copy(update={"max_tokens": 400}), backend)
    process = await concierge("chat", env=cli_env(settings))
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(f"{LONG_QUESTION}\n".encode())
    await process.stdin.drain()
    assert await asyncio.wait_for(process.stdout.read(1), 60)  # the answer is streaming
    process.send_signal(signal.SIGINT)
    process.stdin.write(b"Say hi.\n")
    process.stdin.close()
    _, stderr = await asyncio.wait_for(process.communicate(), 90)
    await engine.stop()
    assert process.returncode == 0
    assert "stopped" in stderr.decode()
    assert "done ·" in stderr.decode()  # the next question was still answered


@pytest.mark.parametrize(
    ("command", "field"), [("discord", "discord_token"), ("slack", "slack_bot_token")]
)
async def test_an_adapter_without_its_token_fails_at_start_naming_it(
    settings: Settings, command: str, field: str
) -> None:
    process = await concierge(command, env=cli_env(settings))
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 78
    assert f"CONCIERGE_{field.upper()}" in stderr.decode()


async def test_ctrl_c_at_an_empty_prompt_leaves_the_chat(
    settings: Settings, broker: Broker
) -> None:
    process = await concierge("chat", env=cli_env(settings))
    assert process.stderr is not None
    banner = await asyncio.wait_for(process.stderr.readline(), 60)
    assert banner.startswith(b"Concierge"), "the chat ended before its banner"
    process.send_signal(signal.SIGINT)
    assert await asyncio.wait_for(process.wait(), 30) == 0


def test_under_up_each_adapter_has_a_reply_queue_of_its_own(settings: Settings) -> None:
    from bots.client import ConciergeClient
    from cli.main import adapter_settings

    named = settings.model_copy(update={"bot_name": "concierge"})
    ids = {
        ConciergeClient(adapter_settings(named, platform), platform).bot_id
        for platform in ("discord", "slack")
    }
    assert ids == {"concierge-discord", "concierge-slack"}
    assert adapter_settings(settings, "slack") is settings  # unnamed: each a random id anyway


async def test_a_second_bot_process_under_the_same_name_fails_at_start_naming_it(
    settings: Settings, broker: Broker
) -> None:
    from bots.client import ConciergeClient

    named = settings.model_copy(update={"bot_name": "slack"})
    async with ConciergeClient(named, "slack"):
        with pytest.raises(ConfigError, match=r"CONCIERGE_BOT_NAME.*running as 'slack'"):
            await ConciergeClient(named, "slack").start()
    async with ConciergeClient(named, "slack"):  # once the first has stopped, the name is free
        pass
    await broker.delete_reply_queue("slack")


async def test_ask_beside_a_running_named_bot_uses_a_queue_of_its_own(
    engine: RunningEngine, settings: Settings, broker: Broker
) -> None:
    """One .env for everything: `concierge ask` must not take the bot's name (and replies)."""
    from bots.client import ConciergeClient

    named = settings.model_copy(update={"bot_name": "discord"})
    async with ConciergeClient(named, "discord") as bot:
        env = cli_env(settings) | {"CONCIERGE_BOT_NAME": "discord"}
        process = await concierge("ask", "Say hello.", env=env)
        _, stderr = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0, stderr.decode()  # under the bot's name: refused, 78
        assert await broker.reply_queue_exists(bot.bot_id)
    await broker.delete_reply_queue("discord")


# --- the first hour: settings as people write them, help, unreachable platforms ------------


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A local port that refuses connections: bound, so nothing else takes it, never listening."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


async def test_list_settings_written_with_commas_are_read(settings: Settings) -> None:
    env = cli_env(
        settings,
        CONCIERGE_SITE_URLS="https://example.com/a",
        CONCIERGE_SITE_ALLOWED_HOSTS="example.com",
        CONCIERGE_ADMIN_USER_IDS="123,456",
    )
    process = await concierge("kb", "stats", env=env)
    stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert stderr.decode() == ""
    assert "no knowledge base at" in stdout.decode()  # got past the settings to the command
    assert process.returncode == 1


async def test_an_invalid_list_setting_is_one_line_naming_the_variable(settings: Settings) -> None:
    env = cli_env(settings, CONCIERGE_ADMIN_USER_IDS='["123", ')
    process = await concierge("kb", "stats", env=env)
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 78
    [line] = stderr.decode().splitlines()
    assert "CONCIERGE_ADMIN_USER_IDS" in line


async def test_kb_stats_lists_the_articles_with_the_most_thumbs_down(
    settings: Settings, tmp_path: Path
) -> None:
    articles = site_articles()
    build_kb(settings.kb_path, settings.kb_path, articles, [], datetime.now(UTC))
    ferry = next(article for article in articles if "ferry" in article.url)
    unknown = "https://guide.example/articles/gone-since.html"  # cited, not in the knowledge base
    feedback_path = tmp_path / "feedback.sqlite3"
    store = FeedbackStore(feedback_path)
    given: list[tuple[str, Vote]] = [(ferry.url, "down"), (ferry.url, "down"), (unknown, "up")]
    for n, (cites, vote) in enumerate(given):
        store.record_answer(AnswerRecord(f"answer-{n}", "done", (cites,), "slack", 1.0))
        store.vote(f"answer-{n}", "u1", vote, "slack", 1.0)
    store.vote("answer-1", "u2", "up", "slack", 1.0)
    store.record_answer(AnswerRecord("answer-9", "done", (unknown,), "slack", 1.0))
    store.vote("answer-9", "u1", "down", "slack", 1.0)
    store.close()

    voted = await concierge(
        "kb", "stats", env=cli_env(settings, CONCIERGE_FEEDBACK_PATH=str(feedback_path))
    )
    voted_out, voted_err = await asyncio.wait_for(voted.communicate(), 30)

    assert voted.returncode == 0, voted_err.decode()
    lines = voted_out.decode().splitlines()
    assert "5 votes" in lines[1] and "the articles with the most 👎" in lines[1]
    rows = [line for line in lines if "│" in line]
    cells = [[cell.strip() for cell in row.split("│")[1:-1]] for row in rows]
    assert cells == [
        [ferry.title, "2", "1", "2"],  # 2 answers cite it; one got 👎 and 👍 from two people
        [ferry.url, "", "", ""],
        [unknown, "1", "1", "2"],  # no title: not in the knowledge base
    ]


def test_kb_stats_says_plainly_when_there_are_no_votes_yet(
    settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_kb(settings.kb_path, settings.kb_path, site_articles(), [], datetime.now(UTC))
    missing = tmp_path / "no-feedback-yet.sqlite3"

    assert kb_stats(settings.model_copy(update={"feedback_path": missing})) == 0

    shown = capsys.readouterr().out
    assert f"{len(site_articles())} articles" in shown
    assert f"feedback: no votes yet in {missing}" in shown
    assert not missing.exists()  # looking never makes the file


EMPTY_LINES = {"CONCIERGE_THREADS": "", "CONCIERGE_MODEL_PATH": "", "CONCIERGE_DISCORD_TOKEN": ""}


async def test_empty_lines_copied_from_env_example_mean_unset(settings: Settings) -> None:
    """An empty token is no token: the Discord command says it is not set (no login tried)."""
    process = await concierge("discord", env=cli_env(settings, **EMPTY_LINES))
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 78
    assert stderr.decode().splitlines() == [
        "concierge: discord_token (CONCIERGE_DISCORD_TOKEN): not set"
    ]


async def test_empty_lines_in_dot_env_mean_unset(settings: Settings, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("".join(f"{name}=\n" for name in EMPTY_LINES))
    process = await concierge("discord", env=cli_env(settings), cwd=tmp_path)
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 78
    assert "CONCIERGE_DISCORD_TOKEN): not set" in stderr.decode()


async def test_a_model_file_that_is_not_gguf_is_one_line_naming_it(settings: Settings) -> None:
    not_a_model = ROOT / "README.md"
    env = cli_env(settings, CONCIERGE_MODEL_PATH=str(not_a_model))
    process = await concierge("engine", env=env)
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 78
    [line] = stderr.decode().splitlines()
    assert "CONCIERGE_MODEL_PATH" in line
    assert f"{not_a_model} is not a GGUF model file" in line


@pytest.mark.parametrize(
    ("args", "shown"),
    [((), ["engine", "chat", "status", "kb", "bench"]), (("kb",), ["stats", "search"])],
)
async def test_without_a_command_the_help_is_printed(
    settings: Settings, args: tuple[str, ...], shown: list[str]
) -> None:
    process = await concierge(*args, env=cli_env(settings))
    stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 2
    assert "required" not in stderr.decode()
    assert stdout.decode().startswith("usage: concierge")
    for command in shown:
        assert f"\n    {command} " in stdout.decode()


async def test_version_prints_the_package_version(settings: Settings) -> None:
    process = await concierge("--version", env=cli_env(settings))
    stdout, _ = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0
    assert stdout.decode().strip() == f"concierge {version('concierge')}"


def test_every_command_and_option_has_a_description() -> None:
    from cli.main import build_parser

    missing: list[str] = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if not action.help:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
            if isinstance(action, argparse._SubParsersAction):
                described = {choice.dest for choice in action._choices_actions if choice.help}
                for name, subparser in action.choices.items():
                    if name not in described:
                        missing.append(f"{path} {name}")
                    walk(subparser, f"{path} {name}")

    walk(build_parser(), "concierge")
    assert missing == []


# Slack's API address is a constant too (bots/slack/app.py), pointed at a closed local port here.
SLACK_AT = """
import sys
import bots.slack.app
bots.slack.app.SLACK_API_URL = sys.argv[1]
from cli.main import main
sys.exit(main(["slack"]))
"""


async def test_slack_unreachable_is_one_line_and_exit_69(
    settings: Settings, closed_port: int
) -> None:
    env = cli_env(
        settings, CONCIERGE_SLACK_BOT_TOKEN="xoxb-test", CONCIERGE_SLACK_APP_TOKEN="xapp-test"
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        SLACK_AT,
        f"http://127.0.0.1:{closed_port}/api/",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=ROOT,
    )
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 69
    assert "Traceback" not in stderr.decode()
    assert stderr.decode().splitlines()[-1] == (
        f"concierge: cannot reach Slack at 127.0.0.1:{closed_port} (ConnectionRefusedError); "
        "check this machine's network connection"
    )


# discord.py's API address is a class constant, not a setting: pointed at a closed local port
# here, as tests/fake_discord.py points it at the fake. Everything else is `concierge discord`.
DISCORD_AT = """
import sys
import discord.http
discord.http.Route.BASE = sys.argv[1]
from cli.main import main
sys.exit(main(["discord"]))
"""


async def test_discord_unreachable_is_one_line_and_exit_69(
    settings: Settings, closed_port: int
) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        DISCORD_AT,
        f"http://127.0.0.1:{closed_port}/api/v10",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=cli_env(settings, CONCIERGE_DISCORD_TOKEN="a-token"),
        cwd=ROOT,
    )
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 69
    assert "Traceback" not in stderr.decode()
    assert "voice will NOT be supported" not in stderr.decode()  # the PyNaCl warning is dropped
    assert stderr.decode().splitlines()[-1] == (
        f"concierge: cannot reach Discord at 127.0.0.1:{closed_port} (ConnectionRefusedError); "
        "check this machine's network connection"
    )
