"""Shared fixtures: unique broker names per test, the real model loaded once, a running engine.

Everything runs against the real RabbitMQ (``CONCIERGE_BROKER_URL``, default the local one) and
the real llama.cpp with SmolLM2-135M-Instruct. A test is marked ``broker`` or ``model`` by the
fixtures it uses (``tests/marks_fixture.py``); the run deletes what it declares on the broker
and fails if anything of its own is left there (``tests/topology_fixture.py``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path

import pytest

from bots.client import ConciergeClient
from broker.amqp import Broker
from config.settings import Settings, load_settings
from engine.backends.base import Backend
from engine.backends.configured import load_backend, model_options
from engine.main import run_engine
from engine.worker import Worker
from tests.cluster_fixture import cluster  # noqa: F401  # one cluster for the run, its tests
from tests.linked_site_fixture import linked  # noqa: F401  # a site found by its links
from tests.marks_fixture import GUARD, mark_by_fixtures
from tests.processes import kill_leftovers
from tests.site_fixture import FakeSite, ForeignSite
from tests.site_fixture import start as start_site
from tests.topology_fixture import TOPOLOGY, fail_on_leftovers

LONG_QUESTION = "Write a very long, detailed story about a cat who travels around the world."


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """``broker`` and ``model`` by the fixtures used: ``-m "not broker and not model"`` runs
    the pure tests alone."""
    mark_by_fixtures(items)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    """The test whose marks a broker connection or a model load is checked against, from the
    setup of its first fixture (a module's model, say) to its teardown."""
    with GUARD.running(item):
        return (yield)


def pytest_sessionfinish(session: pytest.Session) -> None:
    fail_on_leftovers(session)


@pytest.fixture(scope="session", autouse=True)
def _watched() -> Iterator[None]:
    """Broker connections and model loads checked against the marks; broker names noted."""
    with GUARD.watching(), TOPOLOGY.watching():
        yield


@pytest.fixture(autouse=True)
def _held_to_its_marks() -> Iterator[None]:
    """Fails the test if it used RabbitMQ or the model unmarked, even where the code it ran
    caught the error raised then."""
    yield
    GUARD.fail_if_misused()


@pytest.fixture(autouse=True)
def _no_process_left() -> Iterator[None]:
    """A concierge process a failed test left running is killed (tests/processes.py)."""
    yield
    kill_leftovers()


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
async def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Settings]:
    """Settings whose broker names are unique to this test; everything declared under them
    (by the test, its engines, bots and processes) is deleted after it. A Discord or Slack
    bot built meanwhile edits every 50 ms, so streaming shows in a short answer."""
    monkeypatch.setattr("bots.discord.adapter.EDIT_INTERVAL_S", 0.05)
    monkeypatch.setattr("bots.slack.adapter.EDIT_INTERVAL_S", 0.05)
    unique = load_settings(
        prefix=f"test-{uuid.uuid4().hex[:12]}",
        max_tokens=48,
        temperature=0.0,
        request_ttl_s=60,
        kb_path=tmp_path / "empty-kb.sqlite3",
        feedback_path=tmp_path / "feedback.sqlite3",
        metrics_port=0,  # no metrics server unless a test starts one
    )
    TOPOLOGY.note(unique)
    yield unique
    await TOPOLOGY.delete(unique)


@pytest.fixture
async def broker(settings: Settings) -> AsyncIterator[Broker]:
    """A connection with the topology declared (``settings`` deletes it afterwards)."""
    async with Broker(settings) as connection:
        yield connection


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
    """An engine whose answers may run to 400 tokens: long enough to cancel one midway (not
    cut at their first paragraph, which a story ends after 50 to 100 tokens)."""
    whole = settings.model_copy(update={"max_tokens": 400, "answer_paragraphs": 0})
    running = await start_engine(whole, backend)
    yield running
    await running.stop()


@pytest.fixture
async def client(settings: Settings, broker: Broker) -> AsyncIterator[ConciergeClient]:
    async with ConciergeClient(settings, "test") as connected:
        yield connected
