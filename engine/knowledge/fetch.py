"""Every HTTP request of a rescrape goes through here: allowed hosts only, robots.txt
obeyed, redirects followed by hand so each hop's host is checked, and a per-host limit
with a politeness delay."""

from __future__ import annotations

import asyncio
import gzip
import io
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import aiohttp

from .robots import RobotsCache

MAX_REDIRECTS = 5
MAX_BODY_BYTES = 10 * 1024 * 1024
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
GZIP_MAGIC = b"\x1f\x8b"


class FetchError(Exception):
    """A request that gave no usable page. ``status`` is None when no HTTP answer came."""

    def __init__(self, reason: str, status: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status

    @property
    def transient(self) -> bool:
        """A timeout or a server error: the page probably still exists."""
        return self.status is None or self.status >= 500


class RobotsDisallowed(FetchError):
    """robots.txt asks us not to fetch this URL: skipped, not failed."""


@dataclass(frozen=True, slots=True)
class Response:
    """A 200 (with a body) or a 304 (without)."""

    url: str
    status: int
    body: bytes
    etag: str | None = None
    last_modified: str | None = None


class HostPolicy:
    """The hosts that may be fetched, compared by host name (any port)."""

    def __init__(self, hosts: Iterable[str]) -> None:
        self.hosts = frozenset(host.lower() for host in hosts)

    def allows(self, url: str) -> bool:
        try:
            parts = urlsplit(url)
            host = parts.hostname or ""
        except ValueError:  # a malformed URL, e.g. from a Location header
            return False
        return parts.scheme in ("http", "https") and host in self.hosts


class HostGates:
    """At most ``concurrency`` requests per host; each slot rests ``delay_s`` after use."""

    def __init__(self, concurrency: int, delay_s: float) -> None:
        self._concurrency = concurrency
        self._delay_s = delay_s
        self._semaphores: dict[str, asyncio.Semaphore] = {}

    @asynccontextmanager
    async def slot(self, url: str) -> AsyncIterator[None]:
        host = urlsplit(url).netloc.lower()
        semaphore = self._semaphores.setdefault(host, asyncio.Semaphore(self._concurrency))
        async with semaphore:
            yield
            await asyncio.sleep(self._delay_s)


class SiteFetcher:
    """GETs within the policy; ``get`` returns a 200 or 304 and raises FetchError otherwise."""

    def __init__(self, session: aiohttp.ClientSession, policy: HostPolicy, gates: HostGates):
        self._session = session
        self._policy = policy
        self._gates = gates
        user_agent = session.headers.get("User-Agent", "*")
        self._robots = RobotsCache(self._fetch_robots, user_agent)

    async def get(self, url: str, headers: dict[str, str] | None = None) -> Response:
        """Follow up to MAX_REDIRECTS hops, checking host and robots.txt at each."""
        for _ in range(MAX_REDIRECTS + 1):
            await self._check(url)
            status, location, response = await self._request(url, headers or {})
            if location is None:
                return _accept(status, response)
            url = location
        raise FetchError("too many redirects", status)

    async def _check(self, url: str) -> None:
        if not self._policy.allows(url):
            raise FetchError(f"not an allowed host: {url}")
        if not await self._robots.allows(url):
            raise RobotsDisallowed("disallowed by robots.txt")

    async def _request(self, url: str, headers: dict[str, str]) -> tuple[int, str | None, Response]:
        """One hop: (status, redirect target or None, response)."""
        try:
            async with (
                self._gates.slot(url),
                self._session.get(url, headers=headers, allow_redirects=False) as resp,
            ):
                if resp.status in REDIRECT_STATUSES and "Location" in resp.headers:
                    location = urljoin(url, resp.headers["Location"])
                    return resp.status, location, Response(url, resp.status, b"")
                body = await _read_capped(resp) if resp.status == 200 else b""
                etag, modified = resp.headers.get("ETag"), resp.headers.get("Last-Modified")
                return resp.status, None, Response(url, resp.status, body, etag, modified)
        except (aiohttp.ClientError, TimeoutError) as error:
            raise FetchError(f"{type(error).__name__}: {error}".rstrip(": ")) from None

    async def _fetch_robots(self, url: str) -> tuple[int | None, str]:
        """robots.txt itself: redirects followed within the policy, never robots-checked."""
        for _ in range(MAX_REDIRECTS + 1):
            if not self._policy.allows(url):
                return None, ""
            try:
                status, location, response = await self._request(url, {})
            except FetchError:
                return None, ""
            if location is None:
                return status, response.body.decode("utf-8", "replace")
            url = location
        return None, ""


def _accept(status: int, response: Response) -> Response:
    if status not in (200, 304):
        raise FetchError(f"HTTP {status}", status)
    return response


async def _read_capped(resp: aiohttp.ClientResponse) -> bytes:
    """The body, refusing pages over MAX_BODY_BYTES; gzip files (sitemap.xml.gz) unpacked."""
    body = bytearray()
    async for chunk in resp.content.iter_chunked(64 * 1024):
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise FetchError(f"larger than {MAX_BODY_BYTES} bytes", resp.status)
    if body.startswith(GZIP_MAGIC):
        return _gunzip_capped(bytes(body))
    return bytes(body)


def _gunzip_capped(data: bytes) -> bytes:
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as unpacked:
            body = unpacked.read(MAX_BODY_BYTES + 1)
    except (OSError, EOFError) as error:
        raise FetchError(f"bad gzip data: {error}", 200) from None
    if len(body) > MAX_BODY_BYTES:
        raise FetchError(f"larger than {MAX_BODY_BYTES} bytes unpacked", 200)
    return body


def allowed_hosts(configured: Iterable[str], source_urls: Iterable[str]) -> HostPolicy:
    """The configured hosts, or when none are set, the hosts of the configured source URLs."""
    hosts = list(configured) or [urlsplit(url).hostname or "" for url in source_urls]
    return HostPolicy(host for host in hosts if host)
