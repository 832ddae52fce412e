"""Concierge's exchanges and queues as declared on RabbitMQ, with their arguments.

Every declaration is idempotent, so every process may run it; docs/protocol.md is the map.
After a reconnect aio-pika re-declares, on each channel, what was declared on it here.

Queue types (``CONCIERGE_QUEUE_TYPE``): with ``quorum``, every durable queue is a quorum queue
(replicated on the cluster's nodes, so it outlives any one of them) and the request queue
dead-letters at least once, also a request given out more than ``x-delivery-limit`` times
(``broker.dead_letters``); a one-off bot's reply queue stays classic but not durable, so that
it goes with its node and is declared afresh on the next one (a durable classic queue whose
node is down cannot be declared anywhere). With ``classic`` (the default), every queue is a
classic durable queue on the node that declared it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import aio_pika
from aio_pika.abc import AbstractExchange, AbstractQueue, AbstractRobustChannel
from aiormq.exceptions import ChannelPreconditionFailed

from broker.dead_letters import DELIVERY_LIMIT
from broker.errors import QueueTypeMismatch, wrong_queue_type
from broker.protocol import (
    FEEDBACK_QUEUE_MAX_LENGTH,
    REQUEST_QUEUE_MAX_LENGTH,
    REQUEST_ROUTING_KEY,
    Names,
)

QueueType = Literal["classic", "quorum"]

DEAD_QUEUE_MAX_LENGTH = 10_000
IDLE_QUEUE_EXPIRES_MS = 3_600_000  # a cancel queue nobody uses is dropped after an hour
# Arguments a quorum queue of ours gained after it was first offered: a queue declared before
# lacks them, and RabbitMQ names them when it refuses the new declaration.
ADDED_LATER = ("x-delivery-limit",)
DELIVERY_LIMIT_DOC = 'docs/reliability.md, "The request queue\'s delivery limit"'
INEQUIVALENT = re.compile(r"inequivalent arg '([^']+)'")  # in RabbitMQ's PRECONDITION_FAILED


@dataclass(frozen=True)
class Core:
    """What the broker publishes to with confirms, and the request queue it counts."""

    confirmed_exchanges: Mapping[str, AbstractExchange]  # request, cancel and feedback, by name
    request_queue: AbstractQueue


async def declare_core(channel: AbstractRobustChannel, names: Names, queue_type: QueueType) -> Core:
    """Exchanges and the shared queues."""
    direct, fanout = aio_pika.ExchangeType.DIRECT, aio_pika.ExchangeType.FANOUT
    request_x = await channel.declare_exchange(names.request_exchange, direct, durable=True)
    expired_x = await channel.declare_exchange(names.expired_exchange, fanout, durable=True)
    await channel.declare_exchange(names.reply_exchange, direct, durable=True)
    cancel_x = await channel.declare_exchange(names.cancel_exchange, fanout, durable=True)
    feedback_x = await channel.declare_exchange(names.feedback_exchange, fanout, durable=True)
    await channel.declare_exchange(names.status_exchange, fanout, durable=True)

    requests = await declare_request_queue(channel, names, queue_type)
    await requests.bind(request_x, REQUEST_ROUTING_KEY)
    expired = await declare_expired_queue(channel, names, queue_type)
    await expired.bind(expired_x)
    dead_length = {"x-max-length": DEAD_QUEUE_MAX_LENGTH}
    await declare_queue(channel, names.dead_queue, queue_type, dead_length)
    # Declared by bots too: a vote given while no engine runs waits for one.
    feedback = await declare_feedback_queue(channel, names, queue_type)
    await feedback.bind(feedback_x)
    confirmed = {
        names.request_exchange: request_x,
        names.cancel_exchange: cancel_x,
        names.feedback_exchange: feedback_x,
    }
    return Core(confirmed, requests)


async def declare_request_queue(
    channel: AbstractRobustChannel, names: Names, queue_type: QueueType
) -> AbstractQueue:
    """Declared (not just looked up) on each channel that uses it, so that after a
    reconnect aio-pika restores the queue and its consumers on that channel too."""
    both, quorum = request_queue_arguments(names)
    return await declare_queue(channel, names.request_queue, queue_type, both, quorum=quorum)


def request_queue_is_full(waiting: int) -> bool:
    """Whether ``waiting`` ready requests fill the request queue, of either type (below)."""
    return waiting >= REQUEST_QUEUE_MAX_LENGTH


def request_queue_arguments(names: Names) -> tuple[dict[str, Any], dict[str, Any]]:
    """The request queue's arguments, and a quorum queue's own on top of them."""
    both = {
        "x-dead-letter-exchange": names.expired_exchange,
        "x-max-length": REQUEST_QUEUE_MAX_LENGTH,
        "x-overflow": "reject-publish",
    }
    quorum = {
        "x-dead-letter-strategy": "at-least-once",  # no expired request lost on its way
        # A quorum queue refuses only once it holds more than x-max-length (one past it, on
        # RabbitMQ 3.10): one less, and it holds as many requests as a classic queue.
        "x-max-length": REQUEST_QUEUE_MAX_LENGTH - 1,
        # The broker counts deliveries and dead-letters a request its engines died holding
        # twice (reason delivery_limit), which the engine tells its asker.
        "x-delivery-limit": DELIVERY_LIMIT,
    }
    return both, quorum


async def declare_expired_queue(
    channel: AbstractRobustChannel, names: Names, queue_type: QueueType
) -> AbstractQueue:
    return await declare_queue(channel, names.expired_queue, queue_type, {})


async def declare_feedback_queue(
    channel: AbstractRobustChannel, names: Names, queue_type: QueueType
) -> AbstractQueue:
    arguments = {"x-max-length": FEEDBACK_QUEUE_MAX_LENGTH}
    return await declare_queue(channel, names.feedback_queue, queue_type, arguments)


async def declare_cancel_queue(
    channel: AbstractRobustChannel,
    names: Names,
    queue_type: QueueType,
    engine_name: str,
    ttl_s: float,
) -> AbstractQueue:
    """One durable cancel queue per engine worker, bound to the cancel fanout; a cancel older
    than a request's TTL has nothing left to cancel."""
    arguments = {"x-expires": IDLE_QUEUE_EXPIRES_MS, "x-message-ttl": int(ttl_s * 1000)}
    queue = await declare_queue(channel, names.cancel_queue(engine_name), queue_type, arguments)
    await queue.bind(names.cancel_exchange)
    return queue


