"""The title and sections of a page, without navigation, footer and other chrome.

A page with a recognisable main container is read by ``sections.py`` (documentation: split at
its headings); any other by trafilatura, a general article extractor, as one section.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
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
E = TypeVar("E", bound=BaseException)
# lxml (libxml2) and trafilatura are not safe in two threads at once: an eval's engine died
# twice at a rescrape's start ("double free or corruption", then "malloc(): invalid size"
# with one tree per thread), as trafilatura's users report of concurrent extract() calls
# (adbar/trafilatura#840, #925: still open). Pages are fetched concurrently, read on one
# thread of their own: one at a time, and a page waiting its turn holds no thread of the
# event loop's pool, which plans answers and runs the model.
_READER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="page-reader")


async def read_in_turn(read: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``read(*args, **kwargs)`` (a page's parsing and extraction) on the thread that reads
    pages, with the caller's context (its log fields), as ``asyncio.to_thread`` would. An
    error it raises goes on without its frames, which hold the page's tree: the tree is
    freed on that thread, not on the event loop's while the next page is parsed."""
    call = functools.partial(_treeless, read, *args, **kwargs)
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(_READER, context.run, call)


def _treeless(read: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    try:
        return read(*args, **kwargs)
    except BaseException as error:
        without_trees(error)
        raise


def without_trees(error: E) -> E:
    """``error`` without the frames it went through (their locals hold its page's tree), nor
    its causes': no one reads a page's error but for its message."""
    seen: BaseException | None = error
    while seen is not None:
        traceback.clear_frames(seen.__traceback__)
        seen.__traceback__ = None
        seen = seen.__cause__ or seen.__context__
    return error


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
