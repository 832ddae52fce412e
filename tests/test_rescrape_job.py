"""The rescrape as the engine runs it: its done event lists the pages not read with their
reasons, a failed one says which in its text, progress counts the articles, and ``/healthz``
shows it while it runs; asked in Japanese, it reports in Japanese. The real engine, broker and
a local site (tests/site_fixture.py)."""
# ruff: noqa: RUF001  # the Japanese texts use full-width brackets and colons

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import aiohttp
import pytest

from bots.ask import Ask
from bots.client import ConciergeClient
from bots.session import Session
from broker.amqp import Broker
from broker.protocol import (
    MAX_BODY_BYTES,
    MAX_FAILURES_LISTED,
    Cancelled,
    Done,
    Failed,
    PageNotRead,
    Progress,
    ReplyEvent,
    decode_event,
    encode,
    make_request,
)
from config.settings import Settings
from config.texts import Locale
from engine.backends.base import Backend
from engine.jobs.rescrape import rescrape_done
from engine.knowledge.models import PageFailure, ScrapeResult
from engine.metrics import MetricsServer
from engine.replies import EventHeader
from tests.conftest import RunningEngine, start_engine
from tests.helpers import collect
from tests.site_fixture import FakeSite


def reading(settings: Settings, site: FakeSite, *paths: str) -> Settings:
    """The site read from a plain list of its pages."""
    urls = [f"{site.base}{path}" for path in paths]
    return settings.model_copy(update={"site_sitemap_url": None, "site_urls": urls})


@pytest.fixture
async def engine_reading(broker: Broker) -> AsyncIterator[list[RunningEngine]]:
    """Engines a test starts (each on its own site settings), stopped before the broker's
    topology is removed."""
    started: list[RunningEngine] = []
    yield started
    for running in started:
        await running.stop()


async def rescrape_events(
    settings: Settings,
    backend: Backend,
    started: list[RunningEngine],
    locale: Locale | None = None,
) -> list[ReplyEvent]:
    started.append(await start_engine(settings, backend))
    async with ConciergeClient(settings, "test") as client:
        return await collect(await client.ask(Ask("", "admin", "rescrape", locale=locale)))


async def test_the_done_event_lists_each_page_not_read_with_its_reason(
    site_settings: Settings,
    site: FakeSite,
    backend: Backend,
    engine_reading: list[RunningEngine],
) -> None:
    site.raw["/files/report.pdf"] = ("application/pdf", b"%PDF-1.7 not an article")
    paths = ["/articles/widgets", "/articles/gone", "/files/report.pdf"]
    settings = reading(site_settings, site, *paths)

    events = await rescrape_events(settings, backend, engine_reading)

    done = events[-1]
    assert isinstance(done, Done), done
    assert done.failures == (
        PageNotRead(url=f"{site.base}/articles/gone", reason="HTTP 404", outcome="failed"),
        PageNotRead(
            url=f"{site.base}/files/report.pdf",
            reason="not HTML (application/pdf)",
            outcome="skipped",
        ),
    )
    assert done.failures_total == 2
    assert (done.tokens, done.ttft_s, done.tokens_per_s) == (0, None, None)
    assert done.text.startswith("Rescrape done: 1 article in the knowledge base (1 fetched, ")
    assert f"- {site.base}/articles/gone: HTTP 404" in done.text.splitlines()
    progress = [event for event in events if isinstance(event, Progress)]
    assert all("articles" in event.counts for event in progress)
    assert progress[-1].counts["articles"] == 1  # saving: the articles, not the pages


async def test_a_failed_rescrape_names_the_pages_not_read_in_its_text(
    site_settings: Settings,
    site: FakeSite,
    backend: Backend,
    engine_reading: list[RunningEngine],
) -> None:
    gone = f"{site.base}/articles/gone"
    settings = reading(site_settings, site, "/articles/gone")

    events = await rescrape_events(settings, backend, engine_reading)

    failed = events[-1]
    assert isinstance(failed, Failed), failed
    assert failed.reason == (
        f"rescrape failed: no article could be read (1 failed, 0 skipped; first: {gone}: HTTP 404)"
    )
    assert failed.text == f"Not read:\n- {gone}: HTTP 404"


async def test_a_rescrape_asked_in_japanese_reports_in_japanese(
    site_settings: Settings,
    site: FakeSite,
    backend: Backend,
    engine_reading: list[RunningEngine],
) -> None:
    settings = reading(site_settings, site, "/articles/widgets", "/articles/gone")

    events = await rescrape_events(settings, backend, engine_reading, locale="ja")

    progress = [event.text for event in events if isinstance(event, Progress)]
    first_url = settings.site_urls[0]
    assert progress[0] == f"再読み込み：{first_url} ほか 1 件 から記事を探しています…"
    assert all(text.startswith("再読み込み：") for text in progress), progress
    assert (
        "再読み込み：記事 1 件を保存しています（取得 1、変更なし 0、失敗 1、スキップ 0）…"
        in progress
    )
    done = events[-1]
    assert isinstance(done, Done), done
    lines = done.text.splitlines()
    assert lines[0].startswith(
        "再読み込み完了：ナレッジベースに記事 1 件（取得 1、変更なし 0、失敗 1、スキップ 0）、"
    )
    assert lines[1:] == ["読み込めなかったページ：", f"- {site.base}/articles/gone: HTTP 404"]


