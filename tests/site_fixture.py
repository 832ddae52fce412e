"""A fake team website served over real HTTP on 127.0.0.1, recording every request.

It has what a real site has: a sitemap index, a sitemap, an RSS feed, robots.txt, articles
in English and Japanese wrapped in navigation and footer boilerplate, a page that fails,
and a page that redirects to a host the bot may not fetch.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web
from aiohttp.test_utils import TestServer

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
LAST_MODIFIED = "Mon, 06 May 2024 10:00:00 GMT"

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
    base: str = ""
    hanging: asyncio.Event = field(default_factory=asyncio.Event)  # /slow has been requested
    release: asyncio.Event = field(default_factory=asyncio.Event)  # lets /slow answer

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/robots.txt", self._robots)
        app.router.add_get("/sitemap_index.xml", self._sitemap_index)
        app.router.add_get("/sitemap-articles.xml", self._sitemap)
        app.router.add_get("/feed.xml", self._feed)
        app.router.add_get("/articles/moved", self._moved)
        app.router.add_get("/slow", self._slow)
        app.router.add_get("/{path:.*}", self._page)
        app.middlewares.append(self._record)
        return app

    def downloads(self) -> set[str]:
        """Paths of articles sent in full (200), as opposed to 304 Not Modified."""
        return {hit.path for hit in self.hits if hit.status == 200 and "/articles/" in hit.path}

    @web.middleware
    async def _record(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        conditional = "If-None-Match" in request.headers
        try:
            response = await handler(request)
        except web.HTTPException as error:
            self.hits.append(Hit(request.path, error.status, conditional))
            raise
        self.hits.append(Hit(request.path, response.status, conditional))
        return response

    async def _robots(self, _: web.Request) -> web.Response:
        return web.Response(text="User-agent: *\nDisallow: /private/\n")

    async def _sitemap_index(self, _: web.Request) -> web.Response:
        if "/sitemap_index.xml" in self.failing:
            raise web.HTTPInternalServerError()
        return _xml(
            '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"<sitemap><loc>{self.base}/sitemap-articles.xml</loc></sitemap></sitemapindex>"
        )

    async def _sitemap(self, _: web.Request) -> web.Response:
        paths = ["/articles/widgets", "/articles/gears", "/articles/tokyo-office"]
        paths += ["/articles/broken", "/articles/moved", "/private/secret"]
        locs = [f"{self.base}{path}" for path in paths] + [f"{self.foreign_base}/listed"]
        urls = "".join(f"<url><loc>{loc}</loc></url>" for loc in locs)
        return _xml(f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>')

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
        page = self.articles.get(request.path) or (
            SECRET if request.path == "/private/secret" else None
        )
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


def _xml(text: str) -> web.Response:
    return web.Response(
        text='<?xml version="1.0" encoding="UTF-8"?>' + text, content_type="application/xml"
    )


async def start(app: web.Application) -> TestServer:
    """Serve ``app`` on 127.0.0.1 at a free port."""
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    return server
