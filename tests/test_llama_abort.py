"""A stop ends llama.cpp's computation under way, a token's as well as a prompt's
(engine/backends/llama.py, ``_AbortSwitch``): the real model, asked by nothing but
``should_stop``."""

from __future__ import annotations

import threading

import pytest

from engine.backends.base import Backend, ChatMessage, GenerationLimits, GenerationStopped
from engine.backends.llama import LlamaBackend

STORY = [ChatMessage("user", "Tell me a long story about a lighthouse keeper and his cat.")]
LONG_PROMPT = [ChatMessage("user", "Summarise this. " + "The tide came in. " * 400)]


@pytest.fixture
def llama(backend: Backend) -> LlamaBackend:
    assert isinstance(backend, LlamaBackend)
    backend.reset()
    return backend


def test_a_stop_during_generation_ends_the_token_under_way(llama: LlamaBackend) -> None:
    """The caller goes on reading and never checks ``should_stop`` itself: the backend alone
    must end the generation (it used to check only while the prompt was processed)."""
    stop = threading.Event()
    pieces_after_stop = 0
    with pytest.raises(GenerationStopped):
        for piece in llama.stream(STORY, stop.is_set, GenerationLimits(max_tokens=200)):
            if stop.is_set():
                pieces_after_stop += 1
            elif piece.strip():
                stop.set()
    assert pieces_after_stop <= 2  # at most a token decoded before the watcher looked


def test_a_stop_during_prompt_processing_ends_it_before_any_token(llama: LlamaBackend) -> None:
    stop = threading.Event()
    timer = threading.Timer(0.2, stop.set)  # well within the prompt's seconds of processing
    timer.start()
    pieces: list[str] = []
    with pytest.raises(GenerationStopped):
        pieces.extend(llama.stream(LONG_PROMPT, stop.is_set, GenerationLimits(max_tokens=8)))
    timer.cancel()
    assert pieces == []


def test_after_a_stop_the_next_answer_runs_whole(llama: LlamaBackend) -> None:
    with pytest.raises(GenerationStopped):
        for _ in llama.stream(STORY, lambda: True, GenerationLimits(max_tokens=50)):
            pass

    pieces = list(llama.stream(STORY, lambda: False, GenerationLimits(max_tokens=12)))

    assert len(pieces) >= 10  # the switch was let go: nothing left over stops this one
