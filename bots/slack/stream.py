"""An answer streamed into Slack (``chat.startStream`` / ``appendStream`` / ``stopStream``), and
when to fall back to ``chat.update``.

How a streamed answer fits the ``Renderer``'s two calls (``SlackSink`` makes them):

- ``post`` of the placeholder starts the stream, empty, in the question's thread: it is the
  answer's first message, so the request's context names it, the 🛑 goes on it, and a stop on
  it finds the answer. While it waits, the thread's status says where it is in the queue
  (``slack_status``; set after the stream starts, since Slack clears it when the app replies).
- each ``edit`` appends what the text grew by, up to its last space or newline while more may
  come: a message that overflows is cut there (``split_text``), so what was streamed is kept.
  The renderer already throttles edits.
- a message ends when it is the last one and the answer is over, or when a continuation follows
  it (past ``BODY_CHARS``): ``chat.stopStream`` adds the rest, the status line ("✅ done") and,
  on a done answer, the feedback buttons. A continuation is a stream of its own.
- a stream is append-only, so the running status lines ("⏳ queued", "✍️ answering…") are not
  written in it: the thread status and Slack's own streaming indicator say it instead.

The fallback keeps the final text exact: ``startStream`` refused (the app or workspace does not
allow it, say) or unanswered → the answer is posted and updated as before (an error about the
app rather than the place turns streaming off for ``FEATURE_RETRY_S``; no answer, for that
answer only, and a stream Slack started all the same is left to expire: its ts is unknown);
``appendStream`` or ``stopStream`` refused or unanswered (the stream expired, as Slack's do
after some minutes, Slack's stop control ended it, or the network failed: an append may have
landed, so it is not sent again), or a text that no longer extends what was streamed (the
engine's final text differs from its tokens) → the stream is stopped if it still runs and the
message is rewritten whole with ``chat.update``. Only replies in a thread stream (Slack streams
replies to a request): an ``/ask`` answer in the channel is updated. A message taken over after
a restart is updated too; its stream, if the last process left one running, is stopped first.

slack-sdk's ``chat_stream`` helper is not used: it buffers by size and starts the stream on its
first flush, while the placeholder must exist (with its ts) before the request is sent, and the
renderer already decides when to write.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from config.errors import ConciergeError

log = logging.getLogger(__name__)

FEATURE_RETRY_S = 600.0  # after Slack refused a feature to the app, try again this much later
# Errors that are about this place, not the app: the feature stays on.
PLACE_ERRORS = frozenset(
    {
        "channel_not_found",
        "not_in_channel",
        "is_archived",
        "invalid_thread_ts",
        "thread_not_found",
        "restricted_action",
        "restricted_action_read_only_channel",
        "restricted_action_thread_only_channel",
        "ratelimited",
    }
)
# What the SDK raises when Slack did not answer at all: the connection failed or was cut
# (aiohttp's errors) or the client's timeout ran out (TimeoutError, an OSError too).
OUT_OF_REACH: tuple[type[Exception], ...] = (aiohttp.ClientError, OSError)


class StreamRefused(ConciergeError):
    """Slack answered ``chat.startStream`` ok, but without what a stream needs: handled like a
    refusal (the message is posted instead), never shown to a person."""


class StreamBroken(ConciergeError):
    """The stream cannot show the text any more; the message is to be rewritten whole (by the
    sink, which catches it: it never reaches a person)."""


@dataclass
class Feature:
    """Whether one of Slack's optional features (streaming, the thread status, the agent
    session) works for this app, as far as this process has seen (one each per bot).
    ``name`` and ``instead`` are how the log calls it and what answers do without it."""

    name: str
    instead: str = "answers go on without it"
    off_until: float = float("-inf")
    _said: set[str] = field(default_factory=set)

    def allowed(self) -> bool:
        return time.monotonic() >= self.off_until

    def refused(self, error: str) -> None:
        """Slack answered ``error``: logged once a kind; the feature is off for
        ``FEATURE_RETRY_S`` unless the error is about the place."""
        if error not in self._said:
            self._said.add(error)
            log.info("slack: %s refused (%s); %s", self.name, error, self.instead)
        if error not in PLACE_ERRORS:
            self.off_until = time.monotonic() + FEATURE_RETRY_S


@dataclass
class MessageStream:
    """One streamed message: what it has shown so far (``sent``, Markdown) and whether it
    still streams."""

    web: AsyncWebClient
    channel: str
    ts: str
    sent: str = ""
    live: bool = True

    @classmethod
    async def start(
        cls,
        web: AsyncWebClient,
        channel: str,
        thread_ts: str,
        markdown: str,
        *,
        recipient: tuple[str, str],
        username: str | None = None,
    ) -> MessageStream:
        """A new message in ``thread_ts`` showing ``markdown`` (may be empty); raises
        ``SlackApiError`` if Slack refuses, one of ``OUT_OF_REACH`` if it does not answer.
        ``recipient`` is the asker's (user, team): Slack needs them to stream in a channel.
        ``username`` is the persona's name (Slack's reference lists it for streams; where
        Slack ignores it, the app's own name shows)."""
        user, team = recipient
        response = await web.chat_startStream(
            channel=channel,
            thread_ts=thread_ts,
            markdown_text=markdown or None,
            recipient_user_id=user or None,
            recipient_team_id=team or None,
            username=username,
        )
        ts = response.get("ts")
        if not isinstance(ts, str) or not ts:  # "ok", yet no message to stream into
            raise StreamRefused("chat.startStream answered without a ts")
        return cls(web, response.get("channel") or channel, ts, sent=markdown)

    async def show(
        self, markdown: str, *, end: str | None = None, blocks: list[dict[str, Any]] | None = None
    ) -> None:
        """Show ``markdown``, which must extend what was sent; ``end`` (the rest, after the
        text) stops the stream, with ``blocks`` below. Raises ``StreamBroken``."""
        if not markdown.startswith(self.sent):
            raise StreamBroken("the text no longer extends what was streamed")
        grown = markdown[len(self.sent) :]
        try:
            if end is not None:
                await self.web.chat_stopStream(
                    channel=self.channel,
                    ts=self.ts,
                    markdown_text=grown + end or None,
                    blocks=blocks or None,
                )
                self.live = False
            elif grown:
                await self.web.chat_appendStream(
                    channel=self.channel, ts=self.ts, markdown_text=grown
                )
        except SlackApiError as error:
            raise StreamBroken(str(error.response.get("error", "unknown"))) from None
        except Exception as error:  # unanswered (timeout, connection): it may have landed
            raise StreamBroken(f"no answer: {error!r}") from None
        self.sent = markdown

    async def abandon(self) -> None:
        """Stop the stream if it may still run, whatever Slack says (the message is about
        to be rewritten with ``chat.update``)."""
        if self.live:
            self.live = False
            await stop_quietly(self.web, self.channel, self.ts)


async def stop_quietly(web: AsyncWebClient, channel: str, ts: str) -> None:
    """``chat.stopStream`` on a message that may be streaming (a refusal means it was not)."""
    try:
        await web.chat_stopStream(channel=channel, ts=ts)
    except SlackApiError as error:
        log.debug("slack: no stream to stop on %s: %s", ts, error.response.get("error"))
    except Exception as error:  # out of reach: the rewrite that follows says whether it ran
        log.info("slack: could not stop the stream on %s: %r", ts, error)
