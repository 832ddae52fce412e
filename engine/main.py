"""Starting and stopping the engine: take the metrics port, clean up, load the model, connect,
tap the request queue's copies (what waits, by space), purge once, serve (and queue the
scheduled rescrapes) until stopped."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from broker.amqp import Broker
from config.settings import Settings
from config.spaces import load_spaces
from engine.backends.base import Backend
from engine.backends.configured import open_backend
from engine.knowledge.scrape.buildfile import remove_stale_builds
from engine.metrics import EngineMetrics, serve_metrics
from engine.queue_share import watch_queue
from engine.schedule import RescrapeSchedule
from engine.space_status import SpacesReport
from engine.worker import Worker

log = logging.getLogger(__name__)


async def run_engine(
    settings: Settings,
    stop: asyncio.Event,
    *,
    backend: Backend | None = None,
    ready: asyncio.Future[Worker] | None = None,
) -> Worker:
    """Serve requests until ``stop`` is set; return the worker when done.

    The metrics port is taken first: a second engine started on the same host by mistake
    stops there (``MetricsPortUnavailable``, one line) before it loads a model or touches the
    broker. The request queue is purged here, once, before consuming (unless
    ``purge_on_start`` is off or another engine consumes it): a reconnect later re-declares
    the topology but never purges. The copies of what is queued are tapped before the purge:
    the requests it keeps, published again, are then known by their space.
    """
    spaces = load_spaces(settings)  # a bad spaces file stops the start here, one line
    metrics = EngineMetrics(settings.engine_name)
    every = settings.rescrape_every
    schedule = RescrapeSchedule(settings, every, spaces) if every is not None else None
    report = SpacesReport(spaces, schedule)
    metrics.watch_spaces(report)
    async with serve_metrics(metrics, settings.metrics_host, settings.metrics_port):
        for name in spaces.names:  # it logs each file
            await asyncio.to_thread(remove_stale_builds, spaces.named(name).settings.kb_path)
        if backend is None:
            backend = await asyncio.to_thread(open_backend, settings)
        metrics.model_loaded = True
        metrics.watch_backend(backend.health)
        async with Broker(settings) as broker:
            metrics.watch(broker)
            worker = Worker(settings, broker, backend, metrics=metrics, spaces=spaces)
            report.watch_waiting(await watch_queue(broker, worker.cancelled, settings.engine_name))
            if settings.purge_on_start:
                await purge_once(worker)
            await worker.start()
            async with scheduling(schedule, worker):
                log.info("engine %s ready", settings.engine_name)
                if ready is not None:
                    ready.set_result(worker)
                await stop.wait()
            await worker.stop(settings.shutdown_grace_s)
    return worker


def scheduling(
    schedule: RescrapeSchedule | None, worker: Worker
) -> contextlib.AbstractAsyncContextManager[None]:
    """The scheduled rescrapes, queued while the block runs; the worker says which space's
    rescrape is running, if one is (then that space's turn is skipped, another's waits)."""
    if schedule is None:
        return contextlib.nullcontext()

    def rebuilding() -> str | None:
        running = worker.rescrapes.running
        return None if running is None else running.space

    return schedule.running(worker.broker, rebuilding)


async def purge_once(worker: Worker) -> None:
    """Drop the stale requests left from before this start, telling their askers, and keep
    the rest in order (``engine.purge``); unless another engine already takes requests: then
    they are its to answer, not stale (a second worker, or a second ``concierge up`` by
    mistake)."""
    consumers = (await worker.broker.request_queue_counts()).consumers
    if consumers:
        log.info(
            "request queue not purged at startup: another engine takes requests from it "
            "(%d consumer(s))",
            consumers,
        )
        return
    purged = await worker.purge_stale()
    log.info("purged %d stale request(s) at startup", purged.stale)
    if purged.kept or purged.set_aside:
        log.info(
            "kept %d waiting request(s) at startup, in order; set aside %d",
            purged.kept,
            purged.set_aside,
        )
