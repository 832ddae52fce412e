"""Secrets never reach logs, errors or reprs: a whole exchange at DEBUG, searched line by line.

It also shows that non-default broker credentials work (a RabbitMQ user made for the test),
and that the Discord bot at DEBUG, driven through a real Gateway websocket, logs neither what
people write nor the interaction tokens (each lets its holder post as the bot for 15 minutes).
"""

from __future__ import annotations

import asyncio
import io
import itertools
import logging
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import discord
import pytest
import yarl

from bots.ask import Ask
from bots.client import ConciergeClient
from bots.discord.adapter import ConciergeBot
from broker.amqp import Broker
from broker.protocol import Cancelled
from config.logging import NOISY_LOGGERS, REDACTED, redact, setup_logging
from config.settings import Settings
from engine.backends.base import Backend
from tests.conftest import LONG_QUESTION, start_engine
from tests.fake_discord import start
from tests.fake_discord_wire import (
    guild_payload,
    interaction_payload,
    message_payload,
    user_payload,
)
from tests.fake_gateway import FakeGateway
from tests.helpers import collect, wait_for_tokens
from tests.processes import process_env

DISCORD_TOKEN = "discord-token-" + uuid.uuid4().hex
SLACK_TOKEN = "xoxb-slack-token-" + uuid.uuid4().hex


async def rabbitmqctl(*args: str) -> None:
    process = await asyncio.create_subprocess_exec("rabbitmqctl", "-q", *args)
    assert await asyncio.wait_for(process.wait(), 60) == 0


@pytest.fixture
async def secret_settings(settings: Settings) -> AsyncIterator[Settings]:
    """Settings whose broker account is a fresh RabbitMQ user with a random password."""
    user, password = f"concierge-{uuid.uuid4().hex[:8]}", "pw-" + uuid.uuid4().hex
    await rabbitmqctl("add_user", user, password)
    await rabbitmqctl("set_permissions", "-p", "/", user, ".*", ".*", ".*")
    yield settings.model_copy(
        update={
            "broker_url": type(settings.broker_url)(f"amqp://{user}:{password}@127.0.0.1:5672/"),
            "discord_token": type(settings.broker_url)(DISCORD_TOKEN),
            "slack_bot_token": type(settings.broker_url)(SLACK_TOKEN),
        }
    )
    await rabbitmqctl("delete_user", user)


