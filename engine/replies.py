"""Publishing one session's reply events in order, and relaying tokens from the thread.

An answer in flight outlives a broker outage (the node the engine is connected to stops, or
every connection is closed): generation goes on, and the events the broker could not take are
held (``engine.outbox``: in order, bounded, tokens merged) and published once the connection is
back, so the asker gets each token once and one terminal event, late but in ``seq`` order. An
event whose confirmation was lost with the connection may have reached the asker, or not: it is
sent again, unchanged (nothing merges into it), and an asker drops an event whose ``seq`` it has
had already (docs/protocol.md; ``bots.session.Session.is_new``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from contextlib import suppress
from typing import TypedDict

from broker.amqp import Broker
from broker.errors import BrokerAway
from broker.protocol import (
    TERMINAL_TYPES,
    Cancelled,
    Expired,
    Failed,
    Progress,
    ReplyEvent,
    Request,
    Started,
    TerminalEvent,
    TokenEvent,
)
from config.texts import Locale, t
from engine.outbox import Outbox
from engine.status_feed import StatusCopies

log = logging.getLogger(__name__)

TOKEN_BATCH_S = 0.05  # after the first token, one event per this long (``TokenRelay``)
# How long held events wait for the broker to come back, from the first one held: a robust
# connection is back on another node in a few seconds (a leader election included), and a
# restarted broker in about ten. Past it they are dropped, and the terminal event goes out
# again when the broker redelivers the request (``engine.worker``).
OUTAGE_WAIT_S = 30.0
RETRY_PAUSE_S = 0.25  # between two tries of a held event, the channel open (a nack)

# Why a job ended early, in English (``Replies.locale`` says which language its asker reads);
# ``STOPPED_BY_USER`` is no text: it becomes a Cancelled event.
INTERRUPTED = t("engine.interrupted", "en")
RESTARTED = t("engine.restarted", "en")
STOPPED_BY_USER = "stopped"


class EventHeader(TypedDict):
    """The fields every reply event of one request starts with: ``Done(**header, ...)``."""

    session_id: str
    seq: int
    context: dict[str, str]


class Replies:
    """The reply stream of one request: numbers every event and routes it to the asker.

    One method per event type, so each field is checked where the event is made; ``text`` puts
    a catalogue text in the asker's ``locale``; a terminal event built elsewhere
    (``engine.generation.ending``, ``engine.jobs.rescrape``) takes its ``header()`` and goes out by
    ``send``.
    """

    def __init__(
        self,
        broker: Broker,
        request: Request,
        on_event: Callable[[ReplyEvent], None] | None = None,
        *,
        default_locale: Locale = "en",
        status: StatusCopies | None = None,
    ) -> None:
        self.broker = broker
        self.on_event = on_event  # the engine's metrics and records: see every event sent
        self.status = status  # copies for watchers (the web console), tokens merged
        # The language of the engine's own texts to this asker (progress, reasons): the
        # request's, else the engine's CONCIERGE_LOCALE.
        self.locale: Locale = request.locale or default_locale
        self.session_id = request.session_id
        self.reply_to = request.reply_to
        self.context = request.context  # echoed in every event, for a bot that restarted
        self._seq = 0
        self._send_failed = False
        self.outbox = Outbox()
        self.held = 0  # events that waited in the outbox for the broker
        self.end: TerminalEvent | None = None  # the terminal event, once made
        self.end_delivered = False  # ... and confirmed by the broker
        self._publishing = asyncio.Lock()  # one event at a time, in order
        self._flusher: asyncio.Task[None] | None = None  # publishes what is held, once back
        self._ahead: asyncio.Task[None] | None = None  # ``started``, on its way

    def header(self) -> EventHeader:
        """The header of the next event; send that event before asking for another."""
        header = EventHeader(session_id=self.session_id, seq=self._seq, context=self.context)
        self._seq += 1
        return header

    def text(self, key: str, /, **fields: object) -> str:
        """The catalogue's text ``key`` in this asker's locale."""
        return t(key, self.locale, **fields)

    def started(self, waited_s: float, attempt: int = 1) -> None:
        """Send ``started`` without waiting for the broker's confirm: the job (the search, the
        model) begins meanwhile, and every later event goes out after it. ``attempt`` > 1: an
        engine died answering it; the asker drops the text it has."""
        event = Started(**self.header(), waited_s=waited_s, attempt=attempt)
        self._noted(event)
        self._ahead = asyncio.create_task(self._publish_in_order(event))

    async def tokens(self, text: str, count: int) -> None:
        """``count`` model tokens in ``text``; 0 for text the engine adds (the sources). While
        the broker is away, added to the token event held last (no new ``seq``)."""
        if self.outbox.merge_tokens(text, count) is None:
            await self.send(TokenEvent(**self.header(), text=text, tokens=count))

    async def progress(self, text: str, counts: dict[str, int]) -> None:
        """While the broker is away, put in the place of the progress held last."""
        if self.outbox.replace_progress(text, counts) is None:
            await self.send(Progress(**self.header(), text=text, counts=counts))

    async def cancelled(self, text: str = "") -> None:
        """Stopped before the model ran (or a job without model tokens)."""
        await self.send(Cancelled(**self.header(), text=text))

    async def failed(self, reason: str, text: str = "") -> None:
        await self.send(Failed(**self.header(), reason=reason, text=text))

    async def expired(self, reason: str) -> None:
        await self.send(Expired(**self.header(), reason=reason))

    async def send(self, event: ReplyEvent) -> None:
        """Publish ``event``, made with this stream's ``header()``, after any held ones; held
        if the broker is away. A terminal event waits for what is held to go out (at most
        ``OUTAGE_WAIT_S``): the job ends, and its request is acknowledged, after it."""
        self._noted(event)
        if self._ahead is not None and not self._ahead.done():
            await asyncio.wait({self._ahead})  # ``started`` first; its errors are its own
        await self._publish_in_order(event)

    def _noted(self, event: ReplyEvent) -> None:
        if self.on_event is not None:
            self.on_event(event)
        if isinstance(event, TerminalEvent):
            self.end = event

    async def _publish_in_order(self, event: ReplyEvent) -> None:
        async with self._publishing:
            if self._flusher is not None and not self._flusher.done():
                self._hold(event)  # after what is held: in order
            elif not await self._publish(event):
                self._hold(event)
        if isinstance(event, TerminalEvent) and self._flusher is not None:
            await asyncio.wait({self._flusher})

    async def _publish(self, event: ReplyEvent) -> bool:
        """Publish ``event``; False if the broker is away and certainly does not have it."""
        try:
            await self.broker.events.publish(event, self.reply_to)
        except BrokerAway as away:
            if away.maybe_sent:  # sent again as it is: an asker drops a seq it has had
                self.outbox.seal(event)
            return False
        except Exception as error:  # refused; the asker may be gone: the engine must go on
            level = logging.DEBUG if self._send_failed else logging.WARNING
            log.log(level, "reply not sent: %s", error)
            self._send_failed = True
            return True
        self.end_delivered = self.end_delivered or event.type in TERMINAL_TYPES
        if self.status is not None:
            await self.status.copy(event)
        return True

    async def send_end_again(self) -> None:
        """Publish the terminal event once more, as it was (the request came back after a
        reconnect, its end unconfirmed): held through an outage like any event, and not seen
        again by ``on_event`` (the metrics counted it once)."""
        assert self.end is not None, "only an ended stream's end is sent again"
        async with self._publishing:
            if not await self._publish(self.end):
                self._hold(self.end)
        if self._flusher is not None:
            await asyncio.wait({self._flusher})

    def _hold(self, event: ReplyEvent) -> None:
        """Keep ``event`` for when the broker is back, and see that someone waits for it."""
        self.held += 1
        if not self.outbox.hold(event) and self.outbox.dropped == 1:
            log.warning("reply events dropped: %d held already", self.outbox.max_events)
        if self._flusher is None or self._flusher.done():
            log.warning("the broker is away: reply events held until it is back")
            self._flusher = asyncio.create_task(self._flush())

    async def _flush(self) -> None:
        """Publish the held events in order once the broker is back; each may meet another
        outage. Gives up (drops them, logged) ``OUTAGE_WAIT_S`` after it began."""
        loop = asyncio.get_running_loop()
        give_up_at, sent = loop.time() + OUTAGE_WAIT_S, 0
        while (event := self.outbox.take()) is not None:
            wait_s = max(0.0, give_up_at - loop.time())
            if await self.broker.events.back(wait_s) and await self._publish(event):
                sent += 1
            elif loop.time() >= give_up_at:
                lost = 1 + len(self.outbox.clear())
                log.warning("%d reply event(s) not sent: the broker is still away", lost)
                return
            else:  # the connection went again, stopped answering, or the broker refused
                self.outbox.put_back(event)
                await asyncio.sleep(min(RETRY_PAUSE_S, wait_s))  # a nack again at once: pause
        log.info("%d held reply event(s) sent once the broker was back", sent)


class TokenRelay:
    """Carries tokens from the generation thread to the event loop without ever blocking it.

    ``emit`` runs in the thread: it appends the piece and wakes the loop only if the pump is
    idle. The first piece goes out at once (time to first token); the rest in events of what
    came during the previous ``batch_s``. One event per token woke the event loop, RabbitMQ and
    the reply consumer at every token, and those wake-ups slowed llama.cpp measurably on two
    cores (docs/benchmarks.md, "Streaming"); bots edit their messages far less often than every
    ``batch_s`` anyway.
    """

    def __init__(self, replies: Replies, batch_s: float) -> None:
        self.replies = replies
        self.batch_s = batch_s
        self._loop = asyncio.get_running_loop()
        self._lock = threading.Lock()
        self._pending: list[str] = []
        self._idle = True  # the pump waits for a piece (it is not publishing or pausing)
        self._wake = asyncio.Event()
        self._closing = asyncio.Event()
        self._pump = asyncio.create_task(self._publish_all())

    def emit(self, piece: str) -> None:
        with self._lock:
            self._pending.append(piece)
            wake, self._idle = self._idle, False
        if wake:
            self._loop.call_soon_threadsafe(self._wake.set)

    async def close(self) -> None:
        """Publish what is left, then return (the thread has stopped emitting)."""
        self._closing.set()
        self._wake.set()
        await self._pump

    def cancel(self) -> None:
        """Drop what is left (the answer itself was cancelled)."""
        self._pump.cancel()

    async def _publish_all(self) -> None:
        first = True
        while True:
            await self._wake.wait()
            self._wake.clear()
            while pieces := self._take():
                for batch in self._batches(pieces, first):
                    await self.replies.tokens("".join(batch), len(batch))
                first = False
                with suppress(TimeoutError):  # the pause ends early when the answer does
                    await asyncio.wait_for(self._closing.wait(), self.batch_s)
            if self._closing.is_set():
                return

    def _batches(self, pieces: list[str], first: bool) -> list[list[str]]:
        """The first token alone; then all pending together, or each alone with no batching."""
        if self.batch_s == 0:
            return [[piece] for piece in pieces]
        if first and len(pieces) > 1:
            return [pieces[:1], pieces[1:]]
        return [pieces]

    def _take(self) -> list[str]:
        """What is pending; when nothing is, the pump goes idle (the next piece wakes it)."""
        with self._lock:
            pieces, self._pending = self._pending, []
            self._idle = not pieces
            return pieces
