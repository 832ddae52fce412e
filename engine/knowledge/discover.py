"""Find the article URLs the configuration names: sitemap (indexes followed), feed, list."""

from __future__ import annotations

import asyncio
from urllib.parse import urljoin
from xml.etree import ElementTree

from .errors import RescrapeFailed
from .fetch import FetchError, SiteFetcher

MAX_SITEMAPS = 200  # a sitemap index may nest; this bounds a misbehaving one


async def discover_urls(
    fetcher: SiteFetcher, sitemap_url: str | None, feed_url: str | None, urls: list[str]
) -> list[str]:
    """Every configured article URL once, in order. A source that cannot be read fails the
    whole rescrape: switching to a knowledge base missing its articles would be worse."""
    found = list(urls)
    if sitemap_url:
        found += await _walk_sitemaps(fetcher, sitemap_url)
    if feed_url:
        found += parse_feed(await _get_xml(fetcher, feed_url), base_url=feed_url)
    return list(dict.fromkeys(url.split("#", 1)[0] for url in found))


async def _walk_sitemaps(fetcher: SiteFetcher, root_url: str) -> list[str]:
    pending, seen, pages = [root_url], set[str](), list[str]()
    while pending and len(seen) < MAX_SITEMAPS:
        url = pending.pop(0)
        if url in seen:
            continue
        seen.add(url)
        children, found = parse_sitemap(await _get_xml(fetcher, url), base_url=url)
        pending += children
        pages += found
    return pages


async def _get_xml(fetcher: SiteFetcher, url: str) -> ElementTree.Element:
    try:
        body = (await fetcher.get(url)).body
        return await asyncio.to_thread(ElementTree.fromstring, body)  # sitemaps can be large
    except FetchError as error:
        raise RescrapeFailed(f"could not fetch {url}: {error.reason}") from None
    except ElementTree.ParseError as error:
        raise RescrapeFailed(f"could not read {url} as XML: {error}") from None


def parse_sitemap(root: ElementTree.Element, base_url: str) -> tuple[list[str], list[str]]:
    """(child sitemaps, page URLs): a <sitemapindex> lists the first, a <urlset> the second."""
    locs = [
        urljoin(base_url, (loc.text or "").strip())
        for loc in root.iter()
        if _name(loc) == "loc" and (loc.text or "").strip()
    ]
    return (locs, []) if _name(root) == "sitemapindex" else ([], locs)


def parse_feed(root: ElementTree.Element, base_url: str) -> list[str]:
    """The entry links of an RSS (<item><link>) or Atom (<entry><link href>) feed."""
    links: list[str] = []
    for entry in root.iter():
        if _name(entry) not in ("item", "entry"):
            continue
        for link in entry:
            if _name(link) != "link" or link.get("rel", "alternate") != "alternate":
                continue
            href = (link.get("href") or link.text or "").strip()
            if href:
                links.append(urljoin(base_url, href))
                break
    return links


def _name(element: ElementTree.Element) -> str:
    """The tag without its namespace: sitemaps and feeds come with several."""
    return element.tag.rsplit("}", 1)[-1] if isinstance(element.tag, str) else ""
