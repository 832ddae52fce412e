"""Requests put back in the request queue as new messages, each publisher-confirmed.

Two callers, both in the engine: the request an engine died answering, published again with
its attempt counted (a classic queue does not count redeliveries), and the requests the
startup purge keeps, published again in their order. A copy keeps what is left of its time to
live, so it still expires at its deadline.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from broker import messages
from broker.amqp import Broker
from broker.protocol import REQUEST_ROUTING_KEY, Request

MIN_TTL_S = 0.001  # a copy past its deadline expires at once (its asker is told "expired")


async def publish_again(broker: Broker, copies: Sequence[tuple[Request, int]]) -> None:
    """Publish each ``(request, attempt)`` to the request exchange, in order, confirmed.

    On a channel of its own, opened for the occasion: this happens after a crash or at
    start, never per answer. Raises when the broker refuses one (the queue is full)."""
    if not copies:
        return
    channel = await broker.connection.channel(publisher_confirms=True)
    try:
        exchange = await channel.get_exchange(broker.names.request_exchange, ensure=False)
        for request, attempt in copies:
            ttl_s = max(request.deadline - time.time(), MIN_TTL_S)
            message = messages.bot_message(request, ttl_s, attempt=attempt)
            await exchange.publish(message, routing_key=REQUEST_ROUTING_KEY)
    finally:
        await channel.close()
