"""The one module that talks aio-pika: connection, topology, publishing and consuming.

Channels by role:
- ``confirm``: requests, cancels, votes and dead letters; persistent and publisher-confirmed.
- ``stream``: reply events; no confirms, so the engine never waits for the broker per token.
- ``requests``: consumes the request queue with ``prefetch_count=1`` (one job at a time).
- ``control``: consumes cancels, expired requests and replies, never behind a request.
- ``feedback``: consumes votes, a few at a time (each waits for a disk write).
- one per tap: read-only copies of an exchange's traffic (``Broker.tap``, the web console).

Consumers get decoded protocol messages in an ``Envelope``, never an aio-pika message: a
message that does not decode is dead-lettered here, on every queue, and its consumer never sees
it. A tap's reader gets a ``Copy`` (type, content type, body) and decodes it itself: a copy is
never settled, so there is nothing to dead-letter. The connection is robust: after a drop
aio-pika reconnects and re-declares what was declared here (a tap's queue and its keys too) and
restarts the consumers. Nothing here purges; the engine purges once, from ``main()``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Generic, Literal, TypeVar

import aio_pika
from aio_pika.abc import (
    AbstractConnection,
    AbstractExchange,
    AbstractIncomingMessage,
    AbstractQueue,
    AbstractRobustChannel,
    AbstractRobustConnection,
)
from aio_pika.exceptions import DeliveryError
from aiormq.exceptions import (
    AMQPConnectionError,
    ChannelAccessRefused,
    ChannelInvalidStateError,
    ChannelLockedResource,
    ChannelNotFoundEntity,
)
from yarl import URL

from broker.protocol import (
    CONTENT_TYPE,
    ERROR_HEADER,
    FEEDBACK_QUEUE_MAX_LENGTH,
    REQUEST_ROUTING_KEY,
    TERMINAL_TYPES,
    Cancel,
    Feedback,
    Names,
    ProtocolError,
    ReplyEvent,
    Request,
    decode_cancel,
    decode_event,
    decode_feedback,
    decode_request,
    encode,
)
from config.settings import Settings

log = logging.getLogger(__name__)

M = TypeVar("M")

DEAD_QUEUE_MAX_LENGTH = 10_000
IDLE_QUEUE_EXPIRES_MS = 3_600_000  # a cancel queue nobody uses is dropped after an hour
FEEDBACK_PREFETCH = 10  # votes in hand at once: each is stored before it is acknowledged
TAP_MAX_LENGTH = 10_000  # a stalled tap reader loses its oldest copies, never grows without end
TAP_PREFETCH = 100  # copies in flight to a tap's reader; the rest wait in its capped queue


class QueueFull(Exception):
    """The request queue is at its length limit; the broker refused the request."""


class ReplyQueueTaken(Exception):
    """Another process already consumes this bot's reply queue (it runs under the same name)."""


class BrokerUnavailable(ConnectionError):
    """RabbitMQ cannot be reached; the message names the host, never the password."""


def safe_url(url: str) -> str:
    """The broker URL with any password masked, for messages and logs."""
    parsed = URL(url)
    return str(parsed.with_password("***")) if parsed.password else str(parsed)


@dataclass(frozen=True)
class QueueCounts:
    """The request queue at one moment: ``consumers`` is 0 when no engine is running."""

    messages: int  # waiting; the one being answered is not counted
    consumers: int


@dataclass(frozen=True)
class Envelope(Generic[M]):
    """A decoded message and what its consumer may do with it; aio-pika stays in this module."""

    message: M
    redelivered: bool  # the broker gave it out before and it was never settled
    ack: Callable[[], Awaitable[None]]
    requeue: Callable[[], Awaitable[None]]  # hand it back to the queue for another consumer


Handler = Callable[[Envelope[M]], Awaitable[None]]
Decoder = Callable[[AbstractIncomingMessage], M]


