"""The Slack adapter as a process: Socket Mode, tokens, and restarts mid-answer."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from aio_pika.abc import AbstractIncomingMessage
from slack_sdk.web.async_client import AsyncWebClient

from bots.client import ConciergeClient
from bots.slack.app import run_slack
from broker.amqp import Broker
from broker.protocol import TERMINAL_TYPES, Done, ReplyEvent, decode_event
from config.settings import ConfigError, Settings
from engine.backends.base import Backend
from tests import slack_fixture
from tests.conftest import LONG_QUESTION, RunningEngine, start_engine
from tests.fake_slack import FakeSlack
from tests.processes import ConciergeProcess
from tests.slack_fixture import CHANNEL, mention, slack_bot
from tests.slack_helpers import (
    DONE,
    FINAL_MARKS,
    answer_given,
    as_slack_shows,
    direct_answer,
    parts,
    shown,
    wait_until_shown,
)

# The shared fixtures: pytest finds a fixture by its name in the test's module.
settings, fake, bot = slack_fixture.settings, slack_fixture.fake, slack_fixture.bot


# --- Socket Mode, through run_slack -----------------------------------------------------------


def events_api(event: dict[str, Any], envelope_id: str) -> dict[str, Any]:
    """A Socket Mode envelope carrying ``event``."""
    return {
        "envelope_id": envelope_id,
        "type": "events_api",
        "accepts_response_payload": False,
        "payload": {
            "team_id": "T0000001",
            "api_app_id": "A0000001",
            "type": "event_callback",
            "event_id": f"Ev-{envelope_id}",
            "event": event,
        },
    }


async def test_run_slack_in_socket_mode_answers_a_mention(
    settings: Settings, engine: RunningEngine, broker: Broker, fake: FakeSlack
) -> None:
    stop = asyncio.Event()
    web = AsyncWebClient(token="xoxb-test", base_url=fake.api_url)
    bot = asyncio.create_task(run_slack(settings, stop, web=web))
    await fake.send_envelope(events_api(mention("Say hello.", "800.1"), "env-1"))
    await fake.wait_for(lambda: fake.acks)
    messages = await wait_until_shown(fake, "800.1")
    stop.set()
    await asyncio.wait_for(bot, 30)

    assert fake.acks == [{"envelope_id": "env-1"}]
    assert fake.calls_of("apps.connections.open")
    assert shown(messages)[1] == DONE
    assert shown(messages)[0]


async def test_run_slack_names_a_missing_or_refused_token(
    settings: Settings, fake: FakeSlack
) -> None:
    web = AsyncWebClient(token="xoxb-revoked", base_url=fake.api_url)
    fake.errors["auth.test"] = "invalid_auth"
    no_app_token = settings.model_copy(update={"slack_app_token": None})

    with pytest.raises(ConfigError, match="slack_app_token"):
        await run_slack(no_app_token, asyncio.Event(), web=web)
    with pytest.raises(ConfigError, match=r"slack_bot_token.*invalid_auth"):
        await run_slack(settings, asyncio.Event(), web=web)


# --- a bot restarted mid-answer ---------------------------------------------------------------


async def test_a_named_bot_restarted_mid_answer_finishes_it_in_the_same_message(
    settings: Settings, backend: Backend, broker: Broker, fake: FakeSlack
) -> None:
    """Two processes of the bot "slack-main" in turn, as ``run_slack`` starts them: the adapter
    exists before its client takes replies, so the second one takes the answer over."""
    long_answers = settings.model_copy(update={"max_tokens": 400})
    named = long_answers.model_copy(update={"bot_name": "slack-main"})
    engine = await start_engine(long_answers, backend)
    try:
        first = ConciergeClient(named, "slack")
        async with slack_bot(named, first, fake) as bot:
            await first.start()
            await bot.slack.event(mention(LONG_QUESTION, "500.1"))
            streaming = await wait_until_shown(fake, "500.1", lambda text, _: len(text) > 10)
        await first.close()
        answer_ts = streaming[0].ts
        left_at = parts(fake.message(answer_ts).text)[1]
        assert not left_at.startswith(FINAL_MARKS), "the answer ended before the restart"

        second = ConciergeClient(named, "slack")
        async with slack_bot(named, second, fake):
            await second.start()
            messages = await wait_until_shown(fake, "500.1")
        await second.close()
        expected = answer_given(engine.worker)
    finally:
        await engine.stop()
        await broker.delete_reply_queue("slack-main")

    assert messages[0].ts == answer_ts  # the same message, updated
    assert shown(messages) == (as_slack_shows(expected), DONE)
    assert len(fake.calls_of("chat.postMessage")) == len(messages)  # nothing posted twice


CONNECTED = "connected in Socket Mode"


async def slack_process(settings: Settings, fake: FakeSlack) -> ConciergeProcess:
    """``concierge slack`` as an operator runs it (Socket Mode, a bot name), its Web API and
    edit interval (constants) set to the fake's and 50 ms."""
    at_the_fake = {
        "bots.slack.app.SLACK_API_URL": fake.api_url,
        "bots.slack.adapter.EDIT_INTERVAL_S": 0.05,
    }
    return await ConciergeProcess.start(
        settings,
        "slack",
        CONNECTED,
        constants=at_the_fake,
        CONCIERGE_BOT_NAME="slack-main",
        CONCIERGE_SLACK_BOT_TOKEN="xoxb-test",
        CONCIERGE_SLACK_APP_TOKEN="xapp-test",
    )