async def test_a_full_exchange_at_debug_logs_no_secret(
    secret_settings: Settings, backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    password = secret_settings.broker_url.get_secret_value().split(":")[2].split("@")[0]
    caplog.set_level(logging.DEBUG)
    for library in ("aio_pika", "aiormq"):  # other tests may have quietened them
        caplog.set_level(logging.DEBUG, logger=library)
    async with Broker(secret_settings) as broker:
        engine = await start_engine(secret_settings, backend)
        async with ConciergeClient(secret_settings, "test") as client:
            answered = await collect(await client.ask(Ask("Say hello.", "u1")))
            session = await client.ask(Ask(LONG_QUESTION, "u1"))
            await wait_for_tokens(session, 1)
            await client.cancel(session, "u1")
            stopped = await collect(session)
            logging.getLogger("test").debug("settings %r %s", secret_settings, secret_settings)
        await engine.stop()
        await broker.delete_all()
    assert answered[-1].type == "done" and isinstance(stopped[-1], Cancelled)
    assert len(caplog.records) > 20  # DEBUG really was on
    for line in caplog.text.splitlines():
        for secret in (password, DISCORD_TOKEN, SLACK_TOKEN):
            assert secret not in line


async def test_a_cli_run_at_debug_prints_no_secret(secret_settings: Settings) -> None:
    password = secret_settings.broker_url.get_secret_value().split(":")[2].split("@")[0]
    env = process_env(
        secret_settings,
        CONCIERGE_LOG_LEVEL="DEBUG",
        CONCIERGE_DISCORD_TOKEN=DISCORD_TOKEN,
        CONCIERGE_BROKER_URL=secret_settings.broker_url.get_secret_value().replace(
            "127.0.0.1:5672", "127.0.0.1:1"
        ),
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "cli.main",
        "ask",
        "hi",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 69  # unreachable broker: an error message that names it
    output = (stdout + stderr).decode()
    assert "127.0.0.1:1" in output
    assert password not in output and DISCORD_TOKEN not in output


# --- the Discord bot's log at DEBUG -----------------------------------------------------------

GUILD_ID = 1_000_000_000_000_000_111
CHANNEL_ID = 1_000_000_000_000_000_211
MEMBER = user_payload(1_000_000_000_000_000_411, "member")
_ids = itertools.count(1_500_000_000_000_000_000, 2)  # an interaction's command takes id + 1


@contextmanager
def log_output(
    level: str, library_level: str | None = None, *, json_lines: bool = False
) -> Iterator[io.StringIO]:
    """What ``setup_logging`` (as ``concierge`` calls it) writes; the loggers restored after."""
    root, noisy = logging.getLogger(), [logging.getLogger(name) for name in NOISY_LOGGERS]
    levels = [root.level, *(logger.level for logger in noisy)]
    stream = io.StringIO()
    handler = setup_logging(
        level, json_lines=json_lines, stream=stream, library_level=library_level
    )
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        for logger, saved in zip([root, *noisy], levels, strict=True):
            logger.setLevel(saved)


async def discord_log_at_debug(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, library_level: str | None
) -> tuple[str, str, str]:
    """The log of a Discord bot that receives, over the Gateway, a member's message and a
    ``/rescrape`` by that member (refused); returns it with the message's text and the
    interaction's token."""
    fake = FakeGateway()
    server = await start(fake)
    monkeypatch.setattr(discord.http.Route, "BASE", fake.base)
    monkeypatch.setattr(
        discord.gateway.DiscordWebSocket, "DEFAULT_GATEWAY", yarl.URL(fake.gateway_url)
    )
    said = "my card number is " + uuid.uuid4().hex
    interaction = interaction_payload(
        next(_ids), "rescrape", MEMBER, guild_id=GUILD_ID, channel_id=CHANNEL_ID, permissions=0
    )
    fake.guilds.append(guild_payload(GUILD_ID, [CHANNEL_ID]))
    message = message_payload(next(_ids), CHANNEL_ID, MEMBER, said, guild_id=GUILD_ID)
    fake.events += [("MESSAGE_CREATE", message), ("INTERACTION_CREATE", interaction)]
    try:
        with log_output("DEBUG", library_level) as output:
            concierge = ConciergeClient(settings, "discord")
            bot = ConciergeBot(settings, concierge, guild_ready_timeout=0.05)
            running = asyncio.create_task(bot.start(DISCORD_TOKEN))
            await fake.wait_for(lambda call: call.path.endswith("/callback"))  # the refusal
            await bot.close()
            await asyncio.wait_for(running, 30)
    finally:
        await server.close()
    assert fake.identified and fake.identified[0]["token"] == DISCORD_TOKEN  # a real IDENTIFY
    return output.getvalue(), said, interaction["token"]


async def test_discord_at_debug_logs_no_ones_message_nor_an_interaction_token(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, said, token = await discord_log_at_debug(settings, monkeypatch, None)

    assert "has connected to Gateway" in log  # discord.py's INFO lines are there
    assert said not in log and token not in log and DISCORD_TOKEN not in log


async def test_discord_library_debug_on_request_still_redacts_the_tokens(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, said, token = await discord_log_at_debug(settings, monkeypatch, "DEBUG")

    assert said in log  # the raw gateway events are logged: asked for
    assert "/callback" in log and REDACTED in log
    assert token not in log and DISCORD_TOKEN not in log


SLACK_RESPONSE_URL = "https://hooks.slack.com/commands/T0000001/123456/" + uuid.uuid4().hex


@pytest.mark.parametrize(
    "line",
    [
        f"POST https://discord.com/api/v10/interactions/1234/{DISCORD_TOKEN}/callback returned",
        f"PATCH https://discord.com/api/v10/webhooks/5678/{DISCORD_TOKEN}/messages/@original",
        f"WebSocket Event: {{'t': 'INTERACTION_CREATE', 'd': {{'token': '{DISCORD_TOKEN}'}}}}",
        f'sending {{"token": "{DISCORD_TOKEN}"}}',
        f"respond to {SLACK_RESPONSE_URL}",
        'payload {"response_url": "' + SLACK_RESPONSE_URL.replace("/", "\\/") + '"}',
        "body: command=%2Fask&response_url=" + SLACK_RESPONSE_URL.replace("/", "%2F") + "&x=1",
    ],
    ids=["callback", "webhook", "gateway", "json", "response_url", "escaped", "form"],
)
def test_bearer_urls_and_tokens_are_redacted(line: str) -> None:
    secret = SLACK_RESPONSE_URL.rsplit("/", 1)[1] if "slack" in line else DISCORD_TOKEN
    assert secret in line
    assert secret not in redact(line) and REDACTED in redact(line)


@pytest.mark.parametrize("json_lines", [False, True])
def test_a_traceback_holding_a_token_is_redacted(json_lines: bool) -> None:
    url = f"https://discord.com/api/v10/webhooks/5678/{DISCORD_TOKEN}/messages/@original"
    with log_output("INFO", json_lines=json_lines) as output:
        try:
            raise RuntimeError(f"401, message='Unauthorized', url='{url}'")  # as aiohttp says it
        except RuntimeError:
            logging.getLogger("bots.test").exception("edit failed")

    assert "edit failed" in output.getvalue() and "RuntimeError" in output.getvalue()
    assert DISCORD_TOKEN not in output.getvalue()


def test_a_password_in_a_url_is_left_out_of_log_lines() -> None:
    """httpx and aio-pika log the URLs they use; a model server's or broker's password stays out."""
    line = "HTTP Request: GET http://bob:s3cret@127.0.0.1:8080/v1/models 200; amqp://guest:pw@mq/"
    assert (
        redact(line) == "HTTP Request: GET http://***@127.0.0.1:8080/v1/models 200; amqp://***@mq/"
    )
    assert (
        redact("https://example.com/a@b and mailto:x@y") == "https://example.com/a@b and mailto:x@y"
    )
