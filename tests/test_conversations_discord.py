"""Follow-up questions on Discord: reply chains and threads reach the engine as history."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import discord
import pytest

from bots.client import ConciergeClient
from bots.discord.adapter import ConciergeBot
from bots.discord.history import split_status as discord_split_status
from bots.history import STOPPED_MARK
from broker.amqp import Broker
from broker.protocol import Done, Request
from config.settings import Settings
from tests.conftest import LONG_QUESTION, start_engine
from tests.conversations_helpers import (
    SOURCES,
    _ids,
    engine_running,  # noqa: F401  # the fixture
    turns,
)
from tests.fake_discord import FakeDiscord, start
from tests.fake_discord_wire import (
    BOT_ID,
    BOT_USER,
    guild_payload,
    message_payload,
    reaction_payload,
    ready_payload,
    thread_payload,
    user_payload,
)
from tests.helpers import WireTap

# --- Discord ----------------------------------------------------------------------------------

GUILD_ID = 1_000_000_000_000_000_111
CHANNEL_ID = 1_000_000_000_000_000_211
THREAD_ID = 1_000_000_000_000_000_212  # a thread opened on its own (no message has its id)
CHATTY_THREAD_ID = 1_000_000_000_000_000_213  # began with people talking, not with the bot
ANN = user_payload(1_000_000_000_000_000_411, "ann")
BOB = user_payload(1_000_000_000_000_000_412, "bob")
DONE_FOOTER = "\n-# ✅ done"


@dataclass
class Discord:
    """The bot under test, the fake it talks to, and a tap on the broker."""

    bot: ConciergeBot
    fake: FakeDiscord
    tap: WireTap

    def lay(
        self,
        author: dict[str, Any],
        content: str,
        *,
        reply_to: int | None = None,
        channel: int = CHANNEL_ID,
        mention: bool = False,
    ) -> dict[str, Any]:
        """A message Discord keeps (said before the bot started, or the bot's own)."""
        reference, referenced = None, None
        if reply_to is not None:
            parent = self.fake.messages[reply_to]  # sent along one level deep, as Discord does
            referenced = {k: v for k, v in parent.items() if k != "referenced_message"}
            reference = {"message_id": str(reply_to), "channel_id": parent["channel_id"]}
        payload = message_payload(
            next(_ids),
            channel,
            author,
            f"<@{BOT_ID}> {content}" if mention else content,
            guild_id=None if author is BOT_USER else GUILD_ID,
            mentions=[BOT_USER] if mention else [],
            reference=reference,
            referenced_message=referenced,
        )
        self.fake.add(payload)
        return payload

    def say(self, author: dict[str, Any], content: str, **how: Any) -> int:
        """A message said now: Discord keeps it and sends it to the bot."""
        payload = self.lay(author, content, **how)
        self.bot._connection.parse_message_create(payload)  # type: ignore[arg-type]
        return int(payload["id"])

    async def answer_to(self, question_id: int) -> list[int]:
        """The answer's messages, once it shows its end (a final status, no Stop button)."""
        first = await self.fake.wait_for(lambda c: c in self.fake.replies_to(question_id))
        return await self.fake.until_ended(int(first.response["id"]))

    async def request(self, number: int) -> Request:
        """The ``number``-th request (from 1) the bot sent."""
        await self.tap.until(lambda: len(self.tap.requests) >= number)
        return self.tap.requests[number - 1]

    async def done(self, request: Request) -> Done:
        done = (await self.tap.ending(request.session_id))[-1]
        assert isinstance(done, Done), done
        return done


@pytest.fixture
async def fake_discord(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    fake = FakeDiscord()
    server = await start(fake)
    monkeypatch.setattr(discord.http.Route, "BASE", fake.base)
    yield fake
    await server.close()


@pytest.fixture
async def discord_bot(
    settings: Settings, client: ConciergeClient, broker: Broker, fake_discord: FakeDiscord
) -> AsyncIterator[Discord]:
    """The real bot, logged in against the fake, in a guild with a channel and two threads."""
    tap = await WireTap.open(broker, client.bot_id)
    bot = ConciergeBot(settings, client, guild_ready_timeout=0.05, answer_max_chars=60)
    await bot.login("fake-token")
    bot._connection.parse_ready(ready_payload())  # type: ignore[arg-type]
    threads = [thread_payload(t, GUILD_ID, CHANNEL_ID) for t in (THREAD_ID, CHATTY_THREAD_ID)]
    bot._connection.parse_guild_create(guild_payload(GUILD_ID, [CHANNEL_ID], threads=threads))  # type: ignore[arg-type]
    await bot.wait_until_ready()
    yield Discord(bot, fake_discord, tap)
    await bot.close()
    await tap.channel.close()


def said_by_bot(discord_: Discord, message_ids: list[int]) -> str:
    """The answer's text as its messages show it (the status line taken off the last)."""
    contents = [discord_.fake.messages[message_id]["content"] for message_id in message_ids]
    return "".join(contents[:-1]) + discord_split_status(contents[-1])[0]


async def test_replies_to_the_bots_answers_carry_the_whole_chain_in_order(
    discord_bot: Discord,
    engine_running: None,  # noqa: F811  # the fixture imported above
) -> None:
    d = discord_bot
    first = d.say(ANN, "What are the office hours?", mention=True)
    answer = await d.answer_to(first)
    second = d.say(ANN, "And on Sundays?", reply_to=answer[-1])  # no mention: a reply is enough
    second_answer = await d.answer_to(second)
    d.say(ANN, "Thanks. Where is the office?", reply_to=second_answer[-1])

    requests = [await d.request(n) for n in (1, 2, 3)]
    dones = [await d.done(request) for request in requests[:2]]
    assert [r.question for r in requests] == [
        "What are the office hours?",
        "And on Sundays?",
        "Thanks. Where is the office?",
    ]
    assert requests[0].history == ()
    assert len(answer) > 1 and len(second_answer) > 1  # each answer took several messages
    assert requests[2].history == turns(
        ("user", "What are the office hours?"),
        ("assistant", dones[0].text.rstrip()),
        ("user", "And on Sundays?"),
        ("assistant", dones[1].text.rstrip()),
    )
    assert requests[1].history == requests[2].history[:2]
    assert said_by_bot(d, answer) == dones[0].text


async def test_someone_elses_reply_in_the_chain_is_named(discord_bot: Discord) -> None:
    d = discord_bot
    question = d.lay(ANN, "Is the museum open today?", mention=True)
    answer = d.lay(
        BOT_USER, "Yes, until 18:00." + SOURCES + DONE_FOOTER, reply_to=int(question["id"])
    )
    aside = d.lay(BOB, "Is it free?", reply_to=int(answer["id"]))
    answer_2 = d.lay(BOT_USER, "No, 12 €." + DONE_FOOTER, reply_to=int(aside["id"]))
    d.say(ANN, "And for children?", reply_to=int(answer_2["id"]))

    request = await d.request(1)
    assert request.history == turns(
        ("user", "ann: Is the museum open today?"),
        ("assistant", "Yes, until 18:00."),
        ("user", "bob: Is it free?"),
        ("assistant", "No, 12 €."),
    )


async def test_a_chain_longer_than_the_cap_keeps_its_turns_on_the_grid_and_the_answer_says_so(
    settings: Settings, client: ConciergeClient, broker: Broker, fake_discord: FakeDiscord,
    backend: Any,
) -> None:  # fmt: skip
    settings = settings.model_copy(update={"history_max_messages": 8})
    engine = await start_engine(settings, backend)
    tap = await WireTap.open(broker, client.bot_id)
    bot = ConciergeBot(settings, client, guild_ready_timeout=0.05)
    await bot.login("fake-token")
    bot._connection.parse_ready(ready_payload())  # type: ignore[arg-type]
    bot._connection.parse_guild_create(guild_payload(GUILD_ID, [CHANNEL_ID]))  # type: ignore[arg-type]
    d = Discord(bot, fake_discord, tap)
    try:
        last: int | None = None
        for n in range(1, 6):  # five questions and their answers, each replying to the one before
            asked = d.lay(ANN, f"Question {n}?", reply_to=last, mention=n == 1)
            last = int(
                d.lay(BOT_USER, f"Answer {n}." + DONE_FOOTER, reply_to=int(asked["id"]))["id"]
            )
        question = d.say(ANN, "Question 6?", reply_to=last)
        request = await d.request(1)
        answer = await d.answer_to(question)
        done = await d.done(request)
    finally:
        await bot.close()
        await tap.channel.close()
        await engine.stop()

    # 10 turns, at most 8, a block of 4: the first 4 go, not 2 (bots/history.py)
    assert request.history == turns(
        *[
            pair
            for n in (3, 4, 5)
            for pair in (("user", f"Question {n}?"), ("assistant", f"Answer {n}."))
        ]
    )
    assert done.history_dropped == 0
    footer = discord_split_status(fake_discord.messages[answer[-1]]["content"])[1]
    assert footer == "✅ done · only the last 6 messages were used"  # the number sent, not 8
    # read back to the chain's first message, which the grid counts from: each GET brings
    # the message it replies to along
    assert len(fake_discord.reads()) == 5


async def test_a_stopped_answer_is_in_the_history_as_far_as_it_went(
    settings: Settings, client: ConciergeClient, broker: Broker, fake_discord: FakeDiscord,
    backend: Any,
) -> None:  # fmt: skip
    engine = await start_engine(settings.model_copy(update={"max_tokens": 400}), backend)
    tap = await WireTap.open(broker, client.bot_id)
    bot = ConciergeBot(settings, client, guild_ready_timeout=0.05)
    await bot.login("fake-token")
    bot._connection.parse_ready(ready_payload())  # type: ignore[arg-type]
    bot._connection.parse_guild_create(guild_payload(GUILD_ID, [CHANNEL_ID]))  # type: ignore[arg-type]
    d = Discord(bot, fake_discord, tap)
    try:
        question = d.say(ANN, LONG_QUESTION, mention=True)
        first = await fake_discord.wait_for(lambda c: c in fake_discord.replies_to(question))
        first_id = int(first.response["id"])
        await fake_discord.wait_for(  # some of the answer shows
            lambda c: (
                c in fake_discord.edits(first_id)
                and discord_split_status(c.body["content"])[0] != ""
            )
        )
        stop = reaction_payload(ANN, CHANNEL_ID, first_id, guild_id=GUILD_ID)
        bot._connection.parse_message_reaction_add(stop)  # type: ignore[arg-type]
        answer = await d.answer_to(question)
        shown = said_by_bot(d, answer)
        d.say(ANN, "Go on, please.", reply_to=answer[-1])
        follow_up = await d.request(2)
    finally:
        await bot.close()
        await tap.channel.close()
        await engine.stop()

    assert discord_split_status(fake_discord.messages[answer[-1]]["content"])[1] == "🛑 stopped"
    assert shown
    assert follow_up.history == turns(
        ("user", LONG_QUESTION), ("assistant", shown.rstrip() + STOPPED_MARK)
    )


async def test_a_thread_that_began_with_a_question_to_the_bot_is_its_conversation(
    discord_bot: Discord,
) -> None:
    d = discord_bot
    question = d.lay(ANN, "Can I bring my dog?", channel=THREAD_ID, mention=True)
    d.lay(
        BOT_USER, "Yes, on a leash." + DONE_FOOTER, channel=THREAD_ID, reply_to=int(question["id"])
    )
    d.lay(BOB, "Mine too?", channel=THREAD_ID, mention=True)
    d.say(ANN, "Where can it drink?", channel=THREAD_ID, mention=True)  # not a reply
    d.lay(BOB, "Good morning all", channel=CHATTY_THREAD_ID)
    d.say(ANN, "When do you open?", channel=CHATTY_THREAD_ID, mention=True)

    in_thread, in_chatty_thread = await d.request(1), await d.request(2)
    assert in_thread.history == turns(
        ("user", "ann: Can I bring my dog?"),
        ("assistant", "Yes, on a leash."),
        ("user", "bob: Mine too?"),
    )
    assert in_chatty_thread.question == "When do you open?"
    assert in_chatty_thread.history == ()


async def test_a_thread_opened_on_the_bots_answer_continues_that_answers_conversation(
    discord_bot: Discord,
) -> None:
    d = discord_bot
    question = d.lay(ANN, "Where do I park?", mention=True)
    answer = d.lay(BOT_USER, "Behind the hall." + DONE_FOOTER, reply_to=int(question["id"]))
    thread_id = int(answer["id"])  # Discord gives a thread opened on a message that message's id
    thread = thread_payload(thread_id, GUILD_ID, CHANNEL_ID)
    d.bot._connection.parse_thread_create(thread)  # type: ignore[arg-type]
    d.say(ANN, "Is it free?", channel=thread_id, mention=True)

    request = await d.request(1)
    assert request.history == turns(("user", "Where do I park?"), ("assistant", "Behind the hall."))


async def test_with_conversations_off_every_question_stands_alone(
    settings: Settings, client: ConciergeClient, broker: Broker, fake_discord: FakeDiscord
) -> None:
    tap = await WireTap.open(broker, client.bot_id)
    off = settings.model_copy(update={"history_max_messages": 0})
    bot = ConciergeBot(off, client, guild_ready_timeout=0.05)
    await bot.login("fake-token")
    bot._connection.parse_ready(ready_payload())  # type: ignore[arg-type]
    bot._connection.parse_guild_create(guild_payload(GUILD_ID, [CHANNEL_ID]))  # type: ignore[arg-type]
    d = Discord(bot, fake_discord, tap)
    try:
        question = d.lay(ANN, "Where do I park?", mention=True)
        answer = d.lay(BOT_USER, "Behind the hall." + DONE_FOOTER, reply_to=int(question["id"]))
        d.say(ANN, "Is it free?", reply_to=int(answer["id"]))
        request = await d.request(1)
    finally:
        await bot.close()
        await tap.channel.close()

    assert request.question == "Is it free?"  # a reply to the bot still asks it
    assert request.history == ()
    assert fake_discord.reads() == []
