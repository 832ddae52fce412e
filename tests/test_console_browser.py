"""The console's page in a real browser (Debian's chromium, driven by Playwright), against the
real broker, engine and model: it loads cleanly, shows the queue move, stops an answer, refuses
an action without the token, and its demo shows where a cancel goes.

It takes a screenshot of each view, into ``$CONSOLE_SCREENSHOTS`` when set (the ones in docs/:
``CONSOLE_SCREENSHOTS=docs pytest tests/test_console_browser.py``), else into the test's
temporary directory, so a test run leaves the work tree as it was."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import (
    Browser,
    ConsoleMessage,
    Locator,
    Page,
    async_playwright,
    expect,
)

from bots.ask import Ask
from bots.client import ConciergeClient
from cli.console.demo import DemoConfig
from config.settings import Settings
from tests.conftest import LONG_QUESTION, RunningEngine
from tests.console_fixture import TOKEN, running_console
from tests.helpers import collect, wait_for_tokens

CHROMIUM = Path("/usr/bin/chromium")
WAIT_MS = 60_000
DEMO = DemoConfig(filler_tokens=4)  # the benchmark's 160 tokens: about 2 s to press Cancel
REFUSED_LOAD = "status of 401"  # how chromium reports a refused request in the console

expect.set_options(timeout=WAIT_MS)  # the machine may be shared: waits are on conditions
pytestmark = pytest.mark.skipif(
    shutil.which(str(CHROMIUM)) is None,
    reason="Debian's chromium is not installed (apt-get install -y chromium)",
)


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where the screenshots go."""
    chosen = os.environ.get("CONSOLE_SCREENSHOTS")
    return Path(chosen).resolve() if chosen else tmp_path


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=str(CHROMIUM))
        yield launched
        await launched.close()


async def open_page(browser: Browser, url: str) -> tuple[Page, list[str]]:
    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            errors.append(message.text)

    page.on("console", on_console)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.set_default_timeout(WAIT_MS)
    await page.goto(url)
    await expect(page.locator("#live.on")).to_be_visible()
    return page, errors


def waiting_row(page: Page, session_id: str) -> Locator:
    return page.locator(f"#waiting tr[data-session='{session_id}']")


def outcome_row(page: Page, session_id: str) -> Locator:
    return page.locator(f"#outcomes tr[data-session='{session_id}']")


async def test_the_queue_view_shows_questions_wait_and_end_and_stops_an_answer(
    settings: Settings,
    long_engine: RunningEngine,
    client: ConciergeClient,
    browser: Browser,
    shots: Path,
) -> None:
    async with running_console(settings, long_engine) as console:
        page, errors = await open_page(browser, console.url)
        assert errors == []

        warm_up = await client.ask(Ask("Say hi.", "ann"))
        await collect(warm_up)
        first = await client.ask(Ask(LONG_QUESTION, "bob"))
        await wait_for_tokens(first, 2)
        queued = [await client.ask(Ask(f"Say hello {n}.", f"user-{n}")) for n in (1, 2, 3)]
        await wait_for_tokens(first, 30)  # some text to show
        running = page.locator(f"#running div.running[data-session='{first.session_id}']")
        await expect(running.locator("pre.answer")).not_to_be_empty()
        for position, session in enumerate(queued, start=1):
            cells = waiting_row(page, session.session_id).locator("td")
            await expect(cells.first).to_have_text(str(position))
        await expect(outcome_row(page, warm_up.session_id)).to_be_visible()
        await page.screenshot(path=shots / "console-queue.png", full_page=True)

        # Without the token the stop is refused, and the answer goes on.
        await running.locator("button.stop").click()
        await expect(page.locator("#message.error")).to_contain_text("401")
        await expect(running).to_be_visible()
        assert [e for e in errors if REFUSED_LOAD not in e] == []

        await page.locator("#token").fill(TOKEN)
        await running.locator("button.stop").click()
        stopped = outcome_row(page, first.session_id)
        await expect(stopped).to_have_attribute("data-outcome", "stopped")
        await expect(stopped).to_contain_text("web-console")
        await expect(running).to_have_count(0)
        for session in queued:  # each leaves the queue once answered
            await expect(outcome_row(page, session.session_id)).to_have_attribute(
                "data-outcome", "done"
            )
            await expect(waiting_row(page, session.session_id)).to_have_count(0)
        for session in [first, *queued]:
            await collect(session)
        assert [e for e in errors if REFUSED_LOAD not in e] == []


async def test_the_demo_stops_at_once_on_its_own_queue_and_never_in_the_request_queue(
    settings: Settings, engine: RunningEngine, browser: Browser, shots: Path
) -> None:
    async with running_console(settings, engine, demo=DEMO) as console:
        page, errors = await open_page(browser, console.url + "#demo")
        await page.locator("#token").fill(TOKEN)
        await page.locator("#depth").fill("5")
        await expect(page.locator("#chart svg circle")).to_have_count(10)  # the published runs

        stopped_b_after = 0
        for key, outcome in (("b", "cancelled"), ("a", "done")):
            pane = page.locator(f"#pane-{key}")
            await pane.locator("button.ask").click()
            await expect(pane.locator("button.cancel")).to_be_enabled()
            await pane.locator("button.cancel").click()
            effect = pane.locator(".effect")
            await expect(effect).to_have_attribute("data-outcome", outcome)
            await expect(pane.locator("mark.cancel-mark")).to_have_count(1)
            await expect(pane).to_have_attribute("data-phase", "ended")
            tokens_after = int(await effect.get_attribute("data-tokens-after") or "-1")
            if key == "b":  # 0 on a quiet machine; on a loaded CI one token was once
                # generated while the cancel was in transit (it took effect in 33 ms)
                assert tokens_after <= 1, await effect.text_content()
                stopped_b_after = tokens_after
            else:  # the answer ran to its end: the engine met the cancel after 5 requests
                assert tokens_after > stopped_b_after + 1, await effect.text_content()
                await expect(effect).to_contain_text("ran to its end")
        await page.screenshot(path=shots / "console-demo.png", full_page=True)
        assert errors == []
