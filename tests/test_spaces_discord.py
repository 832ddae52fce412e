"""Spaces on Discord (issue #30): a question, a follow-up and a ``/rescrape`` go to the space
of their server or channel (a thread by its parent), a DM and an unnamed server to
``default``; a space's admins rebuild their space and no other; the persona's name is the
bot's nickname in the servers a space names. The real bot against the fake Discord, the real
broker (a tap sees each request as the engine would receive it), and once the real engine.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import discord
import pytest

from bots.client import ConciergeClient
from bots.discord.adapter import ConciergeBot
from broker.amqp import Broker
from broker.protocol import Done, Request
from config.settings import Settings
from config.spaces import Spaces
from config.texts import t
from engine.backends.base import Backend
from tests.conftest import start_engine
from tests.fake_discord import start
from tests.fake_discord_wire import (
    BOT_ID,
    BOT_USER,
    guild_payload,
    interaction_payload,
    message_payload,
    ready_payload,
    role_payload,
    thread_payload,
    user_payload,
)
from tests.helpers import WireTap
from tests.spaces_fixture import NicknamedDiscord, space_table, with_spaces
from tests.test_secrets import log_output

ALPHA_GUILD = 1_000_000_000_000_000_131  # alpha's server
OTHER_GUILD = 1_000_000_000_000_000_132  # no space names it: default's
LOCKED_GUILD = 1_000_000_000_000_000_133  # beta's server, where the bot may not rename itself
ALPHA_CHANNEL = 1_000_000_000_000_000_231
BETA_CHANNEL = 1_000_000_000_000_000_232  # in alpha's server, named by beta
BETA_THREAD = 1_000_000_000_000_000_233  # a thread of BETA_CHANNEL
OTHER_CHANNEL = 1_000_000_000_000_000_234
LOCKED_CHANNEL = 1_000_000_000_000_000_235
DM_CHANNEL = 1_000_000_000_000_000_236
BETA_ROLE = 1_000_000_000_000_000_331
ALPHA_ADMIN = user_payload(1_000_000_000_000_000_432, "alpha-admin")  # by user id
BETA_HELPER = user_payload(1_000_000_000_000_000_433, "beta-helper")  # has BETA_ROLE
STRANGER = user_payload(1_000_000_000_000_000_434, "stranger")
OPERATOR = user_payload(1_000_000_000_000_000_435, "operator")  # the deployment's admin

ALPHA = space_table(
    "alpha",
    greeting="Hi, I'm Pip!",
    bot_name="Pip",
    locale="ja",
    admins=[int(ALPHA_ADMIN["id"])],
    places={"discord_guilds": [ALPHA_GUILD]},
)
BETA = space_table(
    "beta",
    bot_name="Bee",
    admins=[BETA_ROLE],
    places={"discord_guilds": [LOCKED_GUILD], "discord_channels": [BETA_CHANNEL]},
)

_ids = itertools.count(1_450_000_000_000_000_000)


@dataclass
class Bot:
    """The bot under test with two spaces, the fake Discord and a tap on the broker."""

    bot: ConciergeBot
    fake: NicknamedDiscord
    tap: WireTap

    def say(self, content: str, channel: int, guild: int | None, **extra: Any) -> int:
        """Someone new mentions the bot in ``channel`` (one asker may have only a few questions
        open); ``extra`` goes into the payload."""
        asker = user_payload(next(_ids), "asker")
        payload = message_payload(
            next(_ids),
            channel,
            asker,
            f"<@{BOT_ID}> {content}",
            guild_id=guild,
            mentions=[BOT_USER],
            **extra,
        )
        self.fake.add(payload)
        self.bot._connection.parse_message_create(payload)  # type: ignore[arg-type]
        return int(payload["id"])

    def rescrape(self, user: dict[str, Any], channel: int, roles: tuple[int, ...] = ()) -> int:
        """``user`` runs ``/rescrape`` in ``channel`` of alpha's server, without Manage Server."""
        interaction_id = next(_ids)
        payload = interaction_payload(
            interaction_id,
            "rescrape",
            user,
            guild_id=ALPHA_GUILD,
            channel_id=channel,
            permissions=0,
            roles=roles,
        )
        self.bot._connection.parse_interaction_create(payload)  # type: ignore[arg-type]
        return interaction_id

    async def answer_to_rescrape(self, interaction_id: int) -> str:
        """What the bot answered the command at once (the ephemeral callback's text)."""
        call = await self.fake.wait_for(
            lambda c: c.path.startswith(f"/interactions/{interaction_id}/")
        )
        return str(call.body["data"]["content"])

    async def request(self, number: int) -> Request:
        await self.tap.until(lambda: len(self.tap.requests) >= number)
        return self.tap.requests[number - 1]


