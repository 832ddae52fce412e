"""What every adapter uses to talk to the engine: ask, cancel, and receive replies."""

from __future__ import annotations

import logging
import time
import uuid
from typing import Literal

from bots.session import Session, SessionRegistry, StopRequested
from broker.amqp import Broker, Delivery, QueueFull
from broker.protocol import Cancel, ProtocolError, decode_event, make_request
from config.settings import Settings

log = logging.getLogger(__name__)


NAMED_REPLY_QUEUE_KEEP_S = 3600.0
ONE_OFF_REPLY_QUEUE_KEEP_S = 300.0


class AskRefused(Exception):
    """The request was not queued; the message says why, in words for the asker."""


class ConciergeClient:
    """One per bot process: its own reply queue, its sessions, and the publishing side."""

    def __init__(self, settings: Settings, platform: str, *, bot_id: str | None = None) -> None:
        self.settings = settings
        self.platform = platform
        self.bot_id = bot_id or settings.bot_name or f"{platform}-{uuid.uuid4().hex[:12]}"
        # A named bot comes back under the same id after a restart: its replies wait an hour.
        # A one-off client's queue is deleted when it closes; after a crash it waits 5 minutes.
        self.named = bool(bot_id or settings.bot_name)
        self.broker = Broker(settings)
        self.sessions = SessionRegistry()

    async def start(self) -> ConciergeClient:
        await self.broker.connect()
        keep_s = NAMED_REPLY_QUEUE_KEEP_S if self.named else ONE_OFF_REPLY_QUEUE_KEEP_S
        await self.broker.consume_replies(self.bot_id, self._on_reply, keep_s=keep_s)
        return self

    async def close(self) -> None:
        if not self.named:
            try:
                await self.broker.delete_reply_queue(self.bot_id)
            except Exception as error:  # the broker may be gone; the queue then expires
                log.debug("reply queue not deleted: %s", error)
        await self.broker.close()

    async def __aenter__(self) -> ConciergeClient:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def ask(
        self,
        question: str,
        user_id: str,
        kind: Literal["ask", "rescrape"] = "ask",
        *,
        ttl_s: float | None = None,
    ) -> Session:
        """Queue a request and return its session; ``queued_ahead`` says how many wait before it.

        Raises ``AskRefused`` (and queues nothing) for a question over the length limit, an
        asker who already has ``max_waiting_per_user`` requests open, or a full queue.
        """
        self._check_limits(question, user_id)
        request = make_request(
            reply_to=self.bot_id,
            user_id=user_id,
            question=question,
            ttl_s=ttl_s or self.settings.request_ttl_s,
            kind=kind,
            platform=self.platform,
        )
        timeout_s = (
            self.settings.rescrape_reply_timeout_s
            if kind == "rescrape"
            else self.settings.reply_timeout_s
        )
        session = Session(request, timeout_s=timeout_s)
        self.sessions.add(session)
        session.queued_ahead = await self.broker.request_queue_depth()
        try:
            await self.broker.send_request(request)
        except QueueFull:
            self.sessions.remove(session.session_id)
            raise AskRefused(
                "I'm busy right now: too many questions are waiting. "
                "Please try again in a few minutes."
            ) from None
        return session

    def _check_limits(self, question: str, user_id: str) -> None:
        limit = self.settings.max_question_chars
        if len(question) > limit:
            raise AskRefused(
                f"That question is too long ({len(question)} characters; the limit is {limit})."
            )
        waiting = self.sessions.count_for_user(user_id)
        if waiting >= self.settings.max_waiting_per_user:
            raise AskRefused(
                f"You already have {waiting} questions open; "
                "please wait for an answer before asking more."
            )

    async def cancel(self, session: Session, user_id: str) -> None:
        """Publish a cancel on the cancel queue and tell the session's renderer at once."""
        await self.broker.send_cancel(
            Cancel(session_id=session.session_id, sent_at=time.time(), user_id=user_id)
        )
        session.items.put_nowait(StopRequested(user_id))

    def forget(self, session: Session) -> None:
        self.sessions.remove(session.session_id)

    async def _on_reply(self, delivery: Delivery) -> None:
        try:
            event = decode_event(delivery.body, delivery.content_type)
        except ProtocolError as error:
            log.warning("dropping a malformed reply: %s", error.reason)
        else:
            if not self.sessions.deliver(event):
                log.debug("reply for unknown session %s", event.session_id)
        await delivery.ack()
