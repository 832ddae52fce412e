"""A stop ends llama.cpp's computation under way, a token's as well as a prompt's
(engine/backends/llama.py, ``_AbortSwitch``): the real model, and the real engine, which
interrupts it the moment a cancel arrives (engine/jobs/answer.py)."""

from __future__ import annotations

import threading

import pytest

from bots.ask import Ask
from bots.client import ConciergeClient
from broker.protocol import Cancelled
from engine.backends.base import Backend, ChatMessage, GenerationLimits, GenerationStopped
from engine.backends.llama import LlamaBackend
from engine.cancelled import CancelledSessions
from tests.conftest import LONG_QUESTION, RunningEngine
from tests.helpers import collect, wait_for_tokens

STORY = [ChatMessage("user", "Tell me a long story about a lighthouse keeper and his cat.")]
LONG_PROMPT = [ChatMessage("user", "Summarise this. " + "The tide came in. " * 400)]


@pytest.fixture
def llama(backend: Backend) -> LlamaBackend:
    assert isinstance(backend, LlamaBackend)
    backend.reset()
    return backend


def test_an_interrupt_during_generation_ends_the_token_under_way(llama: LlamaBackend) -> None:
    """From another thread, while the model decodes; the reader goes on reading and never
    checks ``should_stop`` itself."""
    interrupted = threading.Event()
    pieces_after = 0
    with pytest.raises(GenerationStopped):
        for piece in llama.stream(STORY, lambda: False, GenerationLimits(max_tokens=200)):
            if interrupted.is_set():
                pieces_after += 1
            elif piece.strip():
                threading.Thread(target=lambda: (llama.interrupt(), interrupted.set())).start()
                interrupted.wait()
    assert pieces_after <= 1  # the decode under way, or the next one, is aborted


def test_an_interrupt_during_prompt_processing_ends_it_before_any_token(
    llama: LlamaBackend,
) -> None:
    timer = threading.Timer(0.2, llama.interrupt)  # well within the prompt's seconds
    timer.start()
    pieces: list[str] = []
    with pytest.raises(GenerationStopped):
        pieces.extend(llama.stream(LONG_PROMPT, lambda: False, GenerationLimits(max_tokens=8)))
    timer.cancel()
    assert pieces == []


def test_after_an_interrupt_the_next_answer_runs_whole(llama: LlamaBackend) -> None:
    llama.interrupt()  # meant for an answer that had just ended: not the next one's
    pieces = list(llama.stream(STORY, lambda: False, GenerationLimits(max_tokens=12)))

    assert len(pieces) >= 10


def test_a_cancel_calls_whoever_watches_its_session_and_no_one_else() -> None:
    cancelled = CancelledSessions(10, 60)
    heard: list[str] = []
    cancelled.watch("running", lambda: heard.append("running"))

    cancelled.add("queued")
    cancelled.add("running")
    cancelled.unwatch("running")
    cancelled.add("running")

    assert heard == ["running"]


async def test_the_engine_interrupts_the_model_when_a_cancel_arrives(
    long_engine: RunningEngine,
    client: ConciergeClient,
    backend: Backend,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cancel reaches the computation itself, not only the check between tokens: the
    engine interrupts the model the moment it arrives (the tests above show an interrupt ends
    the decode under way). Which of the two ends the answer is a race, so the answer's context
    is not asserted on."""
    assert isinstance(backend, LlamaBackend)
    interrupts: list[int] = []
    interrupt = backend.interrupt

    def noting() -> None:
        interrupts.append(backend.llm.n_tokens)
        interrupt()

    monkeypatch.setattr(backend, "interrupt", noting)
    session = await client.ask(Ask(LONG_QUESTION, "u1"))
    await wait_for_tokens(session, 5)
    assert interrupts == []
    await client.cancel(session, "u1")
    end = (await collect(session))[-1]

    assert isinstance(end, Cancelled)
    assert end.tokens_after_cancel == 0
    assert len(interrupts) == 1 and interrupts[0] > 0  # during the answer, its tokens held
