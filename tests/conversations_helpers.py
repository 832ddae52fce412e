"""What the follow-up question tests share: turns, the Discord fake's ids and the engine."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest

from bots.history import Said
from broker.amqp import Broker
from broker.protocol import HistoryTurn
from config.settings import Settings
from tests.conftest import start_engine

SOURCES = "\n\nSources:\n- Ferries <https://ex.com/ferry>\n- Fares <https://ex.com/fares>"


def user(text: str, who: str = "U1", name: str = "Ann") -> Said:
    return Said(text, who, name)


def bot(text: str, footer: str = "✅ done") -> Said:
    return Said(text, by_bot=True, footer=footer)


def turns(*pairs: tuple[str, str]) -> tuple[HistoryTurn, ...]:
    return tuple(HistoryTurn(role=role, text=text) for role, text in pairs)  # type: ignore[arg-type]


_ids = itertools.count(1_500_000_000_000_000_000)


@pytest.fixture
async def engine_running(settings: Settings, backend: Any, broker: Broker) -> AsyncIterator[None]:
    running = await start_engine(settings, backend)
    yield
    await running.stop()
