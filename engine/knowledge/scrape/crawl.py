"""Fetch every article URL concurrently and sort each into fetched, unchanged, failed, skipped.

A page that fails is counted, logged with its reason, and the rest go on; only a stop ends
the crawl early.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Literal

from engine.knowledge.models import Article, PageFailure, Validators
from engine.knowledge.scrape.errors import FetchError, PageSkipped
from engine.knowledge.scrape.extract import NoArticleText, extract_article
from engine.knowledge.scrape.fetch import SiteFetcher
from engine.knowledge.scrape.hosts import NOT_ALLOWED, HostPolicy
from engine.knowledge.scrape.progress import ProgressReporter
from engine.knowledge.scrape.stopping import StopCheck, run_until_stopped

log = logging.getLogger(__name__)


@dataclass
class CrawlOutcome:
    """New article texts, the URLs whose stored copy carries over to the new base, and the
    pages not read, each with its reason."""

    articles: list[Article] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    failures: list[PageFailure] = field(default_factory=list)


class Crawl:
    """One pass over the URLs; ``previous`` holds the validators of the stored articles."""

    def __init__(
        self,
        fetcher: SiteFetcher,
        policy: HostPolicy,
        previous: dict[str, Validators],
        progress: ProgressReporter,
        stop: StopCheck,
    ) -> None:
        self._fetcher = fetcher
        self._policy = policy
        self._previous = previous
        self._progress = progress
        self._stop = stop
        self.outcome = CrawlOutcome()

    async def run(self, urls: list[str]) -> CrawlOutcome:
        await run_until_stopped([self._page(url) for url in urls], self._stop)
        return self.outcome

    async def _page(self, url: str) -> None:
        if not self._policy.allows(url):
            self._not_read(url, NOT_ALLOWED, "skipped")
        else:
            await self._fetch(url)
        self._stop.check()  # after each page; run_until_stopped then cancels the others

    async def _fetch(self, url: str) -> None:
        validators = self._previous.get(url)
        try:
            response = await self._fetcher.get(url, _conditional_headers(validators))
        except PageSkipped as error:
            self._not_read(url, error.reason, "skipped")
            return
        except FetchError as error:
            self._fail(url, error.reason, keep_old=error.transient)
            return
        if response.status == 304:
            self._unchanged(url)
            return
        try:
            page = await asyncio.to_thread(extract_article, response.body, url)
        except NoArticleText as error:
            self._fail(url, str(error), keep_old=False)
            return
        self.outcome.articles.append(page.article(url, response.etag, response.last_modified))
        self._progress.count("fetched")

    def _unchanged(self, url: str) -> None:
        if url not in self._previous:  # a 304 we did not ask for
            self._fail(url, "HTTP 304 without a stored copy", keep_old=False)
            return
        self.outcome.kept.append(url)
        self._progress.count("unchanged")

    def _fail(self, url: str, reason: str, keep_old: bool) -> None:
        """Count the failure; a page that is only down for now keeps its stored copy."""
        if keep_old and url in self._previous:
            self.outcome.kept.append(url)
            reason = f"{reason}; its stored copy is kept"
        self._not_read(url, reason, "failed")

    def _not_read(self, url: str, reason: str, outcome: Literal["failed", "skipped"]) -> None:
        """One log line per page, and the reason kept for the summary."""
        level = logging.WARNING if outcome == "failed" else logging.INFO
        log.log(level, "rescrape: %s %s: %s", outcome, url, reason)
        self.outcome.failures.append(PageFailure(url, reason, outcome))
        self._progress.count(outcome)


def _conditional_headers(validators: Validators | None) -> dict[str, str]:
    """Ask for the page only if it changed since the stored copy."""
    etag, last_modified = validators or (None, None)
    headers = {"If-None-Match": etag} if etag else {}
    if last_modified:
        headers["If-Modified-Since"] = last_modified
    return headers
