"""Server-sent events: every open page gets the whole state, at most every ``MIN_INTERVAL_S``
after a change and at least every second (so "waited" keeps counting).

One JSON document per update keeps the page simple (it redraws from it) and a page that
missed one loses nothing. Each subscriber holds only the newest document: a slow page skips
updates instead of making the server buffer them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

MIN_INTERVAL_S = 0.5  # a streaming answer shows in steps of this, within the 1 s goal
HEARTBEAT_S = 1.0


class Subscriber:
    def __init__(self) -> None:
        self._latest: str | None = None
        self._ready = asyncio.Event()
        self.closed = False

    def offer(self, document: str) -> None:
        self._latest = document
        self._ready.set()

    def close(self) -> None:
        self.closed = True
        self._ready.set()

    async def documents(self) -> AsyncIterator[str]:
        while True:
            await self._ready.wait()
            self._ready.clear()
            if self.closed:
                return
            if self._latest is not None:
                document, self._latest = self._latest, None
                yield document


class Hub:
    def __init__(self, render: Callable[[], dict[str, Any]]) -> None:
        self.render = render
        self.subscribers: set[Subscriber] = set()
        self._dirty = asyncio.Event()
        self._closed = False

    def changed(self) -> None:
        self._dirty.set()

    def subscribe(self) -> Subscriber:
        subscriber = Subscriber()
        subscriber.offer(self.document())  # the page shows the state at once
        self.subscribers.add(subscriber)
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        self.subscribers.discard(subscriber)

    def document(self) -> str:
        return json.dumps(self.render(), separators=(",", ":"), ensure_ascii=False)

    async def run(self) -> None:
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow the task's
        # cancellation when the event is set at that moment, and the loop would never end.
        while not self._closed:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(HEARTBEAT_S):
                    await self._dirty.wait()
            self._dirty.clear()
            if self.subscribers:
                document = self.document()
                for subscriber in self.subscribers:
                    subscriber.offer(document)
            await asyncio.sleep(MIN_INTERVAL_S)

    def close(self) -> None:
        self._closed = True
        for subscriber in self.subscribers:
            subscriber.close()
        self.subscribers.clear()
