"""The Slack adapter against a local fake of Slack: stops, signatures, ignores, rescrape."""

from __future__ import annotations

import time
from typing import Any

import pytest

from bots.ask import Ask
from bots.client import ConciergeClient
from bots.slack.format import STOP_REACTION
from broker.amqp import Broker
from config.settings import Settings
from engine.backends.base import Backend
from tests import slack_fixture
from tests.conftest import LONG_QUESTION, start_engine
from tests.fake_slack import BOT_ID, BOT_USER_ID, FakeSlack
from tests.helpers import collect
from tests.slack_fixture import ADMIN, ASKER, CHANNEL, STRANGER, Bot, mention, slack_bot
from tests.slack_helpers import DONE, STOPPED, parts, shown, wait_until_shown
from tests.test_secrets import log_output

# The shared fixtures: pytest finds a fixture by its name in the test's module.
settings, fake, bot = slack_fixture.settings, slack_fixture.fake, slack_fixture.bot


# --- what Slack shows -----------------------------------------------------------------------


def reaction(user: str, ts: str, name: str = STOP_REACTION) -> dict[str, Any]:
    item = {"type": "message", "channel": CHANNEL, "ts": ts}
    return {"type": "reaction_added", "user": user, "reaction": name, "item": item}


def admin_lookups(fake: FakeSlack) -> list[str]:
    """Whom ``users.info`` was asked about to see if they are an admin (not for a locale)."""
    return [
        c.params["user"] for c in fake.calls_of("users.info") if "include_locale" not in c.params
    ]


# --- stopping ---------------------------------------------------------------------------------


async def test_the_askers_reaction_stops_the_answer_and_a_strangers_does_not(
    settings: Settings, backend: Backend, broker: Broker, fake: FakeSlack
) -> None:
    engine = await start_engine(settings.model_copy(update={"max_tokens": 400}), backend)
    async with (
        ConciergeClient(settings, "test") as client,
        slack_bot(settings, client, fake, edit_interval_s=0.0) as bot,
    ):
        await bot.slack.event(mention(LONG_QUESTION, "400.1"))
        answer_ts = (await wait_until_shown(fake, "400.1", lambda text, _: len(text) > 10))[0].ts
        answer = bot.adapter.answers.find((CHANNEL, answer_ts))
        assert answer is not None

        assert await bot.slack.event(reaction(STRANGER, answer_ts)) == 200
        assert await bot.slack.event(reaction(ASKER, "400.1", name="thumbsup")) == 200
        assert answer.stopped_by is None
        assert admin_lookups(fake) == [STRANGER]  # the asker's own stop asks nobody

        assert await bot.slack.event(reaction(ASKER, "400.1")) == 200  # on the question
        assert answer.stopped_by == ASKER
        messages = await wait_until_shown(fake, "400.1")
    await engine.stop()

    text, footer = shown(messages)
    assert footer == STOPPED  # the engine's confirmation came in time: "stopping…" not needed
    assert len(text) < 1000  # far from the 400 tokens it would have written


async def test_a_queued_question_is_stopped_by_an_admin_before_it_starts(
    settings: Settings, backend: Backend, broker: Broker, fake: FakeSlack
) -> None:
    engine = await start_engine(settings.model_copy(update={"max_tokens": 400}), backend)
    fake.users["U0WSADMIN"] = {"is_admin": True}  # a workspace admin, not in admin_user_ids
    async with (
        ConciergeClient(settings, "test") as client,
        slack_bot(settings, client, fake) as bot,
    ):
        running = await client.ask(Ask(LONG_QUESTION, "someone"))
        await running.next_item()  # the engine is busy with it
        await bot.slack.event(mention("And what about dogs?", "500.1"))
        queued = await wait_until_shown(fake, "500.1", lambda _, footer: footer.startswith("⏳"))

        assert await bot.slack.event(reaction("U0WSADMIN", queued[0].ts)) == 200
        messages = await wait_until_shown(fake, "500.1")
        await client.cancel(running, "someone")
        await collect(running)
    await engine.stop()

    assert shown(messages) == ("", STOPPED)
    assert all(parts(version)[0] == "" for version in messages[0].texts)  # no token shown


