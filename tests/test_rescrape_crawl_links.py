"""A rescrape that crawls from a start page (CONCIERGE_SITE_START_URL), against a local site
with no sitemap and no feed: the same knowledge base as its sitemap gives, as politely."""

from __future__ import annotations

import itertools
import sqlite3
from collections import Counter
from contextlib import closing
from pathlib import Path

import pytest

from config.settings import Settings, load_settings
from engine.knowledge.scrape.addresses import page_address, page_key
from engine.knowledge.scrape.errors import RescrapeFailed
from engine.knowledge.scrape.links import read_hints
from engine.knowledge.scrape.rescrape import describe_site
from tests.linked_site_fixture import BFS_ORDER, DEPTH, LinkedSite, Page
from tests.rescrape_fixture import by_slug, scrape
from tests.site_fixture import ForeignSite


def crawl_settings(site: LinkedSite, kb_path: Path, **changes: object) -> Settings:
    """Crawl from the front page, with no delay: politeness is not the point here."""
    fields: dict[str, object] = {
        "kb_path": kb_path,
        "site_start_url": [f"{site.base}/"],
        "site_allowed_hosts": [site.netloc],
        "scrape_delay_s": 0.0,
        "scrape_timeout_s": 5.0,
    }
    return Settings(_env_file=None, **{**fields, **changes})  # type: ignore[call-arg]


def knowledge(kb_path: Path) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """Each article's title and its passages (heading, text), by path."""
    with closing(sqlite3.connect(kb_path)) as conn:
        titles = dict(conn.execute("SELECT url, title FROM articles"))
        rows = conn.execute("SELECT url, heading, body FROM passages ORDER BY url, seq")
        passages: dict[str, list[tuple[str, str]]] = {url: [] for url in titles}
        for url, heading, body in rows:
            passages[url].append((heading, body))
    return {urlpath(url): (titles[url], passages[url]) for url in titles}


def urlpath(url: str) -> str:
    return "/" + url.split("/", 3)[3]


# --- the same knowledge base as the sitemap --------------------------------------------------


async def test_a_crawl_from_the_front_page_gives_what_the_sitemap_gives(
    linked: LinkedSite, tmp_path: Path
) -> None:
    crawled = await scrape(crawl_settings(linked, tmp_path / "crawled.sqlite3"))
    crawl_hits = linked.page_hits()
    linked.hits.clear()
    linked.sitemap = BFS_ORDER
    from_sitemap = crawl_settings(
        linked,
        tmp_path / "sitemap.sqlite3",
        site_start_url=[],
        site_sitemap_url=f"{linked.base}/sitemap.xml",
    )

    listed = await scrape(from_sitemap)

    assert sorted(knowledge(tmp_path / "crawled.sqlite3")) == sorted(BFS_ORDER)
    assert knowledge(tmp_path / "crawled.sqlite3") == knowledge(tmp_path / "sitemap.sqlite3")
    assert (crawled.articles, crawled.fetched, crawled.failures) == (6, 6, ())
    assert (listed.articles, listed.fetched) == (6, 6)
    assert sorted(crawl_hits) == sorted(linked.page_hits()) == sorted(BFS_ORDER)  # each once
    depths = [DEPTH[path] for path in crawl_hits]
    assert depths == sorted(depths)  # level after level


async def test_the_start_page_counts_as_an_allowed_origin_and_names_the_site(
    linked: LinkedSite, tmp_path: Path, foreign: tuple[ForeignSite, str]
) -> None:
    foreign_site, foreign_base = foreign
    linked.pages["/"].links.append(f"{foreign_base}/elsewhere")
    settings = crawl_settings(linked, tmp_path / "kb.sqlite3", site_allowed_hosts=[])

    result = await scrape(settings)

    assert result.articles == 6
    assert foreign_site.hits == []
    assert "elsewhere" not in str(result.failures)  # a link elsewhere is not a page to report
    site = describe_site(settings)
    assert site is not None
    assert site.render("en") == f"{linked.base}/ and the pages it links to"
    assert "とそこからリンクされたページ" in site.render("ja")


