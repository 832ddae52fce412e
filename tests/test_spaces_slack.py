"""Spaces on Slack (issue #30): a mention, a thread follow-up, an ``/ask`` and a ``/rescrape``
go to the space of their channel or workspace, an unnamed place to ``default``; a space's
admins rebuild their space and no other; the persona's name is the ``username`` of what the
bot posts and streams there. The real Bolt app and adapter against the fake Slack, the real
broker (a tap sees each request as the engine would receive it).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.web.async_client import AsyncWebClient

from bots.client import ConciergeClient
from bots.slack.adapter import SlackAdapter
from bots.slack.app import build_app
from broker.amqp import Broker
from broker.protocol import Request
from config.settings import Settings
from config.texts import t
from tests.fake_slack import API_APP_ID, BOT_USER_ID, TEAM_ID, FakeSlack, start_fake_slack
from tests.helpers import WireTap
from tests.slack_fixture import ADMIN, slack_settings
from tests.spaces_fixture import space_table, with_spaces

ALPHA_CHANNEL = "C0ALPHA01"  # named by alpha
BETA_CHANNEL = "C0BETA001"  # in beta's workspace, named by no space
OTHER_CHANNEL = "C0OTHER01"  # in TEAM_ID, which no space names
BETA_TEAM = "T0BETA001"
ALPHA_ADMIN, BETA_ADMIN, STRANGER = "U0ALPHAAD", "U0BETAADM", "U0STRANGE"
WORKSPACE_ADMIN = "U0WSADMIN"  # a Slack workspace admin, in no list of ours
DEPLOYMENT_ADMIN = ADMIN  # in ``admin_user_ids`` (CONCIERGE_ADMIN_USER_IDS)

ALPHA = space_table(
    "alpha", bot_name="Pip", admins=[ALPHA_ADMIN], places={"slack_channels": [ALPHA_CHANNEL]}
)
BETA = space_table("beta", admins=[BETA_ADMIN], places={"slack_teams": [BETA_TEAM]})

_ts = itertools.count(1)


@dataclass
class Slack:
    """The adapter under test with two spaces, the fake Slack and a tap on the broker."""

    app: AsyncApp
    adapter: SlackAdapter
    fake: FakeSlack
    tap: WireTap

    async def deliver(self, event: dict[str, Any], team: str = TEAM_ID) -> None:
        """An Events API callback from the workspace ``team``, as Socket Mode hands it over."""
        body = {
            "type": "event_callback",
            "team_id": team,
            "api_app_id": API_APP_ID,
            "event_id": f"Ev{next(_ts)}",
            "event_time": 1_700_000_000,
            "authorizations": [{"team_id": team, "user_id": BOT_USER_ID, "is_bot": True}],
            "event": event,
        }
        response = await self.app.async_dispatch(AsyncBoltRequest(body=body, mode="socket_mode"))
        assert response.status == 200

    async def mention(
        self, text: str, channel: str, team: str = TEAM_ID, thread_ts: str | None = None
    ) -> str:
        """Someone new (one asker may have only a few questions open) mentions the bot."""
        user, said = f"U0ASKER{next(_ts):02d}", f"<@{BOT_USER_ID}> {text}"
        ts = self.fake.said(user, channel, said, thread_ts)
        event = {"type": "app_mention", "user": user, "text": said, "ts": ts, "channel": channel}
        await self.deliver(event | ({"thread_ts": thread_ts} if thread_ts else {}), team)
        return ts

    async def follow_up(self, text: str, channel: str, thread_ts: str) -> None:
        """A plain message in a thread (``slack_thread_followups``)."""
        user = f"U0ASKER{next(_ts):02d}"
        ts = self.fake.said(user, channel, text, thread_ts)
        event = {"type": "message", "channel_type": "channel", "user": user, "text": text}
        await self.deliver(event | {"ts": ts, "channel": channel, "thread_ts": thread_ts})

    async def command(self, name: str, user: str, channel: str, team: str = TEAM_ID) -> None:
        body = {
            "command": name,
            "text": "When do you open?" if name == "/ask" else "",
            "user_id": user,
            "user_name": user.lower(),
            "channel_id": channel,
            "team_id": team,
            "api_app_id": API_APP_ID,
            "response_url": self.fake.response_url(),
            "trigger_id": "1.2.3",
        }
        response = await self.app.async_dispatch(AsyncBoltRequest(body=body, mode="socket_mode"))
        assert response.status == 200

    async def request(self, number: int) -> Request:
        await self.tap.until(lambda: len(self.tap.requests) >= number)
        return self.tap.requests[number - 1]

    def usernames(self, method: str) -> dict[str, list[str | None]]:
        """The ``username`` of each call of ``method`` (None: left out), by channel."""
        found: dict[str, list[str | None]] = {}
        for call in self.fake.calls_of(method):
            found.setdefault(call.params["channel"], []).append(call.params.get("username"))
        return found


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    fake, server = await start_fake_slack()
    yield fake
    await server.close()


@pytest.fixture
async def slack(
    settings: Settings, tmp_path: Path, client: ConciergeClient, broker: Broker, fake: FakeSlack
) -> AsyncIterator[Slack]:
    """The real Bolt app and adapter with alpha and beta, as ``run_slack`` builds them;
    listeners finish before Bolt answers (``process_before_response``)."""
    followups = slack_settings(settings).model_copy(update={"slack_thread_followups": True})
    spaced, spaces = with_spaces(followups, tmp_path, ALPHA, BETA)
    web = AsyncWebClient(token="xoxb-test", base_url=fake.api_url)
    app = build_app(spaced, web, process_before_response=True)
    adapter = SlackAdapter(spaced, client, app, spaces=spaces)
    tap = await WireTap.open(broker, client.bot_id)
    try:
        yield Slack(app, adapter, fake, tap)
    finally:
        await adapter.close(grace_s=1.0)
        await tap.channel.close()


async def test_each_question_goes_to_the_space_of_its_channel_or_workspace(
    slack: Slack,
) -> None:
    asked = await slack.mention("Where is the shop?", ALPHA_CHANNEL)
    await slack.fake.wait_for(lambda: slack.fake.thread(ALPHA_CHANNEL, asked))  # answering
    await slack.follow_up("And on Sundays?", ALPHA_CHANNEL, asked)
    await slack.mention("And the price?", ALPHA_CHANNEL, thread_ts=asked)
    await slack.mention("Who are you?", BETA_CHANNEL, team=BETA_TEAM)
    await slack.command("/ask", "U0ASKERAK", BETA_CHANNEL, team=BETA_TEAM)
    await slack.mention("Somewhere else?", OTHER_CHANNEL)

    requests = [await slack.request(n) for n in range(1, 7)]
    assert {(r.question, r.space) for r in requests} == {
        ("Where is the shop?", "alpha"),  # its channel is named
        ("And on Sundays?", "alpha"),  # a follow-up in its thread
        ("And the price?", "alpha"),  # a mention in its thread
        ("Who are you?", "beta"),  # its workspace is named
        ("When do you open?", "beta"),  # /ask
        ("Somewhere else?", "default"),  # a place no space names
    }


async def test_a_space_admin_rebuilds_their_own_space_and_no_other(slack: Slack) -> None:
    await slack.command("/rescrape", ALPHA_ADMIN, BETA_CHANNEL, team=BETA_TEAM)
    await slack.command("/rescrape", BETA_ADMIN, ALPHA_CHANNEL)
    await slack.command("/rescrape", STRANGER, ALPHA_CHANNEL)
    await slack.command("/rescrape", ALPHA_ADMIN, ALPHA_CHANNEL)
    await slack.command("/rescrape", BETA_ADMIN, BETA_CHANNEL, team=BETA_TEAM)
    requests = [await slack.request(n) for n in (1, 2)]

    refusal = ("ephemeral", t("refusal.not_admin", "en"))
    assert [(r["response_type"], r["text"]) for r in slack.fake.responses] == [refusal] * 3
    assert {(r.type, r.space, r.user_id) for r in requests} == {  # in any order
        ("rescrape", "alpha", ALPHA_ADMIN),
        ("rescrape", "beta", BETA_ADMIN),
    }
    assert len(slack.tap.requests) == 2  # the refused ones, asked first, asked nothing
    admin_lookups = [  # whether a workspace admin (not a locale lookup)
        c.params["user"]
        for c in slack.fake.calls_of("users.info")
        if "include_locale" not in c.params
    ]
    assert admin_lookups == [ALPHA_ADMIN, BETA_ADMIN, STRANGER]  # a listed admin is not asked


async def test_a_deployment_admin_and_a_workspace_admin_rebuild_every_named_space(
    slack: Slack,
) -> None:
    """A space's ``admins`` add to the deployment's admins, never replace them: the ones the
    settings or Slack make admins may still rebuild a space that does not list them."""
    slack.fake.users[WORKSPACE_ADMIN] = {"is_admin": True}
    for user in (DEPLOYMENT_ADMIN, WORKSPACE_ADMIN):
        await slack.command("/rescrape", user, ALPHA_CHANNEL)
        await slack.command("/rescrape", user, BETA_CHANNEL, team=BETA_TEAM)
    requests = [await slack.request(n) for n in range(1, 5)]

    assert slack.fake.responses == []  # nobody was refused
    assert sorted((r.type, r.space, r.user_id) for r in requests) == sorted(
        ("rescrape", space, user)
        for space in ("alpha", "beta")
        for user in (DEPLOYMENT_ADMIN, WORKSPACE_ADMIN)
    )
    admin_lookups = [  # whether a workspace admin (not a locale lookup)
        c.params["user"]
        for c in slack.fake.calls_of("users.info")
        if "include_locale" not in c.params
    ]
    assert admin_lookups == [WORKSPACE_ADMIN] * 2  # the listed admin is not asked about


async def test_the_persona_name_is_on_what_the_bot_posts_and_streams_in_its_space(
    slack: Slack,
) -> None:
    slack.fake.streaming = True
    asked = await slack.mention("Where is the shop?", ALPHA_CHANNEL)  # streamed in its thread
    await slack.command("/ask", "U0ASKERAK", ALPHA_CHANNEL)  # posted in the channel
    await slack.mention("", ALPHA_CHANNEL)  # a bare mention: how to ask
    await slack.mention("Somewhere else?", OTHER_CHANNEL)  # default's: the app's own name
    await slack.request(3)
    await slack.fake.wait_for(lambda: len(slack.fake.calls_of("chat.startStream")) == 2)
    await slack.fake.wait_for(lambda: len(slack.fake.calls_of("chat.postMessage")) == 2)

    assert slack.usernames("chat.startStream") == {ALPHA_CHANNEL: ["Pip"], OTHER_CHANNEL: [None]}
    assert slack.usernames("chat.postMessage") == {ALPHA_CHANNEL: ["Pip", "Pip"]}
    assert slack.fake.thread(ALPHA_CHANNEL, asked)[0].streamed
