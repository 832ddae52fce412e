"""Publishing reply events one at a time, saying whether a failed one may have gone out.

The engine's ``Replies`` keeps an answer's events through a broker outage (``engine.outbox``)
and needs to know, for each failed publish, whether the broker may have it: an event refused
because the channel was already closed certainly did not go out, and is published again once
the connection is back; one whose confirmation was lost with the connection may have reached
the asker's queue (RabbitMQ's own warning: "a lost confirmation does not mean the broker
rejected the message"). An event the broker refuses (a nack) certainly did not go out either:
a quorum reply queue whose leader's node has just gone refuses publishes until another node
leads it, a few seconds; it is held and published again like the others. The stream channel
has publisher confirms for that: the confirmation
comes back within a few milliseconds, and only the event loop's pump waits for it, never the
generation thread (``engine.replies.TokenRelay``).
"""

from __future__ import annotations

import asyncio

from aio_pika.abc import AbstractExchange, AbstractRobustChannel
from aio_pika.exceptions import DeliveryError
from aiormq.exceptions import AMQPError

from broker import messages
from broker.errors import BrokerAway
from broker.protocol import ReplyEvent

# A confirmation comes back within milliseconds; one that takes this long is from a connection
# that has stopped answering (heartbeats take about 90 s to say so): held and sent again.
CONFIRM_TIMEOUT_S = 5.0


class EventStream:
    """The reply exchange on the stream channel (confirmed), and when that channel is back."""

    def __init__(self, channel: AbstractRobustChannel, exchange: AbstractExchange) -> None:
        self.channel = channel
        self.exchange = exchange

    async def publish(self, event: ReplyEvent, reply_to: str) -> None:
        """Publish and wait for the confirmation; ``BrokerAway`` when the connection is gone
        or goes meanwhile, or the broker refuses the event for now (a nack)."""
        if self.channel.is_closed:  # a reconnect is under way: nothing is written
            raise BrokerAway("the connection to RabbitMQ is being restored", maybe_sent=False)
        message = messages.event_message(event)
        try:
            await self.exchange.publish(
                message, routing_key=reply_to, mandatory=False, timeout=CONFIRM_TIMEOUT_S
            )
        except DeliveryError as refused:  # not taken: published again, after a pause
            raise BrokerAway(f"the broker refused it ({refused})", maybe_sent=False) from None
        except (AMQPError, ConnectionError, RuntimeError, TimeoutError) as error:  # unknown
            raise BrokerAway(str(error) or type(error).__name__, maybe_sent=True) from error
        except asyncio.CancelledError:
            # aiormq fails the pending confirmations with a CancelledError when it gives up on
            # a connection that stopped answering (missed heartbeats): that is an outage, not
            # this task being cancelled, which goes on up.
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            stopped = "the connection to RabbitMQ stopped answering"
            raise BrokerAway(stopped, maybe_sent=True) from None

    async def back(self, timeout_s: float) -> bool:
        """Wait until the stream channel is open again (restored after a reconnect), at most
        ``timeout_s``; whether it is."""
        try:
            await asyncio.wait_for(self.channel.ready(), timeout_s)
        except TimeoutError:
            return False
        return not self.channel.is_closed
