"""Discord's own controls end to end: votes on a done answer, and the asker's locale."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from aio_pika.abc import AbstractChannel, AbstractIncomingMessage

from bots.client import ConciergeClient
from bots.discord.adapter import ConciergeBot
from broker.amqp import Broker
from broker.protocol import Done, Feedback, decode_feedback
from config.settings import Settings
from config.texts import t
from tests import discord_fixture as base
from tests.discord_fixture import (
    ASKER,
    CHANNEL_ID,
    DM_CHANNEL_ID,
    GUILD_ID,
    STRANGER,
    StartBot,
    StartEngine,
    log_in,
)
from tests.discord_native_helpers import (
    DEFERRED_UPDATE,
    EPHEMERAL,
    _button,
    _ids,
    button,
    click,
    told,
)
from tests.fake_discord import FakeDiscord
from tests.fake_discord_wire import Call, guild_payload, interaction_payload, message_payload

# The fixtures of tests/discord_fixture.py, used here as they are.
fake_discord = base.fake_discord
engine_for = base.engine_for
start_bot = base.start_bot
named_bots = base.named_bots
restarted_mid_answer = base.restarted_mid_answer

JA_GUILD_ID = 1_000_000_000_000_000_111  # a Community server whose language is Japanese
JA_CHANNEL_ID = 1_000_000_000_000_000_211
EN_GUILD_ID = 1_000_000_000_000_000_112  # a Community server whose language is English
EN_CHANNEL_ID = 1_000_000_000_000_000_212
COMMUNITY = ["COMMUNITY", "NEWS"]


async def acknowledged(fake: FakeDiscord, interaction_id: int) -> Call:
    return await fake.wait_for(lambda c: c in fake.responses(interaction_id))


class FeedbackTap:
    """Copies of the votes the bots publish, from a queue of its own bound to the feedback
    exchange (a fanout: the engines' shared queue still gets each)."""

    def __init__(self, channel: AbstractChannel) -> None:
        self.channel = channel
        self.votes: list[Feedback] = []
        self._changed = asyncio.Condition()

    @classmethod
    async def open(cls, broker: Broker) -> FeedbackTap:
        tap = cls(await broker.connection.channel())
        queue = await tap.channel.declare_queue(exclusive=True, auto_delete=True)
        await queue.bind(broker.names.feedback_exchange)
        await queue.consume(tap._on_vote, no_ack=True)
        return tap

    async def _on_vote(self, message: AbstractIncomingMessage) -> None:
        async with self._changed:
            self.votes.append(decode_feedback(message.body, message.content_type))
            self._changed.notify_all()

    async def count(self, n: int) -> list[Feedback]:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: len(self.votes) >= n), 30)
        return self.votes


@pytest.fixture
async def feedback_tap(broker: Broker) -> AsyncIterator[FeedbackTap]:
    tap = await FeedbackTap.open(broker)
    yield tap
    await tap.channel.close()


# --- votes ------------------------------------------------------------------------------------


async def test_a_done_answer_trades_stop_for_votes_and_each_click_is_a_changeable_vote(
    settings: Settings,
    start_bot: StartBot,
    engine_for: StartEngine,
    fake_discord: FakeDiscord,
    feedback_tap: FeedbackTap,
) -> None:
    settings = settings.model_copy(update={"max_tokens": 8})
    await engine_for(settings)
    discord_ = await start_bot(settings)
    question_id = discord_.ask(ASKER, "What is the capital of France?")
    request = await discord_.tap.request_from(ASKER["id"])
    answer_id = await discord_.first_reply(question_id)
    placeholder_buttons = fake_discord.replies_to(question_id)[0].body["components"]
    shown = await discord_.finished(answer_id)
    done = (await discord_.tap.ending(request.session_id))[-1]
    message = dict(fake_discord.messages[answer_id])
    vote = f"concierge:vote:{request.session_id}"
    up, down = (
        button(fake_discord, answer_id, f"{vote}:up"),
        button(fake_discord, answer_id, f"{vote}:down"),
    )

    first = click(discord_.bot, STRANGER, message, up["custom_id"])
    thanks_up = await told(fake_discord, first)
    await feedback_tap.count(1)
    second = click(discord_.bot, STRANGER, message, down["custom_id"], locale="ja")
    thanks_down = await told(fake_discord, second)
    votes = await feedback_tap.count(2)

    assert isinstance(done, Done)
    assert shown.footer == "✅ done"
    assert placeholder_buttons[0]["components"][0]["custom_id"].startswith("concierge:stop:")
    assert [(b["custom_id"], b["emoji"]["name"]) for b in fake_discord.buttons(answer_id)] == [
        (f"concierge:vote:{request.session_id}:up", "👍"),
        (f"concierge:vote:{request.session_id}:down", "👎"),
    ]
    assert [(v.session_id, v.user_id, v.vote) for v in votes] == [
        (request.session_id, STRANGER["id"], "up"),
        (request.session_id, STRANGER["id"], "down"),
    ]
    assert {v.platform for v in votes} == {discord_.bot.concierge.platform}
    assert thanks_up.body["content"] == t("vote.thanks_up", "en")
    assert thanks_down.body["content"] == t("vote.thanks_down", "ja")  # the clicker's locale
    assert fake_discord.responses(first)[0].body["type"] == DEFERRED_UPDATE


