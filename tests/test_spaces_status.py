"""Each space's share of the work (issue #30): the engine counts the requests of each space
waiting in the queue (the broker's count, split by the copies of what was queued: left by a
take, a cancel, a deadline), those it began and how they ended, names the space of the job it
runs, and reports each space's knowledge base in ``/healthz``, which ``concierge status``
shows as a table; the web console counts the waiting and running requests of each space among
those it saw queued. The real engine, broker and model (held mid-answer by a gate) for
``/healthz`` and ``concierge status``; the queue's split, the console's state and the table
are pure."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from bots.ask import Ask
from bots.client import ConciergeClient
from broker.amqp import Broker
from broker.protocol import CONTENT_TYPE, Done, Failed, Request, Started, encode, make_request
from broker.taps import Copy
from cli.console.state import ConsoleState
from cli.status import Health, health_url, read_health, spaces_table, status_command
from config.settings import Settings
from engine.backends.base import Backend, ChatMessage, GenerationLimits, Pieces, ShouldStop
from engine.metrics import MetricsServer
from engine.queue_share import QueueShare
from tests.conftest import RunningEngine, start_engine
from tests.helpers import collect, wait_for_tokens
from tests.test_spaces_engine import QUESTION, asked, kb_of, rescraped, write_spaces

NO_REQUESTS = {"done": 0, "cancelled": 0, "failed": 0, "expired": 0}


@pytest.fixture
async def in_spaces(
    settings: Settings, backend: Backend, broker: Broker, tmp_path: Path
) -> AsyncIterator[tuple[Settings, RunningEngine]]:
    """An engine serving alpha and beta; its answers run to their token limit (no paragraph
    limit), so one is still being generated when its first token arrives."""
    spaced = settings.model_copy(
        update={"spaces_file": write_spaces(tmp_path), "answer_paragraphs": 0}
    )
    running = await start_engine(spaced, backend)
    yield spaced, running
    await running.stop()


async def test_healthz_and_status_count_each_space_and_name_the_space_being_answered(
    in_spaces: tuple[Settings, RunningEngine],
) -> None:
    settings, engine = in_spaces
    metrics = engine.worker.metrics
    async with ConciergeClient(settings, "test") as client:
        await rescraped(client, "alpha", engine)
        session = await client.ask(Ask(QUESTION, "tester", space="alpha"))
        with client.showing(session):
            await wait_for_tokens(session, 1)
            during = metrics.health()  # read in the engine's own loop, as /healthz does
            answered = (await collect(session))[-1]
        greeted = await asked(client, "hi", "beta")
        unknown = await asked(client, "hi", "gamma")
    assert isinstance(answered, Done) and isinstance(greeted, Done), (answered, greeted)
    assert isinstance(unknown, Failed)

    assert during["answering"]["space"] == "alpha"
    await metrics.refresh_health()
    health = metrics.health()
    spaces = health["spaces"]
    assert list(spaces) == ["default", "alpha", "beta"]  # not gamma: no such space here
    assert (spaces["alpha"]["started"], spaces["alpha"]["requests"]) == (
        2,
        NO_REQUESTS | {"done": 2},  # the rescrape and the answer
    )
    assert (spaces["beta"]["started"], spaces["beta"]["requests"]) == (1, NO_REQUESTS | {"done": 1})
    assert (spaces["default"]["started"], spaces["default"]["requests"]) == (0, NO_REQUESTS)
    assert (health["started"], health["requests"]["failed"]) == (3, 1)  # gamma's: the total's

    alpha_kb, beta_kb = spaces["alpha"]["knowledge_base"], spaces["beta"]["knowledge_base"]
    assert (alpha_kb["path"], alpha_kb["articles"]) == (str(kb_of(settings, "alpha").resolve()), 2)
    assert (beta_kb["articles"], beta_kb["last_rescrape"]) == (0, None)  # never rebuilt
    assert health["knowledge_base"] == spaces["default"]["knowledge_base"]
    assert "next_rescrape" not in alpha_kb  # no schedule

    async with MetricsServer(metrics, "127.0.0.1", 0) as server:
        shown = await status_screen(settings.model_copy(update={"metrics_port": server.port}))
    assert "spaces: waiting now, and requests since the engine started" in shown
    assert row(shown, "alpha").split()[:8] == ["alpha", "-", "0", "2", "2", "0", "0", "0"]
    assert "2 articles" in row(shown, "alpha")
    assert row(shown, "beta").split()[:5] == ["beta", "-", "0", "1", "1"]
    assert "waiting: in the queue now" in shown


async def status_screen(settings: Settings) -> str:
    console = Console(record=True, width=240, color_system=None)
    await status_command(settings, console=console)
    return console.export_text()


def row(screen: str, space: str) -> str:
    """The table row of ``space`` (its first cell), without the table's borders."""
    for line in screen.splitlines():
        cells = line.replace("│", " ").replace("┃", " ").split()
        if cells and cells[0] == space:
            return " ".join(cells)
    raise AssertionError(f"no row for {space!r} in:\n{screen}")


