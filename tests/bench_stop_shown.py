"""How long a 🛑 takes to show "stopped" on Discord, as the asker sees it (docs/benchmarks.md).

Not part of the suite (its name is not ``test_*.py``): run it by naming it,

    CONCIERGE_STOP_RUNS=8 .venv/bin/pytest tests/bench_stop_shown.py -s -p no:cacheprovider

The real engine and model answer a long question through RabbitMQ; the real discord.py bot
streams it into the fake Discord, which answers edits as Discord does (5 per 5 s in a channel,
``tests/discord_bucket.py``), at the adapter's own pace (``EDIT_INTERVAL_S``). Once the answer
streams, the asker's 🛑 comes at a different moment of Discord's window each run. Per run:
when the engine's ``cancelled`` reached the bot (and how much of that the engine took to stop
its generation), when the edit saying "stopped" reached Discord, whether "stopping…" came
first; then the medians, as one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import asdict, dataclass

import discord
import pytest

from bots.discord import adapter
from broker.protocol import Cancelled, ReplyEvent
from config.settings import Settings
from tests import discord_fixture as base
from tests.conftest import LONG_QUESTION
from tests.discord_bucket import RateLimitedDiscord
from tests.discord_fixture import ASKER, Harness, StartBot, StartEngine, answering, split_footer
from tests.fake_discord import FakeDiscord, start

RUNS = int(os.environ.get("CONCIERGE_STOP_RUNS", "8"))
# The adapter's own pace, read before the tests' settings set it to 0.05 s; the variable
# measures another (1.0: the pace before it left room in Discord's window for the end).
EDIT_INTERVAL_S = float(os.environ.get("CONCIERGE_STOP_EDIT_INTERVAL_S", adapter.EDIT_INTERVAL_S))

engine_for = base.engine_for
start_bot = base.start_bot


@pytest.fixture
async def fake_discord(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeDiscord]:
    fake = RateLimitedDiscord()
    server = await start(fake)
    monkeypatch.setattr(discord.http.Route, "BASE", fake.base)
    yield fake
    await server.close()


@dataclass(frozen=True)
class Run:
    """One stop, in seconds from the 🛑."""

    confirmed_s: float  # the engine's ``cancelled`` reached the bot
    engine_stop_s: float  # of which the engine's own: its cancel taken to its generation's end
    stopped_shown_s: float  # the edit saying "stopped" reached Discord
    stopping_shown: bool
    refused_edits: int  # answered 429


async def test_measure_the_stop_as_the_asker_sees_it(
    settings: Settings,
    start_bot: StartBot,
    engine_for: StartEngine,
    fake_discord: RateLimitedDiscord,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(adapter, "EDIT_INTERVAL_S", EDIT_INTERVAL_S)
    settings = settings.model_copy(update={"max_tokens": 400, "answer_paragraphs": 0})
    await engine_for(settings)
    discord_ = await start_bot(settings)
    confirmations: dict[str, tuple[float, float]] = {}  # when it came, the engine's stop
    registry = discord_.bot.concierge.sessions
    deliver = registry.deliver

    def noting(event: ReplyEvent) -> bool:
        if isinstance(event, Cancelled):
            confirmations[event.session_id] = (time.monotonic(), event.stop_latency_s or 0.0)
        return deliver(event)

    monkeypatch.setattr(registry, "deliver", noting)
    runs = [await _one_stop(discord_, fake_discord, confirmations, n) for n in range(RUNS)]
    _report([run for run in runs if run is not None])


async def _one_stop(
    discord_: Harness,
    fake: RateLimitedDiscord,
    confirmations: dict[str, tuple[float, float]],
    n: int,
) -> Run | None:
    tap = discord_.tap
    question_id = discord_.ask(ASKER, LONG_QUESTION)
    await tap.until(lambda: len([r for r in tap.requests if r.user_id == ASKER["id"]]) > n)
    request = [r for r in tap.requests if r.user_id == ASKER["id"]][n]
    first_id = await discord_.first_reply(question_id)
    await answering(discord_, first_id)
    await asyncio.sleep(0.3 + (n % 8) * 0.6)  # over Discord's 5 s window, a moment each run
    refused_before = fake.refused()
    reacted_at = time.monotonic()
    discord_.react(ASKER, first_id)
    shown = await discord_.finished(first_id)
    await discord_.let_go()
    if shown.footer != "🛑 stopped" or request.session_id not in confirmations:
        print(f"run {n}: ended before the stop ({shown.footer})")
        return None
    footers = [(c.at, split_footer(c.body["content"])[1]) for c in fake.edits(first_id)]
    confirmed_at, engine_stop_s = confirmations[request.session_id]
    return Run(
        confirmed_s=confirmed_at - reacted_at,
        engine_stop_s=engine_stop_s,
        stopped_shown_s=next(at for at, f in footers if f == "🛑 stopped") - reacted_at,
        stopping_shown=any(footer.startswith("🛑 stopping") for _, footer in footers),
        refused_edits=fake.refused() - refused_before,
    )


def _report(runs: list[Run]) -> None:
    for n, run in enumerate(runs):
        print(f"run {n}: " + json.dumps(_rounded(asdict(run))))
    if not runs:
        pytest.fail("no run was stopped while it ran")
    after = [run.stopped_shown_s - run.confirmed_s for run in runs]
    summary = {
        "edit_interval_s": EDIT_INTERVAL_S,
        "runs": len(runs),
        "median_stopped_shown_s": statistics.median(run.stopped_shown_s for run in runs),
        "median_confirmed_s": statistics.median(run.confirmed_s for run in runs),
        "median_engine_stop_s": statistics.median(run.engine_stop_s for run in runs),
        "median_shown_after_confirmed_s": statistics.median(after),
        "max_shown_after_confirmed_s": max(after),
        "stopping_shown": sum(run.stopping_shown for run in runs),
        "refused_edits": sum(run.refused_edits for run in runs),
    }
    print(json.dumps(_rounded(summary)))


def _rounded(figures: Mapping[str, object]) -> dict[str, object]:
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in figures.items()}
