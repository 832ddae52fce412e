"""``concierge bench ... --backend openai``: the same benchmarks against a model server, and
what only a server has: a plain client to compare with, and the time it stays busy after a stop.

- ``stream``: the pipeline (engine with ``OpenAIBackend``, broker, reply consumer) against the
  same server read by a plain streaming client (httpx and a few lines of SSE), side by side.
- ``cancel``: after the pipeline runs, each phase's stop measured on the backend itself
  (``should_stop`` true until the stream has ended), then a one-token probe by the plain
  client: its time to first token, less the same probe's after an answer that ended, is how
  long the server went on with the stopped answer. Where the server has ``/slots``
  (llama.cpp), the time until a slot is free is read as well.
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from cli.benchmarks.rig import Progress, Rig, summarize
from config.settings import Settings
from engine.answering.prompt import chat_messages
from engine.backends.base import ChatMessage, GenerationLimits, GenerationStopped
from engine.backends.openai.backend import OpenAIBackend
from engine.jobs.answer import generation_limits

PROBE_QUESTION = "Say yes."
BASELINES = 2  # answers run to their end, each followed by the probe
DECODE_PIECES_BEFORE_STOP = 8
BETWEEN_PIECES_S = 0.005  # a decode stop lands between two pieces, as a cancel does
DIRECT_LABEL = "the server, plain streaming client"
SLOT_POLL_S = 0.02


@dataclass(frozen=True)
class PlainRun:
    began: float
    piece_times: list[float]
    text: str


def plain_stream(
    backend: OpenAIBackend, messages: Sequence[ChatMessage], limits: GenerationLimits
) -> PlainRun:
    """The answer read the plainest way: one blocking httpx stream, ``data:`` lines parsed as
    they come. Same request as the backend's, so the two paths differ only in the reading."""
    body = backend.request_body(messages, limits)
    key = backend.options.api_key
    headers = {"Authorization": f"Bearer {key.get_secret_value()}"} if key else {}
    times: list[float] = []
    pieces: list[str] = []
    began = time.monotonic()
    url = f"{backend.base_url}/chat/completions"
    with _plain_http().stream("POST", url, json=body, headers=headers) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            choices = json.loads(line[6:]).get("choices") or [{}]
            text = (choices[0].get("delta") or {}).get("content")
            if text:
                times.append(time.monotonic())
                pieces.append(text)
    return PlainRun(began, times, "".join(pieces))


@functools.cache
def _plain_http() -> httpx.Client:
    """One client for every plain run: a new one per run would add its set-up (an SSL
    context, a connection) to the plain path's time to first token."""
    return httpx.Client(timeout=None)


def server_of(rig: Rig) -> OpenAIBackend | None:
    inner = rig.backend.inner
    return inner if isinstance(inner, OpenAIBackend) else None


async def measure_plain(rig: Rig, question: str) -> dict[str, Any]:
    """``stream``'s other path for a server: the plain client, with the engine's messages."""
    backend = server_of(rig)
    assert backend is not None
    settings = rig.settings
    messages = chat_messages(settings.system_prompt, question)
    run = await asyncio.to_thread(plain_stream, backend, messages, generation_limits(settings))
    times = run.piece_times
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    return {
        "tokens": len(times),
        "ttft_s": times[0] - run.began if times else None,
        "tokens_per_s": (len(times) - 1) / span if span > 0 else None,
        "text": run.text,
        "times": list(times),
    }


def uncached(question: str) -> str:
    """``question`` under a mark of its own: a server's prefix cache (which a benchmark cannot
    clear) has never seen its first tokens, so the whole prompt is read again."""
    return f"Ledger {uuid.uuid4().hex[:8]}.\n{question}"


def server_token_counter(backend: OpenAIBackend) -> Callable[[str], int]:
    """How many tokens the server makes of a text (its tokenizer, or the estimate)."""
    framing = backend.count_tokens([ChatMessage("user", "")])  # a message's own tokens

    def count_tokens(text: str) -> int:
        return backend.count_tokens([ChatMessage("user", text)]) - framing

    return count_tokens


