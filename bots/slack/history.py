"""A Slack conversation: the thread a question is asked in, once the bot has answered there.

``conversations.replies`` gives the thread, oldest first (it needs the scopes
``channels:history``, ``groups:history``, ``im:history`` and ``mpim:history``, one for each kind
of conversation); the messages before the question are read newest first into a
``Conversation``. The bot's own messages are its answers, their status line split off as
``slack_format`` lays it out (a streamed one is Markdown: ``slack_markdown``). Slack's markup
is read back as text: ``<@U1|ann>`` as ``@ann``, ``<https://a|label>`` as
``[label](https://a)``, entities as the characters they stand for.
People are named as ``users.info`` shows them (``users:read``), through ``SlackPeople``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bots.history import Conversation, History, Said
from bots.slack.format import FOOTER, read_asked, unescape
from bots.slack.markdown import plain_markdown
from bots.slack.people import SlackPeople

log = logging.getLogger(__name__)

PAGE_SIZE = 200  # Slack's advice for one page of conversations.replies
MAX_MESSAGES_READ = 1000  # a thread longer than this is read from its start up to here

_MARKUP = re.compile(r"<(?P<target>[^<>|]+)(?:\|(?P<label>[^<>]*))?>")


@dataclass(frozen=True)
class Me:
    """How the bot's own messages are recognised: its user id and its bot id."""

    user_id: str
    bot_id: str = ""

    def wrote(self, message: Mapping[str, Any]) -> bool:
        return message.get("user") == self.user_id or bool(
            self.bot_id and message.get("bot_id") == self.bot_id
        )


def plain(text: str, me: Me) -> str:
    """A message's text as a person reads it, without the bot's own mention."""

    def readable(markup: re.Match[str]) -> str:
        target, label = markup["target"], markup["label"]
        if target == f"@{me.user_id}":
            return ""
        if target[0] in "@#":
            return f"{target[0]}{label.lstrip('@#') if label else target[1:]}"
        if target[0] == "!":  # <!here>, <!subteam^S1|@team>
            return label or f"@{target[1:].split('^')[0]}"
        return f"[{label}]({target})" if label else target

    return unescape(_MARKUP.sub(readable, text)).strip()


def split_status(text: str) -> tuple[str, str]:
    """One of the bot's messages as (body as Slack has it, status line as text)."""
    return FOOTER.split(text, read=unescape)


def _ts_key(ts: str) -> tuple[int, int]:
    """A message's ts in order (as text, "9.1" would sort after "10.1")."""
    seconds, _, fraction = ts.partition(".")
    return int(seconds or 0), int(fraction or 0)


class SlackConversations:
    """Reads threads through ``web``, names people through ``people``; keeps ``max_turns``
    turns of ``max_chars`` each."""

    def __init__(
        self, web: AsyncWebClient, people: SlackPeople, *, max_turns: int, max_chars: int
    ) -> None:
        self.web = web
        self.people = people
        self.max_turns = max_turns
        self.max_chars = max_chars

    async def history(
        self,
        channel: str,
        thread_ts: str,
        before_ts: str,
        *,
        asker: str,
        me: Me,
    ) -> History | None:
        """The thread's turns before ``before_ts``; None if the bot has not answered in it, the
        thread cannot be read, or conversations are off (``max_turns`` 0)."""
        if self.max_turns == 0:
            return None
        messages = await self._thread(channel, thread_ts)
        earlier = [m for m in messages if _ts_key(m.get("ts", "")) < _ts_key(before_ts)]
        if not any(me.wrote(message) for message in earlier):
            return None
        conversation = Conversation(self.max_turns, self.max_chars)
        for message in reversed(earlier):
            for said in await self._read(message, me, asker):
                conversation.add(said)
        if len(messages) >= MAX_MESSAGES_READ:
            conversation.cut = True
        return conversation.history(asker)

    async def _thread(self, channel: str, thread_ts: str) -> list[dict[str, Any]]:
        """The thread's messages, oldest first ([] if Slack refuses: a missing scope is logged
        with the scope it names)."""
        messages: list[dict[str, Any]] = []
        cursor: str | None = None
        try:
            while len(messages) < MAX_MESSAGES_READ:
                page = await self.web.conversations_replies(
                    channel=channel, ts=thread_ts, limit=PAGE_SIZE, cursor=cursor
                )
                messages += page.get("messages") or []
                cursor = (page.get("response_metadata") or {}).get("next_cursor") or None
                if not cursor:
                    break
        except SlackApiError as error:
            needed = error.response.get("needed")
            reason = f"{error.response.get('error')}" + (f" (needs {needed})" if needed else "")
            log.warning("slack: could not read thread %s in %s: %s", thread_ts, channel, reason)
            return []
        return messages

    async def _read(self, message: Mapping[str, Any], me: Me, asker: str) -> list[Said]:
        """A message as the conversation reads it, newest first: an ``/ask`` answer is the
        answer, then the question its first line names; another bot's or Slack's own, none."""
        if me.wrote(message):
            body, footer = split_status(plain_markdown(message.get("text", "")))
            asked = read_asked(body)  # who asked what: Slack keeps no slash command
            answer = Said(
                plain(body[asked.end() if asked else 0 :], me), by_bot=True, footer=footer
            )
            return [answer, await self._asked(asked, asker)] if asked else [answer]
        user = message.get("user")
        if not user or message.get("bot_id") or message.get("subtype"):
            return []
        name = await self.people.display_name(user)
        return [Said(plain(message.get("text", ""), me), user, name)]

    async def _asked(self, heading: re.Match[str], asker: str) -> Said:
        """The question an ``/ask`` answer's first line names; by ``asker`` if the name is
        theirs (the line has only the name)."""
        name = unescape(heading["name"])
        asker_name = await self.people.display_name(asker)
        by_asker = name == " ".join(asker_name.replace("*", "").split())[: len(name)]
        return Said(unescape(heading["question"]), asker if by_asker else name, name)
