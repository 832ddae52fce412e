"""The web console with spaces (docs/spaces.md): its knowledge-base card gets each space's
knowledge base, from the engine's ``/healthz`` or, with no engine answering, from each space's
file; a rescrape from the console rebuilds the space it names, and only that one. Without
spaces the card gets ``default``'s alone, as before. (The page itself is drawn by
console.js; tests/test_console_browser.py drives it where chromium is installed.)"""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from broker.amqp import Broker
from cli.console.state import ConsoleState
from cli.console.watch import EngineWatch, reported_spaces
from cli.status import Health
from config.settings import Settings
from engine.backends.base import Backend
from tests.conftest import start_engine
from tests.console_fixture import TOKEN, StateStream, running_console

AUTH = {"Authorization": f"Bearer {TOKEN}"}
PAGES = {
    "alpha": "# Warranty\n\nThe Alpha widget warranty lasts two years from the day of purchase.\n",
    "beta": "# Returns\n\nBeta takes a gadget back within thirty days of its delivery.\n",
}


@pytest.fixture
def spaces_settings(settings: Settings, tmp_path: Path) -> Settings:
    """Two folder spaces, one page each, beside their spaces file."""
    tables = []
    for space, text in PAGES.items():
        (tmp_path / space).mkdir()
        (tmp_path / space / "page.md").write_text(text)
        tables.append(f'[spaces.{space}]\nsite_dir = "{space}"\nsystem_prompt = "{space}"\n')
    (tmp_path / "spaces.toml").write_text("\n".join(tables))
    return settings.model_copy(update={"spaces_file": tmp_path / "spaces.toml"})


def kb_path(settings: Settings, space: str) -> Path:
    path = settings.kb_path
    return path.with_name(f"{path.stem}.{space}{path.suffix}")


async def test_the_card_gets_each_space_and_a_rescrape_rebuilds_the_one_named(
    spaces_settings: Settings, backend: Backend, broker: Broker
) -> None:
    engine = await start_engine(spaces_settings, backend)
    try:
        async with (
            running_console(spaces_settings, engine) as console,
            aiohttp.ClientSession() as http,
        ):
            stream = await StateStream().open(console.url)
            try:
                state = await stream.until(lambda s: bool(s["kb_spaces"]))
                assert list(state["kb_spaces"]) == ["default", "alpha", "beta"]
                assert {kb["source"] for kb in state["kb_spaces"].values()} == {"engine"}
                assert state["kb_spaces"]["alpha"]["path"] == str(
                    kb_path(spaces_settings, "alpha").resolve()
                )
                assert state["kb"]["path"] == str(spaces_settings.kb_path.resolve())  # as before

                body = {"space": "gamma"}
                async with http.post(console.url + "api/rescrape", json=body, headers=AUTH) as no:
                    assert no.status == 400
                    assert "the spaces are default, alpha, beta" in (await no.json())["error"]
                body = {"space": "alpha"}
                async with http.post(console.url + "api/rescrape", json=body, headers=AUTH) as ok:
                    assert ok.status == 200
                state = await stream.until(lambda s: s["kb_spaces"]["alpha"]["articles"] == 1)
                assert state["kb_spaces"]["alpha"]["last_rescrape"]
                assert state["kb_spaces"]["beta"]["articles"] == 0
                assert state["kb_spaces"]["beta"]["last_rescrape"] is None
            finally:
                await stream.close()
    finally:
        await engine.stop()
    assert not kb_path(spaces_settings, "beta").exists()


async def test_with_no_engine_each_space_file_is_read_and_without_spaces_none_is(
    spaces_settings: Settings, settings: Settings
) -> None:
    kb_path(spaces_settings, "alpha").write_bytes(b"")  # there, not yet a knowledge base
    watch = EngineWatch(spaces_settings, Broker(spaces_settings), ConsoleState(), lambda: None)

    default, by_space = await watch.knowledge(None)

    assert default is not None and default["missing"] and default["source"] == "local"
    assert by_space is not None and list(by_space) == ["default", "alpha", "beta"]
    assert by_space["alpha"]["source"] == "local" and by_space["alpha"]["articles"] == 0
    assert by_space["beta"]["missing"]
    plain = EngineWatch(settings, Broker(settings), ConsoleState(), lambda: None)
    assert (await plain.knowledge(None))[1] is None  # no spaces file: the card as it was
    only_default: Health = {"knowledge_base": {}, "spaces": {"default": {"knowledge_base": {}}}}
    assert reported_spaces(only_default) is None
