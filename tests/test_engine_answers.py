"""The engine end to end: citations, time limits, gone askers, rescrapes, locale, failures."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import pytest

from bots.ask import Ask
from bots.client import ConciergeClient
from bots.session import Session
from broker.amqp import Broker
from broker.protocol import Cancelled, Done, Failed, Progress, ReplyEvent, Started, make_request
from config.settings import Settings
from config.texts import t
from engine.backends.base import Backend, ChatMessage, GenerationLimits, Pieces, ShouldStop
from tests.conftest import LONG_QUESTION, RunningEngine, start_engine
from tests.engine_helpers import shelves_question
from tests.helpers import collect, streamed_is_final, token_text, wait_for_tokens
from tests.site_fixture import FakeSite


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
    assert streamed_is_final(after, after[-1].text)


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
    # a missing queue closes the channel the engine looks on; the next look waits for it back
    assert await broker.reply_queue_exists(client.bot_id)
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
