"""Publishing one session's reply events in order, and relaying tokens from the thread."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from broker.amqp import Broker
from broker.protocol import Request, TokenEvent

log = logging.getLogger(__name__)

# Why a job ended early, as its asker reads it (``STOPPED_BY_USER`` becomes a Cancelled event).
INTERRUPTED = "interrupted: the engine stopped while answering; please ask again"
RESTARTED = "the engine restarted before answering; please ask again"
STOPPED_BY_USER = "stopped"


class Replies:
    """The reply stream of one request: numbers every event and routes it to the asker."""

    def __init__(
        self,
        broker: Broker,
        request: Request,
        on_event: Callable[[Any], None] | None = None,
    ) -> None:
        self.broker = broker
        self.on_event = on_event  # the engine's metrics: sees every event sent
        self.session_id = request.session_id
        self.reply_to = request.reply_to
        self.context = request.context  # echoed in every event, for a bot that restarted
        self._seq = 0
        self._send_failed = False

    async def send(self, event_class: type[Any], **fields: Any) -> None:
        event = event_class(
            session_id=self.session_id, seq=self._seq, context=self.context, **fields
        )
        self._seq += 1
        if self.on_event is not None:
            self.on_event(event)
        try:
            await self.broker.send_event(event, self.reply_to)
        except Exception as error:  # the asker may be gone; the engine must go on
            level = logging.DEBUG if self._send_failed else logging.WARNING
            log.log(level, "reply not sent: %s", error)
            self._send_failed = True


class TokenRelay:
    """Carries tokens from the generation thread to the event loop without ever blocking it.

    ``emit`` is called in the thread and only schedules a put; the pump publishes in order,
    one event per token.
    """

    def __init__(self, replies: Replies) -> None:
        self.replies = replies
        self._loop = asyncio.get_running_loop()
        self._pieces: asyncio.Queue[str | None] = asyncio.Queue()
        self._pump = asyncio.create_task(self._publish_all())

    def emit(self, piece: str) -> None:
        self._loop.call_soon_threadsafe(self._pieces.put_nowait, piece)

    async def close(self) -> None:
        """Publish what is left, then return."""
        # Through the same callback queue as ``emit``, so the end never overtakes a piece.
        self._loop.call_soon_threadsafe(self._pieces.put_nowait, None)
        await self._pump

    async def _publish_all(self) -> None:
        while (piece := await self._pieces.get()) is not None:
            await self.replies.send(TokenEvent, text=piece)
