"""The connection to RabbitMQ and the ``Broker`` every process uses: publishing and consuming
(the consumers are in ``consuming``, a base of ``Broker``).

Only the broker's AMQP modules talk aio-pika: this one, ``consuming`` (the consumers and taps),
``topology`` (what is declared), ``nodes`` (connections to one address of several),
``messages`` (AMQP properties, decoders, the ``Envelope``), ``stream`` (reply events, each
confirmed or said lost), ``taps`` (read-only copies, the console's) and ``peek`` (counts,
declaring nothing); ``errors`` names what they raise.

Channels by role:
- ``confirm``: requests, cancels, votes and dead letters; persistent and publisher-confirmed.
- ``stream``: reply events, confirmed (``stream``: the engine keeps them through an outage).
- ``requests``: consumes the request queue with ``prefetch_count=1`` (one job at a time).
- ``control``: consumes cancels, expired requests and replies; publishes status copies.
- ``feedback``: consumes votes, a few at a time (each waits for a disk write).
- one per tap: read-only copies of an exchange's traffic (``Broker.tap``, the web console).

Consumers get decoded protocol messages in an ``Envelope``, never an aio-pika message: a
message that does not decode is dead-lettered (``messages.open_envelope``), on every queue, and
its consumer never sees it. The connection is robust: after a drop aio-pika reconnects (to the
next of the broker's addresses, ``nodes``), re-declares what was declared (a tap's queue and
its keys too) and restarts the consumers.
Nothing here purges; the engine purges once, from ``main()``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TypeVar

import aio_pika
from aio_pika.abc import (
    AbstractExchange,
    AbstractIncomingMessage,
    AbstractRobustChannel,
    AbstractRobustConnection,
)
from aio_pika.exceptions import DeliveryError
from aiormq.exceptions import AMQPConnectionError, AMQPError, ChannelInvalidStateError

from broker import messages, nodes, topology
from broker.consuming import Consuming
from broker.errors import QueueFull
from broker.messages import Envelope
from broker.nodes import CONNECT_TIMEOUT_S
from broker.peek import QueueCounts, QueueLooker
from broker.protocol import (
    REQUEST_ROUTING_KEY,
    Cancel,
    Feedback,
    Names,
    ReplyEvent,
    Request,
)
from broker.stream import EventStream
from config.settings import Settings

log = logging.getLogger(__name__)

T = TypeVar("T")

HEARTBEAT_S = 30  # a dead peer noticed within a minute, with no false alarm during a long answer
RECONNECT_INTERVAL_S = 1  # after a lost connection, before trying the next address
# A quorum request queue refuses publishes (nacks) until a new leader is elected after its
# leader's node went: a few seconds. A request nacked while the queue is not full is sent again.
NACKED_RETRY_WITHIN_S = 10.0
NACKED_RETRY_PAUSE_S = 0.25


class Broker(Consuming):
    """A robust connection to RabbitMQ with Concierge's topology declared on it."""

    def __init__(self, settings: Settings) -> None:
        super().__init__()  # no consumers yet
        self.settings = settings
        self.names = Names(settings.prefix)
        self._connection: AbstractRobustConnection | None = None
        self._confirm: AbstractRobustChannel | None = None
        self._stream: AbstractRobustChannel | None = None
        self._control: AbstractRobustChannel | None = None
        self._declared: topology.Core | None = None
        self._events: EventStream | None = None  # the reply exchange, on the stream channel
        self._status_exchange: AbstractExchange | None = None  # on the control channel
        self._looker: QueueLooker | None = None  # whether reply queues are there

    async def connect(self) -> Broker:
        urls = self.settings.broker_urls
        query = {"heartbeat": HEARTBEAT_S, "reconnect_interval": RECONNECT_INTERVAL_S}
        self._connection = await nodes.connect_robust_any(urls, CONNECT_TIMEOUT_S, **query)
        if len(urls) > 1 and self.settings.queue_type == "classic":
            log.warning(nodes.CLASSIC_ON_A_CLUSTER)
        try:
            await self._declare()
        except BaseException:
            await self.close()
            raise
        return self

    async def _declare(self) -> None:
        """The channels, and the topology on the one with confirms."""
        self._confirm = await self._channel(publisher_confirms=True)
        self._stream = await self._channel(publisher_confirms=True)
        self._control = await self._channel(publisher_confirms=False)
        await self._control.set_qos(prefetch_count=100)
        self._declared = await topology.declare_core(
            self._confirm, self.names, self.settings.queue_type
        )
        replies = await self._stream.get_exchange(self.names.reply_exchange, ensure=False)
        self._events = EventStream(self._stream, replies)
        get_status = partial(self._control.get_exchange, ensure=False)
        self._status_exchange = await get_status(self.names.status_exchange)

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.close()
            self._connection = None

    async def __aenter__(self) -> Broker:
        return await self.connect()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def connection(self) -> AbstractRobustConnection:
        assert self._connection is not None, "call connect() first"
        return self._connection

    @property
    def events(self) -> EventStream:  # for a sender that keeps them through an outage
        assert self._events is not None, "call connect() first"
        return self._events

    @property
    def _core(self) -> topology.Core:
        assert self._declared is not None, "call connect() first"
        return self._declared

    async def _channel(self, *, publisher_confirms: bool) -> AbstractRobustChannel:
        return await self.connection.channel(publisher_confirms=publisher_confirms)

    # --- publishing ---------------------------------------------------------------------

    async def send_request(self, request: Request) -> None:
        """Publish a persistent, confirmed request whose AMQP TTL matches its deadline.

        A nack is the full queue's ``reject-publish``, or a quorum queue with no leader for a
        few seconds after a node went: published again after a pause while the queue is not
        full, for at most ``NACKED_RETRY_WITHIN_S``; ``QueueFull`` otherwise."""
        ttl_s = max(request.deadline - request.sent_at, 0.001)
        give_up_at = asyncio.get_running_loop().time() + NACKED_RETRY_WITHIN_S
        while True:
            try:
                await self.publish(request, self.names.request_exchange, REQUEST_ROUTING_KEY, ttl_s)
                return
            except DeliveryError:
                late = asyncio.get_running_loop().time() > give_up_at
                if late or await self._request_queue_full():
                    raise QueueFull("the request queue is full") from None
                log.info("request refused by the broker, the queue not full: sent again")
                await asyncio.sleep(NACKED_RETRY_PAUSE_S)

    async def _request_queue_full(self) -> bool:
        """Whether the request queue holds its maximum; False when the broker cannot say."""
        try:
            waiting = await self.request_queue_depth()
        except (AMQPError, ConnectionError, RuntimeError, TimeoutError):
            return False
        return topology.request_queue_is_full(waiting)

    async def send_cancel(self, cancel: Cancel) -> None:
        """Publish a cancel on the cancel exchange, which no queued request can delay."""
        await self.publish(cancel, self.names.cancel_exchange, "", self.settings.request_ttl_s)

    async def send_feedback(self, feedback: Feedback) -> None:
        """Publish a vote, persistent and confirmed, for whichever engine takes it first; no
        TTL (a vote keeps while no engine runs). Raises when the broker does not confirm it."""
        exchange = self._core.confirmed_exchanges[self.names.feedback_exchange]
        await self._publish(self._confirm, exchange, messages.feedback_message(feedback), "")

    async def publish(
        self, message: Request | Cancel, exchange: str, key: str, ttl_s: float, attempt: int = 1
    ) -> None:
        """Publish a bot-to-engine message, persistent and confirmed, to the exchange named
        ``exchange`` (the request or the cancel exchange); ``send_request`` and ``send_cancel``
        say where the protocol puts each, ``broker.requeue`` a request's later ``attempt``."""
        await self._publish(
            self._confirm,
            self._core.confirmed_exchanges[exchange],
            messages.bot_message(message, ttl_s, attempt=attempt),
            key,
        )

    async def send_event(self, event: ReplyEvent, reply_to: str) -> None:
        """Publish a reply event, confirmed, waiting out a reconnect (answers: ``events``)."""
        message = messages.event_message(event)
        await self._publish(self._stream, self.events.exchange, message, reply_to)

    async def send_status(self, event: ReplyEvent) -> None:
        """Publish a copy of a reply event for watchers (``P.status``, fanout), without a
        confirm and never persistent: with no watcher bound, RabbitMQ drops it at once."""
        message = messages.event_message(event, copy=True)
        assert self._status_exchange is not None  # no waiting out a reconnect: not worth it
        await self._status_exchange.publish(message, routing_key="", mandatory=False)

    async def _bury(self, incoming: AbstractIncomingMessage, reason: str) -> None:
        """Park a message we cannot use in the dead-letter queue, with the reason in a header."""
        assert self._confirm is not None
        exchange = self._confirm.default_exchange
        message = messages.dead_letter(incoming, reason)
        await self._publish(self._confirm, exchange, message, self.names.dead_queue)

    async def _publish(
        self,
        channel: AbstractRobustChannel | None,
        exchange: AbstractExchange,
        message: aio_pika.Message,
        routing_key: str,
    ) -> None:
        """Publish, and if the connection is being restored, wait for it and try once more.

        Without this a stop pressed during a reconnect would be lost.
        """
        assert channel is not None
        await _once_more_if_away(
            channel, partial(exchange.publish, message, routing_key=routing_key, mandatory=False)
        )

    # --- queues -------------------------------------------------------------------------

    async def request_queue_depth(self) -> int:
        """Requests waiting (not counting the one being answered)."""
        return (await self.request_queue_counts()).messages

    async def request_queue_counts(self) -> QueueCounts:
        """Requests waiting and engines taking them, both from one declare."""
        assert self._confirm is not None  # after a reconnect, wait until it is restored
        await asyncio.wait_for(self._confirm.ready(), CONNECT_TIMEOUT_S)
        declare = self._core.request_queue.declare  # fresh counts, not cached ones
        declared = await _once_more_if_away(self._confirm, declare)
        return QueueCounts(declared.message_count or 0, declared.consumer_count or 0)

    async def take_waiting_request(self) -> Envelope[Request | Cancel] | None:
        """One waiting message, or None once the queue is empty (the startup purge uses it)."""
        queue = self._core.request_queue
        while (incoming := await queue.get(no_ack=False, fail=False)) is not None:
            envelope = await messages.open_envelope(
                incoming, messages.to_request_or_cancel, self._bury
            )
            if envelope is not None:
                return envelope
        return None

    async def reply_queue_exists(self, bot_id: str) -> bool:
        """Whether the bot ``bot_id`` still has its reply queue."""
        if self._looker is None:
            self._looker = QueueLooker(self.connection, CONNECT_TIMEOUT_S)
        peek = await self._looker.peek(self.names.reply_queue(bot_id))
        return peek.state != "missing"

    async def delete_reply_queue(self, bot_id: str) -> None:
        """Drop a reply queue nobody will come back for, so the engine stops answering it."""
        assert self._confirm is not None
        await self._confirm.queue_delete(self.names.reply_queue(bot_id))

    async def delete_all(self) -> None:
        """Remove the shared queues and exchanges of this prefix (tests and uninstall)."""
        assert self._confirm is not None
        await topology.delete_all(self._confirm, self.names)


async def _once_more_if_away(
    channel: AbstractRobustChannel, operation: Callable[[], Awaitable[T]]
) -> T:
    """``operation`` on ``channel``; if the connection is being restored (a node went), wait
    for it and try once more."""
    try:
        return await operation()
    except (AMQPConnectionError, ChannelInvalidStateError, RuntimeError) as error:
        log.info("%s while reconnecting; waiting for the connection", type(error).__name__)
        await asyncio.wait_for(channel.ready(), CONNECT_TIMEOUT_S)
        return await operation()
