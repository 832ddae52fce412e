"""A Discord conversation: the reply chain a question continues, or the thread it is asked in.

Read newest first into a ``Conversation``. A reply's reference is followed message by message:
the message Discord sent along, else the client's cache, else ``GET`` of the message (a chain
walked this way ends at a message that is gone or cannot be read). In a thread that began with
a question to the bot (its starter asks the bot, or is the bot's answer), the thread's earlier
messages come first, then its starter and the chain that one continues.

Without the privileged Message Content intent, Discord hides the text of messages that neither
mention the bot nor reply to it with the ping on: those show nothing and are left out.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator

import discord
from discord.abc import Messageable

from bots.discord.sink import FOOTER
from bots.history import Conversation, History, Said

log = logging.getLogger(__name__)

MAX_MESSAGES_READ = 100  # at most this many messages (and REST calls) for one question
PEOPLES_MESSAGE_TYPES = frozenset({discord.MessageType.default, discord.MessageType.reply})


def mention_pattern(me: discord.abc.Snowflake, guild: discord.Guild | None) -> re.Pattern[str]:
    """The bot's mention in a message's text, or its managed role's."""
    own_role = guild.self_role if guild else None
    mentions = [rf"<@!?{me.id}>"] + ([rf"<@&{own_role.id}>"] if own_role else [])
    return re.compile("|".join(mentions))


def replied_to(message: discord.Message) -> discord.Message | None:
    """The message ``message`` replies to, if Discord sent it along or the cache has it."""
    reference = message.reference
    if reference is None or reference.type is not discord.MessageReferenceType.reply:
        return None
    if isinstance(reference.resolved, discord.Message):
        return reference.resolved
    return reference.cached_message


def split_status(content: str) -> tuple[str, str]:
    """One of the bot's messages as (body, status line); the status line is "" if it has none
    (a continuation, or a message that is not an answer)."""
    return FOOTER.split(content)


class DiscordConversations:
    """Reads the conversation a question belongs to; ``client`` is the logged-in bot."""

    def __init__(self, client: discord.Client, *, max_turns: int, max_chars: int) -> None:
        self.client = client
        self.max_turns = max_turns
        self.max_chars = max_chars

    async def history(self, question: discord.Message) -> History:
        """The turns before ``question``: its reply chain, or its thread's earlier messages."""
        if self.max_turns == 0 or self.client.user is None:
            return History()
        conversation = Conversation(self.max_turns, self.max_chars)
        read = 0
        async for earlier in self._earlier(question):
            said = self.said(earlier)
            if said is not None:
                conversation.add(said)
            read += 1
            if read >= MAX_MESSAGES_READ:
                conversation.cut = True
                break
        return conversation.history(str(question.author.id))

    def _earlier(self, question: discord.Message) -> AsyncIterator[discord.Message]:
        if question.reference is not None:
            return self._chain(question)
        if isinstance(question.channel, discord.Thread):
            return self._thread(question.channel, question)
        return _nothing()

    async def _chain(self, message: discord.Message) -> AsyncIterator[discord.Message]:
        """The messages ``message`` replies to, one after another, newest first."""
        for _ in range(MAX_MESSAGES_READ):
            parent = replied_to(message) or await self._fetch_reference(message)
            if parent is None:
                return
            yield parent
            message = parent

    async def _fetch_reference(self, message: discord.Message) -> discord.Message | None:
        reference = message.reference
        if reference is None or reference.message_id is None:
            return None
        if reference.type is not discord.MessageReferenceType.reply or reference.resolved:
            return None  # a forward, or a reply to a message deleted since
        channel: Messageable = (
            message.channel
            if reference.channel_id == message.channel.id
            else self.client.get_partial_messageable(reference.channel_id)
        )
        try:
            return await channel.fetch_message(reference.message_id)
        except discord.HTTPException as error:  # deleted, or not readable by the bot
            log.info("conversation ends at message %s: %s", reference.message_id, error)
            return None

    async def _thread(
        self, thread: discord.Thread, question: discord.Message
    ) -> AsyncIterator[discord.Message]:
        """A thread's messages before ``question``, then its starter's chain, newest first:
        only in a thread that began with a question to the bot."""
        starter, in_parent = await self._starter(thread)
        if starter is None or not self._asks_me(starter):
            return
        async for earlier in thread.history(limit=MAX_MESSAGES_READ, before=question):
            yield earlier
        if in_parent:  # a thread opened on a message: that message, and what it continues
            yield starter
            async for earlier in self._chain(starter):
                yield earlier

    async def _starter(self, thread: discord.Thread) -> tuple[discord.Message | None, bool]:
        """The message a thread began with, and whether it is in the parent channel."""
        places: list[tuple[object, bool]] = [(thread.parent, True), (thread, False)]
        try:
            for channel, in_parent in places:  # opened on a message: it has the thread's id;
                if isinstance(channel, Messageable):  # a forum post's first message too
                    try:
                        return await channel.fetch_message(thread.id), in_parent
                    except discord.NotFound:
                        continue
            async for first in thread.history(limit=1, oldest_first=True):  # opened on its own
                return first, False
        except discord.HTTPException as error:
            log.info("could not read how thread %s began: %s", thread.id, error)
        return None, False

    def _asks_me(self, message: discord.Message) -> bool:
        """The bot's own message, or one that mentions the bot or replies to it."""
        me = self.client.user
        if me is None:
            return False
        if message.author.id == me.id:
            return True
        parent = replied_to(message)
        return (
            any(user.id == me.id for user in message.mentions)
            or mention_pattern(me, message.guild).search(message.content) is not None
            or (parent is not None and parent.author.id == me.id)
        )

    def said(self, message: discord.Message) -> Said | None:
        """A message as the conversation reads it; None for a system message or another bot."""
        me = self.client.user
        if me is not None and message.author.id == me.id:
            body, footer = split_status(message.content)
            return Said(body, by_bot=True, footer=footer)
        if message.author.bot or message.type not in PEOPLES_MESSAGE_TYPES:
            return None
        return Said(self.words(message), str(message.author.id), message.author.display_name)

    def words(self, message: discord.Message) -> str:
        """What a person wrote, the bot's mention taken out and others' shown as @name."""
        text = message.content
        if self.client.user is not None:
            text = mention_pattern(self.client.user, message.guild).sub("", text)
        for user in message.mentions:
            shown = f"@{user.display_name}"
            text = text.replace(f"<@{user.id}>", shown).replace(f"<@!{user.id}>", shown)
        return text.strip()


async def _nothing() -> AsyncIterator[discord.Message]:
    return
    yield
