"""What a crawl reads next, breadth first: the listed pages (depth 0), then the pages they
link to (depth 1), and so on to the depth cap, each page once, at most ``max_pages`` in all.

Breadth first, level by level: when the page cap cuts the crawl, what is left out is the
pages farthest from the start, not a whole branch; and each level is read as the listed
pages are, a few at a time per host (gates.py). Links are kept only to pages worth a request:
an allowed origin, and not a file whose name says it is something else than a page
(``.pdf``, ``.png``, ``.zip``); a link elsewhere is the site's business, not a page to report.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from engine.knowledge.scrape.body import HTML_TYPES
from engine.knowledge.scrape.discover import Discovery, UrlList
from engine.knowledge.scrape.hosts import HostPolicy

# Types by a name's extension from Python's own table, not the system's /etc/mime.types:
# the same on every machine. A name it does not know (no extension, .php) may be a page.
FILE_TYPES = mimetypes.MimeTypes()


@dataclass(frozen=True, slots=True)
class Visit:
    """One page to read, how many links away from a listed page, and the page linking to it."""

    url: str
    depth: int = 0
    linked_from: str | None = None


class Frontier:
    """The crawl's queue over ``discovery``'s pages; ``max_depth`` None follows no link (no
    start page configured: the listed pages are the site)."""

    def __init__(
        self, discovery: Discovery, max_pages: int, policy: HostPolicy, max_depth: int | None
    ) -> None:
        self._pages = UrlList(max_pages)
        self._pages.extend(discovery.urls)
        self._pages.capped = discovery.capped
        self._policy = policy
        self._max_depth = max_depth

    @property
    def found(self) -> int:
        """Pages to read so far, the listed ones included."""
        return len(self._pages.urls)

    @property
    def capped(self) -> bool:
        """More pages were listed or linked than ``max_pages``."""
        return self._pages.capped

    def first_level(self) -> list[Visit]:
        return [Visit(url) for url in self._pages.urls]

    def follows(self, visit: Visit) -> bool:
        """Whether the links of ``visit``'s page are read: not at the depth cap."""
        return self._max_depth is not None and visit.depth < self._max_depth

    def next_level(self, level: Sequence[Visit], links: Sequence[Iterable[str]]) -> list[Visit]:
        """The pages ``level``'s pages link to (``links``, page by page) not seen before, in
        page order, until the page cap."""
        found: list[Visit] = []
        for visit, targets in zip(level, links, strict=True):
            for target in targets:
                if not self._worth_a_request(target):
                    continue
                address = self._pages.admit(target)
                if address is not None:
                    found.append(Visit(address, visit.depth + 1, visit.url))
                elif self._pages.capped:
                    return found
        return found

    def allows(self, url: str) -> bool:
        """Whether ``url``'s origin may be fetched (a listed page may be elsewhere)."""
        return self._policy.allows(url)

    def seen(self, url: str) -> None:
        """A page read under another address (a redirect's target): not read again."""
        self._pages.note(url)

    def _worth_a_request(self, url: str) -> bool:
        if not self._policy.allows(url):
            return False
        media, _ = FILE_TYPES.guess_type(urlsplit(url).path)
        return media is None or media in HTML_TYPES
