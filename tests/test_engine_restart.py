"""An answer survives its engine: a request whose engine was killed mid-answer is answered
again, whole; one that stopped the engine twice is set aside with its reason and its asker
told; the startup purge keeps the interrupted request and the fresh ones, in order, and drops
the stale ones. Real engines (one a process, SIGKILLed) on the real broker."""

from __future__ import annotations

import asyncio
import io
import time
from typing import Any

import pytest
from rich.console import Console

from bots.ask import Ask
from bots.client import ConciergeClient
from bots.renderer import MessageContent, Renderer, Status
from bots.session import Session
from bots.terminal.answer import EXIT_OK, TerminalAnswer
from bots.terminal.status import TerminalStatus
from bots.terminal.text import PlainText
from broker.amqp import Broker
from broker.messages import ATTEMPT_HEADER, attempt_of, bot_message
from broker.protocol import (
    ERROR_HEADER,
    Done,
    Failed,
    Request,
    Started,
    TokenEvent,
    decode_request,
    make_request,
)
from broker.requeue import publish_again
from config.settings import Settings
from config.texts import t
from engine.backends.base import Backend
from engine.purge import MAX_ATTEMPTS, STALE_AFTER_S, Purged
from engine.worker import Worker
from tests.conftest import LONG_QUESTION, start_engine
from tests.helpers import collect
from tests.processes import ConciergeProcess

ANSWERING_AGAIN = t("status.answering_again", "en")


class WatchedSink:
    """Every content each message showed, and an event set once some answer text shows."""

    def __init__(self) -> None:
        self.messages: list[MessageContent] = []
        self.shown: list[MessageContent] = []  # every post and edit, in order
        self.text_shown = asyncio.Event()

    async def post(self, content: MessageContent, after: Any | None) -> int:
        self.messages.append(content)
        self._saw(content)
        return len(self.messages) - 1

    async def edit(self, handle: int, content: MessageContent) -> None:
        self.messages[handle] = content
        self._saw(content)

    def _saw(self, content: MessageContent) -> None:
        self.shown.append(content)
        if content.body:
            self.text_shown.set()


async def test_an_answer_whose_engine_was_killed_is_answered_again_and_shown_whole(
    settings: Settings, backend: Backend, broker: Broker, client: ConciergeClient
) -> None:
    doomed = await ConciergeProcess.start(  # a story with no end at a blank line: killed mid-way
        settings,
        CONCIERGE_MAX_TOKENS="400",
        CONCIERGE_ANSWER_PARAGRAPHS="0",
        CONCIERGE_REQUEST_TTL_S=f"{settings.request_ttl_s:g}",
    )
    sink = WatchedSink()
    renderer = Renderer(sink, max_chars=100_000, edit_interval_s=0.0)
    following = asyncio.create_task(renderer.run(await client.ask(Ask(LONG_QUESTION, "u1"))))
    await asyncio.wait_for(sink.text_shown.wait(), 60)
    doomed.kill()
    assert await doomed.wait() != 0
    before_kill = [content.body for content in sink.shown if content.body]

    engine = await start_engine(settings, backend)  # its startup purge keeps the request
    try:
        status = await asyncio.wait_for(following, 60)
    finally:
        await engine.stop()

    assert status is Status.DONE
    assert before_kill  # the first engine's text was shown...
    restart = sink.shown.index(MessageContent("", ANSWERING_AGAIN))  # ...then dropped, said so
    assert all(content.footer == ANSWERING_AGAIN for content in sink.shown[restart:-1])
    assert sink.messages == [MessageContent(renderer.text, "✅ done")]  # the new one, whole
    assert renderer.text and renderer.restarted


async def test_the_terminal_says_the_answer_restarted_and_prints_the_new_one_whole() -> None:
    request = make_request(reply_to="cli", user_id="u", question="q", ttl_s=30)
    session = Session.for_request(request, timeout_s=5)
    header = {"session_id": request.session_id}
    for event in (
        Started(**header, seq=0, waited_s=0),
        TokenEvent(**header, seq=1, text="Once upon"),
        Started(**header, seq=0, waited_s=3, attempt=2),  # another engine, from its seq 0
        TokenEvent(**header, seq=1, text="Hello"),
        Done(
            **header, seq=2, text="Hello world", tokens=2, ttft_s=0.1, tokens_per_s=9, elapsed_s=1
        ),
    ):
        session.items.put_nowait(event)
    out, err = io.StringIO(), io.StringIO()
    status = TerminalStatus(Console(file=err, width=200), "en")

    outcome = await TerminalAnswer(session, PlainText(out), status).follow()

    assert outcome.code == EXIT_OK and outcome.reply == "Hello world"
    assert out.getvalue() == "Once upon\nHello world\n"  # the old text ended, the new whole
    assert "the engine restarted mid-answer: the whole answer follows again" in err.getvalue()


