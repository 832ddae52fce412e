"""Starting and stopping the engine: load the model, connect, purge once, serve until stopped."""

from __future__ import annotations

import asyncio
import logging

from broker.amqp import Broker
from config.settings import Settings
from engine.llm import Backend, ModelOptions, load_backend
from engine.metrics import EngineMetrics, serve_metrics
from engine.worker import Worker

log = logging.getLogger(__name__)


def model_options(settings: Settings) -> ModelOptions:
    return ModelOptions(
        path=settings.resolved_model_path(),
        context_size=settings.context_size,
        threads=settings.threads,
        seed=settings.seed,
    )


async def run_engine(
    settings: Settings,
    stop: asyncio.Event,
    *,
    backend: Backend | None = None,
    ready: asyncio.Future[Worker] | None = None,
) -> Worker:
    """Serve requests until ``stop`` is set; return the worker when done.

    The request queue is purged here, once, before consuming (unless ``purge_on_start`` is
    off): a reconnect later re-declares the topology but never purges.
    """
    metrics = EngineMetrics(settings.engine_name)
    if backend is None:
        backend = await asyncio.to_thread(load_backend, model_options(settings))
    metrics.model_loaded = True
    async with Broker(settings) as broker:
        metrics.watch(broker)
        worker = Worker(settings, broker, backend, metrics=metrics)
        if settings.purge_on_start:
            purged = await worker.purge_stale()
            log.info("purged %d stale request(s) at startup", purged)
        await worker.start()
        async with serve_metrics(metrics, settings.metrics_host, settings.metrics_port):
            log.info("engine %s ready", settings.engine_name)
            if ready is not None:
                ready.set_result(worker)
            await stop.wait()
            await worker.stop(settings.shutdown_grace_s)
    return worker
