"""A small site found only by its links, served over real HTTP on 127.0.0.1.

No sitemap and no feed unless a test lists pages in ``sitemap``: a crawl from its front page
must find every page through the links. Every request is recorded with its query string, so
a test sees a page fetched twice under two spellings.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import pytest
from aiohttp import web

from tests.site_fixture import Hit, hit_recorder
from tests.site_fixture import start as start_site

TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title} | Harbour Office</title>{head}</head>
<body>
<nav>{nav}</nav>
<main><h1>{title}</h1>
<p>{text}</p>
{extra}
</main>
<footer><p>Harbour Office, Pier 3.</p></footer>
</body></html>"""


@dataclass
class Page:
    """One page: its nav links (hrefs as written), and markup for its head and main text."""

    title: str
    text: str
    links: list[str] = field(default_factory=list)
    head: str = ""  # a robots meta tag, a canonical link
    extra: str = ""  # more markup in the main text (a rel=nofollow link)
    headers: dict[str, str] = field(default_factory=dict)  # X-Robots-Tag

    def html(self) -> str:
        nav = " ".join(f'<a href="{href}">{href}</a>' for href in self.links)
        return TEMPLATE.format(
            title=self.title, text=self.text, nav=nav, head=self.head, extra=self.extra
        )


def front_pages() -> dict[str, Page]:
    """Four levels: / → /ferries/, /about → the two ferry pages → /fares."""
    return {
        "/": Page(
            "Welcome to the harbour office",
            "Ferries, fares and the office's opening hours: everything for the crossing.",
            [
                "/ferries/",
                "/about",
                "/#top",
                "mailto:desk@harbour.example",
                "https://elsewhere.example/",
            ],
        ),
        "/ferries/": Page(
            "Ferry lines",
            "Two lines leave the harbour every day, to Minato and to Kita island.",
            [
                "/ferries/minato",
                "/ferries/minato#times",
                "/ferries/minato?utm_source=newsletter",
                "/ferries/?sort=date",
                "kita",  # relative to /ferries/
                "/",
            ],
        ),
        "/about": Page(
            "About the office",
            "The harbour office is open from eight to six and sells every ferry ticket.",
            ["/"],
        ),
        "/ferries/minato": Page(
            "The Minato ferry",
            "The last ferry to Minato leaves at 16:50; the crossing takes forty minutes.",
            ["/ferries/"],
        ),
        "/ferries/kita": Page(
            "The Kita ferry",
            "The Kita ferry runs twice a day and carries bicycles for free on weekdays.",
            ["/fares"],
        ),
        "/fares": Page(
            "Fares",
            "A single crossing costs 900 yen; children under twelve travel for half price.",
        ),
    }


BFS_ORDER = ["/", "/ferries/", "/about", "/ferries/minato", "/ferries/kita", "/fares"]
DEPTH = {"/": 0, "/ferries/": 1, "/about": 1, "/ferries/minato": 2, "/ferries/kita": 2, "/fares": 3}


@dataclass
class LinkedSite:
    """The site; tests change ``pages``, ``robots``, ``sitemap`` or ``raw`` before a crawl."""

    pages: dict[str, Page] = field(default_factory=front_pages)
    robots: str = "User-agent: *\nDisallow: /private/\n"
    sitemap: list[str] | None = None  # paths listed at /sitemap.xml; None: no sitemap (404)
    raw: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # path -> (type, body)
    hits: list[Hit] = field(default_factory=list)
    base: str = ""

    def app(self) -> web.Application:
        app = web.Application(middlewares=[hit_recorder(self.hits, with_query=True)])
        app.router.add_get("/robots.txt", self._robots)
        app.router.add_get("/sitemap.xml", self._sitemap)
        app.router.add_get("/{path:.*}", self._page)
        return app

    @property
    def netloc(self) -> str:
        return urlsplit(self.base).netloc

    def page_hits(self, status: int | None = None) -> list[str]:
        """Every request for a page (not robots.txt or the sitemap) with its query string, in
        the order they came in; only those answered with ``status`` when it is given."""
        return [hit.path for hit in self.page_requests() if status in (None, hit.status)]

    def page_requests(self) -> list[Hit]:
        hits = sorted(self.hits, key=lambda hit: hit.at)
        return [hit for hit in hits if hit.path not in ("/robots.txt", "/sitemap.xml")]

    async def _robots(self, _: web.Request) -> web.Response:
        return web.Response(text=self.robots)

    async def _sitemap(self, _: web.Request) -> web.Response:
        if self.sitemap is None:
            raise web.HTTPNotFound()
        urls = "".join(f"<url><loc>{self.base}{path}</loc></url>" for path in self.sitemap)
        xml = f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
        return web.Response(text=xml, content_type="application/xml")

    async def _page(self, request: web.Request) -> web.Response:
        if request.path in self.raw:
            content_type, body = self.raw[request.path]
            return web.Response(body=body, headers={"Content-Type": content_type})
        page = self.pages.get(request.path)
        if page is None:
            raise web.HTTPNotFound()
        html = page.html()
        etag = '"' + hashlib.sha256(html.encode()).hexdigest()[:16] + '"'
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers={"ETag": etag})
        headers = {"ETag": etag, **page.headers}
        return web.Response(text=html, content_type="text/html", headers=headers)


@pytest.fixture
async def linked() -> AsyncIterator[LinkedSite]:
    """A ``LinkedSite`` served on a free port for one test."""
    site = LinkedSite()
    server = await start_site(site.app())
    site.base = f"http://127.0.0.1:{server.port}"
    yield site
    await server.close()
