"""``concierge bench conversation``: a follow-up's time to first token, with and without
llama.cpp's state cache, while other people's questions run in between.

One visitor's eight questions (cli/benchmarks/town.py), each a follow-up of the last, are asked
through the pipeline twice, turn by turn, side by side: once with the state cache
(``engine/backends/configured.py``), once without it. Both are given the same history: the
questions and the model's answers of the way with the cache, as a bot sends them back (without
their sources), so the two prompts of a turn are the same. After each answer the visitor reads
it, and the engine, idle, reads the next turn's beginning ahead (``engine/jobs/next_turn.py``;
``--no-warm``: it does not). Before each of them, other visitors
ask questions of their own (``--interleave``): the model's context then holds someone else's
prompt, and only the cache can give the conversation back. Which of the two goes first
alternates from turn to turn, so drift on a busy machine hits both.

The site is a small town's, built into the run's knowledge base, so every turn retrieves
articles as in production. The engine's own ``ttft_s`` is the measure: from taking the request
to the first token, the search, the history's fitting and the prompt's processing included.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bots.ask import Ask
from broker.answer_text import without_sources
from broker.protocol import Done, HistoryTurn
from cli.benchmarks.rig import (
    BenchBackend,
    BenchError,
    Progress,
    Rig,
    Trace,
    document,
    running_rig,
    summarize,
)
from cli.benchmarks.town import ARTICLES, CONVERSATION, OTHER_QUESTIONS
from cli.benchmarks.validity import invalid_runs
from config.settings import ConfigError, Settings
from engine.answering.pipeline import AnswerPlanner
from engine.backends.llama import LlamaBackend
from engine.backends.state_cache import StateCache, entry_bytes
from engine.knowledge.scrape.builder import build_kb

CACHED = "cached"
UNCACHED = "uncached"
TARGET_RATIO = 1.15  # with the cache, turn 8's time to first token over the first's: issue 28
VISITOR = "bench-visitor"
# From two history turns before the last exchange on, a turn's saved state holds more than the
# system prompt every question shares, so the cache must serve it (turn 3 onwards).
SAVED_FROM_HISTORY = 4


@dataclass(frozen=True)
class ConversationConfig:
    turns: int = len(CONVERSATION)
    interleave: int = 2  # other visitors' questions before each measured turn
    repeat: int = 1  # the whole conversation, this many times (medians per turn)
    max_tokens: int = 64  # each measured answer's limit
    warm: bool = True  # the engine reads the next turn's beginning while idle (next_turn.py)


def state_cache_of(backend: BenchBackend) -> tuple[LlamaBackend, StateCache]:
    """The model in process and its state cache; the benchmark measures nothing without them."""
    inner = backend.inner
    if not isinstance(inner, LlamaBackend):
        raise ConfigError("bench conversation: needs the model in process (CONCIERGE_BACKEND)")
    if inner.state_cache is None:
        raise ConfigError("bench conversation: the model has no state cache")
    return inner, inner.state_cache


async def run_conversation(
    settings: Settings, backend: BenchBackend, config: ConversationConfig, progress: Progress
) -> dict[str, Any]:
    llama, cache = state_cache_of(backend)
    backend.warms = config.warm
    started = time.time()
    details = {
        **asdict(config),
        "target_ratio": TARGET_RATIO,
        "state_cache_bytes": cache.capacity_bytes,
    }
    doc = document("conversation", settings, details, started)
    turns: list[dict[str, Any]] = []
    # the bots' own cap on history turns would slide the window: this measures the engine
    async with running_rig(
        settings, backend, max_tokens=config.max_tokens, history_max_messages=50
    ) as rig:
        doc["broker_prefix"] = rig.settings.prefix  # deleted at the end
        build_town(rig.settings.kb_path)
        others = itertools.cycle(OTHER_QUESTIONS)
        for repeat in range(config.repeat):
            cache.cache_state.clear()  # else a repeat finds the last run's states, whole turns
            conversation = Conversation(rig, llama, others, config)
            for index, question in enumerate(CONVERSATION[: config.turns]):
                turn = await conversation.turn(index, question)
                turns.append({"repeat": repeat, **turn})
                progress(_describe(turns[-1]))
    doc["turns"] = turns
    doc["invalid_runs"] = invalid_runs(turns)
    doc["summary"] = None if doc["invalid_runs"] else summarize_turns(turns)
    doc["duration_s"] = time.time() - started
    return doc


class Conversation:
    """One run of the visitor's questions, each turn asked with the cache and without."""

    def __init__(
        self, rig: Rig, llama: LlamaBackend, others: Iterator[str], config: ConversationConfig
    ) -> None:
        self.rig, self.llama, self.others, self.config = rig, llama, others, config
        self.history: list[HistoryTurn] = []

    async def turn(self, index: int, question: str) -> dict[str, Any]:
        """Both ways, the first alternating; then the written answer joins the history."""
        order = (CACHED, UNCACHED) if index % 2 == 0 else (UNCACHED, CACHED)
        turn: dict[str, Any] = {"turn": index + 1, "question": question, "first": order[0]}
        for mode in order:
            await ask_others(self.rig, self.others, self.config.interleave)
            turn[mode] = await measure_turn(
                self.rig, self.llama, question, self.history, cached=mode == CACHED
            )
            assert self.rig.worker is not None  # the visitor reads the answer: the engine idles
            await self.rig.worker.settled()
        self.history += [
            HistoryTurn(role="user", text=question),
            HistoryTurn(role="assistant", text=without_sources(turn[CACHED].pop("text"))),
        ]
        turn[UNCACHED].pop("text")
        assert self.llama.state_cache is not None
        turn["cache"] = cache_figures(self.llama.state_cache)
        turn["missed"] = missed_precondition(turn)
        return turn


