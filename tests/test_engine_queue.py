"""The engine end to end: malformed messages, deadlines, cancels first and a free event loop."""

from __future__ import annotations

import asyncio
import json
import time
from contextlib import suppress

import aio_pika

from bots.ask import Ask
from bots.client import ConciergeClient
from bots.session import Session
from broker.amqp import Broker
from broker.protocol import (
    ERROR_HEADER,
    REQUEST_ROUTING_KEY,
    Cancelled,
    Done,
    Expired,
    encode,
    make_request,
)
from config.settings import Settings
from engine.backends.base import Backend
from tests.conftest import LONG_QUESTION, RunningEngine, start_engine
from tests.engine_helpers import shelves_question
from tests.helpers import collect, wait_for_tokens

LOOP_TICK_S = 0.01
MAX_LOOP_GAP_S = 0.25  # between two ticks; far below the seconds a generation takes


def bad_requests() -> list[tuple[bytes, str]]:
    """One message of each kind the engine must refuse, with its content type."""
    good = json.loads(encode(make_request(reply_to="b", user_id="u", question="q", ttl_s=30)))
    return [
        (b"\xff not json", "application/json"),
        (json.dumps({**good, "v": 1}).encode(), "application/json"),  # another version
        (json.dumps({**good, "question": 42}).encode(), "application/json"),  # wrong type
        (
            json.dumps({k: v for k, v in good.items() if k != "reply_to"}).encode(),
            "application/json",
        ),
        (json.dumps(good).encode(), "text/plain"),  # wrong content type
        (b'{"question": "' + b"x" * 70_000 + b'"}', "application/json"),  # oversized
    ]


async def test_malformed_messages_are_dead_lettered_with_a_reason_and_the_engine_goes_on(
    engine: RunningEngine, client: ConciergeClient, broker: Broker
) -> None:
    channel = await broker.connection.channel()
    exchange = await channel.get_exchange(broker.names.request_exchange)
    bad = bad_requests()
    for body, content_type in bad:
        message = aio_pika.Message(body, content_type=content_type)
        await exchange.publish(message, routing_key=REQUEST_ROUTING_KEY)
    events = await collect(await client.ask(Ask("Say hello.", "u1")))
    assert isinstance(events[-1], Done)
    dead_queue = await channel.get_queue(broker.names.dead_queue)
    parked = [await dead_queue.get(timeout=5) for _ in bad]
    assert [message.body for message in parked] == [body for body, _ in bad]
    reasons = [str(message.headers[ERROR_HEADER]) for message in parked]
    assert all(
        reason.startswith(("invalid request", "content type", "body of")) for reason in reasons
    )
    assert "v:" in reasons[1] and "question" in reasons[2] and "reply_to" in reasons[3]
    await channel.close()


async def test_a_request_past_its_deadline_is_expired_not_answered(
    engine: RunningEngine, client: ConciergeClient, broker: Broker
) -> None:
    request = make_request(reply_to=client.bot_id, user_id="u", question="late", ttl_s=30)
    late = request.model_copy(update={"deadline": request.sent_at - 1})
    session = Session.for_request(late, timeout_s=30)
    client.sessions.add(session)
    await broker.send_request(late)
    events = await collect(session)
    assert [type(event) for event in events] == [Expired]


async def test_cancels_do_not_wait_behind_queued_requests(
    long_engine: RunningEngine, client: ConciergeClient, settings: Settings
) -> None:
    running = await client.ask(Ask(LONG_QUESTION, "u1"))
    await wait_for_tokens(running, 1)
    behind = [await client.ask(Ask(f"Question {n}", f"asker-{n}")) for n in range(5)]
    await client.cancel(running, "u1")
    end = (await collect(running))[-1]
    for session in behind:
        await client.cancel(session, session.user_id)
    for session in behind:
        await collect(session)
    assert isinstance(end, Cancelled)
    assert end.tokens_after_cancel <= 2


class LoopWatch:
    """A task ticking every ``LOOP_TICK_S`` on this event loop; keeps the largest gap seen."""

    def __init__(self) -> None:
        self.largest_gap_s = 0.0
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> LoopWatch:
        self._task = asyncio.create_task(self._tick())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with suppress(asyncio.CancelledError):
            await self._task

    async def _tick(self) -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(LOOP_TICK_S)
            now = time.monotonic()
            self.largest_gap_s = max(self.largest_gap_s, now - last)
            last = now


async def test_waiting_on_the_engine_keeps_the_event_loop_free(
    settings: Settings, backend: Backend, broker: Broker
) -> None:
    """The engine runs in this test's event loop. While it reads a long prompt and writes the
    answer, a task ticking every 10 ms is never held up for long; were the model run on the
    loop, the largest gap would be the whole generation."""
    settings = settings.model_copy(update={"max_question_chars": 20_000})
    engine = await start_engine(settings, backend)
    async with ConciergeClient(settings, "test") as client:
        async with LoopWatch() as watch:
            session = await client.ask(Ask(shelves_question(60), "u1"))
            events = await collect(session, timeout_s=120)
    await engine.stop()
    end = events[-1]
    assert isinstance(end, Done)
    assert end.elapsed_s > 4 * MAX_LOOP_GAP_S  # long enough for a blocked loop to show
    assert watch.largest_gap_s < MAX_LOOP_GAP_S
