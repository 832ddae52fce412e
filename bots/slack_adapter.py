"""The Slack adapter: a mention or ``/ask`` asks, :octagonal_sign: stops, ``/rescrape`` rebuilds.

Bolt parses and verifies what Slack sends; this module turns it into an ``Ask`` or a stop for
the shared ``Answers``, which shows each answer through a ``SlackSink``. Listeners only check
and start: each answer runs in a task of its own, so Slack is acknowledged at once (slash
commands must be within 3 s) and Bolt's scheduling never decides how long an answer may take.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext, AsyncRespond
from slack_sdk.errors import SlackApiError

from bots.answers import NOT_ADMIN_TEXT, NOT_HERE_TEXT, SHUTDOWN_GRACE_S, Answers
from bots.ask import Ask, Kind
from bots.client import ConciergeClient
from bots.history import History
from bots.slack_format import (
    BODY_CHARS,
    STOP_REACTION,
    asked_line,
    question_from_mention,
    unescape,
)
from bots.slack_history import Me, SlackConversations
from bots.slack_sink import SlackMessage, SlackSink, TellAsker, display_name
from config.settings import Settings

log = logging.getLogger(__name__)

SEEN_MENTIONS_MAX = 1000  # remembered (channel, ts) of mentions, so Slack's retries are ignored

ASK_USAGE = "Ask me a question: `/ask what are the office hours?`"
MENTION_USAGE = "Ask me something after the mention, for example: what are the office hours?"


class SlackAdapter:
    """Registers the listeners on ``app``; ``answers`` follows every answer they start."""

    def __init__(
        self,
        settings: Settings,
        client: ConciergeClient,
        app: AsyncApp,
        *,
        max_chars: int = BODY_CHARS,
    ) -> None:
        self.settings = settings
        self.web = app.client
        self.answers = Answers[tuple[str, str]](
            client,
            resume=self._resume,
            max_chars=max_chars,
            edit_interval_s=settings.slack_edit_interval_s,
        )
        self.conversations = SlackConversations(
            self.web,
            max_turns=settings.history_max_messages,
            max_chars=settings.history_max_chars,
        )
        self._seen_mentions: OrderedDict[tuple[str, str], None] = OrderedDict()
        app.event("app_mention")(self.on_mention)
        app.event("message")(self.on_message)
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
        history = await self._history(event, context) if event.get("thread_ts") else None
        self._answer(question, event.get("user", ""), channel, thread_ts, ts, history=history)

    async def on_message(self, event: dict[str, Any], context: AsyncBoltContext) -> None:
        """With ``slack_thread_followups``: a plain message in a thread the bot answered in asks
        a follow-up (a mention is ``on_mention``'s)."""
        channel, ts = event.get("channel", ""), event.get("ts", "")
        thread_ts = event.get("thread_ts")
        if not self.settings.slack_thread_followups or not thread_ts or thread_ts == ts:
            return
        if event.get("bot_id") or event.get("subtype") or not self._allowed(channel):
            return
        text, me = event.get("text", ""), context.bot_user_id
        if me and f"<@{me}" in text and event.get("channel_type") != "im":
            return  # Slack sends it as an app_mention too
        question = question_from_mention(text, me)
        if not question or not self._first_time(channel, ts):
            return
        history = await self._history(event, context)
        if history is not None:  # else the bot has not answered in this thread
            self._answer(question, event.get("user", ""), channel, thread_ts, ts, history=history)

    async def on_ask(self, ack: AsyncAck, command: dict[str, Any], respond: AsyncRespond) -> None:
        """``/ask question``: answered in the channel, under who asked what, continued in the
        answer's thread. Whatever goes wrong is told to the asker alone (``respond``)."""
        channel, user_id = command.get("channel_id", ""), command.get("user_id", "")
        question = unescape(command.get("text", "")).strip()
        if not self._allowed(channel):
            await ack(text=NOT_HERE_TEXT)
        elif not question:
            await ack(text=ASK_USAGE)
        else:
            await ack()
            name = await display_name(self.web, user_id, command.get("user_name", ""))

            async def tell(text: str) -> None:
                await respond(text=text, response_type="ephemeral")

            heading = asked_line(name, question)
            self._answer(question, user_id, channel, None, heading=heading, tell=tell)

    async def on_rescrape(
        self, ack: AsyncAck, command: dict[str, Any], respond: AsyncRespond
    ) -> None:
        """``/rescrape`` (admins): the engine rebuilds the knowledge base; progress is shown."""
        channel, user_id = command.get("channel_id", ""), command.get("user_id", "")
        if not self._allowed(channel):
            await ack(text=NOT_HERE_TEXT)
            return
        await ack()
        if not await self.is_admin(user_id):
            await respond(text=NOT_ADMIN_TEXT, response_type="ephemeral")
            return
        self._answer("", user_id, channel, None, kind="rescrape")

    async def on_reaction(self, event: dict[str, Any]) -> None:
        """:octagonal_sign: on a question or an answer, by the asker or an admin, stops it."""
        item = event.get("item") or {}
        if event.get("reaction") != STOP_REACTION or item.get("type") != "message":
            return
        user_id = event.get("user", "")
        message = (item.get("channel", ""), item.get("ts", ""))
        await self.answers.stop(message, user_id, lambda: self.is_admin(user_id))

    # --- answers ---

    def _answer(
        self,
        question: str,
        user_id: str,
        channel: str,
        thread_ts: str | None,
        question_ts: str | None = None,
        kind: Kind = "ask",
        *,
        heading: str = "",
        tell: TellAsker | None = None,
        history: History | None = None,
    ) -> None:
        """Start answering in ``channel`` (in ``thread_ts`` if given); ``tell`` (else a
        message in the channel) gives the asker a refusal."""
        place = {"channel": channel, "thread": thread_ts or "", "question": question_ts or ""}
        place |= {"heading": heading} if heading else {}
        history = history or History()
        ask = Ask(question, user_id, kind, place, history.turns, history.cut)
        stage = self._stage(place, tell)
        self.answers.start(ask, stage, tell or (lambda text: self._say(channel, thread_ts, text)))

    def _stage(self, place: Mapping[str, str], tell: TellAsker | None = None) -> SlackSink:
        """Where an answer goes: ``place`` names the channel, the thread and the question (and
        after a restart, the first message)."""
        channel, thread_ts = place["channel"], place.get("thread") or None
        question_ts = place.get("question")
        question = SlackMessage(channel, question_ts, thread_ts) if question_ts else None
        heading, first = place.get("heading", ""), place.get("message")
        sink = SlackSink(self.web, channel, thread_ts, question, heading=heading, first_ts=first)
        sink.tell_asker = tell
        return sink

    def _resume(self, context: Mapping[str, str]) -> tuple[SlackSink, SlackMessage] | None:
        """The stage and first message of an answer asked before a restart, from its context."""
        channel, ts = context.get("channel", ""), context.get("message", "")
        if not channel or not ts:
            return None
        return self._stage(context), SlackMessage(channel, ts, context.get("thread") or None)

    async def _history(self, event: dict[str, Any], context: AsyncBoltContext) -> History | None:
        """The thread's conversation before ``event``'s message; None if the bot has not
        answered in that thread."""
        me = Me(context.bot_user_id or "", context.bot_id or "")
        channel, ts = event.get("channel", ""), event.get("ts", "")
        thread_ts, asker = event.get("thread_ts") or ts, event.get("user", "")
        return await self.conversations.history(channel, thread_ts, ts, asker=asker, me=me)

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

    async def close(self, grace_s: float = SHUTDOWN_GRACE_S) -> None:
        """Stop every answer in progress (a named bot hands them over instead)."""
        await self.answers.close(grace_s)

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

    async def _say(self, channel: str, thread_ts: str | None, text: str) -> None:
        try:
            await self.web.chat_postMessage(channel=channel, thread_ts=thread_ts, text=text)
        except SlackApiError as error:
            log.warning("slack: could not post in %s: %s", channel, error.response["error"])
