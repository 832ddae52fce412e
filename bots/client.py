"""What every adapter uses to talk to the engine: ask, cancel, and receive replies."""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Literal

from bots.ask import Ask, Kind
from bots.history import HISTORY_TURN_MAX_CHARS, last_turns, within_body
from bots.session import Detached, Session, SessionRegistry, StopRequested
from broker.amqp import Broker
from broker.errors import QueueFull, ReplyQueueTaken
from broker.messages import Envelope
from broker.protocol import TERMINAL_TYPES, Cancel, Feedback, ReplyEvent, Request, make_request
from config.errors import ConciergeError
from config.settings import ConfigError, Settings
from config.spaces import Spaces, load_spaces
from config.texts import Locale, locale_of, t

log = logging.getLogger(__name__)


NAMED_REPLY_QUEUE_KEEP_S = 3600.0
ONE_OFF_REPLY_QUEUE_KEEP_S = 300.0

MAX_HELD_ACKS = 50  # of the reply consumer's prefetch of 100

# The context keys the client adds to every request, beside the adapter's own.
USER_KEY = "user"
KIND_KEY = "kind"
LOCALE_KEY = "locale"  # only when it is not CONCIERGE_LOCALE (a context holds 8 entries)

Vote = Literal["up", "down", "none"]


class AskRefused(ConciergeError):
    """The request was not queued; the message says why, in words for the asker."""


