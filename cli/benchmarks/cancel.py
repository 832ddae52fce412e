"""``concierge bench cancel``: how long a stop takes, on the cancel queue and in the request queue.

One run: a long answer starts; ``depth`` filler requests are queued behind it; the running
answer is cancelled, either on the cancel queue (mode ``cancel_queue``, the design) or inside
the request queue (mode ``fifo``, the trap: the engine reaches that cancel only after the answer
and every request queued before it). The two modes alternate, run by run.

``phase="prefill"`` sends the cancel while the engine still reads a long prompt; the prompt's
full processing time is measured first, without a cancel, for comparison.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from broker.amqp import Broker
from broker.protocol import REQUEST_ROUTING_KEY, Cancel, Cancelled, Done
from cli.benchmarks.openai import (
    measure_after_stop,
    server_of,
    server_token_counter,
    uncached,
)
from cli.benchmarks.rig import (
    FILLER_MARK,
    BenchBackend,
    BenchError,
    Progress,
    Rig,
    Trace,
    document,
    running_rig,
    summarize,
)
from cli.benchmarks.validity import invalid_runs
from config.settings import Settings

FIFO = "fifo"  # mode A: the cancel is published into the request queue
CANCEL_QUEUE = "cancel_queue"  # mode B: the cancel goes on its own exchange and queue
MODES = (FIFO, CANCEL_QUEUE)

STORY_PROMPT = (
    "Write a very long, detailed story about a cat who travels around the world, "
    "with many chapters."
)
LEDGER_SENTENCES = (
    "The harbour master wrote down every ship that entered the bay before sunrise.",
    "Each cargo of salt, timber and copper was weighed twice and recorded in the ledger.",
    "Storms from the west closed the port for three days in the second week of autumn.",
    "The lighthouse keeper reported a broken lamp, which the carpenters mended by noon.",
    "Fishing boats returned late, their nets heavy with herring and a few silver eels.",
    "A merchant from the southern islands asked for a berth near the customs house.",
)
PREFILL_QUESTION = "Summarise the harbour ledger above in three sentences."
SEEN_TIMEOUT_S = 120.0
# The latest results, kept beside the knowledge base: the directory an operator already gave
# Concierge's data (``/data`` in compose.yaml), where the web console's chart looks for them.
RESULTS_NAME = "bench-cancel.json"


@dataclass(frozen=True)
class CancelConfig:
    phase: Literal["decode", "prefill"] = "decode"
    depths: tuple[int, ...] = (0, 1, 5, 10, 50)
    repeat: int = 3
    max_tokens: int = 160  # the running answer's limit (the engine's max_tokens)
    tokens_before_cancel: int = 8  # decode: cancel once this many tokens arrived
    filler_max_tokens: int = 8  # each queued request behind it answers this much, at most
    prompt_tokens: int = 1800  # prefill: the long prompt's size
    cancel_after_s: float | None = None  # prefill: after Started; default a quarter of prefill
    baseline_runs: int = 1  # prefill: full processing measured this many times, no cancel
    context_size: int = 4096


def results_path(settings: Settings, phase: str = "decode") -> Path:
    """Where ``concierge bench cancel`` saves its latest document, and the console reads it.

    A prefill run has a file of its own: the console's chart and demo cancel while decoding,
    so a prefill run must not replace the figures they are compared with.
    """
    name = RESULTS_NAME if phase == "decode" else f"bench-cancel-{phase}.json"
    return (settings.kb_path.parent / name).absolute()


async def run_cancel(
    settings: Settings, backend: BenchBackend, config: CancelConfig, progress: Progress
) -> dict[str, Any]:
    started = time.time()
    overrides: dict[str, Any] = {"max_tokens": config.max_tokens}
    if config.phase == "prefill":
        overrides["context_size"] = max(settings.context_size, config.context_size)
    config_doc = {**asdict(config), "depths": list(config.depths), "modes": list(MODES)}
    doc = document("cancel", settings, config_doc, started)
    async with running_rig(settings, backend, **overrides) as rig:
        doc["broker_prefix"] = rig.settings.prefix  # deleted at the end
        question, prefill = await _question_and_baseline(rig, config, doc, progress)
        runs = await _all_runs(rig, config, question, prefill, progress)
        if (server := server_of(rig)) is not None:
            cancel_after_s = (prefill or {}).get("cancel_after_s") or 0.0
            doc["server_after_stop"] = await measure_after_stop(
                rig.settings,
                server,
                {config.phase: question},
                cancel_after_s,
                config.repeat,
                progress,
            )
    doc["runs"] = runs
    doc["invalid_runs"] = invalid_runs(runs)
    doc["summary"] = [] if doc["invalid_runs"] else summarize_runs(runs, config.depths)
    doc["duration_s"] = time.time() - started
    return doc


async def _question_and_baseline(
    rig: Rig, config: CancelConfig, doc: dict[str, Any], progress: Progress
) -> tuple[str, dict[str, Any] | None]:
    if config.phase == "decode":
        return STORY_PROMPT, None
    server = server_of(rig)
    if server is None:
        count_tokens = token_counter(rig.settings.resolved_model_path())
    else:
        count_tokens = server_token_counter(server)
    question = long_prompt(count_tokens, config.prompt_tokens)
    prompt_tokens = count_tokens(question)
    progress(f"prefill baseline: {prompt_tokens} prompt tokens, no cancel")
    baseline = await measure_prefill(rig, question, config.baseline_runs)
    baseline["prompt_tokens"] = prompt_tokens
    doc["prefill_baseline"] = baseline
    return question, baseline


def token_counter(model_path: Path) -> Callable[[str], int]:
    """How many tokens the model makes of a text, from its vocabulary alone (no weights, no
    context worth the name: the engine's model is left alone)."""
    from llama_cpp import Llama

    vocabulary = Llama(model_path=str(model_path), vocab_only=True, verbose=False)

    def count_tokens(text: str) -> int:
        return len(vocabulary.tokenize(text.encode(), add_bos=False, special=False))

    return count_tokens


def long_prompt(count_tokens: Callable[[str], int], target_tokens: int) -> str:
    """A ledger of plain sentences, grown until it holds about ``target_tokens`` tokens."""
    lines: list[str] = []
    tokens = count_tokens(PREFILL_QUESTION)
    while tokens < target_tokens:
        line = f"Entry {len(lines) + 1}. {LEDGER_SENTENCES[len(lines) % len(LEDGER_SENTENCES)]}"
        lines.append(line)
        tokens += count_tokens(line + "\n")
    return "\n".join(lines) + "\n\n" + PREFILL_QUESTION


async def measure_prefill(rig: Rig, question: str, runs: int) -> dict[str, Any]:
    """The prompt's full processing time, measured by the engine (its time to first token)."""
    engine_ttft: list[float | None] = []
    client_ttft: list[float | None] = []
    for _ in range(runs):
        trace = await rig.ask(uncached(question), "bench-baseline")
        end = await trace.end()
        if not isinstance(end, Done):
            raise BenchError(f"the prefill baseline ended with {end.type}, not done")
        engine_ttft.append(end.ttft_s)
        arrivals = trace.token_arrivals()
        if trace.started_at is not None and arrivals:
            client_ttft.append(arrivals[0][0] - trace.started_at)
    return {
        "full_prefill_s": summarize(engine_ttft),
        "started_to_first_token_s": summarize(client_ttft),
    }


async def _all_runs(
    rig: Rig,
    config: CancelConfig,
    question: str,
    baseline: dict[str, Any] | None,
    progress: Progress,
) -> list[dict[str, Any]]:
    cancel_after_s = config.cancel_after_s
    if baseline is not None:
        if cancel_after_s is None:
            cancel_after_s = 0.25 * (baseline["full_prefill_s"]["median"] or 4.0)
        baseline["cancel_after_s"] = cancel_after_s  # after Started, the cancel was published
    runs: list[dict[str, Any]] = []
    for depth in config.depths:
        for index in range(config.repeat):
            order = MODES if index % 2 == 0 else MODES[::-1]  # neither mode always goes first
            for mode in order:
                asked = uncached(question) if config.phase == "prefill" else question
                run = await measure_once(rig, config, mode, depth, asked, cancel_after_s)
                run["run"] = index
                runs.append(run)
                progress(_describe(run))
    return runs


def _describe(run: dict[str, Any]) -> str:
    if run["missed"] is not None:
        return f"depth {run['depth']:>3} {run['mode']:<12} invalid: {run['missed']}"
    seen = run["cancel_seen_s"]
    seen_text = f"{seen:.2f} s" if seen is not None else "never"
    return (
        f"depth {run['depth']:>3} {run['mode']:<12} stop {run['stop_s']:.3f} s, "
        f"{run['tokens_after_cancel']} token(s) after, cancel seen {seen_text}, "
        f"{run['outcome']}"
    )


async def measure_once(
    rig: Rig,
    config: CancelConfig,
    mode: str,
    depth: int,
    question: str,
    cancel_after_s: float | None,
) -> dict[str, Any]:
    """One long answer, ``depth`` requests behind it, one cancel; what it took to stop."""
    target = await rig.ask(question, "bench-target")
    if not await target.wait_for(lambda: target.started is not None):
        raise BenchError(f"the running answer ended before it started: {target.terminal}")
    if config.phase == "decode":
        await target.wait_for(lambda: target.tokens >= config.tokens_before_cancel)
    fillers = await _queue_fillers(rig, depth)
    if config.phase == "prefill":
        assert target.started_at is not None and cancel_after_s is not None
        await asyncio.sleep(max(0.0, target.started_at + cancel_after_s - time.monotonic()))
    tokens_before, ended_before = target.tokens, target.terminal is not None
    waiting = sum(1 for filler in fillers if filler.started is None and filler.terminal is None)
    published_at = time.monotonic()
    cancel = Cancel(session_id=target.session_id, sent_at=time.time(), user_id="bench")
    if mode == FIFO:
        await send_into_the_request_queue(rig.client.broker, cancel)
    else:
        await rig.client.broker.send_cancel(cancel)
    end = await target.end()
    if mode == CANCEL_QUEUE:  # after measuring: clear the queue quickly for the next run
        for filler in fillers:
            await rig.client.cancel(filler.session, "bench")
    filler_ends = [await filler.end() for filler in fillers]
    seen_at = await rig.wait_until_cancel_seen(target.session_id, SEEN_TIMEOUT_S)
    assert target.terminal_at is not None
    answer_tokens = end.tokens if isinstance(end, Done | Cancelled) else 0
    # When the model yielded each token the answer kept (this process's clock, as published_at):
    # the client's count would lag by the tokens still in the engine's current batch.
    kept_at = rig.backend.piece_times[-1][:answer_tokens] if rig.backend.piece_times else []
    return {
        "mode": mode,
        "depth": depth,
        "outcome": end.type,
        "stop_s": max(0.0, target.terminal_at - published_at),
        "cancel_seen_s": seen_at - published_at if seen_at is not None else None,
        "tokens_before_cancel": tokens_before,
        "tokens_after_cancel": sum(1 for at in kept_at if at > published_at),
        "answer_tokens": answer_tokens,
        "finished_before_seen": isinstance(end, Done),
        "ended_before_cancel": ended_before,
        "in_prefill_at_cancel": tokens_before == 0 and not ended_before,
        "engine_stop_latency_s": end.stop_latency_s if isinstance(end, Cancelled) else None,
        "fillers": _count(filler.type for filler in filler_ends),
        "missed": missed_precondition(config, depth, tokens_before, ended_before, waiting),
    }


def missed_precondition(
    config: CancelConfig, depth: int, tokens_before: int, ended_before: bool, waiting: int
) -> str | None:
    """Why a run measures nothing, or None when it is valid: the cancel must find the answer
    running (in prefill: before its first token) and ``depth`` requests queued behind it. A
    run that missed it would report a stop of 0 s."""
    if ended_before:
        return "the answer had ended before the cancel was sent"
    if config.phase == "prefill" and tokens_before > 0:
        return "the prompt was read before the cancel was sent (the answer had begun)"
    if waiting < depth:
        return f"only {waiting} of {depth} requests were still queued at the cancel"
    return None


async def send_into_the_request_queue(broker: Broker, cancel: Cancel) -> None:
    """Mode A: the cancel joins the request queue, behind every waiting request (the FIFO
    trap, the design this project avoids; the engine honours a cancel found there)."""
    exchange, ttl_s = broker.names.request_exchange, broker.settings.request_ttl_s
    await broker.publish(cancel, exchange, REQUEST_ROUTING_KEY, ttl_s)


async def _queue_fillers(rig: Rig, depth: int) -> list[Trace]:
    """``depth`` short requests, all confirmed by the broker before the cancel is published."""
    return list(
        await asyncio.gather(
            *(
                rig.ask(f"{FILLER_MARK} Say hello number {i}.", f"bench-filler-{i}")
                for i in range(depth)
            )
        )
    )


def _count(outcomes: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome] = counts.get(outcome, 0) + 1
    return counts


def summarize_runs(runs: list[dict[str, Any]], depths: tuple[int, ...]) -> list[dict[str, Any]]:
    """One row per mode and depth: median and p95 of each measure."""
    rows: list[dict[str, Any]] = []
    for mode in MODES:
        for depth in depths:
            chosen = [
                run
                for run in runs
                if run["mode"] == mode and run["depth"] == depth and run["missed"] is None
            ]
            rows.append(
                {
                    "mode": mode,
                    "depth": depth,
                    "runs": len(chosen),
                    "stop_s": summarize([run["stop_s"] for run in chosen]),
                    "tokens_after_cancel": summarize(
                        [run["tokens_after_cancel"] for run in chosen]
                    ),
                    "cancel_seen_s": summarize([run["cancel_seen_s"] for run in chosen]),
                    "finished_before_seen": sum(run["finished_before_seen"] for run in chosen),
                }
            )
    return rows
