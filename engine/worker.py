"""The engine worker: takes requests one at a time, answers them, honours cancels at once.

Four consumers: requests (``prefetch_count=1``), cancels (their own queue, never behind
requests), expired requests (dead-lettered by their TTL, so the asker can be told) and votes
(``engine.feedback.recorder``, which also records how each answer ended). Each request is a job of
one
kind, chosen once: an answer (``engine.jobs.answer``) or a rescrape (``engine.jobs.rescrape``).
What the engine writes to an asker itself comes in the asker's locale (``Replies.text``).
A request names its space (``config.spaces``): the jobs answer and rebuild with that space's
settings; one naming a space this engine does not know ends ``failed``, saying so.
A request whose engine died answering it comes back redelivered and is answered anew
(``engine.redelivery``): on a classic queue queued again with its attempt counted, on a quorum
queue (which counts deliveries) in place. One that has already stopped the engine
``MAX_ATTEMPTS`` times (``broker.dead_letters``) is set aside, its asker told: by this engine,
or, past a quorum queue's ``x-delivery-limit``, by the broker, which dead-letters it to the
queue of expired requests (``Worker.on_expired``).
An answer outlives the loss of its broker connection: it goes on, its events wait for the
connection to come back (``engine.replies``), and its request, redelivered after the reconnect,
is not answered twice (``Redeliveries.take_back``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

from cachetools import LRUCache

from broker.amqp import Broker
from broker.dead_letters import MAX_ATTEMPTS, DeadLettered
from broker.messages import Envelope
from broker.protocol import Cancel, ReplyEvent, Request, TerminalEvent
from config.logging import session_context
from config.settings import Settings
from config.spaces import Spaces
from config.texts import Locale
from engine.backends.base import Backend
from engine.cancelled import CANCELLED_SESSIONS_MAX, CANCELLED_SESSIONS_TTL_S, CancelledSessions
from engine.feedback.recorder import FeedbackRecorder
from engine.health import Running
from engine.jobs.answer import AnswerJob
from engine.jobs.rescrape import RescrapeJob
from engine.metrics import EngineMetrics
from engine.purge import Purged, purge_stale
from engine.redelivery import Redeliveries, settle
from engine.replies import Replies
from engine.status_feed import StatusCopies

log = logging.getLogger(__name__)

# The reply streams of the last answers run here: after a reconnect the broker redelivers the
# one that was in flight, whose terminal event may have been lost with the connection.
ANSWERED_REMEMBERED = 100


class Job(Protocol):
    """One kind of request: what the worker needs to know to run it."""

    @property
    def acks_at_start(self) -> bool:
        """Acknowledged when it starts, not when it ends (a job that may run for long)."""
        ...

    def refusal(self, request: Request, locale: Locale) -> str | None:
        """Why ``request`` cannot start now (in ``locale``), if it cannot."""
        ...

    async def run(self, request: Request, replies: Replies) -> None:
        """Run to a terminal event (one a shutdown cut short says "interrupted")."""
        ...


class Worker:
    """Answers requests from the queue with ``backend``; one job at a time."""

    def __init__(
        self,
        settings: Settings,
        broker: Broker,
        backend: Backend,
        *,
        metrics: EngineMetrics | None = None,
        spaces: Spaces | None = None,
    ) -> None:
        self.settings = settings
        self.spaces = spaces or Spaces(settings)
        self.broker = broker
        self.metrics = metrics or EngineMetrics(settings.engine_name)
        self.cancelled = CancelledSessions(CANCELLED_SESSIONS_MAX, CANCELLED_SESSIONS_TTL_S)
        self.answers = AnswerJob(
            settings, backend, self.cancelled, broker.reply_queue_exists, self.spaces
        )
        self.rescrapes = RescrapeJob(settings, self.cancelled, self.spaces)
        self.feedback = FeedbackRecorder(settings.feedback_path, self.metrics)
        self.answering: Running | None = None  # the answer being generated now
        self.metrics.watch_jobs(lambda: self.answering, lambda: self.rescrapes.running)
        self._idle = asyncio.Event()
        self._idle.set()
        # Sessions this engine ran to their end, with their reply stream (its terminal event,
        # and whether the broker confirmed it): one redelivered after a reconnect (its first
        # delivery's ack was lost with the old channel) is not answered twice; its terminal
        # event, which carries the whole text, is sent again unless it was confirmed.
        self._answered: LRUCache[str, Replies | None] = LRUCache(ANSWERED_REMEMBERED)
        self._taking: set[asyncio.Future[None]] = set()  # requests being handled (shielded)
        # prefetch_count=1 already serialises deliveries, but after a reconnect the broker
        # redelivers while the old job may still run: the model must never serve two at once.
        self._one_job_at_a_time = asyncio.Lock()
        self.redeliveries = Redeliveries(
            settings, broker, self._answered, self._replies, self._handle, lambda: self.answering
        )

    def _job(self, request: Request) -> Job:
        return self.rescrapes if request.type == "rescrape" else self.answers

    def _replies(self, request: Request) -> Replies:
        """The reply stream of ``request``; every event sent is also counted in the metrics,
        and an answer's end recorded for feedback."""

        def on_event(event: ReplyEvent) -> None:
            self.metrics.record(event, request.space)
            self.feedback.answer_ended(request, event)
            if isinstance(event, TerminalEvent):
                self._answered[request.session_id] = replies

        space = self.spaces.get(request.space) or self.spaces.default
        replies = Replies(
            self.broker,
            request,
            on_event,
            default_locale=space.settings.locale,
            status=StatusCopies(self.broker.send_status),
        )
        return replies

    async def purge_stale(self) -> Purged:
        """Empty the request queue but for what is still worth answering, telling each stale
        asker (``engine.purge``); ``main()`` calls this once."""

        async def tell_stale(request: Request) -> None:
            replies = self._replies(request)
            await replies.failed(replies.text("engine.restarted"))

        return await purge_stale(self.broker, tell_stale, self.redeliveries.set_aside)

    async def start(self) -> None:
        await self.feedback.show_totals()
        await self.broker.consume_cancels(self.settings.engine_name, self.on_cancel)
        await self.broker.consume_expired(self.on_expired)
        await self.broker.consume_feedback(self.feedback.on_feedback)
        await self.broker.consume_requests(self.on_request)

    async def wait_idle(self) -> None:
        """Until no job runs."""
        await self._idle.wait()

    async def stop(self, grace_s: float) -> None:
        """Take no more requests; let the current answer finish, or stop it after ``grace_s``.

        A running rescrape is stopped at once (the old knowledge base stays). Votes not yet
        taken stay in their queue; what was handed to the feedback database is written."""
        await self.broker.pause_requests()
        await self.broker.stop_feedback()
        self.rescrapes.interrupt()
        try:
            await asyncio.wait_for(self._idle.wait(), grace_s)
        except TimeoutError:
            self.answers.abandon()
            await self._idle.wait()
        if self._taking:  # a redelivery being handled (shielded): its end, or its give-up
            await asyncio.wait(self._taking, timeout=grace_s)
        await self.rescrapes.wait()
        await self.feedback.close()

    # --- consumers ----------------------------------------------------------------------

    async def on_cancel(self, envelope: Envelope[Cancel]) -> None:
        self._take_cancel(envelope.message)
        await envelope.ack()

    def _take_cancel(self, cancel: Cancel) -> None:
        self.cancelled.add(cancel.session_id)
        with session_context(cancel.session_id):
            log.info("cancel received")

    async def on_expired(self, envelope: Envelope[DeadLettered]) -> None:
        """A request dead-lettered by the request queue: expired, or past its delivery limit."""
        request = envelope.message.request
        with session_context(request.session_id):
            if envelope.message.past_delivery_limit:
                await self.redeliveries.past_delivery_limit(envelope, request)
                return
            log.info("expired in the queue")
            waited = int(time.time() - request.sent_at)
            replies = self._replies(request)
            await replies.expired(replies.text("engine.expired_in_queue", waited=waited))
        await envelope.ack()

    async def on_request(self, envelope: Envelope[Request | Cancel]) -> None:
        if isinstance(envelope.message, Cancel):
            self._take_cancel(envelope.message)  # the FIFO trap: honoured only when reached
            await envelope.ack()
            return
        self.answers.next_turn.stop()  # the model is this request's now
        # A reconnect closes the delivery's channel, which cancels this consumer task: the
        # answer goes on regardless (its events wait for the broker, ``engine.replies``).
        taking = asyncio.ensure_future(self._take(envelope, envelope.message))
        self._taking.add(taking)
        taking.add_done_callback(self._taken)
        await asyncio.shield(taking)

    async def settled(self) -> None:
        """Until every request taken so far is handled, the reading ahead after it included."""
        if self._taking:
            await asyncio.wait(set(self._taking))

    def _taken(self, taking: asyncio.Future[None]) -> None:
        """A request handled: an error nobody awaits any more (its consumer was cancelled
        by a reconnect) is logged, not lost."""
        self._taking.discard(taking)
        if not taking.cancelled() and (error := taking.exception()) is not None:
            log.error("a request's handling failed: %s", error, exc_info=error)

    async def _take(self, envelope: Envelope[Request | Cancel], request: Request) -> None:
        with session_context(request.session_id):
            async with self._one_job_at_a_time:
                if envelope.attempt > MAX_ATTEMPTS:
                    await self.redeliveries.set_aside(envelope, request)
                elif envelope.redelivered:
                    await self.redeliveries.take_back(envelope, request)
                else:
                    await self._handle(envelope, request)
                if len(self._taking) == 1:  # only this one: the model reads a follow-up ahead
                    await self.answers.next_turn.warm()

    async def _handle(self, envelope: Envelope[Request | Cancel], request: Request) -> None:
        job, replies = self._job(request), self._replies(request)
        self._idle.clear()
        try:
            if job.acks_at_start:
                await envelope.ack()
            await self._serve(job, request, replies, envelope.attempt)
        except Exception:  # a bug must end in a visible state, not in silence; logged whole
            log.exception("request failed")
            await replies.failed(replies.text("engine.error"))
        finally:
            self._answered.setdefault(request.session_id, None)
            self._idle.set()
        if not job.acks_at_start:
            await asyncio.shield(settle(envelope))

    async def _serve(self, job: Job, request: Request, replies: Replies, attempt: int) -> None:
        """Run one request to a terminal event."""
        if await self._refused(job, request, replies):
            return
        replies.started(waited_s=max(0.0, time.time() - request.sent_at), attempt=attempt)
        log.info("started (%s%s)", request.type, f", attempt {attempt}" if attempt > 1 else "")
        # A rescrape's ``run`` starts its task and returns without yielding to the event loop,
        # so nobody ever sees it here: it reports itself (``rescrapes.running``).
        self.answering = Running(request.session_id, request.space)
        try:
            await job.run(request, replies)
        finally:
            self.answering = None

    async def _refused(self, job: Job, request: Request, replies: Replies) -> bool:
        """Send the terminal event of a request that must not start; True if it was one."""
        limit, length = self.settings.max_question_chars, len(request.question)
        if self.spaces.get(request.space) is None:  # never answered from another's articles
            log.warning("not answered: unknown space %r", request.space)
            await replies.failed(replies.text("engine.unknown_space", space=request.space))
        elif (reason := job.refusal(request, replies.locale)) is not None:
            await replies.failed(reason)
        elif request.session_id in self.cancelled:
            await replies.cancelled()
        elif time.time() > request.deadline:
            waited = int(time.time() - request.sent_at)
            await replies.expired(replies.text("engine.past_deadline", waited=waited))
        elif length > limit:
            await replies.failed(
                replies.text("engine.question_too_long", length=length, limit=limit)
            )
        elif not await self.broker.reply_queue_exists(request.reply_to):
            log.info("not answered: the asker is gone (its reply queue no longer exists)")
        else:
            return False
        return True
