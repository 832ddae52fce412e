"""The OpenAI-compatible backend in status, and the engine through a server that dies."""

from __future__ import annotations

import asyncio
import io
import logging
import re

import httpx
import pytest
from aiohttp import web
from rich.console import Console

import engine.backends.openai.backend as openai_backend
from bots.ask import Ask
from bots.client import ConciergeClient
from broker.amqp import Broker
from broker.protocol import Cancelled, Done, Failed, Started
from cli.status import health_table, status_command
from config.settings import Settings
from engine.backends.openai.backend import OpenAIBackend
from engine.backends.openai.options import OpenAIOptions
from engine.metrics import MetricsServer
from tests.conftest import start_engine
from tests.helpers import collect, wait_for_tokens
from tests.openai_server_fixture import (
    ModelServer,
    StandIn,
    own_server,  # noqa: F401  # the fixture
    server,  # noqa: F401  # the fixture
)


@pytest.mark.parametrize("answering", [True, False])
def test_status_shows_the_backend_and_whether_its_server_answers(answering: bool) -> None:
    backend = {"kind": "openai", "url": "http://gpu:8000/v1", "model": "qwen"}
    health = {"engine": "engine", "broker_connected": True, "model_loaded": True}
    health["backend"] = {**backend, "server_answering": answering}
    console = Console(record=True, width=200, file=io.StringIO())
    console.print(health_table(health, None))
    lines = console.export_text().splitlines()
    assert any("backend" in line and "openai: qwen at http://gpu:8000/v1" in line for line in lines)
    answers = next(line for line in lines if "model server answers" in line)
    said = re.search(r"model server answers\W+(yes|no)\b", answers)
    assert said is not None and said[1] == ("yes" if answering else "no")
    local = {**health, "backend": {"kind": "llama", "model": "SmolLM2.gguf"}}
    console.print(health_table(local, None))
    assert "llama: SmolLM2.gguf" in console.export_text()


# --- through the engine --------------------------------------------------------------------


async def test_the_engine_serves_on_through_a_server_that_dies_and_comes_back(
    own_server: ModelServer,  # noqa: F811  # the fixture imported above
    settings: Settings,
    broker: Broker,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Asked like a bot asks: an answer, a cancel, the server killed mid-answer (failed, with
    the reason), asked while it is down (failed), then back (answered); ``/healthz`` says
    whether the server answers all along."""
    monkeypatch.setattr(openai_backend, "UNREACHABLE_RETRY_S", 0.5)
    settings = settings.model_copy(
        update={"backend": "openai", "openai_base_url": own_server.base_url, "max_tokens": 300}
    )
    backend = await asyncio.to_thread(OpenAIBackend.connect, OpenAIOptions(own_server.base_url))
    engine = await start_engine(settings, backend)
    try:
        async with (
            ConciergeClient(settings, "test") as client,
            MetricsServer(engine.worker.metrics) as served,
            httpx.AsyncClient() as http,
        ):
            healthz = f"http://127.0.0.1:{served.port}/healthz"
            first = await collect(await client.ask(Ask("Say hello.", "u1")), 120)
            assert isinstance(first[0], Started) and isinstance(first[-1], Done)
            health = (await http.get(healthz)).json()
            assert health["ok"] is True and health["backend"]["server_answering"] is True
            assert health["backend"]["kind"] == "openai"
            assert health["backend"]["url"] == own_server.base_url

            session = await client.ask(Ask("Write a long story about a cat.", "u2"))
            await wait_for_tokens(session, 1, 120)
            await client.cancel(session, "u2")
            assert isinstance((await collect(session, 120))[-1], Cancelled)

            session = await client.ask(Ask("Write a long story about a dog.", "u3"))
            await wait_for_tokens(session, 1, 120)
            await asyncio.to_thread(own_server.kill)
            killed = (await collect(session, 120))[-1]
            assert isinstance(killed, Failed) and "mid-answer" in killed.reason

            down = (await collect(await client.ask(Ask("Say hello.", "u4")), 120))[-1]
            assert isinstance(down, Failed) and "cannot reach the model server" in down.reason
            response = await http.get(healthz)
            assert response.status_code == 503
            assert response.json()["backend"]["server_answering"] is False

            await asyncio.to_thread(own_server.start)  # the same port
            again = await collect(await client.ask(Ask("Say hello.", "u5")), 120)
            assert isinstance(again[-1], Done)
            assert (await http.get(healthz)).json()["ok"] is True
    finally:
        await engine.stop()
        await asyncio.to_thread(backend.close)


CLASS_NAME_RE = re.compile(r"\b[A-Z][a-z]+(?:[A-Z][a-z]+)*(?:Error|Exception|Timeout)\b")


async def test_with_the_model_server_down_status_says_the_engine_runs_and_what_is_unreachable(
    server: ModelServer,  # noqa: F811  # the fixture imported above
    settings: Settings,
    broker: Broker,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The engine answers ``/healthz`` with ``ok`` false: status says it runs, and that the
    model server (its URL without the credentials) does not answer; an answer asked meanwhile
    fails with one sentence, logged as one line without a traceback."""
    monkeypatch.setattr(openai_backend, "UNREACHABLE_RETRY_S", 0.5)
    monkeypatch.setenv("COLUMNS", "200")
    stand_in = StandIn(server.base_url)
    proxy = web.AppRunner(stand_in.app())
    await proxy.setup()
    site = web.TCPSite(proxy, "127.0.0.1", 0)
    await site.start()
    port = proxy.addresses[0][1]
    url = f"http://ops:s3cret@127.0.0.1:{port}/v1"
    settings = settings.model_copy(update={"backend": "openai", "openai_base_url": url})
    backend = await asyncio.to_thread(OpenAIBackend.connect, OpenAIOptions(url))
    engine = await start_engine(settings, backend)
    try:
        async with (
            ConciergeClient(settings, "test") as client,
            MetricsServer(engine.worker.metrics) as served,
        ):
            await proxy.cleanup()  # the model server is gone; the engine runs on
            code = await status_command(settings.model_copy(update={"metrics_port": served.port}))
            output = capsys.readouterr().out
            caplog.set_level(logging.INFO)
            down = (await collect(await client.ask(Ask("Say hello.", "u1")), 120))[-1]
    finally:
        await engine.stop()
        await asyncio.to_thread(backend.close)

    assert stand_in.authorizations == {"Basic b3BzOnMzY3JldA=="}  # ops:s3cret, not in the URL
    assert code == 1  # no engine can answer now
    assert "not seen" not in output
    assert "engine running, not answering" in output
    assert f"the model server at http://***@127.0.0.1:{port}/v1 does not answer" in output
    assert "s3cret" not in output
    assert isinstance(down, Failed)
    assert f"cannot reach the model server at http://***@127.0.0.1:{port}/v1" in down.reason
    assert CLASS_NAME_RE.search(down.reason) is None, down.reason
    assert "s3cret" not in down.reason
    failed = [r for r in caplog.records if r.name == "engine.jobs.answer" and "failed" in r.message]
    assert len(failed) == 1 and failed[0].exc_info is None and failed[0].levelno == logging.WARNING
    assert "cannot reach the model server" in failed[0].getMessage()
    assert "Traceback" not in caplog.text and "s3cret" not in caplog.text
