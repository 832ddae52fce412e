"""The main text and title of an article page, without navigation, footer and other chrome."""

from __future__ import annotations

import trafilatura
from trafilatura.settings import Document

MIN_TEXT_CHARS = 20  # less than this is a stub or an index page, not an article


class NoArticleText(Exception):
    """The page has no main text we can use; the message says why."""


def extract_article(html: bytes, url: str) -> tuple[str, str]:
    """(title, text) of the page. CPU-bound: call it from a worker thread."""
    try:
        document = trafilatura.bare_extraction(
            html, url=url, with_metadata=True, include_comments=False, include_tables=True
        )
    except Exception as error:  # a parser bug on one odd page must not end the crawl
        raise NoArticleText(f"could not parse the page: {type(error).__name__}") from error
    text = (document.text or "").strip() if isinstance(document, Document) else ""
    if not isinstance(document, Document) or len(text) < MIN_TEXT_CHARS:
        raise NoArticleText("no article text found")
    return (document.title or url).strip(), text
