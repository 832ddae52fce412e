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

Every space is rebuilt so (config/spaces.py), each on its own clock, one after another: the
schedule queues one space's rescrape and waits for its end before it queues the next due, as
the engine runs one rescrape at a time whatever the space. A rescrape running in the space
whose turn it is counts as its turn; one running in another space makes it wait for that one's
end (queued meanwhile, it would only be refused). ``default`` is left out when it has no site
of its own and the file names other spaces: it then has nothing to rebuild.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
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
from config.spaces import DEFAULT_SPACE, Space, Spaces
from config.texts import LOCALES, t
from engine.health import iso_utc
from engine.knowledge.scrape.rescrape import describe_site
from engine.knowledge.store import KnowledgeBase

log = logging.getLogger(__name__)

SCHEDULE_ASKER = "schedule"  # the user_id and the platform of a scheduled rescrape's request
REPLY_QUEUE_KEEP_S = 3600.0  # as a named bot's: the end of one in flight waits for a restart
RECHECK_S = 60.0  # a rescrape someone else ran moves the next one: seen within this long
RETRY_S = 60.0  # after a publish that failed (the broker away; aio-pika reconnects meanwhile)
# Another space's rescrape is running: its end is looked for this often (a rescrape takes
# minutes; the schedule then queues the next without keeping it waiting long).
OTHER_RUNNING_RECHECK_S = 5.0
# The engine's refusals, in any locale (a space's own may be another than the deployment's).
ALREADY_RUNNING = {t("engine.rescrape.running", locale) for locale in LOCALES}
NOT_DUE = {t("engine.rescrape.not_due", locale) for locale in LOCALES}
Rebuilding = Callable[[], str | None]  # the space whose rescrape is running now, if any


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


@dataclass
class SpaceClock:
    """One space's turns: when its next is due, and this process's last attempt at it."""

    space: str
    kb_path: Path
    next_at: float | None = None  # Unix seconds; None while its own is open
    attempted_at: float | None = None  # this process's last turn, queued or skipped


