"""``concierge bench queue``: a burst of requests, each from its own asker, served in order.

N requests are published at once (round robin over a few bot clients, each with its own reply
queue; every request has its own user and session), the engine held at the first until the
last is confirmed, so the queue really holds all N (counted on the broker before letting go).
Each must end answered or expired, in the order it was queued, none lost. Then many cancels
arrive, published and added directly, and ``cancelled_sessions`` must stay within its bound.
Memory is this process's RSS: the engine's, since it runs here, plus the benchmark's clients.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from broker.protocol import Cancel, ReplyEvent, Started, new_session_id
from cli.benchmarks.rig import (
    BenchBackend,
    BenchError,
    Progress,
    Rig,
    Trace,
    document,
    rss_bytes,
    running_rig,
    summarize,
)
from cli.benchmarks.validity import count_reasons
from config.settings import Settings
from engine.backends.base import ChatMessage, GenerationLimits, Pieces, ShouldStop

PUBLISH_BATCH = 500
CANCELS_SEEN_TIMEOUT_S = 300.0
LOST_MARGIN_S = 120.0  # silence past the TTL plus this means a request was lost
HOLD_TIMEOUT_S = 120.0  # the engine must take the first request within this


@dataclass(frozen=True)
class QueueConfig:
    requests: int = 200
    max_tokens: int = 8
    bots: int = 4
    ttl_s: float = 900.0  # each request's time to live in the queue
    cancels_published: int = 5_000  # through the broker, consumed by the engine
    cancels_added: int = 100_000  # straight into the worker's cancelled_sessions


class HeldBackend(BenchBackend):
    """The benchmark's backend, able to hold the engine at the start of an answer: while the
    burst is published, the engine takes the first request and waits, so none is answered
    before the last is queued."""

    def __init__(self, backend: BenchBackend) -> None:
        super().__init__(
            backend.inner, filler_max_tokens=backend.filler_max_tokens, cold=backend.cold
        )
        self.open = threading.Event()
        self.open.set()
        self.holding = threading.Event()  # an answer waits at the gate

    @contextmanager
    def held(self) -> Iterator[None]:
        self.open.clear()
        try:
            yield
        finally:
            self.open.set()  # never leave the engine's thread waiting

    def stream(
        self, messages: list[ChatMessage], should_stop: ShouldStop, limits: GenerationLimits
    ) -> Pieces:
        while not self.open.is_set():
            self.holding.set()
            if self.open.wait(0.05) or should_stop():
                break
        self.holding.clear()
        yield from super().stream(messages, should_stop, limits)
        return None


async def run_queue(
    settings: Settings, backend: BenchBackend, config: QueueConfig, progress: Progress
) -> dict[str, Any]:
    started = time.time()
    doc = document("queue", settings, asdict(config), started)
    overrides = {"max_tokens": config.max_tokens, "request_ttl_s": config.ttl_s}
    async with running_rig(settings, HeldBackend(backend), **overrides) as rig:
        doc["broker_prefix"] = rig.settings.prefix  # deleted at the end
        assert rig.worker is not None
        if config.cancels_published > rig.worker.cancelled.max_size:
            raise BenchError("--cancels-published must not exceed cancelled_sessions' bound")
        for _ in range(config.bots - 1):
            await rig.add_client()
        memory = {"rss_before_bytes": rss_bytes()}
        doc["requests"] = await burst(rig, config, progress)
        memory["rss_after_requests_bytes"] = rss_bytes()
        doc["cancelled_sessions"] = await flood_cancels(rig, config, progress)
        memory["rss_after_cancels_bytes"] = rss_bytes()
    doc["memory"] = memory
    doc["invalid_runs"] = count_reasons([doc["requests"]["missed"]])
    doc["duration_s"] = time.time() - started
    return doc


async def burst(rig: Rig, config: QueueConfig, progress: Progress) -> dict[str, Any]:
    """Publish every request with the engine held at the first, count the queue on the broker,
    let the engine go, then follow each request to its end."""
    assert isinstance(rig.backend, HeldBackend)
    began = time.monotonic()
    traces: list[Trace] = []
    with rig.backend.held():
        for index in range(config.requests):
            client = rig.clients[index % len(rig.clients)]
            question = f"Question {index}: what is {index} plus one?"
            timeout_s = config.ttl_s + LOST_MARGIN_S
            traces.append(
                await rig.ask(question, f"bench-asker-{index}", client=client, timeout_s=timeout_s)
            )
        published_s = time.monotonic() - began
        depth = await queued_depth(rig, rig.backend)
    progress(
        f"{config.requests} requests published in {published_s:.2f} s, {depth} queued; "
        "waiting for answers"
    )
    ends = await asyncio.gather(*(trace.task for trace in traces))
    result = check_burst(traces, ends)
    result["depth"] = depth
    result["missed"] = missed_precondition(config.requests, depth)
    result["publish_s"] = published_s
    result["total_s"] = time.monotonic() - began
    progress(
        f"{result['outcomes']} in {result['total_s']:.1f} s; in order: {result['in_order']}, "
        f"lost: {result['lost']}"
    )
    return result


async def queued_depth(rig: Rig, backend: HeldBackend) -> int:
    """The requests in the queue, the broker's count, plus the one the engine holds."""
    deadline = time.monotonic() + HOLD_TIMEOUT_S
    while not backend.holding.is_set():
        if time.monotonic() > deadline:
            raise BenchError("the engine did not take the first request in time")
        await asyncio.sleep(0.01)
    return await rig.client.broker.request_queue_depth() + 1


