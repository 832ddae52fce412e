"""The ``concierge`` command with bots: Ctrl+C in chat, adapters, named bots, platforms down."""

from __future__ import annotations

import asyncio
import signal
import sys

import pytest

from broker.amqp import Broker
from config.settings import ConfigError, Settings
from engine.backends.base import Backend
from tests.cli_fixture import (
    ROOT,
    cli_env,
    closed_port,  # noqa: F401  # the fixture
    concierge,
)
from tests.conftest import LONG_QUESTION, RunningEngine, start_engine


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


# Slack's API address is a constant too (bots/slack/app.py), pointed at a closed local port here.
SLACK_AT = """
import sys
import bots.slack.app
bots.slack.app.SLACK_API_URL = sys.argv[1]
from cli.main import main
sys.exit(main(["slack"]))
"""


async def test_slack_unreachable_is_one_line_and_exit_69(
    settings: Settings,
    closed_port: int,  # noqa: F811  # the fixture imported above
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
    settings: Settings,
    closed_port: int,  # noqa: F811  # the fixture imported above
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
