"""The OpenAI-compatible backend against a stand-in: busy slots, unknown models, the reader."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

import engine.backends.openai.backend as openai_backend
from engine.backends.base import GenerationStopped
from engine.backends.openai.backend import OpenAIBackend
from engine.backends.openai.options import OpenAIOptions
from engine.backends.openai.sse import CUT_SHORT, TRUNCATED, Ending, ModelServerError, read_pieces
from tests.openai_server_fixture import (
    QUESTION,
    ModelServer,
    Slots,
    StandIn,
    StopSwitch,
    limits,
    server,  # noqa: F401  # the fixture
)

IDLE: Slots = [{"id": 0, "is_processing": False}]
BUSY: Slots = [{"id": 0, "is_processing": True}]


@pytest.fixture
async def stand_in(server: ModelServer) -> AsyncIterator[tuple[StandIn, str]]:  # noqa: F811  # the fixture imported above
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
