"""The Discord adapter end to end: a real discord.py client fed gateway events, a local fake of
Discord's REST API (tests/fake_discord.py), the real RabbitMQ and the real model.

What reaches Discord is read from the fake; what reaches the broker is read by a tap: a queue
of its own bound to the same exchanges, so the tests see the requests, cancels and replies
that really went over the wire.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import discord
import pytest

from bots.client import ConciergeClient
from bots.discord.adapter import ConciergeBot
from bots.discord.app import run_discord
from bots.discord.sink import ANSWER_MAX_CHARS, DISCORD_MAX_CHARS, message_text
from bots.renderer import MessageContent
from broker.amqp import Broker
from broker.protocol import (
    TERMINAL_TYPES,
    Cancelled,
    Done,
    Progress,
    ReplyEvent,
    Request,
    Started,
)
from config.settings import ConfigError, Settings
from config.texts import t
from engine.backends.base import Backend
from tests.conftest import LONG_QUESTION, RunningEngine, start_engine
from tests.fake_discord import (
    BOT_ID,
    BOT_USER,
    Call,
    FakeDiscord,
    guild_payload,
    interaction_payload,
    message_payload,
    reaction_payload,
    ready_payload,
    role_payload,
    start,
    user_payload,
)
from tests.helpers import WireTap
from tests.site_fixture import FakeSite

GUILD_ID = 1_000_000_000_000_000_101
OTHER_GUILD_ID = 1_000_000_000_000_000_102
CHANNEL_ID = 1_000_000_000_000_000_201
OTHER_CHANNEL_ID = 1_000_000_000_000_000_202
OTHER_GUILD_CHANNEL_ID = 1_000_000_000_000_000_203
DM_CHANNEL_ID = 1_000_000_000_000_000_204
MANAGER_ROLE_ID = 1_000_000_000_000_000_301
MANAGE_GUILD = 1 << 5
ADMINISTRATOR = 1 << 3

ASKER = user_payload(1_000_000_000_000_000_401, "asker")
STRANGER = user_payload(1_000_000_000_000_000_402, "stranger")
MANAGER = user_payload(1_000_000_000_000_000_403, "manager")  # has the Manage Server role
ADMIN = user_payload(1_000_000_000_000_000_404, "admin")
OTHER_BOT = user_payload(1_000_000_000_000_000_405, "otherbot", bot=True)
OPERATOR = user_payload(1_000_000_000_000_000_406, "operator")  # in admin_user_ids, no role

_ids = itertools.count(1_400_000_000_000_000_000)


# --- driving the bot --------------------------------------------------------------------------


@dataclass(frozen=True)
class Shown:
    """An answer as Discord shows it: its message ids, the text across them, the last footer."""

    message_ids: list[int]
    text: str
    footer: str


def split_footer(content: str) -> tuple[str, str]:
    """A message's body and its small-text footer line ("" when it has none)."""
    if content.startswith("-# ") and "\n" not in content:
        return "", content[3:]
    body, marker, footer = content.rpartition("\n-# ")
    return (body, footer) if marker else (content, "")


