"""The Slack adapter: a mention or ``/ask`` asks, :octagonal_sign: stops, ``/rescrape`` rebuilds.

Bolt parses and verifies what Slack sends; this module turns it into ``ConciergeClient`` calls
and hands each session to the shared ``Renderer`` through a ``SlackSink``. Listeners only check
and start: each answer runs in a task of its own, so Slack is acknowledged at once (slash
commands must be within 3 s) and Bolt's scheduling never decides how long an answer may take.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Coroutine
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import SecretStr
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext, AsyncRespond
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from bots.answering import send_and_show
from bots.client import AskRefused, ConciergeClient
from bots.renderer import Renderer, Status
from bots.session import Session
from bots.slack_format import BODY_CHARS, STOP_REACTION, question_from_mention, unescape
from bots.slack_http import serve_http
from bots.slack_sink import SlackMessage, SlackSink
from config.settings import ConfigError, Settings

log = logging.getLogger(__name__)

RATE_LIMIT_RETRIES = 5  # chat.update answered "ratelimited": wait Retry-After, this many times
STOP_GRACE_S = 5.0  # at shutdown, how long answers get to show that they stopped
SHUTDOWN_USER = "concierge-shutdown"  # the user_id of the cancels sent when the bot stops
SEEN_MENTIONS_MAX = 1000  # remembered (channel, ts) of mentions, so Slack's retries are ignored

ASK_USAGE = "Ask me a question: `/ask what are the office hours?`"
MENTION_USAGE = "Ask me something after the mention, for example: what are the office hours?"
NOT_HERE = "I don't answer in this channel."
NOT_ADMIN = "Only admins can rebuild the knowledge base."
ENGINE_DOWN_REASON = "I can't reach the answering engine right now. Please try again later."
ENGINE_DOWN = f"⚠️ {ENGINE_DOWN_REASON}"


@dataclass(eq=False)
class Answer:
    """One session shown in Slack: who asked, and who stopped it (if anyone)."""

    session: Session
    asker_id: str
    stopped_by: str | None = None


class Answers:
    """Answers in progress, found by any message that belongs to them (question or reply)."""

    def __init__(self) -> None:
        self._by_message: dict[tuple[str, str], Answer] = {}

    def link(self, answer: Answer, channel: str, ts: str) -> None:
        self._by_message[(channel, ts)] = answer

    def find(self, channel: str, ts: str) -> Answer | None:
        return self._by_message.get((channel, ts))

    def unlink(self, answer: Answer) -> None:
        for key in [key for key, linked in self._by_message.items() if linked is answer]:
            del self._by_message[key]

    def active(self) -> list[Answer]:
        return list({id(answer): answer for answer in self._by_message.values()}.values())


def build_app(
    settings: Settings, web: AsyncWebClient, *, process_before_response: bool = False
) -> AsyncApp:
    """A Bolt app on ``web`` that waits out rate limits; requests are verified in HTTP mode."""
    if not any(isinstance(h, AsyncRateLimitErrorRetryHandler) for h in web.retry_handlers):
        web.retry_handlers.append(AsyncRateLimitErrorRetryHandler(RATE_LIMIT_RETRIES))
    secret = settings.slack_signing_secret
    return AsyncApp(
        name="concierge",
        client=web,
        signing_secret=secret.get_secret_value() if secret else "",
        process_before_response=process_before_response,
    )


class SlackAdapter:
    """Registers the listeners on ``app`` and follows every answer it starts."""

    def __init__(
        self,
        settings: Settings,
        client: ConciergeClient,
        app: AsyncApp,
        *,
        max_chars: int = BODY_CHARS,
    ) -> None:
        self.settings = settings
        self.client = client
        self.web = app.client
        self.max_chars = max_chars
        self.answers = Answers()
        self._seen_mentions: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._tasks: set[asyncio.Task[None]] = set()
        client.on_adopt = self.take_over
        app.event("app_mention")(self.on_mention)
        app.event("reaction_added")(self.on_reaction)
        app.command("/ask")(self.on_ask)
        app.command("/rescrape")(self.on_rescrape)

    # --- listeners: check, then start an answer ---

    async def on_mention(self, event: dict[str, Any], context: AsyncBoltContext) -> None:
        """A question in a channel: answered in the question's thread."""
        channel, ts = event.get("channel", ""), event.get("ts", "")
        if event.get("bot_id") or event.get("subtype") or not self._allowed(channel):
            return
        if not self._first_time(channel, ts):
            return  # Slack delivered it again
        thread_ts = event.get("thread_ts") or ts
        question = question_from_mention(event.get("text", ""), context.bot_user_id)
        if not question:
            await self._say(channel, thread_ts, MENTION_USAGE)
            return
        self._start(self._answer(question, event.get("user", ""), channel, thread_ts, ts))

    async def on_ask(self, ack: AsyncAck, command: dict[str, Any]) -> None:
        """``/ask question``: answered in the channel, continued in the answer's thread."""
        channel = command.get("channel_id", "")
        question = unescape(command.get("text", "")).strip()
        if not self._allowed(channel):
            await ack(text=NOT_HERE)
        elif not question:
            await ack(text=ASK_USAGE)
        else:
            await ack()
            self._start(self._answer(question, command.get("user_id", ""), channel, None))

    async def on_rescrape(
        self, ack: AsyncAck, command: dict[str, Any], respond: AsyncRespond
    ) -> None:
        """``/rescrape`` (admins): the engine rebuilds the knowledge base; progress is shown."""
        channel, user_id = command.get("channel_id", ""), command.get("user_id", "")
        if not self._allowed(channel):
            await ack(text=NOT_HERE)
            return
        await ack()
        if not await self.is_admin(user_id):
            await respond(text=NOT_ADMIN, response_type="ephemeral")
            return
        self._start(self._answer("", user_id, channel, None, kind="rescrape"))

    async def on_reaction(self, event: dict[str, Any]) -> None:
        """:octagonal_sign: on a question or an answer, by the asker or an admin, stops it."""
        item = event.get("item") or {}
        if event.get("reaction") != STOP_REACTION or item.get("type") != "message":
            return
        answer = self.answers.find(item.get("channel", ""), item.get("ts", ""))
        user_id = event.get("user", "")
        if answer is None or answer.stopped_by is not None:
            return
        if user_id != answer.asker_id and not await self.is_admin(user_id):
            log.info("slack: %s may not stop session %s", user_id, answer.session.session_id)
            return
        answer.stopped_by = user_id
        await self.client.cancel(answer.session, user_id)

    # --- answers ---

    async def _answer(
        self,
        question: str,
        user_id: str,
        channel: str,
        thread_ts: str | None,
        question_ts: str | None = None,
        kind: Literal["ask", "rescrape"] = "ask",
    ) -> None:
        """Post the placeholder, queue the request naming it, and render the answer."""
        try:
            session = await self.client.prepare(question, user_id, kind=kind)
        except AskRefused as refusal:
            await self._say(channel, thread_ts, f"⚠️ {refusal}")
            return
        except Exception:
            log.exception("slack: could not queue a %s from %s", kind, user_id)
            await self._say(channel, thread_ts, ENGINE_DOWN)
            return
        renderer, answer = self._renderer(session, channel, thread_ts, question_ts)

        def context_for(placeholder: SlackMessage | None) -> dict[str, str]:
            where = {"channel": channel, "thread": thread_ts or "", "question": question_ts or ""}
            return where | ({"message": placeholder.ts} if placeholder else {})

        answering = send_and_show(self.client, session, renderer, context_for, ENGINE_DOWN_REASON)
        await self._show(answer, answering)

    def take_over(self, session: Session, context: dict[str, str]) -> bool:
        """An answer asked before this process started (same bot name): finish it in the
        message its request named. False if the context names no message."""
        channel, ts = context.get("channel", ""), context.get("message", "")
        if not channel or not ts:
            return False
        thread_ts = context.get("thread") or None
        renderer, answer = self._renderer(session, channel, thread_ts, context.get("question"))
        first = SlackMessage(channel, ts, thread_ts)
        self.answers.link(answer, channel, ts)
        renderer.adopt(first)
        self._start(self._show(answer, renderer.follow(session)))
        return True

    def _renderer(
        self, session: Session, channel: str, thread_ts: str | None, question_ts: str | None
    ) -> tuple[Renderer, Answer]:
        """The renderer of one answer, its question and messages linked for the stop reaction."""
        answer = Answer(session, session.user_id)
        if question_ts:
            self.answers.link(answer, channel, question_ts)

        def on_post(message: SlackMessage) -> None:
            self.answers.link(answer, message.channel, message.ts)

        sink = SlackSink(self.web, channel, thread_ts, on_post)
        renderer = Renderer(
            sink, max_chars=self.max_chars, edit_interval_s=self.settings.slack_edit_interval_s
        )
        return renderer, answer

    async def _show(self, answer: Answer, shown: Awaitable[Status]) -> None:
        try:
            with self.client.showing(answer.session):
                status = await shown
        finally:
            self.answers.unlink(answer)
        log.info("slack: session %s ended: %s", answer.session.session_id, status)

    async def is_admin(self, user_id: str) -> bool:
        """Listed in ``admin_user_ids``, or a workspace admin or owner as ``users.info`` says."""
        if user_id in self.settings.admin_user_ids:
            return True
        try:
            response = await self.web.users_info(user=user_id)
        except SlackApiError as error:
            log.warning("slack: users.info for %s failed: %s", user_id, error.response["error"])
            return False
        user = response.get("user") or {}
        return bool(user.get("is_admin") or user.get("is_owner"))

    async def close(self, grace_s: float = STOP_GRACE_S) -> None:
        """Stop every answer in progress, give them ``grace_s`` to show it, then end them. A
        bot with a stable name (``CONCIERGE_BOT_NAME``) leaves them to its next process."""
        if self.client.named:
            try:
                await self.client.detach()
            except Exception as error:  # the broker may be gone; the replies wait anyway
                log.warning("slack: could not hand the answers over: %s", error)
        else:
            for answer in self.answers.active():
                if answer.stopped_by is None:
                    answer.stopped_by = SHUTDOWN_USER
                    with suppress(Exception):
                        await self.client.cancel(answer.session, SHUTDOWN_USER)
        if self._tasks:
            _, pending = await asyncio.wait(self._tasks, timeout=grace_s)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    # --- small pieces ---

    def _allowed(self, channel: str) -> bool:
        allowed = self.settings.allowed_channel_ids
        return not allowed or channel in allowed

    def _first_time(self, channel: str, ts: str) -> bool:
        key = (channel, ts)
        if key in self._seen_mentions:
            return False
        self._seen_mentions[key] = None
        if len(self._seen_mentions) > SEEN_MENTIONS_MAX:
            self._seen_mentions.popitem(last=False)
        return True

    def _start(self, answer: Coroutine[Any, Any, None]) -> None:
        """Run one answer in a task of its own (a listener must return at once)."""
        task = asyncio.create_task(answer)
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("slack: an answer failed", exc_info=task.exception())

    async def _say(self, channel: str, thread_ts: str | None, text: str) -> None:
        try:
            await self.web.chat_postMessage(channel=channel, thread_ts=thread_ts, text=text)
        except SlackApiError as error:
            log.warning("slack: could not post in %s: %s", channel, error.response["error"])


