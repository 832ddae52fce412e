"""The knowledge base: the site's articles, scraped into SQLite and searched for answers.

The engine calls ``rescrape`` (async, reports progress, can be stopped), then per question
``KnowledgeBase.search``, ``select_passages``, ``build_prompt_context`` and ``format_sources``.
"""

from .errors import RescrapeFailed, RescrapeStopped
from .models import KbStats, PageFailure, Passage, ScrapeProgress, ScrapeResult
from .prompt import build_prompt_context, format_sources, select_passages
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
    "build_prompt_context",
    "format_sources",
    "rescrape",
    "select_passages",
]
