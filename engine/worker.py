"""The engine worker: takes requests one at a time, answers them, honours cancels at once.

Four consumers: requests (``prefetch_count=1``), cancels (their own queue, never behind
requests), expired requests (dead-lettered by their TTL, so the asker can be told) and votes
(``engine.feedback.recorder``, which also records how each answer ended). Each request is a job of
one
kind, chosen once: an answer (``engine.jobs.answer``) or a rescrape (``engine.jobs.rescrape``).
What the engine writes to an asker itself comes in the asker's locale (``Replies.text``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

from broker.amqp import Broker
from broker.messages import Envelope
from broker.protocol import Cancel, ReplyEvent, Request
from config.logging import session_context
from config.settings import Settings
from config.texts import Locale
from engine.backends.base import Backend
from engine.cancelled import CANCELLED_SESSIONS_MAX, CANCELLED_SESSIONS_TTL_S, CancelledSessions
from engine.feedback.recorder import FeedbackRecorder
from engine.health import Running
from engine.jobs.answer import AnswerJob
from engine.jobs.rescrape import RescrapeJob
from engine.metrics import EngineMetrics
from engine.replies import Replies
from engine.status_feed import StatusCopies

log = logging.getLogger(__name__)


class Job(Protocol):
    """One kind of request: what the worker needs to know to run it."""

    @property
    def acks_at_start(self) -> bool:
        """Acknowledged when it starts, not when it ends (a job that may run for long)."""
        ...

    def refusal(self, request: Request, locale: Locale) -> str | None:
        """Why ``request`` cannot start now (in ``locale``), if it cannot."""
        ...

    async def run(self, request: Request, replies: Replies) -> bool:
        """Run to a terminal event; False if a shutdown cut it short."""
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
    ) -> None:
        self.settings = settings
        self.broker = broker
        self.metrics = metrics or EngineMetrics(settings.engine_name)
        self.cancelled = CancelledSessions(CANCELLED_SESSIONS_MAX, CANCELLED_SESSIONS_TTL_S)
        self.answers = AnswerJob(settings, backend, self.cancelled, broker.reply_queue_exists)
        self.rescrapes = RescrapeJob(settings, self.cancelled)
        self.feedback = FeedbackRecorder(settings.feedback_path, self.metrics)
        self.answering: Running | None = None  # the answer being generated now
        self.metrics.watch_jobs(lambda: self.answering, lambda: self.rescrapes.running)
        self._idle = asyncio.Event()
        self._idle.set()
        # prefetch_count=1 already serialises deliveries, but after a reconnect the broker
        # redelivers while the old job may still run: the model must never serve two at once.
        self._one_job_at_a_time = asyncio.Lock()

    def _job(self, request: Request) -> Job:
        return self.rescrapes if request.type == "rescrape" else self.answers

    def _replies(self, request: Request) -> Replies:
        """The reply stream of ``request``; every event sent is also counted in the metrics,
        and an answer's end recorded for feedback."""

        def on_event(event: ReplyEvent) -> None:
            self.metrics.record(event)
            self.feedback.answer_ended(request, event)

        return Replies(
            self.broker,
            request,
            on_event,
            default_locale=self.settings.locale,
            status=StatusCopies(self.broker.send_status),
        )

    async def purge_stale(self) -> int:
        """Empty the request queue, telling each waiting asker; ``main()`` calls this once."""
        purged = 0
        while (envelope := await self.broker.take_waiting_request()) is not None:
            purged += 1
            if isinstance(envelope.message, Request):
                request = envelope.message
                with session_context(request.session_id):
                    replies = self._replies(request)
                    reason = "engine.interrupted" if envelope.redelivered else "engine.restarted"
                    await replies.failed(replies.text(reason))
            await envelope.ack()
        return purged

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

    async def on_expired(self, envelope: Envelope[Request]) -> None:
        request = envelope.message
        with session_context(request.session_id):
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
        request = envelope.message
        with session_context(request.session_id):
            async with self._one_job_at_a_time:
                await self._handle(envelope, request)

    async def _handle(self, envelope: Envelope[Request | Cancel], request: Request) -> None:
        job, replies = self._job(request), self._replies(request)
        self._idle.clear()
        try:
            if job.acks_at_start:
                await envelope.ack()
            finished = await self._serve(job, request, replies, envelope.redelivered)
        except Exception:  # a bug must end in a visible state, not in silence; logged whole
            log.exception("request failed")
            await replies.failed(replies.text("engine.error"))
            finished = True
        finally:
            self._idle.set()
        if not job.acks_at_start:
            await asyncio.shield(_settle(envelope, finished))

    async def _serve(self, job: Job, request: Request, replies: Replies, redelivered: bool) -> bool:
        """Run one request to a terminal event; False if it was interrupted by a shutdown."""
        if await self._refused(job, request, replies, redelivered):
            return True
        await replies.started(waited_s=max(0.0, time.time() - request.sent_at))
        log.info("started (%s)", request.type)
        # A rescrape's ``run`` starts its task and returns without yielding to the event loop,
        # so nobody ever sees it here: it reports itself (``rescrapes.running``).
        self.answering = Running(request.session_id)
        try:
            return await job.run(request, replies)
        finally:
            self.answering = None

    async def _refused(
        self, job: Job, request: Request, replies: Replies, redelivered: bool
    ) -> bool:
        """Send the terminal event of a request that must not start; True if it was one."""
        limit, length = self.settings.max_question_chars, len(request.question)
        if redelivered:
            await replies.failed(replies.text("engine.interrupted"))
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


async def _settle(envelope: Envelope[Request | Cancel], finished: bool) -> None:
    """Ack what was finished; hand back what was not (a graceful stop mid-answer)."""
    try:
        await (envelope.ack() if finished else envelope.requeue())
    except Exception as error:  # the channel may have closed; the broker redelivers
        log.warning("not settled: %s", error)
