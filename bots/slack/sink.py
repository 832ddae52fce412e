"""The ``Stage`` of a Slack answer: streamed into its thread where Slack allows it (see
``slack_stream`` for how the placeholder, the stream and the fallback fit together), else
posted with ``chat.postMessage`` and edited with ``chat.update``. The thread's status says what
an answer without text waits for (``slack_status``), the bot's own :octagonal_sign: on the
first message shows how to stop it (as 🛑 on Discord), and a done answer gets Slack's feedback
buttons (``slack_votes``). Each message it starts carries the space persona's name
(``username``; updates keep the name a message was posted with)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bots.renderer import FINAL_STATUSES, MessageContent, Status
from bots.slack.format import (
    FOOTER,
    HEADING_SEPARATOR,
    STOP_REACTION,
    cannot_post_text,
    message_text,
    section_blocks,
)
from bots.slack.markdown import stream_markdown
from bots.slack.status import ThreadStatus
from bots.slack.stream import (
    OUT_OF_REACH,
    Feature,
    MessageStream,
    StreamBroken,
    StreamRefused,
    stop_quietly,
)
from bots.slack.votes import vote_blocks
from config.texts import Locale

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


@dataclass
class Native:
    """Slack's features for AI apps, as far as one bot has seen them work: whether it may
    stream, set thread statuses and keep agent sessions (shared by all its answers)."""

    streaming: Feature = field(
        default_factory=lambda: Feature("streaming", "answers are updated in place instead")
    )
    statuses: Feature = field(default_factory=lambda: Feature("the thread status"))
    sessions: Feature = field(default_factory=lambda: Feature("the agent session"))
    # The first message of the answer that last started in each (channel, thread): what Slack's
    # stop control, which names the thread, means (an answer taken off when it ends).
    answering: dict[tuple[str, str], str] = field(default_factory=dict)


class SlackSink:
    """The ``Stage`` of one answer: its first message in ``thread_ts`` (or in the channel),
    continuations in its thread. ``question`` is the mention asked in, if any.

    ``heading`` (an ``/ask``'s "who asked what") opens the first message; ``first_ts`` is
    known for an answer taken over after a restart. ``tell_asker`` hears why the first message
    could not be posted. ``recipient`` is the asker's (user id, team id); ``votes`` puts the
    feedback buttons on the answer once it is done; ``native`` is the bot's shared state;
    ``username`` is the persona's name its messages show (None: the app's own).
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
        recipient: tuple[str, str] = ("", ""),
        votes: bool = False,
        native: Native | None = None,
        username: str | None = None,
    ) -> None:
        self.web = web
        self.channel = channel
        self.thread_ts = thread_ts
        self.question = question
        self.heading = heading
        self.first_ts = first_ts
        self.tell_asker = tell_asker
        self.recipient = recipient
        self.votes = votes
        self.native = native or Native()
        self.username = username
        self.on_post: Callable[[SlackMessage], None] = lambda _: None
        self.session_id = self.asker = ""  # set by ``Answers``, as the locale
        self.locale: Locale = "en"
        # Streamed: in a thread, a new answer (a taken-over one is updated), where Slack lets.
        self.streaming = bool(thread_ts) and first_ts is None
        self.streams: dict[str, MessageStream] = {}  # by ts: every message streamed
        self.status = (
            ThreadStatus(
                web,
                channel,
                thread_ts,
                asker=recipient[0],
                statuses=self.native.statuses,
                sessions=self.native.sessions,
                resumed=first_ts is not None,
            )
            if thread_ts
            else None
        )
        self._left_streaming = first_ts  # a taken-over message may still stream: stop it first

    def key(self, message: SlackMessage) -> tuple[str, str]:
        return message.channel, message.ts

    def place(self, placeholder: SlackMessage) -> dict[str, str]:
        return {"message": placeholder.ts}

    # --- the MessageSink ----------------------------------------------------------------------

    async def post(self, content: MessageContent, after: SlackMessage | None) -> SlackMessage:
        thread_ts = after.thread if after is not None else self.thread_ts
        stream = await self._start_stream(content, thread_ts)
        if stream is not None:
            message = SlackMessage(stream.channel, stream.ts, thread_ts)
        else:
            message = await self._post_message(content, after, thread_ts)
        self.on_post(message)
        if after is None:
            self.first_ts = message.ts
            if self.thread_ts:
                self.native.answering[(self.channel, self.thread_ts)] = message.ts
        try:  # the message exists: raising would make the renderer post it again
            if after is None:
                await self._stop_button(message, add=True)
            if stream is not None:
                await self._show_streamed(message, stream, content)
            await self._show_status(content)
        except Exception as error:
            log.warning("slack: a posted message was not finished: %r", error)
        return message

    async def edit(self, handle: SlackMessage, content: MessageContent) -> None:
        stream = self.streams.get(handle.ts)
        if stream is not None and stream.live:
            await self._show_streamed(handle, stream, content)
        else:
            await self._update(handle, content)
        await self._show_status(content)

    async def ended(self, first: SlackMessage | None) -> None:
        """Take the bot's own :octagonal_sign: off the first message: nothing left to stop."""
        if self.status is not None:
            await self.status.close()
        if first is not None and self.thread_ts:
            where = (self.channel, self.thread_ts)
            if self.native.answering.get(where) == first.ts:
                del self.native.answering[where]
        if first is not None:
            await self._stop_button(first, add=False)
            if self._left_streaming == first.ts:  # taken over, and never rewritten
                await stop_quietly(self.web, first.channel, first.ts)

    # --- streamed -----------------------------------------------------------------------------

    async def _start_stream(
        self, content: MessageContent, thread_ts: str | None
    ) -> MessageStream | None:
        """A new streamed message showing ``content``'s text; None where Slack does not
        stream (then the message is posted)."""
        if not self.streaming or thread_ts is None or not self.native.streaming.allowed():
            return None
        markdown = stream_markdown(_streamable(content))
        try:
            stream = await MessageStream.start(
                self.web,
                self.channel,
                thread_ts,
                markdown,
                recipient=self.recipient,
                username=self.username,
            )
        except SlackApiError as error:
            self.native.streaming.refused(str(error.response.get("error", "unknown")))
            self.streaming = False  # this answer's next messages are posted
            return None
        except StreamRefused as error:
            self.native.streaming.refused(str(error))
            self.streaming = False
            return None
        except OUT_OF_REACH as error:
            # No answer, so the message is posted instead (and the answer's next ones, with no
            # second wait on a Slack out of reach); streaming stays on for other answers. Slack
            # may have started the stream all the same: its ts never came back, so that empty
            # message can be neither stopped nor rewritten (Slack ends a stream left alone).
            log.info("slack: no answer to chat.startStream (%r); the message is posted", error)
            self.streaming = False
            return None
        self.streams[stream.ts] = stream
        return stream

    async def _show_streamed(
        self, handle: SlackMessage, stream: MessageStream, content: MessageContent
    ) -> None:
        """Append what ``content`` adds; stop the stream when the message is complete. A
        stream that cannot show it is stopped, and the message rewritten whole."""
        end = self._markdown_footer(content) if _ends(content) else None
        markdown = stream_markdown(_streamable(content))
        try:
            await stream.show(markdown, end=end, blocks=self._votes(content))
        except StreamBroken as broken:
            log.info("slack: a stream ended early (%s); its message is updated instead", broken)
            await stream.abandon()
            await self._update(handle, content)

    def _markdown_footer(self, content: MessageContent) -> str:
        """The status line as the end of a streamed message."""
        return stream_markdown(FOOTER.after(content.body, content.footer))

    # --- posted and updated -------------------------------------------------------------------

    async def _post_message(
        self, content: MessageContent, after: SlackMessage | None, thread_ts: str | None
    ) -> SlackMessage:
        try:
            response = await self.web.chat_postMessage(
                channel=self.channel,
                thread_ts=thread_ts,
                text=self._text(content, first=after is None),
                parse="none",
                link_names=False,
                unfurl_links=False,
                unfurl_media=False,
                username=self.username,
            )
        except SlackApiError as error:
            if after is None:  # no answer at all: the asker must hear why, and what to do
                await self._tell_asker(error.response.get("error", "unknown"))
            raise
        return SlackMessage(response["channel"], response["ts"], thread_ts)

    async def _update(self, handle: SlackMessage, content: MessageContent) -> None:
        """Rewrite ``handle`` to show ``content`` (text, then the feedback buttons if done)."""
        if self._left_streaming == handle.ts:  # taken over: the last process's stream ends
            self._left_streaming = None
            await stop_quietly(self.web, handle.channel, handle.ts)
        text = self._text(content, first=handle.ts == self.first_ts)
        votes = self._votes(content)
        await self.web.chat_update(
            channel=handle.channel,
            ts=handle.ts,
            text=text,
            blocks=section_blocks(text) + votes if votes else None,
            parse="none",
            link_names=False,
        )

    def _text(self, content: MessageContent, *, first: bool) -> str:
        text = message_text(content)
        return f"{self.heading}{HEADING_SEPARATOR}{text}" if first and self.heading else text

    # --- around the text ----------------------------------------------------------------------

    def _votes(self, content: MessageContent) -> list[dict[str, Any]]:
        """The feedback buttons, on a done answer's last message."""
        if not self.votes or content.status is not Status.DONE or not self.session_id:
            return []
        return vote_blocks(self.session_id, self.locale)

    async def _show_status(self, content: MessageContent) -> None:
        if self.status is not None:
            await self.status.show(content, self.locale)

    async def _stop_button(self, message: SlackMessage, *, add: bool) -> None:
        change = self.web.reactions_add if add else self.web.reactions_remove
        try:
            await change(channel=message.channel, timestamp=message.ts, name=STOP_REACTION)
        except SlackApiError as error:  # e.g. no reactions:write scope; the stop still works
            log.info("slack: could not change the stop button: %s", error.response.get("error"))
        except OUT_OF_REACH as error:  # a reaction left or missing is all it costs
            log.info("slack: no answer about the stop button: %r", error)

    async def _tell_asker(self, error: str) -> None:
        log.warning("slack: cannot post in %s: %s", self.channel, error)
        if self.tell_asker is None:
            return
        try:
            await self.tell_asker(cannot_post_text(error, self.locale))
        except Exception as failure:  # the response URL expired, or Slack is down
            log.warning("slack: could not tell the asker why: %s", failure)


def _ends(content: MessageContent) -> bool:
    """Whether ``content`` completes its message (a continuation follows, or it is over)."""
    return content.status is None or content.status in FINAL_STATUSES


def _streamable(content: MessageContent) -> str:
    """What of ``content``'s text may be streamed now: all of it once the message is complete,
    else up to its last space or newline, which ``split_text`` keeps in this message if the
    text overflows (a stream cannot take back what it showed)."""
    if _ends(content):
        return content.body
    return content.body[: max(content.body.rfind(" "), content.body.rfind("\n")) + 1]
