"""Faults: engines killed or stopped mid-answer, the broker restarted. Every request still ends
in a state its asker can see, and the next question is answered. Each answer is a long story
with no end at its first blank line (``CONCIERGE_ANSWER_PARAGRAPHS=0``): on a fast host its
first paragraph could end before the fault lands, and the test would fault nothing."""

from __future__ import annotations

import asyncio

from bots.ask import Ask
from bots.client import ConciergeClient
from broker.amqp import Broker
from broker.protocol import Done, Failed, Started
from config.settings import Settings
from tests.conftest import LONG_QUESTION
from tests.helpers import collect, wait_for_tokens
from tests.processes import ConciergeProcess


async def test_an_engine_killed_mid_answer_answers_it_again_once_back_and_goes_on(
    settings: Settings, broker: Broker, client: ConciergeClient
) -> None:
    engine = await ConciergeProcess.start(
        settings, CONCIERGE_MAX_TOKENS="400", CONCIERGE_ANSWER_PARAGRAPHS="0"
    )
    session = await client.ask(Ask(LONG_QUESTION, "u1"))
    await wait_for_tokens(session, 2)
    engine.kill()
    assert await engine.wait() != 0

    restarted = await ConciergeProcess.start(settings)
    again = await collect(session)
    assert [e.attempt for e in again if isinstance(e, Started)] == [2]  # begun again, once
    assert isinstance(again[-1], Done)

    after = await collect(await client.ask(Ask("Say hello.", "u1")))
    assert isinstance(after[-1], Done)
    assert await restarted.terminate() == 0


async def test_sigterm_mid_answer_ends_it_visibly_and_exits_in_bounded_time(
    settings: Settings, broker: Broker, client: ConciergeClient
) -> None:
    engine = await ConciergeProcess.start(
        settings,
        CONCIERGE_MAX_TOKENS="400",
        CONCIERGE_ANSWER_PARAGRAPHS="0",
        CONCIERGE_SHUTDOWN_GRACE_S="0.2",
    )
    session = await client.ask(Ask(LONG_QUESTION, "u1"))
    await wait_for_tokens(session, 2)
    assert await engine.terminate(timeout_s=20) == 0
    end = (await collect(session))[-1]
    assert isinstance(end, Failed)
    assert end.reason.startswith("interrupted")
    assert end.text  # what was generated is kept


async def test_engine_and_bot_come_back_after_the_broker_restarts(
    settings: Settings, broker: Broker, client: ConciergeClient
) -> None:
    engine = await ConciergeProcess.start(
        settings, CONCIERGE_MAX_TOKENS="400", CONCIERGE_ANSWER_PARAGRAPHS="0"
    )
    session = await client.ask(Ask(LONG_QUESTION, "u1"))
    await wait_for_tokens(session, 2)
    await rabbitmqctl("stop_app")
    await rabbitmqctl("start_app")
    await rabbitmqctl("await_startup")
    try:
        end = (await collect(session, timeout_s=90))[-1]
    finally:
        print("\n".join(engine.lines))  # shown if the test fails
    assert isinstance(end, Done)  # the answer in flight ends whole: its end is sent again
    assert len(end.text) > 0

    after = await collect(await client.ask(Ask("Say hello.", "u1")), timeout_s=90)
    assert isinstance(after[-1], Done)
    assert await engine.terminate() == 0


async def rabbitmqctl(*args: str) -> None:
    process = await asyncio.create_subprocess_exec("rabbitmqctl", "-q", *args)
    assert await asyncio.wait_for(process.wait(), 120) == 0
