"""The engine's Prometheus metrics and health check, served by a small aiohttp server.

The worker records every reply event it sends with one call, ``metrics.record(event)``: the
protocol events already carry the numbers (``Started.waited_s``, ``Done.ttft_s``,
``Cancelled.stop_latency_s``), so neither the worker nor the broker knows about Prometheus.
The request queue depth is read from the broker when Prometheus scrapes, not polled; what
``/healthz`` adds (the job running now, the knowledge base) is read when it is asked for.
Each engine has its own ``CollectorRegistry``, so several engines in one process (tests, or
two workers) never share a counter.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest
from pydantic import BaseModel

from broker.protocol import Cancelled, Done, Expired, Failed, Started
from config.settings import ConfigError
from config.spaces import DEFAULT_SPACE
from engine.feedback.store import UNKNOWN, VoteTotals
from engine.health import OUTCOMES, Running, running_report
from engine.space_status import SpacesReport

if TYPE_CHECKING:
    from broker.amqp import Broker

log = logging.getLogger(__name__)

VOTES = ("up", "down")
QUEUE_WAIT_BUCKETS_S = (0.05, 0.25, 1, 5, 15, 30, 60, 120, 300, 600)
TTFT_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30)
TOKENS_PER_S_BUCKETS = (1, 2, 5, 10, 20, 35, 50, 75, 100, 200, 500)
STOP_LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
ANSWER_BUCKETS_S = (0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
QUEUE_DEPTH_TIMEOUT_S = 2.0  # a scrape never hangs on a slow broker

QueueDepth = Callable[[], Awaitable[int]]
Check = Callable[[], bool]
RunningNow = Callable[[], Running | None]
BackendReport = Callable[[], Awaitable[dict[str, Any]]]  # the backend, and whether it answers
BACKEND_REPORT_TIMEOUT_S = 5.0


class EngineMetrics:
    """Counters and histograms of one engine, in a registry of its own."""

    def __init__(self, engine_name: str = "engine") -> None:
        self.engine_name = engine_name
        self.registry = CollectorRegistry()
        self.model_loaded = False
        self.started_at = time.time()
        self.started = 0  # requests the engine began (refused ones never start)
        self.outcomes = dict.fromkeys(OUTCOMES, 0)  # requests ended, by terminal event
        self._queue_depth: QueueDepth | None = None
        self._broker_connected: Check = lambda: False
        self._answering: RunningNow = lambda: None
        self._rescraping: RunningNow = lambda: None
        self._spaces: SpacesReport | None = None  # each space's requests and knowledge base
        self._spaces_now: dict[str, Any] = {}
        self._backend_report: BackendReport | None = None
        self._backend_now: dict[str, Any] | None = None
        self._declare()

    def _declare(self) -> None:
        registry = self.registry
        self.requests = Counter(
            "concierge_requests",
            "Requests ended, by terminal event (done, cancelled, failed, expired).",
            ["outcome"],
            registry=registry,
        )
        for outcome in OUTCOMES:
            self.requests.labels(outcome)  # every outcome shows, 0 until it happens
        self.queue_wait = Histogram(
            "concierge_queue_wait_seconds",
            "Time a request waited in the queue before the engine started it.",
            buckets=QUEUE_WAIT_BUCKETS_S,
            registry=registry,
        )
        self.ttft = Histogram(
            "concierge_time_to_first_token_seconds",
            "From the start of generation (prompt processing included) to the first token.",
            buckets=TTFT_BUCKETS_S,
            registry=registry,
        )
        self.tokens_per_s = Histogram(
            "concierge_tokens_per_second",
            "Decoding speed of each finished answer.",
            buckets=TOKENS_PER_S_BUCKETS,
            registry=registry,
        )
        self.answer_duration = Histogram(
            "concierge_answer_duration_seconds",
            "Generation time of each finished answer.",
            buckets=ANSWER_BUCKETS_S,
            registry=registry,
        )
        self.stop_latency = Histogram(
            "concierge_cancel_stop_latency_seconds",
            "From a cancel's arrival at the engine to the generation stopping.",
            buckets=STOP_LATENCY_BUCKETS_S,
            registry=registry,
        )
        self.tokens = Counter(
            "concierge_tokens_generated",
            "Tokens generated (finished and stopped answers).",
            registry=registry,
        )
        self.queue_depth = Gauge(
            "concierge_request_queue_depth",
            "Requests waiting in the queue (read from the broker at each scrape).",
            registry=registry,
        )
        self.broker_up = Gauge(
            "concierge_broker_connected", "1 while connected to RabbitMQ.", registry=registry
        )
        self.model_up = Gauge(
            "concierge_model_loaded", "1 once the model is loaded.", registry=registry
        )
        self.feedback_votes = Gauge(
            "concierge_feedback_votes",
            "Votes on answers now in the feedback database, by vote (up, down) and by how the "
            "answer ended (done, cancelled, failed, expired; unknown: not in the database).",
            ["vote", "outcome"],
            registry=registry,
        )
        self.feedback_article_votes = Gauge(
            "concierge_feedback_article_votes",
            "Votes now on the answers that cited each article, by article URL and vote.",
            ["article", "vote"],
            registry=registry,
        )
        self._article_series: set[tuple[str, str]] = set()  # shown now
        self.show_votes(VoteTotals({}, {}))

    # --- what the worker calls -----------------------------------------------------------

    def record(self, event: BaseModel, space: str | None = None) -> None:
        """Account for one reply event of a request (of ``space``); tokens and progress are
        ignored, so any event may go through here. Call it once per event sent."""
        if self._spaces is not None and space is not None:
            self._spaces.record(space, event)
        match event:
            case Started():
                self.started += 1
                self.queue_wait.observe(event.waited_s)
            case Done():
                self._count("done")
                self.tokens.inc(event.tokens)
                self.answer_duration.observe(event.elapsed_s)
                if event.ttft_s is not None:  # None for a rescrape
                    self.ttft.observe(event.ttft_s)
                if event.tokens_per_s is not None:
                    self.tokens_per_s.observe(event.tokens_per_s)
            case Cancelled():
                self._count("cancelled")
                self.tokens.inc(event.tokens)
                if event.stop_latency_s is not None:  # None when stopped before it started
                    self.stop_latency.observe(event.stop_latency_s)
            case Failed():
                self._count("failed")
            case Expired():
                self._count("expired")

    def show_votes(self, totals: VoteTotals) -> None:
        """Show the feedback database's vote totals (read again after each vote): every vote
        and outcome, 0 when none; an article only while it has votes."""
        every = {(vote, outcome) for vote in VOTES for outcome in (*OUTCOMES, UNKNOWN)}
        for vote, outcome in every | totals.by_outcome.keys():
            self.feedback_votes.labels(vote, outcome).set(totals.by_outcome.get((vote, outcome), 0))
        # Set the new totals, then remove only the series that are gone: a scrape meanwhile
        # (on the metrics thread) never sees the articles missing.
        for (article, vote), count in totals.by_article.items():
            self.feedback_article_votes.labels(article, vote).set(count)
        for article, vote in self._article_series - totals.by_article.keys():
            self.feedback_article_votes.remove(article, vote)
        self._article_series = set(totals.by_article)

    def _count(self, outcome: str) -> None:
        self.requests.labels(outcome).inc()
        self.outcomes[outcome] += 1

    def watch(self, broker: Broker) -> None:
        """Read the queue depth and the connection state from ``broker`` at each scrape."""
        self._queue_depth = broker.request_queue_depth
        self._broker_connected = lambda: broker.connection.connected.is_set()

    def watch_jobs(self, answering: RunningNow, rescraping: RunningNow) -> None:
        """Read the answer being generated and the rescrape running at each ``/healthz``."""
        self._answering, self._rescraping = answering, rescraping

    def watch_spaces(self, report: SpacesReport) -> None:
        """Report each space in ``/healthz``, and ``default``'s knowledge base on its own."""
        self._spaces = report

    def watch_backend(self, report: BackendReport) -> None:
        """Ask the backend at each ``/healthz`` what it is and whether its server answers."""
        self._backend_report = report

    # --- what the server reads -----------------------------------------------------------

    def broker_connected(self) -> bool:
        try:
            return self._broker_connected()
        except Exception:  # not connected yet, or already closed
            return False

    async def refresh(self) -> None:
        """Update the gauges that are read, not recorded: called before each scrape."""
        connected = self.broker_connected()
        self.broker_up.set(connected)
        self.model_up.set(self.model_loaded)
        if self._queue_depth is None or not connected:
            return
        try:
            depth = await asyncio.wait_for(self._queue_depth(), QUEUE_DEPTH_TIMEOUT_S)
        except Exception as error:  # keep the last value; the scrape must still answer
            log.debug("queue depth not read: %s", error)
        else:
            self.queue_depth.set(depth)

    async def refresh_health(self) -> None:
        """Read what ``health`` reports from disk: called before each ``/healthz``."""
        if self._spaces is not None:
            self._spaces_now = await asyncio.to_thread(self._spaces.read)
        if self._backend_report is not None:
            try:
                report = self._backend_report()
                self._backend_now = await asyncio.wait_for(report, BACKEND_REPORT_TIMEOUT_S)
            except Exception as error:  # a model server that hangs is not answering
                log.debug("backend not reported: %s", type(error).__name__)
                self._backend_now = {**(self._backend_now or {}), "server_answering": False}

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def health(self) -> dict[str, Any]:
        """What ``/healthz`` answers; ``ok`` only when the engine can serve a request."""
        broker_connected = self.broker_connected()
        return {
            "ok": broker_connected and self.model_loaded and self._server_answering(),
            "engine": self.engine_name,
            "alive": True,  # this answer comes from the engine's own event loop
            "broker_connected": broker_connected,
            "model_loaded": self.model_loaded,
            "uptime_s": round(time.time() - self.started_at, 1),
            "started": self.started,
            "requests": dict(self.outcomes),
            "answering": running_report(self._answering()),
            "rescraping": running_report(self._rescraping()),
            "knowledge_base": self._spaces_now.get(DEFAULT_SPACE, {}).get("knowledge_base"),
            "spaces": self._spaces_now or None,
            "backend": self._backend_now,
        }

    def _server_answering(self) -> bool:
        """False only when the backend is a model server that did not answer the last check."""
        return (self._backend_now or {}).get("server_answering", True) is not False


