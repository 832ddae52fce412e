"""Each space's share of the work, where it can be known (issue #30): the engine counts the
requests of each space it began and how they ended, names the space of the job it runs, and
reports each space's knowledge base in ``/healthz``, which ``concierge status`` shows as a
table; the web console counts the waiting and running requests of each space among those it
saw queued. The real engine, broker and model for ``/healthz`` and ``concierge status``; the
console's state and the table are pure."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from bots.ask import Ask
from bots.client import ConciergeClient
from broker.amqp import Broker
from broker.protocol import Done, Failed, Started, make_request
from cli.console.state import ConsoleState
from cli.status import spaces_table, status_command
from config.settings import Settings
from engine.backends.base import Backend
from engine.metrics import MetricsServer
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
    assert "spaces: requests since the engine started" in shown
    assert row(shown, "alpha").split()[:7] == ["alpha", "-", "2", "2", "0", "0", "0"]
    assert "2 articles" in row(shown, "alpha")
    assert row(shown, "beta").split()[:4] == ["beta", "-", "1", "1"]
    assert "waiting requests are not counted by space" in shown


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
    assert row(shown, "shop").split()[:7] == ["shop", "answering", "7", "5", "1", "0", "0"]
    assert row(shown, "docs").split()[:3] == ["docs", "rescraping", "1"]
    assert row(shown, "default").split()[:3] == ["default", "-", "4"]
    assert "3 articles, 9 passages, last rescrape never" in row(shown, "shop")


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
