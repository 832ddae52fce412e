"""Small helpers the tests share: collecting a session's events until it ends, and a tap
that sees what a bot really sent over the broker."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Callable

from aio_pika.abc import AbstractChannel, AbstractIncomingMessage

from bots.session import Detached, Session, StopRequested
from broker.amqp import Broker
from broker.protocol import (
    REQUEST_ROUTING_KEY,
    TERMINAL_TYPES,
    Cancel,
    ReplyEvent,
    Request,
    TokenEvent,
    decode_cancel,
    decode_event,
    decode_request,
)
from engine.answering.wording import WORDING


async def collect(session: Session, timeout_s: float = 60.0) -> list[ReplyEvent]:
    """Every reply event of ``session`` up to and including its terminal event."""
    events: list[ReplyEvent] = []
    while True:
        item = await session.next_item(timeout_s)
        if isinstance(item, StopRequested | Detached):
            continue
        events.append(item)
        if item.type in TERMINAL_TYPES:
            return events


async def wait_for_tokens(
    session: Session, count: int, timeout_s: float = 60.0
) -> list[ReplyEvent]:
    """Events up to the ``count``-th token (the session keeps the rest)."""
    events: list[ReplyEvent] = []
    tokens = 0
    while tokens < count:
        item = await session.next_item(timeout_s)
        assert not isinstance(item, StopRequested | Detached)
        assert item.type not in TERMINAL_TYPES, f"ended early: {item}"
        events.append(item)
        tokens += item.tokens if isinstance(item, TokenEvent) else 0
    return events


def token_text(events: list[ReplyEvent]) -> str:
    return "".join(event.text for event in events if isinstance(event, TokenEvent))


def streamed_is_final(events: list[ReplyEvent], final: str) -> bool:
    """Whether the tokens streamed are the final text, or the model's words and then, after a
    blank line, the final text that leaves them out (a number not on the site:
    engine/answering/numbers.py)."""
    streamed = token_text(events)
    withdrawn = any(final.startswith(w.withdrawals) for w in WORDING.values())
    return streamed == final or (withdrawn and streamed.endswith("\n\n" + final))


class WireTap:
    """Copies of every request, cancel and reply of one bot, from queues bound beside theirs."""

    def __init__(self, channel: AbstractChannel) -> None:
        self.channel = channel
        self.requests: list[Request] = []
        self.cancels: list[Cancel] = []
        self.events: dict[str, list[ReplyEvent]] = defaultdict(list)
        self._changed = asyncio.Condition()

    @classmethod
    async def open(cls, broker: Broker, bot_id: str) -> WireTap:
        tap = cls(await broker.connection.channel())
        names = broker.names
        await tap._bind(names.request_exchange, REQUEST_ROUTING_KEY, tap._on_request)
        await tap._bind(names.cancel_exchange, "", tap._on_cancel)
        await tap._bind(names.reply_exchange, bot_id, tap._on_event)
        return tap

    async def _bind(
        self, exchange: str, key: str, record: Callable[[AbstractIncomingMessage], None]
    ) -> None:
        queue = await self.channel.declare_queue(exclusive=True, auto_delete=True)
        await queue.bind(exchange, routing_key=key)

        async def on_message(message: AbstractIncomingMessage) -> None:
            async with self._changed:
                record(message)
                self._changed.notify_all()

        await queue.consume(on_message, no_ack=True)

    def _on_request(self, message: AbstractIncomingMessage) -> None:
        self.requests.append(decode_request(message.body))

    def _on_cancel(self, message: AbstractIncomingMessage) -> None:
        self.cancels.append(decode_cancel(message.body))

    def _on_event(self, message: AbstractIncomingMessage) -> None:
        event = decode_event(message.body)
        self.events[event.session_id].append(event)

    async def until(self, condition: Callable[[], bool], timeout_s: float = 60.0) -> None:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(condition), timeout_s)

    async def request_from(self, user_id: str) -> Request:
        await self.until(lambda: any(r.user_id == user_id for r in self.requests))
        return next(r for r in self.requests if r.user_id == user_id)

    async def ending(self, session_id: str) -> list[ReplyEvent]:
        """The session's events up to and including its terminal one."""

        def ended() -> bool:
            return any(e.type in TERMINAL_TYPES for e in self.events[session_id])

        await self.until(ended)
        return self.events[session_id]
