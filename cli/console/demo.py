"""The design's argument, live: one question, ``depth`` requests queued behind it, one cancel.

Each pane has an engine of its own, started in this process on first use under its own prefix
(``cli.benchmarks.rig``, as ``concierge bench cancel`` runs it), so the demo never queues
anything on the real engine. Pane A puts the cancel into the request queue (the FIFO trap,
``send_into_the_request_queue``); pane B sends it on the cancel exchange, as every bot does.
"When it took effect" is the answer's terminal event; "tokens after the cancel" are the
tokens the model produced after the cancel was published (the benchmark's measure).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

from bots.ask import Ask
from bots.client import ConciergeClient
from broker.protocol import Cancel, Cancelled, Done, ReplyEvent, TokenEvent
from cli.benchmarks.cancel import CANCEL_QUEUE, FIFO, STORY_PROMPT, send_into_the_request_queue
from cli.benchmarks.rig import FILLER_MARK, BenchBackend, Rig, Trace, running_rig
from cli.console.actions import WEB_USER, refuse
from config.settings import Settings

log = logging.getLogger(__name__)

MODES = {"a": FIFO, "b": CANCEL_QUEUE}
CANCEL_WAIT_S = 60.0  # a cancel pressed while the engine starts waits this long for the answer
SEEN_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class DemoConfig:
    max_tokens: int = 160  # the demo answer's length (the benchmark's)
    filler_tokens: int = 8  # each request queued behind it answers this much, at most
    max_depth: int = 20


BackendFactory = Callable[[Settings, DemoConfig], Awaitable[BenchBackend]]


async def load_backend(settings: Settings, config: DemoConfig) -> BenchBackend:
    """The configured model (or model server), loaded once per pane."""
    from cli.benchmarks.running import load_bench_backend

    return await load_bench_backend(settings, cold=True, filler_tokens=config.filler_tokens)


@dataclass
class DemoRun:
    depth: int
    phase: str = "starting"  # starting, asking, streaming, ended
    target: Trace | None = None
    fillers: list[Trace] = field(default_factory=list)
    fillers_queued: asyncio.Event = field(default_factory=asyncio.Event)
    asked_at: float = field(default_factory=time.monotonic)
    cancel_at: float | None = None
    cancel_chars: int = 0  # of the text shown when the cancel was sent: the page marks it
    cancel_tokens: int = 0
    effect: dict[str, Any] | None = None
    error: str | None = None
    task: asyncio.Task[None] | None = None

    @property
    def busy(self) -> bool:
        return self.task is not None and not self.task.done()


class Pane:
    def __init__(
        self,
        key: str,
        settings: Settings,
        config: DemoConfig,
        factory: BackendFactory,
        changed: Callable[[], None],
    ) -> None:
        self.key, self.mode = key, MODES[key]
        self.settings, self.config, self.factory, self.changed = settings, config, factory, changed
        self.rig: Rig | None = None
        self.client: ConciergeClient | None = None
        self.run: DemoRun | None = None
        self._stack = AsyncExitStack()
        self._starting = asyncio.Lock()

    async def ask(self, depth: int) -> dict[str, Any]:
        if not 0 <= depth <= self.config.max_depth:
            raise refuse(400, f"depth must be 0 to {self.config.max_depth}")
        if self.run is not None and self.run.busy:
            raise refuse(409, "this pane is still answering")
        run = DemoRun(depth)
        self.run = run
        run.task = asyncio.create_task(self._drive(run))
        self.changed()
        return {"ok": True}

    async def cancel(self) -> dict[str, Any]:
        run = self.run
        if run is None or not run.busy or run.cancel_at is not None:
            raise refuse(409, "nothing to cancel in this pane")
        try:
            async with asyncio.timeout(CANCEL_WAIT_S):
                await run.fillers_queued.wait()
        except TimeoutError:
            raise refuse(409, "the answer has not started yet") from None
        target, client = run.target, self.client
        if target is None or client is None or target.terminal is not None:
            raise refuse(409, "the answer has already ended")
        run.cancel_chars, run.cancel_tokens = len(_text(target)), target.tokens
        run.cancel_at = time.monotonic()
        cancel = Cancel(session_id=target.session_id, sent_at=time.time(), user_id=WEB_USER)
        if self.mode == FIFO:
            await send_into_the_request_queue(client.broker, cancel)
        else:
            await client.broker.send_cancel(cancel)
        log.info("web console demo %s: cancel sent (%s)", self.key, self.mode)
        self.changed()
        return {"ok": True}

    async def _drive(self, run: DemoRun) -> None:
        try:
            rig, client = await self._engine()
            run.phase = "asking"
            self.changed()
            target = Trace(await client.ask(Ask(STORY_PROMPT, "demo-asker")), client)
            run.target = target
            watching = asyncio.create_task(self._watch(target))
            if await target.wait_for(lambda: target.started is not None):
                run.phase = "streaming"
                run.fillers = await self._queue_fillers(client, run.depth)
            run.fillers_queued.set()
            end = await target.end()
            await self._measure(rig, run, end)
            await asyncio.gather(*(self._settle(filler) for filler in run.fillers))
            await watching
        except Exception as error:  # shown in the pane; the console goes on
            log.warning("web console demo %s failed: %s", self.key, error)
            run.error = f"{type(error).__name__}: {error}".splitlines()[0][:300]
        finally:
            run.fillers_queued.set()
            run.phase = "ended"
            self.changed()

    async def _engine(self) -> tuple[Rig, ConciergeClient]:
        """This pane's engine and client, started on first use."""
        async with self._starting:
            if self.rig is None or self.client is None:
                backend = await self.factory(self.settings, self.config)
                prefix = f"{self.settings.prefix}.demo-{self.key}-{uuid.uuid4().hex[:6]}"
                rig = await self._stack.enter_async_context(
                    running_rig(
                        self.settings,
                        backend,
                        prefix=prefix,
                        engine_name=f"demo-{self.key}",
                        max_tokens=self.config.max_tokens,
                    )
                )
                client = await ConciergeClient(rig.settings, "web").start()
                rig.clients.append(client)  # closed with the rig
                self.rig, self.client = rig, client
            return self.rig, self.client

    async def _queue_fillers(self, client: ConciergeClient, depth: int) -> list[Trace]:
        async def one(index: int) -> Trace:
            question = f"{FILLER_MARK} Say hello number {index}."
            return Trace(await client.ask(Ask(question, f"demo-behind-{index}")), client)

        return list(await asyncio.gather(*(one(i) for i in range(depth))))

    async def _watch(self, target: Trace) -> None:
        """Tell the page at each event of the answer (it streams in)."""
        seen = 0

        def more() -> bool:
            return len(target.arrivals) > seen

        while await target.wait_for(more):
            seen = len(target.arrivals)
            self.changed()
        self.changed()

    async def _settle(self, filler: Trace) -> None:
        await filler.task
        self.changed()

    async def _measure(self, rig: Rig, run: DemoRun, end: ReplyEvent) -> None:
        """When the cancel took effect and how much the model wrote after it."""
        target = run.target
        assert target is not None and target.terminal_at is not None
        kept = end.tokens if isinstance(end, Done | Cancelled) else 0
        times = rig.backend.piece_times[-1][:kept] if rig.backend.piece_times else []
        del rig.backend.piece_times[:-1]  # one list per answer; keep only this one
        if run.cancel_at is None:
            run.effect = {"outcome": end.type, "cancelled": False}
            return
        seen_at = await rig.wait_until_cancel_seen(target.session_id, SEEN_TIMEOUT_S)
        run.effect = {
            "outcome": end.type,
            "cancelled": True,
            "stop_ms": round(max(0.0, target.terminal_at - run.cancel_at) * 1000, 1),
            "tokens_after": sum(1 for at in times if at > run.cancel_at),
            "seen_ms": round((seen_at - run.cancel_at) * 1000, 1) if seen_at else None,
        }

    def snapshot(self) -> dict[str, Any]:
        run = self.run
        view: dict[str, Any] = {"mode": self.key, "engine_ready": self.rig is not None}
        if run is None:
            return view | {"phase": "idle"}
        target = run.target
        now = time.monotonic()
        behind = sum(1 for filler in run.fillers if filler.terminal is None)
        view |= {
            "phase": run.phase,
            "busy": run.busy,
            "depth": run.depth,
            "behind": behind if run.fillers_queued.is_set() else run.depth,
            "text": _text(target) if target is not None else "",
            "tokens": target.tokens if target is not None else 0,
            "elapsed_s": round(now - run.asked_at, 2),
            "effect": run.effect,
            "error": run.error,
            "cancel": None,
        }
        if run.cancel_at is not None:
            view["cancel"] = {
                "chars": run.cancel_chars,
                "tokens_before": run.cancel_tokens,
                "after_ask_s": round(run.cancel_at - run.asked_at, 2),
            }
        return view

    async def close(self) -> None:
        if self.run is not None and self.run.task is not None:
            self.run.task.cancel()
            await asyncio.gather(self.run.task, return_exceptions=True)
        await self._stack.aclose()


def _text(trace: Trace) -> str:
    """The answer so far: its tokens, or its terminal text once it has one."""
    terminal = trace.terminal
    if isinstance(terminal, Done | Cancelled):
        return terminal.text
    return "".join(event.text for _, event in trace.arrivals if isinstance(event, TokenEvent))


class Demo:
    def __init__(
        self,
        settings: Settings,
        config: DemoConfig,
        changed: Callable[[], None],
        factory: BackendFactory = load_backend,
    ) -> None:
        self.config = config
        self.panes = {key: Pane(key, settings, config, factory, changed) for key in MODES}

    def pane(self, key: str) -> Pane:
        if key not in self.panes:
            raise refuse(400, "no such pane")
        return self.panes[key]

    def snapshot(self) -> dict[str, Any]:
        return {key: pane.snapshot() for key, pane in self.panes.items()} | {
            "max_depth": self.config.max_depth
        }

    async def close(self) -> None:
        await asyncio.gather(*(pane.close() for pane in self.panes.values()))
