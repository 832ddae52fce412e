"""How an answer looks on Discord and how its messages are posted and edited.

``DiscordSink`` is the ``Stage`` of one exchange (the Renderer's ``MessageSink``, and Discord's
names for its messages): the first message replies to the question (or opens the progress
message of a rescrape); each continuation replies to the message before it. A message shows
the body, then the status as Discord's small text (``-# …``) on its own line, and under the
message with the status its buttons (``bots.discord.buttons``): Stop from the placeholder on,
👍 / 👎 once done; the bot adds no reaction of its own (a person's 🛑 still stops, see the
adapter). Nothing is ever a ping: every send and edit goes out with ``AllowedMentions.none()``,
whatever the answer says (``@everyone``, ``<@id>``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import discord
from discord.abc import Messageable
from discord.utils import MISSING

from bots.discord.buttons import StopButton, controls
from bots.footer import FooterLayout
from bots.renderer import MessageContent, Status
from config.texts import Locale

log = logging.getLogger(__name__)

DISCORD_MAX_CHARS = 2000
FOOTER_MAX_CHARS = 200  # a long failure reason is shortened, so the body's room is fixed
SMALL_TEXT = "-# "
FOOTER_PREFIX = f"\n{SMALL_TEXT}"
FOOTER = FooterLayout(FOOTER_PREFIX, SMALL_TEXT, FOOTER_MAX_CHARS)
ANSWER_MAX_CHARS = DISCORD_MAX_CHARS - len(FOOTER_PREFIX) - FOOTER_MAX_CHARS
NO_MENTIONS = discord.AllowedMentions.none()

# A message this process posted, or one it knows only by id (posted before a restart).
AnyMessage = discord.Message | discord.PartialMessage


def message_text(content: MessageContent) -> str:
    """The text of one message: the body, then the footer as small text on its own line."""
    return FOOTER.join(content.body, " ".join(content.footer.split()))  # small text: one line


class DiscordSink:
    """The ``Stage`` of one exchange in ``channel``: posts and edits its messages.

    ``question`` is the message the answer replies to (None for a rescrape, whose progress is
    a plain channel message). ``votes`` is False for a rescrape.
    """

    # Set by ``Answers`` before the first post or edit (a taken-over answer's too); the asker
    # goes into the Stop button's id.
    session_id: str = ""
    asker: str = ""
    locale: Locale = "en"

    def __init__(
        self,
        channel: Messageable,
        question: AnyMessage | None,
        *,
        votes: bool = True,
    ) -> None:
        self.channel = channel
        self.question = question
        self.votes = votes
        self.on_post: Callable[[AnyMessage], None] = lambda _: None
        # The messages whose buttons this sink set, and whether a Stop button is among them.
        self._stop_shown: dict[int, AnyMessage | None] = {}

    def key(self, message: AnyMessage) -> int:
        return message.id

    def place(self, placeholder: AnyMessage) -> dict[str, str]:
        return {"message": str(placeholder.id)}

    async def post(self, content: MessageContent, after: AnyMessage | None) -> discord.Message:
        reply_to, text = after or self.question, message_text(content)
        view = self._controls(content.status)
        buttons = view if view is not None else MISSING
        if reply_to is None:  # a rescrape's progress: a plain channel message
            message = await self.channel.send(text, allowed_mentions=NO_MENTIONS, view=buttons)
        else:  # a question deleted meanwhile must not make the answer fail: reply if it exists
            reference = reply_to.to_reference(fail_if_not_exists=False)
            message = await self.channel.send(
                text, reference=reference, allowed_mentions=NO_MENTIONS, view=buttons
            )
        self.on_post(message)
        self._shown(message, view)
        return message

    async def edit(self, handle: AnyMessage, content: MessageContent) -> None:
        text = message_text(content)
        view = self._controls(content.status)
        await handle.edit(content=text, allowed_mentions=NO_MENTIONS, view=view)
        self._shown(handle, view)

    async def ended(self, first: AnyMessage | None) -> None:
        """Take off a Stop button the ended answer still shows: one this sink could not
        replace (a final edit that failed), or the first message's from the process before a
        restart."""
        stale = [message for message in self._stop_shown.values() if message is not None]
        if first is not None and first.id not in self._stop_shown:
            stale.append(first)
        for message in stale:
            try:
                await message.edit(view=None)
            except discord.DiscordException as error:
                log.info("could not remove the stop button: %s", error)

    def _controls(self, status: Status | None) -> discord.ui.View | None:
        return controls(status, self.session_id, self.asker, self.locale, votes=self.votes)

    def _shown(self, message: AnyMessage, view: discord.ui.View | None) -> None:
        stop = view is not None and any(isinstance(i, StopButton) for i in view.children)
        self._stop_shown[message.id] = message if stop else None
