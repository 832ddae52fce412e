"""Overload and oversize: the asker over a limit is told at once, and nobody else is affected."""

from __future__ import annotations

import pytest

from bots.ask import Ask
from bots.client import AskRefused, ConciergeClient
from bots.session import Session
from broker.amqp import Broker
from broker.protocol import Failed, make_request
from config.settings import Settings
from tests.conftest import RunningEngine
from tests.helpers import collect


async def test_a_question_over_the_length_limit_is_refused_before_queueing(
    settings: Settings, broker: Broker
) -> None:
    settings = settings.model_copy(update={"max_question_chars": 10})
    async with ConciergeClient(settings, "test") as client:
        with pytest.raises(AskRefused, match="too long"):
            await client.ask(Ask("x" * 11, "u1"))
    assert await broker.request_queue_depth() == 0


async def test_the_per_user_cap_refuses_only_that_user(settings: Settings, broker: Broker) -> None:
    settings = settings.model_copy(update={"max_waiting_per_user": 2})
    async with ConciergeClient(settings, "test") as client:
        await client.ask(Ask("one", "busy-user"))
        await client.ask(Ask("two", "busy-user"))
        with pytest.raises(AskRefused, match="already have 2 questions open"):
            await client.ask(Ask("three", "busy-user"))
        await client.ask(Ask("someone else's", "other-user"))
    assert await broker.request_queue_depth() == 3


async def test_a_full_request_queue_refuses_the_next_asker_at_once(
    settings: Settings, broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    await broker.delete_all()  # re-declare the topology with a tiny queue
    monkeypatch.setattr("broker.topology.REQUEST_QUEUE_MAX_LENGTH", 2)
    async with Broker(settings), ConciergeClient(settings, "test") as client:
        first = await client.ask(Ask("one", "a"))
        await client.ask(Ask("two", "b"))
        with pytest.raises(AskRefused, match="busy"):
            await client.ask(Ask("three", "c"))
        assert client.sessions.get(first.session_id) is first  # the others still wait
        assert len(client.sessions) == 2


async def test_the_engine_refuses_an_oversized_question_too(
    settings: Settings, broker: Broker, engine: RunningEngine
) -> None:
    async with ConciergeClient(settings, "test") as client:
        long_question = "y" * (settings.max_question_chars + 1)
        request = make_request(
            reply_to=client.bot_id, user_id="u", question=long_question, ttl_s=30
        )
        session = Session.for_request(request, timeout_s=30)
        client.sessions.add(session)
        await broker.send_request(request)  # a client that skipped the bot's own check
        events = await collect(session)
    assert [type(event) for event in events] == [Failed]
    assert "question too long" in events[0].reason


async def test_a_request_refused_while_the_queue_has_room_is_sent_again(
    settings: Settings, broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A quorum queue also nacks while it has no leader (a node just went): the bot sends the
    request again rather than say "busy". Here the nack is the full queue's, and a request is
    taken off the queue between the nack and the bot's look at the depth."""
    await broker.delete_all()
    monkeypatch.setattr("broker.topology.REQUEST_QUEUE_MAX_LENGTH", 2)
    async with Broker(settings) as bots_broker, ConciergeClient(settings, "test") as client:
        await client.ask(Ask("one", "a"))
        await client.ask(Ask("two", "b"))
        looked = Broker._request_queue_full

        async def one_taken_first(self: Broker) -> bool:
            taken = await bots_broker.take_waiting_request()
            assert taken is not None
            await taken.ack()
            return await looked(self)

        monkeypatch.setattr(Broker, "_request_queue_full", one_taken_first)
        await client.ask(Ask("three", "c"))  # not refused
        assert await bots_broker.request_queue_depth() == 2  # "one" taken off, "three" added
