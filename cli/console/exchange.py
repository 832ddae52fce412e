"""One request as the console sees it, its outcome, and the rows the page shows of them.

Pure: no I/O. ``ConsoleState`` (``state.py``) keeps these in order; the page gets the rows.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from broker.protocol import Request

QUESTION_CHARS = 160  # of a question, shown in the queue


@dataclass
class Exchange:
    """One request the console saw, from its copy (or from its events alone)."""

    session_id: str
    kind: str = "ask"
    space: str | None = None  # from its copy; None: known from its events alone
    platform: str = ""
    asker: str = ""
    question: str = ""
    reply_to: str = ""
    sent_at: float | None = None  # the asker's clock (Unix seconds)
    deadline: float | None = None
    stop_by: str | None = None  # who asked to stop it (a cancel's user id)
    started_at: float | None = None  # when the console saw it start (its own clock)
    waited_s: float | None = None  # as the engine measured it
    text: str = ""
    tokens: int = 0
    first_token_at: float | None = None
    last_token_at: float | None = None
    progress: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, request: Request) -> Exchange:
        return cls(
            session_id=request.session_id,
            kind=request.type,
            space=request.space,
            platform=request.platform,
            asker=request.user_id,
            question=_short(request.question),
            reply_to=request.reply_to,
            sent_at=request.sent_at,
            deadline=request.deadline,
        )

    def live_tokens_per_s(self) -> float | None:
        """Tokens after the first over the time since it: the rate the asker sees now."""
        if self.first_token_at is None or self.last_token_at is None or self.tokens < 2:
            return None
        span = self.last_token_at - self.first_token_at
        return round((self.tokens - 1) / span, 1) if span > 0 else None


@dataclass(frozen=True)
class Outcome:
    """How a request ended, as the page lists it among the last ones."""

    session_id: str
    kind: str
    space: str | None
    platform: str
    asker: str
    question: str
    outcome: str  # done, stopped, expired, failed
    ended_at: float
    waited_s: float | None
    tokens: int
    tokens_per_s: float | None
    elapsed_s: float | None
    detail: str  # why it failed or expired, who stopped it, or a rescrape's summary


def _short(question: str) -> str:
    question = " ".join(question.split())
    return question if len(question) <= QUESTION_CHARS else question[: QUESTION_CHARS - 1] + "…"


def waiting_row(exchange: Exchange, position: int, now: float) -> dict[str, Any]:
    waited = now - exchange.sent_at if exchange.sent_at is not None else None
    return {
        "session_id": exchange.session_id,
        "position": position,
        "kind": exchange.kind,
        "space": exchange.space,
        "platform": exchange.platform,
        "asker": exchange.asker,
        "question": exchange.question,
        "waited_s": round(max(0.0, waited), 1) if waited is not None else None,
        "stop_by": exchange.stop_by,
    }


def running_row(exchange: Exchange, now: float) -> dict[str, Any]:
    return {
        "session_id": exchange.session_id,
        "kind": exchange.kind,
        "space": exchange.space,
        "platform": exchange.platform,
        "asker": exchange.asker,
        "question": exchange.question,
        "waited_s": exchange.waited_s,
        "running_s": round(now - exchange.started_at, 1) if exchange.started_at else None,
        "text": exchange.text,
        "tokens": exchange.tokens,
        "tokens_per_s": exchange.live_tokens_per_s(),
        "progress": exchange.progress,
        "stop_by": exchange.stop_by,
    }


def outcome_row(outcome: Outcome) -> dict[str, Any]:
    return asdict(outcome)
