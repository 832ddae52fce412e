"""The consuming side of the ``Broker``: each queue's messages to a handler, and taps.

``Broker`` (``broker.amqp``) is a ``Consuming``: the connection, its channels and the
dead-letter queue are its own, the consumers are here. A handler gets decoded protocol messages
in an ``Envelope``, never an aio-pika message: a message that does not decode is dead-lettered
(``messages.open_envelope``) and its handler never sees it. After a reconnect aio-pika restarts
the consumers; a consumer stopped here leaves what it did not deliver in its queue.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Iterable
from contextlib import suppress
from typing import TypeVar

from aio_pika.abc import AbstractIncomingMessage, AbstractQueue, AbstractRobustChannel
from aiormq.exceptions import AMQPError

from broker import dead_letters, messages, topology
from broker.errors import ReplyQueueTaken
from broker.messages import Decoder, Handler
from broker.nodes import CONNECT_TIMEOUT_S
from broker.protocol import Cancel, Feedback, Names, ReplyEvent, Request
from broker.taps import TAP_MAX_LENGTH, Tap, TapHandler, open_tap
from config.settings import Settings

M = TypeVar("M")

FEEDBACK_PREFETCH = 10  # votes in hand at once: each is stored before it is acknowledged

Consumer = tuple[AbstractQueue, str]  # a queue, and the tag of our consumer on it


class Consuming(ABC):
    """The consumers of Concierge's queues, on channels of the ``Broker`` that completes it."""

    settings: Settings
    names: Names
    _control: AbstractRobustChannel | None  # the Broker's: cancels, expired requests, replies

    def __init__(self) -> None:
        self._requests_channel: AbstractRobustChannel | None = None
        self._request_consumer: Consumer | None = None
        self._reply_consumer: Consumer | None = None
        self._feedback_consumer: Consumer | None = None

    @abstractmethod
    async def _channel(self, *, publisher_confirms: bool) -> AbstractRobustChannel:
        """A new channel on the connection."""

    @abstractmethod
    async def _bury(self, incoming: AbstractIncomingMessage, reason: str) -> None:
        """Park a message we cannot use in the dead-letter queue, with the reason."""

    @property
    def _type(self) -> topology.QueueType:
        return self.settings.queue_type

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
        on a channel of their own; ``broker.taps.open_tap`` says how they are kept."""
        channel, wait_s = await self._channel(publisher_confirms=False), CONNECT_TIMEOUT_S
        return await open_tap(
            channel, exchange, queue_name, handler, routing_keys, max_length, wait_s
        )

    def _opening(self, decode: Decoder[M], handler: Handler[M]) -> messages.Callback:
        """A consumer callback: ``handler`` gets decoded messages, the rest are dead-lettered."""
        return messages.opening(decode, handler, self._bury)

    async def consume_requests(self, handler: Handler[Request | Cancel]) -> None:
        """Deliver requests one at a time (``prefetch_count=1``) on a channel of their own.

        A cancel may be found here too (the FIFO trap): the handler decides what to do."""
        self._requests_channel = channel = await self._channel(publisher_confirms=False)
        await channel.set_qos(prefetch_count=1)
        queue = await topology.declare_request_queue(channel, self.names, self._type)
        tag = await queue.consume(self._opening(messages.to_request_or_cancel, handler))
        self._request_consumer = (queue, tag)

    async def pause_requests(self) -> None:
        """Stop taking requests (a graceful shutdown); waiting ones stay in the queue."""
        consumer, self._request_consumer = self._request_consumer, None
        await _stop(consumer)

    async def consume_cancels(self, engine_name: str, handler: Handler[Cancel]) -> None:
        """One durable cancel queue per engine worker, bound to the cancel fanout."""
        assert self._control is not None
        ttl_s = self.settings.request_ttl_s
        queue = await topology.declare_cancel_queue(
            self._control, self.names, self._type, engine_name, ttl_s
        )
        await queue.consume(self._opening(messages.to_cancel, handler))

    async def consume_feedback(self, handler: Handler[Feedback]) -> None:
        """Votes from the shared feedback queue (every engine may take them), a few at a time
        on a channel of their own; the handler acknowledges each once it is stored."""
        channel = await self._channel(publisher_confirms=False)
        await channel.set_qos(prefetch_count=FEEDBACK_PREFETCH)
        queue = await topology.declare_feedback_queue(channel, self.names, self._type)
        tag = await queue.consume(self._opening(messages.to_feedback, handler))
        self._feedback_consumer = (queue, tag)

    async def stop_feedback(self) -> None:
        """Take no more votes (a graceful shutdown); those not taken stay in the queue."""
        consumer, self._feedback_consumer = self._feedback_consumer, None
        await _stop(consumer)

    async def consume_expired(self, handler: Handler[dead_letters.DeadLettered]) -> None:
        """Requests dead-lettered by the request queue, with why, to tell their askers."""
        assert self._control is not None
        queue = await topology.declare_expired_queue(self._control, self.names, self._type)
        await queue.consume(self._opening(dead_letters.to_dead_lettered, handler))

    async def consume_replies(
        self, bot_id: str, handler: Handler[ReplyEvent], *, keep_s: float, one_off: bool = False
    ) -> None:
        """The bot process's own reply queue: durable, so the terminal events (persistent) of
        its answers survive a broker restart or a reconnect; RabbitMQ drops it once it has
        had no consumer for ``keep_s``. A ``one_off`` bot's (a random id, deleted when it
        closes) is not durable on a cluster of quorum queues (``topology``)."""
        assert self._control is not None
        queue = await topology.declare_reply_queue(
            self._control, self.names, self._type, bot_id, keep_s, one_off=one_off
        )
        # Two processes under one name would take each other's replies. Checked once, here: an
        # exclusive consumer would also refuse this process's own consumer when aio-pika
        # restores it after a reconnect the broker has not noticed yet.
        if queue.declaration_result.consumer_count:
            raise ReplyQueueTaken(f"another process consumes {queue.name}")
        await queue.bind(self.names.reply_exchange, routing_key=bot_id)
        self._reply_consumer = (
            queue,
            await queue.consume(self._opening(messages.to_event, handler)),
        )

    async def stop_replies(self) -> None:
        """Stop taking reply events: those not yet delivered stay queued for the next process
        under the same bot id."""
        consumer, self._reply_consumer = self._reply_consumer, None
        await _stop(consumer)


async def _stop(consumer: Consumer | None) -> None:
    """Cancel a consumer: its queue keeps what it did not deliver. Bounded: in an outage the
    cancel would wait for the connection, and the broker drops the consumer with it anyway."""
    if consumer is not None:
        with suppress(TimeoutError, AMQPError, ConnectionError, RuntimeError):
            await asyncio.wait_for(consumer[0].cancel(consumer[1]), CONNECT_TIMEOUT_S)