@dataclass
class Harness:
    """The bot under test, what it sent to Discord, and what crossed the broker."""

    bot: ConciergeBot
    fake: FakeDiscord
    tap: WireTap

    def say(
        self,
        author: dict[str, Any],
        content: str,
        *,
        channel: int = CHANNEL_ID,
        guild: int | None = GUILD_ID,
        mentions: Sequence[dict[str, Any]] = (),
    ) -> int:
        message_id = next(_ids)
        payload = message_payload(
            message_id, channel, author, content, guild_id=guild, mentions=mentions
        )
        self.bot._connection.parse_message_create(payload)  # type: ignore[arg-type]
        return message_id

    def ask(self, author: dict[str, Any], question: str, **where: Any) -> int:
        return self.say(author, f"<@{BOT_ID}> {question}", mentions=[BOT_USER], **where)

    def react(self, user: dict[str, Any], message_id: int, roles: Sequence[int] = ()) -> None:
        payload = reaction_payload(user, CHANNEL_ID, message_id, guild_id=GUILD_ID, roles=roles)
        self.bot._connection.parse_message_reaction_add(payload)  # type: ignore[arg-type]

    def slash(self, command: str, user: dict[str, Any], permissions: int) -> float:
        """Run ``command`` as ``user``; returns when (monotonic clock) it was sent."""
        where = {"guild_id": GUILD_ID, "channel_id": CHANNEL_ID}
        payload = interaction_payload(next(_ids), command, user, permissions=permissions, **where)
        sent_at = time.monotonic()
        self.bot._connection.parse_interaction_create(payload)  # type: ignore[arg-type]
        return sent_at

    async def first_reply(self, question_id: int) -> int:
        call = await self.fake.wait_for(lambda c: c in self.fake.replies_to(question_id))
        return int(call.response["id"])

    async def finished(self, first_id: int) -> Shown:
        """What the answer shows once it shows its end: a final status, no Stop button."""
        await self.fake.until_ended(first_id)
        return self.shown(first_id)

    async def let_go(self) -> None:
        """Until the bot is done with every answer it shows (each one's task has ended: the
        final edit is not the last thing it does)."""
        await asyncio.wait_for(asyncio.gather(*self.bot.answers._tasks), 60)

    def shown(self, first_id: int) -> Shown:
        chain = self.fake.chain(first_id)
        contents = [self.fake.messages[message_id]["content"] for message_id in chain]
        body, footer = split_footer(contents[-1])
        return Shown(chain, "".join(contents[:-1]) + body, footer)


StartBot = Callable[..., Awaitable[Harness]]
StartEngine = Callable[[Settings], Awaitable[RunningEngine]]


