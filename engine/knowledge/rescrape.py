"""A rescrape from start to switch: discover, crawl, build a new file, swap it in atomically.

Until the final ``os.replace`` the old knowledge base is the one answering questions; a
rescrape that fails, is stopped or is cancelled removes its half-built file and changes nothing.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import aiohttp

from config.settings import Settings

from .builder import build_kb, load_validators
from .crawl import Crawl, CrawlOutcome
from .discover import discover_urls
from .errors import RescrapeFailed
from .fetch import HostGates, SiteFetcher, allowed_hosts
from .models import ScrapeProgress, ScrapeResult
from .progress import ProgressReporter
from .stopping import StopCheck, run_until_stopped

T = TypeVar("T")


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
    progress.phase("discovering")
    outcome = await _crawl_site(settings, progress, stop)
    if not outcome.articles and not outcome.kept:
        counts = progress.current
        raise RescrapeFailed(
            f"no article could be read ({counts.failed} failed, {counts.skipped} skipped)"
        )
    progress.phase("saving")
    articles, passages = await _build_and_switch(settings.kb_path, outcome, stop)
    progress.phase("done")
    counts = progress.current
    return ScrapeResult(
        articles=articles,
        passages=passages,
        fetched=counts.fetched,
        unchanged=counts.unchanged,
        failed=counts.failed,
        skipped=counts.skipped,
        elapsed_s=time.monotonic() - started,
        failures=tuple(outcome.failures),
    )


async def _crawl_site(
    settings: Settings, progress: ProgressReporter, stop: StopCheck
) -> CrawlOutcome:
    sources = _sources(settings)
    policy = allowed_hosts(settings.site_allowed_hosts, sources)
    previous = await asyncio.to_thread(load_validators, settings.kb_path)
    async with _session(settings) as session:
        gates = HostGates(settings.scrape_concurrency_per_host, settings.scrape_delay_s)
        fetcher = SiteFetcher(session, policy, gates)
        discovery = discover_urls(
            fetcher, settings.site_sitemap_url, settings.site_feed_url, settings.site_urls
        )
        [urls] = await run_until_stopped([discovery], stop)
        if not urls:
            raise RescrapeFailed("the sitemap, feed and URL list name no articles")
        progress.phase("fetching", found=len(urls))
        return await Crawl(fetcher, policy, previous, progress, stop).run(urls)


def _sources(settings: Settings) -> list[str]:
    sources = [settings.site_sitemap_url, settings.site_feed_url, *settings.site_urls]
    configured = [url for url in sources if url]
    if not configured:
        raise RescrapeFailed("no site configured: set site_sitemap_url, site_feed_url or site_urls")
    return configured


def _session(settings: Settings) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(
        headers={"User-Agent": settings.scrape_user_agent},
        timeout=aiohttp.ClientTimeout(total=settings.scrape_timeout_s),
        cookie_jar=aiohttp.DummyCookieJar(),
    )


async def _build_and_switch(
    kb_path: Path, outcome: CrawlOutcome, stop: StopCheck
) -> tuple[int, int]:
    """Build next to ``kb_path`` (same file system, so the rename is atomic), then rename."""
    building = _new_build_file(kb_path)  # quick, and in the loop so nothing can orphan it
    try:
        counts = await _finish_in_thread(
            build_kb, building, kb_path, outcome.articles, outcome.kept, datetime.now(UTC)
        )
        stop.check()
        os.replace(building, kb_path)
        return counts
    finally:
        building.unlink(missing_ok=True)


def _new_build_file(kb_path: Path) -> Path:
    kb_path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=kb_path.parent, prefix=f".{kb_path.name}.", suffix=".new")
    os.close(fd)
    return Path(name)


async def _finish_in_thread(func: Callable[..., T], *args: object) -> T:
    """Run ``func`` in a thread; if cancelled, let it finish first so cleanup comes after it."""
    task = asyncio.ensure_future(asyncio.to_thread(func, *args))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait({task})
        raise
