"""What the grounded answer tests share: the guide's articles, its client, asking and replaying."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bots.ask import Ask
from bots.client import ConciergeClient
from broker.amqp import Broker
from broker.protocol import Done, ReplyEvent
from config.settings import Settings
from engine.backends.base import Backend, ChatMessage, GenerationLimits, Pieces, ShouldStop
from engine.cancelled import CancelledSessions
from engine.generation.loop import Generation, run_token_loop
from engine.knowledge.models import Article
from engine.knowledge.scrape.builder import build_kb
from engine.knowledge.scrape.extract import extract_article
from tests.conftest import start_engine
from tests.helpers import collect

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "eval" / "site" / "articles"
BASE = "https://guide.example/articles"


def site_articles() -> list[Article]:
    """eval/site's articles, extracted as a rescrape extracts them."""
    articles = []
    for page in sorted(SITE.glob("*.html")):
        url = f"{BASE}/{page.name}"
        articles.append(extract_article(page.read_bytes(), url).article(url))
    return articles


@pytest.fixture
async def site_client(
    settings: Settings, backend: Backend, broker: Broker
) -> AsyncIterator[ConciergeClient]:
    """A client of an engine whose knowledge base holds the test site (eval/site)."""
    build_kb(settings.kb_path, settings.kb_path, site_articles(), [], datetime.now(UTC))
    engine = await start_engine(settings, backend)
    async with ConciergeClient(settings, "test") as client:
        yield client
    await engine.stop()


async def ask(client: ConciergeClient, question: str) -> tuple[Done, list[ReplyEvent]]:
    events = await collect(await client.ask(Ask(question, "u1")), timeout_s=120)
    end = events[-1]
    assert isinstance(end, Done), end
    return end, events


# --- the token loop ------------------------------------------------------------------------


class Replay:
    """A backend that yields the given pieces, as the model did (a fake of llama.cpp only)."""

    def __init__(self, pieces: Sequence[str]) -> None:
        self.pieces = pieces
        self.taken = 0

    def stream(
        self, messages: list[ChatMessage], should_stop: ShouldStop, limits: GenerationLimits
    ) -> Pieces:
        for piece in self.pieces[: limits.max_tokens]:
            self.taken += 1
            yield piece
        return "length" if len(self.pieces) >= limits.max_tokens else "stop"

    def count_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return 0


def replay(
    pieces: Sequence[str], max_tokens: int = 512, paragraphs: int = 0, label: str = ""
) -> tuple[Generation, list[str], Replay]:
    backend = Replay(pieces)
    emitted: list[str] = []
    generation = Generation("s", time_limit_at=float("inf"))
    run_token_loop(
        backend,
        [ChatMessage("user", "q")],
        generation,
        CancelledSessions(10, 60),
        emitted.append,
        GenerationLimits(max_tokens=max_tokens),
        paragraphs,
        label,
    )
    return generation, emitted, backend
