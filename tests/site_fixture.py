"""A fake team website served over real HTTP on 127.0.0.1, recording every request.

It has what a real site has: a sitemap index, a sitemap, an RSS feed, robots.txt, articles
in English and Japanese wrapped in navigation and footer boilerplate, a page that fails,
and a page that redirects to a host the bot may not fetch. Tests add more: redirects, extra
sitemap entries, raw bodies (a PDF, a huge page), a generated sitemap of any size.
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from aiohttp import web
from aiohttp.test_utils import TestServer

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
LAST_MODIFIED = "Mon, 06 May 2024 10:00:00 GMT"
ROBOTS = "User-agent: *\nDisallow: /private/\n"

PAGE = """<!doctype html>
<html lang="{lang}"><head><meta charset="utf-8"><title>{title} | Team Site</title></head>
<body>
<header><nav><a href="/">Home</a> <a href="/articles/">Articles</a> <a href="/about">About us</a>
<a href="/contact">Contact</a></nav></header>
<div class="cookie-banner">We use cookies to improve your experience. Accept all cookies?</div>
<main><article><h1>{title}</h1>
{paragraphs}
</article></main>
<aside><h3>Popular posts</h3><ul><li><a href="/articles/widgets">Widgets</a></li>
<li><a href="/articles/gears">Gears</a></li></ul></aside>
<footer><p>Copyright 2024 Example Team. All rights reserved.</p>
<p><a href="/privacy">Privacy policy</a> | <a href="/terms">Terms of use</a></p></footer>
</body></html>"""

ARTICLES: dict[str, tuple[str, str, list[str]]] = {
    "/articles/widgets": (
        "en",
        "The widget warranty explained",
        [
            "Every widget we sell comes with a three year warranty covering parts and labour.",
            "To claim the warranty, send the serial number printed under the widget to the "
            "support desk together with a short description of the fault.",
            "Widgets damaged by water or by a fall are not covered, but we repair them at cost.",
        ]
        + [
            f"Section {n}: the warranty also covers the widget's firmware updates, which we "
            "publish every quarter and install for free at any of our service points. "
            "Keep your receipt: it is the proof of purchase the service point will ask for."
            for n in range(1, 9)
        ],
    ),
    "/articles/gears": (
        "en",
        "Choosing the right gear ratio",
        [
            "A gearbox trades speed for torque. The gear ratio tells you how much.",
            "For a conveyor, start with a ratio of ten to one and measure the motor current.",
            "Lubricate the gears every six months with the grease listed in the manual.",
        ],
    ),
    "/articles/tokyo-office": (
        "ja",
        "東京オフィスのご案内",
        [
            "東京オフィスは渋谷駅から徒歩五分のビルの八階にあります。",
            "営業時間は平日の午前九時から午後六時までです。土日祝日はお休みです。",
            "来訪の際は受付で名前をお伝えください。担当者がお迎えに上がります。",
            "駐車場はありませんので、公共交通機関をご利用ください。",
        ],
    ),
    "/articles/holidays": (
        "en",
        "Office holidays for the coming year",
        [
            "The office closes for the New Year holidays from December 29 to January 3.",
            "During the closure, urgent support requests go to the on-call engineer by email.",
            "Other public holidays follow the national calendar published each autumn.",
        ],
    ),
}
SECRET = (
    "en",
    "Internal salaries",
    ["This page lists internal salary bands and must never be scraped by bots."],
)


@dataclass(frozen=True)
class Hit:
    """One request as the site saw it."""

    path: str
    status: int
    conditional: bool
    at: float = 0.0  # time.monotonic() when the request came in


Middleware = Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]


def hit_recorder(hits: list[Hit], *, with_query: bool = False) -> Middleware:
    """A middleware that notes every request in ``hits``: its path (with the query string if
    ``with_query``), its status, whether it was conditional, and when it came."""

    @web.middleware
    async def record(request: web.Request, handler: Handler) -> web.StreamResponse:
        path = request.path_qs if with_query else request.path
        conditional, at = "If-None-Match" in request.headers, time.monotonic()
        try:
            response = await handler(request)
        except web.HTTPException as error:
            hits.append(Hit(path, error.status, conditional, at))
            raise
        hits.append(Hit(path, response.status, conditional, at))
        return response

    return record


@dataclass
class FakeSite:
    """The site; tests change ``articles`` or ``failing`` between rescrapes."""

    foreign_base: str
    articles: dict[str, tuple[str, str, list[str]]] = field(
        default_factory=lambda: {
            path: (*page[:2], list(page[2])) for path, page in ARTICLES.items()
        }
    )
    failing: set[str] = field(default_factory=lambda: {"/articles/broken"})
    hits: list[Hit] = field(default_factory=list)
    robots: str = ROBOTS
    extra_locs: list[str] = field(default_factory=list)  # more URLs in the articles sitemap
    extra_sitemaps: list[str] = field(default_factory=list)  # more children of the index
    redirects: dict[str, str] = field(default_factory=dict)  # path -> 302 to this URL
    raw: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # path -> (type, body)
    generated: int = 0  # /generated-sitemap.xml(.gz) lists /gen/0 … /gen/<generated - 1>
    base: str = ""
    hanging: asyncio.Event = field(default_factory=asyncio.Event)  # /slow has been requested
    release: asyncio.Event = field(default_factory=asyncio.Event)  # lets /slow answer

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/robots.txt", self._robots)
        app.router.add_get("/sitemap_index.xml", self._sitemap_index)
        app.router.add_get("/sitemap-articles.xml", self._sitemap)
        app.router.add_get("/feed.xml", self._feed)
        app.router.add_get("/generated-sitemap.xml", self._generated_sitemap)
        app.router.add_get("/generated-sitemap.xml.gz", self._generated_sitemap_gz)
        app.router.add_get("/articles/moved", self._moved)
        app.router.add_get("/slow", self._slow)
        app.router.add_get("/{path:.*}", self._page)
        app.middlewares.append(hit_recorder(self.hits))
        return app

    @property
    def netloc(self) -> str:
        """host:port, as an entry of ``site_allowed_hosts``."""
        return urlsplit(self.base).netloc

    def downloads(self) -> set[str]:
        """Paths of articles sent in full (200), as opposed to 304 Not Modified."""
        return {hit.path for hit in self.hits if hit.status == 200 and "/articles/" in hit.path}

    async def _robots(self, _: web.Request) -> web.Response:
        return web.Response(text=self.robots)

    async def _sitemap_index(self, _: web.Request) -> web.Response:
        if "/sitemap_index.xml" in self.failing:
            raise web.HTTPInternalServerError()
        return _xml(
            '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"<sitemap><loc>{self.base}/sitemap-articles.xml</loc></sitemap>"
            + "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in self.extra_sitemaps)
            + "</sitemapindex>"
        )

    async def _sitemap(self, _: web.Request) -> web.Response:
        paths = ["/articles/widgets", "/articles/gears", "/articles/tokyo-office"]
        paths += ["/articles/broken", "/articles/moved", "/private/secret"]
        locs = [f"{self.base}{path}" for path in paths] + [f"{self.foreign_base}/listed"]
        return _xml(_urlset([*locs, *self.extra_locs]))

    async def _generated_sitemap(self, _: web.Request) -> web.Response:
        return _xml(_urlset(f"{self.base}/gen/{n}" for n in range(self.generated)))

    async def _generated_sitemap_gz(self, request: web.Request) -> web.Response:
        """Packed, and typed as plain bytes the way many servers send .gz files."""
        xml = (await self._generated_sitemap(request)).text or ""
        packed = gzip.compress(xml.encode())
        return web.Response(body=packed, content_type="application/octet-stream")

    async def _feed(self, _: web.Request) -> web.Response:
        items = "".join(
            f"<item><title>{path}</title><link>{self.base}{path}</link></item>"
            for path in ("/articles/widgets", "/articles/holidays")
        )
        return _xml(f'<rss version="2.0"><channel><title>Team</title>{items}</channel></rss>')

    async def _moved(self, _: web.Request) -> web.Response:
        raise web.HTTPFound(f"{self.foreign_base}/stolen")

    async def _slow(self, _: web.Request) -> web.Response:
        """Answers only when the test says so: a request still in flight."""
        self.hanging.set()
        await self.release.wait()
        return web.Response(status=503)

    async def _page(self, request: web.Request) -> web.Response:
        if request.path in self.failing:
            raise web.HTTPInternalServerError()
        if request.path in self.redirects:
            raise web.HTTPFound(self.redirects[request.path])
        if request.path in self.raw:
            content_type, body = self.raw[request.path]
            return web.Response(body=body, headers={"Content-Type": content_type})
        page = self._article(request.path)
        if page is None:
            raise web.HTTPNotFound()
        lang, title, paragraphs = page
        html = PAGE.format(
            lang=lang, title=title, paragraphs="\n".join(f"<p>{p}</p>" for p in paragraphs)
        )
        etag = '"' + hashlib.sha256(html.encode()).hexdigest()[:16] + '"'
        if request.headers.get("If-None-Match") == etag:
            return web.Response(status=304, headers={"ETag": etag})
        headers = {"ETag": etag, "Last-Modified": LAST_MODIFIED}
        return web.Response(text=html, content_type="text/html", headers=headers)

    def _article(self, path: str) -> tuple[str, str, list[str]] | None:
        if path == "/private/secret":
            return SECRET
        number = path.removeprefix("/gen/")
        if path.startswith("/gen/") and number.isdigit() and int(number) < self.generated:
            return ("en", f"Generated article {number}", [f"Article {number} says hello. " * 5])
        return self.articles.get(path)


@dataclass
class ForeignSite:
    """A host outside ``site_allowed_hosts``: it only records that it was reached."""

    hits: list[str] = field(default_factory=list)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/{path:.*}", self._any)
        return app

    async def _any(self, request: web.Request) -> web.Response:
        self.hits.append(request.path)
        return web.Response(text="<html><body><p>Not your site.</p></body></html>")


def _urlset(locs: Iterable[str]) -> str:
    urls = "".join(f"<url><loc>{loc}</loc></url>" for loc in locs)
    return f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'


def _xml(text: str) -> web.Response:
    return web.Response(
        text='<?xml version="1.0" encoding="UTF-8"?>' + text, content_type="application/xml"
    )


async def start(app: web.Application) -> TestServer:
    """Serve ``app`` on 127.0.0.1 at a free port."""
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    return server
