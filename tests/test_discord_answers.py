"""The Discord adapter end to end: mentions and DMs are answered in place; others ignored."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from bots.client import ConciergeClient
from bots.discord.app import run_discord
from bots.discord.sink import ANSWER_MAX_CHARS, DISCORD_MAX_CHARS, message_text
from bots.renderer import MessageContent
from broker.protocol import Done
from config.settings import ConfigError, Settings
from tests.conftest import LONG_QUESTION
from tests.discord_fixture import (
    ASKER,
    CHANNEL_ID,
    DM_CHANNEL_ID,
    GUILD_ID,
    OTHER_CHANNEL_ID,
    OTHER_GUILD_CHANNEL_ID,
    OTHER_GUILD_ID,
    STRANGER,
    StartBot,
    StartEngine,
    engine_for,  # noqa: F401  # the fixture
    fake_discord,  # noqa: F401  # the fixture
    split_footer,
    start_bot,  # noqa: F401  # the fixture
)
from tests.fake_discord import FakeDiscord
from tests.fake_discord_wire import BOT_ID, BOT_USER, user_payload

OTHER_BOT = user_payload(1_000_000_000_000_000_405, "otherbot", bot=True)


# --- questions and answers --------------------------------------------------------------------


async def test_a_mention_is_answered_in_place_with_throttled_edits(
    settings: Settings,
    start_bot: StartBot,  # noqa: F811  # the fixture imported above
    engine_for: StartEngine,  # noqa: F811  # the fixture imported above
    fake_discord: FakeDiscord,  # noqa: F811  # the fixture imported above
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # 96 tokens take at least 0.6 s even at 150 tokens/s: several edit intervals
    interval_s = 0.1
    monkeypatch.setattr("bots.discord.adapter.EDIT_INTERVAL_S", interval_s)
    settings = settings.model_copy(update={"max_tokens": 96})
    await engine_for(settings)
    discord_ = await start_bot(settings)

    question = f"{LONG_QUESTION} @everyone"
    question_id = discord_.ask(ASKER, question)
    request = await discord_.tap.request_from(ASKER["id"])
    first_id = await discord_.first_reply(question_id)
    shown = await discord_.finished(first_id)
    events = await discord_.tap.ending(request.session_id)

    assert request.question == question
    assert request.type == "ask"
    done = events[-1]
    assert isinstance(done, Done)
    assert shown.text == done.text
    assert shown.footer == "✅ done"
    assert shown.message_ids == [first_id]
    placeholder = fake_discord.replies_to(question_id)[0]
    assert split_footer(placeholder.body["content"])[1].startswith("⏳ queued")
    edits = fake_discord.edits(first_id)
    assert len(edits) >= 2  # streamed in place
    arrivals = [placeholder.at] + [edit.at for edit in edits]
    gaps = [later - earlier for earlier, later in itertools.pairwise(arrivals[:-1])]
    # an HTTP trip varies (Slack's twin test saw 79.97 ms at this interval); the engine's own
    # token events are 50 ms apart, so 70 ms still tells a throttle from one edit per event
    assert min(gaps) >= interval_s * 0.7, gaps
    sent = [
        call
        for call in fake_discord.calls
        if call.method in ("POST", "PATCH") and "/messages" in call.path  # not /commands
    ]
    assert sent and all(call.body["allowed_mentions"] == {"parse": []} for call in sent)
    assert not any("/reactions/" in c.path for c in fake_discord.calls)  # no 🛑 of its own


async def test_a_long_answer_continues_in_chained_replies_and_loses_nothing(
    settings: Settings,
    start_bot: StartBot,  # noqa: F811  # the fixture imported above
    engine_for: StartEngine,  # noqa: F811  # the fixture imported above
    fake_discord: FakeDiscord,  # noqa: F811  # the fixture imported above
) -> None:
    settings = settings.model_copy(update={"max_tokens": 24})
    await engine_for(settings)
    discord_ = await start_bot(settings, answer_max_chars=30)

    question_id = discord_.ask(ASKER, "Tell me about cats.")
    request = await discord_.tap.request_from(ASKER["id"])
    shown = await discord_.finished(await discord_.first_reply(question_id))
    done = (await discord_.tap.ending(request.session_id))[-1]

    assert isinstance(done, Done)
    assert len(done.text) > 75
    assert shown.text == done.text
    assert len(shown.message_ids) >= 3
    contents = [fake_discord.messages[message_id]["content"] for message_id in shown.message_ids]
    assert all(len(content) <= 30 for content in contents[:-1])  # no footer but on the last
    assert shown.footer == "✅ done"
    buttons = [bool(fake_discord.buttons(message_id)) for message_id in shown.message_ids]
    assert buttons == [False] * (len(buttons) - 1) + [True]  # the votes, on the last only


def test_a_full_message_with_the_longest_footer_fits_discords_limit() -> None:
    content = MessageContent("x" * ANSWER_MAX_CHARS, "⚠️ error: " + "a long reason\n" * 400)
    text = message_text(content)
    assert len(text) <= DISCORD_MAX_CHARS
    assert text.startswith("x" * ANSWER_MAX_CHARS + "\n-# ⚠️ error: a long reason")
    assert text.count("\n") == 1


async def test_run_discord_without_a_token_names_the_setting(settings: Settings) -> None:
    with pytest.raises(ConfigError, match="CONCIERGE_DISCORD_TOKEN"):
        await run_discord(settings.model_copy(update={"discord_token": None}), asyncio.Event())


async def test_a_dm_is_a_question_without_a_mention(
    settings: Settings,
    start_bot: StartBot,  # noqa: F811  # the fixture imported above
    fake_discord: FakeDiscord,  # noqa: F811  # the fixture imported above
) -> None:
    discord_ = await start_bot(settings)
    discord_.say(ASKER, "How do I claim the warranty?", channel=DM_CHANNEL_ID, guild=None)
    request = await discord_.tap.request_from(ASKER["id"])
    placeholder = await fake_discord.wait_for(
        lambda c: c.method == "POST" and c.path == f"/channels/{DM_CHANNEL_ID}/messages"
    )
    assert request.question == "How do I claim the warranty?"
    assert "queued" in placeholder.body["content"]


async def test_a_bare_mention_gets_help_and_no_request(
    settings: Settings,
    start_bot: StartBot,  # noqa: F811  # the fixture imported above
    fake_discord: FakeDiscord,  # noqa: F811  # the fixture imported above
    client: ConciergeClient,
) -> None:
    discord_ = await start_bot(settings)
    bare_id = discord_.say(ASKER, f"  <@{BOT_ID}>  ", mentions=[BOT_USER])
    later_id = discord_.ask(STRANGER, "What are the office hours?")  # after it, as a marker
    await discord_.first_reply(later_id)
    await discord_.tap.request_from(STRANGER["id"])
    help_reply = fake_discord.replies_to(bare_id)

    assert len(help_reply) == 1
    assert "mentioning me with your question" in help_reply[0].body["content"]
    assert help_reply[0].body["allowed_mentions"] == {"parse": []}
    assert [request.user_id for request in discord_.tap.requests] == [STRANGER["id"]]
    assert len(client.sessions) == 1


async def test_other_bots_itself_other_guilds_and_channels_and_everyone_pings_are_ignored(
    settings: Settings,
    start_bot: StartBot,  # noqa: F811  # the fixture imported above
    fake_discord: FakeDiscord,  # noqa: F811  # the fixture imported above
) -> None:
    settings = settings.model_copy(
        update={"allowed_guild_ids": [str(GUILD_ID)], "allowed_channel_ids": [str(CHANNEL_ID)]}
    )
    discord_ = await start_bot(settings)
    ignored = [
        discord_.ask(OTHER_BOT, "Are you a bot too?"),
        discord_.ask(BOT_USER, "Talking to myself?"),
        discord_.ask(ASKER, "Wrong guild?", channel=OTHER_GUILD_CHANNEL_ID, guild=OTHER_GUILD_ID),
        discord_.ask(ASKER, "Wrong channel?", channel=OTHER_CHANNEL_ID),
        discord_.ask(ASKER, "A DM, but only listed places are allowed", guild=None),
        discord_.say(ASKER, "@everyone lunch is here"),
    ]
    marker_id = discord_.ask(STRANGER, "Right place?")
    await discord_.first_reply(marker_id)
    await discord_.tap.request_from(STRANGER["id"])

    assert [request.question for request in discord_.tap.requests] == ["Right place?"]
    assert all(not fake_discord.replies_to(message_id) for message_id in ignored)
    assert len(fake_discord.posts()) == 1


async def test_closing_the_bot_stops_the_answers_it_still_shows(
    settings: Settings,
    start_bot: StartBot,  # noqa: F811  # the fixture imported above
    fake_discord: FakeDiscord,  # noqa: F811  # the fixture imported above
) -> None:
    discord_ = await start_bot(settings)  # no engine: the question stays queued
    question_id = discord_.ask(ASKER, "Anyone there?")
    request = await discord_.tap.request_from(ASKER["id"])
    first_id = await discord_.first_reply(question_id)
    await discord_.bot.close()
    await discord_.tap.until(lambda: bool(discord_.tap.cancels))

    assert [c.session_id for c in discord_.tap.cancels] == [request.session_id]
    assert discord_.shown(first_id).footer == "🛑 stopped"
    assert discord_.bot.is_closed()


# --- rate limits ------------------------------------------------------------------------------


async def test_a_429_is_waited_out_and_the_final_text_still_arrives(
    settings: Settings,
    start_bot: StartBot,  # noqa: F811  # the fixture imported above
    engine_for: StartEngine,  # noqa: F811  # the fixture imported above
    fake_discord: FakeDiscord,  # noqa: F811  # the fixture imported above
) -> None:
    settings = settings.model_copy(update={"max_tokens": 16})
    await engine_for(settings)
    discord_ = await start_bot(settings)
    retry_after_s = 0.5
    fake_discord.rate_limit("PATCH", r"/channels/\d+/messages/\d+$", retry_after_s)

    question_id = discord_.ask(ASKER, "What is the capital of France?")
    request = await discord_.tap.request_from(ASKER["id"])
    shown = await discord_.finished(await discord_.first_reply(question_id))
    done = (await discord_.tap.ending(request.session_id))[-1]

    limited = [c for c in fake_discord.calls if c.status == 429]
    assert len(limited) == 1
    retried = next(c for c in fake_discord.calls if c.method == "PATCH" and c.at > limited[0].at)
    assert retried.at - limited[0].at >= retry_after_s - 0.02
    assert isinstance(done, Done)
    assert shown.text == done.text
    assert shown.footer == "✅ done"
