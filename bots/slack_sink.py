"""The Renderer's ``MessageSink`` for Slack: ``chat.postMessage`` posts, ``chat.update`` edits."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from slack_sdk.web.async_client import AsyncWebClient

from bots.renderer import MessageContent
from bots.slack_format import message_text

# Every message is literal text: Slack must neither link names nor unfurl what the model wrote.
LITERAL = {"parse": "none", "link_names": False}
NO_UNFURL = {"unfurl_links": False, "unfurl_media": False}


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
    """Posts the first message in ``thread_ts`` (or in the channel), continuations in its thread.

    ``on_post`` hears of every message posted, so a reaction on any of them can be traced back.
    """

    def __init__(
        self,
        web: AsyncWebClient,
        channel: str,
        thread_ts: str | None,
        on_post: Callable[[SlackMessage], None] = lambda _: None,
    ) -> None:
        self.web = web
        self.channel = channel
        self.thread_ts = thread_ts
        self.on_post = on_post

    async def post(self, content: MessageContent, after: SlackMessage | None) -> SlackMessage:
        thread_ts = after.thread if after is not None else self.thread_ts
        response = await self.web.chat_postMessage(
            channel=self.channel,
            thread_ts=thread_ts,
            text=message_text(content),
            **LITERAL,
            **NO_UNFURL,
        )
        message = SlackMessage(response["channel"], response["ts"], thread_ts)
        self.on_post(message)
        return message

    async def edit(self, handle: SlackMessage, content: MessageContent) -> None:
        await self.web.chat_update(
            channel=handle.channel, ts=handle.ts, text=message_text(content), **LITERAL
        )
