"""Follow-up questions on Slack: threads and ask answers reach the engine as history."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import SecretStr
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_sdk.web.async_client import AsyncWebClient

from bots.client import ConciergeClient
from bots.slack.adapter import SlackAdapter
from bots.slack.app import build_app
from bots.slack.format import asked_line, slack_text
from bots.slack.history import Me, plain
from bots.slack.history import split_status as slack_split_status
from broker.amqp import Broker
from broker.protocol import Done, Request
from config.settings import Settings
from tests.conversations_helpers import (
    _ids,
    engine_running,  # noqa: F401  # the fixture
    turns,
)
from tests.fake_slack import API_APP_ID, BOT_USER_ID, TEAM_ID, FakeSlack, Message, start_fake_slack
from tests.fake_slack import BOT_ID as SLACK_BOT_ID
from tests.helpers import WireTap

# --- Slack ------------------------------------------------------------------------------------

SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
SLACK_CHANNEL = "C0GENERAL"
SLACK_ANN, SLACK_BOB = "U0ANN0001", "U0BOB0001"


@pytest.fixture
async def fake_slack() -> AsyncIterator[FakeSlack]:
    fake, server = await start_fake_slack()
    fake.users = {SLACK_ANN: {"profile": {"display_name": "Ann"}}}
    fake.users[SLACK_BOB] = {"profile": {"display_name": "Bob"}}
    yield fake
    await server.close()


@dataclass
class Slack:
    """The real Bolt app and adapter, their Web API the fake; events reach Bolt's dispatch."""

    app: AsyncApp
    adapter: SlackAdapter
    fake: FakeSlack
    tap: WireTap

    async def deliver(self, event: dict[str, Any]) -> int:
        """An Events API callback as Socket Mode hands it over; Bolt's answer status."""
        body = {
            "type": "event_callback",
            "team_id": TEAM_ID,
            "api_app_id": API_APP_ID,
            "event_id": f"Ev{next(_ids)}",
            "event_time": 1_700_000_000,
            "authorizations": [{"team_id": TEAM_ID, "user_id": BOT_USER_ID, "is_bot": True}],
            "event": event,
        }
        response = await self.app.async_dispatch(AsyncBoltRequest(body=body, mode="socket_mode"))
        return response.status

    async def mention(self, user: str, text: str, thread_ts: str | None = None) -> str:
        """``user`` mentions the bot (in ``thread_ts``, if given); the message's ts."""
        said = f"<@{BOT_USER_ID}> {text}"
        ts = self.fake.said(user, SLACK_CHANNEL, said, thread_ts)
        event = {"type": "app_mention", "user": user, "text": said, "ts": ts}
        event |= {"channel": SLACK_CHANNEL} | ({"thread_ts": thread_ts} if thread_ts else {})
        assert await self.deliver(event) == 200
        return ts

    async def message(self, user: str, text: str, thread_ts: str | None = None) -> str:
        """A plain message (no mention) in the channel or in ``thread_ts``; its ts."""
        ts = self.fake.said(user, SLACK_CHANNEL, text, thread_ts)
        event = {"type": "message", "channel_type": "channel", "user": user, "text": text}
        event |= {"ts": ts, "channel": SLACK_CHANNEL}
        assert await self.deliver(event | ({"thread_ts": thread_ts} if thread_ts else {})) == 200
        return ts

    async def ask(self, user: str, text: str) -> None:
        body = {
            "command": "/ask",
            "text": text,
            "user_id": user,
            "user_name": user.lower(),
            "channel_id": SLACK_CHANNEL,
            "team_id": TEAM_ID,
            "api_app_id": API_APP_ID,
            "response_url": self.fake.response_url(),
            "trigger_id": "1.2.3",
        }
        response = await self.app.async_dispatch(AsyncBoltRequest(body=body, mode="socket_mode"))
        assert response.status == 200

    def lay_answer(self, thread_ts: str | None, text: str) -> str:
        """One of the bot's answers, posted before (as Slack keeps it); its ts."""
        ts = self.fake.new_ts()
        self.fake.messages.append(Message(SLACK_CHANNEL, ts, thread_ts, [text], [0.0]))
        return ts

    async def answered(self, thread_ts: str) -> Message:
        """The bot's answer in ``thread_ts``, once its status line says it ended."""

        def ended() -> Message | None:
            mine = self.fake.thread(SLACK_CHANNEL, thread_ts)
            last = mine[-1] if mine else None
            return last if last and "✅" in slack_split_status(last.text)[1] else None

        return await self.fake.wait_for(ended, 60)

    async def request(self, number: int) -> Request:
        await self.tap.until(lambda: len(self.tap.requests) >= number)
        return self.tap.requests[number - 1]


