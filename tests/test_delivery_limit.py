"""A quorum request queue counts deliveries itself (``x-delivery-limit``): a request whose engine
died once is answered again in place, and one that killed two engines is dead-lettered by the
broker, parked with its reason and its asker told. Real engines (processes, SIGKILLed) on the
single RabbitMQ node: a quorum queue on one node is allowed, and no test here needs several.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from bots.ask import Ask
from bots.client import ConciergeClient
from bots.session import Session
from broker.amqp import Broker
from broker.dead_letters import (
    DELIVERY_LIMIT,
    DELIVERY_LIMIT_REASON,
    EXPIRED,
    MAX_ATTEMPTS,
    DeadLettered,
    death_reason,
)
from broker.errors import QueueTypeMismatch
from broker.messages import Envelope
from broker.protocol import (
    ERROR_HEADER,
    Done,
    Failed,
    Names,
    Request,
    Started,
    decode_request,
    make_request,
)
from broker.topology import declare_queue, request_queue_arguments
from config.errors import EXIT_CONFIG
from config.settings import Settings
from config.texts import t
from engine.backends.base import Backend
from engine.worker import Worker
from tests.conftest import LONG_QUESTION, start_engine
from tests.helpers import collect
from tests.processes import ConciergeProcess
from tests.topology_fixture import bare_channel

SMALL_TALK = "hi"  # answered without the model: these tests are about the queue, not the answer


@pytest.fixture
def quorum(settings: Settings) -> Settings:
    """Quorum queues under the test's own prefix, and no startup purge: the purge would copy
    an interrupted request, whose copy's deliveries the broker counts from 0 again."""
    return settings.model_copy(update={"queue_type": "quorum", "purge_on_start": False})


@pytest.fixture
async def quorum_client(quorum: Settings) -> AsyncIterator[ConciergeClient]:
    async with ConciergeClient(quorum, "test") as connected:
        yield connected


def engine_env(settings: Settings) -> dict[str, str]:
    """An engine process on the test's quorum queues, with answers long enough to be killed
    mid-way, and the cancel queue's TTL the in-process engine declares too."""
    return {
        "CONCIERGE_QUEUE_TYPE": "quorum",
        "CONCIERGE_PURGE_ON_START": "false",
        "CONCIERGE_MAX_TOKENS": "400",
        "CONCIERGE_ANSWER_PARAGRAPHS": "0",  # no end at a blank line
        "CONCIERGE_REQUEST_TTL_S": f"{settings.request_ttl_s:g}",
    }


async def until_started(session: Session, attempt: int) -> None:
    """Until the ``started`` of ``attempt``: its engine holds the request, unacknowledged, and
    reads the prompt (waiting for a token too would cost seconds on a busy machine). Events of
    an earlier attempt still queued are passed over."""
    while True:
        item = await session.next_item(60)
        assert not isinstance(item, Failed | Done), item  # by this engine, or one before
        if isinstance(item, Started) and item.attempt == attempt:
            return


async def test_a_request_that_killed_two_engines_is_dead_lettered_by_the_broker_and_its_asker_told(
    quorum: Settings, backend: Backend, quorum_client: ConciergeClient
) -> None:
    asker = await quorum_client.ask(Ask(LONG_QUESTION, "u1"))
    for attempt in range(1, MAX_ATTEMPTS + 1):  # the second answers it in place, as attempt 2
        doomed = await ConciergeProcess.start(quorum, **engine_env(quorum))
        await until_started(asker, attempt)
        doomed.kill()
        assert await doomed.wait() != 0

    engine = await start_engine(quorum, backend)  # no third start: it finds it dead-lettered
    try:
        told = await collect(asker)
        after = await collect(await quorum_client.ask(Ask(SMALL_TALK, "u2")))
    finally:
        await engine.stop()

    assert [type(event) for event in told] == [Failed]
    assert told[0].reason == t("engine.delivery_limit", "en", times=MAX_ATTEMPTS)
    assert isinstance(after[-1], Done)  # the service goes on
    parked = await one_dead_letter(quorum)
    assert parked["session_id"] == asker.session_id
    assert parked["x-death"][0]["reason"] == DELIVERY_LIMIT_REASON  # the broker's, not ours
    assert parked[ERROR_HEADER] == (
        "delivery_limit: given out 2 times, each time its engine stopped before the end "
        "(x-delivery-limit 1)"
    )
    assert parked["x-concierge-source"] == "request"


async def one_dead_letter(settings: Settings) -> dict[str, Any]:
    """The one message parked in ``P.dead``: its headers, and its request's session id."""
    async with bare_channel(settings.broker_url.get_secret_value()) as channel:
        queue = await channel.get_queue(Names(settings.prefix).dead_queue, ensure=False)
        parked = await queue.get(timeout=5)
        await parked.ack()
        assert await queue.get(fail=False) is None
    return {**(parked.headers or {}), "session_id": decode_request(parked.body).session_id}


