"""Feedback in the engine: how each answer ended, and the votes people give it.

Every write goes to the feedback database (``engine/feedback/store.py``) on one thread of its
own: never on the generation thread, and never on the event loop, which relays tokens. An
answer's end is handed over without waiting (the asker's terminal event is not held back for
a disk write); a vote is acknowledged only once stored, and the vote gauges are then read
again from the database, so ``/metrics`` shows the totals of the file, not of this process
(votes that come while the totals are being read share the next reading: a burst of votes
costs two readings, not one each).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from broker.messages import Envelope
from broker.protocol import TERMINAL_TYPES, Done, Feedback, ReplyEvent, Request
from engine.feedback.store import AnswerRecord, FeedbackStore
from engine.metrics import EngineMetrics

log = logging.getLogger(__name__)

T = TypeVar("T")


class FeedbackRecorder:
    """The engine's writer to the feedback database, and the feedback queue's consumer."""

    def __init__(self, path: Path, metrics: EngineMetrics) -> None:
        self.store = FeedbackStore(path)
        self.metrics = metrics
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="feedback")
        self._closed = False
        self._stale = False  # a vote was stored since the totals were last read
        self._refresher: asyncio.Task[None] | None = None

    def answer_ended(self, request: Request, event: ReplyEvent) -> None:
        """Record an answer's terminal event (any other event, or a rescrape's, is ignored);
        called for each event sent, on the event loop, so it only hands the write over."""
        if request.type != "ask" or event.type not in TERMINAL_TYPES or self._closed:
            return
        record = AnswerRecord(
            session_id=request.session_id,
            outcome=event.type,
            sources=event.sources if isinstance(event, Done) else (),
            platform=request.platform,
            finished_at=time.time(),
        )
        self._thread.submit(self.store.record_answer, record).add_done_callback(_log_failure)

    async def on_feedback(self, envelope: Envelope[Feedback]) -> None:
        """Store a vote, then acknowledge it; a write that fails is handed back once (a
        locked or full disk may recover), then dropped with a log line."""
        feedback = envelope.message
        try:
            await self._run(
                self.store.vote,
                feedback.session_id,
                feedback.user_id,
                feedback.vote,
                feedback.platform,
                feedback.sent_at,
            )
        except Exception as error:  # unacknowledged, it would hold a prefetch slot for good
            log.warning("vote on %s not stored: %s", feedback.session_id, error)
            await (envelope.ack() if envelope.redelivered else envelope.requeue())
            return
        await envelope.ack()
        log.info("vote %s on %s", feedback.vote, feedback.session_id)
        self._stale = True
        if self._refresher is None or self._refresher.done():
            self._refresher = asyncio.create_task(self._refresh_while_stale())

    async def _refresh_while_stale(self) -> None:
        while self._stale:
            self._stale = False
            await self.show_totals()

    async def show_totals(self) -> None:
        """Set the vote gauges to the database's totals (at start, and after each vote)."""
        try:
            totals = await self._run(self.store.totals)
        except (sqlite3.Error, OSError, RuntimeError) as error:
            log.warning("vote totals not read: %s", error)
            return
        self.metrics.show_votes(totals)

    async def close(self) -> None:
        """Finish the writes handed over, then close the file."""
        if self._closed:
            return
        if self._refresher is not None:
            await self._refresher
        self._closed = True
        try:
            await self._run(self.store.close)  # on the thread that opened it
        finally:
            await asyncio.to_thread(self._thread.shutdown, wait=True)

    async def _run(self, func: Callable[..., T], *args: object) -> T:
        """Run ``func`` on the writer thread, after the writes handed over before it."""
        return await asyncio.wrap_future(self._thread.submit(func, *args))


def _log_failure(done: Future[None]) -> None:
    if (error := done.exception()) is not None:
        log.warning("answer not recorded in the feedback database: %s", error)
