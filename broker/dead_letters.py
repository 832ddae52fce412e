"""Why the request queue dead-lettered a request, and the count after which it does.

The request queue dead-letters to ``P.expired`` (its one dead-letter exchange) for two
reasons, which RabbitMQ names in the message's ``x-death`` header: ``expired`` (its TTL ran
out while it waited) and, on a quorum queue, ``delivery_limit`` (it was given out and came back
unsettled more than ``x-delivery-limit`` times: the engines holding it died). The engine reads
the reason to tell the asker the right thing (``DeadLettered``).

A request is answered at most ``MAX_ATTEMPTS`` times: one question that kills the engine must
not take the service down in a loop. A quorum queue counts the deliveries itself
(``x-delivery-count``, one more each time a delivery comes back unsettled) and dead-letters a
message whose count goes past ``DELIVERY_LIMIT``; a classic queue says only ``redelivered``,
so there the engine counts, in a header on a copy (``broker.requeue``).

No aio-pika here: a decoder reads only the body, content type and headers (``Incoming``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from broker.protocol import Request, decode_request

# The most times a request is started: the second engine that dies answering it is the last.
MAX_ATTEMPTS = 2
# RabbitMQ (3.10) dead-letters a quorum queue's message when a return makes its delivery count
# greater than the limit: with 1, the first death gives it out again (attempt 2), the second
# dead-letters it. So x-delivery-limit is the deaths a request may survive.
DELIVERY_LIMIT = MAX_ATTEMPTS - 1

EXPIRED = "expired"  # RabbitMQ's x-death reasons
DELIVERY_LIMIT_REASON = "delivery_limit"


class Incoming(Protocol):
    """What a decoder reads of an AMQP message (aio-pika's incoming message has it all)."""

    @property
    def body(self) -> bytes: ...

    @property
    def content_type(self) -> str | None: ...

    @property
    def headers(self) -> Mapping[str, object]: ...


@dataclass(frozen=True)
class DeadLettered:
    """A request the request queue dead-lettered to ``P.expired``, and RabbitMQ's reason."""

    request: Request
    reason: str  # EXPIRED or DELIVERY_LIMIT_REASON

    @property
    def past_delivery_limit(self) -> bool:
        return self.reason == DELIVERY_LIMIT_REASON


def death_reason(headers: Mapping[str, object]) -> str:
    """The reason of the latest dead-lettering (``x-death`` lists the newest first), or of the
    first (``x-first-death-reason``); ``expired`` when neither says (what a classic queue's
    expired request always was, before quorum queues)."""
    deaths = headers.get("x-death")
    if isinstance(deaths, list) and deaths and isinstance(deaths[0], Mapping):
        reason = deaths[0].get("reason")
        if isinstance(reason, str):
            return reason
    first = headers.get("x-first-death-reason")
    return first if isinstance(first, str) else EXPIRED


def to_dead_lettered(incoming: Incoming) -> DeadLettered:
    """A message of ``P.expired``, decoded (a malformed one raises ``ProtocolError``)."""
    request = decode_request(incoming.body, incoming.content_type)
    return DeadLettered(request, death_reason(incoming.headers or {}))
