"""The knowledge base against a real local website: scraping, switching, searching, prompting."""

from __future__ import annotations

import re
import sqlite3
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import aiohttp
import pytest

from broker.protocol import make_request
from config.settings import Settings
from engine.answering.passages import format_sources, render_passages, select_passages
from engine.answering.pipeline import AnswerPlanner
from engine.answering.prompt import chat_messages
from engine.backends.base import Backend, ChatMessage
from engine.knowledge.models import Passage, ScrapeProgress, ScrapeResult
from engine.knowledge.scrape.discover import parse_feed
from engine.knowledge.scrape.errors import RescrapeFailed, RescrapeStopped
from engine.knowledge.scrape.rescrape import rescrape
from engine.knowledge.store import NO_ARTICLES_MESSAGE, KnowledgeBase
from tests.site_fixture import FakeSite, ForeignSite

ALLOWED_ARTICLES = {"widgets", "gears", "tokyo-office", "holidays"}


@pytest.fixture
def settings(site: FakeSite, tmp_path: Path) -> Settings:
    """Replaces conftest's broker settings here: these tests need only the site and a file."""
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        kb_path=tmp_path / "kb" / "kb.sqlite3",
        site_sitemap_url=f"{site.base}/sitemap_index.xml",
        site_feed_url=f"{site.base}/feed.xml",
        site_allowed_hosts=[site.netloc],
        scrape_delay_s=0.01,
        scrape_timeout_s=5,
    )