async def test_a_vote_the_broker_cannot_take_is_answered_with_a_word_not_a_traceback(
    settings: Settings, fake_discord: FakeDiscord
) -> None:
    concierge = ConciergeClient(settings, "discord")  # never connected: every publish fails
    bot = ConciergeBot(settings, concierge, guild_ready_timeout=0.05)
    try:
        await log_in(bot)
        message = message_payload(next(_ids), CHANNEL_ID, base.BOT_USER, "An answer\n-# ✅ done")
        vote_id = "concierge:vote:0123456789abcdef:up"
        message["components"] = [{"type": 1, "components": [_button(vote_id)]}]
        fake_discord.add(message)
        clicked = click(bot, ASKER, message, vote_id)
        failed = await told(fake_discord, clicked)
    finally:
        await bot.close()

    assert failed.body["content"] == t("vote.failed", "en")


# --- locale -----------------------------------------------------------------------------------


async def test_the_bot_speaks_the_askers_locale_interaction_then_community_guild_then_setting(
    settings: Settings, start_bot: StartBot, fake_discord: FakeDiscord
) -> None:
    """A server's language counts only for a Community server: any other reports en-US
    whatever its members speak (GUILD_ID here), so there the setting (Japanese) holds."""
    settings = settings.model_copy(update={"locale": "ja"})
    discord_ = await start_bot(settings)  # no engine: answers stay queued
    state = discord_.bot._connection
    for guild_id, channel_id, language in (
        (JA_GUILD_ID, JA_CHANNEL_ID, "ja"),
        (EN_GUILD_ID, EN_CHANNEL_ID, "en-US"),
    ):
        guild = guild_payload(guild_id, [channel_id], preferred_locale=language, features=COMMUNITY)
        state.parse_guild_create(guild)  # type: ignore[arg-type]
    ja_question = discord_.ask(ASKER, "保証は", channel=JA_CHANNEL_ID, guild=JA_GUILD_ID)
    en_question = discord_.ask(STRANGER, "Warranty?", channel=EN_CHANNEL_ID, guild=EN_GUILD_ID)
    plain_question = discord_.ask(base.MANAGER, "Plain?")  # not a Community server: the setting
    discord_.ask(base.ADMIN, "DM?", channel=DM_CHANNEL_ID, guild=None)
    plain_help = discord_.say(base.OPERATOR, f"<@{base.BOT_ID}>", mentions=[base.BOT_USER])
    en_help = discord_.say(
        base.OPERATOR,
        f"<@{base.BOT_ID}>",
        mentions=[base.BOT_USER],
        channel=EN_CHANNEL_ID,
        guild=EN_GUILD_ID,
    )
    ja_answer = await discord_.first_reply(ja_question)
    en_answer = await discord_.first_reply(en_question)
    plain_answer = await discord_.first_reply(plain_question)
    await discord_.tap.until(lambda: len(discord_.tap.requests) == 4)
    dm_call = await fake_discord.wait_for(
        lambda c: c.method == "POST" and c.path == f"/channels/{DM_CHANNEL_ID}/messages"
    )
    plain_help_reply = await fake_discord.wait_for(
        lambda c: c in fake_discord.replies_to(plain_help)
    )
    en_help_reply = await fake_discord.wait_for(lambda c: c in fake_discord.replies_to(en_help))

    ja_message = dict(fake_discord.messages[ja_answer])
    stop = button(fake_discord, ja_answer, "concierge:stop:")
    refused = click(
        discord_.bot, STRANGER, ja_message, stop["custom_id"], guild=JA_GUILD_ID, locale="ja"
    )
    refusal = await told(fake_discord, refused)
    en_message = dict(fake_discord.messages[en_answer])
    en_stop = button(fake_discord, en_answer, "concierge:stop:")
    french = click(  # a language of neither: the server's
        discord_.bot, ASKER, en_message, en_stop["custom_id"], guild=EN_GUILD_ID, locale="fr"
    )
    french_refusal = await told(fake_discord, french)
    where = {"guild_id": GUILD_ID, "channel_id": CHANNEL_ID, "permissions": 0}
    slash = interaction_payload(next(_ids), "rescrape", STRANGER, locale="en-US", **where)
    state.parse_interaction_create(slash)  # type: ignore[arg-type]
    not_admin = await acknowledged(fake_discord, int(slash["id"]))
    click(discord_.bot, ASKER, ja_message, stop["custom_id"], guild=JA_GUILD_ID, locale="ja")
    stopped = await discord_.finished(ja_answer)

    def footer(message_id: int) -> str:
        return base.split_footer(fake_discord.messages[message_id]["content"])[1]

    locales = {r.question: r.locale for r in discord_.tap.requests}
    assert locales == {"保証は": "ja", "Warranty?": "en", "Plain?": "ja", "DM?": "ja"}
    assert footer(ja_answer) == stopped.footer == t("status.stopped", "ja")
    assert footer(en_answer).startswith("⏳ queued")
    assert footer(plain_answer).startswith("⏳ 順番待ち")
    assert base.split_footer(dm_call.body["content"])[1].startswith("⏳ 順番待ち")
    assert stop["label"] == t("stop.button", "ja")
    assert en_stop["label"] == "Stop"
    assert button(fake_discord, plain_answer, "concierge:stop:")["label"] == t("stop.button", "ja")
    assert plain_help_reply.body["content"] == discord_.bot.help_text("ja")
    assert en_help_reply.body["content"] == discord_.bot.help_text("en")
    assert refusal.body["content"] == t("stop.not_allowed", "ja")
    assert french_refusal.body["content"] == t("stop.not_allowed", "en")
    assert not_admin.body["data"]["content"] == t("refusal.not_admin", "en")  # the user's
    assert not_admin.body["data"]["flags"] == EPHEMERAL
    rescrape = next(c for c in fake_discord.commands if c["name"] == "rescrape")
    assert rescrape["description_localizations"] == {"ja": t("discord.rescrape_description", "ja")}
