"""The engine worker: takes requests one at a time, answers them, honours cancels at once.

Three consumers: requests (``prefetch_count=1``), cancels (their own queue, never behind
requests) and expired requests (dead-lettered by their TTL, so the asker can be told).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from broker.amqp import Broker, Delivery
from broker.protocol import (
    Cancelled,
    Done,
    Expired,
    Failed,
    ProtocolError,
    Request,
    Started,
    TokenEvent,
    decode_cancel,
    decode_request,
)
from config.logging import session_context
from config.settings import Settings
from engine.cancelled import CancelledSessions
from engine.generation import Generation, run_token_loop
from engine.llm import Backend, ChatMessage, GenerationLimits
from engine.metrics import EngineMetrics
from engine.replies import INTERRUPTED, RESTARTED, STOPPED_BY_USER, Replies, TokenRelay
from engine.site_knowledge import Prompt

log = logging.getLogger(__name__)

T = TypeVar("T")
PromptBuilder = Callable[[Request], Prompt]
EventSpec = tuple[type[Any], dict[str, Any]]  # a reply event's class and its fields
StopReason = Callable[[], str | None]  # why a job must stop now (STOPPED_BY_USER or a failure)
RescrapeJob = Callable[[Request, Replies, StopReason], Awaitable[None]]

ASKER_CHECK_INTERVAL_S = 2.0


class Worker:
    """Answers requests from the queue with ``backend``; one job at a time."""

    def __init__(
        self,
        settings: Settings,
        broker: Broker,
        backend: Backend,
        *,
        build_prompt: PromptBuilder | None = None,
        rescrape: RescrapeJob | None = None,
        metrics: EngineMetrics | None = None,
    ) -> None:
        self.settings = settings
        self.broker = broker
        self.backend = backend
        self.build_prompt = build_prompt or self._plain_prompt
        self.rescrape = rescrape
        self.metrics = metrics or EngineMetrics(settings.engine_name)
        self.cancelled = CancelledSessions(
            settings.cancelled_sessions_max, settings.cancelled_sessions_ttl_s
        )
        self._current: Generation | None = None
        self._idle = asyncio.Event()
        self._idle.set()
        # prefetch_count=1 already serialises deliveries, but after a reconnect the broker
        # redelivers while the old job may still run: the model must never serve two at once.
        self._one_job_at_a_time = asyncio.Lock()
        # A rescrape needs no model: it runs beside the answers, one at a time.
        self._rescrape_task: asyncio.Task[None] | None = None
        self._shutting_down = False

    def _replies(self, request: Request) -> Replies:
        """The reply stream of ``request``; every event sent is also recorded in the metrics."""
        return Replies(self.broker, request, self.metrics.record)

    async def purge_stale(self) -> int:
        """Empty the request queue, telling each waiting asker; ``main()`` calls this once."""
        purged = 0
        while (delivery := await self.broker.take_waiting_request()) is not None:
            purged += 1
            if delivery.type == "cancel":
                await delivery.ack()
                continue
            request = await self._decode_or_bury(delivery, decode_request)
            if request is not None:
                reason = INTERRUPTED if delivery.redelivered else RESTARTED
                with session_context(request.session_id):
                    await self._replies(request).send(Failed, reason=reason)
                await delivery.ack()
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
        self._shutting_down = True
        try:
            await asyncio.wait_for(self._idle.wait(), grace_s)
        except TimeoutError:
            if self._current is not None:
                self._current.abandoned = True
            await self._idle.wait()
        if self._rescrape_task is not None:
            await self._rescrape_task

    async def _stop_if_asker_leaves(self, request: Request) -> None:
        """While an answer runs, check now and then that its asker's reply queue still exists;
        if it is gone for good, stop generating for nobody."""
        while True:
            await asyncio.sleep(ASKER_CHECK_INTERVAL_S)
            if not await self.broker.reply_queue_exists(request.reply_to):
                log.warning("the asker's reply queue is gone")
                self.cancelled.add(request.session_id)
                return

    # --- consumers ----------------------------------------------------------------------

    async def on_cancel(self, delivery: Delivery) -> None:
        cancel = await self._decode_or_bury(delivery, decode_cancel)
        if cancel is not None:
            self.cancelled.add(cancel.session_id)
            with session_context(cancel.session_id):
                log.info("cancel received")
            await delivery.ack()

    async def on_expired(self, delivery: Delivery) -> None:
        request = await self._decode_or_bury(delivery, decode_request)
        if request is not None:
            with session_context(request.session_id):
                log.info("expired in the queue")
                waited = int(time.time() - request.sent_at)
                reason = f"waited {waited} s in the queue, past its time to live"
                await self._replies(request).send(Expired, reason=reason)
            await delivery.ack()

    async def on_request(self, delivery: Delivery) -> None:
        if delivery.type == "cancel":
            await self.on_cancel(delivery)  # the FIFO trap: honoured only when it is reached
            return
        request = await self._decode_or_bury(delivery, decode_request)
        if request is not None:
            with session_context(request.session_id):
                async with self._one_job_at_a_time:
                    await self._handle(delivery, request)

    async def _handle(self, delivery: Delivery, request: Request) -> None:
        self._idle.clear()
        try:
            if request.type == "rescrape":
                await delivery.ack()  # it may outlast RabbitMQ's consumer timeout
            finished = await self._serve(request, redelivered=delivery.redelivered)
        except Exception as error:  # a bug must end in a visible state, not in silence
            log.exception("request failed")
            await self._replies(request).send(Failed, reason=f"engine error: {error}")
            finished = True
        finally:
            self._idle.set()
        await asyncio.shield(self._settle(delivery, request, finished))

    async def _settle(self, delivery: Delivery, request: Request, finished: bool) -> None:
        """Ack what was finished; hand back what was not (a graceful stop mid-answer)."""
        try:
            if request.type == "rescrape":
                return  # acknowledged when it started
            if finished:
                await delivery.ack()
            else:
                await delivery.reject(requeue=True)
        except Exception as error:  # the channel may have closed; the broker redelivers
            log.warning("not settled: %s", error)

    async def _decode_or_bury(
        self, delivery: Delivery, decode: Callable[[bytes, str | None], T]
    ) -> T | None:
        """Decode a message, or move it to the dead-letter queue with the reason."""
        try:
            return decode(delivery.body, delivery.content_type)
        except ProtocolError as error:
            log.warning("malformed message on %s: %s", delivery.routing_key, error.reason)
            await self.broker.send_dead(delivery, error.reason)
            await delivery.ack()
            return None

    # --- serving one request ------------------------------------------------------------

    async def _serve(self, request: Request, *, redelivered: bool) -> bool:
        """Run one request to a terminal event; False if it was interrupted by a shutdown."""
        replies = self._replies(request)
        refusal = self._refusal(request, redelivered)
        if refusal is not None:
            event_class, fields = refusal
            await replies.send(event_class, **fields)
            return True
        await replies.send(Started, waited_s=max(0.0, time.time() - request.sent_at))
        log.info("started (%s)", request.type)
        if request.type == "rescrape":
            self._rescrape_task = asyncio.create_task(self._run_rescrape(request, replies))
            return True
        return await self._answer(request, replies)

    def _refusal(self, request: Request, redelivered: bool) -> EventSpec | None:
        """The terminal event for a request that must not start, if it is one."""
        if redelivered:
            return Failed, {"reason": INTERRUPTED}
        if request.type == "rescrape" and self.rescrape is None:
            return Failed, {"reason": "no knowledge base is configured on this engine"}
        if request.type == "rescrape" and self._rescrape_task and not self._rescrape_task.done():
            return Failed, {"reason": "a rescrape is already running"}
        if request.session_id in self.cancelled:
            return Cancelled, {}
        if time.time() > request.deadline:
            waited = int(time.time() - request.sent_at)
            return Expired, {"reason": f"waited {waited} s, past its deadline"}
        limit = self.settings.max_question_chars
        if len(request.question) > limit:
            return Failed, {"reason": f"question too long: {len(request.question)} > {limit}"}
        return None

    async def _answer(self, request: Request, replies: Replies) -> bool:
        limit_s = self.settings.answer_time_limit_s
        generation = Generation(request.session_id, time_limit_at=time.monotonic() + limit_s)
        self._current = generation
        prompt = self.build_prompt(request)
        relay = TokenRelay(replies, self.settings.token_batch_s)
        thread = asyncio.ensure_future(
            asyncio.to_thread(
                run_token_loop,
                self.backend,
                prompt.messages,
                generation,
                self.cancelled,
                relay.emit,
                GenerationLimits(self.settings.max_tokens, self.settings.temperature),
            )
        )
        watchdog = asyncio.create_task(self._stop_if_asker_leaves(request))
        try:
            await _outlive_cancellation(thread, generation)
        except asyncio.CancelledError:
            relay.cancel()
            raise
        except Exception as error:
            log.exception("generation failed")
            await relay.close()
            await replies.send(Failed, reason=f"generation failed: {error}", text=generation.text)
            return True
        finally:
            watchdog.cancel()
            self._current = None
        await relay.close()
        if prompt.appendix and generation.finished_naturally:
            generation.appendix = prompt.appendix  # the links of the articles it was given
            await replies.send(TokenEvent, text=prompt.appendix, tokens=0)
        event_class, fields = self._outcome(generation)
        await replies.send(event_class, **fields)
        return not generation.abandoned

    def _outcome(self, generation: Generation) -> EventSpec:
        text, tokens = generation.text, generation.tokens
        if generation.abandoned:
            return Failed, {"reason": INTERRUPTED, "text": text}
        if generation.stopped_by_cancel:
            received_at = self.cancelled.received_at(generation.session_id)
            latency = (generation.finished_at or 0) - received_at if received_at else None
            return Cancelled, {
                "text": text,
                "tokens": tokens,
                "tokens_after_cancel": generation.tokens_after(received_at),
                "stop_latency_s": latency,
            }
        if generation.stopped_by_time_limit:
            limit = self.settings.answer_time_limit_s
            return Failed, {"reason": f"time limit of {limit:g} s reached", "text": text}
        return Done, self._done_fields(generation)

    @staticmethod
    def _done_fields(generation: Generation) -> dict[str, Any]:
        finished = generation.finished_at or time.monotonic()
        first = generation.first_token_at
        decode_s = finished - first if first is not None else 0.0
        return {
            "text": generation.text,
            "tokens": generation.tokens,
            "ttft_s": first - generation.started_at if first is not None else None,
            "tokens_per_s": (generation.tokens - 1) / decode_s if decode_s > 0 else None,
            "elapsed_s": finished - generation.started_at,
        }

    async def _run_rescrape(self, request: Request, replies: Replies) -> None:
        """Rebuild the knowledge base in the background; answers go on meanwhile."""
        assert self.rescrape is not None
        limit_s = self.settings.rescrape_time_limit_s
        deadline = time.monotonic() + limit_s

        def stop_reason() -> str | None:
            if request.session_id in self.cancelled:
                return STOPPED_BY_USER
            if self._shutting_down:
                return INTERRUPTED
            if time.monotonic() > deadline:
                return f"time limit of {limit_s:g} s reached"
            return None

        with session_context(request.session_id):
            try:
                await self.rescrape(request, replies, stop_reason)
            except Exception as error:
                log.exception("rescrape failed")
                await replies.send(Failed, reason=f"rescrape failed: {error}")

    def _plain_prompt(self, request: Request) -> Prompt:
        return Prompt(
            [
                ChatMessage("system", self.settings.system_prompt),
                ChatMessage("user", request.question),
            ]
        )


async def _outlive_cancellation(thread: asyncio.Future[Generation], generation: Generation) -> None:
    """Wait for the generation thread; if this task is cancelled (its channel closed), stop the
    thread and still wait for it, so the model never runs two generations at once."""
    try:
        await asyncio.shield(thread)
    except asyncio.CancelledError:
        generation.abandoned = True
        await thread
        raise