async def test_a_sitemap_is_read_first_and_its_pages_links_are_followed(
    linked: LinkedSite, tmp_path: Path
) -> None:
    linked.pages["/hidden"] = Page("Lost property", "Lost property waits at the desk for a month.")
    linked.pages["/hidden"].links.append("/hidden/umbrellas")
    linked.pages["/hidden/umbrellas"] = Page(
        "Umbrellas", "Umbrellas left on a ferry go to the desk."
    )
    linked.sitemap = ["/hidden"]
    settings = crawl_settings(
        linked, tmp_path / "kb.sqlite3", site_sitemap_url=f"{linked.base}/sitemap.xml"
    )

    result = await scrape(settings)

    assert result.articles == 8
    paths = [hit.path for hit in linked.hits]
    assert paths.index("/sitemap.xml") < paths.index("/")
    assert {"/hidden", "/hidden/umbrellas"} <= set(knowledge(settings.kb_path))


# --- caps --------------------------------------------------------------------------------


async def test_links_are_followed_no_deeper_than_the_depth_cap(
    linked: LinkedSite, tmp_path: Path
) -> None:
    one_link = await scrape(crawl_settings(linked, tmp_path / "one.sqlite3", site_max_depth=1))

    assert sorted(knowledge(tmp_path / "one.sqlite3")) == ["/", "/about", "/ferries/"]
    assert sorted(linked.page_hits()) == ["/", "/about", "/ferries/"]
    assert one_link.max_pages_reached is None
    linked.hits.clear()

    await scrape(crawl_settings(linked, tmp_path / "none.sqlite3", site_max_depth=0))

    assert linked.page_hits() == ["/"]


async def test_the_crawl_stops_at_the_page_cap_nearest_pages_first_and_says_so(
    linked: LinkedSite, tmp_path: Path
) -> None:
    result = await scrape(crawl_settings(linked, tmp_path / "kb.sqlite3", site_max_pages=4))

    assert sorted(linked.page_hits()) == sorted(BFS_ORDER[:4])  # the nearest four
    assert (result.articles, result.max_pages_reached) == (4, 4)
    assert "Stopped at 4 pages (CONCIERGE_SITE_MAX_PAGES)" in result.text


# --- what pages ask of robots ------------------------------------------------------------------


async def test_nofollow_noindex_and_canonical_are_honoured(
    linked: LinkedSite, tmp_path: Path
) -> None:
    pages = linked.pages
    pages["/about"].extra = '<a rel="nofollow" href="/staff-only">staff</a>'
    pages["/staff-only"] = Page("Staff", "Rotas and keys for the harbour office staff.")
    pages["/ferries/kita"].head = '<meta name="robots" content="nofollow">'  # so no /fares
    pages["/"].links += ["/drafts", "/memo", "/print/minato"]
    pages["/drafts"] = Page("Drafts", "Unfinished news items, not for the public yet.")
    pages["/drafts"].head = '<meta name="ROBOTS" content="noindex, follow">'
    pages["/drafts"].links.append("/drafts/strike")
    pages["/drafts/strike"] = Page("Ferry strike", "No ferries run on the first of May this year.")
    pages["/memo"] = Page("Memo", "An internal memo served with a robots header.")
    pages["/memo"].headers["X-Robots-Tag"] = "otherbot: index, noindex"
    pages["/ferries/"].links = ["kita", "/"]  # /ferries/minato: found through the canonical
    pages["/print/minato"] = Page("The Minato ferry", "Printable: " + pages["/ferries/minato"].text)
    pages["/print/minato"].head = '<link rel="canonical" href="../ferries/minato">'

    result = await scrape(crawl_settings(linked, tmp_path / "kb.sqlite3"))

    stored = set(knowledge(tmp_path / "kb.sqlite3"))
    assert {"/staff-only", "/fares"}.isdisjoint(linked.page_hits())
    assert {"/drafts", "/memo", "/print/minato"}.isdisjoint(stored)
    assert {"/drafts/strike", "/ferries/minato", "/ferries/kita", "/about"} <= stored
    reasons = by_slug(result.failures)
    assert (
        reasons["drafts"].reason
        == reasons["memo"].reason
        == "noindex (the page asks not to be kept)"
    )
    assert reasons["drafts"].outcome == "skipped"
    assert Counter(linked.page_hits())["/print/minato"] == 1