async def test_a_failed_rescrape_asked_in_japanese_says_why_in_japanese(
    site_settings: Settings,
    site: FakeSite,
    backend: Backend,
    engine_reading: list[RunningEngine],
) -> None:
    gone = f"{site.base}/articles/gone"
    settings = reading(site_settings, site, "/articles/gone")
    engine_reading.append(await start_engine(settings.model_copy(update={"locale": "ja"}), backend))
    async with ConciergeClient(settings, "test") as client:
        request = make_request(
            reply_to=client.bot_id, user_id="admin", question="", ttl_s=30, kind="rescrape"
        )
        assert request.locale is None  # the engine's CONCIERGE_LOCALE, here Japanese
        session = Session.for_request(request, timeout_s=30)
        client.sessions.add(session)
        await client.broker.send_request(request)
        events = await collect(session)

    failed = events[-1]
    assert isinstance(failed, Failed), failed
    assert failed.reason == (
        "再読み込みに失敗しました：読み込めた記事がありません"
        f"（失敗 1、スキップ 0。最初：{gone}: HTTP 404）"
    )
    assert failed.text == f"読み込めなかったページ：\n- {gone}: HTTP 404"


async def healthz(server: MetricsServer) -> dict[str, object]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{server.port}/healthz") as response,
    ):
        health: dict[str, object] = json.loads(await response.text())
        return health


async def test_a_rescrape_asked_as_soon_as_the_last_one_ended_is_not_refused(
    site_settings: Settings,
    site: FakeSite,
    backend: Backend,
    engine_reading: list[RunningEngine],
) -> None:
    """The job is free before its end is sent: it used to count as running until the broker
    confirmed that end, and an asker quick enough was told "a rescrape is already running"."""
    settings = reading(site_settings, site, "/articles/widgets")
    engine = await start_engine(settings, backend)
    engine_reading.append(engine)
    again = make_request(reply_to="b", user_id="admin", question="", ttl_s=9, kind="rescrape")
    async with ConciergeClient(settings, "test") as client:
        for turn in range(5):  # the old race was lost about one time in two
            # a new asker each turn: a session left at its end still counts as open
            session = await client.ask(Ask("", f"admin{turn}", "rescrape"))
            async for event in session:
                if isinstance(event, Done | Failed | Cancelled):
                    # As the asker reads the end, in the same turn of the event loop:
                    assert engine.worker.rescrapes.refusal(again, "en") is None
                    assert isinstance(event, Done), event
                    break


async def test_healthz_shows_a_rescrape_while_it_runs(
    site_settings: Settings,
    site: FakeSite,
    backend: Backend,
    engine_reading: list[RunningEngine],
) -> None:
    settings = reading(site_settings, site, "/slow").model_copy(
        update={"scrape_timeout_s": 120.0}  # /slow hangs until released: only the cancel stops it
    )
    engine = await start_engine(settings, backend)
    engine_reading.append(engine)
    async with (
        MetricsServer(engine.worker.metrics, "127.0.0.1", 0) as server,
        ConciergeClient(settings, "test") as client,
    ):
        session = await client.ask(Ask("", "admin", "rescrape"))
        await asyncio.wait_for(site.hanging.wait(), 30)  # fetching
        during = await healthz(server)
        await client.cancel(session, "admin")
        ended = (await collect(session))[-1]
        await engine.worker.rescrapes.wait()
        after = await healthz(server)
    site.release.set()

    rescraping = during["rescraping"]
    assert isinstance(rescraping, dict)
    assert rescraping["session_id"] == session.session_id
    assert rescraping["running_s"] >= 0
    assert during["answering"] is None  # the worker is free to answer meanwhile
    assert isinstance(ended, Cancelled)
    assert after["rescraping"] is None


# --- the done event's size (pure) ------------------------------------------------------------

HEADER = EventHeader(session_id="s" * 32, seq=9, context={"channel": "c" * 200})


def result_with(failures: list[PageFailure]) -> ScrapeResult:
    return ScrapeResult(
        articles=1,
        passages=3,
        fetched=1,
        unchanged=0,
        failed=len(failures),
        skipped=0,
        elapsed_s=2.0,
        failures=tuple(failures),
    )


def test_the_done_event_lists_the_first_hundred_and_counts_them_all() -> None:
    failures = [PageFailure(f"https://example.com/{n}", "HTTP 404") for n in range(150)]

    done = rescrape_done(HEADER, result_with(failures), 2.0)

    assert len(done.failures) == MAX_FAILURES_LISTED
    assert [page.url for page in done.failures] == [f.url for f in failures[:100]]
    assert done.failures_total == 150
    assert decode_event(encode(done)) == done


def test_a_done_event_with_long_addresses_stays_small_enough_to_be_delivered() -> None:
    long_url = "https://example.com/" + "x" * 3000
    failures = [PageFailure(f"{long_url}{n}", "a reason " * 50) for n in range(120)]

    done = rescrape_done(HEADER, result_with(failures), 2.0)

    body = encode(done)
    assert len(body) <= MAX_BODY_BYTES
    assert 0 < len(done.failures) < MAX_FAILURES_LISTED  # as many as fit
    assert done.failures_total == 120
    assert all(len(page.url) == 2000 and page.url.endswith("…") for page in done.failures)
    assert all(len(page.reason) <= 300 for page in done.failures)
    assert decode_event(body) == done  # the asker can read it