async def test_a_second_attempt_never_begun_here_is_shown_as_an_answer() -> None:
    """A request that only waited while a broker node went can come back counted as a second
    attempt: an asker who saw no earlier start is told nothing about a restart."""
    request = make_request(reply_to="cli", user_id="u", question="q", ttl_s=30)
    header = {"session_id": request.session_id}
    events = (
        Started(**header, seq=0, waited_s=3, attempt=2),
        TokenEvent(**header, seq=1, text="Hello"),
        Done(**header, seq=2, text="Hello", tokens=1, ttft_s=0.1, tokens_per_s=9, elapsed_s=1),
    )
    session = Session.for_request(request, timeout_s=5)
    for event in events:
        session.items.put_nowait(event)
    out, err = io.StringIO(), io.StringIO()
    status = TerminalStatus(Console(file=err, width=200), "en")
    outcome = await TerminalAnswer(session, PlainText(out), status).follow()
    assert outcome.code == EXIT_OK and out.getvalue() == "Hello\n"
    assert "restarted" not in err.getvalue()

    sink, session = WatchedSink(), Session.for_request(request, timeout_s=5)
    for event in events:
        session.items.put_nowait(event)
    renderer = Renderer(sink, max_chars=100, edit_interval_s=0)
    assert await renderer.run(session) is Status.DONE
    assert not renderer.restarted
    assert ANSWERING_AGAIN not in [content.footer for content in sink.shown]


async def interrupted(settings: Settings, request: Request, attempt: int) -> None:
    """``request`` queued as attempt ``attempt`` and taken by a consumer that dies holding it
    (its connection closes unacknowledged), as a killed engine would leave it."""
    async with Broker(settings) as first:
        await publish_again(first, [(request, attempt)])
    async with Broker(settings) as dying:
        taken = await dying.take_waiting_request()
        assert taken is not None and taken.attempt == attempt


@pytest.mark.parametrize("purge_on_start", [True, False], ids=["at-start", "while-running"])
async def test_a_request_that_stopped_the_engine_twice_is_set_aside_and_its_asker_told(
    purge_on_start: bool,
    settings: Settings,
    backend: Backend,
    broker: Broker,
    client: ConciergeClient,
) -> None:
    settings = settings.model_copy(update={"purge_on_start": purge_on_start})
    poison = make_request(reply_to=client.bot_id, user_id="u1", question="boom", ttl_s=60)
    asker = Session.for_request(poison, timeout_s=30)
    client.sessions.add(asker)
    await interrupted(settings, poison, attempt=MAX_ATTEMPTS)  # killed twice: a third is due

    engine = await start_engine(settings, backend)
    try:
        told = await collect(asker)
        after = await collect(await client.ask(Ask("Say hello.", "u2")))
    finally:
        await engine.stop()

    assert [type(event) for event in told] == [Failed]  # never started a third time
    assert told[0].reason == t("engine.set_aside", "en", times=MAX_ATTEMPTS)
    assert isinstance(after[-1], Done)  # the service goes on
    channel = await broker.connection.channel()
    parked = await (await channel.get_queue(broker.names.dead_queue)).get(timeout=5)
    await parked.ack()
    await channel.close()
    assert decode_request(parked.body) == poison
    assert str(parked.headers[ERROR_HEADER]) == "stopped the engine 2 times while answered"
    assert str(parked.headers["x-concierge-source"]) == "request"


async def test_the_startup_purge_keeps_the_interrupted_and_fresh_requests_in_order(
    settings: Settings, backend: Backend, broker: Broker, client: ConciergeClient
) -> None:
    now = time.time()

    def asked(question: str, age_s: float) -> Request:
        request = make_request(reply_to=client.bot_id, user_id="u", question=question, ttl_s=60)
        request = request.model_copy(update={"sent_at": now - age_s})
        client.sessions.add(Session.for_request(request, timeout_s=30))
        return request

    running = asked("answered when the engine died", 2 * STALE_AFTER_S)  # old, yet kept
    stale = asked("asked long before the engine came back", STALE_AFTER_S + 10)
    fresh = [asked(f"asked {n} s ago", n) for n in (3, 1)]
    async with Broker(settings) as dying:
        await broker.send_request(running)
        assert await dying.take_waiting_request() is not None  # held as the engine dies
        for request in (stale, *fresh):
            await broker.send_request(request)
    # the running one is back at the head, redelivered
    worker = Worker(settings, broker, backend)

    purged = await worker.purge_stale()

    assert purged == Purged(stale=1, kept=3, set_aside=0)
    queued = [await broker.take_waiting_request() for _ in range(3)]
    assert await broker.take_waiting_request() is None
    assert [(e.message.session_id, e.attempt) for e in queued if e is not None] == [
        (running.session_id, 2),
        (fresh[0].session_id, 1),
        (fresh[1].session_id, 1),
    ]
    for envelope in queued:
        assert envelope is not None and not envelope.redelivered
        await envelope.ack()
    stale_session = client.sessions.get(stale.session_id)
    assert stale_session is not None
    told = await collect(stale_session)
    assert [type(event) for event in told] == [Failed]
    assert told[0].reason == t("engine.restarted", "en")


def test_a_copy_names_its_attempt_and_a_redelivery_counts_one_more() -> None:
    request = make_request(reply_to="b", user_id="u", question="q", ttl_s=30)
    assert bot_message(request, 30).headers == {}
    assert bot_message(request, 30, attempt=2).headers == {ATTEMPT_HEADER: 2}
    assert attempt_of({}, redelivered=False) == 1
    assert attempt_of({}, redelivered=True) == 2
    assert attempt_of({ATTEMPT_HEADER: 2}, redelivered=True) == 3
    assert attempt_of({ATTEMPT_HEADER: 2, "x-delivery-count": 1}, redelivered=True) == 3  # quorum
    assert attempt_of({"x-delivery-count": 2}, redelivered=True) == 3
