"""Scheduled rescrapes in every space (issue #30): each space on its own clock, one after
another through the request queue (the next queued only once the one before ended), the next
time of each in ``/healthz``; a rescrape running in a space counts as that space's turn, and
makes another space's wait for its end. The real engine, broker and local sites (two folders);
the tests wait for the schedule's log lines and the messages."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from broker.amqp import Broker
from broker.protocol import Done, Failed
from config.settings import Settings
from config.spaces import load_spaces
from config.texts import t
from engine.backends.base import Backend
from engine.knowledge.store import KnowledgeBase
from engine.schedule import SCHEDULE_ASKER, RescrapeSchedule, schedule_bot_id
from tests.conftest import start_engine
from tests.helpers import WireTap
from tests.test_rescrape_schedule import LogLines
from tests.test_spaces_engine import kb_of, write_spaces

HOUR = timedelta(hours=1)


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
def spaced(settings: Settings, tmp_path: Path) -> Settings:
    """alpha and beta, each a folder; ``default`` has no site, so it is not scheduled."""
    update = {"spaces_file": write_spaces(tmp_path), "rescrape_every": HOUR}
    return settings.model_copy(update=update)


async def test_every_space_is_rebuilt_in_turn_each_queued_once_the_one_before_ended(
    spaced: Settings, backend: Backend, broker: Broker, schedule_log: LogLines
) -> None:
    tap = await WireTap.open(broker, schedule_bot_id(spaced.engine_name))
    engine = await start_engine(spaced, backend)
    try:
        await schedule_log.until("next scheduled rescrape of space 'beta' at")  # after its end
        await tap.until(lambda: len(tap.events) == 2)
        metrics = engine.worker.metrics
        await metrics.refresh_health()
        health = metrics.health()
    finally:
        await engine.stop()

    steps = schedule_log.matching(r"scheduled rescrape of space '\w+' (queued|done)")
    assert [" ".join(line.split()[4:6]).rstrip(":") for line in steps] == [
        "'alpha' queued",
        "'alpha' done",
        "'beta' queued",
        "'beta' done",
    ]
    assert [(r.space, r.user_id, r.type) for r in tap.requests] == [
        ("alpha", SCHEDULE_ASKER, "rescrape"),
        ("beta", SCHEDULE_ASKER, "rescrape"),
    ]
    for request in tap.requests:
        end = (await tap.ending(request.session_id))[-1]
        assert isinstance(end, Done) and end.text.startswith("Rescrape done: 2 articles"), end
    assert not spaced.kb_path.exists()  # default: no site, never queued
    assert schedule_log.matching("space 'default'") == []

    for space in ("alpha", "beta"):
        built = KnowledgeBase(kb_of(spaced, space)).rescraped_at()
        assert built is not None
        shown = health["spaces"][space]["knowledge_base"]["next_rescrape"]
        next_at = datetime.strptime(shown, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        # an hour after that one ended: its build time, or the schedule's own look at its end
        assert built.replace(tzinfo=UTC) + HOUR - timedelta(seconds=1) <= next_at
        assert next_at <= datetime.now(UTC) + HOUR
    assert "next_rescrape" not in health["knowledge_base"]  # default is not scheduled


async def test_a_running_rescrape_is_its_own_space_turn_and_makes_another_space_wait(
    spaced: Settings, broker: Broker, schedule_log: LogLines, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No engine: what the schedule queues stays in the queue, to be read there."""
    monkeypatch.setattr("engine.schedule.OTHER_RUNNING_RECHECK_S", 0.01)
    tap = await WireTap.open(broker, schedule_bot_id(spaced.engine_name))
    schedule = RescrapeSchedule(spaced, HOUR, load_spaces(spaced))
    running: list[str | None] = ["alpha"]  # an admin's rescrape of alpha, say

    async with schedule.running(broker, rescrape_running=lambda: running[0]):
        await schedule_log.until(
            "scheduled rescrape of space 'alpha' skipped: a rescrape is running"
        )
        await schedule_log.until("scheduled rescrape of space 'beta' waits: space 'alpha'")
        assert (await broker.request_queue_counts()).messages == 0
        running[0] = None  # alpha's ended
        await schedule_log.until("scheduled rescrape of space 'beta' queued")
        await tap.until(lambda: len(tap.requests) == 1)

    assert [request.space for request in tap.requests] == ["beta"]  # alpha's turn was taken
    assert len(schedule_log.matching("waits: space 'alpha'")) == 1  # said once, not each look
    assert schedule.next_rescrape("alpha") is not None
    assert schedule.next_rescrape("default") is None  # not scheduled: no site


async def test_one_refused_as_a_rescrape_is_running_is_not_its_turn_and_is_queued_again(
    spaced: Settings, broker: Broker, schedule_log: LogLines, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine refuses it when any rescrape runs, another engine's too, which this one
    cannot see: its space's turn is not taken, and it is queued again. The test answers as
    the engine, in another locale than the deployment's (a space may have its own)."""
    monkeypatch.setattr("engine.schedule.OTHER_RUNNING_RECHECK_S", 0.01)
    bot_id = schedule_bot_id(spaced.engine_name)
    tap = await WireTap.open(broker, bot_id)
    schedule = RescrapeSchedule(spaced, HOUR, load_spaces(spaced))
    running = t("engine.rescrape.running", "ja")

    async with schedule.running(broker, rescrape_running=lambda: None):
        await tap.until(lambda: len(tap.requests) == 1)
        refused = Failed(session_id=tap.requests[0].session_id, seq=0, reason=running)
        await broker.send_event(refused, bot_id)
        await tap.until(lambda: len(tap.requests) == 2)

    assert [request.space for request in tap.requests] == ["alpha", "alpha"]
    assert schedule_log.matching(f"of space 'alpha' skipped: {running}")