@dataclass(frozen=True)
class Copy:
    """One message as a tap hands it over: the wire's own fields, nothing to acknowledge.

    Its reader decodes it (``broker.protocol``); one that is not protocol is the reader's to
    skip, since the consumer of the original dead-letters that."""

    type: str | None  # the AMQP ``type``: the message's own (``ask``, ``cancel``, ``token``...)
    content_type: str | None
    body: bytes


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


def _request_or_cancel(incoming: AbstractIncomingMessage) -> Request | Cancel:
    """A cancel can be found in the request queue (the FIFO trap, docs/protocol.md): its AMQP
    ``type`` says so."""
    if incoming.type == "cancel":
        return decode_cancel(incoming.body, incoming.content_type)
    return decode_request(incoming.body, incoming.content_type)


def _request(incoming: AbstractIncomingMessage) -> Request:
    return decode_request(incoming.body, incoming.content_type)


def _cancel(incoming: AbstractIncomingMessage) -> Cancel:
    return decode_cancel(incoming.body, incoming.content_type)


def _event(incoming: AbstractIncomingMessage) -> ReplyEvent:
    return decode_event(incoming.body, incoming.content_type)


def _feedback(incoming: AbstractIncomingMessage) -> Feedback:
    return decode_feedback(incoming.body, incoming.content_type)


def _outgoing(message: Request | Cancel, ttl_s: float) -> aio_pika.Message:
    """A bot-to-engine message with its protocol properties: persistent, typed, with a TTL."""
    return aio_pika.Message(
        encode(message),
        content_type=CONTENT_TYPE,
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        expiration=timedelta(seconds=ttl_s),
        message_id=message.session_id,
        reply_to=message.reply_to if isinstance(message, Request) else None,
        type=message.type,
    )


def _event_message(event: ReplyEvent, *, persistent: bool) -> aio_pika.Message:
    """A reply event as the engine publishes it: to its asker, or copied for watchers."""
    return aio_pika.Message(
        encode(event),
        content_type=CONTENT_TYPE,
        delivery_mode=(
            aio_pika.DeliveryMode.PERSISTENT if persistent else aio_pika.DeliveryMode.NOT_PERSISTENT
        ),
        correlation_id=event.session_id,
        type=event.type,
    )


