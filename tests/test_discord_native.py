"""Discord's own controls under an answer, end to end (issue 18): the Stop button from the
placeholder on (queued, running, by a stranger, after a restart), 👍 / 👎 once done, and the
bot's words in the asker's locale.

As in tests/test_discord.py: a real discord.py client fed gateway payloads (a click is an
INTERACTION_CREATE of type 3 naming the button's custom id, with the message it is on, as the
fake keeps it), the fake of Discord's REST API, the real RabbitMQ and the real model.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import pytest
from aio_pika.abc import AbstractChannel, AbstractIncomingMessage

from bots.client import ConciergeClient
from bots.discord.adapter import ConciergeBot
from broker.amqp import Broker
from broker.protocol import Cancelled, Done, Feedback, decode_feedback, new_session_id
from config.settings import Settings
from config.texts import t
from tests import test_discord as base
from tests.fake_discord import (
    APP_ID,
    Call,
    FakeDiscord,
    click_payload,
    guild_payload,
    interaction_payload,
    message_payload,
)
from tests.helpers import WireTap
from tests.test_discord import (
    ASKER,
    CHANNEL_ID,
    DM_CHANNEL_ID,
    GUILD_ID,
    STRANGER,
    Harness,
    NamedBot,
    Restarted,
    StartBot,
    StartEngine,
    answering,
    log_in,
)

# The fixtures of tests/test_discord.py, used here as they are.
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
EPHEMERAL = 64
DEFERRED_UPDATE = 6  # the interaction callback that shows nothing new

_ids = itertools.count(1_500_000_000_000_000_000)


# --- clicking -----------------------------------------------------------------------------------


def button(fake: FakeDiscord, message_id: int, prefix: str) -> dict[str, Any]:
    """The message's button whose custom id starts with ``prefix``."""
    found = [b for b in fake.buttons(message_id) if b["custom_id"].startswith(prefix)]
    assert len(found) == 1, fake.buttons(message_id)
    return found[0]


def click(
    bot: ConciergeBot,
    user: dict[str, Any],
    message: dict[str, Any],
    custom_id: str,
    *,
    guild: int | None = GUILD_ID,
    roles: Sequence[int] = (),
    locale: str = "en-US",
) -> int:
    """``user`` clicks the button ``custom_id`` on ``message``; returns the interaction's id."""
    interaction_id = next(_ids)
    payload = click_payload(
        interaction_id, user, message, custom_id, guild_id=guild, roles=roles, locale=locale
    )
    bot._connection.parse_interaction_create(payload)  # type: ignore[arg-type]
    return interaction_id


async def told(fake: FakeDiscord, interaction_id: int) -> Call:
    """The ephemeral follow-up an interaction got (only its clicker sees it)."""
    path = f"/webhooks/{APP_ID}/token-{interaction_id}"
    call = await fake.wait_for(lambda c: c.method == "POST" and c.path == path)
    assert call.body["flags"] & EPHEMERAL
    return call


async def acknowledged(fake: FakeDiscord, interaction_id: int) -> Call:
    return await fake.wait_for(lambda c: c in fake.responses(interaction_id))


def stop_id(session_id: str, asker: dict[str, Any]) -> str:
    return f"concierge:stop:{session_id}:{asker['id']}"


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


# --- Stop -------------------------------------------------------------------------------------


