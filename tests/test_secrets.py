"""Secrets never reach logs, errors or reprs: a whole exchange at DEBUG, searched line by line.

It also shows that non-default broker credentials work (a RabbitMQ user made for the test).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import uuid
from collections.abc import AsyncIterator

import pytest

from bots.ask import Ask
from bots.client import ConciergeClient
from broker.amqp import Broker
from broker.protocol import Cancelled
from config.settings import Settings
from engine.llm import Backend
from tests.conftest import LONG_QUESTION, start_engine
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