class ConciergeClient:
    """One per bot process: its own reply queue, its sessions, and the publishing side."""

    def __init__(
        self,
        settings: Settings,
        platform: str,
        *,
        bot_id: str | None = None,
        spaces: Spaces | None = None,
    ) -> None:
        self.settings = settings
        # Each space's cap on open requests; a bad spaces file stops the bot here, one line.
        self.spaces = spaces or load_spaces(settings)
        self.platform = platform
        self.bot_id = bot_id or settings.bot_name or f"{platform}-{uuid.uuid4().hex[:12]}"
        # A named bot comes back under the same id after a restart: its replies wait an hour.
        # A one-off client's queue is deleted when it closes; after a crash it waits 5 minutes.
        self.named = bool(bot_id or settings.bot_name)
        self.broker = Broker(settings)
        self.sessions = SessionRegistry()
        self._settling: set[asyncio.Future[None]] = set()  # acknowledgements under way
        # The adapter's hook for exchanges asked before a restart (see ``_take_over``).
        self.on_adopt: Callable[[Session, dict[str, str]], bool] | None = None

    async def start(self) -> ConciergeClient:
        await self.broker.connect()
        keep_s = NAMED_REPLY_QUEUE_KEEP_S if self.named else ONE_OFF_REPLY_QUEUE_KEEP_S
        try:
            await self.broker.consume_replies(
                self.bot_id, self._on_reply, keep_s=keep_s, one_off=not self.named
            )
        except ReplyQueueTaken:
            await self.broker.close()
            raise ConfigError(
                f"bot_name (CONCIERGE_BOT_NAME): another bot process is running as "
                f"{self.bot_id!r}; give each process a name of its own"
            ) from None
        return self

    async def close(self) -> None:
        if self._settling:  # acknowledge what was shown before the channel goes
            await asyncio.gather(*self._settling, return_exceptions=True)
        if not self.named:
            try:
                await self.broker.stop_replies()  # else the broker cancels it, with a warning
                await self.broker.delete_reply_queue(self.bot_id)
            except Exception as error:  # the broker may be gone; the queue then expires
                log.debug("reply queue not deleted: %s", error)
        await self.broker.close()

    async def __aenter__(self) -> ConciergeClient:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def ask(self, ask: Ask, *, ttl_s: float | None = None) -> Session:
        """Queue a request and return its session: ``prepare`` then ``submit``."""
        session = await self.prepare(ask, ttl_s=ttl_s)
        await self.submit(session)
        return session

    async def prepare(self, ask: Ask, *, ttl_s: float | None = None) -> Session:
        """A session for a request not sent yet; ``queued_ahead`` says how many wait before it,
        ``engines`` how many engines take requests (0: none is running, the request waits).

        An adapter shows its placeholder between ``prepare`` and ``submit``, so the request can
        name that message in its context. Raises ``AskRefused`` for a question over the length
        limit, an asker who already has ``max_waiting_per_user`` requests open, or a space
        that has its ``max_waiting`` open in this process.
        """
        locale = ask.locale or self.settings.locale
        self._check_limits(ask, locale)
        settings = self.settings
        history, cut = last_turns(
            ask.history, settings.history_max_messages, HISTORY_TURN_MAX_CHARS
        )
        request = make_request(
            reply_to=self.bot_id,
            user_id=ask.asker,
            question=ask.question,
            ttl_s=ttl_s or self.settings.request_ttl_s,
            kind=ask.kind,
            platform=self.platform,
            context=dict(ask.place),
            history=history,
            locale=locale,
            space=ask.space,
        )
        session = Session.for_request(request, timeout_s=self._reply_timeout_s(ask.kind))
        session.history_cut, session.locale = ask.history_cut or cut, locale
        self.sessions.add(session)  # before any await: it counts toward the asker's cap at once
        try:
            counts = await self.broker.request_queue_counts()
            session.queued_ahead, session.engines = counts.messages, counts.consumers
        except BaseException:
            self.sessions.remove(session.session_id)
            raise
        return session

    async def submit(self, session: Session, shown_in: Mapping[str, str] | None = None) -> None:
        """Publish the prepared request. Its context (the ask's place, plus ``shown_in``: the
        placeholder posted since ``prepare``) comes back in every reply event. Raises
        ``AskRefused`` when the queue is full."""
        assert session.request is not None, "only a prepared session is submitted"
        context = {
            **session.request.context,
            **(shown_in or {}),
            USER_KEY: session.user_id,
            KIND_KEY: session.kind,
        }
        if session.locale != self.settings.locale:  # a successor must speak it too
            context[LOCALE_KEY] = session.locale
        # validated again (model_copy would not check the context's limits)
        request = Request.model_validate(session.request.model_dump() | {"context": context})
        request, cut = within_body(request)
        session.request, session.history_cut = request, session.history_cut or cut
        try:
            await self.broker.send_request(request)
        except QueueFull:
            self.sessions.remove(session.session_id)
            raise AskRefused(t("refusal.queue_full", session.locale)) from None
        except BaseException:
            self.sessions.remove(session.session_id)
            raise

    def _reply_timeout_s(self, kind: str) -> float:
        if kind == "rescrape":
            return self.settings.rescrape_reply_timeout_s
        return self.settings.reply_timeout_s

    def _check_limits(self, ask: Ask, locale: Locale) -> None:
        limit, question = self.settings.max_question_chars, ask.question
        if len(question) > limit:
            raise AskRefused(t("refusal.too_long", locale, length=len(question), limit=limit))
        waiting = self.sessions.count_for_user(ask.asker)
        if waiting >= self.settings.max_waiting_per_user:
            raise AskRefused(t("refusal.too_many_open", locale, waiting=waiting))
        cap = self.spaces.max_waiting(ask.space)
        if cap is not None and (in_space := self.open_in_space(ask.space)) >= cap:
            raise AskRefused(t("refusal.space_busy", locale, waiting=in_space))

    def open_in_space(self, space: str) -> int:
        """This process's requests of ``space`` not ended yet, waiting or being answered. An
        exchange taken over after a restart is not counted: its space never came back with
        its events. Other bot processes' requests are theirs: the queue does not say."""
        return sum(
            1
            for session in self.sessions.all()
            if session.request is not None and session.request.space == space
        )

    async def cancel(self, session: Session, user_id: str) -> None:
        """Publish a cancel on the cancel queue and tell the session's renderer at once."""
        await self.broker.send_cancel(
            Cancel(session_id=session.session_id, sent_at=time.time(), user_id=user_id)
        )
        session.items.put_nowait(StopRequested(user_id))

    async def cancel_id(self, session_id: str, user_id: str) -> None:
        """Publish a cancel for an exchange this process does not follow (a persistent Stop
        button after a restart): the engine stops it if it still has it."""
        await self.broker.send_cancel(
            Cancel(session_id=session_id, sent_at=time.time(), user_id=user_id)
        )

    async def vote(self, session_id: str, user_id: str, vote: Vote) -> None:
        """Publish ``user_id``'s vote on an answer ("none" withdraws it); the engine keeps one
        per person and answer. Raises if the broker does not take it."""
        await self.broker.send_feedback(
            Feedback(
                session_id=session_id,
                user_id=user_id,
                vote=vote,
                platform=self.platform,
                sent_at=time.time(),
            )
        )

    def forget(self, session: Session, *, shown: bool = True) -> None:
        """The session is over: acknowledge its terminal event if that was held and ``shown``
        (if not, the broker gives the event to the next process once this one is gone)."""
        self.sessions.remove(session.session_id)
        ack, session.held_ack = session.held_ack, None
        if ack is not None and shown:
            settling = asyncio.ensure_future(_settle(ack))
            self._settling.add(settling)
            settling.add_done_callback(self._settling.discard)

    @contextmanager
    def showing(self, session: Session) -> Iterator[None]:
        """Forget ``session`` when the block ends; its held end is acknowledged only if the
        block ran to its end (cut short at shutdown, it stays for the next process)."""
        completed = False
        try:
            yield
            completed = True
        finally:
            self.forget(session, shown=completed)

    async def detach(self) -> None:
        """Leave every exchange in progress to the next process under this bot id: stop taking
        replies (the rest stay queued for it), then tell each session, after what it has."""
        try:
            await self.broker.stop_replies()
        finally:
            for session in self.sessions.all():
                session.items.put_nowait(Detached())

    async def _on_reply(self, envelope: Envelope[ReplyEvent]) -> None:
        """A decoded reply event (the broker dead-letters one that does not decode)."""
        event = envelope.message
        delivered = self.sessions.deliver(event)
        if not delivered and self._take_over(event):  # asked before this process started
            delivered = self.sessions.deliver(event)
        if not delivered:
            log.debug("reply for unknown session %s", event.session_id)
        session = self.sessions.get(event.session_id)
        if session is not None and self._may_hold(event, session):
            session.held_ack = envelope.ack  # acknowledged by ``forget``, once shown
            return
        await envelope.ack()

    def _may_hold(self, event: ReplyEvent, session: Session) -> bool:
        """Hold the ack of a named bot's terminal event until it is shown, but never so many
        that the consumer's prefetch fills up and stalls every other answer."""
        if not self.named or event.type not in TERMINAL_TYPES:
            return False
        held = sum(1 for other in self.sessions.all() if other.held_ack is not None)
        return session.held_ack is None and held < MAX_HELD_ACKS

    def _take_over(self, event: ReplyEvent) -> bool:
        """An event of an exchange this process did not start (it was asked before a restart
        under the same bot id): hand a new session for it to ``on_adopt``, with the context
        the adapter gave."""
        context = dict(event.context)
        user_id = context.pop(USER_KEY, None)
        kind: Kind = "rescrape" if context.pop(KIND_KEY, "ask") == "rescrape" else "ask"
        locale = locale_of(context.pop(LOCALE_KEY, None), self.settings.locale)
        if self.on_adopt is None or user_id is None or self.sessions.ended(event.session_id):
            return False
        session = Session(event.session_id, user_id, self._reply_timeout_s(kind), kind)
        session.locale = locale
        if not self.on_adopt(session, context):
            return False
        self.sessions.add(session)
        log.info("took over session %s from before a restart", event.session_id)
        return True


async def _settle(ack: Callable[[], Awaitable[None]]) -> None:
    try:
        await ack()
    except Exception as error:  # its channel closed meanwhile: the broker redelivers it
        log.info("a held reply was not acknowledged: %s", error)