async def test_a_page_that_redirects_in_its_head_is_skipped_and_its_target_read(
    linked: LinkedSite, tmp_path: Path
) -> None:
    """Texinfo writes such a page for every node inside a chapter ("The node you are looking
    for is at …"); stored, each was a one-line article."""
    pages = linked.pages
    pages["/"].links.append("/old-fares")
    pages["/old-fares"] = Page("Fares", "The page you are looking for is at Winter fares.")
    pages["/old-fares"].head = '<meta http-equiv="Refresh" content="0; url=winter-fares#adults">'
    pages["/old-fares"].links = []  # the target is linked from nowhere else
    pages["/winter-fares"] = Page("Winter fares", "From December the crossing costs 900 yen.")

    result = await scrape(crawl_settings(linked, tmp_path / "kb.sqlite3"))

    stored = knowledge(tmp_path / "kb.sqlite3")
    assert "/old-fares" not in stored
    assert "900 yen" in stored["/winter-fares"][1][0][1]
    skipped = by_slug(result.failures)["old-fares"]
    assert skipped.outcome == "skipped"
    assert skipped.reason == f"a redirect to {linked.base}/winter-fares#adults (meta refresh)"


async def test_robots_txt_is_asked_for_every_page_and_its_crawl_delay_kept(
    linked: LinkedSite, tmp_path: Path
) -> None:
    linked.robots = "User-agent: *\nDisallow: /private/\nCrawl-delay: 0.2\n"
    linked.pages["/about"].links.append("/private/plans")
    linked.pages["/private/plans"] = Page("Plans", "The office moves to Pier 5 next spring.")

    result = await scrape(crawl_settings(linked, tmp_path / "kb.sqlite3", scrape_delay_s=0.01))

    assert "/private/plans" not in linked.page_hits()
    assert by_slug(result.failures)["plans"].reason == "disallowed by robots.txt"
    assert [hit.path for hit in linked.hits].count("/robots.txt") == 1
    starts = [hit.at for hit in linked.page_requests()]
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    assert len(starts) == 6 and min(gaps) > 0.15  # 0.2 s apart, level after level


# --- one page, one fetch; pages only; broken links ---------------------------------------------


async def test_fragments_reordered_and_sorting_parameters_do_not_fetch_a_page_twice(
    linked: LinkedSite, tmp_path: Path
) -> None:
    linked.pages["/"].links += ["/search?q=ferry&lang=en", "/search?lang=en&q=ferry#top"]
    linked.pages["/search"] = Page("Search", "Results for ferry: the Minato and the Kita lines.")

    await scrape(crawl_settings(linked, tmp_path / "kb.sqlite3"))

    hits = Counter(linked.page_hits())
    assert set(hits.values()) == {1}
    assert hits["/search?q=ferry&lang=en"] == 1 and "/ferries/?sort=date" not in hits
    assert "/ferries/minato?utm_source=newsletter" not in hits


async def test_only_html_pages_are_read_and_a_broken_link_is_listed_with_its_page(
    linked: LinkedSite, tmp_path: Path
) -> None:
    linked.pages["/about"].links += ["/files/timetable.pdf", "/logo.png", "/download", "/old"]
    linked.raw["/files/timetable.pdf"] = ("application/pdf", b"%PDF-1.7")
    linked.raw["/download"] = ("application/pdf", b"%PDF-1.7")

    result = await scrape(crawl_settings(linked, tmp_path / "kb.sqlite3"))

    assert {"/files/timetable.pdf", "/logo.png"}.isdisjoint(linked.page_hits())
    reasons = by_slug(result.failures)
    assert (reasons["download"].outcome, reasons["download"].reason) == (
        "skipped",
        "not HTML (application/pdf)",
    )
    assert reasons["old"].outcome == "failed"
    assert reasons["old"].reason == f"HTTP 404 (linked from {linked.base}/about)"
    assert f"{linked.base}/old: HTTP 404 (linked from" in result.text
    assert (result.articles, result.failed, result.skipped) == (6, 1, 1)


# --- incremental -----------------------------------------------------------------------------