async def stop_all(
    processes: list[ConciergeProcess], engine: RunningEngine, broker: Broker
) -> None:
    """The bot processes still running, then the engine; and the bot's queue goes."""
    for process in processes:
        if process.process.returncode is None:
            await process.terminate()
    await engine.stop()
    await broker.delete_reply_queue("slack-main")


async def test_a_bot_process_killed_mid_answer_is_finished_by_the_next_one(
    settings: Settings, backend: Backend, broker: Broker, fake: FakeSlack
) -> None:
    """SIGKILLed while an answer streams, then started again: the answer ends in its message."""
    long_answers = settings.model_copy(update={"max_tokens": 400})
    engine = await start_engine(long_answers, backend)
    processes: list[ConciergeProcess] = []
    try:
        processes.append(await slack_process(long_answers, fake))
        await fake.send_envelope(events_api(mention(LONG_QUESTION, "900.1"), "env-9"))
        streaming = await wait_until_shown(fake, "900.1", lambda text, _: len(text) > 10)
        processes[0].kill()
        await processes[0].wait()
        answer_ts = streaming[0].ts
        left_at = parts(fake.message(answer_ts).text)[1]
        assert not left_at.startswith(FINAL_MARKS), "the answer ended before the kill"

        processes.append(await slack_process(long_answers, fake))
        messages = await wait_until_shown(fake, "900.1")
        expected = answer_given(engine.worker)
    finally:
        await stop_all(processes, engine, broker)

    assert messages[0].ts == answer_ts  # the same message, updated by the second process
    assert shown(messages) == (as_slack_shows(expected), DONE)
    assert len(fake.calls_of("chat.postMessage")) == len(messages)  # nothing posted twice


async def ready_and_unacknowledged(queue: str) -> tuple[int, int]:
    """How many of ``queue``'s messages wait, and how many a consumer holds unacknowledged."""
    process = await asyncio.create_subprocess_exec(
        "rabbitmqctl",
        "-q",
        "list_queues",
        "name",
        "messages_ready",
        "messages_unacknowledged",
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    for line in out.decode().splitlines():
        name, ready, unacknowledged = line.split("\t")
        if name == queue:
            return int(ready), int(unacknowledged)
    return 0, 0


async def published_end(broker: Broker, bot_id: str) -> asyncio.Future[ReplyEvent]:
    """Resolves with the first terminal event published to ``bot_id`` (seen beside its queue)."""
    channel = await broker.connection.channel()
    tap = await channel.declare_queue(exclusive=True, auto_delete=True)
    await tap.bind(broker.names.reply_exchange, routing_key=bot_id)
    end: asyncio.Future[ReplyEvent] = asyncio.get_running_loop().create_future()

    async def on_event(message: AbstractIncomingMessage) -> None:
        event = decode_event(message.body)
        if event.type in TERMINAL_TYPES and not end.done():
            end.set_result(event)

    await tap.consume(on_event, no_ack=True)
    end.add_done_callback(lambda _: asyncio.ensure_future(channel.close()))
    return end


async def test_an_end_taken_but_not_yet_shown_by_a_killed_bot_is_shown_by_the_next_one(
    settings: Settings, backend: Backend, broker: Broker, fake: FakeSlack
) -> None:
    """The first process holds the answer's terminal event while Slack makes it wait (a 429
    with a long Retry-After) and is killed: the event was never acknowledged, so the broker
    gives it to the next process, which shows it in the same message."""
    engine = await start_engine(settings, backend)
    reply_queue = broker.names.reply_queue("slack-main")
    processes: list[ConciergeProcess] = []
    try:
        processes.append(await slack_process(settings, fake))
        end = await published_end(broker, "slack-main")
        await fake.send_envelope(events_api(mention("Say hello.", "950.1"), "env-95"))
        placeholder = await fake.wait_for(lambda: fake.thread(CHANNEL, "950.1"))
        fake.rate_limit("chat.update", retry_after_s=600)  # the next update waits 10 minutes
        await fake.wait_for(lambda: fake.calls_of("chat.update"))
        assert isinstance(await asyncio.wait_for(end, 60), Done)
        deadline = time.monotonic() + 60
        # Delivered (none ready), and held: the end is the one message not acknowledged.
        while await ready_and_unacknowledged(reply_queue) != (0, 1):
            assert time.monotonic() < deadline, "the first process acknowledged the end"
        processes[0].kill()
        await processes[0].wait()
        assert not parts(fake.message(placeholder[0].ts).text)[1].startswith(FINAL_MARKS)

        processes.append(await slack_process(settings, fake))
        messages = await wait_until_shown(fake, "950.1")
        async with ConciergeClient(settings, "test") as client:
            expected = await direct_answer(client, "Say hello.")
    finally:
        await stop_all(processes, engine, broker)

    assert messages[0].ts == placeholder[0].ts
    assert shown(messages) == (as_slack_shows(expected), DONE)
