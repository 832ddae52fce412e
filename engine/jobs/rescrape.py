"""The ``/rescrape`` job: rebuilds the knowledge base of the request's space (its own site,
its own file) in the background, beside the answers, streaming its progress to the asker; one
at a time, whatever the space. It ends with its own summary and the pages it did not read,
each with its reason."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine

from broker.protocol import MAX_BODY_BYTES, MAX_FAILURES_LISTED, Done, PageNotRead, Request, encode
from config.settings import Settings
from config.spaces import Spaces
from config.text_helpers import shorten
from config.texts import Locale, t
from engine.cancelled import CancelledSessions
from engine.health import Running
from engine.knowledge.models import PageFailure, ScrapeProgress, ScrapeResult, failures_summary
from engine.knowledge.scrape.errors import RescrapeFailed, RescrapeStopped
from engine.knowledge.scrape.rescrape import rescrape
from engine.replies import STOPPED_BY_USER, EventHeader, Replies
from engine.schedule import is_scheduled, rebuilt_since

log = logging.getLogger(__name__)

# Why the job must stop now: STOPPED_BY_USER, or a failure's reason in the asker's locale.
StopReason = Callable[[], str | None]
MAX_URL_CHARS, MAX_REASON_CHARS = 2000, 300  # what a PageNotRead may carry


class RescrapeJob:
    """Rebuilds the knowledge base; needs no model, so answers go on meanwhile."""

    acks_at_start = True  # it may outlast RabbitMQ's consumer timeout

    def __init__(
        self, settings: Settings, cancelled: CancelledSessions, spaces: Spaces | None = None
    ) -> None:
        self.settings = settings
        self.cancelled = cancelled
        self.spaces = spaces or Spaces(settings)
        self._task: asyncio.Task[None] | None = None
        self._interrupted = False
        self.running: Running | None = None  # the rescrape in progress, for /healthz

    def refusal(self, request: Request, locale: Locale) -> str | None:
        """One at a time; and a scheduled one not when someone's rebuilt the knowledge base
        while it waited (never two in a row, engine/schedule.py)."""
        if self.running is not None:
            return t("engine.rescrape.running", locale)
        kb_path = self.spaces.named(request.space).settings.kb_path
        if is_scheduled(request) and rebuilt_since(kb_path, request.sent_at):
            return t("engine.rescrape.not_due", locale)
        return None

    async def run(self, request: Request, replies: Replies) -> None:
        """Start the rebuild and return at once (without awaiting anything: the worker counts
        on it); it sends its own terminal event."""
        self.running = Running(request.session_id, request.space)
        stop_reason = self._stop_reason(request, replies.locale)
        site = self.spaces.named(request.space).settings
        self._task = asyncio.create_task(self._rebuild(site, replies, stop_reason))

    def interrupt(self) -> None:
        """The engine is stopping: a running rebuild stops now (the old knowledge base stays)."""
        self._interrupted = True

    async def wait(self) -> None:
        if self._task is not None:
            await self._task

    def _stop_reason(self, request: Request, locale: Locale) -> StopReason:
        limit_s = self.settings.rescrape_time_limit_s
        deadline = time.monotonic() + limit_s

        def stop_reason() -> str | None:
            if request.session_id in self.cancelled:
                return STOPPED_BY_USER
            if self._interrupted:
                return t("engine.interrupted", locale)
            if time.monotonic() > deadline:
                return t("engine.time_limit", locale, limit_s=f"{limit_s:g}")
            return None

        return stop_reason

    async def _rebuild(self, site: Settings, replies: Replies, stop_reason: StopReason) -> None:
        """Rebuild, then tell the asker how it ended. The job is free again *before* the end
        is sent: an asker who reads "done" and asks again at once is not told that a rescrape
        is still running."""
        try:
            tell = await self._rebuilt(site, replies, stop_reason)
        finally:
            self.running = None
        await tell

    async def _rebuilt(
        self, site: Settings, replies: Replies, stop_reason: StopReason
    ) -> Coroutine[None, None, None]:
        """Rescrape ``site`` (the space's settings); return the sending of its end, not yet
        awaited: done, stopped (a cancel) or failed."""
        started = time.monotonic()
        progress = ProgressRelay(replies)
        try:
            async with progress:  # every progress event goes out before the terminal one
                result = await rescrape(site, progress.report, lambda: stop_reason() is not None)
        except RescrapeStopped:
            reason = stop_reason() or STOPPED_BY_USER
            if reason == STOPPED_BY_USER:
                stopped = replies.text("engine.rescrape.stopped")
                return replies.cancelled(f"{progress.last_text}\n{stopped}")
            ended = replies.text("engine.rescrape.ended", reason=reason)
            return replies.failed(ended, text=progress.last_text)
        except RescrapeFailed as error:
            log.warning("rescrape failed: %s", error)
            reason = replies.text("engine.rescrape.failed", error=error.text(replies.locale))
            return replies.failed(reason, failures_summary(error.failures, locale=replies.locale))
        except Exception as error:  # a bug must end in a visible state, not in silence
            log.exception("rescrape failed")
            return replies.failed(replies.text("engine.rescrape.failed", error=error))
        elapsed_s = time.monotonic() - started
        return replies.send(rescrape_done(replies.header(), result, elapsed_s, replies.locale))


def rescrape_done(
    header: EventHeader, result: ScrapeResult, elapsed_s: float, locale: Locale = "en"
) -> Done:
    """The rescrape's own end: its summary in ``locale``, no tokens, and the first pages not
    read, as many as a reply may carry (``MAX_FAILURES_LISTED``, and the body under
    ``MAX_BODY_BYTES``: a bigger one would be refused by the asker's decoder, and the end
    lost)."""
    done = Done(
        **header,
        text=result.render(locale),
        tokens=0,
        ttft_s=None,
        tokens_per_s=None,
        elapsed_s=elapsed_s,
        failures_total=len(result.failures),
    )
    room = MAX_BODY_BYTES - len(encode(done))
    listed: list[PageNotRead] = []
    for failure in result.failures[:MAX_FAILURES_LISTED]:
        page = page_not_read(failure)
        room -= len(encode(page)) + 1  # and the comma before it
        if room < 0:
            break
        listed.append(page)
    return done.model_copy(update={"failures": tuple(listed)})


def page_not_read(failure: PageFailure) -> PageNotRead:
    return PageNotRead(
        url=shorten(failure.url, MAX_URL_CHARS),
        reason=shorten(failure.reason, MAX_REASON_CHARS),
        outcome=failure.outcome,
    )


class ProgressRelay:
    """Sends progress in order from a synchronous callback, without blocking the scraper; each
    line in the asker's locale."""

    def __init__(self, replies: Replies) -> None:
        self.replies = replies
        self.last_text = ""
        self._updates: asyncio.Queue[ScrapeProgress | None] = asyncio.Queue()
        self._pump = asyncio.create_task(self._send_all())

    def report(self, progress: ScrapeProgress) -> None:
        self.last_text = progress.render(self.replies.locale)
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
                "articles": progress.articles,
            }
            await self.replies.progress(progress.render(self.replies.locale), counts)
