"""The engine end to end: streamed tokens, cancels, expiry and the startup purge."""

from __future__ import annotations

import asyncio
from unittest.mock import patch

import pytest

from bots.ask import Ask
from bots.client import ConciergeClient
from bots.session import Session
from broker.amqp import Broker
from broker.protocol import (
    Cancelled,
    Done,
    Expired,
    Failed,
    ReplyEvent,
    Started,
    TokenEvent,
    make_request,
)
from config.settings import Settings
from engine.backends.base import Backend
from engine.replies import Replies, TokenRelay
from tests.conftest import LONG_QUESTION, RunningEngine, start_engine
from tests.helpers import collect, token_text, wait_for_tokens


async def test_a_question_is_answered_with_streamed_tokens(
    engine: RunningEngine, client: ConciergeClient
) -> None:
    where = {"channel": "C1", "message": "42"}
    session = await client.ask(Ask("What is the capital of France?", "u1", place=where))
    events = await collect(session)
    # the context comes back with every event, for a bot process that restarted meanwhile
    assert all(event.context == {**where, "user": "u1", "kind": "ask"} for event in events)
    assert isinstance(events[0], Started)
    assert isinstance(events[-1], Done)
    tokens = [event for event in events if isinstance(event, TokenEvent)]
    # every model token, then the note that the knowledge base is still empty (no model token)
    assert sum(token.tokens for token in tokens) == events[-1].tokens > 0
    assert tokens[-1].tokens == 0
    assert "no articles yet" in tokens[-1].text
    assert token_text(events) == events[-1].text
    assert [event.seq for event in events] == list(range(len(events)))
    assert events[-1].ttft_s is not None and events[-1].ttft_s > 0


async def answer_with_batches(
    settings: Settings, backend: Backend, client: ConciergeClient, batch_s: float
) -> tuple[list[TokenEvent], list[ReplyEvent]]:
    """The model's token events (the batches) and all events of one answer."""
    with patch("engine.jobs.answer.TOKEN_BATCH_S", batch_s):  # read by each answer
        engine = await start_engine(settings, backend)
        events = await collect(await client.ask(Ask("Tell me about cats.", "u1")))
        await engine.stop()
    assert token_text(events) == events[-1].text
    return [e for e in events if isinstance(e, TokenEvent) and e.tokens > 0], events


async def test_the_first_token_goes_out_alone_and_the_rest_in_batches(
    settings: Settings, backend: Backend, broker: Broker, client: ConciergeClient
) -> None:
    batches, events = await answer_with_batches(settings, backend, client, 0.2)
    assert batches[0].tokens == 1  # at once: the time to first token is not delayed
    assert len(batches) < sum(batch.tokens for batch in batches) == events[-1].tokens


async def test_with_no_batching_every_token_is_an_event(
    settings: Settings, backend: Backend, broker: Broker, client: ConciergeClient
) -> None:
    batches, events = await answer_with_batches(settings, backend, client, 0.0)
    assert [batch.tokens for batch in batches] == [1] * events[-1].tokens


@pytest.mark.parametrize("batch_s", [0.0, 0.001, 0.05])
async def test_the_token_relay_loses_nothing_and_sends_the_first_token_alone(
    batch_s: float, broker: Broker, client: ConciergeClient
) -> None:
    """The relay alone, fed from a thread far faster than a model, on the real broker."""
    request = make_request(reply_to=client.bot_id, user_id="u1", question="q", ttl_s=30)
    session = Session.for_request(request, timeout_s=30)
    client.sessions.add(session)
    replies = Replies(broker, request)
    relay = TokenRelay(replies, batch_s)
    pieces = [f"{n} " for n in range(500)]

    def generate() -> None:
        for piece in pieces:
            relay.emit(piece)

    await asyncio.to_thread(generate)
    await relay.close()
    done = Done(
        **replies.header(),
        text="".join(pieces),
        tokens=500,
        ttft_s=None,
        tokens_per_s=None,
        elapsed_s=0,
    )
    await replies.send(done)
    events = await collect(session)

    batches = [event for event in events if isinstance(event, TokenEvent)]
    assert token_text(events) == "".join(pieces)
    assert batches[0].tokens == 1
    assert sum(batch.tokens for batch in batches) == 500
    if batch_s == 0:
        assert len(batches) == 500


