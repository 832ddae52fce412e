"""Small helpers the tests share: collecting a session's events until it ends."""

from __future__ import annotations

from bots.session import Detached, Session, StopRequested
from broker.protocol import TERMINAL_TYPES, ReplyEvent, TokenEvent


async def collect(session: Session, timeout_s: float = 60.0) -> list[ReplyEvent]:
    """Every reply event of ``session`` up to and including its terminal event."""
    events: list[ReplyEvent] = []
    while True:
        item = await session.next_item(timeout_s)
        if isinstance(item, StopRequested | Detached):
            continue
        events.append(item)
        if item.type in TERMINAL_TYPES:
            return events


async def wait_for_tokens(
    session: Session, count: int, timeout_s: float = 60.0
) -> list[ReplyEvent]:
    """Events up to the ``count``-th token (the session keeps the rest)."""
    events: list[ReplyEvent] = []
    tokens = 0
    while tokens < count:
        item = await session.next_item(timeout_s)
        assert not isinstance(item, StopRequested | Detached)
        assert item.type not in TERMINAL_TYPES, f"ended early: {item}"
        events.append(item)
        tokens += item.tokens if isinstance(item, TokenEvent) else 0
    return events


def token_text(events: list[ReplyEvent]) -> str:
    return "".join(event.text for event in events if isinstance(event, TokenEvent))
