"""The console's page with spaces (docs/spaces.md), in a real browser (as
tests/test_console_browser.py): the knowledge-base card lists every space with its own
Rescrape, which rebuilds that space alone, and the queue's share says what waits in each.

tests/test_console_spaces.py checks the state the console sends; this checks that console.js
draws it. The engine's model is a stand-in that holds its one answer until told: what waits
behind it is then the queue's share, and no real answer is needed for that."""

from __future__ import annotations

import re
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, Locator, Page, expect

from bots.ask import Ask
from bots.client import ConciergeClient
from broker.amqp import Broker
from config.settings import Settings
from engine.backends.base import ChatMessage, GenerationLimits, Pieces, ShouldStop
from engine.knowledge.store import KnowledgeBase
from tests.conftest import start_engine
from tests.console_fixture import TOKEN, running_console
from tests.helpers import collect, wait_for_tokens
from tests.test_console_browser import (
    CHROMIUM,
    browser,  # noqa: F401  # the fixture
    open_page,
    shots,  # noqa: F401  # the fixture
)
from tests.test_console_spaces import (
    kb_path,
    spaces_settings,  # noqa: F401  # the fixture
)

HOLD_S = 60.0  # the longest the held answer waits for the test to let it end
QUESTION = "What is a gizmo made of?"  # no article answers it: the model is asked

pytestmark = pytest.mark.skipif(
    shutil.which(str(CHROMIUM)) is None,
    reason="Debian's chromium is not installed (apt-get install -y chromium)",
)


class HeldBackend:
    """A model that answers one word, then holds the answer until ``release`` is set: the
    engine stays busy with it, so the requests behind it wait for as long as the test looks
    (and the test needs no real model)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def stream(
        self, messages: list[ChatMessage], should_stop: ShouldStop, limits: GenerationLimits
    ) -> Pieces:
        yield "Held"
        self.release.wait(HOLD_S)
        return "stop"

    def count_tokens(self, messages: Sequence[ChatMessage]) -> int:
        return sum(len(message.content) // 4 + 8 for message in messages)

    async def health(self) -> dict[str, Any]:
        return {"kind": "held", "model": "none"}


def space_item(page: Page, space: str) -> Locator:
    """One space's line on the knowledge-base card."""
    return page.locator(f"#kb-spaces li[data-space='{space}']")


async def test_the_page_shows_each_space_rescrapes_the_one_clicked_and_what_waits_in_each(
    spaces_settings: Settings,  # noqa: F811  # the fixture imported above
    broker: Broker,
    browser: Browser,  # noqa: F811  # the fixture imported above
    shots: Path,  # noqa: F811  # the fixture imported above
) -> None:
    """The card and the queue's share as a person reads them, and a click on one space's
    Rescrape as the only way the page says which space to rebuild."""
    held_model = HeldBackend()
    engine = await start_engine(spaces_settings, held_model)
    try:
        async with (
            running_console(spaces_settings, engine) as console,
            ConciergeClient(spaces_settings, "test") as client,
        ):
            page, errors = await open_page(browser, console.url)

            # The card: every space, default first, each with its own Rescrape.
            items = page.locator("#kb-spaces li")
            await expect(items).to_have_count(3)
            assert [await item.get_attribute("data-space") for item in await items.all()] == [
                "default",
                "alpha",
                "beta",
            ]
            for space in ("default", "alpha", "beta"):
                item = space_item(page, space)
                await expect(item.locator("strong")).to_have_text(space)
                await expect(item.locator(f"button[data-space='{space}']")).to_have_text("Rescrape")
            await expect(space_item(page, "alpha")).to_contain_text("0 articles")
            await expect(page.locator("#kb-detail")).to_have_text("3 spaces")
            await expect(page.locator("#rescrape")).to_be_hidden()  # the one without spaces

            # alpha's Rescrape rebuilds alpha's knowledge base, and beta's stays unbuilt.
            await page.locator("#token").fill(TOKEN)
            await space_item(page, "alpha").locator("button").click()
            await expect(page.locator("#message")).to_have_text("rescrape asked: alpha")
            await expect(space_item(page, "alpha")).to_contain_text(re.compile(r"\b1 articles"))
            await expect(space_item(page, "alpha")).not_to_contain_text("last rescrape never")
            await expect(space_item(page, "beta")).to_contain_text("0 articles")
            await expect(space_item(page, "beta")).to_contain_text("last rescrape never")
            await expect(page.locator("#kb-articles")).to_have_text("1 articles")
            assert KnowledgeBase(kb_path(spaces_settings, "alpha")).stats().articles == 1
            assert not kb_path(spaces_settings, "beta").exists()

            # What waits, by space, behind an answer the model holds.
            held = await client.ask(Ask(QUESTION, "held-asker"))
            await wait_for_tokens(held, 1)
            queued = [
                await client.ask(Ask(QUESTION, f"asker-{n}", space=space))
                for n, space in enumerate(("alpha", "beta", "alpha", "default"))
            ]
            await expect(page.locator("#waiting-detail")).to_contain_text(
                "by space: alpha 2, beta 1, default 1"
            )
            await expect(page.locator("#waiting-count")).to_have_text("4")
            await page.screenshot(path=shots / "console-spaces.png", full_page=True)

            held_model.release.set()
            for session in [held, *queued]:
                await collect(session)
            await expect(page.locator("#waiting-detail")).not_to_contain_text("by space")
            assert errors == []
    finally:
        held_model.release.set()
        await engine.stop()
