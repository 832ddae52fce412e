"""How hard a rescrape leans on one host: a few requests at once, a rest after each, and,
when robots.txt gives a Crawl-delay, request starts spaced at least that far apart."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass
class _HostGate:
    semaphore: asyncio.Semaphore
    spacing_s: float = 0.0  # between request starts; 0 until robots.txt sets a Crawl-delay
    next_start: float = 0.0  # on the event loop's clock
    turn: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def wait_turn(self) -> None:
        if self.spacing_s <= 0:
            return
        async with self.turn:
            loop = asyncio.get_running_loop()
            wait_s = self.next_start - loop.time()
            if wait_s > 0:
                await asyncio.sleep(wait_s)
            self.next_start = loop.time() + self.spacing_s


class HostGates:
    """At most ``concurrency`` requests per host; each slot rests ``delay_s`` after use."""

    def __init__(self, concurrency: int, delay_s: float) -> None:
        self._concurrency = concurrency
        self._delay_s = delay_s
        self._gates: dict[str, _HostGate] = {}

    def space_requests(self, url: str, crawl_delay_s: float) -> None:
        """robots.txt's Crawl-delay for ``url``'s host: starts at least the larger of it and
        ``delay_s`` apart, however many requests may run at once."""
        if crawl_delay_s > 0:
            self._gate(url).spacing_s = max(crawl_delay_s, self._delay_s)

    @asynccontextmanager
    async def slot(self, url: str) -> AsyncIterator[None]:
        gate = self._gate(url)
        async with gate.semaphore:
            await gate.wait_turn()
            try:
                yield
            except Exception:
                await asyncio.sleep(self._delay_s)  # a failed request rests too (not a cancel)
                raise
            await asyncio.sleep(self._delay_s)

    def _gate(self, url: str) -> _HostGate:
        host = urlsplit(url).netloc.lower()
        if host not in self._gates:
            self._gates[host] = _HostGate(asyncio.Semaphore(self._concurrency))
        return self._gates[host]
