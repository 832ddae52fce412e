"""Concierge's exchanges and queues as declared on RabbitMQ, with their arguments.

Every declaration is idempotent, so every process may run it; docs/protocol.md is the map.
After a reconnect aio-pika re-declares, on each channel, what was declared on it here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import aio_pika
from aio_pika.abc import AbstractExchange, AbstractQueue, AbstractRobustChannel

from broker.protocol import (
    FEEDBACK_QUEUE_MAX_LENGTH,
    REQUEST_QUEUE_MAX_LENGTH,
    REQUEST_ROUTING_KEY,
    Names,
)

DEAD_QUEUE_MAX_LENGTH = 10_000
IDLE_QUEUE_EXPIRES_MS = 3_600_000  # a cancel queue nobody uses is dropped after an hour


@dataclass(frozen=True)
class Core:
    """What the broker publishes to with confirms, and the request queue it counts."""

    confirmed_exchanges: Mapping[str, AbstractExchange]  # request, cancel and feedback, by name
    request_queue: AbstractQueue


async def declare_core(channel: AbstractRobustChannel, names: Names) -> Core:
    """Exchanges and the shared queues."""
    direct, fanout = aio_pika.ExchangeType.DIRECT, aio_pika.ExchangeType.FANOUT
    request_x = await channel.declare_exchange(names.request_exchange, direct, durable=True)
    expired_x = await channel.declare_exchange(names.expired_exchange, fanout, durable=True)
    await channel.declare_exchange(names.reply_exchange, direct, durable=True)
    cancel_x = await channel.declare_exchange(names.cancel_exchange, fanout, durable=True)
    feedback_x = await channel.declare_exchange(names.feedback_exchange, fanout, durable=True)
    await channel.declare_exchange(names.status_exchange, fanout, durable=True)

    requests = await declare_request_queue(channel, names)
    await requests.bind(request_x, REQUEST_ROUTING_KEY)
    expired = await channel.declare_queue(names.expired_queue, durable=True)
    await expired.bind(expired_x)
    await channel.declare_queue(
        names.dead_queue, durable=True, arguments={"x-max-length": DEAD_QUEUE_MAX_LENGTH}
    )
    # Declared by bots too: a vote given while no engine runs waits for one.
    feedback = await declare_feedback_queue(channel, names)
    await feedback.bind(feedback_x)
    confirmed = {
        names.request_exchange: request_x,
        names.cancel_exchange: cancel_x,
        names.feedback_exchange: feedback_x,
    }
    return Core(confirmed, requests)


async def declare_request_queue(channel: AbstractRobustChannel, names: Names) -> AbstractQueue:
    """Declared (not just looked up) on each channel that uses it, so that after a
    reconnect aio-pika restores the queue and its consumers on that channel too."""
    return await channel.declare_queue(
        names.request_queue,
        durable=True,
        arguments={
            "x-dead-letter-exchange": names.expired_exchange,
            "x-max-length": REQUEST_QUEUE_MAX_LENGTH,
            "x-overflow": "reject-publish",
        },
    )


async def declare_feedback_queue(channel: AbstractRobustChannel, names: Names) -> AbstractQueue:
    return await channel.declare_queue(
        names.feedback_queue,
        durable=True,
        arguments={"x-max-length": FEEDBACK_QUEUE_MAX_LENGTH},
    )


async def declare_cancel_queue(
    channel: AbstractRobustChannel, names: Names, engine_name: str, ttl_s: float
) -> AbstractQueue:
    """One durable cancel queue per engine worker, bound to the cancel fanout; a cancel older
    than a request's TTL has nothing left to cancel."""
    queue = await channel.declare_queue(
        names.cancel_queue(engine_name),
        durable=True,
        arguments={"x-expires": IDLE_QUEUE_EXPIRES_MS, "x-message-ttl": int(ttl_s * 1000)},
    )
    await queue.bind(names.cancel_exchange)
    return queue


async def declare_reply_queue(
    channel: AbstractRobustChannel, names: Names, bot_id: str, keep_s: float
) -> AbstractQueue:
    """A bot process's own reply queue, durable, dropped once it has had no consumer for
    ``keep_s``; bound by the caller once it knows no other process consumes it."""
    return await channel.declare_queue(
        names.reply_queue(bot_id), durable=True, arguments={"x-expires": int(keep_s * 1000)}
    )


async def delete_all(channel: AbstractRobustChannel, names: Names) -> None:
    """Remove the shared queues and exchanges of this prefix (tests and uninstall)."""
    for queue in (names.request_queue, names.expired_queue, names.dead_queue, names.feedback_queue):
        await channel.queue_delete(queue)
    for exchange in (
        names.request_exchange,
        names.expired_exchange,
        names.reply_exchange,
        names.cancel_exchange,
        names.feedback_exchange,
        names.status_exchange,
    ):
        await channel.exchange_delete(exchange)
