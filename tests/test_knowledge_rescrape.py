"""The knowledge base against a real local website: scraping, stopping and failing rescrapes."""

from __future__ import annotations

import sqlite3
import time
from contextlib import closing
from pathlib import Path

import aiohttp
import pytest

from config.settings import Settings
from engine.knowledge.models import ScrapeProgress
from engine.knowledge.scrape.errors import RescrapeFailed, RescrapeStopped
from engine.knowledge.store import KnowledgeBase
from tests.knowledge_helpers import (
    scrape,
    settings,  # noqa: F401  # the fixture
)
from tests.site_fixture import FakeSite, ForeignSite

ALLOWED_ARTICLES = {"widgets", "gears", "tokyo-office", "holidays"}


def stored_urls(kb_path: Path) -> set[str]:
    with closing(sqlite3.connect(kb_path)) as conn:
        return {url for (url,) in conn.execute("SELECT url FROM articles")}


def slugs(urls: set[str]) -> set[str]:
    return {url.rsplit("/", 1)[-1] for url in urls}


async def test_rescrape_stores_exactly_the_allowed_articles(
    settings: Settings,  # noqa: F811  # the fixture imported above
    site: FakeSite,
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


async def test_boilerplate_is_left_out_of_passages(settings: Settings) -> None:  # noqa: F811  # the fixture imported above
    await scrape(settings)

    passages = KnowledgeBase(settings.kb_path).search("gear ratio conveyor", limit=5)

    assert passages[0].title == "Choosing the right gear ratio"
    assert "ten to one" in passages[0].text
    for unwanted in ("All rights reserved", "Privacy policy", "cookies", "Popular posts"):
        assert unwanted not in passages[0].text


async def test_second_rescrape_downloads_only_what_changed(
    settings: Settings,  # noqa: F811  # the fixture imported above
    site: FakeSite,
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
    settings: Settings,  # noqa: F811  # the fixture imported above
    foreign: tuple[ForeignSite, str],
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
    settings: Settings,  # noqa: F811  # the fixture imported above
    foreign: tuple[ForeignSite, str],
) -> None:
    unset = settings.model_copy(update={"site_allowed_hosts": []})

    result = await scrape(unset)

    assert result.articles == 4
    assert foreign[0].hits == []


async def test_failed_pages_are_counted_and_the_rest_go_on(settings: Settings) -> None:  # noqa: F811  # the fixture imported above
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


async def test_progress_reports_counts_as_it_goes(settings: Settings) -> None:  # noqa: F811  # the fixture imported above
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


async def test_japanese_question_finds_the_japanese_article(settings: Settings) -> None:  # noqa: F811  # the fixture imported above
    await scrape(settings)
    kb = KnowledgeBase(settings.kb_path)

    full_question = kb.search("東京オフィスの営業時間は何時までですか\uff1f", limit=3)
    two_characters = kb.search("渋谷", limit=3)

    assert full_question[0].url.endswith("/articles/tokyo-office")
    assert "午後六時" in full_question[0].text
    assert [p.url for p in two_characters] == [full_question[0].url]


async def test_stopped_rescrape_keeps_the_previous_knowledge_base(
    settings: Settings,  # noqa: F811  # the fixture imported above
    site: FakeSite,
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


async def test_stop_lands_while_a_request_is_in_flight(settings: Settings, site: FakeSite) -> None:  # noqa: F811  # the fixture imported above
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


async def test_first_rescrape_stopped_leaves_no_file(settings: Settings) -> None:  # noqa: F811  # the fixture imported above
    with pytest.raises(RescrapeStopped):
        await scrape(settings, should_stop=lambda: True)

    assert not settings.kb_path.exists()
    assert KnowledgeBase(settings.kb_path).search("widget", limit=3) == []


async def test_unreadable_sitemap_fails_and_keeps_the_previous_knowledge_base(
    settings: Settings,  # noqa: F811  # the fixture imported above
    site: FakeSite,
) -> None:
    await scrape(settings)
    site.failing.add("/sitemap_index.xml")

    with pytest.raises(RescrapeFailed, match=r"sitemap_index\.xml: HTTP 500"):
        await scrape(settings)

    assert slugs(stored_urls(settings.kb_path)) == ALLOWED_ARTICLES


async def test_page_down_for_now_keeps_its_stored_copy(settings: Settings, site: FakeSite) -> None:  # noqa: F811  # the fixture imported above
    await scrape(settings)
    site.failing.add("/articles/gears")

    result = await scrape(settings)

    assert result.failed == 3
    assert result.articles == 4
    hits = KnowledgeBase(settings.kb_path).search("gear ratio", limit=1)
    assert hits[0].url.endswith("/articles/gears")