@asynccontextmanager
async def slack_bot(
    settings: Settings, client: ConciergeClient, broker: Broker, fake: FakeSlack, **changes: Any
) -> AsyncIterator[Slack]:
    settings = settings.model_copy(
        update={
            "slack_bot_token": SecretStr("xoxb-test"),
            "slack_signing_secret": SecretStr(SLACK_SECRET),
            **changes,
        }
    )
    web = AsyncWebClient(token="xoxb-test", base_url=fake.api_url)
    app = build_app(settings, web, process_before_response=True)
    adapter = SlackAdapter(settings, client, app)
    tap = await WireTap.open(broker, client.bot_id)
    try:
        yield Slack(app, adapter, fake, tap)
    finally:
        await adapter.close(grace_s=1.0)
        await tap.channel.close()


ME = Me(BOT_USER_ID, SLACK_BOT_ID)


async def test_a_mention_in_a_thread_the_bot_answered_continues_it_and_so_does_an_ask_thread(
    settings: Settings, client: ConciergeClient, broker: Broker, fake_slack: FakeSlack,
    engine_running: None,  # noqa: F811  # the fixture imported above
) -> None:  # fmt: skip
    async with slack_bot(settings, client, broker, fake_slack) as slack:
        asked = await slack.mention(SLACK_ANN, "When does the last ferry leave?")
        await slack.answered(asked)
        await slack.mention(SLACK_ANN, "And how much is the ticket?", thread_ts=asked)
        first, follow_up = await slack.request(1), await slack.request(2)
        first_done = (await slack.tap.ending(first.session_id))[-1]

        await slack.ask(SLACK_BOB, "Is the museum open on Mondays?")
        await slack.tap.until(lambda: len(slack.tap.requests) >= 3)
        by_command = slack.tap.requests[2]
        answer = await slack.fake.wait_for(lambda: slack.fake.thread(SLACK_CHANNEL, None)[:1])
        await _ended_in_channel(slack, answer[0].ts)
        await slack.mention(SLACK_BOB, "And on Sundays?", thread_ts=answer[0].ts)
        in_ask_thread = await slack.request(4)
        by_command_done = (await slack.tap.ending(by_command.session_id))[-1]

    assert isinstance(first_done, Done) and isinstance(by_command_done, Done)
    assert follow_up.question == "And how much is the ticket?"
    assert follow_up.history == turns(
        ("user", "When does the last ferry leave?"),
        ("assistant", plain(slack_text(first_done.text), ME)),
    )
    assert in_ask_thread.history == turns(
        ("user", "Is the museum open on Mondays?"),  # the question the answer's first line names
        ("assistant", plain(slack_text(by_command_done.text), ME)),
    )


async def _ended_in_channel(slack: Slack, ts: str) -> None:
    """Wait until the ``/ask`` answer posted in the channel at ``ts`` shows that it ended."""

    def ended() -> bool:
        return "✅" in slack_split_status(slack.fake.message(ts).text)[1]

    await slack.fake.wait_for(ended, 60)


