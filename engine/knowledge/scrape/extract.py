"""The title and sections of a page, without navigation, footer and other chrome.

A page with a recognisable main container is read by ``sections.py`` (documentation: split at
its headings); any other by trafilatura, a general article extractor, as one section.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import trafilatura
from lxml.etree import _Element
from trafilatura.settings import Document

from engine.knowledge.models import Section
from engine.knowledge.scrape.errors import NoArticleText, NotAnArticle
from engine.knowledge.scrape.links import parse_page, refresh_target
from engine.knowledge.scrape.sections import Page, page_sections

MIN_TEXT_CHARS = 20  # less than this is a stub or an index page, not an article

P = ParamSpec("P")
T = TypeVar("T")
# lxml (libxml2) and trafilatura are not safe in two threads at once: an eval's engine died
# twice at a rescrape's start ("double free or corruption", then "malloc(): invalid size"
# with one tree per thread), as trafilatura's users report of concurrent extract() calls
# (adbar/trafilatura#840, #925: still open). Pages are fetched concurrently, read one at a time.
_READING = threading.Lock()


def one_page_at_a_time(read: Callable[P, T]) -> Callable[P, T]:
    """``read`` (a page's parsing and extraction, in a worker thread) never runs beside
    another function so marked."""

    @functools.wraps(read)
    def alone(*args: P.args, **kwargs: P.kwargs) -> T:
        with _READING:
            return read(*args, **kwargs)

    return alone


def reading_now() -> bool:
    """Whether some thread is reading a page (for the tests)."""
    return _READING.locked()


def extract_article(html: bytes, url: str, root: _Element | None = None) -> Page:
    """The page's title and sections (``root``: the page already parsed, see
    ``page_sections``). CPU-bound: call it from a worker thread."""
    try:
        root = parse_page(html, url) if root is None else root
        if root is not None and (target := refresh_target(root)) is not None:
            raise NotAnArticle(f"a redirect to {target} (meta refresh)")  # read there instead
        page = page_sections(html, root) or _general_extraction(html, url)
    except NoArticleText:
        raise
    except Exception as error:  # a parser bug on one odd page must not end the crawl
        raise NoArticleText(f"could not parse the page: {type(error).__name__}") from error
    if len(page.text.strip()) < MIN_TEXT_CHARS:
        raise NoArticleText("no article text found")
    return page


def _general_extraction(html: bytes, url: str) -> Page:
    document = trafilatura.bare_extraction(
        html, url=url, with_metadata=True, include_comments=False, include_tables=True
    )
    text = (document.text or "").strip() if isinstance(document, Document) else ""
    if not isinstance(document, Document) or len(text) < MIN_TEXT_CHARS:
        raise NoArticleText("no article text found")
    title = (document.title or url).strip()
    return Page(title, (Section((title,), None, text),))
