"""``concierge kb search`` and ``kb stats`` in a pipe: nothing cut to a width, and ``--json``
with its documented shape. The command runs as a process with stdout a pipe, as in a script."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from config.settings import Settings
from engine.feedback.store import AnswerRecord, FeedbackStore
from engine.knowledge.models import Article
from engine.knowledge.scrape.builder import build_kb
from tests.cli_fixture import cli_env, concierge

# Longer than 80 columns by itself: rich, assuming 80 in a pipe, used to cut it with "…".
LONG_URL = "http://127.0.0.1:51467/articles/" + "the-widget-warranty-explained-" * 4 + "end"
WARRANTY = Article(
    url=LONG_URL,
    title="The widget warranty",
    text="Every widget has a warranty of three years. The warranty covers repairs and parts.",
)
BUILT_AT = datetime(2026, 11, 30, 13, 2, 35, tzinfo=UTC)


@pytest.fixture
def kb_settings(tmp_path: Path) -> Settings:
    """No broker here: the knowledge base and the feedback file only."""
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        kb_path=tmp_path / "kb.sqlite3",
        feedback_path=tmp_path / "feedback.sqlite3",
    )
    build_kb(settings.kb_path, settings.kb_path, [WARRANTY], [], BUILT_AT)
    return settings


def piped_env(settings: Settings) -> dict[str, str]:
    """As a script runs it: no ``COLUMNS`` to go by (cli_env sets one for the tables)."""
    env = cli_env(settings)
    del env["COLUMNS"]
    return env


async def run(settings: Settings, *args: str) -> tuple[int, str, str]:
    process = await concierge("kb", *args, env=piped_env(settings))
    stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, stdout.decode(), stderr.decode()


async def test_search_in_a_pipe_prints_a_long_address_whole(kb_settings: Settings) -> None:
    code, out, err = await run(kb_settings, "search", "widget warranty")
    assert code == 0, err
    assert LONG_URL in out.replace("│", " ").split()  # on one line, not wrapped or cut
    assert "…" not in out
    assert "higher" in out  # still the table a person reads


async def test_search_json_holds_each_passage_whole(kb_settings: Settings) -> None:
    code, out, err = await run(kb_settings, "search", "widget warranty", "--json")
    assert code == 0, err
    document = json.loads(out)
    assert document["path"] == str(kb_settings.kb_path.resolve())
    assert document["words"] == "widget warranty"
    [passage] = document["passages"]
    assert set(passage) == {"similarity", "title", "heading", "url", "article_url", "text"}
    assert passage["url"].startswith(LONG_URL) and passage["article_url"] == LONG_URL
    assert passage["title"] == WARRANTY.title
    assert "three years" in passage["text"]
    assert isinstance(passage["similarity"], float)


async def test_search_json_without_a_match_is_still_json(kb_settings: Settings) -> None:
    code, out, _ = await run(kb_settings, "search", "zzqx", "--json")
    assert code == 1
    assert json.loads(out)["passages"] == []


async def test_stats_json_holds_the_counts_and_the_most_thumbs_down(
    kb_settings: Settings,
) -> None:
    store = FeedbackStore(kb_settings.feedback_path)
    store.record_answer(AnswerRecord("answer-1", "done", (LONG_URL,), "slack", 1.0))
    store.vote("answer-1", "u1", "down", "slack", 1.0)
    store.close()

    code, out, err = await run(kb_settings, "stats", "--json")

    assert code == 0, err
    document = json.loads(out)
    assert document["knowledge_base"] == {
        "path": str(kb_settings.kb_path.resolve()),
        "exists": True,
        "articles": 1,
        "passages": document["knowledge_base"]["passages"],
        "last_rescrape": "2026-11-30T13:02:35Z",
        "bytes": kb_settings.kb_path.stat().st_size,
    }
    assert document["knowledge_base"]["passages"] >= 1
    assert document["feedback"] == {
        "path": str(kb_settings.feedback_path.resolve()),
        "votes": 1,
        "most_downvoted": [
            {"url": LONG_URL, "title": WARRANTY.title, "down": 1, "up": 0, "answers": 1}
        ],
    }


async def test_stats_in_a_pipe_prints_a_long_address_whole(kb_settings: Settings) -> None:
    store = FeedbackStore(kb_settings.feedback_path)
    store.record_answer(AnswerRecord("answer-1", "done", (LONG_URL,), "slack", 1.0))
    store.vote("answer-1", "u1", "down", "slack", 1.0)
    store.close()

    code, out, err = await run(kb_settings, "stats")

    assert code == 0, err
    assert LONG_URL in out.replace("│", " ").split()
    assert "…" not in out


async def test_stats_json_without_a_knowledge_base_says_so_on_stderr(tmp_path: Path) -> None:
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        kb_path=tmp_path / "none.sqlite3",
        feedback_path=tmp_path / "no-feedback.sqlite3",
    )
    code, out, err = await run(settings, "stats", "--json")
    assert code == 1
    document = json.loads(out)
    assert document["knowledge_base"]["exists"] is False
    assert document["feedback"] == {
        "path": str(settings.feedback_path.resolve()),
        "votes": 0,
        "most_downvoted": [],
    }
    assert "no knowledge base at" in err
