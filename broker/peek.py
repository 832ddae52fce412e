"""Looking at queues: their counts, and whether they are there.

``peek_queues``, ``peek_queue`` and ``QueueLooker`` declare passively only (``concierge status``,
a bot's reply queue): looking must never create a queue.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal

from aio_pika.abc import (
    AbstractChannel,
    AbstractConnection,
    AbstractQueue,
    AbstractRobustChannel,
    AbstractRobustConnection,
)
from aiormq.exceptions import ChannelAccessRefused, ChannelLockedResource, ChannelNotFoundEntity

from broker.nodes import connect_any
from config.settings import Settings

PEEK_CONNECT_TIMEOUT_S = 10.0  # `concierge status` says the broker is down after this


@dataclass(frozen=True)
class QueueCounts:
    """The request queue at one moment: ``consumers`` is 0 when no engine is running."""

    messages: int  # waiting; the one being answered is not counted
    consumers: int


@dataclass(frozen=True)
class QueuePeek:
    """A queue as a passive declare sees it: ``exclusive`` means alive on another connection."""

    state: Literal["ok", "missing", "exclusive"]
    messages: int | None = None
    consumers: int | None = None


async def peek_queues(settings: Settings, names: list[str]) -> list[QueuePeek]:
    """Message and consumer counts of ``names``, on a plain connection that declares nothing."""
    connection = await connect_any(settings.broker_urls, PEEK_CONNECT_TIMEOUT_S)
    async with connection:
        return [await peek_queue(connection, name) for name in names]


async def peek_queue(connection: AbstractConnection, name: str) -> QueuePeek:
    """A failed passive declare closes its channel, hence a throwaway channel per queue."""
    channel = await connection.channel(publisher_confirms=False)
    try:
        return await _declared_passively(channel, name)
    finally:
        if not channel.is_closed:
            await channel.close()


class QueueLooker:
    """Passive declares on one robust channel kept for them: one round trip a look, where a
    channel of its own costs three (open, declare, close), and the engine looks before every
    answer (is the asker's reply queue still there?). A missing queue closes the channel; a
    robust channel restores itself, and the next look waits for that."""

    def __init__(self, connection: AbstractRobustConnection, wait_s: float) -> None:
        self._connection = connection
        self._wait_s = wait_s  # for the channel being restored
        self._channel: AbstractRobustChannel | None = None

    async def peek(self, name: str) -> QueuePeek:
        if self._channel is None:
            self._channel = await self._connection.channel(publisher_confirms=False)
        await asyncio.wait_for(self._channel.ready(), self._wait_s)
        return await _declared_passively(self._channel, name)


async def _declared_passively(channel: AbstractChannel, name: str) -> QueuePeek:
    queue: AbstractQueue
    try:
        if isinstance(channel, AbstractRobustChannel):  # never to be re-declared on reconnect
            queue = await channel.declare_queue(name, passive=True, robust=False)
        else:
            queue = await channel.declare_queue(name, passive=True)
    except ChannelNotFoundEntity:
        return QueuePeek("missing")
    except (ChannelLockedResource, ChannelAccessRefused):
        return QueuePeek("exclusive")
    declared = queue.declaration_result
    return QueuePeek("ok", declared.message_count, declared.consumer_count)
