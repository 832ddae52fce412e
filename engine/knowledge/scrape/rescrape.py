"""A rescrape from start to switch: discover, crawl, build a new file, swap it in atomically.

Until the final ``os.replace`` the old knowledge base is the one answering questions; a
rescrape that fails, is stopped or is cancelled removes its half-built file and changes nothing.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import aiohttp

from config.settings import Settings
from engine.knowledge.models import PageFailure, ScrapeProgress, ScrapeResult, SiteName
from engine.knowledge.scrape.builder import build_kb, load_links, load_validators
from engine.knowledge.scrape.buildfile import build_file, remove_stale_builds
from engine.knowledge.scrape.crawl import Crawl, CrawlOutcome, StoredPages
from engine.knowledge.scrape.discover import Discovery, discover_urls
from engine.knowledge.scrape.errors import RescrapeFailed
from engine.knowledge.scrape.fetch import SiteFetcher
from engine.knowledge.scrape.folder import list_documents, read_folder
from engine.knowledge.scrape.frontier import Frontier
from engine.knowledge.scrape.gates import HostGates
from engine.knowledge.scrape.hosts import allowed_hosts
from engine.knowledge.scrape.progress import ProgressReporter
from engine.knowledge.scrape.stopping import StopCheck, run_until_stopped

T = TypeVar("T")

USER_AGENT = "ConciergeBot/0.1 (+self-hosted)"  # sent with every fetch, and read by robots.txt
FETCHES_PER_HOST = 2  # at once, each CONCIERGE_SCRAPE_DELAY_S after the last: polite

log = logging.getLogger(__name__)


async def rescrape(
    settings: Settings,
    on_progress: Callable[[ScrapeProgress], None],
    should_stop: Callable[[], bool],
) -> ScrapeResult:
    """Read the site again and switch to the new knowledge base.

    Raises ``RescrapeStopped`` when ``should_stop()`` turns true and ``RescrapeFailed`` when
    nothing usable came back; either way the previous knowledge base stays in place.
    """
    started = time.monotonic()
    progress, stop = ProgressReporter(on_progress), StopCheck(should_stop)
    await asyncio.to_thread(remove_stale_builds, settings.kb_path)
    progress.current = replace(progress.current, site=describe_site(settings))
    progress.phase("discovering")
    try:
        discovery, crawled = await _read_site(settings, progress, stop)
    finally:
        progress.flush()  # the last counts reach the asker, however the crawl ended
    failures = _in_order([*discovery.skipped, *crawled.failures])
    if not crawled.articles and not crawled.kept:
        raise _nothing_read(progress.current, failures)
    progress.phase("saving", articles=len(crawled.articles) + len(crawled.kept))
    articles, passages = await _build_and_switch(settings.kb_path, crawled, stop)
    counts = progress.current
    result = ScrapeResult(
        articles=articles,
        passages=passages,
        fetched=counts.fetched,
        unchanged=counts.unchanged,
        failed=counts.failed,
        skipped=counts.skipped,
        elapsed_s=time.monotonic() - started,
        failures=failures,
        max_pages_reached=settings.site_max_pages if crawled.capped or discovery.capped else None,
    )
    log.info("%s", result.text.split("\n", 1)[0])
    return result


async def _read_site(
    settings: Settings, progress: ProgressReporter, stop: StopCheck
) -> tuple[Discovery, CrawlOutcome]:
    """The folder of documents when one is configured, else the web site."""
    if settings.site_dir is None:
        return await _crawl_site(settings, progress, stop)
    listing = await asyncio.to_thread(
        list_documents, settings.site_dir, settings.site_dir_url, settings.site_max_pages
    )
    if not listing.files:
        raise RescrapeFailed("engine.rescrape.empty_folder", path=str(settings.site_dir))
    previous = await asyncio.to_thread(load_validators, settings.kb_path)
    progress.phase("fetching", found=len(listing.files))
    read = await read_folder(listing, previous, progress, stop)
    urls = [file.url for file in listing.files]
    return Discovery(urls=urls, capped=listing.capped), read


async def _crawl_site(
    settings: Settings, progress: ProgressReporter, stop: StopCheck
) -> tuple[Discovery, CrawlOutcome]:
    sources = _sources(settings)
    policy = allowed_hosts(settings.site_allowed_hosts, sources)
    stored = await asyncio.to_thread(_stored_pages, settings.kb_path)
    async with _session(settings) as session:
        gates = HostGates(FETCHES_PER_HOST, settings.scrape_delay_s)
        fetcher = SiteFetcher(session, policy, gates)
        discovery = discover_urls(
            fetcher,
            settings.site_sitemap_url,
            settings.site_feed_url,
            [*settings.site_urls, *settings.site_start_url],
            settings.site_max_pages,
        )
        [found] = await run_until_stopped([discovery], stop)
        if not found.urls:
            raise RescrapeFailed("engine.rescrape.none_listed", tuple(found.skipped))
        if found.capped:
            log.warning("rescrape: the site lists more than %d pages", settings.site_max_pages)
        progress.phase("fetching", found=len(found.urls))
        depth = settings.site_max_depth if settings.site_start_url else None  # None: no links
        frontier = Frontier(found, settings.site_max_pages, policy, depth)
        crawled = await Crawl(fetcher, frontier, stored, progress, stop).run()
        if crawled.capped and not found.capped:
            log.warning("rescrape: the site links to more than %d pages", settings.site_max_pages)
        return found, crawled


def _stored_pages(kb_path: Path) -> StoredPages:
    return StoredPages(load_validators(kb_path), load_links(kb_path))


def describe_site(settings: Settings) -> SiteName | None:
    """The site as the asker reads it: the start page, else the sitemap, else the feed, else
    the first URL (and how many more); None when none is configured (the rescrape then fails
    saying so)."""
    if settings.site_dir is not None:
        return SiteName("folder", str(settings.site_dir))
    if settings.site_start_url:
        starts = settings.site_start_url
        return SiteName("start", starts[0], len(starts) - 1)
    if settings.site_sitemap_url:
        return SiteName("sitemap", settings.site_sitemap_url)
    if settings.site_feed_url:
        return SiteName("feed", settings.site_feed_url)
    if settings.site_urls:
        return SiteName("urls", settings.site_urls[0], len(settings.site_urls) - 1)
    return None


def _sources(settings: Settings) -> list[str]:
    sources = [settings.site_sitemap_url, settings.site_feed_url, *settings.site_urls]
    sources += settings.site_start_url
    configured = [url for url in sources if url]
    if not configured:
        raise RescrapeFailed("engine.rescrape.no_site")
    return configured


def _in_order(failures: list[PageFailure]) -> tuple[PageFailure, ...]:
    """Failed before skipped: what needs fixing comes first in the summary."""
    return tuple(sorted(failures, key=lambda failure: failure.outcome != "failed"))


def _nothing_read(counts: ScrapeProgress, failures: tuple[PageFailure, ...]) -> RescrapeFailed:
    tally = {"failed": counts.failed, "skipped": counts.skipped}
    if not failures:
        return RescrapeFailed("engine.rescrape.nothing_read", failures, **tally)
    first = failures[0].text
    return RescrapeFailed("engine.rescrape.nothing_read_first", failures, **tally, first=first)


def _session(settings: Settings) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(
        headers={"User-Agent": USER_AGENT},
        timeout=aiohttp.ClientTimeout(total=settings.scrape_timeout_s),
        cookie_jar=aiohttp.DummyCookieJar(),
    )


async def _build_and_switch(
    kb_path: Path, outcome: CrawlOutcome, stop: StopCheck
) -> tuple[int, int]:
    """Build next to ``kb_path``, then rename it into place."""
    with build_file(kb_path) as building:  # made in the loop, so nothing can orphan it
        counts = await _finish_in_thread(
            build_kb, building, kb_path, outcome.articles, outcome.kept, datetime.now(UTC)
        )
        stop.check()
        os.replace(building, kb_path)
        return counts


async def _finish_in_thread(func: Callable[..., T], *args: object) -> T:
    """Run ``func`` in a thread; if cancelled, let it finish first so cleanup comes after it."""
    task = asyncio.ensure_future(asyncio.to_thread(func, *args))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait({task})
        raise
