"""How an answer looks on Discord and how its messages are posted and edited.

``DiscordSink`` is the Renderer's ``MessageSink`` for one exchange: the first message replies
to the question (or opens the progress message of a rescrape) and carries the 🛑 stop button;
each continuation replies to the message before it. A message shows the body, then the status
as Discord's small text (``-# …``) on its own line. Nothing is ever a ping: every send and edit
goes out with ``AllowedMentions.none()``, whatever the answer says (``@everyone``, ``<@id>``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import discord
from discord.abc import Messageable

from bots.renderer import MessageContent

log = logging.getLogger(__name__)

DISCORD_MAX_CHARS = 2000
FOOTER_MAX_CHARS = 200  # a long failure reason is shortened, so the body's room is fixed
FOOTER_PREFIX = "\n-# "
ANSWER_MAX_CHARS = DISCORD_MAX_CHARS - len(FOOTER_PREFIX) - FOOTER_MAX_CHARS
STOP_EMOJI = "🛑"
NO_MENTIONS = discord.AllowedMentions.none()

# A message this process posted, or one it knows only by id (posted before a restart).
AnyMessage = discord.Message | discord.PartialMessage


def message_text(content: MessageContent) -> str:
    """The text of one message: the body, then the footer as small text on its own line."""
    footer = " ".join(content.footer.split())  # small text covers one line only
    if len(footer) > FOOTER_MAX_CHARS:
        footer = footer[: FOOTER_MAX_CHARS - 1] + "…"
    if not footer:
        return content.body
    return f"{content.body}{FOOTER_PREFIX}{footer}" if content.body else f"-# {footer}"


class DiscordSink:
    """Posts and edits the messages of one exchange in ``channel``.

    ``question`` is the message the answer replies to (None for a rescrape, whose progress is
    a plain channel message). ``on_post`` hears of every message posted, so a 🛑 on any of
    them can be traced back to the exchange.
    """

    def __init__(
        self,
        channel: Messageable,
        question: AnyMessage | None,
        on_post: Callable[[AnyMessage], None],
    ) -> None:
        self.channel = channel
        self.question = question
        self.on_post = on_post
        self.messages: list[AnyMessage] = []

    def adopt(self, first: AnyMessage) -> None:
        """Go on in a message posted before a restart (it carries the stop button already)."""
        self.messages = [first]
        self.on_post(first)

    async def post(self, content: MessageContent, after: AnyMessage | None) -> discord.Message:
        reply_to = after or self.question
        # A question deleted meanwhile must not make the answer fail: reply only if it exists.
        reference = reply_to.to_reference(fail_if_not_exists=False) if reply_to else None
        message = await self.channel.send(
            message_text(content), reference=reference, allowed_mentions=NO_MENTIONS
        )
        self.messages.append(message)
        self.on_post(message)
        if after is None:
            await self._add_stop_button(message)
        return message

    async def edit(self, handle: AnyMessage, content: MessageContent) -> None:
        await handle.edit(content=message_text(content), allowed_mentions=NO_MENTIONS)

    async def remove_stop_button(self, me: discord.abc.Snowflake) -> None:
        """Take the bot's own 🛑 off the first message once the exchange has ended."""
        if self.messages:
            try:
                await self.messages[0].remove_reaction(STOP_EMOJI, me)
            except discord.DiscordException as error:
                log.info("could not remove the stop button: %s", error)

    async def _add_stop_button(self, message: discord.Message) -> None:
        try:
            await message.add_reaction(STOP_EMOJI)
        except discord.DiscordException as error:  # e.g. no Add Reactions permission here
            log.info("could not add the stop button: %s", error)
