"""Fetch every page the frontier gives, a level at a time, and sort each into fetched,
unchanged, failed, skipped.

A page that fails is counted, logged with its reason, and the rest go on; only a stop ends
the crawl early. Each HTML page's links go back to the frontier (frontier.py), which decides
what is read next. A page the site says is unchanged (HTTP 304) has no body to take links
from: its links are those stored with it (``Article.links``), and when none are stored (a
knowledge base from before links were kept) a page whose links are wanted is asked for in
full instead.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Literal

from engine.knowledge.models import Article, PageFailure, Validators
from engine.knowledge.scrape.errors import FetchError, NoArticleText, NotAnArticle, PageSkipped
from engine.knowledge.scrape.extract import extract_article, read_in_turn, without_trees
from engine.knowledge.scrape.fetch import Response, SiteFetcher
from engine.knowledge.scrape.frontier import Frontier, Visit
from engine.knowledge.scrape.hosts import NOT_ALLOWED
from engine.knowledge.scrape.links import PageHints, hints_of, parse_page
from engine.knowledge.scrape.progress import ProgressReporter
from engine.knowledge.scrape.sections import Page
from engine.knowledge.scrape.stopping import StopCheck, run_until_stopped

NOINDEX = "noindex (the page asks not to be kept)"
Links = tuple[str, ...]  # a page's links, as links.py reads them

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoredPages:
    """What the knowledge base in use holds of each article: its validators, which make the
    next fetch conditional, and its links (none for a file from before links were stored)."""

    validators: dict[str, Validators] = field(default_factory=dict)
    links: dict[str, Links] = field(default_factory=dict)


@dataclass
class CrawlOutcome:
    """New article texts, the URLs whose stored copy carries over to the new base, and the
    pages not read, each with its reason; ``capped`` when the site listed or linked more
    pages than the page cap."""

    articles: list[Article] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    failures: list[PageFailure] = field(default_factory=list)
    capped: bool = False


class Crawl:
    """One pass over the site, from the frontier's first level to its last."""

    def __init__(
        self,
        fetcher: SiteFetcher,
        frontier: Frontier,
        stored: StoredPages,
        progress: ProgressReporter,
        stop: StopCheck,
    ) -> None:
        self._fetcher = fetcher
        self._frontier = frontier
        self._previous = stored.validators
        self._stored_links = stored.links
        self._progress = progress
        self._stop = stop
        self.outcome = CrawlOutcome()

    async def run(self) -> CrawlOutcome:
        """Breadth first: every page of a level, then the new pages they link to."""
        level = self._frontier.first_level()
        while level:
            found = await run_until_stopped([self._page(visit) for visit in level], self._stop)
            level = self._frontier.next_level(level, found)
            self._progress.found(self._frontier.found)
        self.outcome.capped = self._frontier.capped
        return self.outcome

    async def _page(self, visit: Visit) -> Links:
        """Read one page; the links to follow from it (none at the depth cap)."""
        follow = self._frontier.follows(visit)
        links: Links = ()
        if not self._frontier.allows(visit.url):
            self._not_read(visit.url, NOT_ALLOWED, "skipped")
        else:
            links = await self._fetch(visit, follow)
        self._stop.check()  # after each page; run_until_stopped then cancels the others
        return links if follow else ()

    async def _fetch(self, visit: Visit, follow: bool) -> Links:
        """Fetch and read the page; its links. It is asked for only if changed, unless its
        links are wanted and none are stored: a 304 would leave them unknown."""
        url, stored_links = visit.url, self._stored_links.get(visit.url)
        conditional = not follow or stored_links is not None
        validators = self._previous.get(url) if conditional else None
        try:
            response = await self._fetcher.get(url, _conditional_headers(validators))
        except PageSkipped as error:
            self._not_read(url, error.reason, "skipped")
            return ()
        except FetchError as error:
            kept = self._fail(visit, error.reason, keep_old=error.transient)
            return (stored_links or ()) if kept else ()
        if response.status == 304:
            self._unchanged(visit)
            return stored_links or ()
        return await self._read(visit, response)

    async def _read(self, visit: Visit, response: Response) -> Links:
        """A page's text, unless it is no article (noindex, a redirect, an index); its links
        either way."""
        url = visit.url
        if response.url != url:
            self._frontier.seen(response.url)  # a link to where it redirected is not read again
        hints, page = await read_in_turn(_read_page, response, url)
        if isinstance(page, NotAnArticle):
            self._not_read(url, str(page), "skipped")
            return hints.links
        if isinstance(page, NoArticleText):
            self._fail(visit, str(page), keep_old=False)
            return hints.links
        article = page.article(url, response.etag, response.last_modified)
        self.outcome.articles.append(replace(article, canonical=hints.canonical, links=hints.links))
        self._progress.count("fetched")
        return hints.links

    def _unchanged(self, visit: Visit) -> None:
        if visit.url not in self._previous:  # a 304 we did not ask for
            self._fail(visit, "HTTP 304 without a stored copy", keep_old=False)
            return
        self.outcome.kept.append(visit.url)
        self._progress.count("unchanged")

    def _fail(self, visit: Visit, reason: str, keep_old: bool) -> bool:
        """Count the failure, naming the page that links to it (the one to fix); a page that
        is only down for now keeps its stored copy (True)."""
        if visit.linked_from:
            reason = f"{reason} (linked from {visit.linked_from})"
        kept = keep_old and visit.url in self._previous
        if kept:
            self.outcome.kept.append(visit.url)
            reason = f"{reason}; its stored copy is kept"
        self._not_read(visit.url, reason, "failed")
        return kept

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


def _read_page(response: Response, url: str) -> tuple[PageHints, Page | NoArticleText]:
    """The page's hints and, unless they say noindex, its text, in one thread: the text is
    read from the tree the hints were read from, changing it, and lxml does not promise a
    tree is safe in another thread than the one that parsed it (its names live in that
    thread's dictionary, which goes on parsing other pages). On the thread that reads pages
    (``extract.read_in_turn``): two threads parsing at once is not safe either."""
    root = parse_page(response.body, response.url)
    hints = hints_of(root, response.url, response.robots_tag)
    if hints.noindex:
        return hints, NotAnArticle(NOINDEX)
    try:
        return hints, extract_article(response.body, url, root)
    except NoArticleText as error:
        return hints, without_trees(error)
