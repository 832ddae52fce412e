"""What every benchmark shares: names of its own, an engine in this process, a traced session.

The engine runs in this process (as in ``concierge up``), so the benchmark and the engine
share one ``time.monotonic()`` clock: the time a cancel is published and the time the engine
registered it can be subtracted directly.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import os
import platform
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from bots.ask import Ask
from bots.client import ConciergeClient
from bots.session import Detached, ReplyTimeout, Session, StopRequested
from broker.amqp import Broker
from broker.protocol import TERMINAL_TYPES, ReplyEvent, Started, TokenEvent
from config.errors import ConciergeError
from config.settings import Settings
from config.urls import masked_url
from engine.backends.base import ChatMessage, GenerationLimits, Pieces, ShouldStop
from engine.backends.llama import LlamaBackend
from engine.backends.openai.backend import OpenAIBackend
from engine.main import run_engine
from engine.worker import Worker

SCHEMA_VERSION = 1
FILLER_MARK = "[bench filler]"  # questions the benchmark queues only to fill the request queue
POLL_INTERVAL_S = 0.005

Progress = Callable[[str], None]


class BenchError(ConciergeError, RuntimeError):
    """The benchmark could not measure what it meant to (an answer lost, a cancel never seen)."""


def bench_settings(settings: Settings, kb_dir: Path, **overrides: Any) -> Settings:
    """The user's settings on broker names unique to this run, deterministic and unhurried."""
    fields: dict[str, Any] = {
        "prefix": f"bench-{uuid.uuid4().hex[:12]}",
        "engine_name": "bench-engine",
        "bot_name": "",  # one-off clients, however the user's bots are named
        "kb_path": kb_dir / "bench-kb.sqlite3",  # empty: prompts are the question alone
        "feedback_path": kb_dir / "bench-feedback.sqlite3",  # not the real votes
        "temperature": 0.0,  # the likeliest token every time: the same answer every run
        "purge_on_start": False,  # the prefix is new; nothing to purge
        "answer_time_limit_s": 900.0,
        "request_ttl_s": 900.0,
        "max_question_chars": 16_000,
        "metrics_port": 0,  # a benchmark serves no metrics (and must not clash with an engine)
        "model_answers_yes_no": True,  # every question reaches the model, as when measured before
        "answer_paragraphs": 0,  # and every answer runs its course
    }
    fields.update(overrides)
    return settings.model_copy(update=fields)


def is_filler(messages: list[ChatMessage]) -> bool:
    """The question is the last message's end (the site's articles may come before it)."""
    return bool(messages) and FILLER_MARK in messages[-1].content


class BenchBackend:
    """The real backend with three knobs that only a benchmark needs.

    - Filler requests (questions starting with ``FILLER_MARK``) are capped at
      ``filler_max_tokens``, so a queue fifty deep drains in seconds: the protocol has no
      per-request length, and the measured answer must keep the engine's own limit.
    - ``cold``: the KV cache is forgotten (``LlamaBackend.reset``) before every measured
      request, so the same prompt costs the same each time instead of being served from
      llama.cpp's prefix cache.
    - The ``time.monotonic()`` of every piece the model yields is kept in ``piece_times``:
      the engine emits the piece at that moment, so arrival at the client minus this is what
      the broker and the reply consumer add.
    """

    def __init__(
        self,
        inner: LlamaBackend | OpenAIBackend,
        *,
        filler_max_tokens: int = 8,
        cold: bool = True,
    ) -> None:
        self.inner = inner
        self.filler_max_tokens = filler_max_tokens
        self.cold = cold
        self.piece_times: list[list[float]] = []  # one list per measured stream
        self.stream_began: list[float] = []  # ... and when each was asked for
        self.warms = False  # the engine reads a follow-up's beginning while idle (``warm``)
        self.warming = False  # ... and is doing it now

    def count_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return self.inner.count_tokens(messages)

    async def health(self) -> dict[str, Any]:
        return await self.inner.health()

    def warm(self, messages: Sequence[ChatMessage], should_stop: ShouldStop) -> int:
        """As the engine's backend does (``engine.jobs.next_turn.Warms``), when ``warms`` is
        set: only the conversation benchmark lets the engine read ahead while idle (the others
        run the model beside the engine, which must then never compute on its own)."""
        if not (self.warms and isinstance(self.inner, LlamaBackend)):
            return 0
        self.warming = True  # what the model loads now is not a measured prompt's
        try:
            return self.inner.warm(messages, should_stop)
        finally:
            self.warming = False

    def interrupt(self) -> None:
        """As the engine's backend does (``Interruptible``): the model in this process stops
        its computation; a server's stream is stopped between pieces."""
        if isinstance(self.inner, LlamaBackend):
            self.inner.interrupt()

    def stream(
        self, messages: list[ChatMessage], should_stop: ShouldStop, limits: GenerationLimits
    ) -> Pieces:
        if is_filler(messages):
            capped = dataclasses.replace(limits, max_tokens=self.filler_max_tokens)
            yield from self.inner.stream(messages, should_stop, capped)
            return None
        self.stream_began.append(time.monotonic())
        if self.cold and isinstance(self.inner, LlamaBackend):  # a server's cache is its own
            self.inner.reset()
        times: list[float] = []
        self.piece_times.append(times)
        for piece in self.inner.stream(messages, should_stop, limits):
            times.append(time.monotonic())
            yield piece
        return None