@pytest.fixture
async def fake_discord(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[NicknamedDiscord]:
    fake = NicknamedDiscord(refuse_nickname={LOCKED_GUILD})
    server = await start(fake)
    monkeypatch.setattr(discord.http.Route, "BASE", fake.base)
    yield fake
    await server.close()


@pytest.fixture
def spaced(settings: Settings, tmp_path: Path) -> tuple[Settings, Spaces]:
    operated = settings.model_copy(update={"admin_user_ids": [OPERATOR["id"]]})
    return with_spaces(operated, tmp_path, ALPHA, BETA)


@asynccontextmanager
async def running_bot(
    spaced: tuple[Settings, Spaces],
    client: ConciergeClient,
    broker: Broker,
    fake: NicknamedDiscord,
) -> AsyncIterator[Bot]:
    """The bot logged in, ready in three servers: the locked one first, so that its refusal
    is logged before alpha's nickname is asked for."""
    settings, spaces = spaced
    tap = await WireTap.open(broker, client.bot_id)
    bot = ConciergeBot(settings, client, spaces=spaces, guild_ready_timeout=0.05)
    await bot.login("fake-token")
    state = bot._connection
    state.parse_ready(ready_payload())  # type: ignore[arg-type]
    thread = thread_payload(BETA_THREAD, ALPHA_GUILD, BETA_CHANNEL)
    role = role_payload(BETA_ROLE, "beta helpers", 0)
    for guild in (
        guild_payload(LOCKED_GUILD, [LOCKED_CHANNEL]),
        guild_payload(ALPHA_GUILD, [ALPHA_CHANNEL, BETA_CHANNEL], roles=[role], threads=[thread]),
        guild_payload(OTHER_GUILD, [OTHER_CHANNEL]),
    ):
        state.parse_guild_create(guild)  # type: ignore[arg-type]
    await bot.wait_until_ready()
    try:
        yield Bot(bot, fake, tap)
    finally:
        await bot.close()
        await tap.channel.close()


@pytest.fixture
async def discord_bot(
    spaced: tuple[Settings, Spaces],
    client: ConciergeClient,
    broker: Broker,
    fake_discord: NicknamedDiscord,
) -> AsyncIterator[Bot]:
    async with running_bot(spaced, client, broker, fake_discord) as running:
        yield running


async def test_each_question_goes_to_the_space_of_its_server_or_channel(
    discord_bot: Bot,
) -> None:
    d = discord_bot
    d.say("Where is the shop?", ALPHA_CHANNEL, ALPHA_GUILD)
    beta_question = d.say("When do you open?", BETA_CHANNEL, ALPHA_GUILD)
    d.say("And in the thread?", BETA_THREAD, ALPHA_GUILD)
    d.say("Somewhere else?", OTHER_CHANNEL, OTHER_GUILD)
    d.say("In private?", DM_CHANNEL, None)
    placeholder = await d.fake.wait_for(lambda c: c in d.fake.replies_to(beta_question))
    parent = d.fake.messages[int(placeholder.response["id"])]  # a follow-up: a reply to it
    reference = {"message_id": parent["id"], "channel_id": str(BETA_CHANNEL)}
    d.say("And on Sundays?", BETA_CHANNEL, ALPHA_GUILD, reference=reference)

    requests = {r.question: r for r in [await d.request(n) for n in range(1, 7)]}  # any order
    assert {question: r.space for question, r in requests.items()} == {
        "Where is the shop?": "alpha",
        "When do you open?": "beta",  # its channel is named: it beats alpha's server
        "And in the thread?": "beta",  # a thread counts as its channel
        "Somewhere else?": "default",  # a server no space names
        "In private?": "default",  # a DM
        "And on Sundays?": "beta",  # a follow-up, in beta's channel
    }
    assert requests["Where is the shop?"].locale == "ja"  # alpha's: the server cannot say one
    assert requests["Somewhere else?"].locale == "en"


async def test_a_space_answers_in_its_own_channel_through_the_engine(
    discord_bot: Bot, spaced: tuple[Settings, Spaces], backend: Backend
) -> None:
    """The engine serves the space the bot named: alpha's greeting in alpha's server, the
    engine's own in a server no space names."""
    engine = await start_engine(spaced[0], backend)
    try:
        d = discord_bot
        d.say("hi", ALPHA_CHANNEL, ALPHA_GUILD)
        d.say("hi", OTHER_CHANNEL, OTHER_GUILD)
        ends = [(await d.tap.ending((await d.request(n)).session_id))[-1] for n in (1, 2)]
    finally:
        await engine.stop()

    assert all(isinstance(end, Done) for end in ends), ends
    assert [end.text for end in ends if isinstance(end, Done)] == [
        "Hi, I'm Pip!",
        t("engine.answer.greeting", "en"),
    ]


async def test_a_space_admin_rebuilds_their_own_space_and_no_other(discord_bot: Bot) -> None:
    d = discord_bot
    refused = t("refusal.not_admin", "en")
    started = t("discord.rescrape_started", "en")

    answers = [
        await d.answer_to_rescrape(d.rescrape(ALPHA_ADMIN, BETA_CHANNEL)),  # alpha's, in beta
        await d.answer_to_rescrape(d.rescrape(BETA_HELPER, ALPHA_CHANNEL, (BETA_ROLE,))),
        await d.answer_to_rescrape(d.rescrape(STRANGER, ALPHA_CHANNEL)),
        await d.answer_to_rescrape(d.rescrape(ALPHA_ADMIN, ALPHA_CHANNEL)),  # by user id
        await d.answer_to_rescrape(d.rescrape(BETA_HELPER, BETA_CHANNEL, (BETA_ROLE,))),  # role
        await d.answer_to_rescrape(d.rescrape(OPERATOR, BETA_CHANNEL)),  # every space's admin
    ]
    requests = [await d.request(n) for n in (1, 2, 3)]

    assert answers == [refused, refused, refused, started, started, started]
    assert {(r.type, r.space, r.user_id) for r in requests} == {  # in any order
        ("rescrape", "alpha", ALPHA_ADMIN["id"]),
        ("rescrape", "beta", BETA_HELPER["id"]),
        ("rescrape", "beta", OPERATOR["id"]),
    }
    assert len(d.tap.requests) == 3  # the refused ones asked nothing (they came first)


async def test_the_persona_name_is_the_nickname_in_the_servers_a_space_names(
    spaced: tuple[Settings, Spaces],
    client: ConciergeClient,
    broker: Broker,
    fake_discord: NicknamedDiscord,
) -> None:
    """Alpha's server gets alpha's name (beta's channel in it does not rename the server);
    the locked server refuses, which is one line in the log; an unnamed server is not asked."""
    with log_output("INFO") as output:
        async with running_bot(spaced, client, broker, fake_discord):
            await fake_discord.wait_for(lambda c: c.path == f"/guilds/{ALPHA_GUILD}/members/@me")
    log = output.getvalue()

    assert fake_discord.nicknames() == {ALPHA_GUILD: "Pip"}
    asked = [c.path for c in fake_discord.calls if c.path.endswith("/members/@me")]
    assert sorted(asked) == sorted(f"/guilds/{g}/members/@me" for g in (ALPHA_GUILD, LOCKED_GUILD))
    refusals = [line for line in log.splitlines() if "cannot set the nickname" in line]
    assert len(refusals) == 1 and str(LOCKED_GUILD) in refusals[0] and "'Bee'" in refusals[0]
    assert "Traceback" not in log


async def test_the_rescrape_command_is_shown_to_members_when_a_space_names_admins(
    discord_bot: Bot, settings: Settings, client: ConciergeClient
) -> None:
    """A space's admins may lack Manage Server: the command must reach them."""
    without_spaces = ConciergeBot(settings, client)
    ours = discord_bot.bot.tree.get_command("rescrape")
    plain = without_spaces.tree.get_command("rescrape")
    assert ours is not None and plain is not None
    assert ours.default_permissions is None
    assert plain.default_permissions == discord.Permissions(manage_guild=True)
    await without_spaces.close()
