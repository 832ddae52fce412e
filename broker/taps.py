"""Read-only copies of an exchange's traffic (``Broker.tap``), for the web console's observer.

A tap's reader gets a ``Copy`` (type, content type, body) and decodes it itself: a copy is
never settled, so there is nothing to dead-letter; the consumer of the original does that.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field

from aio_pika.abc import AbstractIncomingMessage, AbstractQueue, AbstractRobustChannel
from aiormq.exceptions import AMQPConnectionError, ChannelInvalidStateError

from broker.errors import BrokerUnavailable

TAP_MAX_LENGTH = 10_000  # a stalled tap reader loses its oldest copies, never grows without end
TAP_PREFETCH = 100  # copies in flight to a tap's reader; the rest wait in its capped queue


@dataclass(frozen=True)
class Copy:
    """One message as a tap hands it over: the wire's own fields, nothing to acknowledge.

    Its reader decodes it (``broker.protocol``); one that is not protocol is the reader's to
    skip, since the consumer of the original dead-letters that."""

    type: str | None  # the AMQP ``type``: the message's own (``ask``, ``cancel``, ``token``...)
    content_type: str | None
    body: bytes
    headers: Mapping[str, object] = field(default_factory=dict)  # a dead letter's x-death


TapHandler = Callable[[Copy], Awaitable[None]]


class Tap:
    """Copies of one exchange's traffic on a queue of the caller's own (``Broker.tap``);
    ``bind`` and ``unbind`` choose the routing keys copied, and are restored after a reconnect
    as they stand."""

    def __init__(
        self, channel: AbstractRobustChannel, queue: AbstractQueue, exchange: str, wait_s: float
    ) -> None:
        self.exchange = exchange
        self._channel = channel
        self._queue = queue
        self._wait_s = wait_s

    @property
    def queue_name(self) -> str:
        return self._queue.name

    async def bind(self, routing_key: str) -> None:
        """Copy what the exchange routes with ``routing_key`` from now on (a fanout: ``""``)."""
        await self._when_ready(lambda: self._queue.bind(self.exchange, routing_key=routing_key))

    async def unbind(self, routing_key: str) -> None:
        """Stop copying ``routing_key``."""
        await self._when_ready(lambda: self._queue.unbind(self.exchange, routing_key))

    def when_lost(self, lost: Callable[[], None]) -> None:
        """Call ``lost`` each time the tap's channel closes (its connection dropped, or
        ``close``): the copies routed until it is restored are gone, so a reader that keeps
        an order of copies knows that it has a gap."""
        self._channel.close_callbacks.add(lambda _channel, _error: lost())

    async def close(self) -> None:
        """Stop copying. Closing the channel cancels the consumer, so RabbitMQ drops the
        auto-deleted queue; a channel closed here is never restored, even mid-reconnect."""
        await self._channel.close()

    async def _when_ready(self, change: Callable[[], Awaitable[object]]) -> None:
        """Wait, bounded, for a reconnect to restore the channel, then ``change`` the bindings.

        Raises ``BrokerUnavailable`` when the connection is not there; the bindings are then as
        they were, and aio-pika restores those after a reconnect."""
        try:
            await asyncio.wait_for(self._channel.ready(), self._wait_s)
            await change()
        except (TimeoutError, AMQPConnectionError, ChannelInvalidStateError) as error:
            raise BrokerUnavailable(
                f"tap {self.queue_name}: no connection to RabbitMQ ({type(error).__name__})"
            ) from None


async def open_tap(
    channel: AbstractRobustChannel,
    exchange: str,
    queue_name: str,
    handler: TapHandler,
    routing_keys: Iterable[str],
    max_length: int,
    wait_s: float,
) -> Tap:
    """Copies of what ``exchange`` routes with ``routing_keys`` (more with ``Tap.bind``),
    handed to ``handler`` one at a time; the queues the messages are meant for lose nothing.

    ``queue_name`` is the caller's own: exclusive to this connection, deleted with its
    consumer, at most ``max_length`` copies waiting (then the oldest are dropped), consumed
    ``TAP_PREFETCH`` at a time. ``channel`` is the tap's own, so ``Tap.close`` ends this tap
    alone; it is closed if the tap cannot be opened. After a reconnect aio-pika declares the
    queue again, binds the keys bound at that moment and restarts the consumer; copies routed
    while the connection was down are gone. ``wait_s`` bounds a wait for a reconnect.
    """
    try:
        queue = await channel.declare_queue(
            queue_name,
            exclusive=True,
            auto_delete=True,
            arguments={"x-max-length": max_length},
        )
        tap = Tap(channel, queue, exchange, wait_s)
        for key in routing_keys:
            await tap.bind(key)

        async def on_message(incoming: AbstractIncomingMessage) -> None:
            try:
                await handler(
                    Copy(incoming.type, incoming.content_type, incoming.body, incoming.headers)
                )
            finally:
                await incoming.ack()

        # Acknowledged, with a prefetch: with ``no_ack`` RabbitMQ would push every copy at
        # once, and a stalled reader's copies would pile up in this process instead.
        await channel.set_qos(prefetch_count=TAP_PREFETCH)
        await queue.consume(on_message)
    except BaseException:
        await channel.close()
        raise
    return tap
