"""What the Discord adapter tests share: ids, users, a harness for the bot and its fixtures."""

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
from broker.amqp import Broker
from broker.protocol import TERMINAL_TYPES, Request
from config.settings import Settings
from engine.backends.base import Backend
from tests.conftest import LONG_QUESTION, RunningEngine, start_engine
from tests.fake_discord import FakeDiscord, start
from tests.fake_discord_wire import (
    BOT_ID,
    BOT_USER,
    Call,
    guild_payload,
    interaction_payload,
    message_payload,
    reaction_payload,
    ready_payload,
    role_payload,
    user_payload,
)
from tests.helpers import WireTap

GUILD_ID = 1_000_000_000_000_000_101
OTHER_GUILD_ID = 1_000_000_000_000_000_102
CHANNEL_ID = 1_000_000_000_000_000_201
OTHER_CHANNEL_ID = 1_000_000_000_000_000_202
OTHER_GUILD_CHANNEL_ID = 1_000_000_000_000_000_203
DM_CHANNEL_ID = 1_000_000_000_000_000_204
MANAGER_ROLE_ID = 1_000_000_000_000_000_301
MANAGE_GUILD = 1 << 5


ASKER = user_payload(1_000_000_000_000_000_401, "asker")
STRANGER = user_payload(1_000_000_000_000_000_402, "stranger")
MANAGER = user_payload(1_000_000_000_000_000_403, "manager")  # has the Manage Server role
ADMIN = user_payload(1_000_000_000_000_000_404, "admin")


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


# --- stopping -----------------------------------------------------------------------------


async def answering(discord_: Harness, first_id: int) -> None:
    """Wait until the answer shows some generated text."""

    def streaming(call: Call) -> bool:
        if call not in discord_.fake.edits(first_id):
            return False
        body, footer = split_footer(call.body["content"])
        return bool(body) and "answering" in footer

    await discord_.fake.wait_for(streaming)


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