class Broker:
    """A robust connection to RabbitMQ with Concierge's topology declared on it."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.names = Names(settings.prefix)
        self._connection: AbstractRobustConnection | None = None
        self._confirm: AbstractRobustChannel | None = None
        self._stream: AbstractRobustChannel | None = None
        self._control: AbstractRobustChannel | None = None
        self._requests_channel: AbstractRobustChannel | None = None
        self._confirmed_exchanges: dict[str, AbstractExchange] = {}  # by name
        self._reply_exchange: AbstractExchange | None = None  # on the channel without confirms
        self._status_exchange: AbstractExchange | None = None  # likewise
        self._request_consumer: tuple[AbstractQueue, str] | None = None
        self._reply_consumer: tuple[AbstractQueue, str] | None = None
        self._feedback_consumer: tuple[AbstractQueue, str] | None = None
        self._request_queue: AbstractQueue | None = None

    async def connect(self) -> Broker:
        url = self.settings.broker_url.get_secret_value()
        full_url = URL(url).update_query(heartbeat=self.settings.heartbeat_s, reconnect_interval=1)
        try:
            self._connection = await aio_pika.connect_robust(
                full_url, timeout=self.settings.connect_timeout_s
            )
        except Exception as error:
            raise BrokerUnavailable(
                f"cannot reach RabbitMQ at {safe_url(url)}: {type(error).__name__}"
            ) from None
        self._confirm = await self._channel(publisher_confirms=True)
        self._stream = await self._channel(publisher_confirms=False)
        self._control = await self._channel(publisher_confirms=False)
        await self._control.set_qos(prefetch_count=100)
        await self._declare_core()
        return self

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

    async def _channel(self, *, publisher_confirms: bool) -> AbstractRobustChannel:
        return await self.connection.channel(publisher_confirms=publisher_confirms)

    # --- topology -----------------------------------------------------------------------

    async def _declare_core(self) -> None:
        """Exchanges and the shared queues; idempotent, so every process may run it."""
        names, channel = self.names, self._confirm
        assert channel is not None
        direct, fanout = aio_pika.ExchangeType.DIRECT, aio_pika.ExchangeType.FANOUT
        request_x = await channel.declare_exchange(names.request_exchange, direct, durable=True)
        expired_x = await channel.declare_exchange(names.expired_exchange, fanout, durable=True)
        await channel.declare_exchange(names.reply_exchange, direct, durable=True)
        cancel_x = await channel.declare_exchange(names.cancel_exchange, fanout, durable=True)
        feedback_x = await channel.declare_exchange(names.feedback_exchange, fanout, durable=True)
        await channel.declare_exchange(names.status_exchange, fanout, durable=True)
        assert self._stream is not None
        self._reply_exchange = await self._stream.get_exchange(names.reply_exchange, ensure=False)
        self._status_exchange = await self._stream.get_exchange(names.status_exchange, ensure=False)
        self._confirmed_exchanges = {
            names.request_exchange: request_x,
            names.cancel_exchange: cancel_x,
            names.feedback_exchange: feedback_x,
        }

        requests = await self._declare_request_queue(channel)
        await requests.bind(request_x, REQUEST_ROUTING_KEY)
        self._request_queue = requests
        expired = await channel.declare_queue(names.expired_queue, durable=True)
        await expired.bind(expired_x)
        await channel.declare_queue(
            names.dead_queue, durable=True, arguments={"x-max-length": DEAD_QUEUE_MAX_LENGTH}
        )
        # Declared by bots too: a vote given while no engine runs waits for one.
        feedback = await self._declare_feedback_queue(channel)
        await feedback.bind(feedback_x)

    async def _declare_request_queue(self, channel: AbstractRobustChannel) -> AbstractQueue:
        """Declared (not just looked up) on each channel that uses it, so that after a
        reconnect aio-pika restores the queue and its consumers on that channel too."""
        return await channel.declare_queue(
            self.names.request_queue,
            durable=True,
            arguments={
                "x-dead-letter-exchange": self.names.expired_exchange,
                "x-max-length": self.settings.request_queue_max_length,
                "x-overflow": "reject-publish",
            },
        )

    async def _declare_feedback_queue(self, channel: AbstractRobustChannel) -> AbstractQueue:
        return await channel.declare_queue(
            self.names.feedback_queue,
            durable=True,
            arguments={"x-max-length": FEEDBACK_QUEUE_MAX_LENGTH},
        )

    # --- publishing ---------------------------------------------------------------------

    async def send_request(self, request: Request) -> None:
        """Publish a persistent, confirmed request whose AMQP TTL matches its deadline."""
        ttl_s = max(request.deadline - request.sent_at, 0.001)
        try:
            await self.publish(request, self.names.request_exchange, REQUEST_ROUTING_KEY, ttl_s)
        except DeliveryError:  # nacked: x-max-length with reject-publish
            raise QueueFull("the request queue is full") from None

    async def send_cancel(self, cancel: Cancel) -> None:
        """Publish a cancel on the cancel exchange, which no queued request can delay."""
        await self.publish(cancel, self.names.cancel_exchange, "", self.settings.request_ttl_s)

    async def send_feedback(self, feedback: Feedback) -> None:
        """Publish a vote, persistent and confirmed, for whichever engine takes it first; no
        TTL (a vote keeps while no engine runs). Raises when the broker does not confirm it."""
        message = aio_pika.Message(
            encode(feedback),
            content_type=CONTENT_TYPE,
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
            message_id=feedback.session_id,
            type=feedback.type,
        )
        exchange = self._confirmed_exchanges[self.names.feedback_exchange]
        await self._publish(self._confirm, exchange, message, "")

    async def publish(
        self, message: Request | Cancel, exchange: str, routing_key: str, ttl_s: float
    ) -> None:
        """Publish a bot-to-engine message, persistent and confirmed, to the exchange named
        ``exchange`` (the request or the cancel exchange); ``send_request`` and ``send_cancel``
        say where the protocol puts each."""
        await self._publish(
            self._confirm,
            self._confirmed_exchanges[exchange],
            _outgoing(message, ttl_s),
            routing_key,
        )

    async def send_event(self, event: ReplyEvent, reply_to: str) -> None:
        """Publish a reply event to the asking bot's queue, without waiting for a confirm."""
        message = _event_message(event, persistent=event.type in TERMINAL_TYPES)
        # Waits for the channel if a reconnect is restoring it (the request channel may be
        # back first and hand over a redelivery whose answer must not be lost).
        assert self._reply_exchange is not None
        await self._publish(self._stream, self._reply_exchange, message, reply_to)

    async def send_status(self, event: ReplyEvent) -> None:
        """Publish a copy of a reply event for watchers (``P.status``, fanout), without a
        confirm and never persistent: with no watcher bound, RabbitMQ drops it at once."""
        message = _event_message(event, persistent=False)
        assert self._status_exchange is not None
        # No waiting out a reconnect, as ``_publish`` does: a copy is not worth the delay.
        await self._status_exchange.publish(message, routing_key="", mandatory=False)

    async def _bury(self, incoming: AbstractIncomingMessage, reason: str) -> None:
        """Park a message we cannot use in the dead-letter queue, with the reason in a header."""
        headers = dict(incoming.headers or {})
        headers[ERROR_HEADER] = reason[:500]
        headers["x-concierge-source"] = incoming.routing_key or ""
        message = aio_pika.Message(
            incoming.body,
            content_type=incoming.content_type,
            headers=headers,
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        )
        assert self._confirm is not None
        exchange = self._confirm.default_exchange
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
        try:
            await exchange.publish(message, routing_key=routing_key, mandatory=False)
        except (AMQPConnectionError, ChannelInvalidStateError, RuntimeError) as error:
            log.info("publish failed (%s); waiting for the connection", type(error).__name__)
            await asyncio.wait_for(channel.ready(), self.settings.connect_timeout_s)
            await exchange.publish(message, routing_key=routing_key, mandatory=False)

    # --- queues -------------------------------------------------------------------------

    async def request_queue_depth(self) -> int:
        """Requests waiting (not counting the one being answered)."""
        return (await self.request_queue_counts()).messages

    async def request_queue_counts(self) -> QueueCounts:
        """Requests waiting and engines taking them, both from one declare."""
        assert self._request_queue is not None and self._confirm is not None
        # after a reconnect, wait (briefly) until the channel is restored
        await asyncio.wait_for(self._confirm.ready(), self.settings.connect_timeout_s)
        declared = await self._request_queue.declare()  # fresh counts, not cached ones
        return QueueCounts(declared.message_count or 0, declared.consumer_count or 0)

    async def take_waiting_request(self) -> Envelope[Request | Cancel] | None:
        """One waiting message, or None once the queue is empty (the startup purge uses it)."""
        assert self._request_queue is not None
        while (incoming := await self._request_queue.get(no_ack=False, fail=False)) is not None:
            envelope = await self._open(incoming, _request_or_cancel)
            if envelope is not None:
                return envelope
        return None

    async def reply_queue_exists(self, bot_id: str) -> bool:
        """Whether the bot ``bot_id`` still has its reply queue."""
        peek = await _peek(self.connection, self.names.reply_queue(bot_id))
        return peek.state != "missing"

    # --- taps ---------------------------------------------------------------------------

    async def tap(
        self,
        exchange: str,
        queue_name: str,
        handler: TapHandler,
        *,
        routing_keys: Iterable[str] = (),
        max_length: int = TAP_MAX_LENGTH,
    ) -> Tap:
        """Copies of what ``exchange`` routes with ``routing_keys`` (more with ``Tap.bind``),
        handed to ``handler`` one at a time; the queues the messages are meant for lose nothing.

        ``queue_name`` is the caller's own: exclusive to this connection, deleted with its
        consumer, at most ``max_length`` copies waiting (then the oldest are dropped), consumed
        ``TAP_PREFETCH`` at a time. A channel of its own, so ``Tap.close`` ends this tap alone.
        After a reconnect aio-pika declares the queue again, binds the keys bound at that moment and
        restarts the consumer; copies routed while the connection was down are gone.
        """
        channel = await self._channel(publisher_confirms=False)
        try:
            queue = await channel.declare_queue(
                queue_name,
                exclusive=True,
                auto_delete=True,
                arguments={"x-max-length": max_length},
            )
            tap = Tap(channel, queue, exchange, self.settings.connect_timeout_s)
            for key in routing_keys:
                await tap.bind(key)

            async def on_message(incoming: AbstractIncomingMessage) -> None:
                try:
                    await handler(Copy(incoming.type, incoming.content_type, incoming.body))
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

    # --- consuming ----------------------------------------------------------------------

    async def _open(
        self, incoming: AbstractIncomingMessage, decode: Decoder[M]
    ) -> Envelope[M] | None:
        """The decoded message in its envelope; or None once a message that is not valid
        protocol is parked in the dead-letter queue with the reason, and acknowledged (the
        rule for every queue we consume, docs/protocol.md "Bad input")."""
        try:
            message = decode(incoming)
        except ProtocolError as error:
            log.warning("malformed message on %s: %s", incoming.routing_key, error.reason)
            await self._bury(incoming, error.reason)
            await incoming.ack()
            return None
        requeue = partial(incoming.reject, requeue=True)
        return Envelope(message, bool(incoming.redelivered), incoming.ack, requeue)

    def _opening(
        self, decode: Decoder[M], handler: Handler[M]
    ) -> Callable[[AbstractIncomingMessage], Awaitable[None]]:
        """An aio-pika consumer callback that hands ``handler`` decoded messages only."""

        async def on_message(incoming: AbstractIncomingMessage) -> None:
            envelope = await self._open(incoming, decode)
            if envelope is not None:
                await handler(envelope)

        return on_message

    async def consume_requests(self, handler: Handler[Request | Cancel]) -> None:
        """Deliver requests one at a time (``prefetch_count=1``) on a channel of their own.

        A cancel may be found here too (the FIFO trap): the handler decides what to do."""
        self._requests_channel = await self._channel(publisher_confirms=False)
        await self._requests_channel.set_qos(prefetch_count=1)
        queue = await self._declare_request_queue(self._requests_channel)
        tag = await queue.consume(self._opening(_request_or_cancel, handler))
        self._request_consumer = (queue, tag)

    async def pause_requests(self) -> None:
        """Stop taking requests (a graceful shutdown); waiting ones stay in the queue."""
        if self._request_consumer is not None:
            queue, tag = self._request_consumer
            self._request_consumer = None
            await queue.cancel(tag)

    async def consume_cancels(self, engine_name: str, handler: Handler[Cancel]) -> None:
        """One durable cancel queue per engine worker, bound to the cancel fanout."""
        assert self._control is not None
        queue = await self._control.declare_queue(
            self.names.cancel_queue(engine_name),
            durable=True,
            arguments={
                "x-expires": IDLE_QUEUE_EXPIRES_MS,
                "x-message-ttl": int(self.settings.request_ttl_s * 1000),
            },
        )
        await queue.bind(self.names.cancel_exchange)
        await queue.consume(self._opening(_cancel, handler))

    async def consume_feedback(self, handler: Handler[Feedback]) -> None:
        """Votes from the shared feedback queue (every engine may take them), a few at a time
        on a channel of their own; the handler acknowledges each once it is stored."""
        channel = await self._channel(publisher_confirms=False)
        await channel.set_qos(prefetch_count=FEEDBACK_PREFETCH)
        queue = await self._declare_feedback_queue(channel)
        self._feedback_consumer = (queue, await queue.consume(self._opening(_feedback, handler)))

    async def stop_feedback(self) -> None:
        """Take no more votes (a graceful shutdown); those not taken stay in the queue."""
        if self._feedback_consumer is not None:
            queue, tag = self._feedback_consumer
            self._feedback_consumer = None
            await queue.cancel(tag)

    async def consume_expired(self, handler: Handler[Request]) -> None:
        """Requests whose TTL ran out in the queue, so the engine can tell their askers."""
        assert self._control is not None
        queue = await self._control.declare_queue(self.names.expired_queue, durable=True)
        await queue.consume(self._opening(_request, handler))

    async def consume_replies(
        self, bot_id: str, handler: Handler[ReplyEvent], *, keep_s: float
    ) -> None:
        """The bot process's own reply queue: durable, so the terminal events (persistent) of
        its answers survive a broker restart or a reconnect; RabbitMQ drops it once it has
        had no consumer for ``keep_s``."""
        assert self._control is not None
        queue = await self._control.declare_queue(
            self.names.reply_queue(bot_id),
            durable=True,
            arguments={"x-expires": int(keep_s * 1000)},
        )
        # Two processes under one name would take each other's replies. Checked once, here: an
        # exclusive consumer would also refuse this process's own consumer when aio-pika
        # restores it after a reconnect the broker has not noticed yet.
        if queue.declaration_result.consumer_count:
            raise ReplyQueueTaken(f"another process consumes {queue.name}")
        await queue.bind(self.names.reply_exchange, routing_key=bot_id)
        self._reply_consumer = (queue, await queue.consume(self._opening(_event, handler)))

    async def stop_replies(self) -> None:
        """Stop taking reply events: those not yet delivered stay queued for the next process
        under the same bot id."""
        if self._reply_consumer is not None:
            queue, tag = self._reply_consumer
            self._reply_consumer = None
            await queue.cancel(tag)

    async def delete_reply_queue(self, bot_id: str) -> None:
        """Drop a reply queue nobody will come back for, so the engine stops answering it."""
        assert self._confirm is not None
        await self._confirm.queue_delete(self.names.reply_queue(bot_id))

    async def delete_all(self) -> None:
        """Remove the shared queues and exchanges of this prefix (tests and uninstall)."""
        assert self._confirm is not None
        names = self.names
        queues = (names.request_queue, names.expired_queue, names.dead_queue, names.feedback_queue)
        for queue in queues:
            await self._confirm.queue_delete(queue)
        for exchange in (
            names.request_exchange,
            names.expired_exchange,
            names.reply_exchange,
            names.cancel_exchange,
            names.feedback_exchange,
            names.status_exchange,
        ):
            await self._confirm.exchange_delete(exchange)


