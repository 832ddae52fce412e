"""The startup purge: what waited for this engine is answered, unless it is stale.

``main()`` runs it once, before consuming (never on a reconnect). Stale is a question asked
more than ``STALE_AFTER_S`` before the purge: asked during a long outage, its asker has moved
on, and an answer now would come out of nowhere. Kept, in their order: the rest, and always the
request an engine died answering (it is redelivered, or carries its attempt), whatever its
age: it was being answered a moment ago. A request that has already stopped an engine
``MAX_ATTEMPTS`` times (``broker.dead_letters``) is set aside instead
(``Redeliveries.set_aside``, ``engine.redelivery``).
A kept request's copy carries its attempt in a header, on a quorum queue too: the copy's own
deliveries are counted from 0, so there the engine, not the delivery limit, sets it aside
if it stops an engine again.

The purge takes every waiting message first, holding them unacknowledged, then publishes the
kept ones again in their order (with their attempt counted), then acknowledges all: a copy
published while messages were still being taken would be taken again. An engine killed in
between leaves the originals to be redelivered, and their copies too: at least once, never
lost.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from broker.amqp import Broker
from broker.dead_letters import MAX_ATTEMPTS
from broker.messages import Envelope
from broker.protocol import Cancel, Request
from broker.requeue import publish_again
from config.logging import session_context

log = logging.getLogger(__name__)

# Two minutes: an engine brought back by its supervisor (or by hand, at once) answers what
# was asked meanwhile; older questions were asked during an outage. Below the request TTL
# (300 s by default), or the TTL would expire them all first.
STALE_AFTER_S = 120.0


@dataclass(frozen=True)
class Purged:
    stale: int  # told "the engine restarted"
    kept: int  # published again, in order
    set_aside: int  # stopped the engine MAX_ATTEMPTS times


Tell = Callable[[Request], Awaitable[None]]
SetAside = Callable[[Envelope[Request | Cancel], Request], Awaitable[None]]


def kept(envelope: Envelope[Request | Cancel], now: float) -> Request | None:
    """The waiting request, if it is answered after the purge (see the module's docstring)."""
    request = envelope.message
    if not isinstance(request, Request) or envelope.attempt > MAX_ATTEMPTS:
        return None
    fresh = now - request.sent_at <= STALE_AFTER_S
    return request if fresh or envelope.attempt > 1 else None


async def purge_stale(broker: Broker, tell_stale: Tell, set_aside: SetAside) -> Purged:
    """Empty the request queue and publish again what is kept; tell each stale asker."""
    taken: list[Envelope[Request | Cancel]] = []
    while (envelope := await broker.take_waiting_request()) is not None:
        taken.append(envelope)
    now = time.time()
    decided = [(envelope, kept(envelope, now)) for envelope in taken]
    copies = [(request, envelope.attempt) for envelope, request in decided if request]
    await publish_again(broker, copies)
    stale = aside = 0
    for envelope, copied in decided:
        request = envelope.message
        if not isinstance(request, Request) or copied is not None:
            await envelope.ack()  # kept (its copy is queued); a cancel found here is dropped
            continue
        with session_context(request.session_id):
            if envelope.attempt > MAX_ATTEMPTS:
                await set_aside(envelope, request)
                aside += 1
            else:
                await tell_stale(request)
                await envelope.ack()
                stale += 1
    return Purged(stale, len(copies), aside)
