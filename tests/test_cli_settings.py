"""The ``concierge`` command's settings, kb stats, help and version."""

from __future__ import annotations

import argparse
import asyncio
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

import pytest

from cli.kb import kb_stats
from config.settings import Settings
from engine.feedback.store import AnswerRecord, FeedbackStore, Vote
from engine.knowledge.scrape.builder import build_kb
from tests.cli_fixture import ROOT, cli_env, concierge
from tests.grounded_fixture import site_articles


async def test_list_settings_written_with_commas_are_read(settings: Settings) -> None:
    env = cli_env(
        settings,
        CONCIERGE_SITE_URLS="https://example.com/a",
        CONCIERGE_SITE_ALLOWED_HOSTS="example.com",
        CONCIERGE_ADMIN_USER_IDS="123,456",
    )
    process = await concierge("kb", "stats", env=env)
    stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert stderr.decode() == ""
    assert "no knowledge base at" in stdout.decode()  # got past the settings to the command
    assert process.returncode == 1


async def test_an_invalid_list_setting_is_one_line_naming_the_variable(settings: Settings) -> None:
    env = cli_env(settings, CONCIERGE_ADMIN_USER_IDS='["123", ')
    process = await concierge("kb", "stats", env=env)
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 78
    [line] = stderr.decode().splitlines()
    assert "CONCIERGE_ADMIN_USER_IDS" in line


async def test_kb_stats_lists_the_articles_with_the_most_thumbs_down(
    settings: Settings, tmp_path: Path
) -> None:
    articles = site_articles()
    build_kb(settings.kb_path, settings.kb_path, articles, [], datetime.now(UTC))
    ferry = next(article for article in articles if "ferry" in article.url)
    unknown = "https://guide.example/articles/gone-since.html"  # cited, not in the knowledge base
    feedback_path = tmp_path / "feedback.sqlite3"
    store = FeedbackStore(feedback_path)
    given: list[tuple[str, Vote]] = [(ferry.url, "down"), (ferry.url, "down"), (unknown, "up")]
    for n, (cites, vote) in enumerate(given):
        store.record_answer(AnswerRecord(f"answer-{n}", "done", (cites,), "slack", 1.0))
        store.vote(f"answer-{n}", "u1", vote, "slack", 1.0)
    store.vote("answer-1", "u2", "up", "slack", 1.0)
    store.record_answer(AnswerRecord("answer-9", "done", (unknown,), "slack", 1.0))
    store.vote("answer-9", "u1", "down", "slack", 1.0)
    store.close()

    voted = await concierge(
        "kb", "stats", env=cli_env(settings, CONCIERGE_FEEDBACK_PATH=str(feedback_path))
    )
    voted_out, voted_err = await asyncio.wait_for(voted.communicate(), 30)

    assert voted.returncode == 0, voted_err.decode()
    lines = voted_out.decode().splitlines()
    assert "5 votes" in lines[1] and "the articles with the most 👎" in lines[1]
    rows = [line for line in lines if "│" in line]
    cells = [[cell.strip() for cell in row.split("│")[1:-1]] for row in rows]
    assert cells == [
        [ferry.title, "2", "1", "2"],  # 2 answers cite it; one got 👎 and 👍 from two people
        [ferry.url, "", "", ""],
        [unknown, "1", "1", "2"],  # no title: not in the knowledge base
    ]


def test_kb_stats_says_plainly_when_there_are_no_votes_yet(
    settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_kb(settings.kb_path, settings.kb_path, site_articles(), [], datetime.now(UTC))
    missing = tmp_path / "no-feedback-yet.sqlite3"

    assert kb_stats(settings.model_copy(update={"feedback_path": missing})) == 0

    shown = capsys.readouterr().out
    assert f"{len(site_articles())} articles" in shown
    assert f"feedback: no votes yet in {missing}" in shown
    assert not missing.exists()  # looking never makes the file


EMPTY_LINES = {"CONCIERGE_THREADS": "", "CONCIERGE_MODEL_PATH": "", "CONCIERGE_DISCORD_TOKEN": ""}


async def test_empty_lines_copied_from_env_example_mean_unset(settings: Settings) -> None:
    """An empty token is no token: the Discord command says it is not set (no login tried)."""
    process = await concierge("discord", env=cli_env(settings, **EMPTY_LINES))
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 78
    assert stderr.decode().splitlines() == [
        "concierge: discord_token (CONCIERGE_DISCORD_TOKEN): not set"
    ]


async def test_empty_lines_in_dot_env_mean_unset(settings: Settings, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("".join(f"{name}=\n" for name in EMPTY_LINES))
    process = await concierge("discord", env=cli_env(settings), cwd=tmp_path)
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 78
    assert "CONCIERGE_DISCORD_TOKEN): not set" in stderr.decode()


async def test_a_model_file_that_is_not_gguf_is_one_line_naming_it(settings: Settings) -> None:
    not_a_model = ROOT / "README.md"
    env = cli_env(settings, CONCIERGE_MODEL_PATH=str(not_a_model))
    process = await concierge("engine", env=env)
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 78
    [line] = stderr.decode().splitlines()
    assert "CONCIERGE_MODEL_PATH" in line
    assert f"{not_a_model} is not a GGUF model file" in line


@pytest.mark.parametrize(
    ("args", "shown"),
    [((), ["engine", "chat", "status", "kb", "bench"]), (("kb",), ["stats", "search"])],
)
async def test_without_a_command_the_help_is_printed(
    settings: Settings, args: tuple[str, ...], shown: list[str]
) -> None:
    process = await concierge(*args, env=cli_env(settings))
    stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 2
    assert "required" not in stderr.decode()
    assert stdout.decode().startswith("usage: concierge")
    for command in shown:
        assert f"\n    {command} " in stdout.decode()


async def test_version_prints_the_package_version(settings: Settings) -> None:
    process = await concierge("--version", env=cli_env(settings))
    stdout, _ = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0
    assert stdout.decode().strip() == f"concierge {version('concierge')}"


def test_every_command_and_option_has_a_description() -> None:
    from cli.main import build_parser

    missing: list[str] = []

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if not action.help:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
            if isinstance(action, argparse._SubParsersAction):
                described = {choice.dest for choice in action._choices_actions if choice.help}
                for name, subparser in action.choices.items():
                    if name not in described:
                        missing.append(f"{path} {name}")
                    walk(subparser, f"{path} {name}")

    walk(build_parser(), "concierge")
    assert missing == []
