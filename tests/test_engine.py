"""End to end through the real broker and the real model: ask, stream, cancel, expire, purge."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Sequence
from contextlib import suppress
from unittest.mock import patch

import aio_pika
import pytest

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
    Failed,
    Progress,
    ReplyEvent,
    Started,
    TokenEvent,
    encode,
    make_request,
)
from config.settings import Settings
from config.texts import t
from engine.backends.base import Backend, ChatMessage, GenerationLimits, Pieces, ShouldStop
from engine.replies import Replies, TokenRelay
from tests.conftest import LONG_QUESTION, RunningEngine, start_engine
from tests.helpers import collect, token_text, wait_for_tokens
from tests.site_fixture import FakeSite

LOOP_TICK_S = 0.01
MAX_LOOP_GAP_S = 0.25  # between two ticks; far below the seconds a generation takes


def shelves_question(items: int) -> str:
    """A prompt of about ten tokens per item: 150 take the model seconds to read on two cores."""
    shelves = " ".join(f"Item {n} is on shelf {n % 7}." for n in range(items))
    return shelves + " Which shelf holds item 42?"


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
    settings: Settings, backend: Backend, broker: Broker, client: ConciergeClient
) -> None:
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


async def test_an_answer_from_the_knowledge_base_cites_its_article(
    site_settings: Settings, backend: Backend, broker: Broker, site: FakeSite
) -> None:
    engine = await start_engine(site_settings, backend)
    question = "How long is the widget warranty?"
    async with ConciergeClient(site_settings, "test") as client:
        before = await collect(await client.ask(Ask(question, "u1")))
        rescrape = await collect(await client.ask(Ask("", "admin", "rescrape")))
        after = await collect(await client.ask(Ask(question, "u1")))
    await engine.stop()
    assert "no articles yet" in before[-1].text
    assert any(isinstance(event, Progress) for event in rescrape)
    assert isinstance(rescrape[-1], Done)
    assert "Rescrape done" in rescrape[-1].text
    assert isinstance(after[-1], Done)
    assert "Sources:" in after[-1].text
    assert f"{site.base}/articles/widgets" in after[-1].text
    assert token_text(after) == after[-1].text


async def test_a_cancel_during_prompt_processing_stops_it_before_any_token(
    settings: Settings, backend: Backend, broker: Broker
) -> None:
    settings = settings.model_copy(update={"max_tokens": 400, "max_question_chars": 20_000})
    engine = await start_engine(settings, backend)
    async with ConciergeClient(settings, "test") as client:
        session = await client.ask(Ask(shelves_question(150), "u1"))
        first = await session.next_item(60)
        assert isinstance(first, Started)
        await client.cancel(session, "u1")
        events = await collect(session)
    await engine.stop()
    end = events[-1]
    assert isinstance(end, Cancelled)
    assert end.tokens == 0  # it never got past the prompt
    assert end.stop_latency_s is not None and end.stop_latency_s < 2.0


async def test_an_answer_past_its_time_limit_fails_with_the_reason(
    settings: Settings, backend: Backend, broker: Broker
) -> None:
    settings = settings.model_copy(update={"max_tokens": 400, "answer_time_limit_s": 0.3})
    engine = await start_engine(settings, backend)
    async with ConciergeClient(settings, "test") as client:
        events = await collect(await client.ask(Ask(LONG_QUESTION, "u1")))
    await engine.stop()
    assert isinstance(events[-1], Failed)
    assert events[-1].reason == "time limit of 0.3 s reached"
    assert events[-1].text == token_text(events)


async def test_the_engine_stops_generating_for_an_asker_whose_reply_queue_is_gone(
    long_engine: RunningEngine, settings: Settings
) -> None:
    async with ConciergeClient(settings, "test") as client:  # its reply queue dies with it
        session = await client.ask(Ask(LONG_QUESTION, "u1"))
        await wait_for_tokens(session, 2)
    worker = long_engine.worker
    await asyncio.wait_for(worker.wait_idle(), 60)
    assert session.session_id in worker.cancelled  # stopped by the returned replies


async def test_a_live_asker_is_never_taken_for_gone(
    settings: Settings, backend: Backend, broker: Broker, client: ConciergeClient
) -> None:
    assert await broker.reply_queue_exists(client.bot_id)  # the client's, seen from elsewhere
    assert not await broker.reply_queue_exists("nobody-here")


async def test_a_rescrape_runs_beside_answers_and_stops_on_a_cancel(
    site_settings: Settings, backend: Backend, broker: Broker, site: FakeSite
) -> None:
    settings = site_settings.model_copy(
        update={
            "site_urls": [f"{site.base}/slow"],
            "site_sitemap_url": None,
            "scrape_timeout_s": 120.0,  # /slow hangs until the end: only the cancel may stop it
        }
    )
    engine = await start_engine(settings, backend)
    async with ConciergeClient(settings, "test") as client:
        rescrape = await client.ask(Ask("", "admin", "rescrape"))
        await asyncio.wait_for(site.hanging.wait(), 30)  # the rescrape is fetching
        second = await collect(await client.ask(Ask("", "admin2", "rescrape")))
        answer = await collect(await client.ask(Ask("Say hello.", "u1")))
        await client.cancel(rescrape, "admin")
        rescrape_events = await collect(rescrape)
    site.release.set()
    await engine.stop()
    assert isinstance(answer[-1], Done)  # answered while the rescrape was still running
    assert isinstance(second[-1], Failed) and "already running" in second[-1].reason
    assert isinstance(rescrape_events[-1], Cancelled)
    assert "previous knowledge base is still in use" in rescrape_events[-1].text


async def test_a_rescrape_past_its_time_limit_fails_and_keeps_the_old_knowledge(
    site_settings: Settings, backend: Backend, broker: Broker, site: FakeSite
) -> None:
    settings = site_settings.model_copy(
        update={
            "site_urls": [f"{site.base}/slow"],
            "site_sitemap_url": None,
            "rescrape_time_limit_s": 0.5,
        }
    )
    engine = await start_engine(settings, backend)
    async with ConciergeClient(settings, "test") as client:
        events = await collect(await client.ask(Ask("", "admin", "rescrape")))
    site.release.set()
    await engine.stop()
    assert isinstance(events[-1], Failed)
    assert events[-1].reason.startswith("time limit of 0.5 s reached")
    assert "still in use" in events[-1].reason


async def test_the_engine_gives_its_reasons_in_the_askers_locale(
    settings: Settings, broker: Broker, engine: RunningEngine, client: ConciergeClient
) -> None:
    limit = settings.max_question_chars
    ends: list[ReplyEvent] = []
    for locale in ("ja", None):  # None: the engine's CONCIERGE_LOCALE, English here
        request = make_request(
            reply_to=client.bot_id, user_id="u", question="y" * (limit + 1), ttl_s=30, locale=locale
        )
        session = Session.for_request(request, timeout_s=30)
        client.sessions.add(session)
        await broker.send_request(request)  # a client that skipped the bot's own length check
        ends.append((await collect(session))[-1])

    assert all(isinstance(end, Failed) for end in ends)
    assert [end.reason for end in ends if isinstance(end, Failed)] == [
        f"質問が長すぎます：{limit + 1} 文字（上限 {limit} 文字）",  # noqa: RUF001
        f"question too long: {limit + 1} > {limit}",
    ]


class BrokenModel:
    """The real model's token counts, but its generation fails the way a bug would (a fake of
    llama.cpp only: the engine around it is real)."""

    def __init__(self, real: Backend) -> None:
        self.real = real

    def stream(
        self, messages: list[ChatMessage], should_stop: ShouldStop, limits: GenerationLimits
    ) -> Pieces:
        yield "Hel"
        raise KeyError("n_vocab at /srv/models/x.gguf")

    def count_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return self.real.count_tokens(messages)

    async def health(self) -> dict[str, str]:
        return {"kind": "broken"}


async def test_an_unexpected_failure_tells_the_asker_one_sentence_and_logs_its_traceback(
    settings: Settings,
    backend: Backend,
    broker: Broker,
    caplog: pytest.LogCaptureFixture,
) -> None:
    engine = await start_engine(settings, BrokenModel(backend))
    caplog.set_level(logging.INFO)
    async with ConciergeClient(settings, "test") as client:
        end = (await collect(await client.ask(Ask("Say hello.", "u1"))))[-1]
    await engine.stop()

    assert isinstance(end, Failed) and end.text == "Hel"
    assert end.reason == t("engine.generation_failed", "en", error=t("engine.error", "en"))
    assert "KeyError" not in end.reason and "/srv" not in end.reason
    failed = [r for r in caplog.records if r.name == "engine.jobs.answer" and r.exc_info]
    assert len(failed) == 1 and failed[0].exc_info is not None
    assert failed[0].exc_info[0] is KeyError  # the operator gets the traceback