def missed_precondition(requests: int, depth: int) -> str | None:
    """Why the burst measures nothing, or None: the queue must have held every request at
    once, or the order and waits measured are of a shorter queue than asked."""
    if depth < requests:
        return "the queue held fewer requests than asked when the engine was let go"
    return None


def check_burst(traces: list[Trace], ends: list[ReplyEvent | None]) -> dict[str, Any]:
    """Outcomes, order of service, gaps in event numbers, and time spent waiting."""
    outcomes: dict[str, int] = {}
    for end in ends:
        if end is not None:
            outcomes[end.type] = outcomes.get(end.type, 0) + 1
    started: list[tuple[int, float, Started]] = []
    for index, trace in enumerate(traces):
        event, request = trace.started, trace.session.request
        if event is not None and request is not None:  # every request here was asked here
            # when the engine took it, on the clock that stamped sent_at (the engine's own)
            started.append((index, request.sent_at + event.waited_s, event))
    by_start = [index for index, _, _ in sorted(started, key=lambda item: item[1])]
    gapless = sum(
        [event.seq for _, event in trace.arrivals] == list(range(len(trace.arrivals)))
        for trace in traces
    )
    return {
        "outcomes": outcomes,
        "answered_or_expired": outcomes.get("done", 0) + outcomes.get("expired", 0),
        "lost": sum(end is None for end in ends),
        "in_order": by_start == sorted(by_start),
        "started": len(started),
        "sessions_without_gaps": gapless,
        "waited_s": summarize([event.waited_s for _, _, event in started]),
        "waited_s_by_position": [
            trace.started.waited_s if trace.started is not None else None for trace in traces
        ],
    }


async def flood_cancels(rig: Rig, config: QueueConfig, progress: Progress) -> dict[str, Any]:
    """Cancels for sessions nobody asked: published through the broker, then added directly."""
    worker = rig.worker
    assert worker is not None
    ids = [new_session_id() for _ in range(config.cancels_published)]
    began = time.monotonic()
    for start in range(0, len(ids), PUBLISH_BATCH):
        await asyncio.gather(
            *(
                rig.client.broker.send_cancel(Cancel(session_id=sid, sent_at=time.time()))
                for sid in ids[start : start + PUBLISH_BATCH]
            )
        )
    await _wait_all_seen(rig, ids)
    consumed_s = time.monotonic() - began
    size_after_published = len(worker.cancelled)
    began = time.monotonic()
    for number in range(config.cancels_added):
        worker.cancelled.add(f"bench-added-{number:010d}")
    added_s = time.monotonic() - began
    result = {
        "max_size": worker.cancelled.max_size,
        "published": config.cancels_published,
        "published_per_s": config.cancels_published / consumed_s if consumed_s > 0 else None,
        "size_after_published": size_after_published,
        "added": config.cancels_added,
        "added_per_s": config.cancels_added / added_s if added_s > 0 else None,
        "size_after_added": len(worker.cancelled),
    }
    progress(
        f"cancelled_sessions: {result['size_after_published']} after {config.cancels_published}"
        f" published, {result['size_after_added']} after {config.cancels_added} more added"
    )
    return result


async def _wait_all_seen(rig: Rig, ids: list[str]) -> None:
    assert rig.worker is not None
    cancelled = rig.worker.cancelled
    deadline = time.monotonic() + CANCELS_SEEN_TIMEOUT_S
    while any(cancelled.received_at(sid) is None for sid in ids):
        if time.monotonic() > deadline:
            raise BenchError("the engine did not take every published cancel in time")
        await asyncio.sleep(0.05)