# --- what waits, by space (the real engine, held mid-answer) ---------------------------------

WIDGET, GADGET = "What is a widget made of?", "What is a gadget made of?"  # no articles: the model
EXPIRES_S = 2.0  # the time to live of the request that expires while queued
WAIT_S = 30.0


class GatedBackend:
    """The real model, each answer one piece long, held after it until the test lets one
    end: an answer that runs as long as the test needs, and queued requests behind it."""

    def __init__(self, real: Backend) -> None:
        self.real = real
        self.gate = threading.Semaphore(0)

    def stream(
        self, messages: list[ChatMessage], should_stop: ShouldStop, limits: GenerationLimits
    ) -> Pieces:
        pieces = self.real.stream(messages, should_stop, limits)
        try:
            yield next(pieces)
            self.gate.acquire(timeout=WAIT_S)
        finally:
            pieces.close()
        return "stop"

    def count_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return self.real.count_tokens(messages)

    async def health(self) -> dict[str, Any]:
        return await self.real.health()


async def test_what_waits_in_each_space_shows_until_it_is_taken_cancelled_or_expired(
    settings: Settings, backend: Backend, broker: Broker, tmp_path: Path
) -> None:
    gated = GatedBackend(backend)
    spaced = settings.model_copy(update={"spaces_file": write_spaces(tmp_path)})
    async with ConciergeClient(spaced, "test") as client:
        # Queued before the engine starts: its purge publishes them again, and sees them.
        held = await client.ask(Ask(WIDGET, "u1", space="alpha"))
        beta = await client.ask(Ask(GADGET, "u2", space="beta"))
        engine = await start_engine(spaced, gated)
        try:
            async with MetricsServer(engine.worker.metrics, "127.0.0.1", 0) as server:
                served = spaced.model_copy(update={"metrics_port": server.port})
                with client.showing(held):
                    await wait_for_tokens(held, 1)  # held in the model: the rest wait
                await client.ask(Ask(GADGET, "u3", space="beta"), ttl_s=EXPIRES_S)
                await client.ask(Ask(WIDGET, "u4", space="alpha"))
                withdrawn = await client.ask(Ask(WIDGET, "u5", space="alpha"))
                health = await healthz_until(served, lambda w: w == {"alpha": 2, "beta": 2})
                assert health["spaces"]["alpha"]["waiting_unknown"] == 0

                await client.cancel(withdrawn, "u5")  # leaves the count, though still queued
                await healthz_until(served, lambda w: w["alpha"] == 1)
                await healthz_until(served, lambda w: w == {"alpha": 1, "beta": 1})  # expired

                gated.gate.release()  # the held answer ends; the engine takes beta's, held too
                with client.showing(beta):
                    await wait_for_tokens(beta, 1)
                health = await healthz_until(served, lambda w: w == {"alpha": 1, "beta": 0})
                assert health["answering"]["space"] == "beta"
                shown = await status_screen(served)
        finally:
            gated.gate.release(10)
            await engine.stop()
    assert row(shown, "alpha").split()[:3] == ["alpha", "-", "1"]
    assert row(shown, "beta").split()[:3] == ["beta", "answering", "0"]
    assert "waiting: in the queue now, neither cancelled nor past their deadline" in shown