async def test_the_token_relay_publishes_what_it_got_even_if_closed_at_once(
    broker: Broker, client: ConciergeClient
) -> None:
    request = make_request(reply_to=client.bot_id, user_id="u1", question="q", ttl_s=30)
    session = Session.for_request(request, timeout_s=30)
    client.sessions.add(session)
    replies = Replies(broker, request)
    relay = TokenRelay(replies, 0.05)
    relay.emit("a")
    relay.emit("b")
    await relay.close()  # before its pump has run at all
    await replies.send(Cancelled(**replies.header(), text="ab", tokens=2))
    assert token_text(await collect(session)) == "ab"


async def test_a_cancel_mid_answer_stops_within_two_tokens(
    long_engine: RunningEngine, client: ConciergeClient, settings: Settings
) -> None:
    session = await client.ask(Ask(LONG_QUESTION, "u1"))
    await wait_for_tokens(session, 5)
    await client.cancel(session, "u1")
    end = (await collect(session))[-1]
    assert isinstance(end, Cancelled)
    assert end.tokens_after_cancel <= 2
    assert end.tokens < 400
    assert end.stop_latency_s is not None and end.stop_latency_s < 1.0


async def test_a_request_cancelled_while_queued_generates_no_token(
    long_engine: RunningEngine, client: ConciergeClient, settings: Settings
) -> None:
    running = await client.ask(Ask(LONG_QUESTION, "u1"))
    await wait_for_tokens(running, 1)
    queued = await client.ask(Ask("And what about dogs?", "u2"))
    await client.cancel(queued, "u2")
    await client.cancel(running, "u1")
    queued_events = await collect(queued)
    await collect(running)
    assert len(queued_events) == 1
    assert isinstance(queued_events[0], Cancelled)
    assert queued_events[0].tokens == 0


async def test_a_request_that_outlives_its_ttl_in_the_queue_expires(
    long_engine: RunningEngine, client: ConciergeClient, settings: Settings
) -> None:
    running = await client.ask(Ask(LONG_QUESTION, "u1"))
    await wait_for_tokens(running, 1)
    doomed = await client.ask(Ask("Too late?", "u2", place={"message": "7"}), ttl_s=0.2)
    doomed_events = await collect(doomed)
    await client.cancel(running, "u1")
    await collect(running)
    assert [type(event) for event in doomed_events] == [Expired]
    assert "time to live" in doomed_events[0].reason
    assert doomed_events[0].context["message"] == "7"  # dead-lettered, yet still echoed


async def test_the_startup_purge_drops_stale_requests_once_and_a_reconnect_does_not(
    settings: Settings,
    backend: Backend,
    broker: Broker,
    client: ConciergeClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("engine.purge.STALE_AFTER_S", 0.0)  # any question asked before is stale
    stale = await client.ask(Ask("stale question", "u0"))
    assert await broker.request_queue_depth() == 1
    engine = await start_engine(settings.model_copy(update={"max_tokens": 400}), backend)
    assert await broker.request_queue_depth() == 0
    told = await collect(stale)  # purged, but its asker is told, not left waiting
    assert [type(event) for event in told] == [Failed]
    assert "restarted" in told[0].reason

    running = await client.ask(Ask(LONG_QUESTION, "u1"))
    await wait_for_tokens(running, 1)
    waiting = await client.ask(Ask("What is two plus two?", "u2"))
    assert await broker.request_queue_depth() == 1
    closer = await asyncio.create_subprocess_exec(
        "rabbitmqctl", "-q", "close_all_connections", "test"
    )
    assert await closer.wait() == 0
    await client.cancel(running, "u1")
    waiting_events = await collect(waiting)
    await engine.stop()
    # The queued request survived the reconnect and was answered. (A token event published
    # as the connection dropped may be lost: tokens are not confirmed; Done carries the text.)
    assert isinstance(waiting_events[-1], Done), waiting_events[-1]
    assert waiting_events[-1].tokens > 0
