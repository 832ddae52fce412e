"""A rescrape held to its caps: pages, sizes, robots.txt, reasons, progress and build files."""

from __future__ import annotations

import asyncio
import fcntl
import itertools
import logging
import signal
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from config.settings import Settings
from engine.knowledge.models import PageFailure, ScrapeProgress
from engine.knowledge.scrape.buildfile import remove_stale_builds
from engine.knowledge.scrape.discover import UrlList
from engine.knowledge.scrape.errors import RescrapeFailed
from engine.knowledge.scrape.progress import ProgressReporter
from engine.knowledge.scrape.sitemap import SitemapReader
from tests.rescrape_fixture import (
    ROOT,
    by_slug,
    scrape,
    settings,  # noqa: F401  # the fixture
)
from tests.site_fixture import FakeSite, ForeignSite


def only_urls(settings: Settings, *urls: str, **changes: object) -> Settings:  # noqa: F811  # the fixture imported above
    """The same site, read from a plain URL list."""
    update = {"site_sitemap_url": None, "site_feed_url": None, "site_urls": list(urls)}
    return settings.model_copy(update={**update, **changes})


def listing(directory: Path) -> list[Path]:
    return sorted(directory.iterdir())


# --- limits ----------------------------------------------------------------------------------


async def test_discovery_stops_at_the_page_cap_and_says_so(
    settings: Settings,  # noqa: F811  # the fixture imported above
    site: FakeSite,
) -> None:
    site.generated = 12
    generated = settings.model_copy(
        update={"site_sitemap_url": f"{site.base}/generated-sitemap.xml.gz", "site_feed_url": None}
    )
    reports: list[ScrapeProgress] = []

    capped = await scrape(generated.model_copy(update={"site_max_pages": 5}), reports.append)

    assert {report.found for report in reports if report.phase == "fetching"} == {5}
    assert (capped.articles, capped.max_pages_reached) == (5, 5)
    assert "Stopped at 5 pages (CONCIERGE_SITE_MAX_PAGES): the site lists more." in capped.text
    assert len([hit for hit in site.hits if hit.path.startswith("/gen/")]) == 5

    whole = await scrape(generated.model_copy(update={"site_max_pages": 12}))

    assert (whole.articles, whole.max_pages_reached) == (12, None)
    assert "CONCIERGE_SITE_MAX_PAGES" not in whole.text


def test_a_sitemap_is_read_piece_by_piece_and_no_further_than_the_cap() -> None:
    sitemap = (
        b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" '
        b'xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">'
        b"<url><loc>/a#top</loc><image:image><image:loc>/a.png</image:loc></image:image></url>"
        + b"".join(b"<url><loc>/p%d</loc><lastmod>2024-05-06</lastmod></url>" % n for n in range(9))
        + b"</urlset>"
    )
    found = UrlList(max_pages=3)
    reader = SitemapReader("https://team.example/sitemap.xml", found.add)

    for start in range(0, len(sitemap), 7):
        if not reader.feed(sitemap[start : start + 7]):
            break

    assert list(found.urls) == [f"https://team.example/{path}" for path in ("a", "p0", "p1")]
    assert found.capped
    assert start + 7 < len(sitemap) / 2  # it said "enough" long before the end
    with pytest.raises(ElementTree.ParseError, match="not a sitemap"):
        SitemapReader("https://team.example/", found.add).feed(b"<html><body/></html>")


async def test_robots_txt_is_read_up_to_its_cap_only(settings: Settings, site: FakeSite) -> None:  # noqa: F811  # the fixture imported above
    site.robots = "User-agent: *\n" + "# padding\n" * 60_000 + "Disallow: /articles/\n"

    result = await scrape(only_urls(settings, f"{site.base}/articles/widgets"))

    assert result.fetched == 1  # the Disallow past the first 512 KiB is not read


async def test_robots_crawl_delay_spaces_the_requests(settings: Settings, site: FakeSite) -> None:  # noqa: F811  # the fixture imported above
    site.robots = "User-agent: *\nCrawl-delay: 0.3\n"
    pages = [f"{site.base}/articles/{slug}" for slug in ("widgets", "gears", "holidays")]

    result = await scrape(only_urls(settings, *pages))

    assert result.fetched == 3
    starts = sorted(hit.at for hit in site.hits if hit.path.startswith("/articles/"))
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    assert min(gaps) > 0.25  # 0.3 s apart, though two may run at once and the delay is 0.01


# --- reasons and progress --------------------------------------------------------------------


