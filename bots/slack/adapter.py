"""The Slack adapter: a mention or ``/ask`` asks, :octagonal_sign: or Slack's stop control stops,
a feedback button votes, ``/rescrape`` rebuilds.

Bolt parses and verifies what Slack sends; this module turns it into an ``Ask`` or a stop for
the shared ``Answers``, which shows each answer through a ``SlackSink``. Listeners only check
and start: each answer runs in a task of its own, so Slack is acknowledged at once (slash
commands must be within 3 s) and Bolt's scheduling never decides how long an answer may take.
Every text the bot writes itself is in the asker's language (``SlackPeople.locale``).

Each question, follow-up and ``/rescrape`` goes to the space of its place (``Access.space_at``:
its channel if a space names it, else its workspace's); the persona's ``bot_name`` is the
``username`` of the messages the bot posts there (Slack shows it with the
``chat:write.customize`` scope, and ignores it without).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from cachetools import LRUCache
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext, AsyncRespond
from slack_sdk.errors import SlackApiError

from bots.access import Access
from bots.answers import SHUTDOWN_GRACE_S, Answers, StopOutcome
from bots.ask import Ask, Kind
from bots.client import ConciergeClient
from bots.history import HISTORY_TURN_MAX_CHARS, History
from bots.slack.format import BODY_CHARS, STOP_REACTION, asked_line, question_from_mention, unescape
from bots.slack.history import Me, SlackConversations
from bots.slack.people import SlackPeople
from bots.slack.place import Where, team_of, workspace_of
from bots.slack.sink import Native, SlackMessage, SlackSink, TellAsker
from bots.slack.votes import SlackVotes
from config.settings import Settings
from config.spaces import DEFAULT_SPACE, Spaces
from config.texts import Locale, t

log = logging.getLogger(__name__)

# chat.update is Tier 3 (about 50 a minute): one per 1.2 s keeps a streaming answer under it.
EDIT_INTERVAL_S = 1.2
SEEN_MENTIONS_MAX = 1000  # remembered (channel, ts) of mentions, so Slack's retries are ignored


class SlackAdapter:
    """Registers the listeners on ``app``; ``answers`` follows every answer they start.
    ``spaces`` say which space a workspace or channel asks (None: ``default`` everywhere)."""

    def __init__(
        self,
        settings: Settings,
        client: ConciergeClient,
        app: AsyncApp,
        *,
        spaces: Spaces | None = None,
        max_chars: int = BODY_CHARS,
    ) -> None:
        self.settings = settings
        self.access = Access.from_settings(settings, spaces or Spaces(settings))
        self.web = app.client
        self.answers = Answers[tuple[str, str]](
            client,
            resume=self._resume,
            max_chars=max_chars,
            edit_interval_s=EDIT_INTERVAL_S,
        )
        self.people = SlackPeople(self.web, default=settings.locale)
        self.conversations = SlackConversations(
            self.web,
            self.people,
            max_turns=settings.history_max_messages,
            max_chars=HISTORY_TURN_MAX_CHARS,
        )
        self.native = Native()
        self.votes = SlackVotes(app, client, self.people)
        self._seen_mentions: LRUCache[tuple[str, str], None] = LRUCache(SEEN_MENTIONS_MAX)
        app.event("app_mention")(self.on_mention)
        app.event("message")(self.on_message)
        app.event("reaction_added")(self.on_reaction)
        app.event("agent_session_stopped")(self.on_stop_control)
        app.command("/ask")(self.on_ask)
        app.command("/rescrape")(self.on_rescrape)

    # --- listeners: check, then start an answer ---

    async def on_mention(self, event: dict[str, Any], context: AsyncBoltContext) -> None:
        """A question in a channel: answered in the question's thread."""
        channel, ts = event.get("channel", ""), event.get("ts", "")
        if event.get("bot_id") or event.get("subtype") or not self.access.allows_channel(channel):
            return
        if not self._first_time(channel, ts):
            return  # Slack delivered it again
        thread_ts = event.get("thread_ts") or ts
        user_id = event.get("user", "")
        locale = await self.people.locale(user_id)
        space = self.space_of(workspace_of(event, context), channel)
        question = question_from_mention(event.get("text", ""), context.bot_user_id)
        if not question:
            await self._say(channel, thread_ts, t("slack.mention_usage", locale), space)
            return
        history = await self._history(event, context) if event.get("thread_ts") else None
        where = Where(channel, thread_ts, ts, team=team_of(event, context), space=space)
        self._answer(question, user_id, locale, where, history=history)

    async def on_message(self, event: dict[str, Any], context: AsyncBoltContext) -> None:
        """With ``slack_thread_followups``: a plain message in a thread the bot answered in asks
        a follow-up (a mention is ``on_mention``'s)."""
        channel, ts = event.get("channel", ""), event.get("ts", "")
        thread_ts = event.get("thread_ts")
        if not self.settings.slack_thread_followups or not thread_ts or thread_ts == ts:
            return
        if event.get("bot_id") or event.get("subtype") or not self.access.allows_channel(channel):
            return
        text, me = event.get("text", ""), context.bot_user_id
        if me and f"<@{me}" in text and event.get("channel_type") != "im":
            return  # Slack sends it as an app_mention too
        question = question_from_mention(text, me)
        if not question or not self._first_time(channel, ts):
            return
        history = await self._history(event, context)
        if history is not None:  # else the bot has not answered in this thread
            user_id = event.get("user", "")
            locale = await self.people.locale(user_id)
            space = self.space_of(workspace_of(event, context), channel)
            where = Where(channel, thread_ts, ts, team=team_of(event, context), space=space)
            self._answer(question, user_id, locale, where, history=history)

    async def on_ask(self, ack: AsyncAck, command: dict[str, Any], respond: AsyncRespond) -> None:
        """``/ask question``: answered in the channel, under who asked what, continued in the
        answer's thread. Whatever goes wrong is told to the asker alone (``respond``)."""
        channel, user_id = command.get("channel_id", ""), command.get("user_id", "")
        question = unescape(command.get("text", "")).strip()
        locale = await self.people.locale(user_id)
        if not self.access.allows_channel(channel):
            await ack(text=t("refusal.not_here", locale))
        elif not question:
            await ack(text=t("slack.ask_usage", locale))
        else:
            await ack()
            name = await self.people.display_name(user_id, command.get("user_name", ""))

            async def tell(text: str) -> None:
                await respond(text=text, response_type="ephemeral")

            team = command.get("team_id", "")
            where = Where(channel, None, team=team, space=self.space_of(team, channel))
            heading = asked_line(name, question, locale)
            self._answer(question, user_id, locale, where, heading=heading, tell=tell)

    async def on_rescrape(
        self, ack: AsyncAck, command: dict[str, Any], respond: AsyncRespond
    ) -> None:
        """``/rescrape`` (admins, and the space's own): the engine rebuilds the knowledge base
        of the channel's space; progress is shown."""
        channel, user_id = command.get("channel_id", ""), command.get("user_id", "")
        locale = await self.people.locale(user_id)
        if not self.access.allows_channel(channel):
            await ack(text=t("refusal.not_here", locale))
            return
        await ack()
        space = self.space_of(command.get("team_id", ""), channel)
        if not await self.may_rescrape(space, user_id):
            await respond(text=t("refusal.not_admin", locale), response_type="ephemeral")
            return
        self._answer("", user_id, locale, Where(channel, None, space=space), kind="rescrape")

    async def on_reaction(self, event: dict[str, Any]) -> None:
        """:octagonal_sign: on a question or an answer, by the asker or an admin, stops it."""
        item = event.get("item") or {}
        if event.get("reaction") != STOP_REACTION or item.get("type") != "message":
            return
        user_id = event.get("user", "")
        message = (item.get("channel", ""), item.get("ts", ""))
        await self.answers.stop(message, user_id, lambda: self.is_admin(user_id))

    async def on_stop_control(self, event: dict[str, Any]) -> None:
        """Slack's own stop button for AI apps (``agent_session_stopped``): stops the answer
        it names (one of its streams, else the answer last started in its thread), as
        :octagonal_sign: does. A stranger is told, alone, that only the asker or an admin may."""
        channel, user_id = event.get("channel", ""), event.get("user", "")
        thread_ts = event.get("thread_ts", "")
        latest = self.native.answering.get((channel, thread_ts), "")
        named = [*(event.get("streaming_message_ts") or []), latest, thread_ts]
        answer = next((a for ts in named if ts and (a := self.answers.find((channel, ts)))), None)
        if answer is None:
            log.info("slack: a stop in %s/%s for no answer in progress", channel, thread_ts)
            await self._session_active(channel, thread_ts)
            return
        session_id = answer.session.session_id
        outcome = await self.answers.stop_session(
            session_id, user_id, lambda: self.is_admin(user_id)
        )
        if outcome is StopOutcome.NOT_ALLOWED:
            locale = await self.people.locale(user_id)
            await self._whisper(channel, thread_ts, user_id, t("stop.not_allowed", locale))

    # --- answers ---

    def _answer(
        self,
        question: str,
        user_id: str,
        locale: Locale,
        where: Where,
        kind: Kind = "ask",
        *,
        heading: str = "",
        tell: TellAsker | None = None,
        history: History | None = None,
    ) -> None:
        """Start answering at ``where``; ``tell`` (else a message in the channel) gives the
        asker a refusal."""
        place = where.place() | ({"heading": heading} if heading else {})
        history = history or History()
        ask = Ask(question, user_id, kind, place, history.turns, history.cut, locale, where.space)
        stage = self._stage(place, tell, recipient=(user_id, where.team))
        channel, thread_ts, space = where.channel, where.thread_ts, where.space
        say = tell or (lambda text: self._say(channel, thread_ts, text, space))
        self.answers.start(ask, stage, say)

    def _stage(
        self,
        place: Mapping[str, str],
        tell: TellAsker | None = None,
        recipient: tuple[str, str] = ("", ""),
    ) -> SlackSink:
        """Where an answer goes: ``place`` names the channel, the thread, the question and the
        space (and after a restart, the first message). A question or a heading makes it an
        answer to vote on (a rescrape has neither)."""
        channel, thread_ts = place["channel"], place.get("thread") or None
        question_ts = place.get("question")
        question = SlackMessage(channel, question_ts, thread_ts) if question_ts else None
        heading, first = place.get("heading", ""), place.get("message")
        return SlackSink(
            self.web,
            channel,
            thread_ts,
            question,
            heading=heading,
            first_ts=first,
            tell_asker=tell,
            recipient=recipient,
            votes=bool(question_ts or heading),
            native=self.native,
            username=self.access.bot_name(place.get("space") or DEFAULT_SPACE),
        )

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
        """A listed admin (``Access``), or a workspace admin or owner as ``users.info`` says
        now (asked only of others)."""
        return self.access.is_admin(user_id) or await self.people.is_admin(user_id)

    async def may_rescrape(self, space: str, user_id: str) -> bool:
        """``is_admin``, or one of ``space``'s own admins (``Access.may_rescrape``); Slack is
        asked only about someone no list names."""
        if self.access.may_rescrape(space, user_id):
            return True
        workspace_admin = await self.people.is_admin(user_id)
        return self.access.may_rescrape(space, user_id, platform_admin=workspace_admin)

    def space_of(self, team: str, channel: str) -> str:
        """The space a message in ``channel`` of the workspace ``team`` asks."""
        return self.access.space_at("slack", team or None, channel)

    async def close(self, grace_s: float = SHUTDOWN_GRACE_S) -> None:
        """Stop every answer in progress (a named bot hands them over instead)."""
        await self.answers.close(grace_s)

    # --- small pieces ---

    def _first_time(self, channel: str, ts: str) -> bool:
        key = (channel, ts)
        if key in self._seen_mentions:
            return False
        self._seen_mentions[key] = None
        return True

    async def _say(
        self, channel: str, thread_ts: str | None, text: str, space: str = DEFAULT_SPACE
    ) -> None:
        try:
            await self.web.chat_postMessage(
                channel=channel,
                thread_ts=thread_ts,
                text=text,
                username=self.access.bot_name(space),
            )
        except SlackApiError as error:
            log.warning("slack: could not post in %s: %s", channel, error.response["error"])

    async def _session_active(self, channel: str, thread_ts: str) -> None:
        """Give the thread's agent session back to the asker: Slack set it stopping."""
        try:
            await self.web.agents_sessions_setStatus(
                channel_id=channel, thread_ts=thread_ts, status="active"
            )
        except Exception as error:  # an app that is no agent, or Slack out of reach
            log.info("slack: the agent session in %s was not set active: %r", channel, error)

    async def _whisper(self, channel: str, thread_ts: str, user_id: str, text: str) -> None:
        """``text`` for ``user_id`` alone (ephemeral), in the thread."""
        try:
            await self.web.chat_postEphemeral(
                channel=channel, user=user_id, thread_ts=thread_ts or None, text=text
            )
        except SlackApiError as error:
            log.info("slack: could not tell %s: %s", user_id, error.response.get("error"))