async def declare_reply_queue(
    channel: AbstractRobustChannel,
    names: Names,
    queue_type: QueueType,
    bot_id: str,
    keep_s: float,
    *,
    one_off: bool,
) -> AbstractQueue:
    """A bot process's own reply queue, dropped once it has had no consumer for ``keep_s``;
    bound by the caller once it knows no other process consumes it. Durable, but for a one-off
    bot's (random id) on a cluster of quorum queues: see the module's docstring."""
    name, arguments = names.reply_queue(bot_id), {"x-expires": int(keep_s * 1000)}
    if one_off and queue_type == "quorum":
        return await declare_queue(channel, name, "classic", arguments, durable=False)
    return await declare_queue(channel, name, queue_type, arguments)


async def declare_queue(
    channel: AbstractRobustChannel,
    name: str,
    queue_type: QueueType,
    arguments: Mapping[str, Any],
    *,
    quorum: Mapping[str, Any] | None = None,
    durable: bool = True,
) -> AbstractQueue:
    """Every queue of ours is declared here, with ``arguments`` and, if it is a quorum queue,
    ``quorum``'s and ``x-queue-type`` on top (a classic queue is declared without it, as before
    quorum queues were offered). A queue of the other type already on the broker is one line
    naming the setting, not a traceback: RabbitMQ names the first argument that differs, which
    is one of those the two types tell apart. So is a quorum queue declared before one of its
    arguments was added (``ADDED_LATER``): the types agree, and the first to differ is that."""
    own = {**(quorum or {}), "x-queue-type": "quorum"}
    typed = {**arguments, **own} if queue_type == "quorum" else dict(arguments)
    try:
        return await channel.declare_queue(name, durable=durable, arguments=typed)
    except ChannelPreconditionFailed as error:
        differing = INEQUIVALENT.search(str(error))
        key = differing.group(1) if differing else None
        if queue_type == "quorum" and key in ADDED_LATER:
            raise argument_added(name, key, typed.get(key)) from None
        if key in own:
            raise wrong_queue_type(name, queue_type) from None
        raise


def argument_added(queue: str, key: str, value: object) -> QueueTypeMismatch:
    """One line: the queue was declared without ``key`` (before it was added), or with another
    value; it cannot change in place. Exit 78, as for a queue of the other type: the broker's
    queue is what to change, once drained."""
    return QueueTypeMismatch(
        f"the queue {queue} exists on the broker with another {key} than this version's "
        f"({value}): a queue's arguments cannot change in place, so drain and delete it, and "
        f"the next start declares it again (see {DELIVERY_LIMIT_DOC})"
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