@pytest.fixture
async def fake_discord(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    fake = FakeDiscord()
    server = await start(fake)
    monkeypatch.setattr(discord.http.Route, "BASE", fake.base)
    yield fake
    await server.close()


@pytest.fixture
async def engine_for(
    backend: Backend, broker: Broker, tmp_path: Path
) -> AsyncIterator[StartEngine]:
    """Starts the real engine with a test's own settings (its votes kept in ``tmp_path``);
    stops it afterwards."""
    engines: list[RunningEngine] = []

    async def start_with(settings: Settings) -> RunningEngine:
        settings = settings.model_copy(update={"feedback_path": tmp_path / "feedback.sqlite3"})
        engines.append(await start_engine(settings, backend))
        return engines[-1]

    yield start_with
    for engine in engines:
        await engine.stop()


async def log_in(bot: ConciergeBot) -> None:
    """Log ``bot`` in against the fake and feed it READY and the guilds."""
    if bot.http.token is None:
        await bot.login("fake-token")
    state = bot._connection
    state.parse_ready(ready_payload())  # type: ignore[arg-type]
    manager = role_payload(MANAGER_ROLE_ID, "managers", MANAGE_GUILD)
    guild = guild_payload(GUILD_ID, [CHANNEL_ID, OTHER_CHANNEL_ID], roles=[manager])
    state.parse_guild_create(guild)  # type: ignore[arg-type]
    state.parse_guild_create(guild_payload(OTHER_GUILD_ID, [OTHER_GUILD_CHANNEL_ID]))  # type: ignore[arg-type]
    await asyncio.wait_for(bot.wait_until_ready(), 5)


@pytest.fixture
async def start_bot(
    client: ConciergeClient, broker: Broker, fake_discord: FakeDiscord, engine_for: StartEngine
) -> AsyncIterator[StartBot]:
    """Logs a bot in against the fake, sends READY and the guilds; closes it afterwards."""
    started: list[Harness] = []

    async def start_with(settings: Settings, **options: Any) -> Harness:
        tap = await WireTap.open(broker, client.bot_id)
        bot = ConciergeBot(settings, client, guild_ready_timeout=0.05, **options)
        await log_in(bot)
        started.append(Harness(bot, fake_discord, tap))
        return started[-1]

    yield start_with
    for harness in started:
        await harness.bot.close()
        await harness.tap.channel.close()


# --- questions and answers --------------------------------------------------------------------


async def test_a_mention_is_answered_in_place_with_throttled_edits(
    settings: Settings,
    start_bot: StartBot,
    engine_for: StartEngine,
    fake_discord: FakeDiscord,
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
    assert min(gaps) >= interval_s * 0.8, gaps  # a little slack for HTTP jitter
    sent = [
        call
        for call in fake_discord.calls
        if call.method in ("POST", "PATCH") and "/messages" in call.path  # not /commands
    ]
    assert sent and all(call.body["allowed_mentions"] == {"parse": []} for call in sent)
    assert not any("/reactions/" in c.path for c in fake_discord.calls)  # no 🛑 of its own


async def test_a_long_answer_continues_in_chained_replies_and_loses_nothing(
    settings: Settings, start_bot: StartBot, engine_for: StartEngine, fake_discord: FakeDiscord
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
    settings: Settings, start_bot: StartBot, fake_discord: FakeDiscord
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
    settings: Settings, start_bot: StartBot, fake_discord: FakeDiscord, client: ConciergeClient
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
    settings: Settings, start_bot: StartBot, fake_discord: FakeDiscord
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
    settings: Settings, start_bot: StartBot, fake_discord: FakeDiscord
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


# --- stopping -----------------------------------------------------------------------------


async def answering(discord_: Harness, first_id: int) -> None:
    """Wait until the answer shows some generated text."""

    def streaming(call: Call) -> bool:
        if call not in discord_.fake.edits(first_id):
            return False
        body, footer = split_footer(call.body["content"])
        return bool(body) and "answering" in footer

    await discord_.fake.wait_for(streaming)


@dataclass
class Streaming:
    """A long answer to the asker, being streamed into its first message."""

    discord_: Harness
    request: Request
    question_id: int
    first_id: int


async def long_answer_streaming(
    settings: Settings, start_bot: StartBot, engine_for: StartEngine
) -> Streaming:
    settings = settings.model_copy(update={"max_tokens": 400})
    await engine_for(settings)
    discord_ = await start_bot(settings)
    question_id = discord_.ask(ASKER, LONG_QUESTION)
    request = await discord_.tap.request_from(ASKER["id"])
    first_id = await discord_.first_reply(question_id)
    await answering(discord_, first_id)
    return Streaming(discord_, request, question_id, first_id)


async def stopped(answer: Streaming) -> tuple[Shown, ReplyEvent]:
    """What the answer shows once stopped, and its terminal event (the cancel seen on the wire)."""
    discord_ = answer.discord_
    shown = await discord_.finished(answer.first_id)
    end = (await discord_.tap.ending(answer.request.session_id))[-1]
    await discord_.tap.until(lambda: bool(discord_.tap.cancels))
    return shown, end


async def test_the_askers_stop_on_the_answer_stops_generation(
    settings: Settings, start_bot: StartBot, engine_for: StartEngine
) -> None:
    answer = await long_answer_streaming(settings, start_bot, engine_for)
    discord_, request = answer.discord_, answer.request
    discord_.react(ASKER, answer.first_id)
    shown, end = await stopped(answer)

    assert [(c.session_id, c.user_id) for c in discord_.tap.cancels] == [
        (request.session_id, ASKER["id"])
    ]
    assert isinstance(end, Cancelled)
    assert 0 < end.tokens < 400
    assert shown.footer == "🛑 stopped"
    assert shown.text == end.text


async def test_a_strangers_stop_does_nothing_and_a_managers_stop_on_the_question_works(
    settings: Settings, start_bot: StartBot, engine_for: StartEngine
) -> None:
    answer = await long_answer_streaming(settings, start_bot, engine_for)
    discord_ = answer.discord_
    discord_.react(STRANGER, answer.first_id)
    discord_.react(STRANGER, answer.question_id)
    discord_.react(MANAGER, answer.question_id, roles=[MANAGER_ROLE_ID])
    shown, end = await stopped(answer)

    assert [c.user_id for c in discord_.tap.cancels] == [MANAGER["id"]]
    assert isinstance(end, Cancelled)
    assert shown.footer == "🛑 stopped"


async def test_a_queued_request_stopped_shows_stopped_at_once_and_never_reaches_the_model(
    settings: Settings, start_bot: StartBot, engine_for: StartEngine
) -> None:
    answer = await long_answer_streaming(settings, start_bot, engine_for)
    discord_, running, running_first = answer.discord_, answer.request, answer.first_id
    queued_id = discord_.ask(STRANGER, "And what about dogs?")
    queued = await discord_.tap.request_from(STRANGER["id"])
    placeholder_id = await discord_.first_reply(queued_id)
    placeholder = discord_.shown(placeholder_id)
    discord_.react(STRANGER, placeholder_id)
    stopped = await discord_.finished(placeholder_id)  # while the first answer still runs
    still_running = discord_.tap.events[running.session_id][-1].type not in TERMINAL_TYPES
    discord_.react(ASKER, running_first)
    queued_events = await discord_.tap.ending(queued.session_id)
    await discord_.tap.ending(running.session_id)

    assert placeholder.footer == "⏳ queued · next up"
    assert stopped.footer == "🛑 stopped"
    assert stopped.text == ""
    assert still_running
    assert [type(event) for event in queued_events] == [Cancelled]
    assert not any(isinstance(event, Started) for event in queued_events)


# --- /rescrape --------------------------------------------------------------------------------


async def test_rescrape_is_refused_to_non_admins_and_streams_progress_for_admins(
    site_settings: Settings, start_bot: StartBot, engine_for: StartEngine, fake_discord: FakeDiscord
) -> None:
    await engine_for(site_settings)
    discord_ = await start_bot(site_settings)
    callbacks = "/callback"

    discord_.slash("rescrape", STRANGER, permissions=0)
    refusal = await fake_discord.wait_for(lambda c: c.path.endswith(callbacks))
    sent_at = discord_.slash("rescrape", ADMIN, permissions=ADMINISTRATOR)
    request = await discord_.tap.request_from(ADMIN["id"])
    progress = await fake_discord.wait_for(lambda c: c in fake_discord.posts())
    shown = await discord_.finished(int(progress.response["id"]))
    events = await discord_.tap.ending(request.session_id)
    acks = [c for c in fake_discord.calls if c.path.endswith(callbacks)]

    assert refusal.body["type"] == 4  # a message, at once
    assert (refusal.body["data"]["content"], refusal.body["data"]["flags"]) == (
        t("refusal.not_admin", "en"),
        64,
    )
    assert len(acks) == 2
    assert acks[1].body["type"] == 4 and acks[1].body["data"]["flags"] == 64
    assert acks[1].at - sent_at < 3.0
    assert [r.type for r in discord_.tap.requests] == ["rescrape"]
    assert "message_reference" not in progress.body  # a channel message, not a reply
    assert not any(c.path.startswith("/webhooks/") for c in fake_discord.calls)
    progress_texts = {e.text for e in events if isinstance(e, Progress)}
    assert progress_texts
    assert isinstance(events[-1], Done)
    assert "Rescrape done" in shown.text
    assert shown.text == events[-1].text
    assert shown.footer == "✅ done"
    for edit in fake_discord.edits(shown.message_ids[0])[:-1]:
        assert split_footer(edit.body["content"])[0] in progress_texts | {""}


async def test_a_rescrape_is_stopped_by_a_configured_admins_stop_on_its_progress_message(
    site_settings: Settings,
    site: FakeSite,
    start_bot: StartBot,
    engine_for: StartEngine,
    fake_discord: FakeDiscord,
) -> None:
    only_slow = {"site_sitemap_url": None, "site_urls": [f"{site.base}/slow"]}
    settings = site_settings.model_copy(
        update=only_slow | {"scrape_timeout_s": 60.0, "admin_user_ids": [OPERATOR["id"]]}
    )
    await engine_for(settings)
    discord_ = await start_bot(settings)

    discord_.slash("rescrape", MANAGER, permissions=MANAGE_GUILD)
    request = await discord_.tap.request_from(MANAGER["id"])
    progress = await fake_discord.wait_for(lambda c: c in fake_discord.posts())
    progress_id = int(progress.response["id"])
    try:
        await asyncio.wait_for(site.hanging.wait(), 60)  # the scrape waits on the site
        discord_.react(OPERATOR, progress_id)
        shown = await discord_.finished(progress_id)
    finally:
        site.release.set()
    end = (await discord_.tap.ending(request.session_id))[-1]
    await discord_.tap.until(lambda: bool(discord_.tap.cancels))

    assert [c.user_id for c in discord_.tap.cancels] == [OPERATOR["id"]]
    assert isinstance(end, Cancelled)
    assert shown.footer == "🛑 stopped"
    assert "Rescrape stopped" in shown.text


# --- rate limits ------------------------------------------------------------------------------


async def test_a_429_is_waited_out_and_the_final_text_still_arrives(
    settings: Settings, start_bot: StartBot, engine_for: StartEngine, fake_discord: FakeDiscord
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


# --- a bot restarted mid-answer ---------------------------------------------------------------


@dataclass
class NamedBot:
    """A bot process under a stable name (``CONCIERGE_BOT_NAME``), as ``run_discord`` starts
    it: the adapter exists before its client takes replies, so it can take answers over."""

    bot: ConciergeBot
    client: ConciergeClient

    @classmethod
    async def start(cls, settings: Settings) -> NamedBot:
        client = ConciergeClient(settings, "discord")
        bot = ConciergeBot(settings, client, guild_ready_timeout=0.05)
        await bot.login("fake-token")  # as in run_discord: the bot is set up before replies flow
        await client.start()
        await log_in(bot)
        return cls(bot, client)

    async def stop(self) -> None:
        await self.bot.close()
        await self.client.close()


@pytest.fixture
async def named_bots(
    settings: Settings, broker: Broker, fake_discord: FakeDiscord
) -> AsyncIterator[Callable[[], Awaitable[NamedBot]]]:
    """Starts processes of the bot named "discord-main"; stops those still running."""
    named = settings.model_copy(update={"bot_name": "discord-main", "max_tokens": 400})
    running: list[NamedBot] = []

    async def start_one() -> NamedBot:
        running.append(await NamedBot.start(named))
        return running[-1]

    yield start_one
    for process in running:
        if not process.bot.is_closed():
            await process.stop()
    await broker.delete_reply_queue("discord-main")


@dataclass
class Restarted:
    """The bot's second process, the request asked of the first, and the answer's message."""

    harness: Harness
    request: Request
    answer_id: int


@pytest.fixture
async def restarted_mid_answer(
    named_bots: Callable[[], Awaitable[NamedBot]],
    engine_for: StartEngine,
    settings: Settings,
    broker: Broker,
    fake_discord: FakeDiscord,
) -> Restarted:
    """Ask a named bot a long question, stop that process while the answer streams, and
    start the next one."""
    await engine_for(settings.model_copy(update={"max_tokens": 400}))
    tap = await WireTap.open(broker, "discord-main")
    first = await named_bots()
    harness = Harness(first.bot, fake_discord, tap)
    question_id = harness.ask(ASKER, LONG_QUESTION)
    request = await tap.request_from(ASKER["id"])
    answer_id = await harness.first_reply(question_id)
    await answering(harness, answer_id)
    await first.stop()
    assert not any(e.type in TERMINAL_TYPES for e in tap.events[request.session_id]), (
        "the answer ended before the restart: make it longer"
    )
    second = await named_bots()
    return Restarted(Harness(second.bot, fake_discord, tap), request, answer_id)


async def test_a_bot_restarted_mid_answer_finishes_it_in_the_same_message(
    restarted_mid_answer: Restarted, fake_discord: FakeDiscord
) -> None:
    harness, request = restarted_mid_answer.harness, restarted_mid_answer.request
    answer_id = restarted_mid_answer.answer_id
    shown = await harness.finished(answer_id)
    done = (await harness.tap.ending(request.session_id))[-1]

    assert not harness.tap.cancels  # the first process left the answer running
    assert request.context["message"] == str(answer_id)
    assert isinstance(done, Done)
    assert done.context == request.context  # echoed for the next process
    assert shown.message_ids[0] == answer_id  # the same message, edited
    assert shown.text == done.text  # continued in replies to it if it outgrew one message
    assert shown.footer == "✅ done"
    assert len(fake_discord.posts()) == len(shown.message_ids)  # nothing posted twice


async def test_after_a_restart_the_askers_stop_on_the_answer_still_stops_it(
    restarted_mid_answer: Restarted,
) -> None:
    harness, request = restarted_mid_answer.harness, restarted_mid_answer.request
    answer_id = restarted_mid_answer.answer_id
    client = harness.bot.concierge
    await harness.tap.until(lambda: client.sessions.get(request.session_id) is not None)
    harness.react(ASKER, answer_id)
    shown = await harness.finished(answer_id)
    end = (await harness.tap.ending(request.session_id))[-1]

    assert [(c.session_id, c.user_id) for c in harness.tap.cancels] == [
        (request.session_id, ASKER["id"])
    ]
    assert isinstance(end, Cancelled)
    assert end.tokens < 400
    assert shown.text == end.text
    assert shown.footer == "🛑 stopped"