def measure_client_cpu(
    backend: OpenAIBackend, question: str, max_tokens: int, runs: int
) -> dict[str, Any]:
    """CPU time of this process per token: ``OpenAIBackend.stream`` against the plain client,
    alternating. Unlike tokens/s it hardly moves with the machine's load; on a shared host
    it is what reading the stream takes from the server."""
    messages = [ChatMessage("user", question)]
    limits = GenerationLimits(max_tokens, 0.0)
    per_token: dict[str, list[float | None]] = {"backend": [], "plain": []}
    for index in range(2 * runs):
        path = ("backend", "plain")[index % 2]
        began = time.process_time()
        if path == "plain":
            tokens = len(plain_stream(backend, messages, limits).piece_times)
        else:
            tokens = len(list(backend.stream(messages, lambda: False, limits)))
        per_token[path].append((time.process_time() - began) / tokens if tokens else None)
    return {path: summarize(values) for path, values in per_token.items()}


# --- the server after a stop ---------------------------------------------------------------


class _Switch:
    """``should_stop`` turned on from another thread, remembering when."""

    def __init__(self) -> None:
        self.on_at: float | None = None

    def on(self) -> None:
        if self.on_at is None:
            self.on_at = time.monotonic()

    def __call__(self) -> bool:
        return self.on_at is not None


def _answer_then_probe(
    backend: OpenAIBackend,
    system_prompt: str,
    question: str,
    phase: str,
    cancel_after_s: float,
    *,
    stop: bool,
) -> dict[str, Any]:
    """One answer through the backend, stopped in ``phase`` (``stop=False``: a short one run
    to its end, the baseline), then the probe. A decode stop comes between two pieces, from
    another thread, as a cancel does; a prefill stop ``cancel_after_s`` after the start."""
    messages = chat_messages(system_prompt, uncached(question))
    switch = _Switch()
    short = 1 if phase == "prefill" else DECODE_PIECES_BEFORE_STOP
    limits = GenerationLimits(max_tokens=400 if stop else short, temperature=0.0)
    if stop and phase == "prefill":
        threading.Timer(cancel_after_s, switch.on).start()
    pieces = 0
    try:
        for _ in backend.stream(messages, switch, limits):
            pieces += 1
            if stop and pieces == DECODE_PIECES_BEFORE_STOP:
                threading.Timer(BETWEEN_PIECES_S, switch.on).start()
    except GenerationStopped:
        pass
    ended = time.monotonic()
    return {
        "pieces_before_stop": pieces,
        "stop_s": ended - switch.on_at if switch.on_at is not None else None,
        "slot_free_after_s": _slot_free_after(backend, ended) if stop else None,
        "probe_ttft_s": _probe_ttft(backend),
    }


def _probe_ttft(backend: OpenAIBackend) -> float | None:
    run = plain_stream(backend, [ChatMessage("user", PROBE_QUESTION)], GenerationLimits(1, 0.0))
    return run.piece_times[0] - run.began if run.piece_times else None


def _slot_free_after(backend: OpenAIBackend, stopped_at: float) -> float | None:
    """Seconds from the stop until ``/slots`` shows a free slot; None without ``/slots``."""
    if not backend.has_slots:
        return None
    while backend.slot_is_free() is False:
        time.sleep(SLOT_POLL_S)
    return time.monotonic() - stopped_at


async def measure_after_stop(
    settings: Settings,
    backend: OpenAIBackend,
    prompts: dict[str, str],
    cancel_after_s: float,
    runs: int,
    progress: Progress,
) -> dict[str, Any]:
    """For each phase: the stop's delay on the backend, and how long the server went on: the
    probe's time to first token after a stop, less its time after an answer that ended."""
    result: dict[str, Any] = {"cancel_after_s": cancel_after_s}
    for phase, question in prompts.items():
        one = functools.partial(
            _answer_then_probe, backend, settings.system_prompt, question, phase, cancel_after_s
        )
        ended = [await asyncio.to_thread(one, stop=False) for _ in range(BASELINES)]
        baseline = summarize([run["probe_ttft_s"] for run in ended])
        measured = [await asyncio.to_thread(one, stop=True) for _ in range(runs)]
        for run in measured:
            probe, usual = run["probe_ttft_s"], baseline["median"]
            run["busy_after_stop_s"] = max(0.0, probe - usual) if probe and usual else None
            progress(
                f"{phase}: stop {run['stop_s'] or 0:.3f} s, server busy "
                f"{run['busy_after_stop_s'] or 0:.2f} s after it"
            )
        result[phase] = {
            "runs": measured,
            "probe_ttft_after_an_ended_answer_s": baseline,
            "stop_s": summarize([run["stop_s"] for run in measured]),
            "busy_after_stop_s": summarize([run["busy_after_stop_s"] for run in measured]),
            "slot_free_after_s": summarize([run["slot_free_after_s"] for run in measured]),
        }
    return result