class MetricsPortUnavailable(ConfigError):
    """The metrics address cannot be bound, most often because another engine holds the port:
    a setting to change, so ``concierge`` exits 78 with this one line."""

    def __init__(self, host: str, port: int, error: OSError) -> None:
        where = f"cannot serve metrics on {host}:{port}"
        if error.errno == errno.EADDRINUSE:
            super().__init__(
                f"{where}: the port is in use (another engine on this host?); set "
                "CONCIERGE_METRICS_PORT to a free port, or to 0 for no metrics server"
            )
        else:
            super().__init__(
                f"{where} ({error.strerror or type(error).__name__}); check "
                "CONCIERGE_METRICS_HOST and CONCIERGE_METRICS_PORT (0: no metrics server)"
            )


class MetricsServer:
    """``GET /metrics`` (Prometheus text format) and ``GET /healthz`` (JSON; 200 or 503).

    ``port=0`` picks a free port (tests); read the chosen one from ``port`` after ``start``.
    """

    def __init__(self, metrics: EngineMetrics, host: str = "127.0.0.1", port: int = 0) -> None:
        self.metrics = metrics
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> MetricsServer:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        try:
            await site.start()
        except OSError as error:
            await self.close()
            raise MetricsPortUnavailable(self.host, self.port, error) from None
        self.port = self._runner.addresses[0][1]  # the real port when 0 was asked
        log.info("metrics on http://%s:%d/metrics", self.host, self.port)
        return self

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> MetricsServer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _metrics(self, request: web.Request) -> web.Response:
        await self.metrics.refresh()
        response = web.Response(body=self.metrics.exposition())
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    async def _healthz(self, request: web.Request) -> web.Response:
        await self.metrics.refresh_health()
        health = self.metrics.health()
        return web.json_response(health, status=200 if health["ok"] else 503)


@asynccontextmanager
async def serve_metrics(
    metrics: EngineMetrics, host: str, port: int
) -> AsyncIterator[MetricsServer | None]:
    """The metrics server for the engine's settings; ``port`` 0 means off (yields None)."""
    if port == 0:
        yield None
        return
    async with MetricsServer(metrics, host, port) as server:
        yield server
