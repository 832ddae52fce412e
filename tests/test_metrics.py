"""Operations: the engine's /metrics and /healthz after real exchanges, and log lines that
carry the session id, plain and JSON."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bots.ask import Ask
from bots.client import ConciergeClient
from broker.amqp import Broker
from broker.protocol import Cancelled, Done
from config.logging import session_context, setup_logging
from config.settings import Settings
from engine.backends.base import Backend
from engine.knowledge.store import KnowledgeBase
from engine.metrics import OUTCOMES, EngineMetrics, MetricsServer
from tests.conftest import LONG_QUESTION, RunningEngine, start_engine
from tests.helpers import collect, wait_for_tokens

ROOT = Path(__file__).resolve().parent.parent
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def http_get(server: MetricsServer, path: str) -> tuple[int, str, str]:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{server.port}{path}") as response,
    ):
        return response.status, response.headers["Content-Type"], await response.text()


async def scrape(server: MetricsServer) -> Samples:
    status, content_type, text = await http_get(server, "/metrics")
    assert status == 200
    assert content_type.startswith("text/plain")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Short answers: these tests count them, they need not read them."""
    return settings.model_copy(update={"max_tokens": 12})


@pytest.fixture
async def server(engine: RunningEngine) -> AsyncIterator[MetricsServer]:
    """The metrics server of the running engine, on a free port."""
    async with MetricsServer(engine.worker.metrics, "127.0.0.1", 0) as running:
        yield running


@pytest.fixture
async def long_server(long_engine: RunningEngine) -> AsyncIterator[MetricsServer]:
    async with MetricsServer(long_engine.worker.metrics, "127.0.0.1", 0) as running:
        yield running


async def test_metrics_show_an_answered_request(
    server: MetricsServer, client: ConciergeClient
) -> None:
    before = await scrape(server)
    assert [value(before, "concierge_requests_total", outcome=o) for o in OUTCOMES] == [0] * 4

    session = await client.ask(Ask("What is the capital of France?", "u1"))
    done = (await collect(session))[-1]
    assert isinstance(done, Done) and done.ttft_s is not None and done.tokens_per_s is not None

    after = await scrape(server)
    assert value(after, "concierge_requests_total", outcome="done") == 1
    for outcome in ("cancelled", "failed", "expired"):
        assert value(after, "concierge_requests_total", outcome=outcome) == 0
    assert value(after, "concierge_queue_wait_seconds_count") == 1
    assert value(after, "concierge_time_to_first_token_seconds_count") == 1
    assert value(after, "concierge_time_to_first_token_seconds_sum") == pytest.approx(done.ttft_s)
    assert value(after, "concierge_tokens_per_second_count") == 1
    assert value(after, "concierge_tokens_per_second_sum") == pytest.approx(done.tokens_per_s)
    assert value(after, "concierge_tokens_generated_total") == done.tokens
    assert value(after, "concierge_cancel_stop_latency_seconds_count") == 0
    assert value(after, "concierge_request_queue_depth") == 0
    assert value(after, "concierge_broker_connected") == 1
    assert value(after, "concierge_model_loaded") == 1


async def test_metrics_show_the_queue_depth_and_cancels(
    long_server: MetricsServer, client: ConciergeClient
) -> None:
    running = await client.ask(Ask(LONG_QUESTION, "u1"))
    await wait_for_tokens(running, 3)
    queued = [await client.ask(Ask(f"Say hello {i}.", f"u{i + 2}")) for i in range(2)]
    during = await scrape(long_server)
    assert value(during, "concierge_request_queue_depth") == 2  # read from the broker now

    for session in [*queued, running]:  # the queued ones first: never started
        await client.cancel(session, session.user_id)
    ends = [(await collect(session))[-1] for session in [*queued, running]]
    assert all(isinstance(end, Cancelled) for end in ends)
    stopped = ends[-1]
    assert isinstance(stopped, Cancelled) and stopped.stop_latency_s is not None

    after = await scrape(long_server)
    assert value(after, "concierge_requests_total", outcome="cancelled") == 3
    assert value(after, "concierge_requests_total", outcome="done") == 0
    assert value(after, "concierge_queue_wait_seconds_count") == 1  # only one ever started
    assert value(after, "concierge_cancel_stop_latency_seconds_count") == 1
    assert value(after, "concierge_cancel_stop_latency_seconds_sum") == pytest.approx(
        stopped.stop_latency_s
    )
    assert value(after, "concierge_request_queue_depth") == 0


async def test_healthz_answers_200_with_the_engine_state(
    server: MetricsServer, engine: RunningEngine
) -> None:
    status, content_type, text = await http_get(server, "/healthz")
    assert status == 200
    assert content_type.startswith("application/json")
    health = json.loads(text)
    assert health["ok"] is True
    assert health["alive"] is True
    assert health["broker_connected"] is True
    assert health["model_loaded"] is True
    assert health["engine"] == engine.worker.settings.engine_name


async def healthz(server: MetricsServer) -> dict[str, Any]:
    status, _, text = await http_get(server, "/healthz")
    assert status == 200
    health: dict[str, Any] = json.loads(text)
    return health