async def run_slack(
    settings: Settings, stop: asyncio.Event, *, web: AsyncWebClient | None = None
) -> None:
    """Run the Slack bot until ``stop`` is set: Socket Mode by default, HTTP if configured.

    ``web`` replaces the Web API client (tests in this process use one of their own).
    """
    bot_token = _required(settings.slack_bot_token, "slack_bot_token")
    socket_mode = settings.slack_mode == "socket"
    if socket_mode:
        app_token = _required(settings.slack_app_token, "slack_app_token")
    else:
        _required(settings.slack_signing_secret, "slack_signing_secret")
    web = web or AsyncWebClient(token=bot_token, base_url=settings.slack_api_url)
    await _check_bot_token(web)
    client = ConciergeClient(settings, "slack")
    app = build_app(settings, web)
    adapter = SlackAdapter(settings, client, app)  # before replies flow: it takes over answers
    async with client:
        try:
            if socket_mode:
                await _serve_socket_mode(app, app_token, stop)
            else:
                await serve_http(app, settings.slack_http_port, stop)
        finally:
            await adapter.close()


async def _serve_socket_mode(app: AsyncApp, app_token: str, stop: asyncio.Event) -> None:
    """Hold a Socket Mode connection (no public URL needed) until ``stop`` is set."""
    handler = AsyncSocketModeHandler(app, app_token=app_token)
    await handler.connect_async()
    log.info("slack: connected in Socket Mode")
    try:
        await stop.wait()
    finally:
        await handler.close_async()


async def _check_bot_token(web: AsyncWebClient) -> None:
    """Fail at startup, naming the setting, if Slack refuses the bot token."""
    try:
        identity = await web.auth_test()
    except SlackApiError as error:
        reason = error.response.get("error", "refused")
        raise ConfigError(
            f"slack_bot_token (CONCIERGE_SLACK_BOT_TOKEN): Slack says {reason}"
        ) from None
    log.info("slack: signed in as %s in team %s", identity.get("user"), identity.get("team_id"))


def _required(secret: SecretStr | None, field: str) -> str:
    if secret is None or not secret.get_secret_value():
        raise ConfigError(f"{field} (CONCIERGE_{field.upper()}): required for the Slack bot")
    return secret.get_secret_value()
