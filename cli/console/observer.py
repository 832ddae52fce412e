"""Copies of the run's traffic, on queues of the console's own: it never touches the engine's.

Three exchanges are tapped with exclusive, auto-deleted queues named under the prefix:
- ``P.request`` (direct, key ``request``): a copy of every request as it is queued.
- ``P.cancel`` (fanout) and ``P.expired`` (fanout): every cancel, every request that expired
  in the queue.
- ``P.reply`` (direct): bound with each ``reply_to`` seen in a request (and the configured
  bots' names from the start), so every reply event of those bots is copied here too.

A copy is only read: nothing is acknowledged to, requeued in or dead-lettered from the
engine's queues. A request's first ``started`` may pass before its asker's key is bound (the
engine and the console get the request at once); its next event still moves it, and its
terminal event carries the whole text. The one module of the console that talks aio-pika
(``broker/amqp.py`` has no tap; this could move there as it is).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable

from aio_pika.abc import AbstractIncomingMessage, AbstractQueue, AbstractRobustChannel

from broker.amqp import Broker
from broker.protocol import (
    REQUEST_ROUTING_KEY,
    ProtocolError,
    decode_cancel,
    decode_event,
    decode_request,
)
from cli.console.state import ConsoleState

log = logging.getLogger(__name__)

TAP_MAX_LENGTH = 10_000  # a stalled console drops its oldest copies, never grows without end
REPLY_KEY_IDLE_S = 3600.0  # a reply key unused this long is unbound (one-off clients' ids)


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
        self._channel: AbstractRobustChannel | None = None
        self._reply_queue: AbstractQueue | None = None
        self._reply_keys: dict[str, float] = {}  # bound key -> when last seen

    async def start(self, bot_ids: Iterable[str] = ()) -> None:
        names = self.broker.names
        self._channel = await self.broker.connection.channel(publisher_confirms=False)
        await self._tap("request", names.request_exchange, REQUEST_ROUTING_KEY, self._on_request)
        await self._tap("cancel", names.cancel_exchange, "", self._on_cancel)
        await self._tap("expired", names.expired_exchange, "", self._on_expired)
        self._reply_queue = await self._tap("reply", names.reply_exchange, None, self._on_event)
        for bot_id in bot_ids:
            await self.follow(bot_id)

    async def close(self) -> None:
        if self._channel is not None and not self._channel.is_closed:
            await self._channel.close()  # its exclusive queues go with the connection

    async def _tap(
        self,
        role: str,
        exchange: str,
        routing_key: str | None,
        handle: Callable[[AbstractIncomingMessage], Awaitable[None]],
    ) -> AbstractQueue:
        assert self._channel is not None
        queue = await self._channel.declare_queue(
            f"{self._tag}.{role}",
            exclusive=True,
            auto_delete=True,
            arguments={"x-max-length": TAP_MAX_LENGTH},
        )
        if routing_key is not None:
            await queue.bind(exchange, routing_key=routing_key)

        async def on_message(message: AbstractIncomingMessage) -> None:
            try:
                await handle(message)
            except ProtocolError as error:  # the engine dead-letters its own copy
                log.debug("console: a copy from %s is not protocol: %s", role, error.reason)
            self.changed()

        await queue.consume(on_message, no_ack=True)
        return queue

    async def follow(self, bot_id: str) -> None:
        """Copy the replies sent to ``bot_id`` from now on."""
        now = time.monotonic()
        if bot_id not in self._reply_keys:
            assert self._reply_queue is not None
            await self._reply_queue.bind(self.broker.names.reply_exchange, routing_key=bot_id)
        self._reply_keys[bot_id] = now

    async def prune(self, keep: Iterable[str] = ()) -> None:
        """Unbind the reply keys of bots not seen for an hour (each terminal chat is one)."""
        assert self._reply_queue is not None
        kept, now = set(keep), time.monotonic()
        for key, seen in list(self._reply_keys.items()):
            if key not in kept and now - seen > REPLY_KEY_IDLE_S:
                del self._reply_keys[key]
                await self._reply_queue.unbind(self.broker.names.reply_exchange, key)

    async def _on_request(self, message: AbstractIncomingMessage) -> None:
        if message.type == "cancel":  # a cancel put in the request queue (the FIFO trap)
            self.state.on_cancel(decode_cancel(message.body, message.content_type))
            return
        request = decode_request(message.body, message.content_type)
        self.state.on_request(request)
        self.on_request()
        await self.follow(request.reply_to)

    async def _on_cancel(self, message: AbstractIncomingMessage) -> None:
        self.state.on_cancel(decode_cancel(message.body, message.content_type))

    async def _on_expired(self, message: AbstractIncomingMessage) -> None:
        self.state.on_expired(decode_request(message.body, message.content_type), time.time())

    async def _on_event(self, message: AbstractIncomingMessage) -> None:
        self.state.on_event(decode_event(message.body, message.content_type), time.time())
