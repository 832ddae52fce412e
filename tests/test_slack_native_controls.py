"""Slack's own features for AI apps: stop and feedback controls, lookups and locale."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from slack_sdk.web.async_client import AsyncWebClient

from bots.client import ConciergeClient
from bots.slack.format import FOOTER_SEPARATOR, asked_line
from bots.slack.people import SlackPeople
from bots.slack.votes import VOTE_ACTION, read_vote
from broker.amqp import Broker
from broker.messages import Envelope
from broker.protocol import Feedback
from config.texts import t
from tests import slack_fixture
from tests.conftest import LONG_QUESTION, RunningEngine
from tests.fake_slack import TEAM_ID, FakeSlack
from tests.slack_fixture import ASKER, CHANNEL, STRANGER, Bot, mention
from tests.slack_helpers import STOPPED, shown, wait_until_shown
from tests.slack_native_helpers import (
    streamed_to_its_end,
    vote_values,
    web,  # noqa: F401  # the fixture
)

# The shared fixtures: pytest finds a fixture by its name in the test's module.
settings, fake, bot = slack_fixture.settings, slack_fixture.fake, slack_fixture.bot

VOTER = "U0VOTER01"


def stop_control(user: str, thread_ts: str, streaming: list[str]) -> dict[str, Any]:
    """Slack's ``agent_session_stopped``, as its docs show it."""
    return {
        "type": "agent_session_stopped",
        "channel": CHANNEL,
        "thread_ts": thread_ts,
        "streaming_message_ts": streaming,
        "user": user,
        "event_ts": "1783536983.783769",
    }


def vote_click(user: str, value: str, ts: str) -> dict[str, Any]:
    """A click on a feedback button, as Slack's ``block_actions`` payload carries it."""
    action = {
        "type": "feedback_buttons",
        "action_id": VOTE_ACTION,
        "block_id": "b1",
        "value": value,
        "text": {"type": "plain_text", "text": "👍"},
        "action_ts": "1700000099.000100",
    }
    return {
        "user": {"id": user, "team_id": TEAM_ID},
        "channel": {"id": CHANNEL},
        "container": {"type": "message", "message_ts": ts, "channel_id": CHANNEL},
        "message": {"ts": ts, "type": "message"},
        "actions": [action],
    }


# --- Slack's stop control -----------------------------------------------------------------------


async def test_slacks_stop_control_stops_the_askers_answer_and_not_a_strangers_click(
    bot: Bot, long_engine: RunningEngine, fake: FakeSlack
) -> None:
    fake.streaming = True
    await bot.slack.event(mention(LONG_QUESTION, "500.2", thread_ts="500.1"))  # a follow-up
    started = await fake.wait_for(
        lambda: [m for m in fake.thread(CHANNEL, "500.1") if len(m.text) > 10], 60
    )
    ts = started[0].ts
    answer = bot.adapter.answers.find((CHANNEL, ts))
    assert answer is not None

    fake.stop_streams([ts])  # as Slack does on a click, whoever clicks
    assert await bot.slack.event(stop_control(STRANGER, "500.1", [ts])) == 200
    assert answer.stopped_by is None
    assert await bot.slack.event(stop_control(ASKER, "500.1", [])) == 200  # the thread's answer
    assert answer.stopped_by == ASKER
    messages = await wait_until_shown(fake, "500.1")
    await fake.wait_for(lambda: len(fake.calls_of("agents.sessions.setStatus")) == 2)

    text, footer = shown(messages)
    assert footer == STOPPED and len(text) < 1000  # far from the 400 tokens it would write
    sessions = [call.params for call in fake.calls_of("agents.sessions.setStatus")]
    where = {"channel_id": CHANNEL, "thread_ts": "500.1"}
    assert sessions == [  # what shows Slack's stop button while the answer runs
        where | {"status": "processing", "initiator_user_id": ASKER},
        where | {"status": "active", "initiator_user_id": ASKER},
    ]
    assert [(e["user"], e["text"]) for e in fake.ephemerals] == [
        (STRANGER, t("stop.not_allowed", "en"))
    ]


async def test_a_stop_control_for_no_answer_gives_the_session_back(
    bot: Bot, fake: FakeSlack
) -> None:
    assert await bot.slack.event(stop_control(ASKER, "510.1", [])) == 200

    sessions = [call.params for call in fake.calls_of("agents.sessions.setStatus")]
    assert sessions == [{"channel_id": CHANNEL, "thread_ts": "510.1", "status": "active"}]


# --- feedback ---------------------------------------------------------------------------------