async def scrape(
    settings: Settings,
    on_progress: Callable[[ScrapeProgress], None] | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> ScrapeResult:
    return await rescrape(settings, on_progress or (lambda _: None), should_stop)


def stored_urls(kb_path: Path) -> set[str]:
    with closing(sqlite3.connect(kb_path)) as conn:
        return {url for (url,) in conn.execute("SELECT url FROM articles")}


def slugs(urls: set[str]) -> set[str]:
    return {url.rsplit("/", 1)[-1] for url in urls}


async def test_rescrape_stores_exactly_the_allowed_articles(
    settings: Settings, site: FakeSite
) -> None:
    result = await scrape(settings)

    assert slugs(stored_urls(settings.kb_path)) == ALLOWED_ARTICLES
    assert (result.articles, result.fetched) == (4, 4)
    assert result.skipped == 2  # /private/secret by robots.txt, the foreign URL by host
    assert "/private/secret" not in {hit.path for hit in site.hits}
    stats = KnowledgeBase(settings.kb_path).stats()
    assert stats.articles == 4
    assert stats.passages > stats.articles  # the long widget article is split
    assert stats.last_rescrape_at is not None
    assert stats.db_bytes > 0


async def test_boilerplate_is_left_out_of_passages(settings: Settings) -> None:
    await scrape(settings)

    passages = KnowledgeBase(settings.kb_path).search("gear ratio conveyor", limit=5)

    assert passages[0].title == "Choosing the right gear ratio"
    assert "ten to one" in passages[0].text
    for unwanted in ("All rights reserved", "Privacy policy", "cookies", "Popular posts"):
        assert unwanted not in passages[0].text


async def test_second_rescrape_downloads_only_what_changed(
    settings: Settings, site: FakeSite
) -> None:
    await scrape(settings)
    site.hits.clear()
    lang, title, paragraphs = site.articles["/articles/gears"]
    site.articles["/articles/gears"] = (lang, title, [*paragraphs, "Helical gears run quieter."])

    result = await scrape(settings)

    assert site.downloads() == {"/articles/gears"}
    assert {hit.path for hit in site.hits if hit.status == 304} == {
        "/articles/widgets",
        "/articles/tokyo-office",
        "/articles/holidays",
    }
    assert all(hit.conditional for hit in site.hits if hit.status == 304)
    assert (result.fetched, result.unchanged, result.articles) == (1, 3, 4)
    kb = KnowledgeBase(settings.kb_path)
    assert kb.search("helical", limit=1)[0].url.endswith("/articles/gears")
    assert kb.search("warranty serial number", limit=1)[0].url.endswith("/articles/widgets")


async def test_redirect_to_a_foreign_host_is_not_followed(
    settings: Settings, foreign: tuple[ForeignSite, str]
) -> None:
    foreign_site, foreign_base = foreign

    result = await scrape(settings)

    assert foreign_site.hits == []
    reasons = {failure.url.rsplit("/", 1)[-1]: failure.reason for failure in result.failures}
    assert "not an allowed host" in reasons["moved"]
    # The recorder works: the same URL fetched directly does register.
    async with aiohttp.ClientSession() as session, session.get(f"{foreign_base}/stolen") as resp:
        assert resp.status == 200
    assert foreign_site.hits == ["/stolen"]


async def test_allowed_hosts_default_to_the_hosts_of_the_configured_sources(
    settings: Settings, foreign: tuple[ForeignSite, str]
) -> None:
    unset = settings.model_copy(update={"site_allowed_hosts": []})

    result = await scrape(unset)

    assert result.articles == 4
    assert foreign[0].hits == []


async def test_failed_pages_are_counted_and_the_rest_go_on(settings: Settings) -> None:
    result = await scrape(settings)

    assert result.failed == 2
    reasons = {
        failure.url.rsplit("/", 1)[-1]: failure.reason
        for failure in result.failures
        if failure.outcome == "failed"
    }
    assert set(reasons) == {"broken", "moved"}
    assert reasons["broken"] == "HTTP 500"
    assert "2 failed" in result.text


async def test_progress_reports_counts_as_it_goes(settings: Settings) -> None:
    reports: list[ScrapeProgress] = []

    result = await scrape(settings, on_progress=reports.append)

    assert reports[0].phase == "discovering"
    fetching = [report for report in reports if report.phase == "fetching"]
    assert fetching[0].found == 8  # 7 sitemap URLs + 1 more from the feed
    assert fetching[0].done == 0
    assert len(fetching) < 8  # at most one a second, not one a page
    final = fetching[-1]  # the last counts always go out before the next phase
    assert (final.fetched, final.unchanged, final.failed, final.skipped) == (4, 0, 2, 2)
    assert final.text == "Rescrape: 8/8 pages (4 fetched, 0 unchanged, 2 failed, 2 skipped)"
    assert reports[-1].text == (
        "Rescrape: saving 4 articles (4 fetched, 0 unchanged, 2 failed, 2 skipped)…"
    )
    assert result.fetched == final.fetched


async def test_japanese_question_finds_the_japanese_article(settings: Settings) -> None:
    await scrape(settings)
    kb = KnowledgeBase(settings.kb_path)

    full_question = kb.search("東京オフィスの営業時間は何時までですか\uff1f", limit=3)
    two_characters = kb.search("渋谷", limit=3)

    assert full_question[0].url.endswith("/articles/tokyo-office")
    assert "午後六時" in full_question[0].text
    assert [p.url for p in two_characters] == [full_question[0].url]


async def test_stopped_rescrape_keeps_the_previous_knowledge_base(
    settings: Settings, site: FakeSite
) -> None:
    await scrape(settings)
    before = KnowledgeBase(settings.kb_path).stats()
    site.articles["/articles/holidays"] = ("en", "Holidays", ["Closed in August for a boat trip."])
    progressed: list[ScrapeProgress] = []

    with pytest.raises(RescrapeStopped):
        await scrape(
            settings,
            on_progress=progressed.append,
            should_stop=lambda: any("/articles/" in hit.path for hit in site.hits),
        )

    kb = KnowledgeBase(settings.kb_path)
    assert kb.stats() == before
    assert kb.search("boat trip", limit=3) == []
    assert kb.search("New Year holidays", limit=1)[0].url.endswith("/articles/holidays")
    assert max(report.done for report in progressed) < 8
    assert sorted(settings.kb_path.parent.iterdir()) == [settings.kb_path]


async def test_stop_lands_while_a_request_is_in_flight(settings: Settings, site: FakeSite) -> None:
    only_slow = settings.model_copy(
        update={
            "site_sitemap_url": None,
            "site_feed_url": None,
            "site_urls": [f"{site.base}/slow"],
            "scrape_timeout_s": 60.0,
        }
    )
    started = time.monotonic()

    try:
        with pytest.raises(RescrapeStopped):
            await scrape(only_slow, should_stop=site.hanging.is_set)
    finally:
        site.release.set()

    assert time.monotonic() - started < 10  # far sooner than the 60 s request timeout
    assert not settings.kb_path.exists()


async def test_first_rescrape_stopped_leaves_no_file(settings: Settings) -> None:
    with pytest.raises(RescrapeStopped):
        await scrape(settings, should_stop=lambda: True)

    assert not settings.kb_path.exists()
    assert KnowledgeBase(settings.kb_path).search("widget", limit=3) == []


async def test_unreadable_sitemap_fails_and_keeps_the_previous_knowledge_base(
    settings: Settings, site: FakeSite
) -> None:
    await scrape(settings)
    site.failing.add("/sitemap_index.xml")

    with pytest.raises(RescrapeFailed, match=r"sitemap_index\.xml: HTTP 500"):
        await scrape(settings)

    assert slugs(stored_urls(settings.kb_path)) == ALLOWED_ARTICLES


async def test_page_down_for_now_keeps_its_stored_copy(settings: Settings, site: FakeSite) -> None:
    await scrape(settings)
    site.failing.add("/articles/gears")

    result = await scrape(settings)

    assert result.failed == 3
    assert result.articles == 4
    hits = KnowledgeBase(settings.kb_path).search("gear ratio", limit=1)
    assert hits[0].url.endswith("/articles/gears")


async def test_empty_knowledge_base(tmp_path: Path) -> None:
    kb = KnowledgeBase(tmp_path / "missing.sqlite3")

    assert kb.search("anything at all", limit=4) == []
    assert kb.is_empty()
    assert kb.stats().articles == 0
    assert "no articles yet" in NO_ARTICLES_MESSAGE
    assert not (tmp_path / "missing.sqlite3").exists()


def test_the_selected_passages_render_within_the_budget() -> None:
    passages = [
        Passage(title=f"Article {n}", url=f"https://team.example/{n}", text="word " * 100)
        for n in range(5)
    ]

    for budget in (0, 10, 150, 300, 700, 1200, 5000):
        context = render_passages(select_passages(passages, max_chars=budget))
        assert len(context) <= budget
    assert render_passages(select_passages(passages, 5000)).count("[") == 5
    small = render_passages(select_passages(passages, 300))
    assert small.startswith("[1] Article 0 (https://team.example/0)\n")
    assert small.endswith("…")
    assert select_passages(passages, 1200) == passages[:2]  # no room left worth a cut
    cut = select_passages(passages, 1400)  # two whole, then 270 characters of the third
    assert cut[:2] == passages[:2]
    assert len(cut) == 3
    assert cut[2].text.endswith("…")


def test_format_sources_lists_each_article_once() -> None:
    passages = [
        Passage(title="Widgets", url="https://team.example/widgets", text="a"),
        Passage(title="Gears", url="https://team.example/gears", text="b"),
        Passage(title="Widgets", url="https://team.example/widgets", text="c"),
    ]

    assert format_sources(passages) == (
        "Sources:\n- Widgets <https://team.example/widgets>\n- Gears <https://team.example/gears>"
    )
    assert format_sources([]) == ""


async def test_sources_name_the_article_that_answered(settings: Settings, site: FakeSite) -> None:
    await scrape(settings)

    passages = KnowledgeBase(settings.kb_path).search("widget warranty", limit=2)

    assert format_sources(passages) == (
        f"Sources:\n- The widget warranty explained <{site.base}/articles/widgets>"
    )


async def test_a_prompt_shows_the_model_the_passages_it_cites(
    settings: Settings, site: FakeSite, backend: Backend
) -> None:
    await scrape(settings)
    request = make_request(reply_to="b", user_id="u", question="widget warranty?", ttl_s=30)

    prompt = AnswerPlanner(settings, backend.count_tokens).plan(request)

    system, question = prompt.messages
    assert system == ChatMessage("system", settings.system_prompt)
    assert question.role == "user" and question.content.endswith("\n\nQuestion: widget warranty?")
    cited = list(prompt.sources)
    shown = re.findall(r"^\[\d+\] .* \((http[^)]+)\)$", question.content, re.MULTILINE)
    assert cited == [f"{site.base}/articles/widgets"]  # the one article that covers it
    assert cited == list(dict.fromkeys(shown))  # only what it cites is shown


async def test_a_prompt_from_an_empty_knowledge_base_is_the_question_and_a_note(
    tmp_path: Path, backend: Backend
) -> None:
    settings = Settings(_env_file=None, kb_path=tmp_path / "none.sqlite3")  # type: ignore[call-arg]
    question = "What are the office hours?"  # ("Hello?" is small talk: no model, no note)
    request = make_request(reply_to="b", user_id="u", question=question, ttl_s=30)

    prompt = AnswerPlanner(settings, backend.count_tokens).plan(request)

    assert prompt.messages == chat_messages(settings.system_prompt, question)
    assert prompt.note == NO_ARTICLES_MESSAGE and prompt.not_on_site


def test_chat_messages_are_system_then_history_then_articles_and_question() -> None:
    earlier = [ChatMessage("user", "Hi"), ChatMessage("assistant", "Hello!")]

    messages = chat_messages("Be brief.", "And now?", articles="[1] A (u)\ntext", history=earlier)

    assert [message.role for message in messages] == ["system", "user", "assistant", "user"]
    assert messages[0] == ChatMessage("system", "Be brief.")  # the same for every question
    assert messages[1:3] == earlier
    assert "[1] A (u)\ntext" in messages[-1].content
    assert messages[-1].content.endswith("\n\nQuestion: And now?")
    assert chat_messages("Be brief.", "Q") == [
        ChatMessage("system", "Be brief."),
        ChatMessage("user", "Q"),
    ]


def test_atom_feed_links_are_found() -> None:
    from xml.etree import ElementTree

    atom = ElementTree.fromstring(
        '<feed xmlns="http://www.w3.org/2005/Atom"><entry><title>A</title>'
        '<link rel="alternate" href="/posts/a"/><link rel="edit" href="/edit/a"/></entry>'
        '<entry><link href="https://team.example/posts/b"/></entry></feed>'
    )

    assert parse_feed(atom, base_url="https://team.example/feed.atom") == [
        "https://team.example/posts/a",
        "https://team.example/posts/b",
    ]
