"""The Discord adapter: mentions and DMs become questions, 🛑 stops an answer, /rescrape rebuilds.

Only translation lives here: a Discord event becomes an ``Ask`` or a stop for the shared
``Answers``, which shows each answer through a ``DiscordSink``; the buttons under an answer
(Stop, 👍 / 👎) are ``bots.discord.buttons``. No privileged intent is needed: Discord sends a
message's content to a bot mentioned in it, or messaged directly, anyway.

Each question, follow-up and ``/rescrape`` goes to the space of its place (``space_of``: the
channel a space names, a thread by its parent too, else the server's; a DM is ``default``'s);
the persona's name is the bot's nickname in the servers a space names (``bots.discord.persona``).

The bot's own words come in the asker's locale: an interaction's (a slash command, a click),
else a Community server's preferred locale (a mention carries no user locale; any other server
reports Discord's default, en-US, whatever its members speak), else the space's locale.

Rate limits are discord.py's job: it waits out a 429's Retry-After itself, up to
``MAX_RATELIMIT_WAIT_S``; a longer one raises, the Renderer logs it and edits again at its next
turn, so one 429 never becomes a burst of retries.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import discord
from discord import app_commands
from discord.abc import Messageable

from bots.access import Access
from bots.answers import Answers
from bots.ask import Ask
from bots.client import ConciergeClient
from bots.discord.buttons import PERSISTENT_BUTTONS, STOP_EMOJI
from bots.discord.commands import CatalogueTranslator, register_commands
from bots.discord.history import DiscordConversations, mention_pattern, replied_to
from bots.discord.persona import show_persona_names
from bots.discord.sink import ANSWER_MAX_CHARS, NO_MENTIONS, AnyMessage, DiscordSink
from bots.history import HISTORY_TURN_MAX_CHARS, History
from config.settings import Settings
from config.spaces import DEFAULT_SPACE, Spaces
from config.texts import Locale, locale_of, t

log = logging.getLogger(__name__)

MAX_RATELIMIT_WAIT_S = 30.0  # the smallest bound discord.py accepts
# Discord allows 5 edits per 5 s in a channel. Streaming takes 4 of them, so the edit that ends
# an answer (the "stopped" after a 🛑, the "done") always finds one free: streaming at one a
# second took all 5, and discord.py held that edit until Discord's window reopened, well after
# the engine had confirmed a stop (docs/benchmarks.md). The 0.05 s covers the network's jitter.
DISCORD_EDITS_PER_WINDOW = 5
DISCORD_EDIT_WINDOW_S = 5.0
EDIT_INTERVAL_S = DISCORD_EDIT_WINDOW_S / (DISCORD_EDITS_PER_WINDOW - 1) + 0.05
ASKING_MESSAGE_TYPES = frozenset({discord.MessageType.default, discord.MessageType.reply})


def gateway_intents() -> discord.Intents:
    """Messages, reactions and guilds; none privileged (no message content, no members)."""
    intents = discord.Intents.none()
    intents.guilds = True
    intents.guild_messages = True
    intents.dm_messages = True
    intents.guild_reactions = True
    intents.dm_reactions = True
    return intents


class ConciergeBot(discord.Client):
    """The Discord bot: one per process, asking through ``concierge``.

    ``spaces`` say which space a server or channel asks (None: ``default`` everywhere);
    ``options`` go to ``discord.Client`` (tests pass ``guild_ready_timeout``);
    ``answer_max_chars`` is the body's room per message, the footer's room already set aside.
    """

    def __init__(
        self,
        settings: Settings,
        concierge: ConciergeClient,
        *,
        spaces: Spaces | None = None,
        answer_max_chars: int = ANSWER_MAX_CHARS,
        **options: Any,
    ) -> None:
        options.setdefault("max_ratelimit_timeout", MAX_RATELIMIT_WAIT_S)
        super().__init__(intents=gateway_intents(), allowed_mentions=NO_MENTIONS, **options)
        self.settings = settings
        self.spaces = spaces or Spaces(settings)
        self.access = Access.from_settings(settings, self.spaces)
        self.concierge = concierge
        self.answers = Answers[int](
            concierge,
            resume=self._resume,
            max_chars=answer_max_chars,
            edit_interval_s=EDIT_INTERVAL_S,
            ready=self.wait_until_ready,  # a taken-over answer needs the REST client's login
        )
        self.conversations = DiscordConversations(
            self, max_turns=settings.history_max_messages, max_chars=HISTORY_TURN_MAX_CHARS
        )
        self.tree = app_commands.CommandTree(self)

        # In servers only. Shown to members with Manage Server (a server can change who sees
        # it), unless a space names admins of its own: a bot cannot show a command to chosen
        # users, and they may lack Manage Server, so then every member sees it. The bot's own
        # admin check decides either way.
        description = app_commands.locale_str(
            t("discord.rescrape_description", "en"), key="discord.rescrape_description"
        )

        @self.tree.command(name="rescrape", description=description)
        @app_commands.guild_only()
        async def rescrape(interaction: discord.Interaction) -> None:
            await self.on_rescrape(interaction)

        if not any(self.spaces.named(name).admins for name in self.spaces.names):
            rescrape.default_permissions = discord.Permissions(manage_guild=True)

    async def setup_hook(self) -> None:
        self.add_dynamic_items(*PERSISTENT_BUTTONS)  # the buttons of answers posted before too
        await self.tree.set_translator(CatalogueTranslator())
        await register_commands(self, self.tree)  # ours only, and only when changed

    async def on_ready(self) -> None:
        await show_persona_names(self.guilds, self.access)

    async def on_guild_join(self, guild: discord.Guild) -> None:
        await show_persona_names([guild], self.access)

    async def close(self) -> None:
        """Stop the answers still shown (or hand them to the next process), then disconnect."""
        await self.answers.close()
        await super().close()

    # --- questions ------------------------------------------------------------------------

    async def on_message(self, message: discord.Message) -> None:
        question = self.question_in(message)
        if question is None:
            return
        space = self.space_of(message.guild.id if message.guild else None, message.channel)
        locale = self.locale_in(message.guild, space)
        if not question:
            await self._reply(message, self.help_text(locale))
            return
        place = {"channel": str(message.channel.id), "question": str(message.id)}
        try:
            history = await self.conversations.history(message)
        except Exception:  # the question still deserves an answer, on its own
            log.exception("could not read the conversation of message %s", message.id)
            history = History()
        asker = str(message.author.id)
        ask = Ask(
            question,
            asker,
            place=place,
            history=history.turns,
            history_cut=history.cut,
            locale=locale,
            space=space,
        )
        stage = self._stage(message.channel, message)
        self.answers.start(ask, stage, lambda text: self._reply(message, text))

    def question_in(self, message: discord.Message) -> str | None:
        """The question ``message`` asks the bot, "" for a bare mention, None if it asks none."""
        me = self.user
        if me is None or message.author.bot or message.type not in ASKING_MESSAGE_TYPES:
            return None
        if not self.place_allowed(message.guild.id if message.guild else None, message.channel):
            return None
        pattern = mention_pattern(me, message.guild)
        parent = replied_to(message)
        addressed = (
            message.guild is None
            or any(user.id == me.id for user in message.mentions)
            or pattern.search(message.content) is not None
            or (parent is not None and parent.author.id == me.id)  # a follow-up to its answer
        )
        return pattern.sub("", message.content).strip() if addressed else None

    def help_text(self, locale: Locale) -> str:
        return t("discord.help", locale, mention=self.user.mention if self.user else "@me")

    def locale_in(self, guild: discord.Guild | None, space: str = DEFAULT_SPACE) -> Locale:
        """The locale of a message there: a Community server's preferred one, else the space's
        (a DM, or a server that cannot choose one: it always reports en-US)."""
        named = self.spaces.get(space)
        fallback = named.settings.locale if named is not None else self.settings.locale
        if guild is None or "COMMUNITY" not in guild.features:
            return fallback
        return locale_of(guild.preferred_locale.value, fallback)

    def locale_for(self, interaction: discord.Interaction[Any]) -> Locale:
        """The locale of whoever used a command or clicked a button: their client's own."""
        return locale_of(interaction.locale.value, self.locale_in(interaction.guild))

    def space_of(self, guild_id: int | None, channel: object) -> str:
        """The space a message there asks: a channel a space names (a thread by its own id,
        then its parent's), else its server's; a DM is ``default``'s."""
        if guild_id is None:
            return DEFAULT_SPACE
        ids = (getattr(channel, "id", None), getattr(channel, "parent_id", None))
        return self.access.space_at("discord", str(guild_id), *(str(i) for i in ids if i))

    def place_allowed(self, guild_id: int | None, channel: object) -> bool:
        """The allow-lists, when set: a DM is in no guild; a thread counts as its parent too."""
        ids = (getattr(channel, "id", None), getattr(channel, "parent_id", None))
        in_guild = self.access.allows_guild(None if guild_id is None else str(guild_id))
        return in_guild and self.access.allows_channel(*(str(i) for i in ids if i is not None))

    async def _reply(self, question: discord.Message, text: str) -> None:
        reference = question.to_reference(fail_if_not_exists=False)
        await question.channel.send(text, reference=reference, allowed_mentions=NO_MENTIONS)

    # --- where answers go -----------------------------------------------------------------

    def _stage(
        self,
        channel: Messageable,
        question: AnyMessage | None,
        *,
        votes: bool = True,
    ) -> DiscordSink:
        return DiscordSink(channel, question, votes=votes)

    def _resume(self, context: Mapping[str, str]) -> tuple[DiscordSink, AnyMessage] | None:
        """The channel, answer and question an answer asked before a restart names."""
        try:
            channel = self.get_partial_messageable(int(context["channel"]))
            first = channel.get_partial_message(int(context["message"]))
            question_id = context.get("question")
            question = channel.get_partial_message(int(question_id)) if question_id else None
        except (KeyError, ValueError):
            return None
        return self._stage(channel, question, votes="question" in context), first

    # --- the stop reaction ----------------------------------------------------------------

    async def on_raw_reaction_add(self, payload: discord.RawReactionActionEvent) -> None:
        """Someone's 🛑 on an answer or its question: the asker's or an admin's stops it."""
        if payload.emoji.id is not None or payload.emoji.name != STOP_EMOJI:
            return
        await self.answers.stop(
            payload.message_id,
            str(payload.user_id),
            lambda: self.is_admin(payload.user_id, payload.member),
        )

    def is_admin(
        self,
        user_id: int,
        member: discord.Member | None,
        permissions: discord.Permissions | None = None,
    ) -> bool:
        """A configured admin user or role, or the guild's Administrator or Manage Server."""
        roles, server_admin = _standing(member, permissions)
        return self.access.is_admin(str(user_id), roles, platform_admin=server_admin)

    def may_rescrape(
        self,
        space: str,
        user_id: int,
        member: discord.Member | None,
        permissions: discord.Permissions | None = None,
    ) -> bool:
        """An admin (``is_admin``), or one of ``space``'s own admins by user or role id."""
        roles, server_admin = _standing(member, permissions)
        return self.access.may_rescrape(space, str(user_id), roles, platform_admin=server_admin)

    # --- /rescrape ------------------------------------------------------------------------

    async def on_rescrape(self, interaction: discord.Interaction) -> None:
        """Answer at once (Discord wants it within 3 s); progress goes to a channel message,
        which outlives the interaction's 15-minute token."""
        channel = interaction.channel or (
            self.get_partial_messageable(interaction.channel_id) if interaction.channel_id else None
        )
        member = interaction.user if isinstance(interaction.user, discord.Member) else None
        permissions = interaction.permissions if member is not None else None
        locale = self.locale_for(interaction)
        space = self.space_of(interaction.guild_id, channel)
        if channel is None or not self.place_allowed(interaction.guild_id, channel):
            refusal: str | None = t("refusal.not_here", locale)
        elif not self.may_rescrape(space, interaction.user.id, member, permissions):
            refusal = t("refusal.not_admin", locale)
        else:
            refusal = None
        started = t("discord.rescrape_started", locale)
        await interaction.response.send_message(refusal or started, ephemeral=True)
        if refusal is not None or not isinstance(channel, Messageable):
            return
        asker = str(interaction.user.id)
        place = {"channel": str(getattr(channel, "id", ""))}
        ask = Ask("", asker, "rescrape", place=place, locale=locale, space=space)
        stage = self._stage(channel, None, votes=False)
        say = interaction.followup.send  # ephemeral: only the admin sees why it was not queued
        self.answers.start(ask, stage, lambda text: say(text, ephemeral=True))


def _standing(
    member: discord.Member | None, permissions: discord.Permissions | None
) -> tuple[list[str], bool]:
    """A user's role ids, and whether the server makes them an admin (Administrator or Manage
    Server, in the channel's ``permissions`` when known); in a DM, neither."""
    if member is None:
        return [], False
    granted = permissions if permissions is not None else member.guild_permissions
    return [str(role.id) for role in member.roles], granted.administrator or granted.manage_guild
