"""A sitemap read as it downloads: a pull parser hands over each ``<loc>`` and forgets it, so
a sitemap of 50,000 URLs is held neither whole as bytes nor as a tree, and the download
stops as soon as the page cap is reached."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urljoin
from xml.etree import ElementTree

from engine.knowledge.scrape.body import MIB, size_text
from engine.knowledge.scrape.errors import FetchError

MAX_SITEMAP_BYTES = 50 * MIB  # the sitemap protocol's own limit, uncompressed
MAX_SITEMAPS = 200  # a sitemap index may nest; this bounds a misbehaving one
ROOTS = frozenset({"urlset", "sitemapindex"})


class SitemapReader:
    """A ``BodyReader``: page URLs go to ``add_page`` (False: the cap is reached, stop), the
    child sitemaps of an index gather in ``children``. A document that is not XML, or not a
    sitemap, raises ``ElementTree.ParseError``."""

    def __init__(self, base_url: str, add_page: Callable[[str], bool]) -> None:
        self.children: list[str] = []
        self._base_url = base_url
        self._add_page = add_page
        self._parser: ElementTree.XMLPullParser[ElementTree.Element] = ElementTree.XMLPullParser(
            events=("start", "end")
        )
        self._root: ElementTree.Element | None = None
        self._size = 0
        self._depth = 0  # of the element being parsed: 1 is the root

    def start(self, content_type: str) -> None:
        """Any type: sitemaps come as application/xml, text/xml, text/plain or gzip bytes."""

    def feed(self, data: bytes) -> bool:
        self._size += len(data)
        if self._size > MAX_SITEMAP_BYTES:
            raise FetchError(f"too large (over {size_text(MAX_SITEMAP_BYTES)})", 200)
        self._parser.feed(data)
        for event in self._parser.read_events():
            element = event[-1]
            if not isinstance(element, ElementTree.Element):
                continue  # only start and end events are asked for
            if event[0] == "start":
                self._depth += 1
                if self._root is None:
                    self._root = _checked_root(element)
                continue
            self._depth -= 1
            if not self._take(element):
                return False
        return True

    def _take(self, element: ElementTree.Element) -> bool:
        """A finished element: an entry's <loc> is passed on (not an <image:loc> deeper down),
        an entry is dropped from the tree once read, so nothing keeps a second copy."""
        if self._root is None:
            return True
        if self._depth == 1:  # an entry (<url> or <sitemap>) ends
            self._root.clear()
            return True
        url = (element.text or "").strip()
        if self._depth != 2 or local_name(element) != "loc" or not url:
            return True
        url = urljoin(self._base_url, url)
        if local_name(self._root) == "sitemapindex":
            if len(self.children) < MAX_SITEMAPS:
                self.children.append(url)
            return True
        return self._add_page(url)


def _checked_root(element: ElementTree.Element) -> ElementTree.Element:
    name = local_name(element)
    if name not in ROOTS:
        raise ElementTree.ParseError(f"not a sitemap (its root element is <{name}>)")
    return element


def local_name(element: ElementTree.Element) -> str:
    """The tag without its namespace: sitemaps and feeds come with several."""
    return element.tag.rsplit("}", 1)[-1] if isinstance(element.tag, str) else ""
