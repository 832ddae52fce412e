"""Protocol messages to aio-pika messages and back: the AMQP properties of each, the decoders,
and the ``Envelope`` a consumer gets instead of an aio-pika message.

A message that does not decode is dead-lettered on opening, on every queue, and its consumer
never sees it. docs/protocol.md lists the properties set here; ``broker.protocol`` encodes the
bodies.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from typing import Generic, TypeVar

import aio_pika
from aio_pika.abc import AbstractIncomingMessage

from broker.protocol import (
    CONTENT_TYPE,
    ERROR_HEADER,
    TERMINAL_TYPES,
    Cancel,
    Feedback,
    ProtocolError,
    ReplyEvent,
    Request,
    decode_cancel,
    decode_event,
    decode_feedback,
    decode_request,
    encode,
)

log = logging.getLogger(__name__)

M = TypeVar("M")

# Which attempt at answering a request a copy of it is (absent: the first). An engine that
# gets a request back from an engine that died answering it publishes it again with this
# raised (``broker.requeue``): classic queues only say ``redelivered``, never how often.
ATTEMPT_HEADER = "x-concierge-attempt"
# Set by quorum queues on a message given out again: how many deliveries came back unsettled.
DELIVERY_COUNT_HEADER = "x-delivery-count"


@dataclass(frozen=True)
class Envelope(Generic[M]):
    """A decoded message and what its consumer may do with it; aio-pika stays in the broker."""

    message: M
    redelivered: bool  # the broker gave it out before and it was never settled
    ack: Callable[[], Awaitable[None]]
    requeue: Callable[[], Awaitable[None]]  # hand it back to the queue for another consumer
    # Which attempt at it this delivery is: 1, or more once consumers died holding it.
    attempt: int = 1
    # Park it in the dead-letter queue with the reason, and acknowledge it.
    set_aside: Callable[[str], Awaitable[None]] | None = None


Handler = Callable[[Envelope[M]], Awaitable[None]]
Decoder = Callable[[AbstractIncomingMessage], M]
Burier = Callable[[AbstractIncomingMessage, str], Awaitable[None]]  # dead-letters, with a reason
Callback = Callable[[AbstractIncomingMessage], Awaitable[None]]  # as aio-pika consumes


async def open_envelope(
    incoming: AbstractIncomingMessage, decode: Decoder[M], bury: Burier
) -> Envelope[M] | None:
    """The decoded message in its envelope; or None once a message that is not valid
    protocol is parked in the dead-letter queue with the reason, and acknowledged (the
    rule for every queue we consume, docs/protocol.md "Bad input")."""
    try:
        message = decode(incoming)
    except ProtocolError as error:
        log.warning("malformed message on %s: %s", incoming.routing_key, error.reason)
        await bury(incoming, error.reason)
        await incoming.ack()
        return None
    requeue = partial(incoming.reject, requeue=True)

    async def set_aside(reason: str) -> None:
        await bury(incoming, reason)
        await incoming.ack()

    redelivered = bool(incoming.redelivered)
    attempt = attempt_of(incoming.headers or {}, redelivered)
    return Envelope(message, redelivered, incoming.ack, requeue, attempt, set_aside)


def attempt_of(headers: Mapping[str, object], redelivered: bool) -> int:
    """The attempt a delivery is: the copy's own (``ATTEMPT_HEADER``) plus the deliveries of
    that copy that came back unsettled (a quorum queue counts them; a classic queue says only
    whether there was one)."""
    copy = headers.get(ATTEMPT_HEADER)
    count = headers.get(DELIVERY_COUNT_HEADER)
    returned = count if isinstance(count, int) else int(redelivered)
    return (copy if isinstance(copy, int) and copy >= 1 else 1) + max(returned, 0)


def opening(decode: Decoder[M], handler: Handler[M], bury: Burier) -> Callback:
    """An aio-pika consumer callback that hands ``handler`` decoded messages only."""

    async def on_message(incoming: AbstractIncomingMessage) -> None:
        envelope = await open_envelope(incoming, decode, bury)
        if envelope is not None:
            await handler(envelope)

    return on_message


# --- incoming -------------------------------------------------------------------------------


def to_request_or_cancel(incoming: AbstractIncomingMessage) -> Request | Cancel:
    """A cancel can be found in the request queue (the FIFO trap, docs/protocol.md): its AMQP
    ``type`` says so."""
    if incoming.type == "cancel":
        return decode_cancel(incoming.body, incoming.content_type)
    return decode_request(incoming.body, incoming.content_type)


def to_request(incoming: AbstractIncomingMessage) -> Request:
    return decode_request(incoming.body, incoming.content_type)


def to_cancel(incoming: AbstractIncomingMessage) -> Cancel:
    return decode_cancel(incoming.body, incoming.content_type)


def to_event(incoming: AbstractIncomingMessage) -> ReplyEvent:
    return decode_event(incoming.body, incoming.content_type)


def to_feedback(incoming: AbstractIncomingMessage) -> Feedback:
    return decode_feedback(incoming.body, incoming.content_type)


# --- outgoing -------------------------------------------------------------------------------


def bot_message(message: Request | Cancel, ttl_s: float, *, attempt: int = 1) -> aio_pika.Message:
    """A bot-to-engine message with its protocol properties: persistent, typed, with a TTL;
    a request published again for another attempt says which (``ATTEMPT_HEADER``)."""
    return aio_pika.Message(
        encode(message),
        content_type=CONTENT_TYPE,
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        expiration=timedelta(seconds=ttl_s),
        message_id=message.session_id,
        reply_to=message.reply_to if isinstance(message, Request) else None,
        type=message.type,
        headers={ATTEMPT_HEADER: attempt} if attempt > 1 else None,
    )


def event_message(event: ReplyEvent, *, copy: bool = False) -> aio_pika.Message:
    """A reply event as the engine publishes it to its asker: a terminal event persistent (it
    carries the whole text, and must outlive a broker restart); or ``copy``, for watchers,
    never persistent."""
    persistent = not copy and event.type in TERMINAL_TYPES
    return aio_pika.Message(
        encode(event),
        content_type=CONTENT_TYPE,
        delivery_mode=(
            aio_pika.DeliveryMode.PERSISTENT if persistent else aio_pika.DeliveryMode.NOT_PERSISTENT
        ),
        correlation_id=event.session_id,
        type=event.type,
    )


def feedback_message(feedback: Feedback) -> aio_pika.Message:
    """A vote: persistent, and no TTL (a vote keeps while no engine runs)."""
    return aio_pika.Message(
        encode(feedback),
        content_type=CONTENT_TYPE,
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        message_id=feedback.session_id,
        type=feedback.type,
    )


def dead_letter(incoming: AbstractIncomingMessage, reason: str) -> aio_pika.Message:
    """A message we cannot use, as parked in the dead-letter queue: the reason in a header."""
    headers = dict(incoming.headers or {})
    headers[ERROR_HEADER] = reason[:500]
    headers["x-concierge-source"] = incoming.routing_key or ""
    return aio_pika.Message(
        incoming.body,
        content_type=incoming.content_type,
        headers=headers,
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
    )
