"""A request given out before and never settled: answered anew, queued again, or set aside.

The broker gives a request out again when the engine answering it died, or when this engine
lost its connection meanwhile (the ack went with the old channel). ``Redeliveries.take_back``
tells the two apart by what the worker remembers answering: one answered here is not answered
twice, its terminal event (the whole text) sent again unless the broker confirmed it. One whose
engine died is answered anew: on a classic queue queued again with its attempt counted, on a
quorum queue (which counts deliveries) in place. One that has already stopped the engine
``MAX_ATTEMPTS`` times (``broker.dead_letters``) is set aside, its asker told: by this engine
(``set_aside``), or, past a quorum queue's ``x-delivery-limit``, by the broker, which
dead-letters it to the queue of expired requests (``past_delivery_limit``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from broker.amqp import Broker
from broker.dead_letters import DELIVERY_LIMIT, MAX_ATTEMPTS, DeadLettered
from broker.messages import Envelope
from broker.protocol import Cancel, Request
from broker.requeue import publish_again
from config.settings import Settings
from engine.health import Running
from engine.replies import Replies

# The worker's logger: these lines read as they did when this was part of ``engine.worker``.
log = logging.getLogger("engine.worker")

Handle = Callable[[Envelope[Request | Cancel], Request], Awaitable[None]]


class Redeliveries:
    """What the worker does with a request that comes back, or past its delivery limit."""

    def __init__(
        self,
        settings: Settings,
        broker: Broker,
        answered: Mapping[str, Replies | None],
        replies: Callable[[Request], Replies],
        handle: Handle,
        answering: Callable[[], Running | None],
    ) -> None:
        self.settings = settings
        self.broker = broker
        self._answered = answered  # the worker's: sessions run here to their end, their stream
        self._replies = replies  # the worker's reply stream of a request
        self._handle = handle  # the worker's: answer a request now
        self._answering = answering  # the answer being generated now

    async def set_aside(self, envelope: Envelope[Request | Cancel], request: Request) -> None:
        """Park a request that stopped the engine ``MAX_ATTEMPTS`` times, telling its asker."""
        log.warning("set aside: it stopped the engine %d times mid-answer", MAX_ATTEMPTS)
        reason = f"stopped the engine {MAX_ATTEMPTS} times while answered"
        await self._park(envelope, request, reason, "engine.set_aside")

    async def past_delivery_limit(self, envelope: Envelope[DeadLettered], request: Request) -> None:
        """Park a request a quorum queue dead-lettered past its ``x-delivery-limit`` (given out
        ``MAX_ATTEMPTS`` times, never settled), telling its asker. Unless this engine answers
        it, or did: then what came back twice was its delivery, on a connection lost twice
        mid-answer, and the answer goes on (or went out) here."""
        if request.session_id in self._answered or (
            (answering := self._answering()) is not None
            and answering.session_id == request.session_id
        ):
            log.info("past its delivery limit, but answered here (connection lost twice): acked")
            await envelope.ack()
            return
        log.warning("set aside by the broker: given out %d times, never settled", MAX_ATTEMPTS)
        reason = (
            f"delivery_limit: given out {MAX_ATTEMPTS} times, each time its engine stopped "
            f"before the end (x-delivery-limit {DELIVERY_LIMIT})"
        )
        await self._park(envelope, request, reason, "engine.delivery_limit")

    async def _park(self, envelope: Envelope[Any], request: Request, reason: str, key: str) -> None:
        """Move the request to the dead-letter queue with ``reason``, and tell its asker."""
        assert envelope.set_aside is not None  # every envelope the broker opens has it
        await envelope.set_aside(reason)
        replies = self._replies(request)
        await replies.failed(replies.text(key, times=MAX_ATTEMPTS))

    async def take_back(self, envelope: Envelope[Request | Cancel], request: Request) -> None:
        """A request given out before and never settled: its engine died answering it, or this
        one lost its connection meanwhile (then it was answered here: drop it).

        On a quorum queue, answered again in place: the broker counts its deliveries, and
        dead-letters it past the limit (``past_delivery_limit``). On a classic queue, published
        again with its attempt counted, to the queue's end: the requests behind it waited
        through the crash, and if this one is what killed the engine they are not held up by it
        again (docs/reliability.md). If the broker refuses the copy, it is answered now,
        uncounted."""
        if request.session_id in self._answered:  # this engine ran it: a reconnect, no death
            replies = self._answered[request.session_id]
            if replies is not None and replies.end is not None:
                if replies.end_delivered:  # confirmed: the asker has it, or will
                    log.info("redelivered after a reconnect, its end already delivered: acked")
                else:
                    log.info("redelivered after a reconnect, already answered: end sent again")
                    await replies.send_end_again()  # an asker that had it drops it
                await settle(envelope)
            else:  # the reconnect cut the answer short: begun anew, an attempt of its own
                log.info("redelivered after a reconnect cut its answer short: answered again")
                await self._handle(envelope, request)
            return
        if self.settings.queue_type == "quorum":
            log.info("its engine stopped mid-answer: answered again (attempt %d)", envelope.attempt)
            await self._handle(envelope, request)
            return
        try:
            await publish_again(self.broker, [(request, envelope.attempt)])
        except Exception as error:
            log.warning("not published again (%s): answered now", error)
            await self._handle(envelope, request)
            return
        await settle(envelope)
        log.info("its engine stopped mid-answer: queued again (attempt %d)", envelope.attempt)


async def settle(envelope: Envelope[Request | Cancel]) -> None:
    """Ack a request once it has its terminal event, also one a graceful stop cut short (its
    asker was told "interrupted"): handed back, it would be answered again for nobody."""
    try:
        await envelope.ack()
    except Exception as error:  # the channel may have closed; the broker redelivers
        log.warning("not settled: %s", error)
