"""The scheduled rescrape (``CONCIERGE_RESCRAPE_EVERY``): the setting as written, when one is
due (from the knowledge base's build time, so a restart neither rescrapes at once nor never),
and never two: queued through the request queue one at a time, a turn skipped while a
rescrape runs, and one refused when someone's rebuilt the knowledge base while it waited.
The real engine, broker and local site; the tests wait for the log lines and the messages."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from broker.amqp import Broker
from broker.protocol import Done, Failed, Request, make_request
from cli.status import kb_text
from config.settings import ConfigError, Settings, load_settings, parse_duration
from config.texts import t
from engine.backends.base import Backend
from engine.cancelled import CancelledSessions
from engine.jobs.rescrape import RescrapeJob
from engine.knowledge.models import Article
from engine.knowledge.scrape.builder import build_kb
from engine.knowledge.store import KnowledgeBase
from engine.schedule import SCHEDULE_ASKER, RescrapeSchedule, schedule_bot_id
from tests.conftest import RunningEngine, start_engine
from tests.helpers import WireTap

ARTICLE = Article(
    url="https://guide.example/articles/ferry",
    title="The ferry",
    text="The last ferry leaves Minato at 16:50. Tickets are sold at the pier.",
)
HOUR = timedelta(hours=1)


# --- the setting -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "seconds"),
    [("30m", 1800), ("24h", 86400), ("7d", 604800), ("3600", 3600), (" 90s ", 90), ("1.5h", 5400)],
)
def test_a_duration_is_read_as_written(written: str, seconds: float) -> None:
    assert parse_duration(written) == timedelta(seconds=seconds)


def test_the_schedule_is_off_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONCIERGE_RESCRAPE_EVERY", raising=False)
    assert load_settings().rescrape_every is None
    monkeypatch.setenv("CONCIERGE_RESCRAPE_EVERY", "0")
    assert load_settings().rescrape_every is None
    monkeypatch.setenv("CONCIERGE_RESCRAPE_EVERY", "24h")
    assert load_settings().rescrape_every == timedelta(hours=24)


@pytest.mark.parametrize("written", ["tomorrow", "24 hours", "-1h", "h", "1w"])
def test_a_bad_duration_stops_the_start_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, written: str
) -> None:
    monkeypatch.setenv("CONCIERGE_RESCRAPE_EVERY", written)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert caught.value.exit_code == 78
    assert "rescrape_every (CONCIERGE_RESCRAPE_EVERY): not a duration" in str(caught.value)
    assert "30m, 24h, 7d" in str(caught.value)


# --- a scheduled one that waited while someone else's rebuilt the knowledge base -----------


def test_a_scheduled_rescrape_is_refused_when_the_knowledge_base_was_rebuilt_since(
    tmp_path: Path,
) -> None:
    settings = Settings(_env_file=None, kb_path=tmp_path / "kb.sqlite3")  # type: ignore[call-arg]
    job = RescrapeJob(settings, CancelledSessions(10, 60))

    scheduled, asked = rescrape_request(SCHEDULE_ASKER), rescrape_request("discord")
    assert job.refusal(scheduled, "en") is None  # no knowledge base yet
    build_kb(settings.kb_path, settings.kb_path, [ARTICLE], [], datetime.now(UTC))

    assert job.refusal(scheduled, "en") == t("engine.rescrape.not_due", "en")
    assert job.refusal(asked, "en") is None  # an admin's always runs
    later = rescrape_request(SCHEDULE_ASKER)
    assert job.refusal(later, "en") is None  # queued after the rebuild: still due


def rescrape_request(platform: str, reply_to: str = "someone") -> Request:
    return make_request(
        reply_to=reply_to,
        user_id=SCHEDULE_ASKER,
        question="",
        ttl_s=60,
        kind="rescrape",
        platform=platform,
    )


def test_status_shows_the_next_scheduled_rescrape_only_with_a_schedule() -> None:
    reported = {"articles": 3, "passages": 9, "last_rescrape": "2026-11-30T13:02:35Z"}
    assert "scheduled" not in kb_text(reported)
    scheduled = kb_text(reported | {"next_rescrape": "2026-12-01T13:02:35Z"})
    assert scheduled.endswith(", next scheduled rescrape 2026-12-01T13:02:35Z")
    assert kb_text(reported | {"next_rescrape": None}).endswith("rescrape now (queued)")


# --- with the engine ------------------------------------------------------------------------


class LogLines(logging.Handler):
    """The schedule's log lines as they come, to wait on (the log is what an operator reads)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []
        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())
        self._loop.call_soon_threadsafe(self._changed.set)

    def matching(self, pattern: str) -> list[str]:
        return [line for line in self.lines if re.search(pattern, line)]

    async def until(self, pattern: str, count: int = 1, timeout_s: float = 60.0) -> list[str]:
        async with asyncio.timeout(timeout_s):
            while True:
                self._changed.clear()
                if len(found := self.matching(pattern)) >= count:
                    return found
                await self._changed.wait()


