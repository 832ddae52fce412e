"""What the console tests share: an engine with its ``/healthz``, a console on a free port, and
a reader of the console's event stream that waits for a condition on the state it shows."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
from pydantic import SecretStr

from cli.benchmarks.rig import BenchBackend
from cli.console import Console
from cli.console.demo import DemoConfig
from config.settings import Settings
from engine.backends.configured import model_options
from engine.backends.llama import LlamaBackend
from engine.metrics import MetricsServer
from tests.conftest import RunningEngine

TOKEN = "s3cret-console-token-for-tests"
State = dict[str, Any]


def console_settings(settings: Settings, health: MetricsServer, token: str | None) -> Settings:
    return settings.model_copy(
        update={
            "metrics_port": health.port,
            "web_token": SecretStr(token) if token else None,
        }
    )


async def fresh_backend(settings: Settings, config: DemoConfig) -> BenchBackend:
    """A demo pane's own model (never the engine's: two engines would share one context)."""
    inner = await asyncio.to_thread(LlamaBackend, model_options(settings))
    return BenchBackend(inner, filler_max_tokens=config.filler_tokens, cold=True)


@asynccontextmanager
async def running_console(
    settings: Settings,
    engine: RunningEngine,
    *,
    token: str | None = TOKEN,
    demo: DemoConfig | None = None,
) -> AsyncIterator[Console]:
    async with MetricsServer(engine.worker.metrics, "127.0.0.1", 0) as health:
        console = Console(
            console_settings(settings, health, token),
            port=0,
            demo=demo,
            backend_factory=fresh_backend,
        )
        async with console:
            yield console


class StateStream:
    """The console's event stream as a page reads it: the newest state, and a wait on it."""

    def __init__(self) -> None:
        self.state: State = {}
        self.documents = 0
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._http: aiohttp.ClientSession | None = None

    async def open(self, url: str, headers: dict[str, str] | None = None) -> StateStream:
        self._http = aiohttp.ClientSession()
        response = await self._http.get(f"{url}api/events", headers=headers)
        assert response.status == 200, response.status
        assert response.headers["Content-Type"] == "text/event-stream"
        self._task = asyncio.create_task(self._read(response))
        await self.until(lambda state: bool(state))
        return self

    async def _read(self, response: aiohttp.ClientResponse) -> None:
        async for line in response.content:
            if line.startswith(b"data: "):
                async with self._changed:
                    self.state = json.loads(line[6:])
                    self.documents += 1
                    self._changed.notify_all()

    async def until(self, condition: Callable[[State], bool], timeout_s: float = 60.0) -> State:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: condition(self.state)), timeout_s)
        return self.state

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._http is not None:
            await self._http.close()


def waiting(state: State) -> list[dict[str, Any]]:
    return list(state["queue"]["waiting"]) if state else []


def running(state: State) -> list[dict[str, Any]]:
    return list(state["queue"]["running"]) if state else []


def outcome_of(state: State, session_id: str) -> str | None:
    for row in state["queue"]["outcomes"] if state else []:
        if row["session_id"] == session_id:
            return str(row["outcome"])
    return None
