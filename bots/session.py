"""One question/answer exchange as the bot sees it: its request and the events that come back."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from cachetools import LRUCache

from broker.protocol import TERMINAL_TYPES, Expired, ReplyEvent, Request, Started
from config.errors import ConciergeError
from config.texts import Locale, t


class ReplyTimeout(ConciergeError):
    """No event came back within the reply timeout."""


@dataclass(frozen=True)
class StopRequested:
    """Local marker: the user asked to stop (the cancel was published)."""

    user_id: str


@dataclass(frozen=True)
class Detached:
    """Local marker: this bot process is leaving; the exchange goes on for its successor."""


SessionItem = ReplyEvent | StopRequested | Detached

ENDED_REMEMBERED = 1000  # ids of ended sessions kept, so a late event is not taken over
# How long past its deadline a request nobody took ends here as expired: a running engine
# says so itself first; with none running, nobody else would.
LOCAL_EXPIRY_GRACE_S = 3.0


@dataclass
class Session:
    """Events for one exchange, in arrival order, read by exactly one consumer (the renderer).

    ``request`` is what this process published; it is None for an exchange taken over from
    before a restart (known only from the ``context`` its events echo).
    """

    session_id: str
    user_id: str
    timeout_s: float
    kind: Literal["ask", "rescrape"] = "ask"
    request: Request | None = None
    queued_ahead: int = 0
    history_cut: bool = False  # older messages of its conversation were left out of the request
    engines: int | None = None  # consumers of the request queue when asked; 0: none running
    locale: Locale = "en"  # of the bot's own texts for this exchange (the asker's)
    taken: bool = False  # an event came from the engine: it has the request
    created_at: float = field(default_factory=time.monotonic)
    items: asyncio.Queue[SessionItem] = field(default_factory=asyncio.Queue)
    # The acknowledgement of its terminal event, held until the session is forgotten (shown):
    # a process that dies before then leaves the event in its queue for the next one.
    held_ack: Callable[[], Awaitable[None]] | None = None
    # The place of the last event handed on, (attempt, seq): after a broker outage the engine
    # may publish an event again that already came (its confirmation was lost): dropped here.
    last_seen: tuple[int, int] = (0, -1)

    def is_new(self, event: ReplyEvent) -> bool:
        """Whether ``event`` comes after every event handed on: an answer begun again
        (``started`` with a higher ``attempt``) counts ``seq`` from 0 again. A terminal event
        always is: the engine sends one with ``seq`` 0 for a request it sets aside or refuses
        after an earlier attempt, and a second terminal event is ignored by the renderer."""
        if event.type in TERMINAL_TYPES:
            return True
        attempt = event.attempt if isinstance(event, Started) else self.last_seen[0] or 1
        place = (attempt, event.seq)
        if place <= self.last_seen:
            return False
        self.last_seen = place
        return True

    @classmethod
    def for_request(cls, request: Request, timeout_s: float) -> Session:
        return cls(request.session_id, request.user_id, timeout_s, request.type, request)

    async def next_item(self, timeout_s: float | None = None) -> SessionItem:
        """The next event; ``ReplyTimeout`` after ``timeout_s`` (default: the reply timeout).

        A request no engine took by its deadline ends as ``Expired``, made here.
        """
        wait_s = self.timeout_s if timeout_s is None else timeout_s
        expires_in_s = self._expires_in_s()
        try:
            item = await asyncio.wait_for(self.items.get(), min(wait_s, expires_in_s))
        except TimeoutError:
            if expires_in_s <= wait_s:
                return self._expired_here()
            raise ReplyTimeout(f"no reply within {wait_s:g} s") from None
        self.taken = self.taken or not isinstance(item, StopRequested | Detached)
        return item

    def ready_item(self) -> SessionItem | None:
        """The next event if it has already arrived, else None: without waiting. A renderer
        folds in all that has arrived before an edit, so the edit shows the newest state (a
        stop confirmed while its last edit was held, behind the tokens that came meanwhile)."""
        if self.items.empty():
            return None
        item = self.items.get_nowait()
        self.taken = self.taken or not isinstance(item, StopRequested | Detached)
        return item

    def _expires_in_s(self) -> float:
        """Until the local expiry; infinite once an engine has the request (or it is unknown)."""
        if self.taken or self.request is None:
            return math.inf
        return max(0.0, self.request.deadline + LOCAL_EXPIRY_GRACE_S - time.time())

    def _expired_here(self) -> Expired:
        """The ``expired`` event no engine sent (none ran, or none reached the request)."""
        assert self.request is not None
        ttl_s = self.request.deadline - self.request.sent_at
        return Expired(
            session_id=self.session_id,
            seq=0,
            context=self.request.context,
            reason=t("expired.no_engine", self.locale, ttl_s=f"{ttl_s:g}"),
        )

    async def __aiter__(self) -> AsyncIterator[SessionItem]:
        while True:
            yield await self.next_item()


class SessionRegistry:
    """Sessions this bot process is waiting on, by session id."""

    def __init__(self) -> None:
        self._sessions: dict[str, Session] = {}
        self._ended: LRUCache[str, None] = LRUCache(ENDED_REMEMBERED)

    def add(self, session: Session) -> None:
        self._sessions[session.session_id] = session

    def get(self, session_id: str) -> Session | None:
        return self._sessions.get(session_id)

    def remove(self, session_id: str) -> None:
        if self._sessions.pop(session_id, None) is not None:
            self._ended[session_id] = None

    def ended(self, session_id: str) -> bool:
        """Whether this process showed ``session_id`` and has finished with it."""
        return session_id in self._ended

    def all(self) -> list[Session]:
        return list(self._sessions.values())

    def deliver(self, event: ReplyEvent) -> bool:
        """Hand an event to its session; False if nobody here waits for it any more."""
        session = self._sessions.get(event.session_id)
        if session is None:
            return False
        if session.is_new(event):  # one that came already is dropped (and acknowledged)
            session.items.put_nowait(event)
        return True

    def count_for_user(self, user_id: str) -> int:
        return sum(1 for session in self._sessions.values() if session.user_id == user_id)

    def __len__(self) -> int:
        return len(self._sessions)
