"""Conversations on the engine side: the backend's saved states, their cache and the bench."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from llama_cpp import Llama
from rich.console import Console

from bots.ask import Ask
from bots.client import ConciergeClient
from broker.answer_text import without_sources
from broker.protocol import Done
from cli.benchmarks import report
from cli.benchmarks.conversation import CACHED, UNCACHED, ConversationConfig, run_conversation
from cli.benchmarks.rig import BenchBackend
from config.settings import load_settings
from engine.answering.history import model_words
from engine.answering.prompt import chat_messages
from engine.backends.base import Backend, ChatMessage, GenerationLimits
from engine.backends.configured import STATE_CACHE_MB, model_options
from engine.backends.llama import LlamaBackend
from engine.backends.state_cache import MIB, StateCache, entry_bytes, lean_load_state
from engine.jobs.next_turn import NextTurn, next_turn_prefix
from tests.conftest import RunningEngine
from tests.helpers import collect

GENERATION_PROMPT = b"<|im_start|>assistant\n"  # SmolLM2's template: count_tokens adds it

# --- llama.cpp's state cache --------------------------------------------------------------


def test_the_engines_backend_keeps_states_within_the_configured_bytes(backend: Backend) -> None:
    configured = STATE_CACHE_MB * MIB
    assert isinstance(backend, LlamaBackend) and configured > 0

    assert isinstance(backend.state_cache, StateCache)
    assert backend.llm.cache is backend.state_cache
    assert backend.state_cache.capacity_bytes == configured


@pytest.mark.model  # a model of its own, loaded in the test
def test_no_state_cache_when_its_size_is_zero() -> None:
    options = dataclasses.replace(model_options(load_settings()), state_cache_bytes=0)
    backend = LlamaBackend(options)

    assert backend.state_cache is None and backend.llm.cache is None


@pytest.fixture(scope="module")
def cached() -> Iterator[LlamaBackend]:
    """A model of its own with a small state cache: about three states of a short prompt.

    Without flash attention: its sums depend on how the prompt was split into batches, so an
    answer read on from a saved state may differ in a word from one read from the start (seen
    after this module's first test), and these tests compare the two word for word."""
    options = dataclasses.replace(
        model_options(load_settings()), state_cache_bytes=8 * MIB, flash_attention=False
    )
    yield LlamaBackend(options)


def answer(backend: LlamaBackend, messages: list[ChatMessage], max_tokens: int = 24) -> str:
    limits = GenerationLimits(max_tokens=max_tokens, temperature=0.0)
    return "".join(backend.stream(messages, lambda: False, limits))


def test_a_prompt_is_counted_in_the_tokens_the_model_reads(cached: LlamaBackend) -> None:
    messages = chat_messages(
        "Be brief.",
        "Which is larger?",
        articles="[1] Numbers (https://n.example)\nNine is larger than seven.",
        history=[ChatMessage("user", "Think of 7 and 9."), ChatMessage("assistant", "Done.")],
    )

    answer(cached, messages, max_tokens=1)  # the one token is sampled, not read back

    assert cached.llm.n_tokens == cached.count_tokens(messages)


def test_a_follow_up_after_another_question_is_answered_from_its_saved_state(
    cached: LlamaBackend,
) -> None:
    system = "You are a helpful assistant."
    first = chat_messages(system, "Name three animals that live on a farm.")
    reply = answer(cached, first)
    answer(cached, chat_messages(system, "Describe the colour of the sea at night."))
    follow_up = chat_messages(
        system,
        "Which of them gives milk?",
        history=[ChatMessage("user", first[-1].content), ChatMessage("assistant", reply)],
    )
    cache = cached.state_cache
    assert cache is not None
    loaded: list[int] = []
    load_state = cached.llm.load_state
    cached.llm.load_state = lambda state: (loaded.append(state.n_tokens), load_state(state))[1]

    try:
        from_cache = answer(cached, follow_up)
    finally:
        cached.llm.load_state = load_state  # type: ignore[method-assign]  # the engine's own

    assert len(loaded) == 1 and loaded[0] > cached.count_tokens(first)  # its prompt and answer
    cached.llm.set_cache(None)
    cached.reset()  # read from the start, as without the cache
    try:
        assert from_cache == answer(cached, follow_up)
    finally:
        cached.llm.set_cache(cache)
    assert all(state.scores.shape[0] == 1 for state in cache.cache_state.values())
    assert cache.cache_size == sum(entry_bytes(s) for s in cache.cache_state.values())
    assert cache.cache_size <= cache.capacity_bytes


def test_a_follow_up_prepared_ahead_reads_only_its_articles_and_question(
    cached: LlamaBackend,
) -> None:
    """``warm`` reads the next prompt's beginning (the turns, then the last question and
    answer) while idle; the follow-up then loads that state and reads only what is new, and
    answers as it would have from the start. An interrupted warm-up reads nothing."""
    system = "You are a helpful assistant."
    first = chat_messages(system, "Name three animals that live on a farm.", articles="[1] Farm")
    reply = answer(cached, first)
    prefix = next_turn_prefix(first[:-1], "Name three animals that live on a farm.", reply)
    assert cached.warm(prefix, lambda: True) == 0  # stopped before it began
    read = cached.warm(prefix, lambda: False)
    assert read > 0 and cached.warm(prefix, lambda: False) == 0  # held already: nothing to read
    assert cached.state_cache is not None
    warmed = next(reversed(cached.state_cache.cache_state))  # the state it saved, by its tokens
    answer(cached, chat_messages(system, "Describe the colour of the sea at night."))
    follow_up = chat_messages(
        system,
        "Which of them gives milk?",
        articles="[1] Farm animals (https://f.example)\nCows give milk.",
        history=prefix[1:],
    )
    loaded: list[tuple[int, ...]] = []
    load_state = cached.llm.load_state

    def noting(state: Any) -> None:
        loaded.append(tuple(state.input_ids[: state.n_tokens].tolist()))
        load_state(state)

    cached.llm.load_state = noting  # type: ignore[method-assign]
    try:
        from_cache = answer(cached, follow_up)
    finally:
        cached.llm.load_state = load_state  # type: ignore[method-assign]  # the engine's own

    suffix = cached.llm.tokenize(GENERATION_PROMPT, add_bos=False, special=True)
    assert len(warmed) == cached.count_tokens(prefix) - len(suffix)  # up to the last answer
    assert loaded == [warmed]  # the follow-up began from it: its last exchange was not re-read
    cache = cached.state_cache
    assert cache is not None
    cached.llm.set_cache(None)
    cached.reset()
    try:
        assert from_cache == answer(cached, follow_up)  # the same answer as read in full
    finally:
        cached.llm.set_cache(cache)


def test_the_oldest_states_go_once_the_capacity_is_reached(cached: LlamaBackend) -> None:
    cache = cached.state_cache
    assert cache is not None
    saved: list[tuple[int, ...]] = []  # each answer's state, oldest first
    produced = 0
    for n in range(40):
        answer(cached, chat_messages("Be brief.", f"One fact about the number {n}?"), 4)
        key, state = next(reversed(cache.cache_state.items()))
        saved.append(key)
        produced += entry_bytes(state)
        assert cache.cache_size <= cache.capacity_bytes
        if produced > cache.capacity_bytes:  # they cannot all be there any more
            break

    kept = list(cache.cache_state)
    assert produced > cache.capacity_bytes and saved[0] not in kept
    assert kept == saved[-len(kept) :]  # the newest states, in the order they were saved


def test_a_state_is_made_only_once_the_cache_has_room_for_it(cached: LlamaBackend) -> None:
    """The cache drops its oldest states before llama.cpp's state is copied out, not after
    the copy is added: the engine never holds the capacity plus one state."""
    cache = cached.state_cache
    assert cache is not None
    for n in range(6):  # a full cache
        answer(cached, chat_messages("Be brief.", f"A word about the colour {n}?"), 4)
    assert cache.cache_size + entry_bytes(next(iter(cache.cache_state.values()))) > (
        cache.capacity_bytes
    )
    held_when_made: list[int] = []
    make_room = cache.make_room

    def noting(state_bytes: int) -> None:
        make_room(state_bytes)
        held_when_made.append(cache.cache_size + state_bytes)

    cache.make_room = noting  # type: ignore[method-assign]
    try:
        answer(cached, chat_messages("Be brief.", "A word about the colour of snow?"), 4)
    finally:
        cache.make_room = make_room  # type: ignore[method-assign]

    assert len(held_when_made) == 1 and held_when_made[0] <= cache.capacity_bytes
    assert cache.cache_size <= cache.capacity_bytes


def test_loading_a_state_leaves_the_python_side_logits_untouched(cached: LlamaBackend) -> None:
    """The library's ``load_state`` writes the saved row into all 512 rows of its logits
    (100 MB, resident from the first follow-up on); the engine samples from llama.cpp's."""
    system = "You are a helpful assistant."
    first = chat_messages(system, "Name two birds.")
    reply = answer(cached, first)
    answer(cached, chat_messages(system, "Name a river."))  # the context holds another prompt
    follow_up = chat_messages(
        system,
        "Which of them swims?",
        history=[ChatMessage("user", first[-1].content), ChatMessage("assistant", reply)],
    )
    cached.llm.scores[:] = 7.0  # a mark the library's load would overwrite
    loads: list[int] = []
    load_state = cached.llm.load_state
    cached.llm.load_state = lambda state: (loads.append(state.n_tokens), load_state(state))[1]
    try:
        answer(cached, follow_up)
    finally:
        cached.llm.load_state = load_state  # type: ignore[method-assign]  # the engine's own

    assert loads and bool((cached.llm.scores == 7.0).all())


def test_a_state_the_library_saved_as_bytes_loads_as_it_was(cached: LlamaBackend) -> None:
    """``lean_load_state`` also takes the library's own states, whose data are ``bytes``."""
    answer(cached, chat_messages("Be brief.", "Name a mountain."))
    saved = Llama.save_state(cached.llm)  # the library's, not the engine's lean copy
    assert isinstance(saved.llama_state, bytes)
    answer(cached, chat_messages("Be brief.", "Name a city by the sea."))  # another context
    assert Llama.save_state(cached.llm).llama_state != saved.llama_state

    lean_load_state(cached.llm, saved)

    assert Llama.save_state(cached.llm).llama_state == saved.llama_state


# --- concierge bench conversation ---------------------------------------------------------


@pytest.mark.broker  # the bench rig connects on a prefix of its own
async def test_bench_conversation_measures_each_turn_both_ways(backend: Backend) -> None:
    assert isinstance(backend, LlamaBackend) and backend.state_cache is not None
    config = ConversationConfig(turns=3, interleave=1, max_tokens=4)

    doc = await run_conversation(load_settings(), BenchBackend(backend, cold=False), config, print)

    assert doc["benchmark"] == "conversation" and json.loads(json.dumps(doc)) == doc
    # turn 2 ("How much is a return ticket?") is a new question: the model reads no turn
    assert [row["history_used"] for row in doc["summary"]["by_turn"]] == [0, 0, 4]
    assert not any(turn["missed"] for turn in doc["turns"])  # turn 3 loaded a saved state
    for turn in doc["turns"]:
        assert turn[CACHED]["ttft_s"] > 0 and turn[UNCACHED]["ttft_s"] > 0
        assert turn[CACHED]["prompt_tokens"] > 0
        assert 0 < turn["cache"]["bytes"] <= turn["cache"]["capacity_bytes"]
    assert {turn["first"] for turn in doc["turns"]} == {CACHED, UNCACHED}
    assert backend.llm.cache is backend.state_cache  # switched back on after the uncached turn
    shown = io.StringIO()
    report.print_report(doc, Console(file=shown, width=160))
    assert "last turn / first, with the cache" in shown.getvalue()


# --- the next turn, read while the engine is idle -------------------------------------------


@pytest.mark.broker
async def test_once_idle_the_engine_reads_the_answer_as_the_next_turns_beginning(
    backend: Backend, engine: RunningEngine, client: ConciergeClient
) -> None:
    """After an answer, with no request waiting, the newest saved state is the conversation
    up to that answer as a turn, as the model reads the follow-up's: its own words, without
    the engine's note and sources."""
    assert isinstance(backend, LlamaBackend) and backend.state_cache is not None
    events = await collect(await client.ask(Ask("Name three animals of a farm.", "u1")))
    done = events[-1]
    assert isinstance(done, Done) and done.tokens > 0
    await asyncio.wait(set(engine.worker._taking), timeout=60)  # its handling, warm-up included

    newest = next(reversed(backend.state_cache.cache_state))
    read = backend.llm.detokenize(list(newest), special=True).decode()
    turn = "Name three animals of a farm.<|im_end|>\n<|im_start|>assistant\n"
    assert "Not from the site" in done.text  # the engine's note after a general answer
    assert read.endswith(f"{turn}{model_words(without_sources(done.text))}<|im_end|>\n")


@pytest.mark.model
def test_a_warm_up_stops_at_once_when_a_request_comes(cached: LlamaBackend) -> None:
    """``NextTurn.stop`` (a request arrived) interrupts the reading under way: nothing is
    saved, and the next answer is read from a clean context."""
    long_turn = " ".join(f"Fact {n}: the farm has {n} hens." for n in range(60))
    prefix = [
        ChatMessage("system", "Be brief."),
        ChatMessage("user", long_turn),
        ChatMessage("assistant", "Noted."),
    ]
    began = threading.Event()
    next_turn = NextTurn(cached, cached.interrupt)

    def should_stop() -> bool:
        began.set()
        return False

    with ThreadPoolExecutor(1) as pool:
        reading = pool.submit(cached.warm, prefix, should_stop)
        assert began.wait(30)
        next_turn._running = True  # as while NextTurn.warm awaits this thread
        next_turn.stop()
        assert reading.result(30) == 0
    assert answer(cached, chat_messages("Be brief.", "Say yes."), max_tokens=2)