async def healthz_until(settings: Settings, wanted: Callable[[dict[str, int]], bool]) -> Health:
    """``/healthz`` once its ``waiting`` by space is as ``wanted`` (read again until then)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        health = await read_health(health_url(settings))
        assert health is not None
        waiting = {name: space["waiting"] for name, space in health["spaces"].items()}
        waiting.pop("default")
        if wanted(waiting):
            return health
        assert time.monotonic() < deadline, f"waiting by space still {waiting}"
        await asyncio.sleep(0.05)  # a poll, not a wait for time: the condition decides


# --- the queue's split (pure) -----------------------------------------------------------------


def copy_of(request: Request) -> Copy:
    return Copy("ask", CONTENT_TYPE, encode(request))


def queued(space: str, ttl_s: float = 60.0) -> Request:
    return make_request(reply_to="bot", user_id="u", question="q", ttl_s=ttl_s, space=space)


async def test_the_broker_count_is_split_by_the_last_copies_seen_the_rest_unknown() -> None:
    cancelled: set[str] = set()
    share = QueueShare(cancelled, clock=lambda: time.time() + 1.0)  # ``late`` past its deadline
    alpha, beta, late = queued("alpha"), queued("beta"), queued("beta", ttl_s=0.001)
    withdrawn, again = queued("alpha"), queued("alpha")
    for request in (again, alpha, beta, late, withdrawn):
        await share.on_copy(copy_of(request))
    await share.on_copy(Copy("cancel", CONTENT_TYPE, b"{}"))  # a cancel in the queue: a place
    await share.on_copy(copy_of(again))  # published again: now last
    cancelled.add(withdrawn.session_id)

    nine = share.waiting(9)  # three queued before the copies began
    assert (dict(nine.by_space), nine.unknown) == ({"alpha": 2, "beta": 1}, 3)
    three = share.waiting(3)  # the head went: a take, whichever engine took it
    assert (dict(three.by_space), three.unknown) == ({"alpha": 1}, 0)
    assert dict(share.waiting(0).by_space) == {}

    share.lost()  # the connection dropped: copies went missing, the head is unknown
    await share.on_copy(copy_of(beta))
    after = share.waiting(4)
    assert (dict(after.by_space), after.unknown) == ({"beta": 1}, 3)


# --- the status table (pure) ------------------------------------------------------------------

HEALTH: dict[str, Any] = {
    "answering": {"session_id": "s1", "space": "shop", "running_s": 1.0},
    "rescraping": {"session_id": "s2", "space": "docs", "running_s": 9.0},
    "spaces": {
        "default": {"started": 4, "requests": NO_REQUESTS | {"done": 4}, "knowledge_base": None},
        "shop": {
            "started": 7,
            "requests": NO_REQUESTS | {"done": 5, "cancelled": 1},
            "knowledge_base": {"articles": 3, "passages": 9, "last_rescrape": None},
        },
        "docs": {"started": 1, "requests": NO_REQUESTS, "knowledge_base": None},
    },
}


def test_the_spaces_table_says_what_runs_in_each_space_and_what_ended_there() -> None:
    table = spaces_table(HEALTH)
    assert table is not None
    console = Console(record=True, width=240, color_system=None)
    console.print(table)
    shown = console.export_text()
    assert row(shown, "shop").split()[:8] == ["shop", "answering", "-", "7", "5", "1", "0", "0"]
    assert row(shown, "docs").split()[:4] == ["docs", "rescraping", "-", "1"]
    assert row(shown, "default").split()[:4] == ["default", "-", "-", "4"]
    assert "3 articles, 9 passages, last rescrape never" in row(shown, "shop")
    assert "too old to say" in shown  # HEALTH has no waiting: an older engine's


def test_with_one_space_or_an_older_engine_there_is_no_spaces_table() -> None:
    one = {"spaces": {"default": HEALTH["spaces"]["default"]}}
    assert spaces_table(one) is None
    assert spaces_table({"started": 1}) is None


# --- the web console's state (pure) -----------------------------------------------------------


def test_the_console_counts_what_waits_and_runs_by_space_among_the_requests_it_saw() -> None:
    state = ConsoleState()
    state.on_count(2, 1, now=0.0)  # two were queued before the console started: space unknown
    asked = [
        make_request(reply_to="bot", user_id="u", question="q", ttl_s=60, space=space)
        for space in ("alpha", "alpha", "beta", "default")
    ]
    for request in asked:
        state.on_request(request)
    state.on_event(Started(session_id=asked[0].session_id, seq=0, waited_s=0.5), now=1.0)

    snapshot = state.snapshot(now=2.0)
    assert snapshot["spaces"] == {
        "?": {"waiting": 2, "running": 0},
        "alpha": {"waiting": 1, "running": 1},
        "beta": {"waiting": 1, "running": 0},
        "default": {"waiting": 1, "running": 0},
    }
    assert [row["space"] for row in snapshot["waiting"]] == ["alpha", "beta", "default"]
    assert snapshot["running"][0]["space"] == "alpha"
