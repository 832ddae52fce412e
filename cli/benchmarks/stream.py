"""``concierge bench stream``: the pipeline's cost over llama.cpp alone, measured side by side.

Each prompt runs twice in a row, at temperature 0 and with a cold KV cache: once by calling
the backend's ``stream`` in this process, once through the engine, the broker and the reply
consumer. Which of the two goes first alternates, so drift on a noisy machine hits both.
With ``--backend openai`` the first path is the same server read by a plain streaming client
(``cli.benchmarks.openai``), and the server keeps its own cache.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass
from typing import Any

from broker.protocol import Done
from cli.benchmarks.openai import DIRECT_LABEL, measure_client_cpu, measure_plain, server_of
from cli.benchmarks.rig import (
    BenchBackend,
    BenchError,
    Progress,
    Rig,
    document,
    running_rig,
    summarize,
)
from cli.benchmarks.validity import invalid_runs
from config.settings import Settings
from engine.answering.prompt import chat_messages
from engine.backends.base import GenerationLimits
from engine.backends.openai.backend import OpenAIBackend

IN_PROCESS = "in_process"
PIPELINE = "pipeline"
TARGET_RATIO = 0.97  # the pipeline should keep at least this share of llama.cpp's tokens/s

PROMPTS = (
    "Explain how a lighthouse works, step by step, in detail.",
    "Write a long letter from a sailor to his sister about life at sea.",
    "Describe, in detail, how bread is baked in a small village bakery.",
)


@dataclass(frozen=True)
class StreamConfig:
    repeat: int = 3  # each prompt this many times, per path
    max_tokens: int = 128
    prompts: int = len(PROMPTS)


async def run_stream(
    settings: Settings, backend: BenchBackend, config: StreamConfig, progress: Progress
) -> dict[str, Any]:
    started = time.time()
    doc = document("stream", settings, {**asdict(config), "target_ratio": TARGET_RATIO}, started)
    if isinstance(backend.inner, OpenAIBackend):
        doc["config"]["direct"] = DIRECT_LABEL  # what "in_process" reads: the server, plainly
    pairs: list[dict[str, Any]] = []
    async with running_rig(settings, backend, max_tokens=config.max_tokens) as rig:
        doc["broker_prefix"] = rig.settings.prefix  # deleted at the end
        prompts = [PROMPTS[i % len(PROMPTS)] for i in range(config.prompts)]
        for index in range(config.repeat * len(prompts)):
            pair = await measure_pair(rig, prompts[index % len(prompts)], first=index % 2)
            pair["pair"] = index
            pairs.append(pair)
            progress(_describe(pair, doc["config"].get("direct", "in-process")))
    if isinstance(backend.inner, OpenAIBackend):
        doc["client_cpu_s_per_token"] = await asyncio.to_thread(
            measure_client_cpu, backend.inner, PROMPTS[0], config.max_tokens, config.repeat
        )
    doc["invalid_runs"] = invalid_runs(pairs)
    doc["summary"] = None if doc["invalid_runs"] else summarize_pairs(pairs)
    for pair in pairs:  # each token's latency went into the summary; keep a digest per pair
        pair[PIPELINE]["token_latency_s"] = summarize(pair[PIPELINE]["token_latency_s"])
    doc["runs"] = pairs
    doc["duration_s"] = time.time() - started
    return doc


def _describe(pair: dict[str, Any], direct: str) -> str:
    local, piped = pair[IN_PROCESS], pair[PIPELINE]
    if pair["missed"] is not None:
        return f"pair {pair['pair']}: invalid: {pair['missed']}"
    return (
        f"pair {pair['pair']}: {direct} {local['tokens_per_s']:.1f} tok/s, "
        f"pipeline {piped['tokens_per_s']:.1f} tok/s, ratio {pair['ratio']:.3f}"
    )


async def measure_pair(rig: Rig, question: str, *, first: int) -> dict[str, Any]:
    """The same prompt in process and through the pipeline; ``first`` picks which goes first."""
    results: dict[str, dict[str, Any]] = {}
    for path in (IN_PROCESS, PIPELINE) if first == 0 else (PIPELINE, IN_PROCESS):
        if path == IN_PROCESS:
            results[path] = await measure_in_process(rig, question)
        else:
            results[path] = await measure_pipeline(rig, question)
    local, piped = results[IN_PROCESS], results[PIPELINE]
    compared = on_shared_tokens(local, piped)
    ratio = (
        piped["tokens_per_s"] / local["tokens_per_s"]
        if piped["tokens_per_s"] and local["tokens_per_s"]
        else None
    )
    return {
        "question": question,
        "first": IN_PROCESS if first == 0 else PIPELINE,
        "ratio": ratio,
        "same_text": local.pop("text") == piped.pop("text"),
        "compared_tokens": compared,
        IN_PROCESS: local,
        PIPELINE: piped,
        "missed": missed_precondition(local, piped),
    }


def on_shared_tokens(local: dict[str, Any], piped: dict[str, Any]) -> int:
    """Both sides' rates over the tokens both wrote (their ``times``, taken out here): a
    longer answer decodes its last tokens over a longer context, so only the same stretch
    compares. Greedy answers can part ways (one side's repetition stop, a tie between two
    tokens), and such a pair still measures the same work up to where they part."""
    local_times, piped_times = local.pop("times"), piped.pop("times")
    shared = min(len(local_times), len(piped_times))
    local["tokens_per_s"] = _rate(local_times[:shared])
    piped["tokens_per_s"] = _rate(piped_times[:shared])
    return shared


def missed_precondition(local: dict[str, Any], piped: dict[str, Any]) -> str | None:
    """Why a pair compares nothing, or None: each side needs a rate over the tokens both
    wrote, so at least two of them (a rate runs from the first token to the last)."""
    if local["tokens_per_s"] is None or piped["tokens_per_s"] is None:
        return "fewer than two tokens on both sides: no rate"
    return None


def _rate(times: list[float]) -> float | None:
    """Tokens per second after the first, as the engine's Done event computes it."""
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    return (len(times) - 1) / span if span > 0 else None


