"""What every adapter uses to talk to the engine: ask, cancel, and receive replies."""

from __future__ import annotations

import logging
import time
import uuid
from typing import Literal

from bots.session import Session, SessionRegistry, StopRequested
from broker.amqp import Broker, Delivery
from broker.protocol import Cancel, ProtocolError, decode_event, make_request
from config.settings import Settings

log = logging.getLogger(__name__)


class ConciergeClient:
    """One per bot process: its own reply queue, its sessions, and the publishing side."""

    def __init__(self, settings: Settings, platform: str, *, bot_id: str | None = None) -> None:
        self.settings = settings
        self.platform = platform
        self.bot_id = bot_id or settings.bot_name or f"{platform}-{uuid.uuid4().hex[:12]}"
        self.durable_replies = bool(bot_id or settings.bot_name)
        self.broker = Broker(settings)
        self.sessions = SessionRegistry()

    async def start(self) -> ConciergeClient:
        await self.broker.connect()
        await self.broker.consume_replies(self.bot_id, self._on_reply, durable=self.durable_replies)
        return self

    async def close(self) -> None:
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
        """Queue a request and return its session; ``queued_ahead`` says how many wait before it."""
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
        await self.broker.send_request(request)
        return session

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