class Trace:
    """Follows one session in a task, stamping each event with its arrival time.

    When the session ends, ``client`` forgets it: the client caps how many a user has open.
    """

    def __init__(
        self, session: Session, client: ConciergeClient, timeout_s: float | None = None
    ) -> None:
        self.session = session
        self.client = client
        self.arrivals: list[tuple[float, ReplyEvent]] = []
        self._changed = asyncio.Event()
        self.task: asyncio.Task[ReplyEvent | None] = asyncio.create_task(self._follow(timeout_s))

    async def _follow(self, timeout_s: float | None) -> ReplyEvent | None:
        """The terminal event, or None if the session went silent for ``timeout_s`` (lost)."""
        try:
            while True:
                item = await self.session.next_item(timeout_s)
                if isinstance(item, StopRequested | Detached):
                    continue
                self.arrivals.append((time.monotonic(), item))
                self._changed.set()
                if item.type in TERMINAL_TYPES:
                    return item
        except ReplyTimeout:
            return None
        finally:
            self.client.forget(self.session)
            self._changed.set()

    @property
    def session_id(self) -> str:
        return self.session.session_id

    @property
    def terminal(self) -> ReplyEvent | None:
        last = self.arrivals[-1][1] if self.arrivals else None
        return last if last is not None and last.type in TERMINAL_TYPES else None

    @property
    def terminal_at(self) -> float | None:
        return self.arrivals[-1][0] if self.terminal is not None else None

    def token_arrivals(self) -> list[tuple[float, TokenEvent]]:
        """One (arrival time, event) per model token: an event may carry several tokens."""
        return [
            (at, event)
            for at, event in self.arrivals
            if isinstance(event, TokenEvent)
            for _ in range(event.tokens)
        ]

    @property
    def tokens(self) -> int:
        return len(self.token_arrivals())

    @property
    def started(self) -> Started | None:
        return next((e for _, e in self.arrivals if isinstance(e, Started)), None)

    @property
    def started_at(self) -> float | None:
        return next((at for at, e in self.arrivals if isinstance(e, Started)), None)

    async def wait_for(self, condition: Callable[[], bool]) -> bool:
        """Wait until ``condition()`` holds; False if the session ended first."""
        while not condition():
            if self.task.done():
                return False
            self._changed.clear()
            waiter = asyncio.ensure_future(self._changed.wait())
            await asyncio.wait({waiter, self.task}, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
        return True

    async def end(self) -> ReplyEvent:
        terminal = await self.task
        if terminal is None:
            raise BenchError(f"session {self.session_id}: no terminal event (lost)")
        return terminal


class Rig:
    """An engine in this process on its own prefix, and the clients that ask it."""

    def __init__(self, settings: Settings, backend: BenchBackend) -> None:
        self.settings = settings
        self.backend = backend
        self.worker: Worker | None = None
        self.clients: list[ConciergeClient] = []

    @property
    def client(self) -> ConciergeClient:
        return self.clients[0]

    async def ask(
        self,
        question: str,
        user_id: str,
        *,
        client: ConciergeClient | None = None,
        timeout_s: float | None = None,
    ) -> Trace:
        """Ask as ``user_id`` (each asker its own: the client caps questions per user)."""
        client = client or self.client
        return Trace(await client.ask(Ask(question, user_id)), client, timeout_s)

    async def add_client(self) -> ConciergeClient:
        client = await ConciergeClient(self.settings, "bench").start()
        self.clients.append(client)
        return client

    async def wait_until_cancel_seen(self, session_id: str, timeout_s: float) -> float | None:
        """When the engine registered the cancel for ``session_id`` (monotonic), or None."""
        assert self.worker is not None
        deadline = time.monotonic() + timeout_s
        while (seen := self.worker.cancelled.received_at(session_id)) is None:
            if time.monotonic() > deadline:
                return None
            await asyncio.sleep(POLL_INTERVAL_S)
        return seen


@asynccontextmanager
async def running_rig(
    settings: Settings, backend: BenchBackend, **overrides: Any
) -> AsyncIterator[Rig]:
    """Start an engine and one client on a fresh prefix; stop both and delete the topology."""
    with tempfile.TemporaryDirectory(prefix="concierge-bench-") as kb_dir:
        rig = Rig(bench_settings(settings, Path(kb_dir), **overrides), backend)
        stop = asyncio.Event()
        ready: asyncio.Future[Worker] = asyncio.get_running_loop().create_future()
        engine = asyncio.create_task(run_engine(rig.settings, stop, backend=backend, ready=ready))
        try:
            await asyncio.wait({engine, ready}, return_when=asyncio.FIRST_COMPLETED)
            if engine.done():
                engine.result()  # failed to start: raise its error
            rig.worker = ready.result()
            await rig.add_client()
            yield rig
        finally:
            await asyncio.shield(_tear_down(rig, stop, engine))


async def _tear_down(rig: Rig, stop: asyncio.Event, engine: asyncio.Task[Worker]) -> None:
    for client in rig.clients:
        await client.close()  # one-off clients: each deletes its (durable) reply queue
    stop.set()
    await engine
    async with Broker(rig.settings) as broker:
        channel = await broker.connection.channel()
        await channel.queue_delete(broker.names.cancel_queue(rig.settings.engine_name))
        await channel.close()
        await broker.delete_all()


# --- figures ------------------------------------------------------------------------------


def summarize(values: list[float | None]) -> dict[str, float | int | None]:
    """Median, p95 (nearest rank: with few runs it is the largest), min, max and count."""
    present = sorted(v for v in values if v is not None)
    if not present:
        return {"median": None, "p95": None, "min": None, "max": None, "n": 0}
    rank = max(1, math.ceil(0.95 * len(present)))
    middle = len(present) // 2
    median = present[middle] if len(present) % 2 else (present[middle - 1] + present[middle]) / 2
    return {
        "median": median,
        "p95": present[rank - 1],
        "min": present[0],
        "max": present[-1],
        "n": len(present),
    }


def rss_bytes() -> int:
    """This process's resident memory: the engine's, plus the benchmark's small share."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def environment(settings: Settings) -> dict[str, Any]:
    try:
        import llama_cpp

        llama_version = str(llama_cpp.__version__)
    except ImportError:  # pragma: no cover - the engine needs it anyway
        llama_version = "absent"
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    server = settings.backend == "openai"
    return {
        "backend": settings.backend,
        "model": (settings.openai_model or "the server's") if server else _model_name(settings),
        "model_server": masked_url(settings.openai_base_url) if server else None,
        "threads": settings.threads or os.cpu_count(),
        "cpu_count": os.cpu_count(),
        "load_average_1m": load,
        "python": platform.python_version(),
        "llama_cpp_python": llama_version,
        "machine": platform.machine(),
    }


def _model_name(settings: Settings) -> str:
    return settings.resolved_model_path().name


def document(
    benchmark: str, settings: Settings, config: dict[str, Any], started: float
) -> dict[str, Any]:
    """The envelope every benchmark's JSON document shares."""
    return {
        "benchmark": benchmark,
        "schema_version": SCHEMA_VERSION,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "environment": environment(settings),
        "config": config,
    }
