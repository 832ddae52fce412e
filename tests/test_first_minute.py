"""The first minute: ``concierge up`` with no site configured offers the sample site, reads it
on the first /rescrape, and answers the next question from it with its source."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from broker.amqp import Broker
from cli.sample_site import SAMPLE_DIR, SAMPLE_QUESTION
from config.settings import Settings
from tests.cli_fixture import cli_env
from tests.terminal_fixture import (
    Terminal,
    terminals,  # noqa: F401  # the fixture
)

ENTER, CTRL_D = "\r", "\x04"


async def test_with_no_site_the_chat_reads_the_sample_and_answers_from_it(
    settings: Settings,
    broker: Broker,
    terminals: Callable[..., Terminal],  # noqa: F811  # the fixture imported above
    tmp_path: Path,
) -> None:
    kb_path = tmp_path / "kb.sqlite3"
    env = cli_env(settings, CONCIERGE_KB_PATH=str(kb_path), CONCIERGE_MAX_TOKENS="48")
    chat = terminals("up", env=env, cwd=tmp_path)
    await chat.shows(r"(?m)^you>")
    assert "No site is configured yet: type /rescrape to read the sample site" in chat.text()

    chat.send(f"/rescrape{ENTER}")
    await chat.shows(r"Rescrape done: 10 articles in the knowledge base")
    chat.send(f"{SAMPLE_QUESTION}{ENTER}")
    await chat.shows(r"(?m)^done( ·|$)")
    chat.send(CTRL_D)
    assert await chat.exit_code() == 0

    answer = chat.text().split(f"you> {SAMPLE_QUESTION}", 1)[1]
    assert "16:50" in answer
    assert (SAMPLE_DIR / "ferry-timetable.html").as_uri() in answer.replace("\n", "")
    assert not kb_path.exists()  # the operator's own knowledge base is never the sample's
    assert kb_path.with_suffix(".sample.sqlite3").exists()

    again = terminals("up", env=env, cwd=tmp_path)  # the next start: the sample answers
    await again.shows(r"(?m)^you>")
    assert "Answering from the sample site" in again.text()
    again.send(CTRL_D)  # a chat that leaves deletes its reply queue
    assert await again.exit_code() == 0


async def test_with_a_site_configured_nothing_of_the_sample_appears(
    settings: Settings,
    broker: Broker,
    terminals: Callable[..., Terminal],  # noqa: F811  # the fixture imported above
    tmp_path: Path,
) -> None:
    env = cli_env(settings, CONCIERGE_SITE_DIR=str(tmp_path))
    chat = terminals("up", env=env, cwd=tmp_path)
    await chat.shows(r"(?m)^you>")
    chat.send(CTRL_D)
    assert await chat.exit_code() == 0
    assert "sample" not in chat.text()