@dataclass(frozen=True)
class QueuePeek:
    """A queue as a passive declare sees it: ``exclusive`` means alive on another connection."""

    state: Literal["ok", "missing", "exclusive"]
    messages: int | None = None
    consumers: int | None = None


async def peek_queues(settings: Settings, names: list[str]) -> list[QueuePeek]:
    """Message and consumer counts of ``names``, on a plain connection that declares nothing
    (``concierge status``: looking must never create a queue)."""
    url = settings.broker_url.get_secret_value()
    try:
        connection = await aio_pika.connect(url, timeout=settings.connect_timeout_s)
    except Exception as error:
        raise BrokerUnavailable(
            f"cannot reach RabbitMQ at {safe_url(url)}: {type(error).__name__}"
        ) from None
    async with connection:
        return [await _peek(connection, name) for name in names]


async def _peek(connection: AbstractConnection, name: str) -> QueuePeek:
    """A failed passive declare closes its channel, hence a throwaway channel per queue."""
    channel = await connection.channel(publisher_confirms=False)
    queue: AbstractQueue
    try:
        if isinstance(channel, AbstractRobustChannel):  # never to be re-declared on reconnect
            queue = await channel.declare_queue(name, passive=True, robust=False)
        else:
            queue = await channel.declare_queue(name, passive=True)
    except ChannelNotFoundEntity:
        return QueuePeek("missing")
    except (ChannelLockedResource, ChannelAccessRefused):
        return QueuePeek("exclusive")
    finally:
        if not channel.is_closed:
            await channel.close()
    declared = queue.declaration_result
    return QueuePeek("ok", declared.message_count, declared.consumer_count)