async def test_healthz_names_the_answer_being_generated_and_for_how_long(
    long_server: MetricsServer, long_engine: RunningEngine, client: ConciergeClient
) -> None:
    idle = await healthz(long_server)
    assert (idle["answering"], idle["rescraping"]) == (None, None)

    running = await client.ask(Ask(LONG_QUESTION, "u1"))
    await wait_for_tokens(running, 2)
    first = (await healthz(long_server))["answering"]
    await wait_for_tokens(running, 2)
    later = await healthz(long_server)
    await client.cancel(running, "u1")
    await collect(running)
    await long_engine.worker.wait_idle()
    after = await healthz(long_server)

    assert first["session_id"] == running.session_id
    assert later["answering"]["session_id"] == running.session_id
    assert 0 <= first["running_s"] <= later["answering"]["running_s"]
    assert later["rescraping"] is None  # an answer is not a rescrape
    assert after["answering"] is None


async def test_healthz_reports_the_engines_knowledge_base_as_it_changes(
    site_settings: Settings, backend: Backend, broker: Broker
) -> None:
    engine = await start_engine(site_settings, backend)
    try:
        async with MetricsServer(engine.worker.metrics, "127.0.0.1", 0) as server:
            before = (await healthz(server))["knowledge_base"]
            async with ConciergeClient(site_settings, "test") as client:
                rescraped = (await collect(await client.ask(Ask("", "admin", "rescrape"))))[-1]
            after = (await healthz(server))["knowledge_base"]
    finally:
        await engine.stop()

    path = str(site_settings.kb_path.resolve())
    assert before == {"path": path, "articles": 0, "passages": 0, "last_rescrape": None}
    assert isinstance(rescraped, Done)
    stats = KnowledgeBase(site_settings.kb_path).stats()
    assert stats.articles > 0 and stats.last_rescrape_at is not None
    assert after == {
        "path": path,
        "articles": stats.articles,
        "passages": stats.passages,
        "last_rescrape": stats.last_rescrape_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", after["last_rescrape"])


async def test_healthz_answers_503_until_the_engine_can_serve() -> None:
    """A fresh engine's metrics: no model yet, no broker; each engine has its own registry."""
    metrics = EngineMetrics("not-ready")
    async with MetricsServer(metrics, "127.0.0.1", 0) as server:
        status, _, text = await http_get(server, "/healthz")
        assert status == 503
        health = json.loads(text)
        assert (health["ok"], health["broker_connected"], health["model_loaded"]) == (
            False,
            False,
            False,
        )
        samples = await scrape(server)
    assert value(samples, "concierge_model_loaded") == 0
    assert value(samples, "concierge_requests_total", outcome="done") == 0


def test_every_metric_is_documented_in_the_operations_guide() -> None:
    guide = (ROOT / "docs" / "operations.md").read_text()
    names = {family.name for family in EngineMetrics().registry.collect()}
    assert len(names) >= 10
    assert sorted(name for name in names if f"`{name}" not in guide) == []


# --- logs -------------------------------------------------------------------------------


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    """The root logger sends to a buffer through ``setup_logging``; restored afterwards."""
    root = logging.getLogger()
    level = root.level
    stream = io.StringIO()
    handler = setup_logging("INFO", json_lines=True, stream=stream)
    yield stream
    root.removeHandler(handler)
    root.setLevel(level)


def json_lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


async def test_engine_log_lines_of_a_request_carry_its_session_id(
    log_lines: io.StringIO, engine: RunningEngine, client: ConciergeClient
) -> None:
    session = await client.ask(Ask("What is the capital of France?", "u1"))
    await collect(session)
    lines = json_lines(log_lines)
    started = [line for line in lines if line["message"] == "started (ask)"]
    assert len(started) == 1
    assert started[0]["session_id"] == session.session_id
    assert started[0]["logger"] == "engine.worker"
    assert all(session.session_id not in line["message"] for line in lines)


async def test_the_session_id_reaches_threads_and_tasks_and_nothing_outside(
    log_lines: io.StringIO,
) -> None:
    log = logging.getLogger("tests.ops")

    async def in_a_task() -> None:
        log.info("in a task")

    log.info("before")
    with session_context("s-0123456789"):
        await asyncio.to_thread(log.info, "in a thread")
        await asyncio.create_task(in_a_task())
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            log.exception("failed")
    log.info("after")

    lines = {line["message"]: line for line in json_lines(log_lines)}
    assert "session_id" not in lines["before"] and "session_id" not in lines["after"]
    for message in ("in a thread", "in a task", "failed"):
        assert lines[message]["session_id"] == "s-0123456789"
    assert "RuntimeError: boom" in lines["failed"]["exception"]
    assert lines["before"]["level"] == "INFO" and lines["failed"]["level"] == "ERROR"


def test_plain_lines_name_the_session_once() -> None:
    root = logging.getLogger()
    level, stream = root.level, io.StringIO()
    handler = setup_logging("INFO", stream=stream)
    try:
        log = logging.getLogger("tests.ops")
        with session_context("s-0123456789"):
            log.info("started (%s)", "ask")
            log.info("session %s: old style", "s-0123456789")
        log.info("no request")
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    first, second, third = stream.getvalue().splitlines()
    assert first.endswith(" INFO tests.ops: session s-0123456789: started (ask)")
    assert second.endswith(" INFO tests.ops: session s-0123456789: old style")
    assert third.endswith(" INFO tests.ops: no request")
