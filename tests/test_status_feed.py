"""The engine's copies for watchers on ``P.status``: every event the asker gets, tokens merged
to at most one event per half second, the same text and token count in the end."""

from __future__ import annotations

import asyncio

from bots.ask import Ask
from bots.client import ConciergeClient
from broker.amqp import Broker
from broker.protocol import TERMINAL_TYPES, Done, ReplyEvent, TokenEvent, decode_event
from broker.taps import Copy
from engine.status_feed import StatusCopies
from tests.conftest import LONG_QUESTION, RunningEngine
from tests.helpers import collect, token_text, wait_for_tokens

STOP_AFTER_TOKENS = 120  # at 20 to 90 tokens/s: 1.3 to 6 s of events, merged twice a second


async def test_a_watcher_gets_every_event_with_the_tokens_merged(
    broker: Broker, long_engine: RunningEngine, client: ConciergeClient
) -> None:
    copies: list[ReplyEvent] = []
    ended = asyncio.Event()

    async def on_copy(copy: Copy) -> None:
        copies.append(decode_event(copy.body, copy.content_type))
        if copies[-1].type in TERMINAL_TYPES:
            ended.set()

    status = broker.names.status_exchange
    tap = await broker.tap(status, f"{status}.test", on_copy, routing_keys=[""])
    try:  # a long answer, stopped once it has given enough events to merge (~5 s of them)
        session = await client.ask(Ask(LONG_QUESTION, "u1"))
        events = await wait_for_tokens(session, STOP_AFTER_TOKENS, timeout_s=120)
        await client.cancel(session, "u1")
        events += await collect(session, timeout_s=60)
        await asyncio.wait_for(ended.wait(), 30)
    finally:
        await tap.close()
    assert [event.type for event in copies if not isinstance(event, TokenEvent)] == [
        event.type for event in events if not isinstance(event, TokenEvent)
    ]
    assert token_text(copies) == token_text(events)
    sent = [event for event in events if isinstance(event, TokenEvent)]
    merged = [event for event in copies if isinstance(event, TokenEvent)]
    assert sum(event.tokens for event in merged) == sum(event.tokens for event in sent)
    assert len(sent) > 2 * len(merged), (len(sent), len(merged))  # ~20 a second against 2
    assert copies[-1] == events[-1]


SESSION = "session-1"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def token(seq: int, text: str) -> TokenEvent:
    return TokenEvent(session_id=SESSION, seq=seq, context={}, text=text, tokens=1)


async def test_the_first_tokens_go_at_once_then_at_most_every_interval() -> None:
    published: list[ReplyEvent] = []

    async def publish(event: ReplyEvent) -> None:
        published.append(event)

    clock = Clock()
    copies = StatusCopies(publish, every_s=0.5, clock=clock)
    await copies.copy(token(0, "a"))  # the answer has begun: at once
    for seq, (at, text) in enumerate([(0.1, "b"), (0.3, "c"), (0.6, "d"), (0.7, "e")], 1):
        clock.now = at
        await copies.copy(token(seq, text))
    assert [(e.seq, e.text, e.tokens) for e in published if isinstance(e, TokenEvent)] == [
        (0, "a", 1),
        (3, "bcd", 3),  # what came in the half second, under the last one's header
    ]
    await copies.copy(TokenEvent(session_id=SESSION, seq=5, context={}, text="", tokens=0))
    assert len(published) == 2  # "e" still waits


async def test_what_waits_goes_before_the_end_and_a_failed_publish_is_no_error() -> None:
    published: list[ReplyEvent] = []
    failing = True

    async def publish(event: ReplyEvent) -> None:
        if failing and len(published) == 0 and event.seq == 0:
            raise ConnectionError("the broker is away")
        published.append(event)

    clock = Clock()
    copies = StatusCopies(publish, every_s=0.5, clock=clock)
    await copies.copy(token(0, "a"))  # lost: watchers are optional
    failing = False
    clock.now = 0.1
    await copies.copy(token(1, "b"))
    done = Done(
        session_id=SESSION,
        seq=2,
        context={},
        text="ab",
        tokens=2,
        ttft_s=0.1,
        tokens_per_s=20,
        elapsed_s=0.1,
    )
    await copies.copy(done)
    assert [(e.type, e.seq) for e in published] == [("token", 1), ("done", 2)]