async def test_a_request_whose_engine_died_once_is_answered_again_in_place_first(
    quorum: Settings, backend: Backend, quorum_client: ConciergeClient
) -> None:
    def asked(question: str) -> Session:
        request = make_request(
            reply_to=quorum_client.bot_id, user_id="u", question=question, ttl_s=60
        )
        session = Session.for_request(request, timeout_s=30)
        quorum_client.sessions.add(session)
        return session

    interrupted, waiting = asked(SMALL_TALK), asked("thanks!")
    async with Broker(quorum) as broker:
        assert interrupted.request is not None and waiting.request is not None
        async with Broker(quorum) as dying:  # takes it and dies holding it, as a killed engine
            await broker.send_request(interrupted.request)
            taken = await dying.take_waiting_request()
            assert taken is not None and taken.attempt == 1
            await broker.send_request(waiting.request)
        engine = await start_engine(quorum, backend)
        try:
            again, after = await collect(interrupted), await collect(waiting)
        finally:
            await engine.stop()

    first, second = again[0], after[0]
    assert isinstance(first, Started) and first.attempt == 2
    assert isinstance(again[-1], Done) and again[-1].text
    assert isinstance(second, Started) and second.attempt == 1
    assert isinstance(after[-1], Done)
    # In place: the broker gave it back at the head, so it began before the one behind it
    # (a copy, as on a classic queue, would have gone to the end).
    began = interrupted.request.sent_at + first.waited_s
    assert began < waiting.request.sent_at + second.waited_s


async def test_past_its_delivery_limit_a_request_answered_here_is_only_acknowledged(
    settings: Settings, backend: Backend, broker: Broker, client: ConciergeClient
) -> None:
    """A delivery back twice may be a connection lost twice mid-answer, not two deaths: the
    engine that answered the request does not tell its asker it was set aside."""
    worker = Worker(settings, broker, backend)
    ours, theirs = (
        make_request(reply_to=client.bot_id, user_id="u", question=SMALL_TALK, ttl_s=30)
        for _ in range(2)
    )
    asker = Session.for_request(theirs, timeout_s=30)
    client.sessions.add(asker)
    worker._answered[ours.session_id] = None  # it ran here
    outcomes: list[str] = []

    def dead_lettered(request: Request) -> Envelope[DeadLettered]:
        async def ack() -> None:
            outcomes.append(f"{request.session_id} acked")

        async def set_aside(reason: str) -> None:
            outcomes.append(f"{request.session_id} set aside: {reason}")

        async def requeue() -> None:
            raise AssertionError("never handed back")

        message = DeadLettered(request, DELIVERY_LIMIT_REASON)
        return Envelope(message, False, ack, requeue, 1, set_aside)

    await worker.on_expired(dead_lettered(ours))
    await worker.on_expired(dead_lettered(theirs))
    told = await collect(asker)

    reason = (
        "delivery_limit: given out 2 times, each time its engine stopped before the end "
        "(x-delivery-limit 1)"
    )
    assert outcomes == [f"{ours.session_id} acked", f"{theirs.session_id} set aside: {reason}"]
    assert [type(event) for event in told] == [Failed]


async def test_a_quorum_request_queue_from_before_the_limit_is_one_line_saying_what_to_do(
    quorum: Settings,
) -> None:
    names = Names(quorum.prefix)
    both, own = request_queue_arguments(names)
    before = {key: value for key, value in own.items() if key != "x-delivery-limit"}
    async with bare_channel(quorum.broker_url.get_secret_value()) as channel:
        await declare_queue(channel, names.request_queue, "quorum", both, quorum=before)

    with pytest.raises(QueueTypeMismatch) as caught:
        await Broker(quorum).connect()

    assert caught.value.exit_code == EXIT_CONFIG
    assert str(caught.value) == (
        f"the queue {names.request_queue} exists on the broker with another x-delivery-limit "
        "than this version's (1): a queue's arguments cannot change in place, so drain and "
        'delete it, and the next start declares it again (see docs/reliability.md, "The '
        "request queue's delivery limit\")"
    )


def test_only_a_quorum_request_queue_has_a_delivery_limit_of_the_deaths_it_survives() -> None:
    both, quorum = request_queue_arguments(Names("p"))
    assert "x-delivery-limit" not in both  # classic: the engine counts, in a header
    assert quorum["x-delivery-limit"] == DELIVERY_LIMIT == MAX_ATTEMPTS - 1 == 1
    assert quorum["x-dead-letter-strategy"] == "at-least-once"
    assert both["x-overflow"] == "reject-publish"  # which at-least-once needs


def test_the_death_reason_is_the_latest_one() -> None:
    latest = {"reason": DELIVERY_LIMIT_REASON, "queue": "p.request"}
    older = {"reason": EXPIRED, "queue": "p.request"}
    assert death_reason({"x-death": [latest, older]}) == DELIVERY_LIMIT_REASON
    assert death_reason({"x-first-death-reason": DELIVERY_LIMIT_REASON}) == DELIVERY_LIMIT_REASON
    assert death_reason({}) == EXPIRED