def build_town(path: Path) -> None:
    """The town's articles as the run's knowledge base (the engine reads it per question)."""
    build_kb(path, path, ARTICLES, [], datetime.now(UTC))


async def ask_others(rig: Rig, questions: Iterator[str], count: int) -> None:
    """Other visitors' questions, one after another, each answered by the model: its prompt
    takes the model's context (a question the site does not cover would not reach it)."""
    for number in range(count):
        question = next(questions)
        end = await Trace(
            await rig.client.ask(Ask(question, f"bench-other-{number}")), rig.client
        ).end()
        if not isinstance(end, Done) or end.tokens == 0:
            raise BenchError(f"{question!r} did not reach the model ({end.type})")


async def measure_turn(
    rig: Rig, llama: LlamaBackend, question: str, history: list[HistoryTurn], *, cached: bool
) -> dict[str, Any]:
    """One turn asked as a bot asks it; the cache is switched while the engine is idle, and
    the saved states llama.cpp loads for it are noted (a precondition of the measure)."""
    cache, llm = llama.state_cache, llama.llm
    loaded: list[list[int]] = []  # the tokens of each saved state loaded for the prompt
    load_state = llm.load_state

    def noting(state: Any) -> None:
        if not rig.backend.warming:  # the engine reading the next turn ahead, after the answer
            loaded.append(state.input_ids[: state.n_tokens].tolist())
        load_state(state)

    llm.set_cache(cache if cached else None)
    llm.load_state = noting  # type: ignore[method-assign]
    try:
        asked_at = time.monotonic()
        ask = Ask(question, VISITOR, history=tuple(history))
        trace = Trace(await rig.client.ask(ask), rig.client)
        end = await trace.end()
    finally:
        llm.load_state = load_state  # type: ignore[method-assign]
        llm.set_cache(cache)
    done = end if isinstance(end, Done) else None
    arrivals = trace.token_arrivals()
    return {
        "text": done.text if done is not None else "",  # becomes the history's turn
        "ttft_s": done.ttft_s if done is not None else None,
        "client_ttft_s": arrivals[0][0] - asked_at if arrivals else None,
        "tokens": done.tokens if done is not None else 0,
        "answered": done is not None and done.tokens > 0,
        **prompt_tokens(rig, llama, trace, loaded[-1] if loaded else []),
        "history_used": done.history_used if done is not None else None,
        "history_dropped": done.history_dropped if done is not None else None,
        "state_loaded_tokens": max(map(len, loaded), default=None),
    }


def missed_precondition(turn: dict[str, Any]) -> str | None:
    """Why a turn measures nothing, or None. Both ways must be answered, from the same prompt,
    with the whole conversation; with the cache, a turn whose saved state holds more than the
    system prompt (from the third on) must load it; without, none may be loaded."""
    cached, uncached = turn[CACHED], turn[UNCACHED]
    if not (cached["answered"] and uncached["answered"]):
        return "the model did not answer the turn both ways"
    same = ("prompt_tokens", "history_used")
    if any(cached[key] != uncached[key] for key in same):
        return "the turn's two prompts differ"
    if cached["history_dropped"] or uncached["history_dropped"]:
        return "the conversation was cut (history dropped)"
    if cached["history_used"] >= SAVED_FROM_HISTORY and cached["state_loaded_tokens"] is None:
        return "with the cache, no saved state was loaded"
    if uncached["state_loaded_tokens"] is not None:
        return "without the cache, a saved state was loaded"
    return None


