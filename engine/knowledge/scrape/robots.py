"""robots.txt, fetched once per origin and asked before every other request to it: may this
URL be fetched, and how long to wait between requests (Crawl-delay)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit
from urllib.robotparser import RobotFileParser

# (status, text) of a robots.txt request; status None when the host could not be reached.
RobotsFetch = Callable[[str], Awaitable[tuple[int | None, str]]]
MAX_CRAWL_DELAY_S = 60.0  # more would make even a hundred pages outlast the rescrape time limit


class RobotsCache:
    """Rules per origin. Following RFC 9309: a 4xx means no rules, a 5xx or no answer
    means everything is disallowed (the site may be down or protecting itself)."""

    def __init__(self, fetch: RobotsFetch, user_agent: str) -> None:
        self._fetch = fetch
        self._user_agent = user_agent
        self._rules: dict[str, RobotFileParser] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def allows(self, url: str) -> bool:
        rules = await self._rules_for(url)
        return rules.can_fetch(self._user_agent, url)

    async def crawl_delay_s(self, url: str) -> float:
        """The Crawl-delay that applies to us on ``url``'s origin, 0 when none is given."""
        rules = await self._rules_for(url)
        delay_ms = rules.crawl_delay(self._user_agent)
        return min(int(delay_ms) / 1000, MAX_CRAWL_DELAY_S) if delay_ms else 0.0

    async def _rules_for(self, url: str) -> RobotFileParser:
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        async with self._locks.setdefault(origin, asyncio.Lock()):
            if origin not in self._rules:
                status, text = await self._fetch(f"{origin}/robots.txt")
                self._rules[origin] = _parse(status, text)
        return self._rules[origin]


def _parse(status: int | None, text: str) -> RobotFileParser:
    if status is None or status >= 500:
        lines = ["User-agent: *", "Disallow: /"]
    elif status >= 400:
        lines = []
    else:
        lines = [_delay_in_ms(line) for line in text.splitlines()]
    rules = RobotFileParser()
    rules.parse(lines)
    return rules


def _delay_in_ms(line: str) -> str:
    """Crawl-delay in whole milliseconds: the standard parser reads only whole numbers, and
    sites write ``Crawl-delay: 0.5``. Its group matching is kept; ``crawl_delay_s`` divides."""
    key, colon, value = line.partition(":")
    if not colon or key.strip().lower() != "crawl-delay":
        return line
    try:
        return f"Crawl-delay: {round(float(value.split('#', 1)[0]) * 1000)}"
    except (ValueError, OverflowError):
        return line
