"""The engine worker: takes requests one at a time, answers them, honours cancels at once.

Three consumers: requests (``prefetch_count=1``), cancels (their own queue, never behind
requests) and expired requests (dead-lettered by their TTL, so the asker can be told). Each
request is a job of one kind, chosen once: an answer (``engine.answer``) or a rescrape
(``engine.rescrape_job``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

from broker.amqp import Broker, Envelope
from broker.protocol import Cancel, Request
from config.logging import session_context
from config.settings import Settings
from engine.answer import AnswerJob
from engine.cancelled import CancelledSessions
from engine.health import Running
from engine.llm import Backend
from engine.metrics import EngineMetrics
from engine.replies import INTERRUPTED, RESTARTED, Replies
from engine.rescrape_job import RescrapeJob

log = logging.getLogger(__name__)


class Job(Protocol):
    """One kind of request: what the worker needs to know to run it."""

    @property
    def acks_at_start(self) -> bool:
        """Acknowledged when it starts, not when it ends (a job that may run for long)."""
        ...

    def refusal(self) -> str | None:
        """Why a job of this kind cannot start now, if it cannot."""
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
        self.cancelled = CancelledSessions(
            settings.cancelled_sessions_max, settings.cancelled_sessions_ttl_s
        )
        self.answers = AnswerJob(settings, backend, self.cancelled, broker.reply_queue_exists)
        self.rescrapes = RescrapeJob(settings, self.cancelled)
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
        """The reply stream of ``request``; every event sent is also recorded in the metrics."""
        return Replies(self.broker, request, self.metrics.record)

    async def purge_stale(self) -> int:
        """Empty the request queue, telling each waiting asker; ``main()`` calls this once."""
        purged = 0
        while (envelope := await self.broker.take_waiting_request()) is not None:
            purged += 1
            if isinstance(envelope.message, Request):
                request = envelope.message
                with session_context(request.session_id):
                    reason = INTERRUPTED if envelope.redelivered else RESTARTED
                    await self._replies(request).failed(reason)
            await envelope.ack()
        return purged

    async def start(self) -> None:
        await self.broker.consume_cancels(self.settings.engine_name, self.on_cancel)
        await self.broker.consume_expired(self.on_expired)
        await self.broker.consume_requests(self.on_request)

    async def wait_idle(self) -> None:
        """Until no job runs."""
        await self._idle.wait()

    async def stop(self, grace_s: float) -> None:
        """Take no more requests; let the current answer finish, or stop it after ``grace_s``.

        A running rescrape is stopped at once (the old knowledge base stays)."""
        await self.broker.pause_requests()
        self.rescrapes.interrupt()
        try:
            await asyncio.wait_for(self._idle.wait(), grace_s)
        except TimeoutError:
            self.answers.abandon()
            await self._idle.wait()
        await self.rescrapes.wait()

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
            reason = f"waited {waited} s in the queue, past its time to live"
            await self._replies(request).expired(reason)
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
        except Exception as error:  # a bug must end in a visible state, not in silence
            log.exception("request failed")
            await replies.failed(f"engine error: {error}")
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
        limit = self.settings.max_question_chars
        if redelivered:
            await replies.failed(INTERRUPTED)
        elif (reason := job.refusal()) is not None:
            await replies.failed(reason)
        elif request.session_id in self.cancelled:
            await replies.cancelled()
        elif time.time() > request.deadline:
            waited = int(time.time() - request.sent_at)
            await replies.expired(f"waited {waited} s, past its deadline")
        elif len(request.question) > limit:
            await replies.failed(f"question too long: {len(request.question)} > {limit}")
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