@pytest.fixture
async def schedule_log() -> AsyncIterator[LogLines]:
    logger = logging.getLogger("engine.schedule")
    handler, level = LogLines(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


@pytest.fixture
async def engines(broker: Broker) -> AsyncIterator[list[RunningEngine]]:
    """Engines a test starts, stopped before the broker's topology is removed."""
    started: list[RunningEngine] = []
    yield started
    for running in started:
        await running.stop()


def every(settings: Settings, period: timedelta) -> Settings:
    return settings.model_copy(update={"rescrape_every": period})


async def next_rescrape(engine: RunningEngine) -> datetime:
    """When the engine's ``/healthz`` says the next scheduled rescrape is due."""
    metrics = engine.worker.metrics
    await metrics.refresh_health()
    shown = metrics.health()["knowledge_base"]["next_rescrape"]
    return datetime.strptime(shown, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def built(settings: Settings, ago: timedelta) -> datetime:
    """A knowledge base as a rescrape ``ago`` left it."""
    moment = datetime.now(UTC) - ago
    build_kb(settings.kb_path, settings.kb_path, [ARTICLE], [], moment)
    return moment


async def test_with_no_knowledge_base_one_is_queued_at_start_through_the_request_queue(
    site_settings: Settings,
    backend: Backend,
    broker: Broker,
    engines: list[RunningEngine],
    schedule_log: LogLines,
) -> None:
    settings = every(site_settings, HOUR)
    bot_id = schedule_bot_id(settings.engine_name)
    tap = await WireTap.open(broker, bot_id)
    engines.append(engine := await start_engine(settings, backend))

    request = await tap.request_from(SCHEDULE_ASKER)
    assert (request.type, request.platform, request.reply_to) == ("rescrape", "schedule", bot_id)
    end = (await tap.ending(request.session_id))[-1]
    assert isinstance(end, Done) and end.text.startswith("Rescrape done: 3 articles")
    [done] = await schedule_log.until("scheduled rescrape done")
    assert "Rescrape done: 3 articles" in done

    # The next: an hour after that one ended (the knowledge base it built says when).
    await schedule_log.until("next scheduled rescrape", count=2)
    assert schedule_log.matching("next scheduled rescrape")[0].startswith(
        "next scheduled rescrape now"
    )
    rebuilt_at = KnowledgeBase(settings.kb_path).rescraped_at()
    assert rebuilt_at is not None
    assert rebuilt_at + HOUR - timedelta(seconds=1) <= await next_rescrape(engine)
    assert await next_rescrape(engine) <= datetime.now(UTC) + HOUR
    assert len(schedule_log.matching("scheduled rescrape queued")) == 1


async def test_a_restart_after_a_recent_rescrape_waits_for_its_turn(
    site_settings: Settings,
    backend: Backend,
    broker: Broker,
    engines: list[RunningEngine],
    schedule_log: LogLines,
) -> None:
    settings = every(site_settings, HOUR)
    moment = built(settings, ago=timedelta(minutes=10))
    engines.append(engine := await start_engine(settings, backend))

    # known before the engine is ready; /healthz shows whole seconds
    assert await next_rescrape(engine) == (moment + HOUR).replace(microsecond=0)
    assert (await broker.request_queue_counts()).messages == 0
    assert schedule_log.matching("scheduled rescrape queued") == []


async def test_a_restart_after_an_old_rescrape_queues_one_at_once(
    site_settings: Settings,
    backend: Backend,
    broker: Broker,
    engines: list[RunningEngine],
    schedule_log: LogLines,
) -> None:
    settings = every(site_settings, HOUR)
    built(settings, ago=2 * HOUR)
    engines.append(await start_engine(settings, backend))

    await schedule_log.until("scheduled rescrape queued")
    [done] = await schedule_log.until("scheduled rescrape done")
    assert "Rescrape done: 3 articles" in done


async def test_one_at_a_time_each_queued_only_once_the_one_before_ended(
    site_settings: Settings,
    backend: Backend,
    broker: Broker,
    engines: list[RunningEngine],
    schedule_log: LogLines,
) -> None:
    """A tiny period: the next is due at once, yet never queued before the last one ended."""
    engines.append(await start_engine(every(site_settings, timedelta(seconds=0.05)), backend))

    await schedule_log.until("scheduled rescrape done", count=3)

    steps = schedule_log.matching("scheduled rescrape (queued|done)")
    kinds = [line.split()[2].rstrip(":") for line in steps]
    assert kinds[:6] == ["queued", "done"] * 3


async def test_a_turn_is_skipped_while_a_rescrape_runs(
    settings: Settings, broker: Broker, schedule_log: LogLines
) -> None:
    schedule = RescrapeSchedule(settings, timedelta(seconds=0.05))

    async with schedule.running(broker, rescrape_running=lambda: "default"):
        await schedule_log.until("scheduled rescrape skipped: a rescrape is running", count=2)

    assert (await broker.request_queue_counts()).messages == 0  # none queued
    assert schedule_log.matching("scheduled rescrape queued") == []


async def test_one_that_waited_while_another_rebuilt_the_knowledge_base_is_not_run(
    site_settings: Settings,
    backend: Backend,
    broker: Broker,
    engines: list[RunningEngine],
    schedule_log: LogLines,
) -> None:
    """Queued at the engine's last stop, say; an admin's rescrape went first meanwhile."""
    settings = every(site_settings, HOUR).model_copy(update={"purge_on_start": False})
    bot_id = schedule_bot_id(settings.engine_name)
    tap = await WireTap.open(broker, bot_id)
    waited = rescrape_request(SCHEDULE_ASKER, reply_to=bot_id)
    await broker.send_request(waited)
    built(settings, ago=timedelta(0))  # after it was sent
    engines.append(await start_engine(settings, backend))

    end = (await tap.ending(waited.session_id))[-1]
    assert isinstance(end, Failed)
    assert end.reason == t("engine.rescrape.not_due", "en")
    assert [request for request in tap.requests if request != waited] == []  # none of its own
