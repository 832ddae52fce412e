"""Every HTTP request of a rescrape goes through here: allowed origins only, robots.txt obeyed
(its Crawl-delay too), redirects followed by hand so each hop is checked, bodies read through
a reader that caps their size."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urljoin

import aiohttp

from engine.knowledge.scrape.body import MIB, BodyReader, Collect, read_body
from engine.knowledge.scrape.errors import FetchError, NotAllowedHost, RobotsDisallowed
from engine.knowledge.scrape.gates import HostGates
from engine.knowledge.scrape.hosts import HostPolicy
from engine.knowledge.scrape.robots import RobotsCache

MAX_REDIRECTS = 5
MAX_PAGE_BYTES = 10 * MIB
MAX_ROBOTS_BYTES = 512 * 1024  # RFC 9309: at least 500 KiB must be read; the rest may be cut
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


@dataclass(frozen=True, slots=True)
class Response:
    """A 200 (with a body) or a 304 (without); ``robots_tag`` is the X-Robots-Tag header."""

    url: str
    status: int
    body: bytes
    etag: str | None = None
    last_modified: str | None = None
    robots_tag: str | None = None


@dataclass(frozen=True, slots=True)
class _Hop:
    """One request's answer: a redirect (``location`` set) or the final status."""

    url: str
    status: int
    location: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    robots_tag: str | None = None


class SiteFetcher:
    """GETs within the policy; a page that cannot be had raises a ``FetchError`` saying why."""

    def __init__(self, session: aiohttp.ClientSession, policy: HostPolicy, gates: HostGates):
        self._session = session
        self._policy = policy
        self._gates = gates
        user_agent = session.headers.get("User-Agent", "*")
        self._robots = RobotsCache(self._fetch_robots, user_agent)

    async def get(self, url: str, headers: dict[str, str] | None = None) -> Response:
        """A page: a 200 with its HTML (at most MAX_PAGE_BYTES) or a 304."""
        body = Collect(MAX_PAGE_BYTES, html_only=True)
        hop = await self._follow(url, headers or {}, body)
        data = bytes(body.data)
        return Response(hop.url, hop.status, data, hop.etag, hop.last_modified, hop.robots_tag)

    async def read(self, url: str, reader: BodyReader) -> None:
        """A sitemap or feed, streamed into ``reader``; anything but a 200 raises."""
        hop = await self._follow(url, {}, reader)
        if hop.status != 200:
            raise FetchError(f"HTTP {hop.status}", hop.status)

    async def _follow(self, url: str, headers: dict[str, str], reader: BodyReader) -> _Hop:
        """Up to MAX_REDIRECTS hops, checking origin and robots.txt at each."""
        redirected_from: str | None = None
        for _ in range(MAX_REDIRECTS + 1):
            await self._check(url, redirected_from)
            hop = await self._request(url, headers, reader)
            if hop.location is None:
                if hop.status not in (200, 304):
                    raise FetchError(f"HTTP {hop.status}", hop.status)
                return hop
            redirected_from, url = url, hop.location
        raise FetchError("too many redirects", hop.status)

    async def _check(self, url: str, redirected_from: str | None) -> None:
        refusal = self._policy.refusal(url, redirected_from)
        if refusal is not None:
            raise NotAllowedHost(f"{refusal} (redirect to {url})" if redirected_from else refusal)
        if not await self._robots.allows(url):
            raise RobotsDisallowed("disallowed by robots.txt")
        self._gates.space_requests(url, await self._robots.crawl_delay_s(url))

    async def _request(self, url: str, headers: dict[str, str], reader: BodyReader) -> _Hop:
        try:
            async with (
                self._gates.slot(url),
                self._session.get(url, headers=headers, allow_redirects=False) as resp,
            ):
                if resp.status in REDIRECT_STATUSES and "Location" in resp.headers:
                    return _Hop(url, resp.status, location=urljoin(url, resp.headers["Location"]))
                if resp.status == 200:
                    await read_body(resp, reader)
                etag, modified = resp.headers.get("ETag"), resp.headers.get("Last-Modified")
                robots_tag = ", ".join(resp.headers.getall("X-Robots-Tag", [])) or None
                return _Hop(url, resp.status, None, etag, modified, robots_tag)
        except TimeoutError:  # before ClientError: aiohttp's timeouts are both
            raise FetchError(self._timed_out()) from None
        except aiohttp.ClientError as error:
            raise FetchError(f"{type(error).__name__}: {error}".rstrip(": ")) from None

    def _timed_out(self) -> str:
        total_s = self._session.timeout.total
        return f"timed out after {total_s:g} s" if total_s else "timed out"

    async def _fetch_robots(self, url: str) -> tuple[int | None, str]:
        """robots.txt itself: redirects followed within the policy, never robots-checked."""
        redirected_from: str | None = None
        for _ in range(MAX_REDIRECTS + 1):
            if self._policy.refusal(url, redirected_from) is not None:
                return None, ""
            body = Collect(MAX_ROBOTS_BYTES, cut_off=True)
            try:
                hop = await self._request(url, {}, body)
            except FetchError:
                return None, ""
            if hop.location is None:
                return hop.status, _robots_text(body)
            redirected_from, url = url, hop.location
        return None, ""


def _robots_text(body: Collect) -> str:
    """The text, without the line the size cap cut in half."""
    text = body.data.decode("utf-8", "replace")
    return text.rsplit("\n", 1)[0] if body.was_cut else text
