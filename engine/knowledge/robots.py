"""robots.txt, fetched once per host and asked before every other request to that host."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit
from urllib.robotparser import RobotFileParser

# (status, text) of a robots.txt request; status None when the host could not be reached.
RobotsFetch = Callable[[str], Awaitable[tuple[int | None, str]]]


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
        lines = text.splitlines()
    rules = RobotFileParser()
    rules.parse(lines)
    return rules
