"""Requests put back in the request queue as new messages, each publisher-confirmed.

Two callers, both in the engine: the request an engine died answering, on a classic queue,
published again with its attempt counted (a classic queue does not count redeliveries; a
quorum queue does, so there it is answered again in place, ``broker.dead_letters``), and the
requests the startup purge keeps, published again in their order, with their attempt (a
copy's deliveries are counted from 0 again). A copy keeps what is left of its time to live, so
it still expires at its deadline.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from broker.amqp import Broker
from broker.protocol import REQUEST_ROUTING_KEY, Request

MIN_TTL_S = 0.001  # a copy past its deadline expires at once (its asker is told "expired")


async def publish_again(broker: Broker, copies: Sequence[tuple[Request, int]]) -> None:
    """Publish each ``(request, attempt)`` to the request exchange, in order, confirmed.
    Raises when the broker refuses one (the queue is full)."""
    for request, attempt in copies:
        ttl_s = max(request.deadline - time.time(), MIN_TTL_S)
        exchange = broker.names.request_exchange
        await broker.publish(request, exchange, REQUEST_ROUTING_KEY, ttl_s, attempt=attempt)
