"""How an answer looks on Discord and how its messages are posted and edited.

``DiscordSink`` is the ``Stage`` of one exchange (the Renderer's ``MessageSink``, and Discord's
names for its messages): the first message replies to the question (or opens the progress
message of a rescrape) and carries the 🛑 stop button; each continuation replies to the
message before it. A message shows the body, then the status as Discord's small text
(``-# …``) on its own line. Nothing is ever a ping: every send and edit goes out with
``AllowedMentions.none()``, whatever the answer says (``@everyone``, ``<@id>``).
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
    """The ``Stage`` of one exchange in ``channel``: posts and edits its messages.

    ``question`` is the message the answer replies to (None for a rescrape, whose progress is
    a plain channel message). ``me`` is the bot's own user, once logged in: its 🛑 is taken
    off the first message when the answer ends.
    """

    def __init__(
        self,
        channel: Messageable,
        question: AnyMessage | None,
        me: Callable[[], discord.abc.Snowflake | None],
    ) -> None:
        self.channel = channel
        self.question = question
        self.me = me
        self.on_post: Callable[[AnyMessage], None] = lambda _: None

    def key(self, message: AnyMessage) -> int:
        return message.id

    def place(self, placeholder: AnyMessage) -> dict[str, str]:
        return {"message": str(placeholder.id)}

    async def post(self, content: MessageContent, after: AnyMessage | None) -> discord.Message:
        reply_to, text = after or self.question, message_text(content)
        if reply_to is None:  # a rescrape's progress: a plain channel message
            message = await self.channel.send(text, allowed_mentions=NO_MENTIONS)
        else:  # a question deleted meanwhile must not make the answer fail: reply if it exists
            reference = reply_to.to_reference(fail_if_not_exists=False)
            message = await self.channel.send(
                text, reference=reference, allowed_mentions=NO_MENTIONS
            )
        self.on_post(message)
        if after is None:
            await self._add_stop_button(message)
        return message

    async def edit(self, handle: AnyMessage, content: MessageContent) -> None:
        await handle.edit(content=message_text(content), allowed_mentions=NO_MENTIONS)

    async def ended(self, first: AnyMessage | None) -> None:
        """Take the bot's own 🛑 off the first message once the exchange has ended."""
        me = self.me()
        if first is None or me is None:
            return
        try:
            await first.remove_reaction(STOP_EMOJI, me)
        except discord.DiscordException as error:
            log.info("could not remove the stop button: %s", error)

    async def _add_stop_button(self, message: discord.Message) -> None:
        try:
            await message.add_reaction(STOP_EMOJI)
        except discord.DiscordException as error:  # e.g. no Add Reactions permission here
            log.info("could not add the stop button: %s", error)
