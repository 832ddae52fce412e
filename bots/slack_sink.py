"""The ``Stage`` of a Slack answer: ``chat.postMessage`` posts, ``chat.update`` edits, and the
bot's own :octagonal_sign: on the first message shows how to stop it (as 🛑 on Discord)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bots.renderer import MessageContent
from bots.slack_format import HEADING_SEPARATOR, STOP_REACTION, cannot_post_text, message_text

log = logging.getLogger(__name__)

# Every message is literal text (parse="none", link_names=False), and nothing the model wrote
# is unfurled (unfurl_links, unfurl_media): both are passed by name below, so mypy checks them.

TellAsker = Callable[[str], Awaitable[object]]  # a word for the asker alone (ephemeral)


@dataclass(frozen=True)
class SlackMessage:
    """A message the bot posted: where it is, and the thread it belongs to (if any)."""

    channel: str
    ts: str
    thread_ts: str | None

    @property
    def thread(self) -> str:
        """The thread that continuations go to: this message's own, or the one it is in."""
        return self.thread_ts or self.ts


class SlackSink:
    """The ``Stage`` of one answer: posts the first message in ``thread_ts`` (or in the
    channel), continuations in its thread. ``question`` is the mention asked in, if any.

    ``heading`` (an ``/ask``'s "who asked what") opens the first message, ``first_ts``
    (known after a restart). ``tell_asker`` hears why the first message could not be posted.
    """

    def __init__(
        self,
        web: AsyncWebClient,
        channel: str,
        thread_ts: str | None,
        question: SlackMessage | None = None,
        *,
        heading: str = "",
        first_ts: str | None = None,
        tell_asker: TellAsker | None = None,
    ) -> None:
        self.web = web
        self.channel = channel
        self.thread_ts = thread_ts
        self.question = question
        self.heading = heading
        self.first_ts = first_ts
        self.tell_asker = tell_asker
        self.on_post: Callable[[SlackMessage], None] = lambda _: None

    def key(self, message: SlackMessage) -> tuple[str, str]:
        return message.channel, message.ts

    def place(self, placeholder: SlackMessage) -> dict[str, str]:
        return {"message": placeholder.ts}

    async def post(self, content: MessageContent, after: SlackMessage | None) -> SlackMessage:
        thread_ts = after.thread if after is not None else self.thread_ts
        try:
            response = await self.web.chat_postMessage(
                channel=self.channel,
                thread_ts=thread_ts,
                text=self._text(content, first=after is None),
                parse="none",
                link_names=False,
                unfurl_links=False,
                unfurl_media=False,
            )
        except SlackApiError as error:
            if after is None:  # no answer at all: the asker must hear why, and what to do
                await self._tell_asker(error.response.get("error", "unknown"))
            raise
        message = SlackMessage(response["channel"], response["ts"], thread_ts)
        self.on_post(message)
        if after is None:
            self.first_ts = message.ts
            await self._stop_button(message, add=True)
        return message

    async def edit(self, handle: SlackMessage, content: MessageContent) -> None:
        text = self._text(content, first=handle.ts == self.first_ts)
        await self.web.chat_update(
            channel=handle.channel, ts=handle.ts, text=text, parse="none", link_names=False
        )

    async def ended(self, first: SlackMessage | None) -> None:
        """Take the bot's own :octagonal_sign: off the first message: nothing left to stop."""
        if first is not None:
            await self._stop_button(first, add=False)

    def _text(self, content: MessageContent, *, first: bool) -> str:
        text = message_text(content)
        return f"{self.heading}{HEADING_SEPARATOR}{text}" if first and self.heading else text

    async def _stop_button(self, message: SlackMessage, *, add: bool) -> None:
        change = self.web.reactions_add if add else self.web.reactions_remove
        try:
            await change(channel=message.channel, timestamp=message.ts, name=STOP_REACTION)
        except SlackApiError as error:  # e.g. no reactions:write scope; the stop still works
            log.info("slack: could not change the stop button: %s", error.response.get("error"))

    async def _tell_asker(self, error: str) -> None:
        log.warning("slack: cannot post in %s: %s", self.channel, error)
        if self.tell_asker is None:
            return
        try:
            await self.tell_asker(cannot_post_text(error))
        except Exception as failure:  # the response URL expired, or Slack is down
            log.warning("slack: could not tell the asker why: %s", failure)


async def display_name(web: AsyncWebClient, user_id: str, fallback: str) -> str:
    """How Slack shows ``user_id`` (display name, else real name, from ``users.info``), else
    ``fallback`` (the slash command's ``user_name``), else the id."""
    try:
        response = await web.users_info(user=user_id)
    except SlackApiError as error:
        log.info("slack: users.info for %s failed: %s", user_id, error.response.get("error"))
        response = None
    user = (response.get("user") if response else None) or {}
    profile = user.get("profile") or {}
    return profile.get("display_name") or profile.get("real_name") or fallback or user_id