async def test_a_mention_in_a_thread_the_bot_never_answered_stands_alone(
    settings: Settings, client: ConciergeClient, broker: Broker, fake_slack: FakeSlack
) -> None:
    async with slack_bot(settings, client, broker, fake_slack) as slack:
        started = await slack.message(SLACK_BOB, "Anyone know the opening hours?")
        await slack.message(SLACK_ANN, "No idea", thread_ts=started)
        await slack.mention(SLACK_ANN, "What are the opening hours?", thread_ts=started)
        request = await slack.request(1)

    assert request.history == ()
    assert [call.params["ts"] for call in fake_slack.calls_of("conversations.replies")] == [started]


async def test_with_thread_followups_on_a_plain_message_in_the_bots_thread_asks_too(
    settings: Settings, client: ConciergeClient, broker: Broker, fake_slack: FakeSlack
) -> None:
    async with slack_bot(
        settings, client, broker, fake_slack, slack_thread_followups=True
    ) as slack:
        asked = fake_slack.said(SLACK_ANN, SLACK_CHANNEL, f"<@{BOT_USER_ID}> Is parking free?")
        slack.lay_answer(asked, "Yes, *for two hours*." + "\n\n✅ done")
        other = await slack.message(SLACK_BOB, "Lunch anyone?")
        await slack.message(SLACK_ANN, "Pizza?", thread_ts=other)  # not the bot's thread
        await slack.message(SLACK_BOB, "Is that all day?")  # not in a thread
        await slack.message(SLACK_BOB, f"<@{BOT_USER_ID}> hello", thread_ts=other)  # a mention
        await slack.message(SLACK_BOB, "And after that?", thread_ts=asked)
        follow_up = await slack.request(1)
        await slack.mention(SLACK_ANN, "Thanks", thread_ts=asked)  # a marker: asked after them
        await slack.request(2)

    assert follow_up.question == "And after that?"
    assert follow_up.history == turns(
        ("user", "Ann: Is parking free?"), ("assistant", "Yes, *for two hours*.")
    )
    assert len(slack.tap.requests) == 2


async def test_without_thread_followups_a_plain_message_asks_nothing(
    settings: Settings, client: ConciergeClient, broker: Broker, fake_slack: FakeSlack
) -> None:
    async with slack_bot(settings, client, broker, fake_slack) as slack:
        asked = fake_slack.said(SLACK_ANN, SLACK_CHANNEL, f"<@{BOT_USER_ID}> Is parking free?")
        slack.lay_answer(asked, "Yes.\n\n✅ done")
        await slack.message(SLACK_ANN, "Hmm, ok.", thread_ts=asked)
        await slack.mention(SLACK_ANN, "And after that?", thread_ts=asked)
        request = await slack.request(1)

    assert len(slack.tap.requests) == 1
    assert request.history == turns(
        ("user", "Is parking free?"), ("assistant", "Yes."), ("user", "Hmm, ok.")
    )
    assert fake_slack.calls_of("conversations.replies")  # read for the mention only
    assert len(fake_slack.calls_of("conversations.replies")) == 1


async def test_an_ask_answers_first_line_is_read_back_as_its_question_and_its_asker(
    settings: Settings, client: ConciergeClient, broker: Broker, fake_slack: FakeSlack
) -> None:
    async with slack_bot(settings, client, broker, fake_slack) as slack:
        by_ann = slack.lay_answer(
            None, asked_line("Ann", "Is 1 < 2 & 3 > 2?") + "\nYes.\n\n✅ done"
        )
        by_bob = slack.lay_answer(None, asked_line("Bob", "Open late?") + "\nNo.\n\n✅ done")
        await slack.mention(SLACK_ANN, "Why?", thread_ts=by_ann)
        await slack.mention(SLACK_ANN, "Why?", thread_ts=by_bob)
        own, others = await slack.request(1), await slack.request(2)

    assert own.history == turns(("user", "Is 1 < 2 & 3 > 2?"), ("assistant", "Yes."))
    assert others.history == turns(("user", "Bob: Open late?"), ("assistant", "No."))
