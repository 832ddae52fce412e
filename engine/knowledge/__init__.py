"""The knowledge base: the site's articles, scraped into SQLite and searched for answers.

The engine calls ``rescrape`` (async, reports progress, can be stopped), then per question
``KnowledgeBase.search``, ``select_passages``, ``render_passages`` and ``format_sources``.
"""

from .buildfile import remove_stale_builds
from .errors import RescrapeFailed, RescrapeStopped
from .models import (
    KbStats,
    PageFailure,
    Passage,
    ScrapeProgress,
    ScrapeResult,
    failures_summary,
)
from .prompt import format_sources, render_passages, select_passages
from .rescrape import rescrape
from .store import NO_ARTICLES_MESSAGE, KnowledgeBase

__all__ = [
    "NO_ARTICLES_MESSAGE",
    "KbStats",
    "KnowledgeBase",
    "PageFailure",
    "Passage",
    "RescrapeFailed",
    "RescrapeStopped",
    "ScrapeProgress",
    "ScrapeResult",
    "failures_summary",
    "format_sources",
    "remove_stale_builds",
    "render_passages",
    "rescrape",
    "select_passages",
]