async def test_a_queued_answer_has_stop_from_its_placeholder_and_the_askers_click_withdraws_it(
    settings: Settings, start_bot: StartBot, fake_discord: FakeDiscord
) -> None:
    discord_ = await start_bot(settings)  # no engine yet: the question waits in the queue
    question_id = discord_.ask(ASKER, "Anyone there?")
    request = await discord_.tap.request_from(ASKER["id"])
    placeholder_id = await discord_.first_reply(question_id)
    stop = button(fake_discord, placeholder_id, "concierge:stop:")
    placeholder = dict(fake_discord.messages[placeholder_id])  # as the asker sees it

    stranger = click(discord_.bot, STRANGER, placeholder, stop["custom_id"])
    refusal = await told(fake_discord, stranger)
    asker = click(discord_.bot, ASKER, placeholder, stop["custom_id"])
    shown = await discord_.finished(placeholder_id)
    await discord_.tap.until(lambda: bool(discord_.tap.cancels))

    assert stop["custom_id"] == stop_id(request.session_id, ASKER)
    assert (stop["label"], stop["emoji"]["name"]) == ("Stop", "🛑")
    assert base.split_footer(placeholder["content"])[1] == "⏳ queued · next up"
    assert refusal.body["content"] == t("stop.not_allowed", "en")
    assert [(c.session_id, c.user_id) for c in discord_.tap.cancels] == [
        (request.session_id, ASKER["id"])
    ]
    assert [c.body["type"] for c in fake_discord.responses(asker)] == [DEFERRED_UPDATE]
    assert shown.footer == "🛑 stopped"
    assert fake_discord.buttons(placeholder_id) == []

    # A click left on a stale copy of the button (a process gone before its last edit):
    # told the answer has ended, and the button is taken off.
    await discord_.let_go()
    fake_discord.messages[placeholder_id]["components"] = placeholder["components"]
    late = click(discord_.bot, ASKER, placeholder, stop["custom_id"])
    ended = await told(fake_discord, late)
    await fake_discord.wait_for(
        lambda c: c.method == "PATCH" and (c.body or {}).get("components") == [] and c.at > ended.at
    )
    assert ended.body["content"] == t("stop.already_ended", "en")
    assert fake_discord.buttons(placeholder_id) == []
    assert len(discord_.tap.cancels) == 1


async def test_a_click_on_a_stop_button_no_process_shows_stops_it_says_so_and_takes_it_off(
    settings: Settings, start_bot: StartBot, fake_discord: FakeDiscord
) -> None:
    """A button left by a process that stopped (an unnamed bot takes nothing over): nothing
    here will ever edit that message, so the click itself answers and clears it."""
    discord_ = await start_bot(settings)
    session_id = new_session_id()
    message = message_payload(next(_ids), CHANNEL_ID, base.BOT_USER, "An answer\n-# ✍️ writing…")
    message["components"] = [{"type": 1, "components": [_button(stop_id(session_id, ASKER))]}]
    fake_discord.add(message)

    clicked = click(discord_.bot, ASKER, message, stop_id(session_id, ASKER))
    stopping = await told(fake_discord, clicked)
    await fake_discord.wait_for(
        lambda c: c.method == "PATCH" and (c.body or {}).get("components") == []
    )
    await discord_.tap.until(lambda: bool(discord_.tap.cancels))  # the broker's copy, not ours

    assert stopping.body["content"] == t("stop.stopping", "en")
    assert [(c.session_id, c.user_id) for c in discord_.tap.cancels] == [(session_id, ASKER["id"])]
    assert fake_discord.buttons(int(message["id"])) == []


async def test_an_admins_click_stops_someone_elses_answer(
    settings: Settings, start_bot: StartBot, fake_discord: FakeDiscord
) -> None:
    discord_ = await start_bot(settings)  # no engine: the question waits
    question_id = discord_.ask(ASKER, "Anyone there?")
    request = await discord_.tap.request_from(ASKER["id"])
    placeholder_id = await discord_.first_reply(question_id)
    message = dict(fake_discord.messages[placeholder_id])
    stop = button(fake_discord, placeholder_id, "concierge:stop:")

    interaction_id = next(_ids)
    payload = click_payload(
        interaction_id,
        base.MANAGER,
        message,
        stop["custom_id"],
        guild_id=GUILD_ID,
        roles=[base.MANAGER_ROLE_ID],
        permissions=base.MANAGE_GUILD,
    )
    discord_.bot._connection.parse_interaction_create(payload)  # type: ignore[arg-type]
    shown = await discord_.finished(placeholder_id)
    await discord_.tap.until(lambda: bool(discord_.tap.cancels))

    assert [(c.session_id, c.user_id) for c in discord_.tap.cancels] == [
        (request.session_id, base.MANAGER["id"])
    ]
    assert [c.body["type"] for c in fake_discord.responses(interaction_id)] == [DEFERRED_UPDATE]
    assert shown.footer == "🛑 stopped"


