"""The OpenAI-compatible backend streams, stops and counts tokens against a real server."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

import engine.backends.openai.backend as openai_backend
from broker.protocol import FinishReason
from engine.backends.base import ChatMessage, GenerationLimits, GenerationStopped, Pieces
from engine.backends.openai.backend import OpenAIBackend
from engine.backends.openai.options import OpenAIOptions
from engine.backends.openai.server import estimate_tokens
from engine.backends.openai.sse import CUT_SHORT, ModelServerError
from tests.openai_server_fixture import (
    QUESTION,
    ModelServer,
    StopSwitch,
    connect,  # noqa: F401  # the fixture
    limits,
    own_server,  # noqa: F401  # the fixture
    server,  # noqa: F401  # the fixture
)

STOP_BOUND_S = 0.25  # a stop's delay, far above the 10 ms poll, for a loaded machine
LEDGER_LINE = "Entry {n}. The harbour master wrote down every ship that entered the bay."


@pytest.fixture(scope="session")
def shared(server: ModelServer) -> Iterator[OpenAIBackend]:  # noqa: F811  # the fixture imported above
    backend = OpenAIBackend.connect(OpenAIOptions(server.base_url, seed=7))
    yield backend
    backend.close()


def ledger(lines: int) -> list[ChatMessage]:
    """A long prompt: about fifteen tokens a line."""
    text = "\n".join(LEDGER_LINE.format(n=n) for n in range(lines))
    return [ChatMessage("user", text + "\nSummarise the ledger.")]


def stop_after(switch: StopSwitch, delay_s: float) -> threading.Timer:
    timer = threading.Timer(delay_s, switch.on)
    timer.start()
    return timer


# --- the answer ----------------------------------------------------------------------------


def test_an_answer_streams_in_pieces_and_is_what_the_server_gives(
    shared: OpenAIBackend,
    server: ModelServer,  # noqa: F811  # the fixture imported above
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
    shared: OpenAIBackend,
    server: ModelServer,  # noqa: F811  # the fixture imported above
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
    own_server: ModelServer,  # noqa: F811  # the fixture imported above
    connect: Callable[[OpenAIOptions], OpenAIBackend],  # noqa: F811  # the fixture imported above
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
    shared: OpenAIBackend,
    server: ModelServer,  # noqa: F811  # the fixture imported above
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
