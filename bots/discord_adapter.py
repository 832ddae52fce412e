"""The Discord adapter: mentions and DMs become questions, 🛑 stops an answer, /rescrape rebuilds.

Only translation lives here. A Discord event becomes a ``ConciergeClient`` call; the shared
``Renderer`` shows what comes back, through ``DiscordSink``. No privileged intent is needed:
Discord sends a message's content to a bot mentioned in it, or messaged directly, anyway.

Rate limits are discord.py's job: it waits out a 429's Retry-After itself, up to
``MAX_RATELIMIT_WAIT_S``; a longer one raises, the Renderer logs it and edits again at its next
turn, so one 429 never becomes a burst of retries.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

import discord
from discord import app_commands
from discord.abc import Messageable

from bots.answering import send_and_show
from bots.client import AskRefused, ConciergeClient
from bots.discord_sink import (
    ANSWER_MAX_CHARS,
    NO_MENTIONS,
    STOP_EMOJI,
    AnyMessage,
    DiscordSink,
)
from bots.renderer import Renderer, Status
from bots.session import Session
from config.settings import ConfigError, Settings

log = logging.getLogger(__name__)

MAX_RATELIMIT_WAIT_S = 30.0  # the smallest bound discord.py accepts
SHUTDOWN_GRACE_S = 5.0  # on close, how long answers being stopped may take to say so
ASKING_MESSAGE_TYPES = frozenset({discord.MessageType.default, discord.MessageType.reply})

NOT_ADMIN_TEXT = "Only admins can rebuild the knowledge base."
NOT_HERE_TEXT = "I am not available here."
RESCRAPE_STARTED_TEXT = (
    f"Rebuilding the knowledge base: progress follows in this channel ({STOP_EMOJI} on it stops)."
)
ENGINE_DOWN_REASON = "I cannot reach the answering engine right now; please try again later."
ASK_FAILED_TEXT = f"⚠️ {ENGINE_DOWN_REASON}"


def gateway_intents() -> discord.Intents:
    """Messages, reactions and guilds; none privileged (no message content, no members)."""
    intents = discord.Intents.none()
    intents.guilds = True
    intents.guild_messages = True
    intents.dm_messages = True
    intents.guild_reactions = True
    intents.dm_reactions = True
    return intents


@dataclass(eq=False)
class Exchange:
    """One request being shown: its session and the messages a 🛑 on which stops it."""

    session: Session
    message_ids: set[int] = field(default_factory=set)
    stop_sent: bool = False


class ConciergeBot(discord.Client):
    """The Discord bot: one per process, asking through ``concierge``.

    ``options`` go to ``discord.Client`` (tests pass ``guild_ready_timeout``);
    ``answer_max_chars`` is the body's room per message, the footer's room already set aside.
    """

    def __init__(
        self,
        settings: Settings,
        concierge: ConciergeClient,
        *,
        answer_max_chars: int = ANSWER_MAX_CHARS,
        **options: Any,
    ) -> None:
        options.setdefault("max_ratelimit_timeout", MAX_RATELIMIT_WAIT_S)
        super().__init__(intents=gateway_intents(), allowed_mentions=NO_MENTIONS, **options)
        self.settings = settings
        self.concierge = concierge
        self.answer_max_chars = answer_max_chars
        self.tree = app_commands.CommandTree(self)
        self._exchanges: dict[int, Exchange] = {}  # by the id of each message 🛑 may be put on
        self._following: set[asyncio.Task[Any]] = set()
        concierge.on_adopt = self.take_over

        @self.tree.command(
            name="rescrape", description="Rebuild the knowledge base from the site (admins only)"
        )
        async def rescrape(interaction: discord.Interaction) -> None:
            await self.on_rescrape(interaction)

    async def setup_hook(self) -> None:
        await self.tree.sync()

    async def close(self) -> None:
        """Stop the answers still shown (the engine is told), then disconnect. A bot with a
        stable name (``CONCIERGE_BOT_NAME``) leaves them to its next process instead, which
        finishes each in the same message."""
        following = set(self._following)
        if self.concierge.named:
            try:
                await self.concierge.detach()
            except Exception as error:  # the broker may be gone already: still disconnect
                log.warning("could not hand the answers over: %s", error)
        else:
            for exchange in set(self._exchanges.values()):
                try:
                    await self._stop(exchange, str(self.user.id) if self.user else "shutdown")
                except Exception as error:
                    log.warning("could not stop session %s: %s", exchange.session.session_id, error)
        if following:
            _, late = await asyncio.wait(following, timeout=SHUTDOWN_GRACE_S)
            for task in late:
                task.cancel()
        await super().close()

    # --- questions ------------------------------------------------------------------------

    async def on_message(self, message: discord.Message) -> None:
        question = self.question_in(message)
        if question is None:
            return
        if not question:
            await message.channel.send(
                self.help_text(),
                reference=message.to_reference(fail_if_not_exists=False),
                allowed_mentions=NO_MENTIONS,
            )
            return
        try:
            session = await self.concierge.prepare(question, str(message.author.id))
        except Exception as error:
            if isinstance(error, AskRefused):  # too long, too many open, or the queue is full
                text = f"⚠️ {error}"
            else:
                log.exception("could not queue a question from Discord")
                text = ASK_FAILED_TEXT
            await message.channel.send(
                text,
                reference=message.to_reference(fail_if_not_exists=False),
                allowed_mentions=NO_MENTIONS,
            )
            return
        await self.follow(session, message.channel, message)

    def question_in(self, message: discord.Message) -> str | None:
        """The question ``message`` asks the bot, "" for a bare mention, None if it asks none."""
        me = self.user
        if me is None or message.author.bot or message.type not in ASKING_MESSAGE_TYPES:
            return None
        if not self.place_allowed(message.guild.id if message.guild else None, message.channel):
            return None
        own_role = message.guild.self_role if message.guild else None
        mentions = [rf"<@!?{me.id}>"] + ([rf"<@&{own_role.id}>"] if own_role else [])
        pattern = re.compile("|".join(mentions))
        addressed = (
            message.guild is None
            or any(user.id == me.id for user in message.mentions)
            or pattern.search(message.content) is not None
        )
        return pattern.sub("", message.content).strip() if addressed else None

    def help_text(self) -> str:
        mention = self.user.mention if self.user else "me"
        return (
            f"Ask me by mentioning me with your question, for example: {mention} how do I "
            f"claim the warranty? I answer in a reply; react {STOP_EMOJI} to stop me."
        )

    def place_allowed(self, guild_id: int | None, channel: object) -> bool:
        """The allow-lists, when set: a DM is in no guild; a thread counts as its parent too."""
        guilds, channels = self.settings.allowed_guild_ids, self.settings.allowed_channel_ids
        if guilds and str(guild_id) not in guilds:
            return False
        ids = {getattr(channel, "id", None), getattr(channel, "parent_id", None)}
        return not channels or any(str(i) in channels for i in ids if i is not None)

    # --- answers and the stop button ------------------------------------------------------

    async def follow(
        self, session: Session, channel: Messageable, question: discord.Message | None
    ) -> Status:
        """Post the placeholder, send the request naming it, and show the answer until it ends;
        🛑 on the question or on any answer message stops it."""
        renderer, sink = self._renderer(session, channel, question)

        def context_for(placeholder: discord.Message | None) -> dict[str, str]:
            where = {"channel": str(getattr(channel, "id", ""))}
            if placeholder is not None:
                where["message"] = str(placeholder.id)
            if question is not None:
                where["question"] = str(question.id)
            return where

        answering = send_and_show(
            self.concierge, session, renderer, context_for, ENGINE_DOWN_REASON
        )
        return await self._show(session, sink, answering)

    def take_over(self, session: Session, context: dict[str, str]) -> bool:
        """An answer asked before this process started (same bot name): finish it in the
        message its request named. False if the context names no message of ours."""
        try:
            channel = self.get_partial_messageable(int(context["channel"]))
            message = channel.get_partial_message(int(context["message"]))
            question_id = context.get("question")
            question = channel.get_partial_message(int(question_id)) if question_id else None
        except (KeyError, ValueError):
            return False
        renderer, sink = self._renderer(session, channel, question)
        sink.adopt(message)

        async def show() -> Status:
            await self.wait_until_ready()  # the REST client needs the login
            renderer.adopt(message)
            return await renderer.follow(session)

        task = asyncio.create_task(self._show(session, sink, show()))
        self._following.add(task)  # now, not when it first runs: close() must see it
        task.add_done_callback(self._taken_over_done)
        return True

    def _taken_over_done(self, task: asyncio.Task[Status]) -> None:
        self._following.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("a taken-over answer failed", exc_info=task.exception())

    def _renderer(
        self, session: Session, channel: Messageable, question: AnyMessage | None
    ) -> tuple[Renderer, DiscordSink]:
        """The renderer and sink of one exchange, its messages watched for 🛑."""
        exchange = Exchange(session)

        def watch(message_id: int) -> None:
            exchange.message_ids.add(message_id)
            self._exchanges[message_id] = exchange

        if question is not None:
            watch(question.id)
        sink = DiscordSink(channel, question, on_post=lambda message: watch(message.id))
        renderer = Renderer(
            sink, max_chars=self.answer_max_chars, edit_interval_s=self.settings.edit_interval_s
        )
        return renderer, sink

    async def _show(self, session: Session, sink: DiscordSink, shown: Awaitable[Status]) -> Status:
        """Run ``shown`` as one of the answers followed, then forget the exchange."""
        task = asyncio.current_task()
        assert task is not None  # a coroutine runs in a task
        self._following.add(task)
        try:
            with self.concierge.showing(session):
                status = await shown
        finally:
            self._following.discard(task)
            for message_id, exchange in list(self._exchanges.items()):
                if exchange.session is session:
                    del self._exchanges[message_id]
        if status is not Status.DETACHED and self.user is not None:
            await sink.remove_stop_button(self.user)
        log.info("session %s: %s", session.session_id, status)
        return status

    async def on_raw_reaction_add(self, payload: discord.RawReactionActionEvent) -> None:
        exchange = self._exchanges.get(payload.message_id)
        if exchange is None or payload.emoji.id is not None or payload.emoji.name != STOP_EMOJI:
            return
        if self.user is not None and payload.user_id == self.user.id:
            return  # the bot's own stop button
        asker = str(payload.user_id) == exchange.session.user_id
        if asker or self.is_admin(payload.user_id, payload.member):
            await self._stop(exchange, str(payload.user_id))

    async def _stop(self, exchange: Exchange, user_id: str) -> None:
        if not exchange.stop_sent:
            exchange.stop_sent = True
            await self.concierge.cancel(exchange.session, user_id)

    def is_admin(
        self,
        user_id: int,
        member: discord.Member | None,
        permissions: discord.Permissions | None = None,
    ) -> bool:
        """A configured admin user or role, or the guild's Administrator or Manage Server."""
        if str(user_id) in self.settings.admin_user_ids:
            return True
        if member is None:
            return False
        if any(str(role.id) in self.settings.admin_role_ids for role in member.roles):
            return True
        granted = permissions if permissions is not None else member.guild_permissions
        return granted.administrator or granted.manage_guild

    # --- /rescrape ------------------------------------------------------------------------

    async def on_rescrape(self, interaction: discord.Interaction) -> None:
        """Answer at once (Discord wants it within 3 s); progress goes to a channel message,
        which outlives the interaction's 15-minute token."""
        channel = interaction.channel or (
            self.get_partial_messageable(interaction.channel_id) if interaction.channel_id else None
        )
        member = interaction.user if isinstance(interaction.user, discord.Member) else None
        permissions = interaction.permissions if member is not None else None
        if channel is None or not self.place_allowed(interaction.guild_id, channel):
            refusal: str | None = NOT_HERE_TEXT
        elif not self.is_admin(interaction.user.id, member, permissions):
            refusal = NOT_ADMIN_TEXT
        else:
            refusal = None
        await interaction.response.send_message(refusal or RESCRAPE_STARTED_TEXT, ephemeral=True)
        if refusal is not None or not isinstance(channel, Messageable):
            return
        try:
            session = await self.concierge.prepare("", str(interaction.user.id), kind="rescrape")
        except AskRefused as refusal:
            await interaction.followup.send(f"⚠️ {refusal}", ephemeral=True)
            return
        except Exception:
            log.exception("could not queue a rescrape from Discord")
            await interaction.followup.send(ASK_FAILED_TEXT, ephemeral=True)
            return
        await self.follow(session, channel, None)


async def run_discord(settings: Settings, stop: asyncio.Event) -> None:
    """Run the Discord bot until ``stop`` is set."""
    if settings.discord_token is None:
        raise ConfigError("discord_token (CONCIERGE_DISCORD_TOKEN): not set")
    concierge = ConciergeClient(settings, "discord")
    bot = ConciergeBot(settings, concierge)  # before replies flow: it takes over earlier answers
    async with bot, concierge:  # the bot first: a take-over waits until it is ready
        running = asyncio.create_task(bot.start(settings.discord_token.get_secret_value()))
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({running, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        await bot.close()
        try:
            await running
        except discord.LoginFailure as error:
            raise ConfigError(f"discord_token (CONCIERGE_DISCORD_TOKEN): {error}") from None