async def test_a_running_answer_is_stopped_by_its_askers_click_and_not_by_a_strangers(
    settings: Settings, start_bot: StartBot, engine_for: StartEngine, fake_discord: FakeDiscord
) -> None:
    settings = settings.model_copy(update={"max_tokens": 400})
    await engine_for(settings)
    discord_ = await start_bot(settings)
    question_id = discord_.ask(ASKER, base.LONG_QUESTION)
    request = await discord_.tap.request_from(ASKER["id"])
    answer_id = await discord_.first_reply(question_id)
    await answering(discord_, answer_id)
    message = dict(fake_discord.messages[answer_id])
    stop = button(fake_discord, answer_id, "concierge:stop:")

    refusal = await told(fake_discord, click(discord_.bot, STRANGER, message, stop["custom_id"]))
    cancels_after_refusal = list(discord_.tap.cancels)
    click(discord_.bot, ASKER, message, stop["custom_id"])
    shown = await discord_.finished(answer_id)
    end = (await discord_.tap.ending(request.session_id))[-1]

    assert refusal.body["content"] == t("stop.not_allowed", "en")
    assert cancels_after_refusal == []
    assert [c.user_id for c in discord_.tap.cancels] == [ASKER["id"]]
    assert isinstance(end, Cancelled)
    assert 0 < end.tokens < 400
    assert shown.footer == "🛑 stopped"
    assert shown.text == end.text
    assert fake_discord.buttons(answer_id) == []


async def test_after_a_restart_the_old_messages_stop_button_still_stops_the_answer(
    restarted_mid_answer: Restarted, fake_discord: FakeDiscord
) -> None:
    harness, request = restarted_mid_answer.harness, restarted_mid_answer.request
    answer_id = restarted_mid_answer.answer_id
    message = dict(fake_discord.messages[answer_id])  # as the first process left it
    stop = button(fake_discord, answer_id, "concierge:stop:")
    client = harness.bot.concierge  # taken over (an event came): the click finds it here
    await harness.tap.until(lambda: client.sessions.get(request.session_id) is not None)

    clicked = click(harness.bot, ASKER, message, stop["custom_id"])
    shown = await harness.finished(answer_id)
    end = (await harness.tap.ending(request.session_id))[-1]
    await harness.tap.until(lambda: bool(harness.tap.cancels))

    assert stop["custom_id"] == stop_id(request.session_id, ASKER)
    assert [c.body["type"] for c in fake_discord.responses(clicked)] == [DEFERRED_UPDATE]
    assert [(c.session_id, c.user_id) for c in harness.tap.cancels] == [
        (request.session_id, ASKER["id"])
    ]
    assert isinstance(end, Cancelled)
    assert end.tokens < 400
    assert shown.message_ids[0] == answer_id
    assert shown.footer == "🛑 stopped"
    assert fake_discord.buttons(answer_id) == []


async def test_after_a_restart_a_queued_answers_button_withdraws_it_before_any_event_came(
    settings: Settings,
    named_bots: Callable[[], Awaitable[NamedBot]],
    engine_for: StartEngine,
    broker: Broker,
    fake_discord: FakeDiscord,
) -> None:
    """The new process knows nothing of the answer yet (it waits behind another): the
    button's own id says which session to cancel, and for whom."""
    await engine_for(settings.model_copy(update={"max_tokens": 400}))
    tap = await WireTap.open(broker, "discord-main")
    first = await named_bots()
    before = Harness(first.bot, fake_discord, tap)
    running_question = before.ask(STRANGER, base.LONG_QUESTION)
    running = await tap.request_from(STRANGER["id"])
    running_id = await before.first_reply(running_question)
    await answering(before, running_id)
    queued_question = before.ask(ASKER, "And what about dogs?")
    queued = await tap.request_from(ASKER["id"])
    queued_id = await before.first_reply(queued_question)
    await first.stop()
    second = await named_bots()
    after = Harness(second.bot, fake_discord, tap)
    unknown = second.bot.answers.find_session(queued.session_id) is None

    queued_message = dict(fake_discord.messages[queued_id])
    click(second.bot, ASKER, queued_message, stop_id(queued.session_id, ASKER))
    await tap.until(lambda: any(c.session_id == queued.session_id for c in tap.cancels))
    running_message = dict(fake_discord.messages[running_id])  # let the engine get to it
    click(second.bot, STRANGER, running_message, stop_id(running.session_id, STRANGER))
    shown = await after.finished(queued_id)
    events = await tap.ending(queued.session_id)

    assert unknown
    assert (tap.cancels[0].session_id, tap.cancels[0].user_id) == (queued.session_id, ASKER["id"])
    assert [type(event) for event in events] == [Cancelled]  # never started
    assert shown.message_ids == [queued_id]
    assert shown.footer == "🛑 stopped"
    assert fake_discord.buttons(queued_id) == []


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


def _button(custom_id: str) -> dict[str, Any]:
    return {"type": 2, "style": 2, "custom_id": custom_id, "emoji": {"id": None, "name": "👍"}}


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
