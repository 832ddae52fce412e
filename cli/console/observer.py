"""Copies of the run's traffic, on queues of the console's own: it never touches the engine's.

Four exchanges are tapped with exclusive, auto-deleted queues named under the prefix:
- ``P.request`` (direct, key ``request``): a copy of every request as it is queued.
- ``P.cancel`` (fanout) and ``P.expired`` (fanout): every cancel, every request that expired
  in the queue.
- ``P.status`` (fanout): the engine's copies of its reply events for watchers, tokens merged
  to one event per answer every half second (engine/status_feed.py). Copying the bots' reply
  queues instead brought every batch of tokens and cost the engine tokens/s (docs/console.md,
  "What it costs the engine").

A copy is only read: nothing is acknowledged to, requeued in or dead-lettered from the
engine's queues. The taps are ``Broker.tap``'s: this module sees copies (type, content type,
body), never the broker's client library.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable

from broker.amqp import Broker
from broker.dead_letters import DELIVERY_LIMIT_REASON, death_reason
from broker.protocol import (
    REQUEST_ROUTING_KEY,
    ProtocolError,
    decode_cancel,
    decode_event,
    decode_request,
)
from broker.taps import Copy, Tap
from cli.console.state import ConsoleState

log = logging.getLogger(__name__)


class Observer:
    """Feeds ``state`` from copies and calls ``changed`` after each one."""

    def __init__(
        self,
        broker: Broker,
        state: ConsoleState,
        changed: Callable[[], None],
        on_request: Callable[[], None] = lambda: None,
    ) -> None:
        self.broker = broker
        self.state = state
        self.changed = changed
        self.on_request = on_request  # the queue's count is worth reading again
        self._tag = f"{broker.names.prefix}.console.{uuid.uuid4().hex[:8]}"
        self._taps: list[Tap] = []

    async def start(self) -> None:
        names = self.broker.names
        await self._tap("request", names.request_exchange, [REQUEST_ROUTING_KEY], self._on_request)
        await self._tap("cancel", names.cancel_exchange, [""], self._on_cancel)
        await self._tap("expired", names.expired_exchange, [""], self._on_expired)
        await self._tap("status", names.status_exchange, [""], self._on_event)

    async def close(self) -> None:
        taps, self._taps = self._taps, []
        for tap in taps:  # each queue goes with its consumer
            await tap.close()

    async def _tap(
        self,
        role: str,
        exchange: str,
        routing_keys: list[str],
        handle: Callable[[Copy], Awaitable[None]],
    ) -> Tap:
        async def on_copy(copy: Copy) -> None:
            try:
                await handle(copy)
            except ProtocolError as error:  # the engine dead-letters its own copy
                log.debug("console: a copy from %s is not protocol: %s", role, error.reason)
            self.changed()

        tap = await self.broker.tap(
            exchange, f"{self._tag}.{role}", on_copy, routing_keys=routing_keys
        )
        self._taps.append(tap)
        return tap

    async def _on_request(self, copy: Copy) -> None:
        if copy.type == "cancel":  # a cancel put in the request queue (the FIFO trap)
            self.state.on_cancel(decode_cancel(copy.body, copy.content_type))
            return
        request = decode_request(copy.body, copy.content_type)
        self.state.on_request(request)
        self.on_request()

    async def _on_cancel(self, copy: Copy) -> None:
        self.state.on_cancel(decode_cancel(copy.body, copy.content_type))

    async def _on_expired(self, copy: Copy) -> None:
        request = decode_request(copy.body, copy.content_type)
        set_aside = death_reason(copy.headers) == DELIVERY_LIMIT_REASON
        self.state.on_expired(request, time.time(), set_aside=set_aside)

    async def _on_event(self, copy: Copy) -> None:
        self.state.on_event(decode_event(copy.body, copy.content_type), time.time())
