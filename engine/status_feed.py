"""The engine's reply events, copied for watchers (the web console) on ``P.status``.

A watcher that copied the bots' reply queues got every batch of tokens: about twenty messages a
second while an answer streams, each routed by RabbitMQ, delivered, parsed and decoded once
more, and those wake-ups on two cores cost the engine tokens/s (docs/console.md, "What it
costs the engine"). A watcher redraws twice a second at most, so here every event goes out as
it is sent except tokens, which are merged: the first at once (the answer has begun), then
what came during each ``every_s`` in one event, and what is left before the answer's end.
The merged event keeps the header of the last batch in it (its ``seq``), and its ``tokens``
are the sum, so counting them still gives the answer's tokens.

Published without confirms on the control channel to a fanout exchange: with no watcher bound,
RabbitMQ drops them at once, so an engine nobody watches pays a function call per batch.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from broker.protocol import ReplyEvent, TokenEvent

log = logging.getLogger(__name__)

STATUS_EVERY_S = 0.5  # merged tokens at most this often, per answer
Publish = Callable[[ReplyEvent], Awaitable[None]]


class StatusCopies:
    """The copies of one request's reply events (``Replies`` hands each one over)."""

    def __init__(
        self,
        publish: Publish,
        every_s: float = STATUS_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.publish = publish
        self.every_s = every_s
        self.clock = clock
        self._pending: list[TokenEvent] = []
        self._sent_at: float | None = None  # when tokens last went out; None: none yet
        self._failed = False

    async def copy(self, event: ReplyEvent) -> None:
        if isinstance(event, TokenEvent):
            self._pending.append(event)
            now = self.clock()
            if self._sent_at is None or now - self._sent_at >= self.every_s:
                self._sent_at = now
                await self._flush()
            return
        await self._flush()  # the text so far first, then what ends or moves the answer
        await self._send(event)

    async def _flush(self) -> None:
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        last = pending[-1]
        merged = last.model_copy(
            update={
                "text": "".join(event.text for event in pending),
                "tokens": sum(event.tokens for event in pending),
            }
        )
        await self._send(merged)

    async def _send(self, event: ReplyEvent) -> None:
        try:
            await self.publish(event)
        except Exception as error:  # watchers are optional: the answer goes on without them
            level = logging.DEBUG if self._failed else logging.WARNING
            log.log(level, "status copy not sent: %s", error)
            self._failed = True