async def test_a_click_on_a_feedback_button_publishes_the_vote_and_thanks_the_voter_alone(
    bot: Bot, engine: RunningEngine, client: ConciergeClient, broker: Broker, fake: FakeSlack
) -> None:
    fake.streaming = True
    await bot.slack.event(mention("Say hello.", "600.1"))
    message = await streamed_to_its_end(fake, "600.1")
    up, down = vote_values(message.blocks)
    await engine.stop()  # it takes votes too: here the test does
    votes: asyncio.Queue[Feedback] = asyncio.Queue()

    async def take(envelope: Envelope[Feedback]) -> None:
        await votes.put(envelope.message)
        await envelope.ack()

    await broker.consume_feedback(take)
    assert (await bot.slack.action(vote_click(VOTER, up, message.ts)))[0] == 200
    assert (await bot.slack.action(vote_click(VOTER, down, message.ts)))[0] == 200
    first = await asyncio.wait_for(votes.get(), 30)
    second = await asyncio.wait_for(votes.get(), 30)
    await fake.wait_for(lambda: len(fake.responses) == 2)

    session_id = read_vote(up)
    assert session_id is not None
    assert [(f.session_id, f.user_id, f.vote, f.platform) for f in (first, second)] == [
        (session_id[1], VOTER, "up", client.platform),
        (session_id[1], VOTER, "down", client.platform),
    ]
    assert [(r["response_type"], r["text"]) for r in fake.responses] == [
        ("ephemeral", t("vote.thanks_up", "en")),
        ("ephemeral", t("vote.thanks_down", "en")),
    ]
    assert all(r["replace_original"] is False for r in fake.responses)  # the answer stays


async def test_a_user_lookup_slack_never_answers_gives_the_default_and_is_not_retried_at_once(
    web: AsyncWebClient,  # noqa: F811  # the fixture imported above
    fake: FakeSlack,
) -> None:
    fake.dropped = {"users.info"}
    people = SlackPeople(web, default="ja")
    assert await people.locale(ASKER) == "ja"
    tried = len(fake.calls_of("users.info"))
    assert await people.locale(ASKER) == "ja"

    assert tried >= 1 and len(fake.calls_of("users.info")) == tried


async def test_an_admin_check_slack_never_answers_says_no_once_the_client_gives_up(
    fake: FakeSlack, caplog: pytest.LogCaptureFixture
) -> None:
    fake.unanswered = {"users.info"}
    quick = AsyncWebClient(token="xoxb-test", base_url=fake.api_url, timeout=1)
    with caplog.at_level(logging.INFO, logger="bots.slack.people"):
        assert await SlackPeople(quick, default="en").is_admin(STRANGER) is False

    assert fake.calls_of("users.info")
    said = [r for r in caplog.records if r.name == "bots.slack.people"]
    assert [(r.levelno, "not an admin" in r.getMessage()) for r in said] == [
        (logging.WARNING, True)
    ]


# --- a Japanese-speaking asker ----------------------------------------------------------------


async def test_an_asker_whose_slack_speaks_japanese_reads_japanese(
    bot: Bot, engine: RunningEngine, client: ConciergeClient, fake: FakeSlack
) -> None:
    fake.streaming = True
    fake.users[ASKER] = {"locale": "ja-JP", "profile": {"display_name": "Jo"}}
    await bot.slack.event(mention("", "700.1"))  # no question
    status, usage = await bot.slack.command("/ask", "", user_id=ASKER, channel_id=CHANNEL)
    await bot.slack.event(mention("Say hello.", "700.2"))
    message = await streamed_to_its_end(fake, "700.2")
    await bot.slack.command("/ask", "Say hello.", user_id=ASKER, channel_id=CHANNEL)
    in_channel = await wait_until_shown(fake, None, lambda _, f: f == t("status.done", "ja"))
    await bot.slack.action(vote_click(ASKER, vote_values(message.blocks)[0], message.ts))
    await fake.wait_for(lambda: fake.responses)

    assert fake.thread(CHANNEL, "700.1")[0].text == t("slack.mention_usage", "ja")
    assert (status, usage) == (200, t("slack.ask_usage", "ja"))
    assert message.text.endswith(FOOTER_SEPARATOR + t("status.done", "ja"))
    assert fake.statuses()[0]["status"] == t("working.next_up", "ja")
    assert in_channel[0].text.startswith(asked_line("Jo", "Say hello.", "ja") + "\n")
    assert fake.responses[0]["text"] == t("vote.thanks_up", "ja")
    asked = [c for c in fake.calls_of("users.info") if c.params.get("include_locale")]
    assert [c.params["user"] for c in asked] == [ASKER]  # once: it is remembered
