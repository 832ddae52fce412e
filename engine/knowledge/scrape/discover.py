"""Find the article URLs the configuration names: the URL list, the sitemap (indexes
followed), the feed; at most ``max_pages`` of them, in that order."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urljoin
from xml.etree import ElementTree

from engine.knowledge.models import PageFailure
from engine.knowledge.scrape.addresses import page_address, page_key
from engine.knowledge.scrape.body import MIB, Collect
from engine.knowledge.scrape.errors import FetchError, NotAllowedHost, PageSkipped, RescrapeFailed
from engine.knowledge.scrape.fetch import SiteFetcher
from engine.knowledge.scrape.sitemap import MAX_SITEMAPS, SitemapReader, local_name

MAX_FEED_BYTES = 10 * MIB  # a feed is parsed whole: it lists the latest entries, not all
log = logging.getLogger(__name__)


@dataclass
class Discovery:
    """The URLs to read; ``skipped`` the sitemaps not read on purpose; ``capped`` when the
    site listed more pages than ``max_pages``."""

    urls: list[str]
    skipped: list[PageFailure] = field(default_factory=list)
    capped: bool = False


class UrlList:
    """Article URLs in order, each page once (addresses.py: without its #fragment, and its
    spellings read as one), at most ``max_pages``."""

    def __init__(self, max_pages: int) -> None:
        self.max_pages = max_pages
        self.urls: list[str] = []
        self.capped = False  # a new URL came after the list was full
        self._keys: set[str] = set()

    def add(self, url: str) -> bool:
        """False once the list is full: the caller stops looking."""
        self.admit(url)
        return not self.capped

    def admit(self, url: str) -> str | None:
        """The page's address when it is new to the list and there is room, else None."""
        key = page_key(url)
        if key in self._keys:
            return None
        if len(self.urls) >= self.max_pages:
            self.capped = True
            return None
        self._keys.add(key)
        self.urls.append(page_address(url))
        return self.urls[-1]

    def note(self, url: str) -> None:
        """A page read under another address: not listed again."""
        self._keys.add(page_key(url))

    def extend(self, urls: Iterable[str]) -> None:
        for url in urls:
            if not self.add(url):
                return


async def discover_urls(
    fetcher: SiteFetcher,
    sitemap_url: str | None,
    feed_url: str | None,
    urls: list[str],
    max_pages: int,
) -> Discovery:
    """Every configured article URL once, up to ``max_pages``. A source that cannot be read
    fails the whole rescrape (switching to a knowledge base missing its articles would be
    worse); only a child sitemap on another host or disallowed by robots.txt is skipped."""
    found = UrlList(max_pages)
    discovery = Discovery(urls=[])
    found.extend(urls)
    if sitemap_url and not found.capped:
        await _walk_sitemaps(fetcher, sitemap_url, found, discovery.skipped)
    if feed_url and not found.capped:
        found.extend(await _read_feed(fetcher, feed_url))
    discovery.urls, discovery.capped = list(found.urls), found.capped
    return discovery


async def _walk_sitemaps(
    fetcher: SiteFetcher, root_url: str, found: UrlList, skipped: list[PageFailure]
) -> None:
    pending, seen = deque([root_url]), set[str]()
    while pending and not found.capped and len(seen) < MAX_SITEMAPS:
        url = pending.popleft()
        if url in seen:
            continue
        seen.add(url)
        try:
            pending += await _read_sitemap(fetcher, url, found)
        except (NotAllowedHost, PageSkipped) as error:  # a child elsewhere: the rest goes on
            if url == root_url:
                raise _unreadable(url, error) from None
            skipped.append(_skip(url, f"sitemap not read: {error.reason}"))
        except FetchError as error:
            raise _unreadable(url, error) from None
    if pending and not found.capped:
        skipped.append(_skip(pending[0], f"sitemap not read: over {MAX_SITEMAPS} sitemaps"))


async def _read_sitemap(fetcher: SiteFetcher, url: str, found: UrlList) -> list[str]:
    """The child sitemaps it lists; its pages go to ``found`` as they are parsed."""
    reader = SitemapReader(url, found.add)
    try:
        await fetcher.read(url, reader)
    except ElementTree.ParseError as error:
        raise RescrapeFailed("engine.rescrape.not_a_sitemap", url=url, error=error) from None
    return reader.children


async def _read_feed(fetcher: SiteFetcher, url: str) -> list[str]:
    body = Collect(MAX_FEED_BYTES)
    try:
        await fetcher.read(url, body)
        root = await asyncio.to_thread(ElementTree.fromstring, bytes(body.data))
    except FetchError as error:
        raise _unreadable(url, error) from None
    except ElementTree.ParseError as error:
        raise RescrapeFailed("engine.rescrape.not_xml", url=url, error=error) from None
    return parse_feed(root, base_url=url)


def parse_feed(root: ElementTree.Element, base_url: str) -> list[str]:
    """The entry links of an RSS (<item><link>) or Atom (<entry><link href>) feed."""
    links: list[str] = []
    for entry in root.iter():
        if local_name(entry) not in ("item", "entry"):
            continue
        for link in entry:
            if local_name(link) != "link" or link.get("rel", "alternate") != "alternate":
                continue
            href = (link.get("href") or link.text or "").strip()
            if href:
                links.append(urljoin(base_url, href))
                break
    return links


def _unreadable(url: str, error: FetchError) -> RescrapeFailed:
    return RescrapeFailed("engine.rescrape.not_fetched", url=url, error=error.reason)


def _skip(url: str, reason: str) -> PageFailure:
    log.info("rescrape: skipped %s: %s", url, reason)
    return PageFailure(url, reason, "skipped")
