"""Value objects handed across the package edge: passages, stats, progress and results."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

Phase = Literal["discovering", "fetching", "saving"]
Outcome = Literal["fetched", "unchanged", "failed", "skipped"]
Validators = tuple[str | None, str | None]  # (ETag, Last-Modified) of a stored article
FAILURES_SHOWN = 5  # a summary lists this many pages not read, then "and N more"


@dataclass(frozen=True, slots=True)
class Passage:
    """A few hundred words of one article: small enough for a small model's context."""

    title: str
    url: str
    text: str
    score: float = 0.0  # bm25: lower is better; 0.0 for substring (LIKE-style) matches


@dataclass(frozen=True, slots=True)
class Article:
    """One page as extracted, with the validators that make the next fetch conditional."""

    url: str
    title: str
    text: str
    etag: str | None = None
    last_modified: str | None = None


@dataclass(frozen=True, slots=True)
class PageFailure:
    """A page (or a sitemap) not read, with a short reason a person can act on: ``failed``
    (HTTP 404, timed out, too large, no article text…) or ``skipped`` on purpose (robots.txt,
    not an allowed host, not HTML)."""

    url: str
    reason: str
    outcome: Literal["failed", "skipped"] = "failed"

    @property
    def text(self) -> str:
        return f"{self.url}: {self.reason}"


def failures_summary(failures: Sequence[PageFailure], shown: int = FAILURES_SHOWN) -> str:
    """The first few pages not read, one a line, then how many more; "" when there are none."""
    if not failures:
        return ""
    lines = ["Not read:", *(f"- {failure.text}" for failure in failures[:shown])]
    if len(failures) > shown:
        lines.append(f"…and {len(failures) - shown} more")
    return "\n".join(lines)


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
    site: str = ""  # what the engine reads (its sitemap, feed or first URL), named to the asker

    @property
    def done(self) -> int:
        return self.fetched + self.unchanged + self.failed + self.skipped

    @property
    def counts(self) -> str:
        return (
            f"{self.fetched} fetched, {self.unchanged} unchanged, "
            f"{self.failed} failed, {self.skipped} skipped"
        )

    @property
    def text(self) -> str:
        if self.phase == "discovering":
            where = f" in {self.site}" if self.site else ""
            return f"Rescrape: looking for articles{where}…"
        if self.phase == "saving":
            return f"Rescrape: saving {count_articles(self.articles)} ({self.counts})…"
        return f"Rescrape: {self.done}/{self.found} pages ({self.counts})"


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
        """The rescrape's own summary: articles in the new knowledge base, not pages or tokens."""
        lines = [
            f"Rescrape done: {count_articles(self.articles)} in the knowledge base "
            f"({self.fetched} fetched, {self.unchanged} unchanged, {self.failed} failed, "
            f"{self.skipped} skipped) in {self.elapsed_s:.1f} s."
        ]
        if self.max_pages_reached is not None:
            lines.append(
                f"Stopped at {self.max_pages_reached} pages (CONCIERGE_SITE_MAX_PAGES): "
                "the site lists more."
            )
        if self.failures:
            lines.append(failures_summary(self.failures))
        return "\n".join(lines)


def count_articles(count: int) -> str:
    return f"{count} article" if count == 1 else f"{count} articles"


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
