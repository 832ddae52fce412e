"""Text a site repeats is stored once: identical pages, and blocks pasted into many pages.

On real documentation a quarter of all text can be the same blocks ("Configuration",
"See also", a licence note) pasted into many pages, and some pages are byte-identical copies
(docs/quality.md, "Real documentation"). Stored everywhere, such a block matches a question
on every page that holds it and crowds the search with copies. So a page whose text (or
``rel=canonical``) names another page of the same rescrape is left out, and a line that
stands in at least ``SHARED_MIN_PAGES`` pages is kept in one of them only: the page that holds
the most of the site's shared lines (the reference page the blocks are copied from: npm's
config page holds every "Configuration" block its command pages repeat), the first on a tie.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace

from engine.knowledge.models import Article, Section
from engine.knowledge.scrape.addresses import page_key

SHARED_MIN_PAGES = 3  # a line in this many pages is a shared block, not a page's own text
SHARED_MIN_CHARS = 40  # shorter lines ("Example", "import json") are not blocks
SPACES_RE = re.compile(r"\s+")


def without_repeats(articles: Sequence[Article], unchanged: Iterable[str] = ()) -> list[Article]:
    """``articles`` without copies of one another, each shared line kept in its first page;
    ``unchanged`` are the stored pages carried over, which a canonical may name too."""
    unique = _distinct_pages(articles, unchanged)
    shared = _shared_lines(unique)
    homes_first = sorted(range(len(unique)), key=lambda i: -_shared_held(unique[i], shared))
    seen: set[str] = set()
    kept: dict[int, Article] = {}
    for index in homes_first:
        article = unique[index]
        sections = tuple(_without_seen(section, shared, seen) for section in _sections(article))
        kept[index] = replace(article, sections=tuple(s for s in sections if s.text))
    return [kept[index] for index in range(len(unique))]


def _distinct_pages(articles: Sequence[Article], unchanged: Iterable[str]) -> list[Article]:
    """The first of pages with the same text, and no page whose canonical is another page
    (however the canonical spells its address: addresses.py)."""
    stored = {page_key(url) for url in [*unchanged, *(article.url for article in articles)]}
    seen: set[str] = set()
    distinct: list[Article] = []
    for article in articles:
        canonical = page_key(article.canonical) if article.canonical else None
        if canonical and canonical != page_key(article.url) and canonical in stored:
            continue
        digest = hashlib.sha256(_normal(article.text).encode()).hexdigest()
        if digest not in seen:
            seen.add(digest)
            distinct.append(article)
    return distinct


def _shared_lines(articles: Iterable[Article]) -> set[str]:
    pages_holding: Counter[str] = Counter()
    for article in articles:
        lines = {_normal(line) for line in article.text.splitlines()}
        pages_holding.update(line for line in lines if len(line) >= SHARED_MIN_CHARS)
    return {line for line, pages in pages_holding.items() if pages >= SHARED_MIN_PAGES}


def _shared_held(article: Article, shared: set[str]) -> int:
    return len({_normal(line) for line in article.text.splitlines()} & shared)


def _without_seen(section: Section, shared: set[str], seen: set[str]) -> Section:
    """The section without the shared lines an earlier page (or section) already holds."""
    lines: list[str] = []
    for line in section.text.splitlines():
        normal = _normal(line)
        if normal in shared:
            if normal in seen:
                continue
            seen.add(normal)
        lines.append(line)
    return Section(section.path, section.anchor, "\n".join(lines).strip())


def _sections(article: Article) -> tuple[Section, ...]:
    return article.sections or (Section((article.title,), None, article.text),)


def _normal(text: str) -> str:
    return SPACES_RE.sub(" ", text).strip().lower()
