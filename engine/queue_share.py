"""What waits in the request queue, by space: ``/healthz``'s ``spaces.NAME.waiting``.

A broker counts a queue's messages but does not say what they are without handing them out.
Two facts give the rest. The engine taps a copy of every message published to the request
queue (``Broker.tap``, as the web console does), in the order the queue gets them. And a FIFO
queue loses messages at its head only, whatever takes them: a delivery to this engine or
another, a time to live that runs out (a classic queue drops an expired message once it
reaches the head), the startup purge. So the ``n`` messages the broker counts are the last
``n`` copies seen: right with several engines too, each counting for itself. A message
published again (the purge's kept requests, one whose engine died) moves to the end, as in
the queue. Those the broker counts beyond the copies seen were queued while the engine could
not see them (before it started, unless its purge published them again; while its connection
was down): their space is unknown.

Of the last ``n``, a request cancelled (the engine's ``cancelled_sessions``, fed by its cancel
queue) or past its deadline will never be answered, and is not counted, though it holds its
place until the engine (or its time to live) takes it out; a cancel put in the request queue,
or a message that is not protocol, holds a place and counts nowhere.

A figure may be one off for a moment: a request published between the broker's count and the
arrival of its copy shifts the window by one. A request the queue refused (full) was copied
all the same: it counts until its deadline.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Container
from dataclasses import dataclass

from broker.amqp import Broker
from broker.protocol import REQUEST_ROUTING_KEY, ProtocolError, decode_request
from broker.taps import TAP_MAX_LENGTH, TAP_PREFETCH, Copy

log = logging.getLogger(__name__)

# Copies kept beyond the broker's count: those that may still be on their way when it is read.
KEPT_BEYOND = TAP_PREFETCH
COUNT_TIMEOUT_S = 2.0  # a /healthz never waits long on a slow broker


@dataclass(frozen=True)
class Queued:
    """A copy of what was published to the request queue: a request, or a place holder."""

    key: str  # a request's session id; a place holder's own
    space: str | None  # None: not a request, counted in no space
    deadline: float = float("inf")


@dataclass(frozen=True)
class Waiting:
    """The requests waiting now: by space, and how many of a space the engine cannot know."""

    by_space: Counter[str]
    unknown: int


class QueueShare:
    """The copies of what was published to the request queue, oldest first."""

    def __init__(self, cancelled: Container[str], clock: Callable[[], float] = time.time) -> None:
        self._cancelled = cancelled
        self._clock = clock
        self._seen: dict[str, Queued] = {}  # dicts keep their order

    async def on_copy(self, copy: Copy) -> None:
        """A message published to the request queue, as its tap hands it over. A cancel put
        there (the FIFO trap), or a message that is not protocol (dead-lettered once it
        reaches the head), holds a place in no space."""
        if copy.type != "cancel":
            try:
                request = decode_request(copy.body, copy.content_type)
            except ProtocolError:
                pass
            else:
                self._add(Queued(request.session_id, request.space, request.deadline))
                return
        self._add(Queued(uuid.uuid4().hex, None))

    def _add(self, queued: Queued) -> None:
        self._seen.pop(queued.key, None)  # published again: now at the end
        self._seen[queued.key] = queued
        if len(self._seen) > TAP_MAX_LENGTH:  # never read: keep it bounded all the same
            del self._seen[next(iter(self._seen))]

    def lost(self) -> None:
        """The tap's connection dropped: what was published meanwhile was not copied, so the
        copies seen no longer end the queue. Forget them: the queue's head becomes unknown."""
        self._seen.clear()

    def waiting(self, messages: int) -> Waiting:
        """Split the broker's count of waiting ``messages`` by space (the module says how),
        and forget the copies of what the queue no longer holds."""
        seen = list(self._seen.values())
        window = seen[max(0, len(seen) - messages) :] if messages else []
        now = self._clock()
        by_space = Counter(
            queued.space
            for queued in window
            if queued.space is not None
            and queued.deadline >= now
            and queued.key not in self._cancelled
        )
        for gone in seen[: max(0, len(seen) - messages - KEPT_BEYOND)]:
            del self._seen[gone.key]
        return Waiting(by_space, max(0, messages - len(window)))


async def watch_queue(
    broker: Broker, cancelled: Container[str], engine_name: str
) -> Callable[[], Waiting | None]:
    """Tap copies of the request queue's messages on a queue of this engine's own (exclusive,
    deleted with its connection), and return what ``SpacesReport.read`` calls. Call it before
    the startup purge, so that the requests it keeps, published again, are seen."""
    share = QueueShare(cancelled)
    names = broker.names
    queue = f"{names.prefix}.engine.{engine_name}.{uuid.uuid4().hex[:8]}.queued"
    tap = await broker.tap(
        names.request_exchange, queue, share.on_copy, routing_keys=[REQUEST_ROUTING_KEY]
    )
    tap.when_lost(share.lost)
    return reading_waiting(broker, share, asyncio.get_running_loop())


def reading_waiting(
    broker: Broker, share: QueueShare, loop: asyncio.AbstractEventLoop
) -> Callable[[], Waiting | None]:
    """``SpacesReport.read`` runs in a thread (it reads knowledge bases from disk): the
    broker's count is read on the engine's own loop. None when it cannot be read now."""

    async def read() -> Waiting | None:
        try:
            messages = await asyncio.wait_for(broker.request_queue_depth(), COUNT_TIMEOUT_S)
        except Exception as error:  # the report still answers, without the figure
            log.debug("request queue not counted: %s", error)
            return None
        return share.waiting(messages)

    def blocking() -> Waiting | None:
        if _running_loop() is loop:  # never block the loop on a coroutine it must run
            return None
        try:
            return asyncio.run_coroutine_threadsafe(read(), loop).result(COUNT_TIMEOUT_S + 1.0)
        except TimeoutError:  # the loop itself is slow to run it
            return None

    return blocking


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