class RescrapeSchedule:
    """Queues a rescrape of each space when one is due, one at a time; ``next_rescrape`` is for
    ``/healthz``."""

    def __init__(self, settings: Settings, every: timedelta, spaces: Spaces | None = None) -> None:
        self.settings = settings
        self.every_s = every.total_seconds()
        self.bot_id = schedule_bot_id(settings.engine_name)
        spaces = spaces or Spaces(settings)
        scheduled = [spaces.named(name) for name in spaces.names]
        self.clocks = {
            space.name: SpaceClock(space.name, space.settings.kb_path)
            for space in scheduled
            if _has_site(space) or len(scheduled) == 1
        }
        self._in_spaces = len(spaces.names) > 1  # then every log line names its space
        self._since = time.time()  # due then when nothing ended yet (no knowledge base)
        self._open: tuple[str, asyncio.Future[ReplyEvent]] | None = None
        self._waiting_for: str | None = None  # another space's running rescrape

    def next_rescrape(self, space: str = DEFAULT_SPACE) -> datetime | None:
        """When ``space``'s next is due; None while its own is open (or it is not scheduled)."""
        clock = self.clocks.get(space)
        if clock is None or clock.next_at is None:
            return None
        return datetime.fromtimestamp(clock.next_at, UTC)

    @contextlib.asynccontextmanager
    async def running(self, broker: Broker, rescrape_running: Rebuilding) -> AsyncIterator[None]:
        """Scheduling until the block ends; the next times are known when it begins."""
        await broker.consume_replies(self.bot_id, self._on_event, keep_s=REPLY_QUEUE_KEEP_S)
        self._announce(await asyncio.to_thread(self._due_times))
        task = asyncio.create_task(self._run(broker, rescrape_running))
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await broker.stop_replies()

    async def _run(self, broker: Broker, rescrape_running: Rebuilding) -> None:
        while True:
            due = await asyncio.to_thread(self._due_times)
            self._announce(due)
            space = min(due, key=lambda name: due[name])  # the first due; ties: file order
            if (wait_s := due[space] - time.time()) > 0:
                await asyncio.sleep(min(wait_s, RECHECK_S))
                continue
            try:
                await self._take_turn(broker, rescrape_running, self.clocks[space])
            except Exception as error:  # the broker away, most likely: it comes back
                log.warning("scheduled rescrape not queued (%s); next try in %g s", error, RETRY_S)
                await asyncio.sleep(RETRY_S)

    def _due_times(self) -> dict[str, float]:
        """Blocking (SQLite): call it in a thread."""
        return {name: self._due_at(clock) for name, clock in self.clocks.items()}

    def _due_at(self, clock: SpaceClock) -> float:
        ended = [at for at in (built_at(clock.kb_path), clock.attempted_at) if at]
        return max(ended) + self.every_s if ended else self._since

    def _announce(self, due: dict[str, float]) -> None:
        for name, due_at in due.items():
            clock = self.clocks[name]
            if due_at != clock.next_at:
                clock.next_at = due_at
                every = timedelta(seconds=self.every_s)
                when = f"at {iso_utc(self.next_rescrape(name))}" if due_at > time.time() else "now"
                log.info("next scheduled rescrape%s %s (every %s)", self._of(name), when, every)

    def _of(self, space: str) -> str:
        """`` of space 'shop'`` in a log line, when the deployment has several spaces."""
        return f" of space {space!r}" if self._in_spaces else ""

    async def _take_turn(
        self, broker: Broker, rescrape_running: Rebuilding, clock: SpaceClock
    ) -> None:
        """Queue one and wait for its end; or skip this turn, when the space's own rescrape
        runs already; or wait, while another space's runs. A publish that fails raises, and
        the turn is tried again (``_run``)."""
        of = self._of(clock.space)
        running = rescrape_running()
        if running == clock.space:
            clock.attempted_at = time.time()
            log.info(
                "scheduled rescrape%s skipped: a rescrape is running (it counts as this one)", of
            )
            return
        if running is not None:
            if self._waiting_for != running:
                log.info("scheduled rescrape%s waits: space %r is being rebuilt", of, running)
            self._waiting_for = running
            await asyncio.sleep(OTHER_RUNNING_RECHECK_S)
            return
        self._waiting_for = None
        request = make_request(
            reply_to=self.bot_id,
            user_id=SCHEDULE_ASKER,
            question="",
            ttl_s=max(self.every_s, self.settings.request_ttl_s),  # it may wait its whole turn
            kind="rescrape",
            platform=SCHEDULE_ASKER,
            space=clock.space,
        )
        with session_context(request.session_id):
            clock.next_at = None
            try:
                end = await self._queue(broker, request)
            finally:
                self._open = None
            if end is not None:
                self._tell(end, of)
            if isinstance(end, Failed) and end.reason in ALREADY_RUNNING:
                # Not this space's turn taken: looked at again soon, when whose rescrape runs
                # decides (another engine's is never seen here: hence the pause).
                await asyncio.sleep(OTHER_RUNNING_RECHECK_S)
            else:
                clock.attempted_at = time.time()

    async def _queue(self, broker: Broker, request: Request) -> ReplyEvent | None:
        ended: asyncio.Future[ReplyEvent] = asyncio.get_running_loop().create_future()
        self._open = (request.session_id, ended)
        of = self._of(request.space)
        try:
            await broker.send_request(request)
        except QueueFull:
            log.warning("scheduled rescrape%s not queued: the request queue is full", of)
            return None
        log.info("scheduled rescrape%s queued", of)
        wait_s = request.deadline - request.sent_at + self.settings.rescrape_reply_timeout_s
        try:
            return await asyncio.wait_for(ended, wait_s)
        except TimeoutError:
            log.warning("scheduled rescrape%s: no end heard from the engine in %g s", of, wait_s)
            return None

    @staticmethod
    def _tell(end: ReplyEvent, of: str) -> None:
        if isinstance(end, Done):
            summary = end.text.splitlines()[0] if end.text else ""
            log.info("scheduled rescrape%s done: %s", of, summary)
        elif isinstance(end, Failed) and end.reason in ALREADY_RUNNING | NOT_DUE:
            log.info("scheduled rescrape%s skipped: %s", of, end.reason)
        else:  # cancelled (an admin stopped it), failed, or expired in the queue
            detail = end.reason if isinstance(end, Failed | Expired) else "stopped"
            log.warning("scheduled rescrape%s %s: %s", of, end.type, detail)

    async def _on_event(self, envelope: Envelope[ReplyEvent]) -> None:
        """Its own reply queue: the end of the one it waits for; the rest is not read (progress,
        or the end of one queued before a restart)."""
        event = envelope.message
        if self._open is not None and event.session_id == self._open[0]:
            if event.type in TERMINAL_TYPES and not self._open[1].done():
                self._open[1].set_result(event)
        await envelope.ack()


def _has_site(space: Space) -> bool:
    """Whether the space reads a site; ``default`` may have none beside named spaces."""
    return space.name != DEFAULT_SPACE or describe_site(space.settings) is not None
