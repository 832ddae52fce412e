"""Value objects handed across the package edge: passages, stats, progress and results."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from config.texts import Locale, t

Phase = Literal["discovering", "fetching", "saving"]
Outcome = Literal["fetched", "unchanged", "failed", "skipped"]
Validators = tuple[str | None, str | None]  # (ETag, Last-Modified) of a stored article
FAILURES_SHOWN = 5  # a summary lists this many pages not read, then "and N more"


@dataclass(frozen=True, slots=True)
class Passage:
    """A few hundred words of one section of one article: small enough for a small model's
    context, and named by the section's heading path."""

    title: str
    url: str  # the article's address
    text: str
    score: float = 0.0  # the search's: higher is better
    heading: str = ""  # the section's heading path (PATH_SEPARATOR); "" for none
    anchor: str | None = None  # the section's id on the page, when it has one
    similarity: float = 0.0  # the cosine of its vector with the question's (vectors.py)

    @property
    def link(self) -> str:
        """The address of the section itself (``page#anchor``), else of the article."""
        return f"{self.url}#{self.anchor}" if self.anchor else self.url


PATH_SEPARATOR = " \u203a "  # "Data Structures > More on Lists", with a single angle quote


@dataclass(frozen=True, slots=True)
class Section:
    """The text under one heading of a page (up to the next heading of any level)."""

    path: tuple[str, ...]  # the headings above it, the page's title first
    anchor: str | None  # the id a link to it takes (page#anchor); None for the page's top
    text: str

    @property
    def heading(self) -> str:
        return PATH_SEPARATOR.join(self.path)


@dataclass(frozen=True, slots=True)
class Article:
    """One page as extracted, with the validators that make the next fetch conditional."""

    url: str
    title: str
    text: str
    etag: str | None = None
    last_modified: str | None = None
    sections: tuple[Section, ...] = ()  # the text split at its headings; () for one section
    canonical: str | None = None  # the page's rel=canonical address, when it names one
    # The pages it links to that a crawl follows (links.py): stored, so that the links of a
    # page the site says is unchanged (HTTP 304) are known without downloading it again.
    links: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PageFailure:
    """A page (or a sitemap) not read, with a short reason a person can act on: ``failed``
    (HTTP 404, timed out, too large, no article text…) or ``skipped`` on purpose (robots.txt,
    not an allowed host, not HTML, noindex, a redirect in the page, an index of links)."""

    url: str
    reason: str
    outcome: Literal["failed", "skipped"] = "failed"

    @property
    def text(self) -> str:
        return f"{self.url}: {self.reason}"


def failures_summary(
    failures: Sequence[PageFailure], shown: int = FAILURES_SHOWN, locale: Locale = "en"
) -> str:
    """The first few pages not read, one a line, then how many more; "" when there are none.
    A page's reason stays as the fetch gave it (an HTTP status, a content type)."""
    if not failures:
        return ""
    heading = t("engine.rescrape.not_read", locale)
    lines = [heading, *(f"- {failure.text}" for failure in failures[:shown])]
    if len(failures) > shown:
        lines.append(t("engine.rescrape.not_read_more", locale, count=len(failures) - shown))
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class SiteName:
    """What the engine reads, as named to the asker: its sitemap, its feed, or its first URL
    and how many more."""

    kind: Literal["sitemap", "feed", "urls", "folder", "start"]
    url: str
    more: int = 0

    def render(self, locale: Locale) -> str:
        if self.kind == "urls":
            if not self.more:
                return self.url
            return t("engine.rescrape.site_urls", locale, url=self.url, more=self.more)
        if self.kind == "start" and self.more:
            return t("engine.rescrape.site_start_more", locale, url=self.url, more=self.more)
        return t(f"engine.rescrape.site_{self.kind}", locale, url=self.url)


@dataclass(frozen=True, slots=True)
class ScrapeProgress:
    """Counts so far; ``text`` is the one line shown to the user while the rescrape runs."""

    phase: Phase
    found: int = 0  # pages to read (at most CONCIERGE_SITE_MAX_PAGES)
    fetched: int = 0
    unchanged: int = 0
    failed: int = 0
    skipped: int = 0
    articles: int = 0  # set when saving: the articles the new knowledge base will hold
    site: SiteName | None = None  # what the engine reads, named to the asker

    @property
    def done(self) -> int:
        return self.fetched + self.unchanged + self.failed + self.skipped

    @property
    def text(self) -> str:
        return self.render("en")

    def render(self, locale: Locale) -> str:
        """The progress line in ``locale``."""
        if self.phase == "discovering":
            if self.site is None:
                return t("engine.rescrape.looking", locale)
            return t("engine.rescrape.looking_in", locale, site=self.site.render(locale))
        counts = page_counts(self.fetched, self.unchanged, self.failed, self.skipped, locale)
        if self.phase == "saving":
            articles = count_articles(self.articles, locale)
            return t("engine.rescrape.saving", locale, articles=articles, counts=counts)
        return t("engine.rescrape.pages", locale, done=self.done, found=self.found, counts=counts)


@dataclass(frozen=True, slots=True)
class ScrapeResult:
    """What a finished rescrape switched to; ``failures`` says which pages were not read and
    why; ``max_pages_reached`` is the page cap when the site listed more pages than it."""

    articles: int
    passages: int
    fetched: int
    unchanged: int
    failed: int
    skipped: int
    elapsed_s: float
    failures: tuple[PageFailure, ...] = field(default=())
    max_pages_reached: int | None = None

    @property
    def text(self) -> str:
        return self.render("en")

    def render(self, locale: Locale) -> str:
        """The rescrape's own summary in ``locale``: articles in the new knowledge base, not
        pages or tokens."""
        counts = page_counts(self.fetched, self.unchanged, self.failed, self.skipped, locale)
        articles = count_articles(self.articles, locale)
        elapsed_s = f"{self.elapsed_s:.1f}"
        lines = [
            t("engine.rescrape.done", locale, articles=articles, counts=counts, elapsed_s=elapsed_s)
        ]
        if self.max_pages_reached is not None:
            lines.append(t("engine.rescrape.capped", locale, max_pages=self.max_pages_reached))
        if self.failures:
            lines.append(failures_summary(self.failures, locale=locale))
        return "\n".join(lines)


def count_articles(count: int, locale: Locale = "en") -> str:
    key = "engine.rescrape.article" if count == 1 else "engine.rescrape.articles"
    return t(key, locale, count=count)


def page_counts(fetched: int, unchanged: int, failed: int, skipped: int, locale: Locale) -> str:
    return t(
        "engine.rescrape.counts",
        locale,
        fetched=fetched,
        unchanged=unchanged,
        failed=failed,
        skipped=skipped,
    )


@dataclass(frozen=True, slots=True)
class KbStats:
    """What ``concierge kb stats`` prints."""

    articles: int
    passages: int
    last_rescrape_at: datetime | None
    db_bytes: int

    @property
    def text(self) -> str:
        when = (
            self.last_rescrape_at.strftime("%Y-%m-%d %H:%M UTC")
            if self.last_rescrape_at
            else "never"
        )
        return (
            f"{self.articles} article{'s' * (self.articles != 1)}, "
            f"{self.passages} passage{'s' * (self.passages != 1)}, "
            f"last rescrape {when}, {self.db_bytes / 1_000_000:.1f} MB"
        )