async def test_a_second_crawl_asks_only_for_changes_and_follows_unchanged_pages_links(
    linked: LinkedSite, tmp_path: Path
) -> None:
    settings = crawl_settings(linked, tmp_path / "kb.sqlite3")
    await scrape(settings)
    before = knowledge(settings.kb_path)
    linked.hits.clear()

    again = await scrape(settings)

    assert (again.fetched, again.unchanged) == (0, 6)
    assert {(hit.conditional, hit.status) for hit in linked.page_requests()} == {(True, 304)}
    assert sorted(linked.page_hits()) == sorted(BFS_ORDER)  # unchanged pages' links followed
    assert knowledge(settings.kb_path) == before
    linked.hits.clear()
    linked.pages["/ferries/kita"].links.append("/ferries/nishi")
    linked.pages["/ferries/nishi"] = Page(
        "The Nishi ferry", "A summer-only line to Nishi beach opens in July."
    )

    changed = await scrape(settings)

    assert (changed.fetched, changed.unchanged) == (2, 5)  # kita, and nishi found through it
    assert linked.page_hits(status=200) == ["/ferries/kita", "/ferries/nishi"]
    assert "/ferries/nishi" in knowledge(settings.kb_path)


async def test_a_knowledge_base_without_stored_links_is_crawled_in_full_once(
    linked: LinkedSite, tmp_path: Path
) -> None:
    settings = crawl_settings(linked, tmp_path / "kb.sqlite3", site_max_depth=3)
    await scrape(settings)
    with closing(sqlite3.connect(settings.kb_path)) as conn:
        conn.execute("DROP TABLE links")  # as a file from before links were stored
    linked.hits.clear()

    again = await scrape(settings)

    assert again.articles == 6
    asked = {hit.path: (hit.conditional, hit.status) for hit in linked.page_requests()}
    assert asked == {path: (False, 200) for path in BFS_ORDER[:5]} | {"/fares": (True, 304)}
    # /fares is at the depth cap: its links are not wanted, so it may be left unchanged
    assert (again.fetched, again.unchanged) == (5, 1)


# --- settings and the pieces -------------------------------------------------------------------


async def test_the_start_url_setting_takes_one_or_a_list_and_is_named_when_nothing_is_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(
        "CONCIERGE_SITE_START_URL", "https://team.example/, https://docs.team.example/"
    )
    settings = load_settings(_env_file=None)
    assert settings.site_start_url == ["https://team.example/", "https://docs.team.example/"]
    assert settings.site_max_depth == 5
    site = describe_site(settings)
    assert site is not None and site.render("en") == (
        "https://team.example/, 1 more and the pages they link to"
    )
    monkeypatch.delenv("CONCIERGE_SITE_START_URL")
    nothing = Settings(_env_file=None, kb_path=tmp_path / "kb.sqlite3")  # type: ignore[call-arg]
    with pytest.raises(RescrapeFailed, match="CONCIERGE_SITE_START_URL"):
        await scrape(nothing)


def test_one_page_has_one_address_and_its_hints_are_read_as_a_browser_would() -> None:
    key = page_key("HTTP://Team.Example:80/a?b=2&a=1&utm_source=x#top")
    assert key == page_key("http://team.example/a?a=1&b=2") == "http://team.example/a?a=1&b=2"
    assert page_address("https://team.example/list/?C=M;O=A") == "https://team.example/list/"
    assert page_address("https://team.example/a?id=3&sort=date") == "https://team.example/a?id=3"
    assert page_address("https://team.example/a?b=2&a=1#x") == "https://team.example/a?b=2&a=1"
    html = b"""<html><head><base href="https://team.example/docs/">
        <link rel="canonical" href="guide"><meta name="robots" content="none"></head>
        <body><a href="guide#intro">a</a><a href="javascript:void(0)">b</a></body></html>"""
    none = read_hints(html, "https://team.example/docs/guide?x=1")
    assert (none.noindex, none.links, none.canonical) == (
        True,
        (),
        "https://team.example/docs/guide",
    )
    follow = read_hints(html.replace(b"none", b"index"), "https://team.example/elsewhere")
    assert follow.links == ("https://team.example/docs/guide",)  # resolved with <base href>
    assert not follow.noindex