async def test_every_page_not_read_has_a_reason_a_log_line_and_a_place_in_the_summary(
    settings: Settings,  # noqa: F811  # the fixture imported above
    site: FakeSite,
    foreign: tuple[ForeignSite, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    site.raw["/files/report.pdf"] = ("application/pdf", b"%PDF-1.7 not an article")
    site.raw["/articles/empty"] = ("text/html", b"<html><body><nav>Home</nav></body></html>")
    site.raw["/articles/huge"] = ("text/html", b"<p>" + b"a" * (11 * 1024 * 1024))
    paths = ["/articles/widgets", "/articles/gone", "/articles/broken", "/files/report.pdf"]
    paths += ["/articles/empty", "/articles/huge", "/private/secret", "/slow"]
    urls = [f"{site.base}{path}" for path in paths] + [f"{foreign[1]}/listed"]
    caplog.set_level(logging.INFO, logger="engine.knowledge")

    try:
        result = await scrape(only_urls(settings, *urls, scrape_timeout_s=1.0))
    finally:
        site.release.set()

    assert {slug: (f.reason, f.outcome) for slug, f in by_slug(result.failures).items()} == {
        "gone": ("HTTP 404", "failed"),
        "broken": ("HTTP 500", "failed"),
        "empty": ("no article text found", "failed"),
        "huge": ("too large (over 10 MiB)", "failed"),
        "slow": ("timed out after 1 s", "failed"),
        "report.pdf": ("not HTML (application/pdf)", "skipped"),
        "secret": ("disallowed by robots.txt", "skipped"),
        "listed": ("not an allowed host", "skipped"),
    }
    for failure in result.failures:  # one log line per page, with its reason
        logged = [r.getMessage() for r in caplog.records if f"{failure.url}:" in r.getMessage()]
        assert logged == [f"rescrape: {failure.outcome} {failure.text}"]
    lines = result.text.splitlines()
    assert lines[0].startswith("Rescrape done: 1 article in the knowledge base (1 fetched, ")
    assert lines[1] == "Not read:"
    assert lines[2:7] == [f"- {failure.text}" for failure in result.failures[:5]]
    assert {failure.outcome for failure in result.failures[:5]} == {"failed"}
    assert lines[7:] == ["…and 3 more"]
    assert "tokens" not in result.text


async def test_a_site_with_nothing_readable_fails_saying_why(
    settings: Settings,  # noqa: F811  # the fixture imported above
    site: FakeSite,
) -> None:
    gone = f"{site.base}/articles/gone"

    with pytest.raises(RescrapeFailed) as failed:
        await scrape(only_urls(settings, gone))

    assert str(failed.value) == (
        f"no article could be read (1 failed, 0 skipped; first: {gone}: HTTP 404)"
    )
    assert failed.value.failures == (PageFailure(gone, "HTTP 404", "failed"),)
    assert not settings.kb_path.exists()


async def test_no_site_configured_names_the_environment_variables(tmp_path: Path) -> None:
    nothing = Settings(_env_file=None, kb_path=tmp_path / "kb.sqlite3")  # type: ignore[call-arg]

    with pytest.raises(RescrapeFailed) as failed:
        await scrape(nothing)

    message = str(failed.value)
    for variable in (
        "CONCIERGE_SITE_SITEMAP_URL",
        "CONCIERGE_SITE_FEED_URL",
        "CONCIERGE_SITE_URLS",
    ):
        assert variable in message
    assert "engine" in message and "site_urls" not in message


def test_progress_goes_out_at_most_once_a_second_plus_phases_and_the_last_counts() -> None:
    now = [0.0]
    sent: list[ScrapeProgress] = []
    progress = ProgressReporter(sent.append, clock=lambda: now[0])
    progress.phase("discovering")
    progress.phase("fetching", found=20)

    for page in range(20):
        now[0] = page * 0.25  # four pages a second for five seconds
        progress.count("fetched")
    progress.phase("saving", articles=20)

    assert [report.phase for report in sent] == ["discovering", *["fetching"] * 6, "saving"]
    assert [report.done for report in sent if report.phase == "fetching"] == [0, 5, 9, 13, 17, 20]
    assert sent[-1].text == (
        "Rescrape: saving 20 articles (20 fetched, 0 unchanged, 0 failed, 0 skipped)…"
    )


# --- a build left behind ---------------------------------------------------------------------


async def test_a_stale_build_file_is_removed_at_the_next_rescrape_but_not_one_being_built(
    settings: Settings,  # noqa: F811  # the fixture imported above
) -> None:
    kb_dir = settings.kb_path.parent
    kb_dir.mkdir(parents=True)
    stale = kb_dir / f".{settings.kb_path.name}.k1ll3d.new"
    stale.write_bytes(b"half a database")
    live = kb_dir / f".{settings.kb_path.name}.bu1ld1ng.new"
    live.write_bytes(b"")

    with live.open("rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        await scrape(settings)
        assert listing(kb_dir) == sorted([settings.kb_path, live])

    assert remove_stale_builds(settings.kb_path) == [live]
    assert listing(kb_dir) == [settings.kb_path]


async def test_the_build_file_of_a_killed_process_is_removed_once_it_is_gone(
    tmp_path: Path,
) -> None:
    kb_path = tmp_path / "kb.sqlite3"
    builder = await asyncio.create_subprocess_exec(
        sys.executable, "-c",
        "import sys, pathlib; from engine.knowledge.scrape.buildfile import build_file\n"
        "with build_file(pathlib.Path(sys.argv[1])) as path:\n"
        "    print(path, flush=True); sys.stdin.read()",
        str(kb_path), cwd=ROOT,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert builder.stdout is not None
    building = Path((await asyncio.wait_for(builder.stdout.readline(), 30)).decode().strip())

    assert remove_stale_builds(kb_path) == []  # still being built
    builder.send_signal(signal.SIGKILL)
    await builder.wait()

    assert listing(tmp_path) == [building]  # a killed process leaves its build file
    assert remove_stale_builds(kb_path) == [building]
    assert listing(tmp_path) == []


async def test_the_first_progress_line_names_the_site_the_engine_reads(
    settings: Settings,  # noqa: F811  # the fixture imported above
    site: FakeSite,
) -> None:
    sent: list[ScrapeProgress] = []
    await scrape(settings, sent.append)
    assert (
        sent[0].text
        == f"Rescrape: looking for articles in the sitemap {settings.site_sitemap_url}…"
    )
    urls = [f"{site.base}/articles/widgets", f"{site.base}/articles/gears"]
    sent.clear()
    await scrape(only_urls(settings, *urls), sent.append)
    assert sent[0].text == f"Rescrape: looking for articles in {urls[0]} and 1 more…"
