"""Value objects handed across the package edge: passages, stats, progress and results."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

Phase = Literal["discovering", "fetching", "saving", "done"]
Validators = tuple[str | None, str | None]  # (ETag, Last-Modified) of a stored article


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
    """A page that could not be fetched or read, with a reason a person can act on."""

    url: str
    reason: str


@dataclass(frozen=True, slots=True)
class ScrapeProgress:
    """Counts so far; ``text`` is the one line shown to the user while the rescrape runs."""

    phase: Phase
    found: int = 0
    fetched: int = 0
    unchanged: int = 0
    failed: int = 0
    skipped: int = 0

    @property
    def done(self) -> int:
        return self.fetched + self.unchanged + self.failed + self.skipped

    @property
    def text(self) -> str:
        if self.phase == "discovering":
            return "Rescrape: looking for articles…"
        counts = (
            f"{self.fetched} fetched, {self.unchanged} unchanged, "
            f"{self.failed} failed, {self.skipped} skipped"
        )
        if self.phase == "saving":
            return f"Rescrape: saving {self.found} articles ({counts})…"
        return f"Rescrape: {self.done}/{self.found} pages ({counts})"


@dataclass(frozen=True, slots=True)
class ScrapeResult:
    """What a finished rescrape switched to; ``failures`` says which pages went wrong and why."""

    articles: int
    passages: int
    fetched: int
    unchanged: int
    failed: int
    skipped: int
    elapsed_s: float
    failures: tuple[PageFailure, ...] = field(default=())

    @property
    def text(self) -> str:
        return (
            f"Rescrape done: {self.articles} articles ({self.fetched} fetched, "
            f"{self.unchanged} unchanged, {self.failed} failed, {self.skipped} skipped) "
            f"in {self.elapsed_s:.1f} s"
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
            f"{self.articles} articles, {self.passages} passages, "
            f"last rescrape {when}, {self.db_bytes / 1_000_000:.1f} MB"
        )