def prompt_tokens(rig: Rig, llama: LlamaBackend, trace: Trace, loaded: list[int]) -> dict[str, int]:
    """The length of the prompt the engine built (the same request, the same knowledge base),
    and of its beginning that the saved state llama.cpp ``loaded`` for it held: the system
    prompt and the conversation before its last exchange (that exchange was asked with its own
    articles), or up to the last answer when the engine read it ahead while idle."""
    from llama_cpp import Llama

    request = trace.session.request
    if request is None:
        raise BenchError("the turn's request was not kept")
    plan = AnswerPlanner(rig.settings, llama.count_tokens).plan(request)
    tokens = llama.prompt_tokens(plan.messages)
    return {
        "prompt_tokens": len(tokens),
        "saved_prefix_tokens": int(Llama.longest_token_prefix(loaded, tokens)) if loaded else 0,
    }


def cache_figures(cache: StateCache) -> dict[str, Any]:
    """What the cache holds now, and what its newest state weighs per token."""
    newest = next(reversed(cache.cache_state.items()), None)
    per_token = entry_bytes(newest[1]) / len(newest[0]) if newest else None
    return {
        "entries": len(cache.cache_state),
        "bytes": cache.cache_size,
        "capacity_bytes": cache.capacity_bytes,
        "newest_entry_bytes": entry_bytes(newest[1]) if newest else None,
        "newest_entry_tokens": len(newest[0]) if newest else None,
        "bytes_per_token": per_token,
    }


def _describe(turn: dict[str, Any]) -> str:
    cached, uncached = turn[CACHED], turn[UNCACHED]
    if turn["missed"] is not None:
        return f"run {turn['repeat'] + 1}, turn {turn['turn']}: invalid: {turn['missed']}"
    return (
        f"run {turn['repeat'] + 1}, turn {turn['turn']}: {cached['prompt_tokens']} prompt "
        f"tokens, {cached['history_used']} history turns; first token with the cache "
        f"{cached['ttft_s']:.2f} s, without {uncached['ttft_s']:.2f} s"
    )


def summarize_turns(turns: list[dict[str, Any]]) -> dict[str, Any]:
    """Per turn, over the runs: the median time to first token each way and its ratio; the
    last turn over the first, each way; the cache's largest size."""
    by_turn: dict[int, list[dict[str, Any]]] = {}
    for turn in turns:
        by_turn.setdefault(turn["turn"], []).append(turn)
    rows = [_turn_row(number, runs) for number, runs in sorted(by_turn.items())]

    def last_over_first(mode: str) -> float | None:
        first, last = rows[0][mode]["median"], rows[-1][mode]["median"]
        return last / first if first and last is not None else None

    ratio = last_over_first(CACHED)
    return {
        "by_turn": rows,
        "last_over_first": {CACHED: ratio, UNCACHED: last_over_first(UNCACHED)},
        "meets_target": ratio is not None and ratio <= TARGET_RATIO,
        "cache_peak_bytes": max(turn["cache"]["bytes"] for turn in turns),
        "turns": len(rows),
        "runs": max(len(runs) for runs in by_turn.values()),
    }


def _turn_row(number: int, runs: list[dict[str, Any]]) -> dict[str, Any]:
    cached = summarize([run[CACHED]["ttft_s"] for run in runs])
    uncached = summarize([run[UNCACHED]["ttft_s"] for run in runs])
    ratio = (
        uncached["median"] / cached["median"] if cached["median"] and uncached["median"] else None
    )
    return {
        "turn": number,
        "history_used": runs[-1][CACHED]["history_used"],
        "prompt_tokens": summarize([run[CACHED]["prompt_tokens"] for run in runs])["median"],
        "saved_prefix_tokens": summarize([run[CACHED]["saved_prefix_tokens"] for run in runs])[
            "median"
        ],
        CACHED: cached,
        UNCACHED: uncached,
        "without_over_with": ratio,
    }
