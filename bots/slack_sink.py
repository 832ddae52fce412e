"""The ``Stage`` of a Slack answer: ``chat.postMessage`` posts, ``chat.update`` edits."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from slack_sdk.web.async_client import AsyncWebClient

from bots.renderer import MessageContent
from bots.slack_format import message_text

# Every message is literal text (parse="none", link_names=False), and nothing the model wrote
# is unfurled (unfurl_links, unfurl_media): both are passed by name below, so mypy checks them.


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
    channel), continuations in its thread. ``question`` is the mention asked in, if any."""

    def __init__(
        self,
        web: AsyncWebClient,
        channel: str,
        thread_ts: str | None,
        question: SlackMessage | None = None,
    ) -> None:
        self.web = web
        self.channel = channel
        self.thread_ts = thread_ts
        self.question = question
        self.on_post: Callable[[SlackMessage], None] = lambda _: None

    def key(self, message: SlackMessage) -> tuple[str, str]:
        return message.channel, message.ts

    def place(self, placeholder: SlackMessage) -> dict[str, str]:
        return {"message": placeholder.ts}

    async def post(self, content: MessageContent, after: SlackMessage | None) -> SlackMessage:
        thread_ts = after.thread if after is not None else self.thread_ts
        response = await self.web.chat_postMessage(
            channel=self.channel,
            thread_ts=thread_ts,
            text=message_text(content),
            parse="none",
            link_names=False,
            unfurl_links=False,
            unfurl_media=False,
        )
        message = SlackMessage(response["channel"], response["ts"], thread_ts)
        self.on_post(message)
        return message

    async def edit(self, handle: SlackMessage, content: MessageContent) -> None:
        text = message_text(content)
        await self.web.chat_update(
            channel=handle.channel, ts=handle.ts, text=text, parse="none", link_names=False
        )

    async def ended(self, first: SlackMessage | None) -> None:
        """Nothing to take back: Slack shows no stop button of the bot's own."""
