"""Shared fixtures: unique broker names per test, the real model loaded once, a running engine.

Everything runs against the real RabbitMQ (``CONCIERGE_BROKER_URL``, default the local one) and
the real llama.cpp with SmolLM2-135M-Instruct.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bots.client import ConciergeClient
from broker.amqp import Broker
from config.settings import Settings, load_settings
from engine.backends.base import Backend
from engine.backends.configured import load_backend, model_options
from engine.main import run_engine
from engine.worker import Worker
from tests.site_fixture import FakeSite, ForeignSite
from tests.site_fixture import start as start_site

LONG_QUESTION = "Write a very long, detailed story about a cat who travels around the world."


@pytest.fixture(scope="session")
def backend() -> Iterator[Backend]:
    """The real model, loaded once for the whole run (about a quarter of a second)."""
    yield load_backend(model_options(load_settings()))


@pytest.fixture
async def foreign() -> AsyncIterator[tuple[ForeignSite, str]]:
    """A host the site redirects to and that must never be fetched; it records any request."""
    site = ForeignSite()
    server = await start_site(site.app())
    yield site, f"http://localhost:{server.port}"
    await server.close()


@pytest.fixture
async def site(foreign: tuple[ForeignSite, str]) -> AsyncIterator[FakeSite]:
    """The team's site, served locally: sitemaps, a feed, articles in English and Japanese."""
    fake = FakeSite(foreign_base=foreign[1])
    server = await start_site(fake.app())
    fake.base = f"http://127.0.0.1:{server.port}"
    yield fake
    await server.close()


@pytest.fixture
def site_settings(settings: Settings, site: FakeSite, tmp_path: Path) -> Settings:
    """Broker settings plus a knowledge base (in ``tmp_path``) that reads the local site."""
    return settings.model_copy(
        update={
            "kb_path": tmp_path / "kb.sqlite3",
            "site_sitemap_url": f"{site.base}/sitemap_index.xml",
            "site_allowed_hosts": [site.netloc],
            "scrape_delay_s": 0.01,
            "scrape_timeout_s": 5.0,
        }
    )


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings whose broker names are unique to this test."""
    return load_settings(
        prefix=f"test-{uuid.uuid4().hex[:12]}",
        max_tokens=48,
        temperature=0.0,
        seed=7,
        edit_interval_s=0.05,
        request_ttl_s=60,
        reply_timeout_s=60,
        kb_path=tmp_path / "empty-kb.sqlite3",
        feedback_path=tmp_path / "feedback.sqlite3",
        metrics_port=0,  # no metrics server unless a test starts one
    )


@pytest.fixture
async def broker(settings: Settings) -> AsyncIterator[Broker]:
    """A connection with the topology declared; removes every queue of this test afterwards."""
    async with Broker(settings) as connection:
        yield connection
        await delete_test_topology(connection, settings)


async def delete_test_topology(broker: Broker, settings: Settings) -> None:
    """Every queue and exchange of ``settings.prefix`` (the engine's cancel queue too)."""
    cleanup = await broker.connection.channel()
    await cleanup.queue_delete(broker.names.cancel_queue(settings.engine_name))
    await cleanup.close()
    await broker.delete_all()


class RunningEngine:
    """An engine task in this event loop, with its worker for inspection."""

    def __init__(self, task: asyncio.Task[Worker], stop: asyncio.Event, worker: Worker) -> None:
        self.task = task
        self.stop_event = stop
        self.worker = worker

    async def stop(self) -> None:
        self.stop_event.set()
        await self.task


async def start_engine(settings: Settings, backend: Backend) -> RunningEngine:
    stop = asyncio.Event()
    ready: asyncio.Future[Worker] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(run_engine(settings, stop, backend=backend, ready=ready))
    done, _ = await asyncio.wait({task, ready}, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        task.result()
    return RunningEngine(task, stop, ready.result())


@pytest.fixture
async def engine(
    settings: Settings, backend: Backend, broker: Broker
) -> AsyncIterator[RunningEngine]:
    running = await start_engine(settings, backend)
    yield running
    await running.stop()


@pytest.fixture
async def long_engine(
    settings: Settings, backend: Backend, broker: Broker
) -> AsyncIterator[RunningEngine]:
    """An engine whose answers may run to 400 tokens: long enough to cancel one midway."""
    running = await start_engine(settings.model_copy(update={"max_tokens": 400}), backend)
    yield running
    await running.stop()


@pytest.fixture
async def client(settings: Settings, broker: Broker) -> AsyncIterator[ConciergeClient]:
    async with ConciergeClient(settings, "test") as connected:
        yield connected