async def measure_in_process(rig: Rig, question: str) -> dict[str, Any]:
    """``stream`` called directly in a thread, with the messages the engine builds (its
    knowledge base is empty: no articles). For a model server: a plain streaming client."""
    if server_of(rig) is not None:
        return await measure_plain(rig, question)
    settings, backend = rig.settings, rig.backend
    messages = chat_messages(settings.system_prompt, question)
    limits = GenerationLimits(settings.max_tokens, settings.temperature)

    def generate() -> tuple[float, list[str]]:
        began = time.monotonic()
        return began, list(backend.stream(messages, lambda: False, limits))

    began, pieces = await asyncio.to_thread(generate)
    times = backend.piece_times[-1]
    return {
        "tokens": len(pieces),
        "ttft_s": times[0] - began if times else None,
        "tokens_per_s": _rate(times),
        "text": "".join(pieces),
        "times": times,
    }


async def measure_pipeline(rig: Rig, question: str) -> dict[str, Any]:
    """Asked like a bot asks; timed by when the tokens reach the client."""
    began = time.monotonic()
    trace = await rig.ask(question, "bench-stream")
    end = await trace.end()
    if not isinstance(end, Done):
        raise BenchError(f"the pipeline answer ended with {end.type}, not done")
    # the engine appends a note after the model's tokens (the empty knowledge base): skip it
    arrivals = trace.token_arrivals()[: end.tokens]
    arrived = [at for at, _ in arrivals]
    emitted, model_began = rig.backend.piece_times[-1], rig.backend.stream_began[-1]
    if len(emitted) != len(arrived):
        raise BenchError(f"{len(emitted)} tokens generated but {len(arrived)} arrived")
    ttft_s = arrived[0] - began if arrived else None
    return {
        "tokens": len(arrived),
        "ttft_s": ttft_s,
        # the same run's first token less its own model's: what the client, the broker and
        # the engine add, free of the prompt's reading time, which varies from run to run
        "ttft_outside_model_s": ttft_s - (emitted[0] - model_began) if ttft_s else None,
        "tokens_per_s": _rate(arrived),
        "times": arrived,
        "engine_ttft_s": end.ttft_s,
        "engine_tokens_per_s": end.tokens_per_s,
        "token_latency_s": [a - e for a, e in zip(arrived, emitted, strict=True)],
        "text": "".join({id(event): event.text for _, event in arrivals}.values()),
    }


def summarize_pairs(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    latencies = [lat for pair in pairs for lat in pair[PIPELINE]["token_latency_s"]]
    ratios = summarize([pair["ratio"] for pair in pairs])
    added_ttft = [
        pair[PIPELINE]["ttft_s"] - pair[IN_PROCESS]["ttft_s"]
        for pair in pairs
        if pair[PIPELINE]["ttft_s"] is not None and pair[IN_PROCESS]["ttft_s"] is not None
    ]
    return {
        IN_PROCESS: _path_summary(pairs, IN_PROCESS),
        PIPELINE: _path_summary(pairs, PIPELINE),
        "engine_tokens_per_s": summarize([pair[PIPELINE]["engine_tokens_per_s"] for pair in pairs]),
        "ratio": ratios,
        "meets_target": ratios["median"] is not None and ratios["median"] >= TARGET_RATIO,
        "added_ttft_s": summarize(list(added_ttft)),
        "ttft_outside_model_s": summarize(
            [pair[PIPELINE]["ttft_outside_model_s"] for pair in pairs]
        ),
        "token_latency_s": summarize(list(latencies)),
        "same_text": sum(pair["same_text"] for pair in pairs),
        "pairs": len(pairs),
    }


def _path_summary(pairs: list[dict[str, Any]], path: str) -> dict[str, Any]:
    return {
        "tokens_per_s": summarize([pair[path]["tokens_per_s"] for pair in pairs]),
        "ttft_s": summarize([pair[path]["ttft_s"] for pair in pairs]),
        "tokens": summarize([pair[path]["tokens"] for pair in pairs]),
    }
