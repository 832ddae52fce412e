"""What the Slack tests share: Slack configured in the settings, the fake Slack on a free port
(``tests/fake_slack.py``), and the real Bolt app and adapter served over HTTP, their Web API
pointed at the fake.

The apps run with ``process_before_response=True``, so an HTTP answer to a delivery means the
listener has finished: tests wait on that, and on what the fake has received, never on time.
A test module imports the fixtures ``settings``, ``fake`` and ``bot`` by name to use them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from unittest.mock import patch

import pytest
from aiohttp.test_utils import TestServer
from pydantic import SecretStr
from slack_sdk.web.async_client import AsyncWebClient

from bots.client import ConciergeClient
from bots.slack.adapter import SlackAdapter
from bots.slack.app import build_app
from bots.slack.format import BODY_CHARS
from bots.slack.http import EVENTS_PATH, events_web_app
from config.settings import Settings
from tests.fake_slack import BOT_USER_ID, FakeSlack, start_fake_slack
from tests.fake_slack_delivery import SlackDelivery

SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
CHANNEL = "C0GENERAL"
ASKER = "U0ASKER01"
STRANGER = "U0STRANGE"
ADMIN = "U0ADMIN01"  # in ``admin_user_ids``


def slack_settings(settings: Settings) -> Settings:
    """``settings`` with short answers (the bot only needs a few tokens) and Slack set."""
    return settings.model_copy(
        update={
            "max_tokens": 16,
            "slack_bot_token": SecretStr("xoxb-test"),
            "slack_app_token": SecretStr("xapp-test"),
            "slack_signing_secret": SecretStr(SIGNING_SECRET),
            "admin_user_ids": [ADMIN],
        }
    )


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """conftest's settings, as ``slack_settings`` makes them."""
    return slack_settings(settings)


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    fake, server = await start_fake_slack()
    yield fake
    await server.close()


@dataclass
class Bot:
    adapter: SlackAdapter
    slack: SlackDelivery  # Slack's side: signed deliveries to the bot's events URL


@asynccontextmanager
async def slack_bot(
    settings: Settings,
    client: ConciergeClient,
    fake: FakeSlack,
    *,
    max_chars: int = BODY_CHARS,
    edit_interval_s: float = 0.05,
) -> AsyncIterator[Bot]:
    """The real Bolt app and adapter behind the real HTTP listener, editing at most once per
    ``edit_interval_s``. Leaving stops the answers still running and waits a moment for them:
    nothing more is sent after it."""
    web = AsyncWebClient(token="xoxb-test", base_url=fake.api_url)
    app = build_app(settings, web, process_before_response=True)
    with patch("bots.slack.adapter.EDIT_INTERVAL_S", edit_interval_s):  # read when it is built
        adapter = SlackAdapter(settings, client, app, max_chars=max_chars)
    server = TestServer(events_web_app(app, SIGNING_SECRET), host="127.0.0.1")
    await server.start_server()
    slack = SlackDelivery(f"http://127.0.0.1:{server.port}{EVENTS_PATH}", SIGNING_SECRET, fake)
    try:
        yield Bot(adapter, slack)
    finally:
        await adapter.close(grace_s=1.0)
        await slack.close()
        await server.close()


@pytest.fixture
async def bot(settings: Settings, client: ConciergeClient, fake: FakeSlack) -> AsyncIterator[Bot]:
    async with slack_bot(settings, client, fake) as running:
        yield running


def mention(text: str, ts: str, *, user: str = ASKER, **extra: Any) -> dict[str, Any]:
    """An ``app_mention`` of the bot in ``CHANNEL``."""
    return {
        "type": "app_mention",
        "user": user,
        "text": f"<@{BOT_USER_ID}> {text}",
        "ts": ts,
        "channel": CHANNEL,
        "event_ts": ts,
        **extra,
    }
