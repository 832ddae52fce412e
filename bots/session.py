"""One question/answer exchange as the bot sees it: its request and the events that come back."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from broker.protocol import ReplyEvent, Request


class ReplyTimeout(Exception):
    """No event came back within the reply timeout."""


@dataclass(frozen=True)
class StopRequested:
    """Local marker: the user asked to stop (the cancel was published)."""

    user_id: str


SessionItem = ReplyEvent | StopRequested


@dataclass
class Session:
    """Events for one request, in arrival order, read by exactly one consumer (the renderer)."""

    request: Request
    timeout_s: float
    queued_ahead: int = 0
    created_at: float = field(default_factory=time.monotonic)
    items: asyncio.Queue[SessionItem] = field(default_factory=asyncio.Queue)

    @property
    def session_id(self) -> str:
        return self.request.session_id

    @property
    def user_id(self) -> str:
        return self.request.user_id

    async def next_item(self, timeout_s: float | None = None) -> SessionItem:
        """The next event; ``ReplyTimeout`` after ``timeout_s`` (default: the reply timeout)."""
        wait_s = self.timeout_s if timeout_s is None else timeout_s
        try:
            return await asyncio.wait_for(self.items.get(), wait_s)
        except TimeoutError:
            raise ReplyTimeout(f"no reply within {wait_s:g} s") from None

    async def __aiter__(self) -> AsyncIterator[SessionItem]:
        while True:
            yield await self.next_item()


class SessionRegistry:
    """Sessions this bot process is waiting on, by session id."""

    def __init__(self) -> None:
        self._sessions: dict[str, Session] = {}

    def add(self, session: Session) -> None:
        self._sessions[session.session_id] = session

    def get(self, session_id: str) -> Session | None:
        return self._sessions.get(session_id)

    def remove(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def deliver(self, event: ReplyEvent) -> bool:
        """Hand an event to its session; False if nobody here waits for it any more."""
        session = self._sessions.get(event.session_id)
        if session is None:
            return False
        session.items.put_nowait(event)
        return True

    def count_for_user(self, user_id: str) -> int:
        return sum(1 for session in self._sessions.values() if session.user_id == user_id)

    def __len__(self) -> int:
        return len(self._sessions)
