"""Starting an engine: the startup purge leaves another engine's requests alone, a metrics port
in use is one line (exit 78) before anything is touched, and a killed rescrape's build files
are cleaned up. Two real engines on the real broker; none of these closes a connection."""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest

from bots.ask import Ask
from bots.client import ConciergeClient
from broker.amqp import Broker
from broker.protocol import Cancelled, Done, Failed
from config.settings import Settings, load_settings
from engine.backends.base import Backend
from engine.backends.configured import load_backend, model_options
from tests.conftest import LONG_QUESTION, RunningEngine, delete_test_topology, start_engine
from tests.helpers import collect, wait_for_tokens
from tests.processes import ROOT, process_env

NOT_PURGED = "request queue not purged at startup: another engine takes requests from it"


@pytest.fixture(scope="module")
def second_backend() -> Iterator[Backend]:
    """The second engine's own model (a llama.cpp model serves one thread at a time)."""
    yield load_backend(model_options(load_settings()))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def main_log(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "engine.main"]


@pytest.fixture
async def second_engine_stopped(
    settings: Settings, broker: Broker
) -> AsyncIterator[list[RunningEngine]]:
    """Engines a test starts beside the fixture's, stopped (and their cancel queue removed)."""
    started: list[RunningEngine] = []
    yield started
    for running in started:
        await running.stop()
    cleanup = await broker.connection.channel()
    await cleanup.queue_delete(broker.names.cancel_queue("w2"))
    await cleanup.close()


async def test_a_second_engine_leaves_the_waiting_requests_to_the_first(
    settings: Settings,
    long_engine: RunningEngine,
    second_backend: Backend,
    client: ConciergeClient,
    broker: Broker,
    second_engine_stopped: list[RunningEngine],
    caplog: pytest.LogCaptureFixture,
) -> None:
    running = await client.ask(Ask(LONG_QUESTION, "u1"))
    await wait_for_tokens(running, 2)
    waiting = await client.ask(Ask("Say hello.", "u2"))
    assert await broker.request_queue_depth() == 1  # the first engine is busy: it waits
    caplog.set_level(logging.INFO, logger="engine.main")

    second = settings.model_copy(update={"engine_name": "w2", "max_tokens": 12})
    assert second.purge_on_start  # as a second `concierge up` would start
    second_engine_stopped.append(await start_engine(second, second_backend))

    ended = (await collect(waiting))[-1]
    assert isinstance(ended, Done), ended  # answered (by the second engine), never "restarted"
    assert [line for line in main_log(caplog) if "purged" in line] == [
        f"{NOT_PURGED} (1 consumer(s))"
    ]
    await client.cancel(running, "u1")
    assert isinstance((await collect(running))[-1], Cancelled)


async def test_an_engine_alone_still_purges_what_waited_for_it(
    settings: Settings,
    backend: Backend,
    client: ConciergeClient,
    broker: Broker,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("engine.purge.STALE_AFTER_S", 0.0)  # any question asked before is stale
    stale = await client.ask(Ask("stale question", "u0"))
    caplog.set_level(logging.INFO, logger="engine.main")

    engine = await start_engine(settings, backend)
    told = await collect(stale)
    await engine.stop()

    assert len(told) == 1 and isinstance(told[0], Failed)
    assert "restarted" in told[0].reason
    assert [line for line in main_log(caplog) if "purged" in line] == [
        "purged 1 stale request(s) at startup"
    ]


async def healthz_status(port: int) -> int:
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{port}/healthz") as response,
    ):
        return response.status


async def test_a_second_engine_on_a_taken_metrics_port_exits_78_in_one_line_touching_nothing(
    settings: Settings, backend: Backend, broker: Broker
) -> None:
    """The second engine has requests of its own waiting (another prefix, no engine on it):
    had it purged before taking the port, they would be gone."""
    port = free_port()
    first = await start_engine(settings.model_copy(update={"metrics_port": port}), backend)
    other = settings.model_copy(update={"prefix": f"{settings.prefix}-b"})
    async with Broker(other) as other_broker:
        try:
            async with ConciergeClient(other, "test") as client:
                await client.ask(Ask("waiting for the second engine", "u1"))
                second = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "cli.main", "engine",
                    env=process_env(other, CONCIERGE_METRICS_PORT=str(port)), cwd=ROOT,
                    stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.PIPE,
                )  # fmt: skip
                _, stderr = await asyncio.wait_for(second.communicate(), 60)
                assert await other_broker.request_queue_depth() == 1  # not purged
                assert await healthz_status(port) == 200  # the first engine's, unharmed
        finally:
            await first.stop()
            await delete_test_topology(other_broker, other)

    assert second.returncode == 78
    assert stderr.decode().splitlines() == [
        f"concierge: cannot serve metrics on 127.0.0.1:{port}: the port is in use (another "
        "engine on this host?); set CONCIERGE_METRICS_PORT to a free port, or to 0 for no "
        "metrics server"
    ]


async def test_build_files_a_killed_rescrape_left_are_removed_at_start(
    settings: Settings, backend: Backend, broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    kb_path: Path = settings.kb_path
    stale = kb_path.parent / f".{kb_path.name}.k1ll3d.new"
    stale.write_bytes(b"half a database")
    unrelated = kb_path.parent / "notes.new"
    unrelated.write_bytes(b"not ours")
    caplog.set_level(logging.INFO, logger="engine.knowledge")

    engine = await start_engine(settings, backend)
    await engine.stop()

    assert not stale.exists()
    assert unrelated.exists()
    assert f"removed {stale}, left by a rescrape that did not finish" in caplog.messages


async def test_a_request_whose_asker_left_before_the_engine_took_it_is_not_answered(
    settings: Settings, backend: Backend, broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    """A terminal user who asked while no engine ran and then left (Ctrl+C, its reply queue
    deleted) must not make the engine generate an answer for nobody once it starts."""
    quiet = settings.model_copy(update={"purge_on_start": False})
    async with ConciergeClient(quiet, "test") as leaving:
        await leaving.ask(Ask("Who left before the engine came?", asker="u1"))
    caplog.set_level(logging.INFO, logger="engine.worker")
    async with ConciergeClient(quiet, "test") as staying:
        session = await staying.ask(Ask("What is two plus two?", asker="u2"))
        engine = await start_engine(quiet, backend)
        try:
            events = await collect(session)
        finally:
            await engine.stop()
    assert isinstance(events[-1], Done)
    gone = [r for r in caplog.records if "the asker is gone" in r.getMessage()]
    assert len(gone) == 1
    started = [r for r in caplog.records if r.getMessage().startswith("started")]
    assert len(started) == 1  # only the asker who stayed
