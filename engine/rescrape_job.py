"""The ``/rescrape`` job: rebuilds the knowledge base in the background, beside the answers,
streaming its progress to the asker; one at a time."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from broker.protocol import Request
from config.settings import Settings
from engine.cancelled import CancelledSessions
from engine.knowledge import RescrapeFailed, RescrapeStopped, ScrapeProgress, rescrape
from engine.replies import INTERRUPTED, STOPPED_BY_USER, Replies

log = logging.getLogger(__name__)

StopReason = Callable[[], str | None]  # why the job must stop now (STOPPED_BY_USER or a failure)
KEPT = "the previous knowledge base is still in use."


class RescrapeJob:
    """Rebuilds the knowledge base; needs no model, so answers go on meanwhile."""

    acks_at_start = True  # it may outlast RabbitMQ's consumer timeout

    def __init__(self, settings: Settings, cancelled: CancelledSessions) -> None:
        self.settings = settings
        self.cancelled = cancelled
        self._task: asyncio.Task[None] | None = None
        self._interrupted = False

    def refusal(self) -> str | None:
        if self._task is not None and not self._task.done():
            return "a rescrape is already running"
        return None

    async def run(self, request: Request, replies: Replies) -> bool:
        """Start the rebuild and return at once; it sends its own terminal event."""
        self._task = asyncio.create_task(self._rebuild(replies, self._stop_reason(request)))
        return True

    def interrupt(self) -> None:
        """The engine is stopping: a running rebuild stops now (the old knowledge base stays)."""
        self._interrupted = True

    async def wait(self) -> None:
        if self._task is not None:
            await self._task

    def _stop_reason(self, request: Request) -> StopReason:
        limit_s = self.settings.rescrape_time_limit_s
        deadline = time.monotonic() + limit_s

        def stop_reason() -> str | None:
            if request.session_id in self.cancelled:
                return STOPPED_BY_USER
            if self._interrupted:
                return INTERRUPTED
            if time.monotonic() > deadline:
                return f"time limit of {limit_s:g} s reached"
            return None

        return stop_reason

    async def _rebuild(self, replies: Replies, stop_reason: StopReason) -> None:
        """Rescrape, and tell the asker how it ended: done, stopped (a cancel) or failed."""
        started = time.monotonic()
        progress = ProgressRelay(replies)
        try:
            async with progress:  # every progress event goes out before the terminal one
                result = await rescrape(
                    self.settings, progress.report, lambda: stop_reason() is not None
                )
        except RescrapeStopped:
            reason = stop_reason() or STOPPED_BY_USER
            if reason == STOPPED_BY_USER:
                await replies.cancelled(f"{progress.last_text}\nRescrape stopped; {KEPT}")
            else:
                await replies.failed(f"{reason}; {KEPT}", text=progress.last_text)
        except RescrapeFailed as error:
            await replies.failed(f"rescrape failed: {error}")
        except Exception as error:  # a bug must end in a visible state, not in silence
            log.exception("rescrape failed")
            await replies.failed(f"rescrape failed: {error}")
        else:
            await replies.done(result.text, elapsed_s=time.monotonic() - started)


class ProgressRelay:
    """Sends progress in order from a synchronous callback, without blocking the scraper."""

    def __init__(self, replies: Replies) -> None:
        self.replies = replies
        self.last_text = ""
        self._updates: asyncio.Queue[ScrapeProgress | None] = asyncio.Queue()
        self._pump = asyncio.create_task(self._send_all())

    def report(self, progress: ScrapeProgress) -> None:
        self.last_text = progress.text
        self._updates.put_nowait(progress)

    async def __aenter__(self) -> ProgressRelay:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Send what was reported, then return."""
        self._updates.put_nowait(None)
        await self._pump

    async def _send_all(self) -> None:
        while (progress := await self._updates.get()) is not None:
            counts = {
                "found": progress.found,
                "fetched": progress.fetched,
                "unchanged": progress.unchanged,
                "failed": progress.failed,
                "skipped": progress.skipped,
            }
            await self.replies.progress(progress.text, counts)
