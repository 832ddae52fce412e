"""Scaling out: two engine workers on one broker share the request queue, answer each request
exactly once, and a cancel reaches whichever worker runs the request.

Each worker has its own model (a llama.cpp model must not serve two threads at once), its own
cancel queue (``engine_name`` differs) and does not purge at start.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest

from bots.ask import Ask
from bots.client import ConciergeClient
from bots.session import Session, SessionItem, StopRequested
from broker.amqp import Broker
from broker.protocol import TERMINAL_TYPES, Cancelled, Done, Request
from config.settings import Settings
from engine.backends.base import Backend
from engine.backends.configured import load_backend, model_options
from tests.conftest import LONG_QUESTION, RunningEngine, start_engine
from tests.helpers import collect, wait_for_tokens

BURST = 10


@pytest.fixture(scope="module")
def second_backend() -> Iterator[Backend]:
    """A second model instance for the second worker (the session's one serves the first)."""
    yield load_backend(model_options(Settings(_env_file=None)))  # type: ignore[call-arg]


@asynccontextmanager
async def two_workers(
    settings: Settings, backends: tuple[Backend, Backend], broker: Broker
) -> AsyncIterator[tuple[RunningEngine, RunningEngine]]:
    """Worker ``engine`` and worker ``w2`` on one broker; w2 does not purge at start."""
    second_settings = settings.model_copy(update={"engine_name": "w2", "purge_on_start": False})
    first = await start_engine(settings, backends[0])
    second = await start_engine(second_settings, backends[1])
    try:
        yield first, second
    finally:
        for running in (first, second):
            await running.stop()
        cleanup = await broker.connection.channel()
        await cleanup.queue_delete(broker.names.cancel_queue("w2"))
        await cleanup.close()


@pytest.fixture
async def short_workers(
    settings: Settings, backend: Backend, second_backend: Backend, broker: Broker
) -> AsyncIterator[tuple[RunningEngine, RunningEngine]]:
    short = settings.model_copy(update={"max_tokens": 12})
    async with two_workers(short, (backend, second_backend), broker) as workers:
        yield workers


@pytest.fixture
async def long_workers(
    settings: Settings, backend: Backend, second_backend: Backend, broker: Broker
) -> AsyncIterator[tuple[RunningEngine, RunningEngine]]:
    long = settings.model_copy(update={"max_tokens": 400})
    async with two_workers(long, (backend, second_backend), broker) as workers:
        yield workers


async def stop_both(workers: tuple[RunningEngine, RunningEngine]) -> None:
    for running in workers:
        await running.stop()


async def nothing_more_arrives(client: ConciergeClient, broker: Broker) -> None:
    """Wait until every event the stopped engines published has reached the client.

    Both engines have closed their connections, so their events are in the client's reply
    queue; a marker published now arrives after all of them (one queue, one consumer).
    """
    marker = Request(
        session_id="marker-" + "0" * 12,
        reply_to=client.bot_id,
        user_id="test",
        sent_at=time.time(),
        deadline=time.time() + 60,
    )
    session = Session.for_request(marker, timeout_s=30)
    client.sessions.add(session)
    await broker.send_event(Cancelled(session_id=marker.session_id, seq=0), client.bot_id)
    await collect(session)


async def test_two_workers_answer_a_burst_exactly_once_each(
    short_workers: tuple[RunningEngine, RunningEngine],
    client: ConciergeClient,
    broker: Broker,
) -> None:
    workers = short_workers
    sessions = [
        await client.ask(Ask(f"Say the number {i}.", f"u{i}"), ttl_s=120) for i in range(BURST)
    ]
    events: dict[str, list[SessionItem]] = {
        session.session_id: list(await collect(session)) for session in sessions
    }
    assert all(isinstance(got[-1], Done) for got in events.values()), events

    await stop_both(workers)
    await nothing_more_arrives(client, broker)
    for session in sessions:  # whatever came after the first terminal event counts too
        while not session.items.empty():
            events[session.session_id].append(session.items.get_nowait())
    terminals = {sid: terminal_count(got) for sid, got in events.items()}
    assert terminals == dict.fromkeys(terminals, 1)  # each answered exactly once

    done = [running.worker.metrics.outcomes["done"] for running in workers]
    assert sum(done) == BURST  # each request was served by exactly one worker, once
    assert min(done) > 0, f"one worker took every request: {done}"
    assert await broker.request_queue_depth() == 0


async def test_a_cancel_reaches_whichever_worker_runs_the_request(
    long_workers: tuple[RunningEngine, RunningEngine], client: ConciergeClient
) -> None:
    workers = long_workers
    # Both answer at the same time, so each runs on its own worker (one job at a time each).
    first = await client.ask(Ask(LONG_QUESTION, "u1"))
    second = await client.ask(Ask(LONG_QUESTION + " Make it funny.", "u2"))
    for session in (first, second):
        await wait_for_tokens(session, 3)
    assert [running.worker.metrics.started for running in workers] == [1, 1]  # one each

    for session in (first, second):
        await client.cancel(session, session.user_id)
        end = (await collect(session))[-1]
        assert isinstance(end, Cancelled), end
        assert end.tokens < 400 and end.tokens_after_cancel <= 2

    await stop_both(workers)
    assert [running.worker.metrics.outcomes["cancelled"] for running in workers] == [1, 1]


def terminal_count(items: list[SessionItem]) -> int:
    return sum(
        1 for item in items if not isinstance(item, StopRequested) and item.type in TERMINAL_TYPES
    )
