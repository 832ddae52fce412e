"""The scheduled rescrape (``CONCIERGE_RESCRAPE_EVERY``): the engine queues one itself, through
its own request queue, so it waits its turn behind the answers as an admin's ``/rescrape``
does, and runs as one (its progress shows in the web console like any other).

When it is due: ``every`` after the last rescrape ended, read from the knowledge base's own
build time, so that a restart neither rescrapes at once nor puts it off for ever; or after
this process's last scheduled attempt, if later (a failed rescrape builds nothing, and is not
tried again at once). With no knowledge base yet, at start.

Never two: while its own is queued or running it queues none (it waits for that one's end);
when a rescrape is already running it queues none, and that one counts as its turn; and one
that waited while someone else's rebuilt the knowledge base is refused when the engine reaches
it (``rebuilt_since``, asked by the rescrape job). Each step is a log line; the next one's time
is in ``/healthz`` with the knowledge base, so ``concierge status`` and the web console show it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from broker.amqp import Broker
from broker.errors import QueueFull
from broker.messages import Envelope
from broker.protocol import (
    TERMINAL_TYPES,
    Done,
    Expired,
    Failed,
    ReplyEvent,
    Request,
    make_request,
)
from config.logging import session_context
from config.settings import Settings
from config.texts import t
from engine.health import iso_utc
from engine.knowledge.store import KnowledgeBase

log = logging.getLogger(__name__)

SCHEDULE_ASKER = "schedule"  # the user_id and the platform of a scheduled rescrape's request
REPLY_QUEUE_KEEP_S = 3600.0  # as a named bot's: the end of one in flight waits for a restart
RECHECK_S = 60.0  # a rescrape someone else ran moves the next one: seen within this long
RETRY_S = 60.0  # after a publish that failed (the broker away; aio-pika reconnects meanwhile)
SKIPPED = ("engine.rescrape.running", "engine.rescrape.not_due")  # refusals meaning "skipped"


def schedule_bot_id(engine_name: str) -> str:
    """The reply queue's name (``P.reply.<engine name>-schedule``): the schedule's asker."""
    return f"{engine_name}-schedule"


def is_scheduled(request: Request) -> bool:
    """Queued by a schedule: a bot never sends that platform (docs/protocol.md)."""
    return request.type == "rescrape" and request.platform == SCHEDULE_ASKER


def rebuilt_since(kb_path: Path, moment: float) -> bool:
    """Whether a rescrape saved the knowledge base after ``moment`` (Unix seconds)."""
    built = built_at(kb_path)
    return built is not None and built > moment


def built_at(kb_path: Path) -> float | None:
    """When the last successful rescrape saved the knowledge base (Unix seconds); blocking."""
    try:
        moment = KnowledgeBase(kb_path).rescraped_at()
    except sqlite3.Error as error:  # a damaged file: a rescrape is what mends it
        log.warning("knowledge base not readable: %s", error)
        return None
    if moment is None:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


class RescrapeSchedule:
    """Queues a rescrape when one is due, one at a time; ``next_at`` is for ``/healthz``."""

    def __init__(self, settings: Settings, every: timedelta) -> None:
        self.settings = settings
        self.every_s = every.total_seconds()
        self.bot_id = schedule_bot_id(settings.engine_name)
        self.next_at: float | None = None  # Unix seconds; None while its own is open
        self._attempted_at: float | None = None  # this process's last turn, queued or skipped
        self._since = time.time()  # due then when nothing ended yet (no knowledge base)
        self._open: tuple[str, asyncio.Future[ReplyEvent]] | None = None
        self._skip_reasons = {t(key, settings.locale) for key in SKIPPED}

    def next_rescrape(self) -> datetime | None:
        return None if self.next_at is None else datetime.fromtimestamp(self.next_at, UTC)

    @contextlib.asynccontextmanager
    async def running(
        self, broker: Broker, rescrape_running: Callable[[], bool]
    ) -> AsyncIterator[None]:
        """Scheduling until the block ends; the next time is known when it begins."""
        await broker.consume_replies(self.bot_id, self._on_event, keep_s=REPLY_QUEUE_KEEP_S)
        self._announce(await asyncio.to_thread(self._due_at))
        task = asyncio.create_task(self._run(broker, rescrape_running))
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await broker.stop_replies()

    async def _run(self, broker: Broker, rescrape_running: Callable[[], bool]) -> None:
        while True:
            due_at = await asyncio.to_thread(self._due_at)
            self._announce(due_at)
            if (wait_s := due_at - time.time()) > 0:
                await asyncio.sleep(min(wait_s, RECHECK_S))
                continue
            try:
                await self._take_turn(broker, rescrape_running)
            except Exception as error:  # the broker away, most likely: it comes back
                log.warning("scheduled rescrape not queued (%s); next try in %g s", error, RETRY_S)
                await asyncio.sleep(RETRY_S)

    def _due_at(self) -> float:
        """Blocking (SQLite): call it in a thread."""
        ended = [at for at in (built_at(self.settings.kb_path), self._attempted_at) if at]
        return max(ended) + self.every_s if ended else self._since

    def _announce(self, due_at: float) -> None:
        if due_at != self.next_at:
            self.next_at = due_at
            every = timedelta(seconds=self.every_s)
            when = f"at {iso_utc(self.next_rescrape())}" if due_at > time.time() else "now"
            log.info("next scheduled rescrape %s (every %s)", when, every)

    async def _take_turn(self, broker: Broker, rescrape_running: Callable[[], bool]) -> None:
        """Queue one and wait for its end; or skip this turn, when a rescrape runs already. A
        publish that fails raises, and the turn is tried again (``_run``)."""
        if rescrape_running():
            self._attempted_at = time.time()
            log.info("scheduled rescrape skipped: a rescrape is running (it counts as this one)")
            return
        request = make_request(
            reply_to=self.bot_id,
            user_id=SCHEDULE_ASKER,
            question="",
            ttl_s=max(self.every_s, self.settings.request_ttl_s),  # it may wait its whole turn
            kind="rescrape",
            platform=SCHEDULE_ASKER,
        )
        with session_context(request.session_id):
            self.next_at = None
            try:
                end = await self._queue(broker, request)
            finally:
                self._open = None
            self._attempted_at = time.time()
            if end is not None:
                self._tell(end)

    async def _queue(self, broker: Broker, request: Request) -> ReplyEvent | None:
        ended: asyncio.Future[ReplyEvent] = asyncio.get_running_loop().create_future()
        self._open = (request.session_id, ended)
        try:
            await broker.send_request(request)
        except QueueFull:
            log.warning("scheduled rescrape not queued: the request queue is full")
            return None
        log.info("scheduled rescrape queued")
        wait_s = request.deadline - request.sent_at + self.settings.rescrape_reply_timeout_s
        try:
            return await asyncio.wait_for(ended, wait_s)
        except TimeoutError:
            log.warning("scheduled rescrape: no end heard from the engine in %g s", wait_s)
            return None

    def _tell(self, end: ReplyEvent) -> None:
        if isinstance(end, Done):
            log.info("scheduled rescrape done: %s", end.text.splitlines()[0] if end.text else "")
        elif isinstance(end, Failed) and end.reason in self._skip_reasons:
            log.info("scheduled rescrape skipped: %s", end.reason)
        else:  # cancelled (an admin stopped it), failed, or expired in the queue
            detail = end.reason if isinstance(end, Failed | Expired) else "stopped"
            log.warning("scheduled rescrape %s: %s", end.type, detail)

    async def _on_event(self, envelope: Envelope[ReplyEvent]) -> None:
        """Its own reply queue: the end of the one it waits for; the rest is not read (progress,
        or the end of one queued before a restart)."""
        event = envelope.message
        if self._open is not None and event.session_id == self._open[0]:
            if event.type in TERMINAL_TYPES and not self._open[1].done():
                self._open[1].set_result(event)
        await envelope.ack()