# --- refusing ---------------------------------------------------------------------------------


async def test_a_bad_signature_or_a_stale_request_is_rejected(
    bot: Bot, broker: Broker, fake: FakeSlack
) -> None:
    assert await bot.slack.event(mention("hello?", "600.1"), secret="not-the-secret") == 401
    body = '{"type": "event_callback", "event": {"type": "app_mention"}}'
    stale = time.time() - 600
    assert (await bot.slack.post(body, "application/json", at=stale))[0] == 401
    assert await bot.slack.event(reaction(ASKER, "600.1")) == 200  # signed properly: accepted

    assert await broker.request_queue_depth() == 0
    assert fake.calls_of("chat.postMessage") == []


async def test_mentions_from_bots_itself_or_other_channels_are_ignored(
    settings: Settings, client: ConciergeClient, broker: Broker, fake: FakeSlack
) -> None:
    elsewhere = settings.model_copy(update={"allowed_channel_ids": ["C0OTHER"]})
    async with slack_bot(elsewhere, client, fake) as bot:
        assert await bot.slack.event(mention("not here", "700.1")) == 200
        status, body = await bot.slack.command("/ask", "hi", user_id=ASKER, channel_id=CHANNEL)
    async with slack_bot(settings, client, fake) as bot:
        await bot.slack.event(mention("from a bot", "700.2", user="U0OTHERBOT", bot_id="B0OTHER"))
        await bot.slack.event(mention("from myself", "700.3", user=BOT_USER_ID, bot_id=BOT_ID))

    assert (status, body) == (200, "I don't answer in this channel.")
    assert await broker.request_queue_depth() == 0
    assert fake.calls_of("chat.postMessage") == []


@pytest.mark.parametrize("cut", [False, True])
async def test_rescrape_is_refused_to_non_admins(
    bot: Bot, broker: Broker, fake: FakeSlack, cut: bool
) -> None:
    """Also when Slack cannot say who is an admin (``cut``: the connection fails before its
    answer): nobody is one on a guess, and the log says so in a line."""
    if cut:
        fake.dropped = {"users.info"}
    with log_output("INFO") as output:
        status, _ = await bot.slack.command("/rescrape", "", user_id=STRANGER, channel_id=CHANNEL)
    log = output.getvalue()

    assert status == 200
    assert [(r["response_type"], r["text"]) for r in fake.responses] == [
        ("ephemeral", "Only admins can rebuild the knowledge base.")
    ]
    assert await broker.request_queue_depth() == 0
    assert fake.calls_of("chat.postMessage") == []
    assert set(admin_lookups(fake)) == {STRANGER}
    assert log.count(f"no answer to users.info for {STRANGER}") == int(cut)
    assert "Traceback" not in log


async def test_rescrape_streams_progress_for_admins(
    site_settings: Settings, backend: Backend, broker: Broker, fake: FakeSlack
) -> None:
    settings = site_settings
    engine = await start_engine(settings, backend)
    async with (
        ConciergeClient(settings, "test") as client,
        slack_bot(settings, client, fake, edit_interval_s=0.0) as bot,  # show every event
    ):
        status, _ = await bot.slack.command("/rescrape", "", user_id=ADMIN, channel_id=CHANNEL)
        messages = await wait_until_shown(fake, None)
    await engine.stop()

    assert status == 200
    assert len(messages) == 1  # one message, updated in place
    progress = [parts(text)[0] for text in messages[0].texts if parts(text)[0]]
    assert any(text.startswith("Rescrape: ") for text in progress), progress
    text, footer = shown(messages)
    assert footer == DONE
    assert text.startswith("Rescrape done")
